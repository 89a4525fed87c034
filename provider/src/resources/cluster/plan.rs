//! hpc_cluster's plan: identity and policy, the rendered slurm.conf, the checks that read AWS
//! (image, key pair, partitions' timeouts), the cost, and what apply makes unknown.

use super::{
    head, managed_home, model::known, model::record, model::view, model::Cluster, model::ClusterConfig,
    model::Computed, model::FixedNodes, model::Logins, model::Secrets, policy::instance_profile_policy,
    validate::model_path, validate::render,
};
use crate::clients::Clients;
use crate::desired_state;
use crate::desired_state::ClusterDoc;
use crate::pricing;
use crate::resources::aws_diag;
use crate::resources::image_fits;
use crate::resources::image_release;
use crate::resources::planned_image;
use tfplugin::model::Field;
use tfplugin::AttributePath;
use tfplugin::Diagnostic;
use tfplugin::Diagnostics;
use tfplugin::Number;
use tfplugin::PlanRequest;
use tfplugin::Value;

/// A shorter `slurm.resume_timeout` must still leave each published partition room to fail
/// over (`ClusterDoc::check_timeouts`); read only when the timeout changes.
pub(super) async fn partitions_fit(clients: &Clients, doc: &ClusterDoc) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let published = match clients.ssm.list(&desired_state::partitions_path(&doc.name)).await {
        Ok(p) => p,
        Err(e) => return aws_diag("Cannot read the cluster's partitions", &e),
    };
    for p in published {
        let Ok(part) = serde_json::from_str::<desired_state::PartitionDoc>(&p.value) else {
            continue;
        };
        if let Err(e) = doc.check_timeouts(&part) {
            diags.error_at(
                AttributePath::root("slurm").attr("resume_timeout"),
                e.summary,
                format!("{} (partition {})", e.detail, part.name),
            );
        }
    }
    diags
}

/// The head node's image: its Slurm release against slurm.version, its architecture against the
/// head's instance type, its root snapshot against root_volume_size (reads only).
pub(super) async fn head_image_checks(clients: &Clients, planned: &ClusterConfig) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let Some((head, ami)) = planned.head().and_then(|h| Some((h, h.ami_id.as_str()?))) else {
        return diags;
    };
    let Some(image) = planned_image(clients, ami, &mut diags).await else {
        return diags;
    };
    let at = || AttributePath::root("head_node");
    if let Some(version) = planned.slurm_version() {
        diags.extend(image_release(&image, version, at().attr("ami_id")));
    }
    let types = match head.instance_type.known() {
        Some(t) => clients
            .ec2
            .instance_types(std::slice::from_ref(t))
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };
    diags.extend(image_fits(
        &image,
        head.root_volume_size.known().copied(),
        &types,
        at().attr("instance_type"),
        at().attr("root_volume_size"),
    ));
    diags
}

/// The on-demand cost per hour of the head and login nodes; unknown while their types or
/// count are.
pub(super) fn fixed_cost(v: &Value, overrides: &[(String, f64)]) -> Field<Number> {
    let Ok(FixedNodes {
        head_node: head,
        login_nodes: login,
    }) = view::<FixedNodes>(v)
    else {
        return Field::Unknown;
    };
    let count = u32::try_from(login.count).unwrap_or(0);
    let controllers = if head.backup_controller { 2 } else { 1 };
    let usage = pricing::max_usage(
        &[
            (head.instance_type, controllers, 0, 0),
            (login.instance_type, count, 0, 0),
        ],
        overrides,
    );
    usage
        .hourly_cost
        .and_then(|c| Number::parse(&format!("{c:.2}")).ok())
        .into()
}

