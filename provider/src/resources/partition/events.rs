//! The partition's EC2 event routes: in each region of its pools, EC2's spot interruption
//! warnings and its notices of instances stopping or ending go to a queue that the head
//! node's agent reads. The agent then powers the node down at once, so Slurm requeues its jobs
//! now rather than when slurmd stops answering (see `hpc-node events`).

use std::collections::BTreeSet;

use super::model::Partition;
use crate::clients::Clients;
use crate::desired_state;

/// The regions of the partition's pools (a pool without one is in the provider's).
pub(super) fn regions(clients: &Clients, model: &Partition) -> BTreeSet<String> {
    model
        .capacity_pool
        .iter()
        .map(|p| p.region.clone().unwrap_or_else(|| clients.aws.region.clone()))
        .collect()
}

/// Makes (or completes) the route in each region of the partition's pools.
pub(super) async fn ensure(clients: &Clients, model: &Partition, tags: &[(String, String)]) -> hpc_aws::Result<()> {
    let base = desired_state::events_route(model.cluster(), &model.name);
    let about = format!("hpcforge cluster {} partition {}", model.cluster(), model.name);
    for region in regions(clients, model) {
        clients.aws.events_in(&region).ensure_route(&base, &about, tags).await?;
    }
    Ok(())
}

/// Removes the partition's routes in `regions` (what is already gone is skipped).
pub(super) async fn remove(
    clients: &Clients,
    cluster: &str,
    partition: &str,
    regions: impl IntoIterator<Item = String>,
) -> hpc_aws::Result<()> {
    let base = desired_state::events_route(cluster, partition);
    for region in regions {
        clients.aws.events_in(&region).delete_route(&base).await?;
    }
    Ok(())
}
