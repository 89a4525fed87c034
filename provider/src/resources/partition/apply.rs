//! hpc_partition's apply: each pool's placement group and launch templates, the /home mount
//! targets, the published document, the wait for the node agent, and the clean-up of what the
//! prior state had.

use super::events;
use super::paths;
use super::validate::cluster_checks;
use super::{
    cluster_doc, cluster_missing, model::parse_template_key, model::record, model::template_key, model::Computed,
    model::Partition, model::Pool, model::Structure, APPLY_TIMEOUT,
};
use crate::clients::Clients;
use crate::desired_state;
use crate::desired_state::boot::Role;
use crate::desired_state::tag;
use crate::desired_state::ClusterDoc;
use crate::pricing;
use crate::resources::aws_diag;
use crate::resources::or_stop;
use crate::resources::owner;
use crate::resources::{node_image_release, planned_image, Stage};
use hpc_aws::ec2::Ec2;
use hpc_aws::ec2::InstanceTypeInfo;
use hpc_aws::ec2::LaunchTemplateSpec;
use hpc_aws::ec2::ReservationTarget;
use hpc_aws::ec2::RootVolume;
use std::collections::BTreeMap;
use std::time::Duration;
use tfplugin::model::{Field, Model};
use tfplugin::timeouts;
use tfplugin::ApplyOutcome;
use tfplugin::AttributePath;
use tfplugin::Diagnostic;
use tfplugin::Diagnostics;
use tfplugin::Value;

/// Create and update: launch templates and placement groups per pool, then the document.
pub(super) async fn apply(ctx: tfplugin::Ctx, prior: Value, planned: Value) -> ApplyOutcome {
    let clients = match Clients::of(&ctx) {
        Ok(c) => c,
        Err(d) => return ApplyOutcome::failed(prior, d),
    };
    let model = match Partition::of(&planned) {
        Ok(m) => m,
        Err(e) => return ApplyOutcome::failed(prior, e.into_diagnostics("The planned partition cannot be read")),
    };
    let mut state = planned.clone();
    let id = format!("{}/{}", model.cluster(), model.name);
    if let Err(d) = record(&mut state, |c| c.id = Field::Known(id)) {
        return ApplyOutcome::failed(prior, d);
    }
    let owned = owned(model.cluster(), &model.name);
    if prior.is_null() {
        if let Err(d) = owner::refuse_taken(clients, &owned, |_| String::new()).await {
            return ApplyOutcome::failed(prior, d);
        }
    }
    let result = publish(&ctx, clients, &prior, &model, &mut state).await;
    let op = if prior.is_null() { "create" } else { "update" };
    let outcome = match result {
        Ok(version) if model.wait_for_apply => {
            let timeout = timeouts::get(&planned, op, APPLY_TIMEOUT);
            match wait_applied(&ctx, clients, model.cluster(), &model.name, version, timeout).await {
                Ok(warning) => ApplyOutcome {
                    state,
                    diagnostics: warning.map(Diagnostics::from).unwrap_or_default(),
                },
                // Published but refused (or not applied in time): the new document is what exists.
                Err(d) => ApplyOutcome::failed(state, d),
            }
        }
        Ok(_) => ApplyOutcome::ok(state),
        Err(d) if prior.is_null() => {
            // Record what exists so nothing leaks; Terraform taints it.
            let made = Computed::from_value(&state).is_ok_and(|c| c.launch_template_ids.known().is_some());
            ApplyOutcome::failed(if made { state } else { Value::Null }, d)
        }
        Err(d) => ApplyOutcome::failed(prior, d),
    };
    let tags_all: Vec<(String, String)> = model.tags_all.clone().unwrap_or_default().into_iter().collect();
    owner::claimed(clients, &owned, "{}", &tags_all, outcome).await
}

/// The partition's name as something a state owns (see [`owner`]).
fn owned(cluster: &str, partition: &str) -> owner::Name {
    owner::Name {
        param: desired_state::partition_owner_param(cluster, partition),
        document: desired_state::partition_param(cluster, partition),
        what: format!("partition named {partition:?} in cluster {cluster:?}"),
        resource: "hpc_partition",
        import_id: format!("{cluster}/{partition}"),
    }
}

/// A new image's Slurm release against the cluster's as it is now: the plan read the release
/// before an upgrade of the cluster in the same apply (done first: the partition depends on
/// the cluster) and only warned about a newer image.
async fn image_release_now(clients: &Clients, prior: &Value, model: &Partition, cdoc: &ClusterDoc) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let before = Structure::from_value(prior).map(|s| s.ami_id).unwrap_or_default();
    if before.as_str() == Some(model.ami_id.as_str()) {
        return diags;
    }
    if let Some(image) = planned_image(clients, &model.ami_id, &mut diags).await {
        diags.extend(node_image_release(
            &image,
            &cdoc.slurm_version,
            AttributePath::root("ami_id"),
            Stage::Apply,
        ));
    }
    diags
}