/// The cluster's id, parameter and instance profile policy (with the user's secrets, which
/// must be in the cluster's region), and its tags.
pub(super) fn plan_identity(clients: &Clients, req: &mut PlanRequest) {
    clients.plan_tags_all(&mut req.planned);
    let Ok(planned) = ClusterConfig::of_state(&req.planned) else {
        return;
    };
    if let Some(name) = planned.name.as_str() {
        let roles = planned
            .head()
            .and_then(|h| h.node_role_arns.known())
            .cloned()
            .unwrap_or_default();
        let password = AttributePath::root("accounting").attr("password_secret_arn");
        let settings = AttributePath::root("mfa").attr("settings_secret_arn");
        let mut secrets = Vec::new();
        for (at, what, arn) in [
            (
                password,
                "the password's",
                planned.accounting.known().and_then(|a| a.password_secret_arn.known()),
            ),
            (
                settings,
                "the second factor's settings'",
                planned.mfa.known().and_then(|m| m.settings_secret_arn.known()),
            ),
        ] {
            let Some(arn) = arn else { continue };
            let region = crate::resources::checks::secret_arn_region(arn);
            if let Some(region) = region.filter(|r| *r != clients.aws.region) {
                req.diagnostics.error_at(
                    at,
                    format!("{what} secret is in {region}, the cluster in {}", clients.aws.region),
                    "Nodes read it in the cluster's region: replicate the secret there (Secrets Manager \
                     replica regions) and give the replica's ARN.",
                );
            }
            secrets.push(arn.clone());
        }
        let policy = instance_profile_policy(name, &roles, &secrets);
        mark(req, |m| {
            m.id = known(&name.to_string());
            m.desired_state_parameter = Field::Known(desired_state::cluster_param(name));
            m.instance_profile_policy = Field::Known(policy);
        });
    }
}

/// Changes the plan's computed attributes through [`Computed`].
fn mark(req: &mut PlanRequest, change: impl FnOnce(&mut Computed)) {
    if let Err(d) = record(&mut req.planned, change) {
        req.diagnostics.extend(d);
    }
}

/// The cluster-wide slurm.conf, rendered from a configuration known whole (Slurm's objections
/// are the plan's), else unknown.
pub(super) fn plan_slurm_conf(clients: &Clients, req: &mut PlanRequest, munge: &str) {
    if req.config.is_wholly_known() {
        let secrets = Secrets {
            region: &clients.aws.region,
            munge_arn: munge,
            password_arn: None,
        };
        match Cluster::of(&req.config).map(|m| render(&m.doc(secrets))) {
            Ok(Ok(conf)) => mark(req, |m| m.slurm_conf = Field::Known(conf)),
            Ok(Err(errors)) => {
                for e in errors {
                    req.diagnostics.error_at(model_path(&e.path), e.summary, e.detail);
                }
            }
            Err(e) => req
                .diagnostics
                .push(e.diagnostic("The cluster's configuration cannot be read")),
        }
    } else {
        mark(req, |m| m.slurm_conf = Field::Unknown);
    }
}

