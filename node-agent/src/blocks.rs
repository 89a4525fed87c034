//! Partitions whose every capacity pool is a Capacity Block are usable only while one of their
//! blocks is active, as in ParallelCluster: outside every block's window the partition's nodes
//! sit in a Slurm maintenance reservation, so jobs wait (`ReqNodeNotAvail, Reserved for
//! maintenance`) instead of resuming nodes no pool can launch; the reservation goes when a
//! block starts. The reconcile loop keeps it (every pass, after the configuration).

use std::path::Path;

use hpc_aws::Aws;
use hpc_desired_state::PartitionDoc;

use crate::resume::PoolClients as _;

/// The Slurm reservation that holds a partition's nodes while none of its blocks is active.
pub fn reservation_name(partition: &str) -> String {
    format!("hpcforge-block-{partition}")
}

/// Partitions that launch only into Capacity Blocks.
pub fn block_only(parts: &[PartitionDoc]) -> impl Iterator<Item = &PartitionDoc> {
    parts.iter().filter(|p| {
        !p.pools.is_empty()
            && p.pools
                .iter()
                .all(|pool| pool.capacity_type == "capacity_block" && pool.capacity_reservation_id.is_some())
    })
}

/// Whether one of the partition's blocks is active now (EC2's state of each, in its region).
pub async fn any_active(aws: &Aws, part: &PartitionDoc) -> Result<bool, String> {
    let regions = crate::cmd::Regions { aws: aws.clone() };
    for pool in &part.pools {
        let Some(id) = &pool.capacity_reservation_id else {
            continue;
        };
        let found = regions
            .ec2_for(pool)
            .capacity_reservations(std::slice::from_ref(id))
            .await
            .map_err(|e| e.to_string())?;
        if found.iter().any(|r| r.state == "active") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What to do with a partition's hold, from whether a block is active and the hold exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Create,
    Delete,
}

pub fn hold_action(active: bool, held: bool) -> Option<Hold> {
    match (active, held) {
        (false, false) => Some(Hold::Create),
        (true, true) => Some(Hold::Delete),
        _ => None,
    }
}

/// Creates or deletes the partition's hold as `active` says; returns what it did.
pub fn keep(conf: &Path, part: &PartitionDoc, active: bool) -> Result<Option<String>, String> {
    let name = reservation_name(&part.name);
    let held = scontrol(conf, &["show".into(), format!("reservationname={name}")]).is_ok();
    match hold_action(active, held) {
        None => Ok(None),
        Some(Hold::Delete) => {
            scontrol(conf, &["delete".into(), format!("reservationname={name}")])?;
            Ok(Some(format!(
                "a Capacity Block of {} is active: released its nodes",
                part.name
            )))
        }
        Some(Hold::Create) => {
            let nodes: Vec<String> = part.to_model().node_sets.iter().map(|s| s.hostlist()).collect();
            scontrol(
                conf,
                &[
                    "create".into(),
                    "reservation".into(),
                    format!("reservationname={name}"),
                    format!("nodes={}", nodes.join(",")),
                    "starttime=now".into(),
                    "duration=infinite".into(),
                    "users=root".into(),
                    "flags=maint,ignore_jobs".into(),
                ],
            )?;
            Ok(Some(format!(
                "no Capacity Block of {} is active: its nodes are held in reservation {name}",
                part.name
            )))
        }
    }
}

fn scontrol(conf: &Path, args: &[String]) -> Result<String, String> {
    crate::host::slurm_client("scontrol", conf, args)
}

/// One pass over every block-only partition; problems are logged, never fatal (the next pass
/// tries again).
pub async fn keep_all(aws: &Aws, conf: &Path, parts: &[PartitionDoc]) {
    for part in block_only(parts) {
        let done = match any_active(aws, part).await {
            Ok(active) => keep(conf, part, active),
            Err(e) => Err(format!("describing the Capacity Blocks of {}: {e}", part.name)),
        };
        match done {
            Ok(Some(what)) => crate::host::log("capacity-block", &what),
            Ok(None) => {}
            Err(e) => crate::host::log("capacity-block", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_follows_the_blocks() {
        assert_eq!(hold_action(false, false), Some(Hold::Create));
        assert_eq!(hold_action(false, true), None);
        assert_eq!(hold_action(true, true), Some(Hold::Delete));
        assert_eq!(hold_action(true, false), None);
    }
}
