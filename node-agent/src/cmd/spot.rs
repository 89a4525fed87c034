//! `hpc-node spot-watch`: a spot node's watch for EC2's interruption notice.
//!
//! EC2 gives a spot instance two minutes' notice on its metadata (`spot/instance-action`)
//! before it stops or ends it. On the notice the node tells slurmctld to power it down at once
//! (`POWER_DOWN_FORCE`): Slurm requeues the jobs running there (they start again on another
//! node, which resume launches), runs SuspendProgram (the instance ends now rather than at EC2's
//! time) and keeps the node name free for the next launch. The reason names the notice, so
//! `sinfo -R` and the sweep see why.

use std::path::Path;
use std::time::Duration;

use hpc_aws::Aws;

use crate::boot::node::LOOKUP_CONF;
use crate::cli::SpotWatchArgs;
use crate::error::{Error, Result};
use crate::host::log;

/// The reason slurmctld records for a node whose spot instance got its notice.
pub const REASON_PREFIX: &str = "spot interruption";

pub async fn watch(args: &SpotWatchArgs, aws: &Aws) -> Result<()> {
    log(
        "spot-watch",
        &format!("watching for an interruption notice for {}", args.node),
    );
    loop {
        match hpc_aws::imds::spot_notice(aws).await {
            Ok(Some(notice)) => return act(&args.node, &notice),
            Ok(None) => {}
            // The metadata service can hiccup; a watch that gives up would miss the notice.
            Err(e) => log("spot-watch", &format!("{e}; trying again")),
        }
        tokio::time::sleep(Duration::from_secs(args.interval)).await;
    }
}

/// The reason for `scontrol`, from the notice's JSON (`{"action":"terminate","time":"..."}`).
pub fn reason(notice: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(notice).unwrap_or_default();
    let action = value["action"].as_str().unwrap_or("terminate");
    match value["time"].as_str() {
        Some(time) => format!("{REASON_PREFIX}: {action} at {time}"),
        None => format!("{REASON_PREFIX}: {action}"),
    }
}

fn act(node: &str, notice: &str) -> Result<()> {
    let reason = reason(notice);
    log(
        "spot-watch",
        &format!("{reason}: requeueing the jobs of {node} and powering it down"),
    );
    let args = [
        "update".to_string(),
        format!("nodename={node}"),
        "state=power_down_force".to_string(),
        format!("reason={reason}"),
    ];
    crate::host::slurm_client("scontrol", Path::new(LOOKUP_CONF), &args).map_err(Error::new)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_action_and_its_time() {
        assert_eq!(
            reason(r#"{"action":"terminate","time":"2026-12-05T10:00:00Z"}"#),
            "spot interruption: terminate at 2026-12-05T10:00:00Z"
        );
        assert_eq!(reason("not json"), "spot interruption: terminate");
    }
}
