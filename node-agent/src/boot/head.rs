//! `hpc-node head-init`: the head node boots into slurmctld on the published desired state.
//!
//! Steps: environment, the cluster's state volume ([`super::state`]), munge key, users, Slurm's directories, accounting (slurmdbd, and
//! MariaDB for `local`), this host as `SlurmctldHost`
//! (written to the layout the reconcile unit uses), the first reconcile pass (which checks the
//! configuration on a throwaway controller before installing it), slurmctld, then the agent's
//! units. Each step is reported in the head's boot report; the provider waits on it.
//!
//! `hpc-node backup-init` boots the backup controller through the same steps, as the second
//! `SlurmctldHost`: its host name is [`BACKUP_HOST`], it waits for the head and names it as the
//! first controller, keeps no volume (the shared EFS holds slurmctld's state) and runs no
//! accounting (slurmdbd stays on the head; while the head is away slurmctld queues its records).

use std::path::Path;
use std::time::Duration;

use hpc_aws::Aws;
use hpc_desired_state::boot::{backup_param, head_param, Phase, Role};
use hpc_desired_state::BACKUP_HOST;

use crate::cli::ClusterArgs;
use crate::error::{Context as _, Result};
use crate::host::{self as system, log};
use crate::reconcile::{reconcile_once, Layout, Outcome};

use super::report::Reporter;

/// The layout this head node's reconcile unit reads.
pub const LAYOUT: &str = "/etc/hpcforge/layout.json";
/// What the agent runs on a head node besides slurmctld.
const AGENT_UNITS: &[&str] = &[
    "hpc-node-reconcile.service",
    "hpc-node-events.service",
    "hpc-node-sweep.timer",
    "hpc-node-evict.timer",
    super::SYNC_TIMER,
];
const SLURMCTLD_PORT: u16 = 6817;
const START_SLURMCTLD: &[&str] = &["systemctl", "enable", "--now", "slurmctld.service"];
/// The backup's start does not wait: its slurmctld may start only once the head's has (below).
const START_BACKUP_SLURMCTLD: &[&str] = &["systemctl", "enable", "--now", "--no-block", "slurmctld.service"];
/// The backup's slurmctld starts once the head's has named the cluster in the shared state:
/// slurmctld reads the cluster's id (`clustername`, which the head writes with the id slurmdbd
/// gives it) only when it starts, and a backup without it cannot take over while slurmdbd is
/// away ("Still don't know my ClusterID"). Until then its start fails and systemd tries again.
const BACKUP_DROP_IN: &str = "/etc/systemd/system/slurmctld.service.d/hpcforge-backup.conf";
const BACKUP_UNIT: &str =
    "# hpcforge: the backup controller starts after the head named the cluster (hpc-node backup-init)\n\
    [Service]\nExecStartPre=/bin/sh -c 'test -s /var/spool/slurmctld/clustername'\n\
    Restart=on-failure\nRestartSec=5\n";
/// How long a controller's first start may take (the backup's waits for the head's).
const START_WAIT: Duration = Duration::from_secs(300);
/// Slurm's directories on the head node: path, mode, owner.
const DIRECTORIES: &[(&str, u32, &str)] = &[
    ("/var/spool/slurmctld", 0o700, "slurm"),
    ("/var/log/slurm", 0o755, "slurm"),
    ("/run/slurm", 0o755, "slurm"),
    ("/var/lib/hpc-node", 0o700, "slurm"),
];
/// /run is empty after a reboot; systemd recreates Slurm's run directory before the daemons.
const TMPFILES: &str = "/etc/tmpfiles.d/hpcforge-slurm.conf";

pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    run_as(args, aws, Role::Head).await
}

/// Boots a controller: `role` is [`Role::Head`] or [`Role::Backup`].
pub async fn run_as(args: &ClusterArgs, aws: &Aws, role: Role) -> Result<()> {
    let identity = hpc_aws::imds::identity(aws).await?;
    let param = match role {
        Role::Backup => {
            super::node::hostname(BACKUP_HOST, &identity.private_ip)?;
            backup_param(&args.cluster)
        }
        _ => head_param(&args.cluster),
    };
    let host = system::short_hostname()?;
    let mut reporter = Reporter::new(aws, role.command(), param, &identity, &host);
    reporter.step("starting", Phase::Booting, None).await;
    let (mut step, mut warnings) = ("starting", Vec::new());
    let me = Controller {
        role,
        host: &host,
        addr: &identity.private_ip,
    };
    let result = steps(args, aws, me, &mut reporter, &mut step, &mut warnings).await;
    match &result {
        // Ready with what did not mount: the head schedules; the provider shows the warning.
        Ok(()) => {
            let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
            reporter.step("ready", Phase::Ready, warning).await
        }
        Err(e) => {
            log(role.command(), &format!("failed at {step}: {e}"));
            reporter.step(step, Phase::Failed, Some(e.to_string())).await;
        }
    }
    result
}

