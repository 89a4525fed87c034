//! hpc_partition's plan: the checks that read EC2 and the cluster's published state, the values
//! derived from the document, and what apply makes unknown.

use super::validate::model_path;
use super::{
    apply::pool_clients, model::Partition, model::PoolConfig, paths, pool_checks, schema::schema,
    validate::slurm_checks, validate::PROBE_SLURM_VERSION, Published,
};
use crate::clients::Clients;
use crate::convert;
use crate::convert::int;
use crate::convert::of_list;
use crate::convert::string;
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
    req.diagnostics.extend(paths::named(&req.planned, &clients.aws.region));
    let p = &req.planned;
    let pools = reach.capacity_pool.items();
    req.diagnostics
        .extend(pool_checks::reservations(clients, pools, &reach.instance_types).await);
    // What the pools' zones offer and (below) the account's vCPU quotas, when what the
    // partition may reach is new (refreshes of an unchanged partition ask nothing).
    let reach_changed = req.prior.is_null()
        || ["instance_types", "max_nodes", "capacity_pool"]
            .iter()
            .any(|a| p.attr(a) != req.prior.attr(a));
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
        let ec2s = pool_clients(clients, model.capacity_pool.iter().map(|p| p.region.as_deref()));
        let diags = paths::check_all(clients, cdoc, &model.capacity_pool, &ec2s).await;
        req.diagnostics.extend(diags);
    }
    if reach_changed {
        let this = quotas::Reach::planned(&req.planned, &infos, &clients.aws.region);
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
        (
            v.attr("ami_id").clone(),
            v.attr("instance_types").clone(),
            v.attr("root_volume_size").clone(),
        )
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

/// What apply computes becomes unknown: the templates and groups when what they are made of
/// changes, the document's version whenever anything does.
pub(super) fn plan_unknowns(req: &mut PlanRequest) {
    let structural = [
        "instance_types",
        "capacity_pool",
        "efa_enabled",
        "placement_group",
        "ami_id",
        "root_volume_size",
        "instance_profile_arn",
        "user_data_extra",
    ];
    let changed = req.prior.is_null() || structural.iter().any(|a| req.prior.attr(a) != req.planned.attr(a));
    if changed {
        req.planned.set_attr("launch_template_ids", Value::Unknown);
        req.planned.set_attr("placement_group_names", Value::Unknown);
    }
    if req.prior.is_null() || req.planned != req.prior {
        req.planned.set_attr("desired_state_version", Value::Unknown);
    }
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
    v.set_attr("max_vcpus", Value::int(usage.vcpus as i64));
    v.set_attr("max_gpus", Value::int(usage.gpus as i64));
    v.set_attr(
        "gpu_model",
        convert::of_string(doc.shapes.iter().find_map(|s| s.gpu_model.clone())),
    );
    v.set_attr(
        "estimated_max_hourly_cost",
        usage
            .hourly_cost
            .and_then(|c| tfplugin::Number::parse(&format!("{c:.2}")).ok())
            .map(Value::Number)
            .unwrap_or(Value::Null),
    );
    let model = doc.to_model();
    let names: Vec<String> = model
        .node_sets
        .iter()
        .map(|n| slurm_model::hostlist(&n.name, 1, n.max_nodes.max(1)))
        .collect();
    v.set_attr("node_names", of_list(Some(&names)));
    match cluster.map(|c| c.to_model(std::slice::from_ref(doc))) {
        Some(Ok(m)) => v.set_attr(
            "rendered_partition",
            convert::of_string(slurm_model::partition_lines(&m, &doc.name)),
        ),
        Some(Err(e)) => diags.error(e.summary, e.detail),
        None => v.set_attr("rendered_partition", Value::Unknown),
    }
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
    let Some(ami) = string(planned.attr("ami_id")) else {
        return diags;
    };
    let Some(image) = planned_image(clients, &ami, &mut diags).await else {
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
        int(planned.attr("root_volume_size")),
        infos,
        AttributePath::root("instance_types"),
        AttributePath::root("root_volume_size"),
    ));
    diags
}

/// The cluster's rules across the two resources: failover must fit in ResumeTimeout, and the
/// partition's settings must be ones the cluster's Slurm release has (validation checked them
/// against the latest release; an older cluster's is checked again here).
pub(super) fn cluster_checks(cluster: &ClusterDoc, doc: &PartitionDoc) -> Diagnostics {
    let mut diags = Diagnostics::new();
    if let Err(e) = cluster.check_timeouts(doc) {
        diags.error_at(model_path(&e.path), e.summary, e.detail);
    }
    if cluster.slurm_version != PROBE_SLURM_VERSION {
        diags.extend(slurm_checks(doc, &cluster.slurm_version));
    }
    diags
}

pub(super) fn usage_pools(doc: &PartitionDoc) -> Vec<(String, u32, u32, u32)> {
    doc.shapes
        .iter()
        .map(|s| (s.instance_type.clone(), doc.max_nodes, s.vcpus, s.gpus))
        .collect()
}
