//! `hpc-node login-init`: a login node users SSH to and submit from.
//!
//! Steps: environment, munge key, users, the head node's address (its boot report), the
//! Slurm client configuration pointing at it, and sshd's second factor (`mfa`). Clients ask slurmctld for everything else
//! (partitions, nodes), so a new partition needs nothing on the login node.

use hpc_aws::Aws;
use hpc_desired_state::boot::Role;

use crate::cli::ClusterArgs;
use crate::error::Result;
use crate::host::log;

const SLURM_CONF: &str = "/etc/slurm/slurm.conf";

pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    let (booted, head) = super::join(args, aws, Role::Login, None, SLURM_CONF).await?;
    super::mfa::apply(aws, &booted.doc).await?;
    crate::host::systemctl(&["enable", "--now", super::SYNC_TIMER])?;
    log(
        "login-init",
        &format!("Slurm clients use slurmctld on {} ({})", head.host, head.addr),
    );
    Ok(())
}
