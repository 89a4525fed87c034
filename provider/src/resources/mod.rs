//! One module per resource type, plus what they share.

pub mod cluster;
pub mod instance_type;
pub mod lustre_fs;
pub mod network;
pub mod partition;

use hpc_aws::AwsError;
use tfplugin::{Ctx, Diagnostic, Diagnostics};

/// An AWS failure as a diagnostic: a summary saying what failed, the service's code and message.
pub(crate) fn aws_diag(summary: &str, e: &AwsError) -> Diagnostics {
    Diagnostic::error(summary, e.to_string()).into()
}

/// Runs an AWS operation, giving up early if Terraform asks the provider to stop.
pub(crate) async fn or_stop<T>(
    ctx: &Ctx,
    what: &str,
    fut: impl std::future::Future<Output = hpc_aws::Result<T>>,
) -> hpc_aws::Result<T> {
    tokio::select! {
        r = fut => r,
        _ = ctx.stopped() => Err(AwsError::new(
            what,
            Some("Interrupted"),
            "Terraform asked the provider to stop; the operation may still be running in AWS",
        )),
    }
}

/// Names used in AWS resource names and Slurm: lowercase letters, digits and `-`, starting
/// with a letter, at most `max` characters.
pub(crate) fn valid_name(name: &str, max: usize) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Use 1 to {max} lowercase letters, digits and '-', starting with a letter and not ending with '-'."
        ))
    }
}
