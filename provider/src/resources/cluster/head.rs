//! The head node's life: what outlives it (its network interface and state volume), its launch,
//! its replacement in place, and the wait until it reports slurmctld ready.
//!
//! The head is launched on a network interface the cluster keeps, so every head of the cluster
//! has the same address and host name (`SlurmctldHost`): compute and login nodes reconnect to
//! a new head without being told. Its state volume (slurmctld's saved state, the local
//! accounting database) is attached after the launch. Replacing the head terminates the old
//! one first and waits until it is gone: the interface and the volume are free only then, so
//! two controllers never run on one state.
//!
//! A backup controller (`head_node.backup_controller`) is an instance of the head's image and
//! type on a second kept interface, launched once the head reports ready and replaced after
//! each new head. Both mount the cluster's controller-state EFS, which holds slurmctld's saved
//! state: the backup takes over on it when the head stops answering.

use std::time::Duration;

use hpc_aws::ec2::VolumeSpec;
use tfplugin::{Diagnostic, Diagnostics, Value};

use super::model::{known, record, view, Cluster, Computed, HeadInstance, HeadSettings};
use super::{role_instances, template};
use crate::clients::Clients;
use crate::desired_state::boot::{BootReport, Phase, Role};
use crate::desired_state::{self, STATE_DEVICE};
use crate::resources::{aws_diag, or_stop};

/// Console lines shown with a head node that failed or never reported.
const CONSOLE_TAIL_LINES: usize = 30;

/// The [`HeadInstance`] settings of the prior and the planned value (none when either cannot
/// be read: a create).
fn instances(prior: &Value, planned: &Value) -> Option<(HeadInstance, HeadInstance)> {
    let read = |v: &Value| view::<HeadSettings>(v).ok().map(|s| s.head_node);
    Some((read(prior)?, read(planned)?))
}

/// Whether the planned head node differs from the prior one in what only a new instance has.
pub fn needs_new_instance(prior: &Value, planned: &Value) -> bool {
    instances(prior, planned).is_none_or(|(p, n)| p != n)
}

/// Whether a change of the head node's settings also rolls the login nodes (launched with all
/// of them but the head's instance type).
pub fn login_settings_change(prior: &Value, planned: &Value) -> bool {
    instances(prior, planned).is_none_or(|(p, n)| {
        let any_type = |h: HeadInstance| HeadInstance {
            instance_type: tfplugin::model::Field::Unset,
            ..h
        };
        any_type(p) != any_type(n)
    })
}

fn tags_for(tags: &[(String, String)], role: &str) -> Vec<(String, String)> {
    let mut t = tags.to_vec();
    t.push((crate::desired_state::tag::ROLE.into(), role.to_string()));
    t
}

/// The head's network interface and state volume, made the first time (or found again by
/// their tags after an interrupted create); recorded in `state` before any head uses them. An
/// update whose state already names both makes no call.
pub async fn ensure_kept(
    clients: &Clients,
    state: &mut Value,
    name: &str,
    sgs: &[String],
    tags: &[(String, String)],
) -> Result<(), Diagnostics> {
    let made = Computed::of(state)?;
    if made.head_node_network_interface_id.known().is_some() && made.state_volume_id.known().is_some() {
        return Ok(());
    }
    ensure_head_kept(clients, state, name, sgs, tags).await
}

/// The backup controller's interface and the controllers' shared state EFS (with a mount
/// target in the cluster subnet's zone, reached through the cluster group), made the first time
/// or found again by their tag and token; nothing without a backup controller.
pub async fn ensure_backup_kept(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    name: &str,
    sgs: &[String],
    tags: &[(String, String)],
    timeout: Duration,
) -> Result<(), Diagnostics> {
    let cluster = Cluster::read(state)?;
    if !cluster.head_node.backup_controller {
        return Ok(());
    }
    let made = Computed::of(state)?;
    if made.backup_controller_network_interface_id.known().is_none() {
        let eni = clients
            .ec2
            .ensure_network_interface(
                &cluster.subnet_id,
                sgs,
                &format!("hpcforge {name} backup controller (kept across backup controllers)"),
                &tags_for(tags, "backup-interface"),
            )
            .await
            .map_err(|e| aws_diag("Cannot create the backup controller's network interface", &e))?;
        record(state, |m| {
            m.backup_controller_network_interface_id = known(&eni.id);
            m.backup_controller_private_ip = known(&eni.private_ip);
        })?;
    }
    if made.controller_state_file_system_id.known().is_none() {
        let mut fs_tags = tags_for(tags, "controller-state");
        fs_tags.push(("Name".into(), format!("hpc-{name}-controller-state")));
        let token = desired_state::controller_state_efs_token(name);
        let made = super::cluster_efs(clients, &token, &fs_tags, &cluster.subnet_id, sgs, timeout);
        let fs = or_stop(ctx, "making the controllers' shared state", made)
            .await
            .map_err(|e| aws_diag("Cannot make the EFS file system for the controllers' state", &e))?;
        record(state, |m| m.controller_state_file_system_id = known(&fs))?;
    }
    Ok(())
}

