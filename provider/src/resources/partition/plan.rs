//! hpc_partition's plan: the checks that read EC2 and the cluster's published state, the values
//! derived from the document, and what apply makes unknown.

use super::validate::cluster_checks;
use super::{
    model::record, model::Identity, model::Partition, model::PartitionConfig, model::Placement, model::PoolConfig,
    model::Structure, paths, pool_checks, schema::schema, Published,
};
use crate::clients::Clients;
use crate::desired_state::ClusterDoc;
use crate::desired_state::PartitionDoc;
use crate::pricing;
use crate::resources::aws_diag;
use crate::resources::image_fits;
use crate::resources::planned_image;
use crate::resources::quotas;
use crate::resources::{node_image_release, Stage};
use hpc_aws::ec2::InstanceTypeInfo;
use tfplugin::model::{Field, Model};
use tfplugin::AttributePath;
use tfplugin::Diagnostic;
use tfplugin::Diagnostics;
use tfplugin::Number;
use tfplugin::PlanRequest;
use tfplugin::Value;

tfplugin::model! {
    /// What a partition may reach, which the plan checks against EC2 first.
    pub(super) struct Reach {
        name: String,
        instance_types: Vec<String>,
        max_nodes: i64,
        efa_enabled: bool,
        /// The pools as planned: a pool's values may be known only at apply.
        capacity_pool: Field<Vec<PoolConfig>>,
    }
}

/// The plan's checks (reads only): the instance types against EC2 and the guardrails, the
/// pools' reservations and offerings, then, with the cluster's published state, Slurm's rules,
/// quotas, cost and the derived values. Values not known yet skip what needs them.
pub(super) async fn plan_checks(clients: &Clients, req: &mut PlanRequest) {
    let Ok(reach) = Reach::from_value(&schema().block.with_defaults(&req.planned)) else {
        return;
    };
    // Facts about the instance types: a read, never a change.
    let infos = match clients.ec2.instance_types(&reach.instance_types).await {
        Ok(i) => i,
        Err(e) => return req.diagnostics.extend(aws_diag("Cannot describe instance types", &e)),
    };
    req.diagnostics.extend(type_checks(clients, &reach, &infos));
    let pools = reach.capacity_pool.items();
    req.diagnostics.extend(paths::named(pools, &clients.aws.region));
    req.diagnostics
        .extend(pool_checks::reservations(clients, pools, &reach.instance_types).await);
    // What the pools' zones offer and (below) the account's vCPU quotas, when what the
    // partition may reach is new (refreshes of an unchanged partition ask nothing).
    let extent = |r: &Reach| (r.instance_types.clone(), r.max_nodes, r.capacity_pool.clone());
    let prior = Reach::from_value(&schema().block.with_defaults(&req.prior)).ok();
    let reach_changed = prior.is_none_or(|p| extent(&p) != extent(&reach));
    if reach_changed {
        req.diagnostics
            .extend(pool_checks::offerings(clients, pools, &reach.instance_types).await);
    }
    if req.diagnostics.has_errors() {
        return;
    }
    let model = match Partition::of(&req.planned) {
        Ok(m) => m,
        Err(e) if e.unknown => return,
        Err(e) => {
            return req
                .diagnostics
                .push(e.diagnostic("The planned partition cannot be read"))
        }
    };
    let doc = model.doc(model.cluster(), &infos, &clients.aws.region);
    // Cluster-wide guardrails and the rendered lines need the cluster (reads only).
    let published = match &model.cluster_id {
        Some(cluster) => match Published::read(clients, cluster).await {
            Ok(p) => Some(p),
            Err(d) => return req.diagnostics.extend(d),
        },
        None => None,
    };
    let cdoc = match published.as_ref().map(Published::cluster_doc).transpose() {
        Ok(c) => c.flatten(),
        Err(d) => return req.diagnostics.extend(d),
    };
    if let (true, Some(cdoc)) = (reach_changed, &cdoc) {
        let ec2s = clients.ec2_by_region(model.capacity_pool.iter().map(|p| p.region.as_deref()));
        let diags = paths::check_all(clients, cdoc, &model.capacity_pool, &ec2s).await;
        req.diagnostics.extend(diags);
    }
    if reach_changed {
        let pools: Vec<quotas::PlannedPool> = pools
            .iter()
            .map(|p| quotas::PlannedPool {
                region: p.region.as_str(),
                spot: p.capacity_type.as_str() == Some("spot"),
            })
            .collect();
        let (name, types) = (&reach.name, &reach.instance_types);
        let this = quotas::Reach::planned(name, reach.max_nodes, types, &pools, &infos, &clients.aws.region);
        match quotas::published_reaches(clients, model.cluster(), &model.name).await {
            Ok(others) => req
                .diagnostics
                .extend(quotas::quota_checks(clients, &this, &others).await),
            Err(d) => req.diagnostics.extend(d),
        }
    }
    let diags = set_derived(&mut req.planned, &doc, cdoc.as_ref(), &clients.price_overrides);
    req.diagnostics.extend(diags);
    if let (Some(cdoc), Some(published)) = (&cdoc, &published) {
        let diags = cluster_plan_checks(clients, req, &doc, cdoc, published, &infos).await;
        req.diagnostics.extend(diags);
    }
}

