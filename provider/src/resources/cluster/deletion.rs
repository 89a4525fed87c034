//! What deleting a cluster (a destroy, or the first half of a replacement) does with what its
//! users cannot remake:
//! - the /home file system the provider made (`home.on_delete`): kept by default, without its
//!   mount targets (they hold the cluster's subnet and security group); a cluster created again
//!   under the same name finds it by its creation token and mounts it again;
//! - the state volume (`head_node.state_volume_on_delete`): a final snapshot by default, then
//!   the volume goes.
//!
//! The plan of a destroy or a replacement says which, and the delete names what it kept.
//! Deletion follows the settings in the state, as Terraform's destroy does: a changed setting
//! counts once it is applied.

use std::time::Duration;

use tfplugin::{AttributePath, Diagnostic, Diagnostics};

use super::model::Cluster;
use crate::clients::Clients;
use crate::desired_state::tag;
use crate::resources::or_stop;

/// `home.on_delete`: keep the file system.
pub const RETAIN: &str = "retain";
/// `head_node.state_volume_on_delete`: a final snapshot, then delete.
pub const SNAPSHOT: &str = "snapshot";
/// Either setting: delete it.
pub const DELETE: &str = "delete";
/// The `hpcforge:role` tag of a state volume's final snapshot.
pub const FINAL_SNAPSHOT_ROLE: &str = "head-state-final";

/// Refuses `home.on_delete` other than `retain` or `delete`.
pub fn check_home(value: Option<&str>, diags: &mut Diagnostics) {
    check_setting(
        AttributePath::root("home").attr("on_delete"),
        [RETAIN, DELETE],
        value,
        diags,
    );
}

/// Refuses `head_node.state_volume_on_delete` other than `snapshot` or `delete`.
pub fn check_state_volume(value: Option<&str>, diags: &mut Diagnostics) {
    let at = AttributePath::root("head_node").attr("state_volume_on_delete");
    check_setting(at, [SNAPSHOT, DELETE], value, diags);
}

fn check_setting(at: AttributePath, allowed: [&str; 2], value: Option<&str>, diags: &mut Diagnostics) {
    if let Some(v) = value.filter(|v| !allowed.contains(v)) {
        diags.error_at(
            at,
            format!("unknown deletion setting {v:?}"),
            format!("Use \"{}\" or \"{}\".", allowed[0], allowed[1]),
        );
    }
}

/// One line per thing the deletion of `prior` keeps or deletes; `managed_home` is /home's
/// file system when the provider made it.
fn plan_lines(prior: &Cluster, managed_home: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(fs) = managed_home {
        lines.push(if keeps_home(prior) {
            format!(
                "/home ({fs}) is kept with the users' files, without its mount targets; a cluster created \
                 again as {} mounts it again (home.on_delete = \"retain\")",
                prior.name
            )
        } else {
            format!("/home ({fs}) is deleted with every user's files (home.on_delete = \"delete\")")
        });
    }
    if let Some(volume) = &prior.state_volume_id {
        lines.push(if snapshots_state(prior) {
            format!(
                "the state volume ({volume}: slurmctld's saved state, the local accounting database) is kept \
                 as a final snapshot tagged {}={FINAL_SNAPSHOT_ROLE}, then deleted \
                 (head_node.state_volume_on_delete = \"snapshot\")",
                tag::ROLE
            )
        } else {
            format!(
                "the state volume ({volume}) is deleted with slurmctld's saved state and the local accounting \
                 database (head_node.state_volume_on_delete = \"delete\")"
            )
        });
    }
    lines
}

/// The plan's warning for destroying `prior`.
pub fn destroy_warning(prior: &Cluster, managed_home: Option<&str>) -> Option<Diagnostic> {
    warning("Destroying", plan_lines(prior, managed_home), prior)
}

/// The plan's warning for replacing `prior`: the old cluster is deleted before the new one is
/// made, which starts from a new state volume unless told otherwise.
pub fn replace_warning(prior: &Cluster, managed_home: Option<&str>) -> Option<Diagnostic> {
    let mut lines = plan_lines(prior, managed_home);
    if prior.state_volume_id.is_some() {
        lines.push(
            "the new cluster starts with a new, empty state volume (no queue, no sacct history) unless \
             head_node.state_snapshot_id names the final snapshot"
                .to_string(),
        );
    }
    warning("Replacing", lines, prior)
}

fn warning(how: &str, lines: Vec<String>, prior: &Cluster) -> Option<Diagnostic> {
    (!lines.is_empty()).then(|| {
        Diagnostic::warning(
            format!("{how} cluster {} deletes its nodes and running jobs", prior.name),
            format!("- {}", lines.join("\n- ")),
        )
    })
}

fn keeps_home(prior: &Cluster) -> bool {
    prior.home.on_delete != DELETE
}

fn snapshots_state(prior: &Cluster) -> bool {
    prior.head_node.state_volume_on_delete != DELETE
}

