//! hpc_partition's checks of a configuration alone (no AWS): names, counts, types,
//! strategies, durations, pools, and Slurm's own rules for the partition's lines.

use super::model::{PartitionConfig, PoolConfig};
use super::{CAPACITY_TYPES, STRATEGIES};
use crate::desired_state;
use crate::desired_state::ClusterDoc;
use crate::desired_state::PartitionDoc;
use crate::desired_state::ScalingStrategy;
use crate::desired_state::ShapeDoc;
use crate::desired_state::SCHEMA;
use crate::resources::checks;
use crate::resources::valid_name;
use tfplugin::timeouts;
use tfplugin::AttributePath;
use tfplugin::Diagnostics;

/// The name, the node counts and the instance types.
pub(super) fn shape_checks(c: &PartitionConfig, diags: &mut Diagnostics) {
    if let Some(name) = c.name.as_str() {
        if let Err(why) = valid_name(name, 24) {
            diags.error_at(
                AttributePath::root("name"),
                format!("partition name {name:?} is not valid"),
                why,
            );
        }
    }
    let (min, max) = (c.min_nodes.known().copied(), c.max_nodes.known().copied());
    if let Some(m) = max {
        if m < 1 {
            diags.error_at(
                AttributePath::root("max_nodes"),
                "max_nodes must be at least 1",
                "Set the most nodes the partition may run.",
            );
        }
    }
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            diags.error_at(
                AttributePath::root("min_nodes"),
                format!("min_nodes {lo} is more than max_nodes {hi}"),
                "Lower min_nodes or raise max_nodes.",
            );
        }
    }
    if let Some(lo) = min.filter(|n| *n < 0) {
        diags.error_at(
            AttributePath::root("min_nodes"),
            format!("min_nodes {lo} is negative"),
            "Use 0 or more.",
        );
    }
    if let Some(types) = c.instance_types.known() {
        instance_type_checks(types, diags);
    }
}

fn instance_type_checks(types: &[String], diags: &mut Diagnostics) {
    if types.is_empty() {
        diags.error_at(
            AttributePath::root("instance_types"),
            "instance_types is empty",
            "Name at least one instance type.",
        );
    }
    for (i, t) in types.iter().enumerate() {
        if types[..i].contains(t) {
            diags.error_at(
                AttributePath::root("instance_types").index(i),
                format!("{t} is listed twice"),
                "List each type once.",
            );
        }
    }
}

/// Strategies, durations and the AMI.
pub(super) fn setting_checks(c: &PartitionConfig, diags: &mut Diagnostics) {
    if let Some(s) = c.scaling_strategy.as_str() {
        if ScalingStrategy::parse(s).is_none() {
            diags.error_at(
                AttributePath::root("scaling_strategy"),
                format!("unknown scaling_strategy {s:?}"),
                "Use all-or-nothing or best-effort.",
            );
        }
    }
    if let Some(s) = c.allocation_strategy.as_str() {
        if !STRATEGIES.contains(&s) {
            diags.error_at(
                AttributePath::root("allocation_strategy"),
                format!("unknown allocation_strategy {s:?}"),
                format!("Use one of {}.", STRATEGIES.join(", ")),
            );
        }
    }
    for (attr, value) in [
        ("provision_timeout", &c.provision_timeout),
        ("ice_cooldown", &c.ice_cooldown),
    ] {
        if let Some(s) = value.as_str() {
            if let Err(e) = timeouts::parse_duration(s) {
                diags.error_at(AttributePath::root(attr), format!("{attr} is not a duration"), e);
            }
        }
    }
    if let Some(ami) = c.ami_id.as_str() {
        if !ami.starts_with("ami-") {
            diags.error_at(
                AttributePath::root("ami_id"),
                format!("{ami:?} is not an AMI id"),
                "Use an id like ami-0123456789abcdef0.",
            );
        }
    }
}

/// One capacity pool's own values: its capacity type with its reservation, its subnets, and
/// what a pool in another region must name itself.
pub(super) fn pool_value_checks(i: usize, pool: &PoolConfig, diags: &mut Diagnostics) {
    let at = || AttributePath::root("capacity_pool").index(i);
    if let Some(t) = pool.capacity_type.as_str() {
        capacity_type_checks(t, pool, at(), diags);
    }
    if let Some(subnets) = pool.subnet_ids.known() {
        if subnets.is_empty() {
            diags.error_at(
                at().attr("subnet_ids"),
                "subnet_ids is empty",
                "Give at least one subnet.",
            );
        }
        for (j, s) in subnets.iter().enumerate() {
            if !s.starts_with("subnet-") {
                diags.error_at(
                    at().attr("subnet_ids").index(j),
                    format!("{s:?} is not a subnet id"),
                    "Use an id like subnet-0123456789abcdef0.",
                );
            }
        }
    }
    let other_region = pool.region.known().is_some();
    if other_region && !pool.security_group_ids.is_set() {
        diags.error_at(
            at().attr("security_group_ids"),
            "a pool in another region needs its own security_group_ids",
            "Security groups are regional: give groups of that region's VPC that allow traffic with the cluster.",
        );
    }
    if let Some(pcx) = pool.peering_connection_id.as_str() {
        if !pcx.starts_with("pcx-") {
            diags.error_at(
                at().attr("peering_connection_id"),
                format!("{pcx:?} is not a peering connection id"),
                "Use an id like pcx-0123456789abcdef0 (hpc_network_peering.<name>.id).",
            );
        }
    }
    if other_region && !pool.ami_id.is_set() {
        diags.error_at(
            at().attr("ami_id"),
            "a pool in another region needs its own ami_id",
            "AMI ids are regional: copy the image there (hpc-image publish) and give its id.",
        );
    }
}

