//! `hpc-node backup-init`: the backup controller boots as the cluster's second `SlurmctldHost`
//! (see [`super::head`], whose steps it runs).

use hpc_aws::Aws;
use hpc_desired_state::boot::Role;

use crate::cli::ClusterArgs;
use crate::error::Result;

pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    super::head::run_as(args, aws, Role::Backup).await
}
