//! `hpc-image publish`: a disk a build wrote, uploaded and registered as the template says.

use std::path::{Path, PathBuf};

use super::{connect, load, local_source, manifest_for, write_json, Error, Result};
use crate::cli::PublishArgs;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::publish::{self, PublishReport};

pub async fn run(args: &PublishArgs) -> Result<()> {
    let (_t, plan) = load(&args.template)?;
    let disk = &args.disk;
    if !disk.is_file() {
        return Err(Error(format!(
            "{} does not exist: build it first with hpc-image build",
            disk.display()
        )));
    }
    let log = args.log_file.clone().unwrap_or_else(|| beside(disk, "publish.log"));
    let mut progress = Progress::new(&log, false).map_err(|e| Error(format!("{}: {e}", log.display())))?;
    publish_disk(&plan, &local_source(&plan), disk, args.manifest.as_ref(), &mut progress)
        .await
        .map(|_| ())
}

fn beside(disk: &Path, name: &str) -> PathBuf {
    disk.parent().unwrap_or(Path::new(".")).join(name)
}

/// The Slurm version in the build report written beside `disk` (None: no report, or no Slurm).
fn built_slurm_version(disk: &Path) -> Option<String> {
    let report = std::fs::read(disk.with_file_name("build-report.json")).ok()?;
    let report: serde_json::Value = serde_json::from_slice(&report).ok()?;
    report["slurm_version"].as_str().map(str::to_string)
}

/// Publishes `disk` (built from `source`) and writes the manifest (`manifest`, or beside it).
pub(super) async fn publish_disk(
    plan: &Plan,
    source: &str,
    disk: &Path,
    manifest: Option<&PathBuf>,
    progress: &mut Progress,
) -> Result<PublishReport> {
    let cfg = plan
        .publish
        .as_ref()
        .ok_or("the template has no publish block: add publish { ami_name = ... regions = [...] }")?;
    let t = progress.step(
        1,
        1,
        &format!("publishing {} to {}", cfg.ami_name, cfg.regions.join(", ")),
    );
    let aws = connect(&cfg.regions[0]).await?;
    // The image's Slurm, as the build that wrote the disk found it, goes on the AMI: the
    // provider refuses at plan a cluster whose slurm.version differs.
    let mut cfg = cfg.clone();
    if let Some(version) = built_slurm_version(disk) {
        progress.say(&format!(
            "Slurm {version} (tag {})",
            hpc_desired_state::SLURM_VERSION_TAG
        ));
        cfg.tags.insert(hpc_desired_state::SLURM_VERSION_TAG.into(), version);
    }
    let mut lines = Vec::new();
    let result = publish::publish(&aws, &cfg, Some(disk), &plan.template_sha256, &mut |l: &str| {
        lines.push(l.to_string())
    })
    .await;
    for l in lines {
        progress.say(&l);
    }
    let report = result.map_err(|e| Error(e.to_string()))?;
    progress.done("published", t);
    let path = manifest.cloned().unwrap_or_else(|| beside(disk, "manifest.json"));
    write_json(&path, &manifest_for(plan, source, "local", &cfg.ami_name, &report))?;
    progress.say(&format!("manifest: {}", path.display()));
    Ok(report)
}