/// What an apply made in the pools: launch templates by key, a placement group per pool
/// (empty without), and every name to keep when the prior's are cleaned up.
#[derive(Default)]
pub(super) struct Made {
    templates: BTreeMap<String, String>,
    groups: Vec<String>,
    keep: Vec<String>,
    home_zones: Vec<(String, String)>,
}

/// What every pool's templates are made from.
pub(super) struct Launch<'a> {
    clients: &'a Clients,
    cluster: &'a ClusterDoc,
    model: &'a Partition,
    infos: &'a [InstanceTypeInfo],
    tags: Vec<(String, String)>,
}

/// Makes the pools' templates and groups, publishes the document and removes what the
/// prior state had that is gone; returns the published version.
pub(super) async fn publish(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    prior: &Value,
    model: &Partition,
    state: &mut Value,
) -> Result<i64, Diagnostics> {
    let (cluster, name) = (model.cluster(), model.name.as_str());
    let cdoc = cluster_doc(clients, cluster)
        .await?
        .ok_or_else(|| cluster_missing(cluster))?;
    checked_now(clients, prior, model, &cdoc).await?;
    let infos = clients
        .ec2
        .instance_types(&model.instance_types)
        .await
        .map_err(|e| aws_diag("Cannot describe instance types", &e))?;
    let tags_all: Vec<(String, String)> = model.tags_all.clone().unwrap_or_default().into_iter().collect();
    let mut tags = tags_all.clone();
    tags.push((tag::CLUSTER.into(), cluster.to_string()));
    tags.push((tag::PARTITION.into(), tag::partition_value(cluster, name)));
    let launch = Launch {
        clients,
        cluster: &cdoc,
        model,
        infos: &infos,
        tags,
    };
    let ec2s = clients.ec2_by_region(model.capacity_pool.iter().map(|p| p.region.as_deref()));
    // A connection made in the same apply was not known at plan.
    let reached = paths::check_all(clients, &cdoc, &model.capacity_pool, &ec2s).await;
    if reached.has_errors() {
        return Err(reached);
    }
    let made = ensure_pools(&launch, &ec2s).await?;
    record(state, |c| {
        c.launch_template_ids = Field::Known(made.templates.clone());
        c.placement_group_names = Field::Known(made.groups.clone());
    })?;
    home_mount_targets(ctx, clients, &cdoc, &made.home_zones).await?;
    // Before the document names the pools, so the agent finds each region's queue.
    events::ensure(clients, model, &launch.tags)
        .await
        .map_err(|e| aws_diag("Cannot route EC2's instance events to the head node", &e))?;
    let mut published = model.clone();
    published.launch_template_ids = Some(made.templates);
    published.placement_group_names = Some(made.groups);
    let version = put_document(clients, &published, &infos, &tags_all).await?;
    record(state, |c| c.desired_state_version = Field::Known(version))?;
    if !prior.is_null() {
        let prior = Partition::of(prior).map_err(|e| e.into_diagnostics("The partition's state cannot be read"))?;
        remove_templates(clients, &prior, &ec2s, &made.keep)
            .await
            .map_err(|e| aws_diag("Cannot remove old launch templates", &e))?;
        let now = events::regions(clients, model);
        let gone = events::regions(clients, &prior)
            .into_iter()
            .filter(|r| !now.contains(r));
        events::remove(clients, cluster, name, gone)
            .await
            .map_err(|e| aws_diag("Cannot remove the event route of a region the pools left", &e))?;
    }
    Ok(version)
}

/// What the plan checked when the cluster already existed; a cluster made in the same apply
/// is known only now, before anything is launched or published.
async fn checked_now(
    clients: &Clients,
    prior: &Value,
    model: &Partition,
    cdoc: &ClusterDoc,
) -> Result<(), Diagnostics> {
    let checks = cluster_checks(cdoc, &model.doc(model.cluster(), &[], &clients.aws.region));
    if checks.has_errors() {
        return Err(checks);
    }
    let release = image_release_now(clients, prior, model, cdoc).await;
    if release.has_errors() {
        return Err(release);
    }
    Ok(())
}

/// Every pool's placement group and launch templates, each in its region.
async fn ensure_pools(launch: &Launch<'_>, ec2s: &BTreeMap<String, Ec2>) -> Result<Made, Diagnostics> {
    let clients = launch.clients;
    let mut made = Made::default();
    for (i, pool) in launch.model.capacity_pool.iter().enumerate() {
        let region = pool.region.clone().unwrap_or_else(|| clients.aws.region.clone());
        let ec2 = ec2s
            .get(&region)
            .cloned()
            .unwrap_or_else(|| clients.aws.ec2_in(&region));
        ensure_pool(launch, &ec2, i, pool, &region, &mut made).await?;
    }
    Ok(made)
}

