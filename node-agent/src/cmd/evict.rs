//! `hpc-node evict`: Lustre release policies on the head node.

use std::process::Command;

use hpc_aws::Aws;

use crate::cli::ClusterArgs;
use crate::error::{Context as _, Error, Result};
use crate::published::cluster_doc;

/// How full the file system holding `path` is, in percent (from df).
fn usage_percent(path: &str) -> Result<i64> {
    let out = Command::new("df")
        .args(["--output=pcent", path])
        .output()
        .context(|| "df".to_string())?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().trim_end_matches('%').parse().ok())
        .ok_or_else(|| Error::new(format!("df gave no usage for {path}")))
}

/// Lustre eviction: for each mounted file system with a release policy (tags set by
/// hpc_lustre_fs), when usage passes the threshold, start a task that releases files not
/// accessed for the policy's days from the file system (they stay in S3).
pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    if crate::controller::standing_by("evict") {
        return Ok(());
    }
    let Some(doc) = cluster_doc(aws, &args.cluster).await? else {
        return Err(Error::new(format!(
            "cluster {} has no published desired state",
            args.cluster
        )));
    };
    let fsx = aws.fsx();
    for mount in doc.mounts.iter() {
        let Some(id) = &mount.lustre_id else { continue };
        let Some(fs) = fsx.find_lustre(id).await? else {
            eprintln!("hpc-node: {id} ({}) no longer exists", mount.mount_point);
            continue;
        };
        let tags = fs.spec.tags.clone().unwrap_or_default();
        let tag = |k: &str| {
            tags.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.parse::<i64>().ok())
        };
        let Some(days) = tag(hpc_desired_state::tag::RELEASE_UNACCESSED_DAYS) else {
            continue;
        };
        let threshold = tag(hpc_desired_state::tag::RELEASE_USAGE_PERCENT).unwrap_or(80);
        if !crate::health::Probe::mounted(&crate::health::System, &mount.mount_point) {
            eprintln!("hpc-node: {id} is not mounted at {}; not releasing", mount.mount_point);
            continue;
        }
        let used = usage_percent(&mount.mount_point)?;
        if used < threshold {
            eprintln!("hpc-node: {id} at {used}% (release above {threshold}%): nothing to do");
            continue;
        }
        let dras = fsx.list_data_repositories(id).await?;
        let mut paths: Vec<String> = dras.iter().filter_map(|d| d.spec.file_system_path.clone()).collect();
        if paths.is_empty() {
            paths.push("/".into());
        }
        let task = fsx.start_release_task(id, &paths, days).await?;
        eprintln!(
            "hpc-node: {id} at {used}% (release above {threshold}%): task {task} releases files unused for {days} days under {}",
            paths.join(", ")
        );
    }
    Ok(())
}