/// Each instance type exists in the region (and has EFA when the partition wants it), and the
/// partition fits the provider's guardrails.
pub(super) fn type_checks(clients: &Clients, reach: &Reach, infos: &[InstanceTypeInfo]) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (i, t) in reach.instance_types.iter().enumerate() {
        match infos.iter().find(|x| &x.instance_type == t) {
            None => diags.push(
                Diagnostic::error(
                    format!("{t:?} is not an EC2 instance type in {}", clients.aws.region),
                    "Check the spelling (e.g. p5.48xlarge) and that the type is offered in this region.",
                )
                .at(AttributePath::root("instance_types").index(i)),
            ),
            Some(info) if reach.efa_enabled && !info.efa_supported => diags.push(
                Diagnostic::error(
                    format!("{t} does not support EFA"),
                    "Remove it from instance_types, or set efa_enabled = false. EFA types include p5, p4d, hpc7a, c7i.48xlarge.",
                )
                .at(AttributePath::root("efa_enabled")),
            ),
            Some(_) => {}
        }
    }
    let max_nodes = u64::try_from(reach.max_nodes).unwrap_or(0);
    for b in pricing::check_partition(&reach.name, &reach.instance_types, max_nodes, &clients.limits) {
        let at = if b.what == "allowed_instance_types" {
            "instance_types"
        } else {
            "max_nodes"
        };
        diags.push(Diagnostic::error(b.summary, b.detail).at(AttributePath::root(at)));
    }
    diags
}

/// With the cluster published: its Slurm release and timeouts, the nodes' image, one default
/// partition, and the cluster's cost guardrails over all its partitions.
pub(super) async fn cluster_plan_checks(
    clients: &Clients,
    req: &PlanRequest,
    doc: &PartitionDoc,
    cdoc: &ClusterDoc,
    published: &Published,
    infos: &[InstanceTypeInfo],
) -> Diagnostics {
    let mut diags = cluster_checks(cdoc, doc);
    // The nodes' image against the cluster's slurm.version, the types and the root volume,
    // when any of them is new.
    let image = |v: &Value| {
        Structure::from_value(v)
            .ok()
            .map(|s| (s.ami_id, s.instance_types, s.root_volume_size))
    };
    if req.prior.is_null() || image(&req.planned) != image(&req.prior) {
        diags.extend(node_image_checks(clients, &req.planned, &cdoc.slurm_version, infos).await);
    }
    let others = published.other_partitions(&doc.name);
    if doc.slurm.default {
        diags.extend(pool_checks::one_default(&doc.name, &others));
    }
    let mut all: Vec<(String, u32, u32, u32)> = others.iter().flat_map(usage_pools).collect();
    all.extend(usage_pools(doc));
    for b in pricing::check_pools(
        &format!("cluster {}", cdoc.name),
        &all,
        &clients.price_overrides,
        &clients.limits,
    ) {
        diags.push(Diagnostic::error(b.summary, b.detail).at(AttributePath::root("max_nodes")));
    }
    diags
}