/// Publishes the partition's document (each shape with its on-demand price, for the agent's
/// cost guardrail); the parameter's new version.
async fn put_document(
    clients: &Clients,
    published: &Partition,
    infos: &[InstanceTypeInfo],
    tags_all: &[(String, String)],
) -> Result<i64, Diagnostics> {
    let cluster = published.cluster();
    let mut doc = published.doc(cluster, infos, &clients.aws.region);
    for shape in &mut doc.shapes {
        shape.hourly_price =
            pricing::on_demand_price(&shape.instance_type, &clients.price_overrides).map(|p| format!("{p:.4}"));
    }
    let json = serde_json::to_string(&doc)
        .map_err(|e| Diagnostics::from(Diagnostic::error("Cannot encode desired state", e.to_string())))?;
    clients
        .ssm
        .put(
            &desired_state::partition_param(cluster, &published.name),
            &json,
            tags_all,
        )
        .await
        .map_err(|e| aws_diag("Cannot publish the partition", &e))
}

/// Pool `i`'s placement group (when the partition has them) and a launch template per
/// instance type, in `region`.
pub(super) async fn ensure_pool(
    l: &Launch<'_>,
    ec2: &Ec2,
    i: usize,
    pool: &Pool,
    region: &str,
    made: &mut Made,
) -> Result<(), Diagnostics> {
    let (m, clients) = (l.model, l.clients);
    let zones = ec2
        .subnet_zones(&pool.subnet_ids)
        .await
        .map_err(|e| aws_diag(&format!("capacity_pool {i}: subnets"), &e))?;
    let home_region = region == clients.aws.region;
    if home_region {
        made.home_zones.extend(zones);
    }
    let pg = if m.placement_group.unwrap_or(m.efa_enabled) {
        let n = pg_name(m.cluster(), &m.name, i);
        ec2.ensure_placement_group(&n, &l.tags)
            .await
            .map_err(|e| aws_diag("Cannot create placement group", &e))?;
        made.keep.push(n.clone());
        Some(n)
    } else {
        None
    };
    made.groups.push(pg.clone().unwrap_or_default());
    for t in &m.instance_types {
        let Some(info) = l.infos.iter().find(|x| &x.instance_type == t) else {
            continue;
        };
        let spec = LaunchTemplateSpec {
            name: lt_name(m.cluster(), &m.name, i, t),
            image_id: pool.ami_id.clone().unwrap_or_else(|| m.ami_id.clone()),
            instance_type: Some(t.clone()),
            key_name: None,
            security_group_ids: pool_security_groups(l.cluster, pool, !home_region),
            instance_profile_arn: m
                .instance_profile_arn
                .clone()
                .or_else(|| l.cluster.head_node.instance_profile_arn.clone()),
            // The desired state lives in the cluster's home region, wherever the pool is.
            user_data: Some(desired_state::boot::user_data(
                Role::Compute,
                m.cluster(),
                &clients.aws.region,
                Some(&m.name),
                m.user_data_extra.as_deref(),
            )),
            root_volume: Some(RootVolume {
                size_gib: i32::try_from(m.root_volume_size).unwrap_or(i32::MAX),
                volume_type: "gp3".into(),
                encrypted: true,
                kms_key_id: None,
            }),
            efa_network_cards: if m.efa_enabled { efa_cards(info) } else { Vec::new() },
            placement_group: pg.clone(),
            capacity_reservation: pool.capacity_reservation_id.clone().map(|id| ReservationTarget {
                id,
                capacity_block: pool.capacity_type == "capacity_block",
            }),
            tags: l.tags.clone(),
        };
        let (id, _) = ec2
            .ensure_launch_template(&spec)
            .await
            .map_err(|e| aws_diag("Cannot create launch template", &e))?;
        made.keep.push(spec.name.clone());
        made.templates.insert(template_key(i, t), id);
    }
    Ok(())
}

/// Deletes launch templates and placement groups recorded in `prior` that `keep` does not list.
pub(super) async fn remove_templates(
    clients: &Clients,
    prior: &Partition,
    ec2s: &BTreeMap<String, Ec2>,
    keep: &[String],
) -> hpc_aws::Result<()> {
    let (cluster, name) = (prior.cluster(), prior.name.as_str());
    let region_of = |i: usize| {
        prior
            .capacity_pool
            .get(i)
            .and_then(|p| p.region.clone())
            .unwrap_or_else(|| clients.aws.region.clone())
    };
    for key in prior.launch_template_ids.iter().flat_map(BTreeMap::keys) {
        let Some((i, t)) = parse_template_key(key) else {
            continue;
        };
        let lt = lt_name(cluster, name, i, t);
        if keep.contains(&lt) {
            continue;
        }
        if let Some(ec2) = ec2s.get(&region_of(i)) {
            ec2.delete_launch_template(&lt).await?;
        }
    }
    for (i, pg) in prior.placement_group_names.iter().flatten().enumerate() {
        if pg.is_empty() || keep.contains(pg) {
            continue;
        }
        if let Some(ec2) = ec2s.get(&region_of(i)) {
            ec2.delete_placement_group(pg).await?;
        }
    }
    Ok(())
}

