//! `hpc-node login-init`: a login node users SSH to and submit from.
//!
//! Steps: environment, munge key, users, the head node's address (its boot report), the
//! Slurm client configuration pointing at it, and who sshd admits, with the second factor where set. Clients ask slurmctld for everything else
//! (partitions, nodes), so a new partition needs nothing on the login node. The node reports
//! ready (or why it failed) in its own boot report: the provider waits on it before it retires
//! the login nodes a new one replaces.

use hpc_aws::Aws;
use hpc_desired_state::boot::{login_param, Phase, Role};

use crate::cli::ClusterArgs;
use crate::error::Result;
use crate::host::{self as system, log};

use super::report::Reporter;

const SLURM_CONF: &str = "/etc/slurm/slurm.conf";

pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    let identity = hpc_aws::imds::identity(aws).await?;
    let host = system::short_hostname()?;
    let param = login_param(&args.cluster, &identity.instance_id);
    let mut reporter = Reporter::new(aws, Role::Login.command(), param, &identity, &host);
    reporter.step("starting", Phase::Booting, None).await;
    let result = steps(args, aws).await;
    match &result {
        Ok(()) => reporter.step("ready", Phase::Ready, None).await,
        Err(e) => reporter.step("login-init", Phase::Failed, Some(e.to_string())).await,
    }
    result
}

async fn steps(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    let (_, head) = super::join(args, aws, Role::Login, None, SLURM_CONF).await?;
    system::systemctl(&["enable", "--now", super::SYNC_TIMER])?;
    log(
        "login-init",
        &format!("Slurm clients use slurmctld on {} ({})", head.host, head.addr),
    );
    Ok(())
}
