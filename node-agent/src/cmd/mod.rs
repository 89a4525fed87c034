//! The commands: each module turns one subcommand's arguments into work on AWS and Slurm.

mod events;
mod evict;
mod health;
mod power;
pub mod reconcile;
mod spot;
mod sweep;

use std::process::Command as Process;

use hpc_aws::ec2::Ec2;
use hpc_aws::Aws;
use hpc_desired_state::PoolDoc;

use crate::cli::Command;
use crate::error::Result;

/// Runs one command to its end.
pub async fn run(command: &Command, aws: &Aws) -> Result<()> {
    match command {
        Command::Resume(h) => power::resume(h, aws).await,
        Command::Suspend(h) | Command::ResumeFail(h) => power::suspend(h, aws).await,
        Command::Reconcile(r) => reconcile::run(r, aws).await,
        Command::Sweep(c) => sweep::run(c, aws).await,
        Command::Health(h) => health::run(h, aws).await,
        Command::Evict(c) => evict::run(c, aws).await,
        Command::Events(c) => events::run(c, aws).await,
        Command::HeadInit(c) => crate::boot::head::run(c, aws).await,
        Command::BackupInit(c) => crate::boot::backup::run(c, aws).await,
        Command::LoginInit(c) => crate::boot::login::run(c, aws).await,
        Command::NodeInit(n) => crate::boot::node::run(n, aws).await,
        Command::Sync(c) => crate::boot::sync(c, aws).await,
        Command::SpotWatch(s) => spot::watch(s, aws).await,
        Command::StateMount(s) => {
            crate::boot::state::mount_places(crate::boot::state::Places {
                volume: s.volume.as_deref(),
                shared: s.controller_efs.as_deref(),
                region: &aws.region,
            })
            .await
        }
    }
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

/// Runs scontrol; a failure is logged, not fatal (Slurm retries what it asked for), and
/// reported as false to callers that must try again themselves.
pub fn scontrol(args: &[String]) -> bool {
    match Process::new("scontrol").args(args).status() {
        Ok(s) if s.success() => true,
        Ok(s) => {
            eprintln!("hpc-node: scontrol {} exited with {s}", args.join(" "));
            false
        }
        Err(e) => {
            eprintln!("hpc-node: cannot run scontrol: {e}");
            false
        }
    }
}

/// Lets Slurm go of a node whose instance is gone: down first, so that slurmctld requeues its
/// jobs and ends their hold on the lost node at once, then powered down, which runs
/// SuspendProgram, clears the down state and frees the name for the next launch. (Since Slurm
/// 21.08 `POWER_DOWN_FORCE` alone also requeues the jobs, and in two booted runs without the
/// down step the job let go of the lost node within a minute; down first is meant against a
/// requeued job once seen completing for minutes under CI's load, which was not reproduced.)
/// False when either step failed: a node left down and not powered down is never resumed by
/// Slurm, so the caller must try again.
pub fn reset_lost_node(node: &str, reason: &str) -> bool {
    ["down", "power_down_force"]
        .iter()
        .all(|state| set_node_state(node, state, reason))
}

/// `scontrol update nodename=<node> state=<state> reason=<reason>`; false when Slurm refused.
pub fn set_node_state(node: &str, state: &str, reason: &str) -> bool {
    scontrol(&[
        "update".to_string(),
        format!("nodename={node}"),
        format!("state={state}"),
        format!("reason={reason}"),
    ])
}

/// `scontrol show nodes -o`: one record a line, `Reason=` last; empty when scontrol cannot say
/// (a program run outside Slurm).
fn node_records() -> String {
    match Process::new("scontrol").args(["show", "nodes", "-o"]).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        _ => String::new(),
    }
}

/// The nodes whose Slurm reason starts with `prefix`, with their state (`DOWN+CLOUD+POWERED_DOWN`),
/// from one `scontrol show nodes` (a reason stays whatever the node's state).
pub fn nodes_with_reason(prefix: &str) -> std::collections::BTreeMap<String, String> {
    with_reason(&node_records(), prefix)
}

fn with_reason(records: &str, prefix: &str) -> std::collections::BTreeMap<String, String> {
    records
        .lines()
        .filter_map(|line| {
            let name = line.strip_prefix("NodeName=")?.split_whitespace().next()?;
            let at = line.find(" Reason=")?;
            let state = line[..at].split_whitespace().find_map(|f| f.strip_prefix("State="))?;
            let reason = &line[at + " Reason=".len()..];
            reason
                .starts_with(prefix)
                .then(|| (name.to_string(), state.to_string()))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_found_by_the_start_of_their_reason_with_their_state() {
        let records = "NodeName=spot-c7i-large-1 Arch=x86_64 CoresPerSocket=1 State=IDLE+CLOUD+POWERING_DOWN \
                       Reason=spot interruption: terminate at 2026-12-06T10:09:35Z [slurm@2026-12-06T10:07:40]\n\
                       NodeName=spot-c7i-large-2 Arch=x86_64 State=IDLE+CLOUD+POWERED_DOWN\n\
                       NodeName=cpu-c7i-large-1 State=DOWN+CLOUD+POWERED_DOWN Reason=hpc-node: no capacity in any pool [root@t]\n\
                       garbage line Reason=spot interruption\n";
        let spot = with_reason(records, "spot interruption");
        assert_eq!(
            spot.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect::<Vec<_>>(),
            [("spot-c7i-large-1", "IDLE+CLOUD+POWERING_DOWN")]
        );
        let capacity = with_reason(records, crate::sweep::NO_CAPACITY);
        assert_eq!(capacity.keys().collect::<Vec<_>>(), ["cpu-c7i-large-1"]);
        assert!(with_reason("", "spot interruption").is_empty());
    }
}
