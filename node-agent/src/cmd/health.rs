//! `hpc-node health`: Slurm's HealthCheckProgram. Checks this node against its partition's
//! shape and the cluster's mounts; a failing node is drained with the problems as the reason.

use hpc_aws::Aws;

use super::scontrol;
use crate::cli::HealthArgs;
use crate::error::{Error, Result};
use crate::published::{cluster_doc, partitions};
use crate::resume::group_nodes;

pub async fn run(args: &HealthArgs, aws: &Aws) -> Result<()> {
    let node = &args.node;
    let cluster = &args.cluster.cluster;
    let docs = partitions(aws, cluster).await?;
    let (groups, _) = group_nodes(&docs, std::slice::from_ref(node));
    let group = groups
        .first()
        .ok_or_else(|| Error::new(format!("{node} is not a node of cluster {cluster}")))?;
    let shape = docs
        .iter()
        .find(|d| d.name == group.partition)
        .and_then(|d| d.shapes.iter().find(|s| s.instance_type == group.instance_type))
        .ok_or_else(|| Error::new(format!("no shape for {node}")))?;
    let mounts = cluster_doc(aws, cluster)
        .await?
        .map(|d| d.shared_mount_points())
        .unwrap_or_default();
    let problems = crate::health::check(shape, &mounts, &crate::health::System);
    if problems.is_empty() {
        return Ok(());
    }
    let reason = format!("hpc-node health: {}", problems.join("; "));
    eprintln!("hpc-node: draining {node}: {reason}");
    scontrol(&[
        "update".into(),
        format!("nodename={node}"),
        "state=drain".into(),
        format!("reason={reason}"),
    ]);
    Err(Error::new(reason))
}