async fn ensure_head_kept(
    clients: &Clients,
    state: &mut Value,
    name: &str,
    sgs: &[String],
    tags: &[(String, String)],
) -> Result<(), Diagnostics> {
    let cluster = Cluster::read(state)?;
    let subnet = cluster.subnet_id;
    let eni = clients
        .ec2
        .ensure_network_interface(
            &subnet,
            sgs,
            &format!("hpcforge {name} head node (kept across head nodes)"),
            &tags_for(tags, "head-interface"),
        )
        .await
        .map_err(|e| aws_diag("Cannot create the head node's network interface", &e))?;
    record(state, |m| m.head_node_network_interface_id = known(&eni.id))?;
    let zone = clients
        .ec2
        .subnet_zones(std::slice::from_ref(&subnet))
        .await
        .map_err(|e| aws_diag("Cannot find the head node's availability zone", &e))?
        .into_iter()
        .next()
        .map(|(_, z)| z)
        .unwrap_or_default();
    let head = cluster.head_node;
    let volume = clients
        .ec2
        .ensure_volume(&VolumeSpec {
            zone,
            // Validation keeps it within gp3's 16 TiB.
            size_gib: i32::try_from(head.state_volume_size).unwrap_or(i32::MAX),
            volume_type: "gp3".into(),
            encrypted: true,
            kms_key_id: None,
            snapshot_id: head.state_snapshot_id.clone(),
            tags: tags_for(tags, "head-state"),
        })
        .await
        .map_err(|e| aws_diag("Cannot create the head node's state volume", &e))?;
    record(state, |m| m.state_volume_id = known(&volume.id))?;
    Ok(())
}

/// A larger `state_volume_size` grows the kept volume; the head grows its file system into
/// the room (at its next sync, within a minute, and at every mount).
pub async fn grow_state(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    prior: &Value,
    state: &Value,
    timeout: Duration,
) -> Result<(), Diagnostics> {
    let size = |v: &Value| Cluster::of(v).ok().map(|c| c.head_node.state_volume_size);
    let (Some(volume), Some(gib)) = (Computed::of(state)?.state_volume_id.known().cloned(), size(state)) else {
        return Ok(());
    };
    if size(prior) == Some(gib) {
        return Ok(());
    }
    let gib = i32::try_from(gib).map_err(|_| {
        Diagnostics::from(
            Diagnostic::error("state_volume_size is too large", format!("{gib} GiB"))
                .at(tfplugin::AttributePath::root("head_node").attr("state_volume_size")),
        )
    })?;
    or_stop(
        ctx,
        "growing the state volume",
        clients.ec2.grow_volume(&volume, gib, timeout),
    )
    .await
    .map_err(|e| aws_diag("Cannot grow the head node's state volume", &e))
}

/// The cluster's kept interface of the head or the backup controller, found by its tags (import).
pub async fn kept_interface(clients: &Clients, name: &str, role: Role) -> Result<Option<String>, Diagnostics> {
    let tags = [(crate::desired_state::tag::CLUSTER.to_string(), name.to_string())];
    clients
        .ec2
        .network_interface_tagged(&tags_for(&tags, &format!("{}-interface", role.tag())))
        .await
        .map(|i| i.map(|i| i.id))
        .map_err(|e| aws_diag("Cannot find the head node's network interface", &e))
}

