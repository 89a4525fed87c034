//! `hpc-image cache list|prune`: the local builder's layer cache.

use std::time::Duration;

use super::{cache_dir, Result};
use crate::cli::{CacheAction, CacheArgs};
use crate::local::Cache;

pub fn run(args: &CacheArgs) -> Result<()> {
    let cache = Cache {
        dir: cache_dir(args.cache_dir.as_ref()),
    };
    match &args.action {
        CacheAction::List => {
            let layers = cache.list();
            let total: u64 = layers.iter().map(|(l, _)| l.bytes).sum();
            for (l, _) in &layers {
                println!(
                    "{}  {:>8} MiB  {}",
                    &l.key[..16.min(l.key.len())],
                    l.bytes >> 20,
                    l.step
                );
            }
            println!(
                "{} layer(s), {} MiB in {}",
                layers.len(),
                total >> 20,
                cache.dir.display()
            );
        }
        CacheAction::Prune { older_than, all } => {
            let older = if *all {
                Duration::ZERO
            } else {
                older_than.unwrap_or(Duration::MAX)
            };
            let (n, bytes) = cache.prune(older);
            println!("removed {n} layer(s), {} MiB", bytes >> 20);
        }
    }
    Ok(())
}
