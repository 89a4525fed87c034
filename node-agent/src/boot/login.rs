//! `hpc-node login-init`: a login node users SSH to and submit from.
//!
//! Steps: environment, munge key, users, the head node's address (its boot report), and the
//! Slurm client configuration pointing at it. Clients ask slurmctld for everything else
//! (partitions, nodes), so a new partition needs nothing on the login node.

use std::path::Path;

use hpc_aws::Aws;
use hpc_desired_state::boot::Role;

use crate::cli::ClusterArgs;
use crate::error::Result;
use crate::host::{log, write_file};

const SLURM_CONF: &str = "/etc/slurm/slurm.conf";

pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    let booted = super::begin(args, aws, Role::Login, None).await?;
    super::munge(aws, &booted.doc).await?;
    super::report_mounts(super::mounts(&booted.doc));
    super::users(&booted.doc.users)?;
    let head = super::ready_head(aws, &booted.cluster).await?;
    write_file(
        Path::new(SLURM_CONF),
        super::client_conf(&booted.cluster, &head).as_bytes(),
        0o644,
        None,
    )?;
    crate::host::systemctl(&["enable", "--now", super::SYNC_TIMER])?;
    log(
        "login-init",
        &format!("Slurm clients use slurmctld on {} ({})", head.host, head.addr),
    );
    Ok(())
}
