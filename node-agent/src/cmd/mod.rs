//! The commands: each module turns one subcommand's arguments into work on AWS and Slurm.

mod evict;
mod health;
mod power;
pub mod reconcile;
mod spot;
mod sweep;

use std::path::Path;
use std::process::Command as Process;

use hpc_aws::ec2::Ec2;
use hpc_aws::Aws;
use hpc_desired_state::{
    cluster_param, partitions_path, users_from_shards, users_path, ClusterDoc, PartitionDoc, PoolDoc, UserDoc,
};

use crate::cli::{ClusterArgs, Command};
use crate::error::{Context as _, Error, Result};

/// Runs one command to its end.
pub async fn run(command: &Command, aws: &Aws) -> Result<()> {
    match command {
        Command::Resume(h) => power::resume(h, aws).await,
        Command::Suspend(h) | Command::ResumeFail(h) => power::suspend(h, aws).await,
        Command::Reconcile(r) => reconcile::run(r, aws).await,
        Command::Sweep(c) => sweep::run(c, aws).await,
        Command::Health(h) => health::run(h, aws).await,
        Command::Evict(c) => evict::run(c, aws).await,
        Command::HeadInit(c) => crate::boot::head::run(c, aws).await,
        Command::LoginInit(c) => crate::boot::login::run(c, aws).await,
        Command::NodeInit(n) => crate::boot::node::run(n, aws).await,
        Command::Sync(c) => crate::boot::sync(c, aws).await,
        Command::SpotWatch(s) => spot::watch(s, aws).await,
        Command::StateMount(s) => crate::boot::state::mount_volume(&s.volume).await,
    }
}

/// The cluster's published document (None before the provider published it).
pub async fn cluster_doc(aws: &Aws, cluster: &str) -> Result<Option<ClusterDoc>> {
    match aws.ssm().get(&cluster_param(cluster)).await? {
        Some(p) => serde_json::from_str(&p.value).context(|| p.name.clone()).map(Some),
        None => Ok(None),
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct UsersCache {
    digest: String,
    users: Vec<UserDoc>,
}

/// The cluster's document with its users (see [`fill_users`]; the users last read are kept in
/// the agent's state directory).
pub async fn cluster_doc_with_users(aws: &Aws, args: &ClusterArgs) -> Result<Option<ClusterDoc>> {
    let Some(mut doc) = cluster_doc(aws, &args.cluster).await? else {
        return Ok(None);
    };
    fill_users(aws, &mut doc, Some(&args.state_dir.join("users.json"))).await?;
    Ok(Some(doc))
}

/// Puts the users into `doc` from their shards, read only when the document names other shards
/// than the ones kept in `cache`. Fails while a publication is in progress: the caller reads
/// again.
pub async fn fill_users(aws: &Aws, doc: &mut ClusterDoc, cache: Option<&Path>) -> Result<()> {
    let Some(digest) = doc.users_digest.clone() else {
        return Ok(());
    };
    let cached = cache
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|b| serde_json::from_slice::<UsersCache>(&b).ok())
        .filter(|c| c.digest == digest);
    if let Some(c) = cached {
        doc.users = c.users;
        return Ok(());
    }
    let shards = aws.ssm().list(&users_path(&doc.name)).await?;
    let shards = shards.into_iter().map(|p| (p.name, p.value)).collect();
    doc.users = users_from_shards(doc, &shards).map_err(Error::new)?;
    let kept = UsersCache {
        digest,
        users: doc.users.clone(),
    };
    // Only a cache: without it the shards are read again next time.
    if let (Some(path), Ok(json)) = (cache, serde_json::to_vec(&kept)) {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = crate::host::write_file(path, &json, 0o600, None) {
            crate::host::log("users", &format!("cannot keep the users in {}: {e}", path.display()));
        }
    }
    Ok(())
}

/// The cluster's published partitions.
pub async fn partitions(aws: &Aws, cluster: &str) -> Result<Vec<PartitionDoc>> {
    let params = aws.ssm().list(&partitions_path(cluster)).await?;
    params
        .iter()
        .map(|p| serde_json::from_str(&p.value).context(|| p.name.clone()))
        .collect()
}

/// EC2 in a pool's region, with the agent's credentials.
pub struct Regions {
    pub aws: Aws,
}

impl crate::resume::PoolClients for Regions {
    fn ec2_for(&self, pool: &PoolDoc) -> Ec2 {
        self.ec2_in(&pool.region)
    }
}

impl Regions {
    pub fn ec2_in(&self, region: &str) -> Ec2 {
        if region == self.aws.region {
            self.aws.ec2()
        } else {
            self.aws.ec2_in(region)
        }
    }
}

/// Runs scontrol; a failure is logged, not fatal (Slurm retries what it asked for).
pub fn scontrol(args: &[String]) {
    match Process::new("scontrol").args(args).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("hpc-node: scontrol {} exited with {s}", args.join(" ")),
        Err(e) => eprintln!("hpc-node: cannot run scontrol: {e}"),
    }
}

/// slurmctld's one-line record of a node (None when scontrol cannot say).
fn show_node(node: &str) -> Option<String> {
    let out = Process::new("scontrol")
        .args(["show", "node", node, "-o"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Slurm's state of a node, e.g. `IDLE+CLOUD+POWERING_UP` (None when scontrol cannot say).
pub fn slurm_state(node: &str) -> Option<String> {
    show_node(node)?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("State="))
        .map(str::to_string)
}

/// Why Slurm set a node down or drained it (its `Reason`, the last field of the record).
pub fn slurm_reason(node: &str) -> Option<String> {
    let record = show_node(node)?;
    let start = record.find(" Reason=")? + " Reason=".len();
    Some(record[start..].trim().to_string())
}