/// Checks that read AWS: the instance types against the guardrails, the head's image, the key
/// pair, and the Slurm upgrade path.
pub(super) async fn plan_reads(clients: &Clients, req: &PlanRequest) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let (Ok(planned), Ok(prior)) = (
        ClusterConfig::of_state(&req.planned),
        ClusterConfig::of_state(&req.prior),
    ) else {
        return diags;
    };
    let head_type = planned.head().and_then(|h| h.instance_type.as_str());
    let login_type = planned.login_nodes.known().and_then(|l| l.instance_type.as_str());
    for (t, at) in [(head_type, "head_node"), (login_type, "login_nodes")] {
        let Some(t) = t else { continue };
        if !clients.limits.allowed_instance_types.is_empty()
            && !pricing::instance_type_allowed(t, &clients.limits.allowed_instance_types)
        {
            diags.push(
                Diagnostic::error(
                    format!("{t} is not in guardrails.allowed_instance_types"),
                    format!("Allowed: {}.", clients.limits.allowed_instance_types.join(", ")),
                )
                .at(AttributePath::root(at).attr("instance_type")),
            );
        }
    }
    // The head's image against slurm.version, its type and root volume, when any is new.
    let image = |v: &ClusterConfig| {
        let h = v.head().cloned().unwrap_or_default();
        let version = v.slurm.known().map(|s| s.version.clone()).unwrap_or_default();
        (h.ami_id, version, h.instance_type, h.root_volume_size)
    };
    if req.prior.is_null() || image(&planned) != image(&prior) {
        diags.extend(head_image_checks(clients, &planned).await);
    }
    let key = |v: &ClusterConfig| v.head().and_then(|h| h.key_name.known()).cloned();
    if let Some(name) = key(&planned).filter(|k| key(&prior).as_ref() != Some(k)) {
        match clients.ec2.key_pair_exists(&name).await {
            Ok(true) => {}
            Ok(false) => diags.error_at(
                AttributePath::root("head_node").attr("key_name"),
                format!("there is no key pair {name:?} in {}", clients.aws.region),
                "Create or import it first (aws_key_pair), or give the name of one of this account's key pairs in the region.",
            ),
            Err(e) => diags.extend(aws_diag("Cannot describe key pairs", &e)),
        }
    }
    diags.extend(state_snapshot_checks(clients, req.prior.is_null(), &planned, &prior).await);
    // A running cluster takes only the upgrades Slurm supports.
    if let (Some(from), Some(to)) = (prior.slurm_version(), planned.slurm_version()) {
        if let Err(e) = slurm_model::check_upgrade(from, to) {
            diags.error_at(AttributePath::root("slurm").attr("version"), e.summary, e.detail);
        }
    }
    diags
}

/// `head_node.state_snapshot_id`: on a create, a completed snapshot no larger than the state
/// volume; on a running cluster, a change is said to do nothing.
async fn state_snapshot_checks(
    clients: &Clients,
    creating: bool,
    planned: &ClusterConfig,
    prior: &ClusterConfig,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let at = || AttributePath::root("head_node").attr("state_snapshot_id");
    let snapshot = |c: &ClusterConfig| c.head().and_then(|h| h.state_snapshot_id.known()).cloned();
    let wanted = snapshot(planned);
    if !creating {
        if wanted != snapshot(prior) {
            diags.push(
                Diagnostic::warning(
                    "state_snapshot_id is read when the cluster is created",
                    "The running cluster keeps its state volume; the new value does nothing to it.",
                )
                .at(at()),
            );
        }
        return diags;
    }
    let Some(id) = wanted else {
        return diags;
    };
    let size = planned.head().and_then(|h| h.state_volume_size.known().copied());
    match clients.ec2.snapshot_size(&id).await {
        Ok(None) => diags.error_at(
            at(),
            format!("there is no snapshot {id:?} in {}", clients.aws.region),
            "Give a snapshot of this account and region, e.g. a deleted cluster's final snapshot \
             (tag hpcforge:role = head-state-final).",
        ),
        Ok(Some((state, _))) if state != "completed" => diags.error_at(
            at(),
            format!("snapshot {id} is {state}"),
            "A volume is made from a completed snapshot: plan again once it is.",
        ),
        Ok(Some((_, gib))) if size.is_some_and(|s| s < i64::from(gib)) => diags.error_at(
            at(),
            format!("snapshot {id} is {gib} GiB, more than state_volume_size"),
            format!("Set head_node.state_volume_size to at least {gib}."),
        ),
        Ok(Some(_)) => {}
        Err(e) => diags.extend(aws_diag("Cannot describe the state snapshot", &e)),
    }
    diags
}