/// A known capacity type, and the reservation it needs or cannot have.
fn capacity_type_checks(t: &str, pool: &PoolConfig, at: AttributePath, diags: &mut Diagnostics) {
    if !CAPACITY_TYPES.contains(&t) {
        diags.error_at(
            at.clone().attr("capacity_type"),
            format!("unknown capacity_type {t:?}"),
            "Use on_demand, spot or capacity_block.",
        );
    }
    if t == "capacity_block" && !pool.capacity_reservation_id.is_set() {
        diags.error_at(
            at.attr("capacity_reservation_id"),
            "a capacity_block pool needs capacity_reservation_id",
            "Give the Capacity Block's reservation id (cr-...).",
        );
    } else if t == "spot" && pool.capacity_reservation_id.is_set() {
        diags.error_at(
            at.attr("capacity_reservation_id"),
            "a spot pool cannot launch into a capacity reservation",
            "Put the reservation in its own on_demand pool (before the spot pool), or remove it.",
        );
    }
}

/// What a partition shares with other resources' checks, and its numbers' signs.
pub(super) fn shared_checks(c: &PartitionConfig, diags: &mut Diagnostics) {
    let root = AttributePath::root;
    checks::root_volume_size(c.root_volume_size.known().copied(), root("root_volume_size"), diags);
    checks::instance_profile_arn(c.instance_profile_arn.as_str(), root("instance_profile_arn"), diags);
    checks::tags(c.tags.known(), root("tags"), diags);
    checks::user_data_extra(c.user_data_extra.as_str(), root("user_data_extra"), diags);
    for (attr, value) in [
        ("priority_tier", &c.priority_tier),
        ("max_nodes_per_job", &c.max_nodes_per_job),
        ("min_nodes_per_job", &c.min_nodes_per_job),
    ] {
        checks::not_negative(value.known().copied(), root(attr), diags);
    }
    let provision = c
        .provision_timeout
        .as_str()
        .and_then(|s| timeouts::parse_duration(s).ok());
    checks::duration_at_least(
        provision.map(|d| d.as_secs()),
        60,
        root("provision_timeout"),
        "an instance needs a minute or more to boot and join before it is given up and replaced",
        diags,
    );
    for (i, pool) in c.capacity_pool.items().iter().enumerate() {
        pool_id_checks(i, pool, diags);
    }
}

/// A pool's own AMI and security groups, as ids of their kinds.
fn pool_id_checks(i: usize, pool: &PoolConfig, diags: &mut Diagnostics) {
    let at = || AttributePath::root("capacity_pool").index(i);
    if let Some(ami) = pool.ami_id.as_str() {
        if !ami.starts_with("ami-") {
            diags.error_at(
                at().attr("ami_id"),
                format!("{ami:?} is not an AMI id"),
                "Use an id like ami-0123456789abcdef0 (of the pool's region).",
            );
        }
    }
    for (j, sg) in pool.security_group_ids.items().iter().enumerate() {
        if let Some(sg) = sg.as_str().filter(|sg| !sg.starts_with("sg-")) {
            diags.error_at(
                at().attr("security_group_ids").index(j),
                format!("{sg:?} is not a security group id"),
                "Use an id like sg-0123456789abcdef0.",
            );
        }
    }
}

/// The Slurm release a partition is checked against before its cluster is known: the latest,
/// which has every partition setting of the releases it supports.
pub(super) const PROBE_SLURM_VERSION: &str = "26.05";

/// Slurm's own rules for the partition under Slurm `version`, checked with the shared model.
pub(super) fn slurm_checks(doc: &PartitionDoc, version: &str) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let cluster = ClusterDoc {
        schema: SCHEMA,
        name: "check".into(),
        slurm_version: version.into(),
        scaledown_idletime_s: 600,
        resume_timeout_s: 600,
        accounting: desired_state::AccountingDoc {
            mode: "none".into(),
            ..Default::default()
        },
        home: "efs".into(),
        ..ClusterDoc::default()
    };
    let mut probe = doc.clone();
    if probe.shapes.is_empty() {
        // Shapes come from EC2 at plan time; a stand-in lets the limits be checked now.
        probe.shapes = vec![ShapeDoc {
            instance_type: "c7i.large".into(),
            vcpus: 2,
            cores: 1,
            threads_per_core: 2,
            memory_mib: 4096,
            gpus: 0,
            gpu_model: None,
            gpu_memory_mib: None,
            efa: false,
            hourly_price: None,
        }];
    }
    match cluster.to_model(std::slice::from_ref(&probe)) {
        Ok(model) => {
            for e in slurm_model::validate(&model)
                .into_iter()
                .filter(|e| e.path.first().map(String::as_str) == Some("partition"))
            {
                diags.error_at(model_path(&e.path), e.summary, e.detail);
            }
        }
        Err(e) => diags.error(e.summary, e.detail),
    }
    diags
}

/// Maps a slurm-model error path (`partition/<name>/<field>...`) onto this resource's attributes.
pub(super) fn model_path(path: &[String]) -> AttributePath {
    let field = path.get(2).map(String::as_str).unwrap_or("name");
    let attr = match field {
        "extra" => "slurm_extra",
        "node_set" | "node_sets" => "instance_types",
        "name" | "max_time" | "default_time" | "max_nodes_per_job" | "min_nodes_per_job" | "allow_accounts"
        | "allow_groups" | "allow_qos" | "priority_tier" | "oversubscribe" | "exclusive" | "default"
        | "provision_timeout" => field,
        _ => "name",
    };
    let mut p = AttributePath::root(attr);
    if attr == "slurm_extra" {
        if let Some(k) = path.get(3) {
            p = p.key(k);
        }
    }
    p
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