/// Waits until the cluster's agent reports `version` of this partition applied. No report at
/// all (no agent yet) is a warning, not a wait.
pub(super) async fn wait_applied(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    cluster: &str,
    name: &str,
    version: i64,
    timeout: Duration,
) -> Result<Option<Diagnostic>, Diagnostics> {
    let status = desired_state::status_param(cluster);
    let ssm = clients.ssm.clone();
    if ssm
        .get(&status)
        .await
        .map_err(|e| aws_diag("Cannot read the agent's status", &e))?
        .is_none()
    {
        return Ok(Some(Diagnostic::warning(
            format!("not waiting for cluster {cluster}'s node agent"),
            format!("No agent has reported to {status} yet (the head node may still be booting); partition {name} is published and will be applied when it starts."),
        )));
    }
    let what = format!("cluster {cluster}'s node agent to apply partition {name} version {version}");
    let poll = hpc_aws::wait::until(&what, timeout, hpc_aws::wait::Backoff::default(), || {
        let ssm = ssm.clone();
        let status = status.clone();
        async move {
            let Some(p) = ssm.get(&status).await? else {
                return Ok(hpc_aws::wait::Poll::Pending("no report".into()));
            };
            // A report this provider cannot read is one it waits past (an agent of another release).
            let report: desired_state::StatusDoc = serde_json::from_str(&p.value).unwrap_or_default();
            let seen = report.partition_version(name);
            if seen < version {
                return Ok(hpc_aws::wait::Poll::Pending(format!("agent at version {seen}")));
            }
            Ok(hpc_aws::wait::Poll::Done(report.error))
        }
    });
    match or_stop(ctx, "waiting for the node agent", poll).await {
        Ok(None) => Ok(None),
        Ok(Some(error)) => Err(Diagnostic::error(
            format!("the node agent refused partition {name}"),
            format!("Slurm keeps its previous configuration. The agent reported: {error}"),
        )
        .into()),
        Err(e) => Err(aws_diag("The node agent did not apply the partition", &e)),
    }
}

/// The cluster's own /home file system gets a mount target in each zone of the partition's pools
/// in the cluster's region, before any node there boots (the user's own file system is theirs
/// to reach; nodes of pools in other regions mount it by a mount target's address).
pub(super) async fn home_mount_targets(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    cdoc: &ClusterDoc,
    zones: &[(String, String)],
) -> Result<(), Diagnostics> {
    let (true, Some(fs)) = (cdoc.home_efs_managed, &cdoc.home_efs_id) else {
        return Ok(());
    };
    let groups: Vec<String> = cdoc.cluster_group().into_iter().cloned().collect();
    let added = clients.efs.ensure_mount_targets(fs, zones, &groups, APPLY_TIMEOUT);
    or_stop(ctx, "adding /home mount targets", added)
        .await
        .map_err(|e| aws_diag("Cannot reach the cluster's /home from the partition's zones", &e))
}

/// Compute nodes get the cluster group (not the head and login nodes' SSH group) and the pool's
/// own groups; a pool in another region gets only its own (groups are regional).
pub(super) fn pool_security_groups(doc: &ClusterDoc, pool: &Pool, other_region: bool) -> Vec<String> {
    let mut sgs = if other_region {
        Vec::new()
    } else {
        doc.cluster_group().into_iter().cloned().collect()
    };
    sgs.extend(pool.security_group_ids.iter().flatten().cloned());
    sgs
}

pub(super) fn efa_cards(t: &InstanceTypeInfo) -> Vec<i32> {
    let max = usize::try_from(t.max_efa_interfaces.max(1)).unwrap_or(1);
    let mut cards = if t.network_cards.is_empty() {
        vec![0]
    } else {
        t.network_cards.clone()
    };
    cards.truncate(max);
    cards
}

pub(super) fn lt_name(cluster: &str, partition: &str, pool: usize, instance_type: &str) -> String {
    format!(
        "hpc-{cluster}-{partition}-{pool}-{}",
        desired_state::type_tag(instance_type)
    )
}

pub(super) fn pg_name(cluster: &str, partition: &str, pool: usize) -> String {
    format!("hpc-{cluster}-{partition}-{pool}")
}
