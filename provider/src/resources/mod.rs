//! One module per resource type, plus what they share.

pub mod capacity;
pub(crate) mod checks;
pub mod cluster;
pub mod instance_type;
pub mod lustre_fs;
pub mod network;
pub mod partition;
pub(crate) mod quotas;

use hpc_aws::AwsError;
use tfplugin::{Ctx, Diagnostic, Diagnostics};

/// An AWS failure as a diagnostic: a summary saying what failed, the service's code and message.
pub(crate) fn aws_diag(summary: &str, e: &AwsError) -> Diagnostics {
    Diagnostic::error(summary, e.to_string()).into()
}

/// Refuses an AMI whose Slurm (the release hpc-image recorded in its tag) is not `version`, the
/// cluster's `slurm.version`: its daemons would refuse a configuration rendered for another
/// release. An AMI without the tag (not published by hpc-image) is checked at boot instead.
pub(crate) async fn image_release(
    clients: &crate::provider::Clients,
    ami: &str,
    version: &str,
    at: tfplugin::AttributePath,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let image = match clients.ec2.describe_image(ami).await {
        Ok(Some(image)) => image,
        Ok(None) => return diags,
        Err(e) => {
            diags.push(Diagnostic::warning(
                format!("Cannot check the Slurm release of {ami}"),
                format!("{e}; a node on another release than slurm.version fails at boot."),
            ));
            return diags;
        }
    };
    let tagged = image
        .tags
        .iter()
        .find(|(k, _)| k == hpc_desired_state::SLURM_VERSION_TAG)
        .map(|(_, v)| v.as_str());
    let Some((tagged, series)) = tagged.and_then(|t| Some((t, hpc_desired_state::release_series(t)?))) else {
        return diags;
    };
    if series != version {
        diags.push(
            Diagnostic::error(
                format!("{ami} carries Slurm {series} ({tagged}), but slurm.version is {version}"),
                format!(
                    "Its daemons would refuse a configuration rendered for Slurm {version}. Set \
                     slurm {{ version = \"{series}\" }} on the cluster, or use an image baked with Slurm {version}."
                ),
            )
            .at(at),
        );
    }
    diags
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