/// What outlives the cluster's instances: the state volume (after its final snapshot), the
/// head's kept interface, and /home's file system `managed_home` (the provider's), kept or
/// deleted as `prior` says. Returns what was kept.
pub async fn delete_state(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    prior: &Cluster,
    managed_home: Option<String>,
    timeout: Duration,
) -> hpc_aws::Result<Vec<String>> {
    let mut kept = Vec::new();
    let snapshot = final_snapshot(clients, prior, timeout);
    kept.extend(or_stop(ctx, "the state volume's final snapshot", snapshot).await?);
    super::head::delete_kept(clients, prior, timeout).await?;
    if let Some(fs) = managed_home {
        kept.extend(or_stop(ctx, "the cluster's /home", home(clients, prior, &fs, timeout)).await?);
    }
    Ok(kept)
}

/// Deletes /home's file system `fs` (the provider's), or keeps it without its mount targets, as
/// `prior` says; returns what it kept.
async fn home(clients: &Clients, prior: &Cluster, fs: &str, timeout: Duration) -> hpc_aws::Result<Option<String>> {
    if !keeps_home(prior) {
        clients.efs.delete(fs, timeout).await?;
        return Ok(None);
    }
    if clients.efs.state(fs).await?.is_none() {
        return Ok(None);
    }
    clients.efs.delete_mount_targets(fs, timeout).await?;
    Ok(Some(format!(
        "/home: the EFS file system {fs}, with the users' files; a cluster created again as {} mounts it",
        prior.name
    )))
}

/// The state volume's final snapshot, when `prior` asks for one and the volume is still
/// there (the cluster's instances are gone by then); returns what it kept.
async fn final_snapshot(clients: &Clients, prior: &Cluster, timeout: Duration) -> hpc_aws::Result<Option<String>> {
    let Some(volume) = &prior.state_volume_id else {
        return Ok(None);
    };
    if !snapshots_state(prior) || clients.ec2.find_volume(volume).await?.is_none() {
        return Ok(None);
    }
    let mut tags = prior.tags_all.clone().unwrap_or_default();
    tags.insert(tag::CLUSTER.to_string(), prior.name.clone());
    tags.insert(tag::ROLE.to_string(), FINAL_SNAPSHOT_ROLE.to_string());
    tags.insert("Name".to_string(), format!("hpc-{}-state-final", prior.name));
    let tags: Vec<(String, String)> = tags.into_iter().collect();
    let description = format!(
        "hpcforge cluster {}: the state volume {volume} when the cluster was deleted",
        prior.name
    );
    let snapshot = clients
        .ec2
        .ensure_snapshot(volume, &description, &tags, timeout)
        .await?;
    Ok(Some(format!(
        "the state volume {volume}, as the final snapshot {snapshot} (tagged {}={FINAL_SNAPSHOT_ROLE})",
        tag::ROLE
    )))
}

/// The delete's warning: what it kept, if anything.
pub fn kept_warning(name: &str, kept: &[String]) -> Diagnostics {
    if kept.is_empty() {
        return Diagnostics::new();
    }
    Diagnostic::warning(
        format!("Cluster {name} is deleted; what its users cannot remake is kept"),
        format!("- {}\nDelete these yourself when no longer wanted.", kept.join("\n- ")),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired_state::ClusterDoc;

    fn cluster() -> Cluster {
        let mut doc = ClusterDoc {
            name: "lab".into(),
            ..ClusterDoc::default()
        };
        doc.head_node.state_volume_id = Some("vol-1".into());
        Cluster::of_doc(&doc, 1, None)
    }

    #[test]
    fn the_plan_names_what_a_deletion_keeps_and_what_it_deletes() {
        let mut c = cluster();
        let kept = plan_lines(&c, Some("fs-1"));
        assert!(
            kept[0].contains("/home (fs-1) is kept") && kept[0].contains("created again as lab"),
            "{kept:?}"
        );
        assert!(
            kept[1].contains("vol-1") && kept[1].contains("final snapshot"),
            "{kept:?}"
        );
        c.home.on_delete = DELETE.into();
        c.head_node.state_volume_on_delete = DELETE.into();
        let gone = plan_lines(&c, Some("fs-1"));
        assert!(
            gone[0].contains("deleted with every user's files") && gone[1].contains("(vol-1) is deleted"),
            "{gone:?}"
        );
        // A /home of the user's own is not the cluster's to keep or delete.
        assert_eq!(plan_lines(&c, None).len(), 1);
        let destroy = destroy_warning(&c, None).expect("a warning");
        assert!(destroy.summary.contains("Destroying cluster lab"), "{destroy:?}");
        let replace = replace_warning(&c, None).expect("a warning");
        assert!(replace.detail.contains("state_snapshot_id"), "{replace:?}");
    }

    #[test]
    fn each_setting_takes_its_two_values_only() {
        let mut diags = Diagnostics::new();
        check_home(Some(RETAIN), &mut diags);
        check_home(Some(DELETE), &mut diags);
        check_home(None, &mut diags);
        check_state_volume(Some(SNAPSHOT), &mut diags);
        assert!(diags.is_empty(), "{diags}");
        check_home(Some("keep"), &mut diags);
        check_state_volume(Some(RETAIN), &mut diags);
        assert_eq!(diags.0.len(), 2, "{diags}");
        assert!(diags.to_string().contains("\"keep\""), "{diags}");
    }
}
