//! One module per resource type, plus what they share.

pub mod capacity;
pub(crate) mod checks;
pub mod cluster;
pub mod instance_type;
pub mod lustre_fs;
pub mod network;
pub(crate) mod owner;
pub mod partition;
pub mod peering;
pub(crate) mod quotas;

use hpc_aws::AwsError;
use tfplugin::{Ctx, Diagnostic, Diagnostics};

/// An AWS failure as a diagnostic: a summary saying what failed, the service's code and message.
pub(crate) fn aws_diag(summary: &str, e: &AwsError) -> Diagnostics {
    Diagnostic::error(summary, e.to_string()).into()
}

/// The AMI a plan launches from, described once (a read): None when EC2 has no such image (the
/// launch will say so) or cannot be asked (a warning says what goes unchecked).
pub(crate) async fn planned_image(
    clients: &crate::clients::Clients,
    ami: &str,
    diags: &mut Diagnostics,
) -> Option<hpc_aws::image::ImageInfo> {
    match clients.ec2.describe_image(ami).await {
        Ok(image) => image,
        Err(e) => {
            diags.push(Diagnostic::warning(
                format!("Cannot check image {ami}"),
                format!("{e}; its Slurm release, architecture and root size are checked when nodes boot instead."),
            ));
            None
        }
    }
}

/// The Slurm release hpc-image recorded on an AMI: the tag's text and its series. None for an
/// AMI without the tag (not published by hpc-image): its release is checked at boot instead.
fn tagged_release(image: &hpc_aws::image::ImageInfo) -> Option<(&str, String)> {
    let tagged = image
        .tags
        .iter()
        .find(|(k, _)| k == hpc_desired_state::SLURM_VERSION_TAG)
        .map(|(_, v)| v.as_str())?;
    Some((tagged, hpc_desired_state::release_series(tagged)?))
}

fn release_mismatch(image: &hpc_aws::image::ImageInfo, tagged: &str, series: &str, version: &str) -> Diagnostic {
    Diagnostic::error(
        format!(
            "{} carries Slurm {series} ({tagged}), but slurm.version is {version}",
            image.id
        ),
        format!(
            "Its daemons would refuse a configuration rendered for Slurm {version}. Set \
             slurm {{ version = \"{series}\" }} on the cluster, or use an image baked with Slurm {version}."
        ),
    )
}

/// Refuses a head node AMI whose Slurm is not `version`, the cluster's `slurm.version`: its
/// daemons render and read that release's configuration and state.
pub(crate) fn image_release(
    image: &hpc_aws::image::ImageInfo,
    version: &str,
    at: tfplugin::AttributePath,
) -> Diagnostics {
    match tagged_release(image) {
        Some((tagged, series)) if series != version => release_mismatch(image, tagged, &series, version).at(at).into(),
        _ => Diagnostics::new(),
    }
}

/// When a node image's release is checked against its cluster's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The plan reads the cluster's published release, which an upgrade in the same apply
    /// changes before the partition (the partition depends on the cluster).
    Plan,
    /// The apply reads it after any such upgrade.
    Apply,
}

/// A compute node AMI against the cluster's `slurm.version`: the same release, or an older one
/// its controller still talks to (Slurm upgrades the controller before the nodes). A newer
/// release within Slurm's window is the cluster's upgrade to come: a warning at plan, and an
/// error at apply if the cluster still runs the older release.
pub(crate) fn node_image_release(
    image: &hpc_aws::image::ImageInfo,
    version: &str,
    at: tfplugin::AttributePath,
    stage: Stage,
) -> Diagnostics {
    let Some((tagged, series)) = tagged_release(image) else {
        return Diagnostics::new();
    };
    let ami = &image.id;
    let first = format!(
        "slurmd {series} cannot join a slurmctld {version}. Upgrade the cluster first (slurm.version = \
         \"{series}\" and a head node image with Slurm {series})"
    );
    match (slurm_model::node_release(&series, version), stage) {
        (slurm_model::NodeRelease::Same | slurm_model::NodeRelease::Older, _) => Diagnostics::new(),
        (slurm_model::NodeRelease::Newer, Stage::Plan) => Diagnostic::warning(
            format!("{ami} carries Slurm {series}; the cluster runs {version} until it is upgraded"),
            format!(
                "{first}: in this apply, Terraform updates the cluster before its partitions; otherwise this \
                 partition's apply is refused."
            ),
        )
        .at(at)
        .into(),
        (slurm_model::NodeRelease::Newer, Stage::Apply) => Diagnostic::error(
            format!("{ami} carries Slurm {series}, newer than the cluster's slurm.version {version}"),
            format!("{first}, then this partition's image."),
        )
        .at(at)
        .into(),
        (slurm_model::NodeRelease::Unfit, _) => release_mismatch(image, tagged, &series, version).at(at).into(),
    }
}

/// Refuses what EC2 would refuse at launch: an instance type of another architecture than the
/// image's, and a root volume smaller than the image's root snapshot.
pub(crate) fn image_fits(
    image: &hpc_aws::image::ImageInfo,
    root_gib: Option<i64>,
    types: &[hpc_aws::ec2::InstanceTypeInfo],
    at_types: tfplugin::AttributePath,
    at_root: tfplugin::AttributePath,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let ami = &image.id;
    if let Some(arch) = &image.architecture {
        for t in types
            .iter()
            .filter(|t| !t.architectures.is_empty() && !t.architectures.contains(arch))
        {
            diags.push(
                Diagnostic::error(
                    format!(
                        "{} runs {}, but {ami} is an {arch} image",
                        t.instance_type,
                        t.architectures.join("/")
                    ),
                    format!(
                        "Use an {arch} instance type, or an image built for {}.",
                        t.architectures.join("/")
                    ),
                )
                .at(at_types.clone()),
            );
        }
    }
    if let (Some(snapshot), Some(root)) = (image.root_size_gib, root_gib) {
        if root < i64::from(snapshot) {
            diags.push(
                Diagnostic::error(
                    format!("a root volume of {root} GiB is smaller than {ami}'s {snapshot} GiB"),
                    format!("Set root_volume_size to {snapshot} or more."),
                )
                .at(at_root),
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use hpc_aws::ec2::InstanceTypeInfo;
    use hpc_aws::image::ImageInfo;
    use tfplugin::AttributePath;

    #[test]
    fn an_image_fits_types_of_its_architecture_and_roots_of_its_size() {
        let image = ImageInfo {
            id: "ami-1".into(),
            architecture: Some("x86_64".into()),
            root_size_gib: Some(30),
            ..Default::default()
        };
        let t = |name: &str, arch: &str| InstanceTypeInfo {
            instance_type: name.into(),
            architectures: vec![arch.into()],
            ..Default::default()
        };
        let check = |root: i64, types: &[InstanceTypeInfo]| {
            image_fits(
                &image,
                Some(root),
                types,
                AttributePath::root("t"),
                AttributePath::root("r"),
            )
            .0
            .len()
        };
        assert_eq!(check(30, &[t("c7i.large", "x86_64")]), 0);
        assert_eq!(check(30, &[t("c7g.large", "arm64"), t("c7i.large", "x86_64")]), 1);
        assert_eq!(check(29, &[t("c7i.large", "x86_64")]), 1);
    }
}