/// The controller booting: its role, host name and address.
#[derive(Debug, Clone, Copy)]
struct Controller<'a> {
    role: Role,
    host: &'a str,
    addr: &'a str,
}

async fn steps(
    args: &ClusterArgs,
    aws: &Aws,
    me: Controller<'_>,
    reporter: &mut Reporter<'_>,
    step: &mut &'static str,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let (host, addr) = (me.host, me.addr);
    *step = "desired state";
    let booted = super::begin(args, aws, me.role, None).await?;
    *step = "slurm release";
    super::slurm_release(&booted.doc, me.role)?;
    // The backup names the head first: its slurmctld stands by while the head's answers.
    let (controller_host, controller_addr) = if me.role == Role::Backup {
        *step = "head node";
        reporter.step(step, Phase::Booting, None).await;
        let head = super::ready_head(aws, &args.cluster).await?;
        (head.host, head.addr)
    } else {
        (host.to_string(), addr.to_string())
    };
    *step = "state volume";
    reporter.step(step, Phase::Booting, None).await;
    super::state::mount(&booted.doc, args, me.role).await?;
    *step = "munge key";
    reporter.step(step, Phase::Booting, None).await;
    super::munge(aws, &booted.doc).await?;
    *step = "mounts";
    let failed = super::mounts(aws, &booted.doc, &booted.identity.region).await;
    *warnings = failed.iter().map(ToString::to_string).collect();
    super::report_mounts(failed);
    *step = "users";
    super::users::users(&booted.doc.users)?;
    super::ssh_entry(aws, &booted.doc, me.role).await?;
    *step = "slurm directories";
    slurm_directories()?;
    let start: &[&str] = if me.role == Role::Backup {
        system::write_file(Path::new(BACKUP_DROP_IN), BACKUP_UNIT.as_bytes(), 0o644, None)?;
        system::systemctl(&["daemon-reload"])?;
        START_BACKUP_SLURMCTLD
    } else {
        START_SLURMCTLD
    };
    let layout = Layout {
        controller_host: Some(controller_host),
        controller_addr: Some(controller_addr),
        // A cluster's partitions come after it: the reconcile unit starts slurmctld with the first.
        start_command: Some(start.iter().map(|s| s.to_string()).collect()),
        ..Layout::default()
    };
    if booted.doc.accounting.enabled() && me.role == Role::Head {
        *step = "accounting";
        reporter.step(step, Phase::Booting, None).await;
        super::accounting::start(aws, &booted.doc, &layout).await?;
    }
    *step = "slurm configuration";
    reporter.step(step, Phase::Booting, None).await;
    let json = layout.to_json().context(|| "encoding the layout".to_string())?;
    system::write_file(Path::new(LAYOUT), json.as_bytes(), 0o644, None)?;
    let outcome = reconcile_once(aws, &args.cluster, &layout, &crate::reconcile::slurmctld()).await?;
    if outcome == Outcome::NoPartitions {
        log(
            "head-init",
            "no partition published yet: slurmctld starts with the first one",
        );
    } else {
        *step = "slurmctld";
        reporter.step(step, Phase::Booting, None).await;
        system::systemctl(&start[1..])?;
        system::wait_for(
            "slurmctld accepting connections",
            START_WAIT,
            Duration::from_millis(500),
            || async { Ok(system::listening(addr, SLURMCTLD_PORT).then_some(())) },
        )
        .await?;
    }
    *step = "agent units";
    let mut enable = vec!["enable", "--now"];
    enable.extend(AGENT_UNITS);
    system::systemctl(&enable)?;
    log(
        me.role.command(),
        &format!("a controller of {} is {host} ({addr})", args.cluster),
    );
    Ok(())
}

fn slurm_directories() -> Result<()> {
    let mut tmpfiles = String::from("# hpcforge: Slurm's run directory (written by hpc-node head-init)\n");
    for (path, mode, owner) in DIRECTORIES {
        system::directory(path, *mode, owner)?;
        if path.starts_with("/run/") {
            tmpfiles.push_str(&format!("d {path} {mode:04o} {owner} {owner} -\n"));
        }
    }
    system::write_file(Path::new(TMPFILES), tmpfiles.as_bytes(), 0o644, None)?;
    Ok(())
}
