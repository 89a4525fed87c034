//! `hpc-node node-init`: a compute node joins its cluster.
//!
//! Steps: environment, munge key, users, the head node's address (its boot report), this
//! instance's Slurm node name, host name, then slurmd configless: it fetches slurm.conf and
//! friends from slurmctld and registers, so the node carries no configuration of its own.
//!
//! The node name comes from Slurm's own record: ResumeProgram sets each node's `NodeAddr` to
//! its instance's address right after the launch, so the node finds itself there by its
//! address, with no EC2 call on the node and no per-node call at resume for it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hpc_aws::Aws;
use hpc_desired_state::boot::Role;

use crate::cli::NodeInitArgs;
use crate::error::{Context as _, Error, Result};
use crate::host::{self as system, log, write_file};

/// Where the node's lookup configuration lives (never /etc/slurm: configless slurmd owns that).
pub const LOOKUP_CONF: &str = "/run/hpc-node/slurm.conf";
const SLURMD_DEFAULTS: &str = "/etc/default/slurmd";
/// Lifts the image's "no slurm.conf, no slurmd" condition: configless slurmd has none.
const SLURMD_DROP_IN: &str = "/etc/systemd/system/slurmd.service.d/zz-hpcforge-configless.conf";
/// How long after boot ResumeProgram may take to record this node's address.
const NAME_WAIT: Duration = Duration::from_secs(180);

pub async fn run(args: &NodeInitArgs, aws: &Aws) -> Result<()> {
    let (booted, head) = super::join(&args.cluster, aws, Role::Compute, Some(&args.partition), LOOKUP_CONF).await?;
    let ip = booted.identity.private_ip.clone();
    let name = system::wait_for(
        "this instance's Slurm node name",
        NAME_WAIT,
        Duration::from_secs(1),
        || {
            let ip = ip.clone();
            async move { node_named_at(&ip) }
        },
    )
    .await?;
    if !name.starts_with(&format!("{}-", args.partition)) {
        return Err(Error::new(format!(
            "Slurm gave this instance's address to {name}, not a node of partition {}",
            args.partition
        )));
    }
    log("node-init", &format!("this instance is {name}"));
    hostname(&name, &ip)?;
    crate::host::systemctl(&["enable", "--now", super::SYNC_TIMER])?;
    let servers = super::conf_servers(&booted.doc, &head);
    slurmd(&name, &servers)?;
    log(
        "node-init",
        &format!("slurmd of {name} started (configuration from {servers})"),
    );
    if hpc_aws::imds::life_cycle(aws).await? == "spot" {
        spot_watch(args, &name)?;
        log("node-init", "a spot instance: watching for EC2's interruption notice");
    }
    Ok(())
}

const SPOT_WATCH_UNIT: &str = "/etc/systemd/system/hpc-node-spot-watch.service";

/// The spot watch as a unit of this node (its name is known only now).
fn spot_watch(args: &NodeInitArgs, name: &str) -> Result<()> {
    let region = args
        .cluster
        .region
        .as_deref()
        .map(|r| format!(" --region {r}"))
        .unwrap_or_default();
    let unit = format!(
        "# hpcforge: requeue this node's jobs on a spot interruption notice (hpc-node node-init)\n\
         [Unit]\nDescription=hpcforge spot interruption watch\nAfter=slurmd.service\n\n\
         [Service]\nExecStart={agent} spot-watch --node {name} --cluster {cluster}{region}\n\
         StandardOutput=journal+console\nStandardError=journal+console\n\
         Restart=on-failure\nRestartSec=5\n\n[Install]\nWantedBy=multi-user.target\n",
        agent = hpc_desired_state::boot::AGENT,
        cluster = args.cluster.cluster,
    );
    write_file(Path::new(SPOT_WATCH_UNIT), unit.as_bytes(), 0o644, None)?;
    system::systemctl(&["daemon-reload"])?;
    system::systemctl(&["enable", "--now", "hpc-node-spot-watch.service"])
}

/// The node whose NodeAddr is `ip`, per slurmctld.
fn node_named_at(ip: &str) -> Result<Option<String>> {
    let out = Command::new("scontrol")
        .args(["-o", "show", "nodes"])
        .env("SLURM_CONF", LOOKUP_CONF)
        .output()
        .context(|| "running scontrol".to_string())?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "scontrol show nodes: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(node_at(&String::from_utf8_lossy(&out.stdout), ip))
}

/// Finds the node with `NodeAddr=<ip>` in `scontrol -o show nodes` output.
pub fn node_at(listing: &str, ip: &str) -> Option<String> {
    listing.lines().find_map(|line| {
        let field = |key: &str| line.split_whitespace().find_map(|f| f.strip_prefix(key));
        (field("NodeAddr=") == Some(ip)).then(|| field("NodeName=").map(str::to_string))?
    })
}

/// The node's host name is its Slurm name (as in ParallelCluster), kept across reboots.
pub(super) fn hostname(name: &str, ip: &str) -> Result<()> {
    write_file(Path::new("/etc/hostname"), format!("{name}\n").as_bytes(), 0o644, None)?;
    write_file(
        Path::new("/etc/cloud/cloud.cfg.d/90-hpcforge-hostname.cfg"),
        b"# hpcforge: the host name is the Slurm node name (hpc-node node-init)\npreserve_hostname: true\n",
        0o644,
        None,
    )?;
    system::run("hostname", &[name])?;
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let entry = format!("{ip} {name}");
    if !hosts
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == entry)
    {
        write_file(
            Path::new("/etc/hosts"),
            format!("{hosts}{entry}\n").as_bytes(),
            0o644,
            None,
        )?;
    }
    Ok(())
}

fn slurmd(name: &str, controller: &str) -> Result<()> {
    system::directory("/var/log/slurm", 0o755, "slurm")?;
    system::directory("/run/slurm", 0o755, "slurm")?;
    system::directory(&format!("/var/spool/slurmd/{name}"), 0o755, "root")?;
    let options = format!(
        "# hpcforge: configless slurmd (hpc-node node-init)\nSLURMD_OPTIONS=\"--conf-server {controller} -N {name}\"\n"
    );
    write_file(Path::new(SLURMD_DEFAULTS), options.as_bytes(), 0o644, None)?;
    write_file(
        Path::new(SLURMD_DROP_IN),
        b"# hpcforge: configless slurmd fetches slurm.conf from slurmctld\n[Unit]\nConditionPathExists=\n\n\
          # Until slurmctld answers (its configuration may be being applied), try again.\n\
          [Service]\nRestart=on-failure\nRestartSec=5\n",
        0o644,
        None,
    )?;
    system::systemctl(&["daemon-reload"])?;
    system::systemctl(&["enable", "slurmd.service"])?;
    system::systemctl(&["restart", "slurmd.service"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_finds_its_name_by_its_address() {
        let listing = "NodeName=cpu-c7i-large-1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.0.1.7 NodeHostName=cpu-c7i-large-1 State=IDLE+CLOUD+POWERING_UP\n\
                       NodeName=cpu-c7i-large-2 NodeAddr=cpu-c7i-large-2 NodeHostName=cpu-c7i-large-2 State=IDLE+CLOUD+POWERED_DOWN\n";
        assert_eq!(node_at(listing, "10.0.1.7").as_deref(), Some("cpu-c7i-large-1"));
        assert_eq!(node_at(listing, "10.0.1.70"), None);
        assert_eq!(node_at(listing, "cpu-c7i-large-2").as_deref(), Some("cpu-c7i-large-2"));
    }
}