/// Removes the interface and the volume (the cluster's instances are gone by then).
pub async fn delete_kept(clients: &Clients, prior: &super::Cluster, timeout: Duration) -> hpc_aws::Result<()> {
    if let Some(eni) = &prior.head_node_network_interface_id {
        clients.ec2.delete_network_interface(eni, timeout).await?;
    }
    if let Some(volume) = &prior.state_volume_id {
        clients.ec2.delete_volume(volume, timeout).await?;
    }
    if let Some(eni) = &prior.backup_controller_network_interface_id {
        clients.ec2.delete_network_interface(eni, timeout).await?;
    }
    if let Some(fs) = &prior.controller_state_file_system_id {
        clients.efs.delete(fs, timeout).await?;
    }
    Ok(())
}

/// Which controller to launch, on which kept interface; with `replace`, the running one is
/// terminated first (and waited for).
#[derive(Debug, Clone, Copy)]
struct Launch<'a> {
    role: Role,
    eni: &'a str,
    replace: bool,
}

/// What an error calls a controller of `role`.
fn what(role: Role) -> &'static str {
    match role {
        Role::Backup => "backup controller",
        _ => "head node",
    }
}

/// Launches a controller (the head's image and type) on its kept interface, or adopts the one
/// an interrupted run already launched; its id and address once it runs.
async fn launch_on(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &Value,
    name: &str,
    tags: &[(String, String)],
    launch: Launch<'_>,
    timeout: Duration,
) -> Result<(String, Option<String>), Diagnostics> {
    let head = Cluster::read(state)?.head_node;
    let what = what(launch.role);
    // The interface carries the security groups: a launch naming both is refused.
    let spec = template(
        &head,
        name,
        launch.role,
        head.instance_type.clone(),
        &[],
        tags,
        desired_state::boot::user_data(launch.role, name, &clients.aws.region, None, None),
    );
    let (lt, _) = clients
        .ec2
        .ensure_launch_template(&spec)
        .await
        .map_err(|e| aws_diag(&format!("Cannot create the {what} launch template"), &e))?;
    let mut existing = role_instances(clients, name, launch.role).await?;
    if launch.replace {
        let old = std::mem::take(&mut existing);
        or_stop(
            ctx,
            &format!("stopping the old {what}"),
            clients.ec2.terminate(&old, timeout),
        )
        .await
        .map_err(|e| aws_diag(&format!("Cannot stop the old {what}"), &e))?;
    }
    let id = match existing.first() {
        Some(id) => id.clone(),
        None => or_stop(
            ctx,
            &format!("launching the {what}"),
            clients.ec2.run_instance_on(
                &lt,
                launch.eni,
                // EC2 takes at most 64 characters: no cluster name in it (see login.rs).
                &uuid::Uuid::new_v4().to_string(),
                &spec.tags,
                timeout,
            ),
        )
        .await
        .map_err(|e| aws_diag(&format!("Cannot launch the {what}"), &e))?,
    };
    let info = or_stop(
        ctx,
        &format!("waiting for the {what}"),
        clients.ec2.wait_instance_running(&id, timeout),
    )
    .await
    .map_err(|e| aws_diag(&format!("The {what} did not start"), &e))?;
    Ok((id, info.private_ip))
}

/// Launches the head node on the kept interface and attaches the state volume, or adopts the
/// head an interrupted run already launched. With `replace`, the running head is terminated
/// first (and waited for).
pub async fn launch(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    name: &str,
    tags: &[(String, String)],
    replace: bool,
    timeout: Duration,
) -> Result<(), Diagnostics> {
    let kept = Computed::of(state)?;
    let eni = kept.head_node_network_interface_id.as_str().unwrap_or_default();
    let launch = Launch {
        role: Role::Head,
        eni,
        replace,
    };
    let (id, ip) = launch_on(ctx, clients, state, name, tags, launch, timeout).await?;
    record(state, |m| {
        m.head_node_instance_id = known(&id);
        m.head_node_private_ip = ip.into();
    })?;
    if let Some(volume) = kept.state_volume_id.known() {
        or_stop(
            ctx,
            "attaching the state volume",
            clients.ec2.attach_volume(volume, &id, STATE_DEVICE, timeout),
        )
        .await
        .map_err(|e| aws_diag("Cannot attach the state volume to the head node", &e))?;
    }
    Ok(())
}