/// The partition's id (`<cluster>/<name>`, once both are known) and `placement_group`, which
/// follows `efa_enabled` unless the configuration sets it.
pub(super) fn plan_identity(req: &mut PlanRequest) -> Result<(), Diagnostics> {
    let unreadable = |e: tfplugin::model::ModelError| e.into_diagnostics("The planned partition cannot be read");
    let given = Placement::from_value(&req.config)
        .map_err(unreadable)?
        .placement_group
        .is_set();
    tfplugin::model::change(&mut req.planned, &schema().ty(), |p: &mut Placement| {
        if p.placement_group.is_unknown() || !given {
            p.placement_group = p.efa_enabled.clone();
        }
    })
    .map_err(unreadable)?;
    match Identity::from_value(&req.planned).map_err(unreadable)?.id() {
        Some(id) => record(&mut req.planned, |c| c.id = Field::Known(id)),
        None => Ok(()),
    }
}

/// What apply computes becomes unknown: the templates and groups when what they are made of
/// changes, the document's version whenever anything does.
pub(super) fn plan_unknowns(req: &mut PlanRequest) -> Result<(), Diagnostics> {
    let structure = |v: &Value| Structure::from_value(v).ok();
    let changed = req.prior.is_null() || structure(&req.prior) != structure(&req.planned);
    if changed {
        record(&mut req.planned, |c| {
            c.launch_template_ids = Field::Unknown;
            c.placement_group_names = Field::Unknown;
        })?;
    }
    if req.prior.is_null() || req.planned != req.prior {
        record(&mut req.planned, |c| c.desired_state_version = Field::Unknown)?;
    }
    Ok(())
}

/// Values derived from the document (and the cluster's, for the rendered lines): the same
/// function serves plan and read, so an imported or refreshed partition plans clean.
pub(super) fn set_derived(
    v: &mut Value,
    doc: &PartitionDoc,
    cluster: Option<&ClusterDoc>,
    overrides: &[(String, f64)],
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let usage = pricing::max_usage(&usage_pools(doc), overrides);
    let names: Vec<String> = doc
        .to_model()
        .node_sets
        .iter()
        .map(|n| slurm_model::hostlist(&n.name, 1, n.max_nodes.max(1)))
        .collect();
    // Left as it is when the cluster's Slurm refuses the partition (the error says why).
    let rendered = match cluster.map(|c| c.to_model(std::slice::from_ref(doc))) {
        Some(Ok(m)) => Some(slurm_model::partition_lines(&m, &doc.name).into()),
        Some(Err(e)) => {
            diags.error(e.summary, e.detail);
            None
        }
        None => Some(Field::Unknown),
    };
    let recorded = record(v, |c| {
        c.max_vcpus = Field::Known(i64::try_from(usage.vcpus).unwrap_or(i64::MAX));
        c.max_gpus = Field::Known(i64::try_from(usage.gpus).unwrap_or(i64::MAX));
        c.gpu_model = doc.shapes.iter().find_map(|s| s.gpu_model.clone()).into();
        c.estimated_max_hourly_cost = usage
            .hourly_cost
            .and_then(|cost| Number::parse(&format!("{cost:.2}")).ok())
            .into();
        c.node_names = Field::Known(names);
        if let Some(rendered) = rendered {
            c.rendered_partition = rendered;
        }
    });
    diags.extend(recorded.err().unwrap_or_default());
    diags
}

/// The nodes' image (the partition's; pools in other regions bring their own, checked at boot):
/// its Slurm release, its architecture against every type, its root snapshot against the root
/// volume (reads only).
pub(super) async fn node_image_checks(
    clients: &Clients,
    planned: &Value,
    version: &str,
    infos: &[InstanceTypeInfo],
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let Ok(config) = PartitionConfig::from_value(&schema().block.with_defaults(planned)) else {
        return diags;
    };
    let Some(ami) = config.ami_id.as_str() else {
        return diags;
    };
    let Some(image) = planned_image(clients, ami, &mut diags).await else {
        return diags;
    };
    diags.extend(node_image_release(
        &image,
        version,
        AttributePath::root("ami_id"),
        Stage::Plan,
    ));
    diags.extend(image_fits(
        &image,
        config.root_volume_size.known().copied(),
        infos,
        AttributePath::root("instance_types"),
        AttributePath::root("root_volume_size"),
    ));
    diags
}

pub(super) fn usage_pools(doc: &PartitionDoc) -> Vec<(String, u32, u32, u32)> {
    doc.shapes
        .iter()
        .map(|s| (s.instance_type.clone(), doc.max_nodes, s.vcpus, s.gpus))
        .collect()
}