/// What apply computes or launches becomes unknown: /home's file system, a new head node, the
/// login nodes, the document's version; a state volume cannot shrink.
/// The backup controller on an update: set when the cluster is created (turning it on or off
/// would move slurmctld's state between the head's volume and the shared EFS, which is not
/// built); relaunched with a new head (the same image and type) or when it was lost.
fn backup_plan(req: &mut PlanRequest, prior: &ClusterConfig, planned: &ClusterConfig, head_relaunch: bool) {
    let backup = |c: &ClusterConfig| c.head().and_then(|h| h.backup_controller.known().copied());
    let (Some(was), Some(now)) = (backup(prior), backup(planned)) else {
        return;
    };
    if was != now {
        let name = planned.name.as_str().unwrap_or_default();
        req.diagnostics.push(
            Diagnostic::error(
                "backup_controller is set when the cluster is created",
                format!(
                    "Cluster {name} was created with backup_controller = {was}. Turning the backup controller on \
                     or off on a running cluster would move slurmctld's saved state between the head's volume and \
                     a shared file system, which hpcforge does not do yet. Keep backup_controller = {was}, or create \
                     a new cluster with backup_controller = {now}."
                ),
            )
            .at(AttributePath::root("head_node").attr("backup_controller")),
        );
        return;
    }
    if now && (head_relaunch || !prior.backup_controller_instance_id.is_set()) {
        mark(req, |m| m.backup_controller_instance_id = Field::Unknown);
    }
}

pub(super) fn plan_unknowns(req: &mut PlanRequest) {
    let (Ok(planned), Ok(prior)) = (
        ClusterConfig::of_state(&req.planned),
        ClusterConfig::of_state(&req.prior),
    ) else {
        return;
    };
    // The file system for /home: the given one, or the cluster's own (made at apply).
    let given_home = planned.home.known().and_then(|h| h.efs_id.known()).cloned();
    let make_home = given_home.is_none() && managed_home(&req.prior).is_none();
    mark(req, |m| match given_home {
        Some(id) => m.home_file_system_id = Field::Known(id),
        None if make_home => m.home_file_system_id = Field::Unknown,
        None => {}
    });
    if req.prior.is_null() {
        mark(req, |m| {
            m.login_node_ids = Field::Unknown;
            m.login_node_private_ips = Field::Unknown;
            m.desired_state_version = Field::Unknown;
            m.head_node_network_interface_id = Field::Unknown;
            m.state_volume_id = Field::Unknown;
        });
        return;
    }
    // A head node terminated outside Terraform is launched again, and a changed image,
    // type or root volume launches a new one: in place, on the same address. A cluster made
    // before heads had a kept interface gets one (and a new address with its next head).
    let relaunch = !prior.head_node_instance_id.is_set() || head::needs_new_instance(&req.prior, &req.planned);
    let new_interface = !prior.head_node_network_interface_id.is_set();
    mark(req, |m| {
        if relaunch {
            m.head_node_instance_id = Field::Unknown;
        }
        if new_interface {
            m.head_node_network_interface_id = Field::Unknown;
            m.state_volume_id = Field::Unknown;
            if relaunch {
                m.head_node_private_ip = Field::Unknown;
            }
        }
    });
    let size = |v: &ClusterConfig| v.head().and_then(|h| h.state_volume_size.known().copied());
    if let (Some(volume), Some(was), Some(now)) = (prior.state_volume_id.as_str(), size(&prior), size(&planned)) {
        if now < was {
            req.diagnostics.push(
                Diagnostic::error(
                    "the state volume cannot shrink",
                    format!(
                        "The volume {volume} keeps the cluster's state and is {was} GiB; EBS volumes only grow. \
                         Keep state_volume_size at {was} or more."
                    ),
                )
                .at(AttributePath::root("head_node").attr("state_volume_size")),
            );
        }
    }
    backup_plan(req, &prior, &planned, relaunch);
    // Login nodes share the head's image, key, profile and root volume: a change rolls them.
    // A node lost or failed (dropped by the refresh) is replaced.
    let count = |v: &Value| view::<Logins>(v).map(|l| l.login_nodes.count).ok();
    let recorded = prior.login_node_ids.known().map(|ids| ids.len() as i64);
    if planned.login_nodes != prior.login_nodes
        || head::login_settings_change(&req.prior, &req.planned)
        || recorded != count(&req.planned)
    {
        mark(req, |m| {
            m.login_node_ids = Field::Unknown;
            m.login_node_private_ips = Field::Unknown;
        });
    }
    if req.planned != req.prior {
        mark(req, |m| m.desired_state_version = Field::Unknown);
    }
}