/// Launches the backup controller (after the head reports ready: the backup names it as the
/// first controller) and waits until it reports; with `replace`, the old backup ends first.
/// Nothing without a backup controller.
pub async fn launch_backup(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    name: &str,
    tags: &[(String, String)],
    replace: bool,
    timeout: Duration,
) -> Result<Diagnostics, Diagnostics> {
    if !Cluster::read(state)?.head_node.backup_controller {
        return Ok(Diagnostics::new());
    }
    let kept = Computed::of(state)?;
    let eni = kept.backup_controller_network_interface_id.as_str().unwrap_or_default();
    let launch = Launch {
        role: Role::Backup,
        eni,
        replace,
    };
    let (id, _) = launch_on(ctx, clients, state, name, tags, launch, timeout).await?;
    record(state, |m| m.backup_controller_instance_id = known(&id))?;
    ready(ctx, clients, state, name, Role::Backup, timeout).await
}

/// Waits until the head node or the backup controller (`role`; this instance) reports
/// slurmctld ready, unless `wait_for_ready = false`. A failure or a timeout is an error with
/// its own reason and its console's last lines; a ready one with a warning (a mount that
/// failed) is a warning.
pub async fn ready(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &Value,
    name: &str,
    role: Role,
    timeout: Duration,
) -> Result<Diagnostics, Diagnostics> {
    if !Cluster::read(state)?.wait_for_ready {
        return Ok(Diagnostics::new());
    }
    let made = Computed::of(state)?;
    let (id, param) = match role {
        Role::Backup => (
            made.backup_controller_instance_id.as_str(),
            desired_state::boot::backup_param(name),
        ),
        _ => (
            made.head_node_instance_id.as_str(),
            desired_state::boot::head_param(name),
        ),
    };
    let (id, what) = (id.unwrap_or_default(), what(role));
    match reported(ctx, clients, &format!("the {what}"), &param, id, timeout).await {
        Ok(r) if r.phase == Phase::Ready => {
            let mut d = Diagnostics::new();
            if let Some(w) = r.error {
                d.push(Diagnostic::warning(
                    format!("The {what} of {name} is ready with a problem"),
                    w,
                ));
            }
            Ok(d)
        }
        Ok(r) => Err(Diagnostics::from(Diagnostic::error(
            format!("The {what} of {name} failed at {}", r.step),
            format!("{}\n\n{}", r.error.unwrap_or_default(), console_tail(clients, id).await),
        ))),
        Err(e) => Err(Diagnostics::from(Diagnostic::error(
            format!("The {what} of {name} did not report ready"),
            format!("{e}\n\n{}", console_tail(clients, id).await),
        ))),
    }
}

/// Waits until instance `id` (`what`: "the head node") writes a report other than booting to
/// `param`; fails at once when the instance ends before it reports.
pub(super) async fn reported(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    what: &str,
    param: &str,
    id: &str,
    timeout: Duration,
) -> Result<BootReport, hpc_aws::AwsError> {
    or_stop(
        ctx,
        &format!("waiting for {what} to report ready"),
        hpc_aws::wait::until(
            &format!("{what} {id} to report ready in {param}"),
            timeout,
            Default::default(),
            || async {
                let report = match clients.ssm.get(param).await? {
                    Some(p) => serde_json::from_str::<BootReport>(&p.value).ok(),
                    None => None,
                };
                if let Some(r) = report.filter(|r| r.instance_id == id) {
                    if r.phase != Phase::Booting {
                        return Ok(hpc_aws::wait::Poll::Done(r));
                    }
                }
                // An instance that ended (it failed to boot, or was terminated) never reports.
                let ended = |how: String| {
                    Err(hpc_aws::AwsError::new(
                        format!("waiting for {what}"),
                        Some("InstanceEnded"),
                        format!("{what} {id} {how} before it reported"),
                    ))
                };
                match clients.ec2.find_instance(id).await? {
                    Some(i) if i.state == "pending" || i.state == "running" => {
                        Ok(hpc_aws::wait::Poll::Pending("booting".into()))
                    }
                    Some(i) => ended(format!("is {}", i.state)),
                    None => ended("was terminated".into()),
                }
            },
        ),
    )
    .await
}

/// The last lines of an instance's console, for an error about its boot.
pub(super) async fn console_tail(clients: &Clients, id: &str) -> String {
    let text = clients.ec2.console_output(id).await.unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(CONSOLE_TAIL_LINES)..].join("\n");
    format!("The console's last lines:\n{tail}")
}
