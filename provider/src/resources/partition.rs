//! `hpc_partition`: a Slurm partition of elastic EC2 capacity. Owns its launch templates
//! (per capacity pool and instance type, with an EFA interface on every network card when EFA
//! is on), its placement groups, and its own desired-state document. Creating, changing or
//! removing a partition never touches the cluster or the other partitions.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::ec2::{Ec2, InstanceTypeInfo, LaunchTemplateSpec, ReservationTarget, RootVolume};
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, AttributePath, Block, BlockNesting, CreateRequest, DeleteRequest, Diagnostic,
    Diagnostics, ImportRequest, NestedBlock, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest,
    ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::convert::{self, int, of_list, of_map, string, strings};
use crate::desired_state::boot::Role;
use crate::desired_state::{self, tag, ClusterDoc, PartitionDoc, ScalingStrategy, ShapeDoc, SCHEMA};
use crate::pricing;
use crate::resources::{aws_diag, checks, image_fits, image_release, or_stop, planned_image, quotas, valid_name};

mod model;
mod pool_checks;

use model::{parse_template_key, template_key, Partition, Pool};
use tfplugin::model::Model;

pub struct HpcPartition;

const CAPACITY_TYPES: &[&str] = &["on_demand", "spot", "capacity_block"];
const STRATEGIES: &[&str] = &[
    "prioritized",
    "lowest-price",
    "capacity-optimized",
    "price-capacity-optimized",
];
const APPLY_TIMEOUT: Duration = Duration::from_secs(10 * 60);

fn schema() -> Schema {
    let computed = |name: &str, ty: Type, doc: &str| Attribute::computed(name, ty).description(doc);
    let pool = Block::new(vec![
        Attribute::required("subnet_ids", Type::list(Type::String))
            .description("Subnets to launch in (their zones form the pool); tried in order within the pool."),
        Attribute::optional("region", Type::String)
            .description("Region of the subnets when it is not the provider's region (cross-region failover)."),
        Attribute::optional("capacity_type", Type::String)
            .description("`on_demand` (default), `spot` or `capacity_block`.")
            .default(Value::string("on_demand")),
        Attribute::optional("capacity_reservation_id", Type::String)
            .description("An On-Demand Capacity Reservation or Capacity Block to launch into (`cr-...`)."),
        Attribute::optional("ami_id", Type::String)
            .description("AMI for this pool (required for a pool in another region: AMI ids are regional)."),
        Attribute::optional("security_group_ids", Type::list(Type::String)).description(
            "Security groups of the pool's nodes in addition to the cluster group; required for a pool in \
             another region (security groups are regional: give groups of that region's VPC).",
        ),
    ]);
    Schema::new(
        0,
        Block::new(vec![
            computed("id", Type::String, "`<cluster>/<partition>`.").use_state_for_unknown(),
            Attribute::required("cluster_id", Type::String).description("The hpc_cluster's id.").requires_replace(),
            Attribute::required("name", Type::String)
                .description("Partition name as users see it in Slurm (`sbatch -p <name>`).")
                .requires_replace(),
            Attribute::required("instance_types", Type::list(Type::String)).description(
                "Instance types of the partition, most preferred first. Each becomes a Slurm node set \
                 with CPUs, memory and GPUs from EC2.",
            ),
            Attribute::optional("min_nodes", Type::Number)
                .description("Always-on nodes (of the first instance type). Default 0: everything scales from zero.")
                .default(Value::int(0)),
            Attribute::required("max_nodes", Type::Number)
                .description("Most nodes the partition runs at once, per instance type's node set."),
            Attribute::optional("allocation_strategy", Type::String)
                .description("How a pool picks among instance types: `prioritized` (default: instance_types in order), `lowest-price`, or for spot pools `capacity-optimized` and `price-capacity-optimized` (on-demand and capacity-block pools of the same partition then launch by priority; a partition without a spot pool is refused).")
                .default(Value::string("prioritized")),
            Attribute::optional("scaling_strategy", Type::String)
                .description(
                    "How a job's nodes launch: `all-or-nothing` (default: a job gets all its nodes of one instance \
                     type from one pool or none, a partial launch is terminated at once and the whole job tries \
                     the next pool) or `best-effort` (every node that gets an instance keeps it).",
                )
                .default(Value::string(ScalingStrategy::AllOrNothing.as_str())),
            Attribute::optional("efa_enabled", Type::Bool)
                .description("Give nodes an EFA interface on every network card the type has; needs EFA-capable types.")
                .default(Value::Bool(false)),
            Attribute::optional_computed("placement_group", Type::Bool)
                .description("A cluster placement group per pool. Default: on when EFA is on."),
            Attribute::required("ami_id", Type::String).description("AMI of the compute nodes (an hpc-image build)."),
            Attribute::optional("root_volume_size", Type::Number)
                .description("Root volume GiB (gp3, encrypted). Default 100.")
                .default(Value::int(100)),
            Attribute::optional("instance_profile_arn", Type::String)
                .description("Instance profile of compute nodes. Default: the cluster's (`hpc_cluster.head_node.instance_profile_arn`), as it is when the partition's launch templates are written."),
            Attribute::optional("user_data_extra", Type::String)
                .description("Shell commands appended to the nodes' boot script."),
            Attribute::optional("max_time", Type::String).description("Slurm MaxTime, e.g. `2-00:00:00` or `UNLIMITED`."),
            Attribute::optional("default_time", Type::String).description("Slurm DefaultTime."),
            Attribute::optional("max_nodes_per_job", Type::Number).description("Slurm MaxNodes: most nodes one job may use."),
            Attribute::optional("min_nodes_per_job", Type::Number).description("Slurm MinNodes."),
            Attribute::optional("allow_accounts", Type::list(Type::String)).description("Slurm AllowAccounts."),
            Attribute::optional("allow_groups", Type::list(Type::String)).description("Slurm AllowGroups."),
            Attribute::optional("allow_qos", Type::list(Type::String)).description("Slurm AllowQos."),
            Attribute::optional("priority_tier", Type::Number).description("Slurm PriorityTier."),
            Attribute::optional("oversubscribe", Type::String).description("Slurm OverSubscribe: `NO`, `YES[:n]`, `FORCE[:n]`, `EXCLUSIVE`."),
            Attribute::optional("exclusive", Type::Bool)
                .description("Jobs get whole nodes.")
                .default(Value::Bool(false)),
            Attribute::optional("default", Type::Bool)
                .description("The cluster's default partition.")
                .default(Value::Bool(false)),
            Attribute::optional("slurm_extra", Type::map(Type::String))
                .description("More PartitionName settings; unknown keys are rejected."),
            Attribute::optional("provision_timeout", Type::String)
                .description("A node not registered with Slurm after this long is replaced from the next pool. Default `10m`.")
                .default(Value::string("10m")),
            Attribute::optional("ice_cooldown", Type::String)
                .description("How long a pool that reported no capacity is skipped. Default `10m`.")
                .default(Value::string("10m")),
                        Attribute::optional("wait_for_apply", Type::Bool)
                .description(
                    "After publishing, wait (within the create/update timeout) until the cluster's node agent reports \
                     this version applied to Slurm, and fail with the agent's error if it refused it. Skipped, with a \
                     warning, while no agent has reported for the cluster. Default true.",
                )
                .default(Value::Bool(true)),
            Attribute::optional("tags", Type::map(Type::String)).description("Tags of launch templates, placement groups and instances."),
            computed("tags_all", Type::map(Type::String), "`tags` merged over the provider's `default_tags`."),
            computed("node_names", Type::list(Type::String), "Slurm node names, one host list per instance type."),
            computed("launch_template_ids", Type::map(Type::String), "Launch template id per `<pool index>/<instance type>`."),
            computed("placement_group_names", Type::list(Type::String), "Placement group per pool (empty without)."),
            computed("max_vcpus", Type::Number, "vCPUs at full scale."),
            computed("max_gpus", Type::Number, "GPUs at full scale."),
            computed("gpu_model", Type::String, "GPU model of the partition's first GPU type."),
            computed("estimated_max_hourly_cost", Type::Number, "USD/hour at full scale at on-demand prices: the built-in us-east-1 table or `guardrails.prices`, for every pool whatever its region (only an estimate outside us-east-1: set `prices` for your rates there) and market (an upper bound for spot pools, whose price moves); null when a type has no known price."),
            computed("rendered_partition", Type::String, "The NodeName and PartitionName lines Slurm gets."),
            computed("desired_state_version", Type::Number, "Version of the published partition document."),
        ])
        .with_blocks(vec![
            NestedBlock::new("capacity_pool", BlockNesting::List, pool.description("Where capacity comes from, in failover order: subnets (zones), region, capacity type, reservation. The node agent tries the next pool when one has no capacity or its nodes do not arrive in time.")).min_items(1).max_items(16),
            timeouts::block(&["create", "update", "delete"]),
        ])
        .description("A Slurm partition of elastic EC2 capacity with ordered capacity pools and failover."),
    )
}

/// Values derived from the document (and the cluster's, for the rendered lines): the same
/// function serves plan and read, so an imported or refreshed partition plans clean.
fn set_derived(
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

/// Maps a slurm-model error path (`partition/<name>/<field>...`) onto this resource's attributes.
fn model_path(path: &[String]) -> AttributePath {
    let field = path.get(2).map(String::as_str).unwrap_or("name");
    let attr = match field {
        "max_nodes" => "max_nodes_per_job",
        "min_nodes" => "min_nodes_per_job",
        "extra" => "slurm_extra",
        "node_set" | "node_sets" => "instance_types",
        "name" | "max_time" | "default_time" | "allow_accounts" | "allow_groups" | "allow_qos" | "priority_tier"
        | "oversubscribe" | "exclusive" | "default" | "provision_timeout" => field,
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

/// The Slurm release a partition is checked against before its cluster is known: the latest,
/// which has every partition setting of the releases it supports.
const PROBE_SLURM_VERSION: &str = "24.11";

/// Slurm's own rules for the partition under Slurm `version`, checked with the shared model.
fn slurm_checks(doc: &PartitionDoc, version: &str) -> Diagnostics {
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

/// The nodes' image (the partition's; pools in other regions bring their own, checked at boot):
/// its Slurm release, its architecture against every type, its root snapshot against the root
/// volume (reads only).
async fn node_image_checks(
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
    diags.extend(image_release(&image, version, AttributePath::root("ami_id")));
    diags.extend(image_fits(
        &image,
        int(planned.attr("root_volume_size")),
        infos,
        AttributePath::root("instance_types"),
        AttributePath::root("root_volume_size"),
    ));
    diags
}

/// What a partition shares with other resources' checks, and its numbers' signs.
fn shared_checks(c: &Value, diags: &mut Diagnostics) {
    checks::root_volume_size(
        c.attr("root_volume_size"),
        AttributePath::root("root_volume_size"),
        diags,
    );
    checks::instance_profile_arn(
        c.attr("instance_profile_arn"),
        AttributePath::root("instance_profile_arn"),
        diags,
    );
    checks::tags(c.attr("tags"), AttributePath::root("tags"), diags);
    checks::user_data_extra(c.attr("user_data_extra"), AttributePath::root("user_data_extra"), diags);
    for attr in ["priority_tier", "max_nodes_per_job", "min_nodes_per_job"] {
        checks::not_negative(c.attr(attr), AttributePath::root(attr), diags);
    }
    let provision = c
        .attr("provision_timeout")
        .as_str()
        .and_then(|s| timeouts::parse_duration(s).ok());
    checks::duration_at_least(
        provision.map(|d| d.as_secs()),
        60,
        AttributePath::root("provision_timeout"),
        "an instance needs a minute or more to boot and join before it is given up and replaced",
        diags,
    );
    for (i, pool) in c.attr("capacity_pool").elements().iter().enumerate() {
        if let Some(ami) = pool.attr("ami_id").as_str() {
            if !ami.starts_with("ami-") {
                diags.error_at(
                    AttributePath::root("capacity_pool").index(i).attr("ami_id"),
                    format!("{ami:?} is not an AMI id"),
                    "Use an id like ami-0123456789abcdef0 (of the pool's region).",
                );
            }
        }
        for (j, sg) in pool.attr("security_group_ids").elements().iter().enumerate() {
            if let Some(sg) = sg.as_str().filter(|sg| !sg.starts_with("sg-")) {
                diags.error_at(
                    AttributePath::root("capacity_pool")
                        .index(i)
                        .attr("security_group_ids")
                        .index(j),
                    format!("{sg:?} is not a security group id"),
                    "Use an id like sg-0123456789abcdef0.",
                );
            }
        }
    }
}

/// The cluster's rules across the two resources: failover must fit in ResumeTimeout, and the
/// partition's settings must be ones the cluster's Slurm release has (validation checked them
/// against the latest release; an older cluster's is checked again here).
fn cluster_checks(cluster: &ClusterDoc, doc: &PartitionDoc) -> Diagnostics {
    let mut diags = Diagnostics::new();
    if let Err(e) = cluster.check_timeouts(doc) {
        diags.error_at(model_path(&e.path), e.summary, e.detail);
    }
    if cluster.slurm_version != PROBE_SLURM_VERSION {
        diags.extend(slurm_checks(doc, &cluster.slurm_version));
    }
    diags
}

fn efa_cards(t: &InstanceTypeInfo) -> Vec<i32> {
    let max = usize::try_from(t.max_efa_interfaces.max(1)).unwrap_or(1);
    let mut cards = if t.network_cards.is_empty() {
        vec![0]
    } else {
        t.network_cards.clone()
    };
    cards.truncate(max);
    cards
}

fn lt_name(cluster: &str, partition: &str, pool: usize, instance_type: &str) -> String {
    format!(
        "hpc-{cluster}-{partition}-{pool}-{}",
        desired_state::type_tag(instance_type)
    )
}

fn pg_name(cluster: &str, partition: &str, pool: usize) -> String {
    format!("hpc-{cluster}-{partition}-{pool}")
}

/// The cluster's published desired state, read directly (applies act on what is there now).
async fn cluster_doc(clients: &Clients, cluster: &str) -> Result<Option<ClusterDoc>, Diagnostics> {
    let param = clients
        .ssm
        .get(&desired_state::cluster_param(cluster))
        .await
        .map_err(|e| aws_diag("Cannot read the cluster's desired state", &e))?;
    param.as_ref().map(parse_cluster_doc).transpose()
}

/// Everything a plan or refresh reads about a cluster: its desired state and its partitions,
/// from one shared view of the cluster's parameters (a plan of a cluster's ten partitions reads
/// them once, not ten times).
struct Published {
    params: std::sync::Arc<std::collections::BTreeMap<String, hpc_aws::ssm::Parameter>>,
    cluster: String,
}

impl Published {
    async fn read(clients: &Clients, cluster: &str) -> Result<Self, Diagnostics> {
        let params = clients
            .ssm
            .view(&desired_state::cluster_prefix(cluster))
            .await
            .map_err(|e| aws_diag("Cannot read the cluster's desired state", &e))?;
        Ok(Published {
            params,
            cluster: cluster.to_string(),
        })
    }

    fn cluster_doc(&self) -> Result<Option<ClusterDoc>, Diagnostics> {
        self.params
            .get(&desired_state::cluster_param(&self.cluster))
            .map(parse_cluster_doc)
            .transpose()
    }

    /// The other partitions of the cluster, as published.
    fn other_partitions(&self, this: &str) -> Vec<PartitionDoc> {
        let prefix = format!("{}/", desired_state::partitions_path(&self.cluster));
        self.params
            .values()
            .filter(|p| p.name.starts_with(&prefix))
            .filter_map(|p| serde_json::from_str::<PartitionDoc>(&p.value).ok())
            .filter(|d| d.name != this)
            .collect()
    }
}

fn parse_cluster_doc(p: &hpc_aws::ssm::Parameter) -> Result<ClusterDoc, Diagnostics> {
    serde_json::from_str(&p.value).map_err(|e| {
        Diagnostics::from(Diagnostic::error(
            "The cluster's desired state is not readable",
            format!("{}: {e}", p.name),
        ))
    })
}

fn cluster_missing(cluster: &str) -> Diagnostics {
    Diagnostic::error(
        format!("cluster {cluster:?} does not exist"),
        "Create the hpc_cluster first and pass its id (cluster_id = hpc_cluster.<name>.id).",
    )
    .at(AttributePath::root("cluster_id"))
    .into()
}

fn usage_pools(doc: &PartitionDoc) -> Vec<(String, u32, u32, u32)> {
    doc.shapes
        .iter()
        .map(|s| (s.instance_type.clone(), doc.max_nodes, s.vcpus, s.gpus))
        .collect()
}

/// The name, the node counts and the instance types.
fn shape_checks(c: &Value, diags: &mut Diagnostics) {
    if let Some(name) = c.attr("name").as_str() {
        if let Err(why) = valid_name(name, 24) {
            diags.error_at(
                AttributePath::root("name"),
                format!("partition name {name:?} is not valid"),
                why,
            );
        }
    }
    let min = int(c.attr("min_nodes"));
    let max = int(c.attr("max_nodes"));
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
    if let Some(types) = strings(c.attr("instance_types")) {
        if types.is_empty() {
            diags.error_at(
                AttributePath::root("instance_types"),
                "instance_types is empty",
                "Name at least one instance type.",
            );
        }
        let mut seen = Vec::new();
        for (i, t) in types.iter().enumerate() {
            if seen.contains(t) {
                diags.error_at(
                    AttributePath::root("instance_types").index(i),
                    format!("{t} is listed twice"),
                    "List each type once.",
                );
            }
            seen.push(t.clone());
        }
    }
}

/// Strategies, durations and the AMI.
fn setting_checks(c: &Value, diags: &mut Diagnostics) {
    if let Some(s) = c.attr("scaling_strategy").as_str() {
        if ScalingStrategy::parse(s).is_none() {
            diags.error_at(
                AttributePath::root("scaling_strategy"),
                format!("unknown scaling_strategy {s:?}"),
                "Use all-or-nothing or best-effort.",
            );
        }
    }
    if let Some(s) = c.attr("allocation_strategy").as_str() {
        if !STRATEGIES.contains(&s) {
            diags.error_at(
                AttributePath::root("allocation_strategy"),
                format!("unknown allocation_strategy {s:?}"),
                format!("Use one of {}.", STRATEGIES.join(", ")),
            );
        }
    }
    for attr in ["provision_timeout", "ice_cooldown"] {
        if let Some(s) = c.attr(attr).as_str() {
            if let Err(e) = timeouts::parse_duration(s) {
                diags.error_at(AttributePath::root(attr), format!("{attr} is not a duration"), e);
            }
        }
    }
    if let Some(ami) = c.attr("ami_id").as_str() {
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
fn pool_value_checks(i: usize, pool: &Value, diags: &mut Diagnostics) {
    let at = || AttributePath::root("capacity_pool").index(i);
    if let Some(t) = pool.attr("capacity_type").as_str() {
        if !CAPACITY_TYPES.contains(&t) {
            diags.error_at(
                at().attr("capacity_type"),
                format!("unknown capacity_type {t:?}"),
                "Use on_demand, spot or capacity_block.",
            );
        }
        if t == "capacity_block" && pool.attr("capacity_reservation_id").is_null() {
            diags.error_at(
                at().attr("capacity_reservation_id"),
                "a capacity_block pool needs capacity_reservation_id",
                "Give the Capacity Block's reservation id (cr-...).",
            );
        }
        if t == "spot" && !pool.attr("capacity_reservation_id").is_null() {
            diags.error_at(
                at().attr("capacity_reservation_id"),
                "a spot pool cannot launch into a capacity reservation",
                "Put the reservation in its own on_demand pool (before the spot pool), or remove it.",
            );
        }
    }
    if let Some(subnets) = strings(pool.attr("subnet_ids")) {
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
    let other_region = pool.attr("region").as_str().is_some();
    if other_region && pool.attr("security_group_ids").is_null() {
        diags.error_at(
            at().attr("security_group_ids"),
            "a pool in another region needs its own security_group_ids",
            "Security groups are regional: give groups of that region's VPC that allow traffic with the cluster.",
        );
    }
    if other_region && pool.attr("ami_id").is_null() {
        diags.error_at(
            at().attr("ami_id"),
            "a pool in another region needs its own ami_id",
            "AMI ids are regional: copy the image there (hpc-image publish) and give its id.",
        );
    }
}

#[async_trait]
impl Resource for HpcPartition {
    fn type_name(&self) -> &'static str {
        "hpc_partition"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn validate(&self, req: ValidateRequest) -> Diagnostics {
        let c = &req.config;
        let mut diags = Diagnostics::new();
        shape_checks(c, &mut diags);
        setting_checks(c, &mut diags);
        for (i, pool) in c.attr("capacity_pool").elements().iter().enumerate() {
            pool_value_checks(i, pool, &mut diags);
        }
        shared_checks(c, &mut diags);
        pool_checks::strategy(c, &mut diags);
        if c.is_wholly_known() {
            match Partition::of(c) {
                Ok(m) => diags.extend(slurm_checks(&m.doc("check", &[], ""), PROBE_SLURM_VERSION)),
                Err(e) => diags.push(e.diagnostic("The partition's configuration cannot be read")),
            }
        }
        diags
    }

    async fn modify_plan(&self, req: &mut PlanRequest) {
        let ctx = req.ctx.clone();
        let Ok(clients) = Clients::of(&ctx) else {
            return;
        };
        let p = &mut req.planned;
        clients.plan_tags_all(p);
        if p.attr("placement_group").is_unknown() || req.config.attr("placement_group").is_null() {
            let efa = p.attr("efa_enabled").clone();
            p.set_attr("placement_group", efa);
        }
        if let (Some(cluster), Some(name)) = (p.attr("cluster_id").as_str(), p.attr("name").as_str()) {
            let id = Value::string(format!("{cluster}/{name}"));
            p.set_attr("id", id);
        }
        plan_checks(clients, req).await;
        plan_unknowns(req);
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        apply(req.ctx, Value::Null, req.planned).await
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        apply(req.ctx, req.prior, req.planned).await
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let (Some(cluster), Some(name)) = (string(req.state.attr("cluster_id")), string(req.state.attr("name"))) else {
            return Ok(None);
        };
        let param = clients
            .ssm
            .get_viewed(
                &desired_state::cluster_prefix(&cluster),
                &desired_state::partition_param(&cluster, &name),
            )
            .await
            .map_err(|e| aws_diag("Cannot read partition", &e))?;
        let Some(param) = param else { return Ok(None) };
        let Ok(doc) = serde_json::from_str::<PartitionDoc>(&param.value) else {
            return Err(Diagnostic::error("The partition's desired state is not readable", param.name).into());
        };
        // What the agent acts on is the published document: state is read from it.
        let prior = Partition::of(&req.state).ok();
        let mut s = Partition::of_doc(&doc, param.version, prior.as_ref(), &clients.default_tags).value();
        // The same view of the cluster's parameters: no further call.
        let cdoc = Published::read(clients, &cluster).await?.cluster_doc()?;
        let diags = set_derived(&mut s, &doc, cdoc.as_ref(), &clients.price_overrides);
        if diags.has_errors() {
            return Err(diags);
        }
        Ok(Some(s))
    }

    async fn delete(&self, req: DeleteRequest) -> Diagnostics {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let prior = match Partition::of(&req.prior) {
            Ok(p) => p,
            Err(e) => return e.into_diagnostics("The partition's state cannot be read"),
        };
        let (cluster, name) = (prior.cluster(), prior.name.as_str());
        let timeout = timeouts::get(&req.prior, "delete", APPLY_TIMEOUT);
        let result = async {
            // Unpublish first so the agent stops launching, then end what is running.
            clients
                .ssm
                .delete(&desired_state::partition_param(cluster, name))
                .await?;
            let ec2s = pool_clients(clients, prior.capacity_pool.iter().map(|p| p.region.as_deref()));
            for ec2 in ec2s.values() {
                let running = ec2
                    .instances_tagged(tag::PARTITION, &tag::partition_value(cluster, name))
                    .await?;
                let ids: Vec<String> = running.into_iter().map(|i| i.id).collect();
                or_stop(&req.ctx, "terminating partition nodes", ec2.terminate(&ids, timeout)).await?;
            }
            remove_templates(clients, &prior, &ec2s, &[]).await
        };
        match result.await {
            Ok(()) => Diagnostics::new(),
            Err(e) => aws_diag("Cannot delete partition", &e),
        }
    }

    async fn import(&self, req: ImportRequest) -> Result<Value, Diagnostics> {
        let Some((cluster, name)) = req.id.split_once('/') else {
            return Err(Diagnostic::error(
                "Invalid import id",
                format!("{:?}: use <cluster>/<partition>, e.g. research/gpu.", req.id),
            )
            .into());
        };
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let param = clients
            .ssm
            .get(&desired_state::partition_param(cluster, name))
            .await
            .map_err(|e| aws_diag("Cannot read partition", &e))?
            .ok_or_else(|| {
                Diagnostics::from(Diagnostic::error(
                    "Partition not found",
                    format!("cluster {cluster} has no partition {name}"),
                ))
            })?;
        let doc: PartitionDoc = serde_json::from_str(&param.value).map_err(|e| {
            Diagnostics::from(Diagnostic::error(
                "The partition's desired state is not readable",
                e.to_string(),
            ))
        })?;
        Ok(Partition::of_doc(&doc, param.version, None, &clients.default_tags).value())
    }
}

tfplugin::model! {
    /// What a partition may reach, which the plan checks against EC2 first.
    struct Reach {
        name: String,
        instance_types: Vec<String>,
        max_nodes: i64,
        efa_enabled: bool,
    }
}

/// The plan's checks (reads only): the instance types against EC2 and the guardrails, the
/// pools' reservations and offerings, then, with the cluster's published state, Slurm's rules,
/// quotas, cost and the derived values. Values not known yet skip what needs them.
async fn plan_checks(clients: &Clients, req: &mut PlanRequest) {
    let Ok(reach) = Reach::from_value(&schema().block.with_defaults(&req.planned)) else {
        return;
    };
    // Facts about the instance types: a read, never a change.
    let infos = match clients.ec2.instance_types(&reach.instance_types).await {
        Ok(i) => i,
        Err(e) => return req.diagnostics.extend(aws_diag("Cannot describe instance types", &e)),
    };
    req.diagnostics.extend(type_checks(clients, &reach, &infos));
    let p = &req.planned;
    req.diagnostics
        .extend(pool_checks::reservations(clients, p, &reach.instance_types).await);
    // What the pools' zones offer and (below) the account's vCPU quotas, when what the
    // partition may reach is new (refreshes of an unchanged partition ask nothing).
    let reach_changed = req.prior.is_null()
        || ["instance_types", "max_nodes", "capacity_pool"]
            .iter()
            .any(|a| p.attr(a) != req.prior.attr(a));
    if reach_changed {
        req.diagnostics
            .extend(pool_checks::offerings(clients, p, &reach.instance_types).await);
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
fn type_checks(clients: &Clients, reach: &Reach, infos: &[InstanceTypeInfo]) -> Diagnostics {
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
async fn cluster_plan_checks(
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
    if doc.default {
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
fn plan_unknowns(req: &mut PlanRequest) {
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

/// One EC2 client per region the partition's pools use.
fn pool_clients<'a>(clients: &Clients, regions: impl IntoIterator<Item = Option<&'a str>>) -> BTreeMap<String, Ec2> {
    let mut out = BTreeMap::new();
    out.insert(clients.aws.region.clone(), clients.ec2.clone());
    for r in regions.into_iter().flatten() {
        out.entry(r.to_string()).or_insert_with(|| clients.aws.ec2_in(r));
    }
    out
}

/// Deletes launch templates and placement groups recorded in `prior` that `keep` does not list.
async fn remove_templates(
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

/// Create and update: launch templates and placement groups per pool, then the document.
async fn apply(ctx: tfplugin::Ctx, prior: Value, planned: Value) -> ApplyOutcome {
    let clients = match Clients::of(&ctx) {
        Ok(c) => c,
        Err(d) => return ApplyOutcome::failed(prior, d),
    };
    let model = match Partition::of(&planned) {
        Ok(m) => m,
        Err(e) => return ApplyOutcome::failed(prior, e.into_diagnostics("The planned partition cannot be read")),
    };
    let mut state = planned.clone();
    state.set_attr("id", Value::string(format!("{}/{}", model.cluster(), model.name)));
    let result = publish(&ctx, clients, &prior, &model, &mut state).await;
    let op = if prior.is_null() { "create" } else { "update" };
    let result = match result {
        Ok(version) if model.wait_for_apply => {
            let timeout = timeouts::get(&planned, op, APPLY_TIMEOUT);
            match wait_applied(&ctx, clients, model.cluster(), &model.name, version, timeout).await {
                Ok(warning) => Ok(warning),
                // Published but refused (or not applied in time): the new document is what exists.
                Err(d) => return ApplyOutcome::failed(state, d),
            }
        }
        Ok(_) => Ok(None),
        Err(d) => Err(d),
    };
    match result {
        Ok(None) => ApplyOutcome::ok(state),
        Ok(Some(warning)) => ApplyOutcome {
            state,
            diagnostics: warning.into(),
        },
        Err(d) if prior.is_null() => {
            // Record what exists so nothing leaks; Terraform taints it.
            let made = !state.attr("launch_template_ids").is_unknown() && !state.attr("launch_template_ids").is_null();
            ApplyOutcome::failed(if made { state } else { Value::Null }, d)
        }
        Err(d) => ApplyOutcome::failed(prior, d),
    }
}

/// What an apply made in the pools: launch templates by key, a placement group per pool
/// (empty without), and every name to keep when the prior's are cleaned up.
#[derive(Default)]
struct Made {
    templates: BTreeMap<String, String>,
    groups: Vec<String>,
    keep: Vec<String>,
    home_zones: Vec<(String, String)>,
}

/// What every pool's templates are made from.
struct Launch<'a> {
    clients: &'a Clients,
    cluster: &'a ClusterDoc,
    model: &'a Partition,
    infos: &'a [InstanceTypeInfo],
    tags: Vec<(String, String)>,
}

/// Makes the pools' templates and groups, publishes the document and removes what the
/// prior state had that is gone; returns the published version.
async fn publish(
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
    // Checked at plan when the cluster already existed; a cluster made in the same apply
    // is known only now, before anything is launched or published.
    let checks = cluster_checks(&cdoc, &model.doc(cluster, &[], &clients.aws.region));
    if checks.has_errors() {
        return Err(checks);
    }
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
    let ec2s = pool_clients(clients, model.capacity_pool.iter().map(|p| p.region.as_deref()));
    let mut made = Made::default();
    for (i, pool) in model.capacity_pool.iter().enumerate() {
        let region = pool.region.clone().unwrap_or_else(|| clients.aws.region.clone());
        let ec2 = ec2s
            .get(&region)
            .cloned()
            .unwrap_or_else(|| clients.aws.ec2_in(&region));
        ensure_pool(&launch, &ec2, i, pool, &region, &mut made).await?;
    }
    state.set_attr(
        "launch_template_ids",
        of_map(&made.templates.clone().into_iter().collect::<Vec<_>>()),
    );
    state.set_attr("placement_group_names", of_list(Some(&made.groups)));
    home_mount_targets(ctx, clients, &cdoc, &made.home_zones).await?;
    let mut published = model.clone();
    published.launch_template_ids = Some(made.templates);
    published.placement_group_names = Some(made.groups);
    let mut doc = published.doc(cluster, &infos, &clients.aws.region);
    for shape in &mut doc.shapes {
        shape.hourly_price =
            pricing::on_demand_price(&shape.instance_type, &clients.price_overrides).map(|p| format!("{p:.4}"));
    }
    let json = serde_json::to_string(&doc)
        .map_err(|e| Diagnostics::from(Diagnostic::error("Cannot encode desired state", e.to_string())))?;
    let version = clients
        .ssm
        .put(&desired_state::partition_param(cluster, name), &json, &tags_all)
        .await
        .map_err(|e| aws_diag("Cannot publish the partition", &e))?;
    state.set_attr("desired_state_version", Value::int(version));
    if !prior.is_null() {
        let prior = Partition::of(prior).map_err(|e| e.into_diagnostics("The partition's state cannot be read"))?;
        remove_templates(clients, &prior, &ec2s, &made.keep)
            .await
            .map_err(|e| aws_diag("Cannot remove old launch templates", &e))?;
    }
    Ok(version)
}

/// Pool `i`'s placement group (when the partition has them) and a launch template per
/// instance type, in `region`.
async fn ensure_pool(
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

/// Waits until the cluster's agent reports `version` of this partition applied. No report at
/// all (no agent yet) is a warning, not a wait.
async fn wait_applied(
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
/// to reach; pools in other regions cannot mount it).
async fn home_mount_targets(
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
fn pool_security_groups(doc: &ClusterDoc, pool: &Pool, other_region: bool) -> Vec<String> {
    let mut sgs = if other_region {
        Vec::new()
    } else {
        doc.cluster_group().into_iter().cloned().collect()
    };
    sgs.extend(pool.security_group_ids.iter().flatten().cloned());
    sgs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_well_formed() {
        schema().check().expect("hpc_partition schema");
    }

    #[test]
    fn efa_goes_on_every_card_up_to_the_limit() {
        let mut t = InstanceTypeInfo {
            instance_type: "p5.48xlarge".into(),
            vcpus: 192,
            cores: 96,
            threads_per_core: 2,
            memory_mib: 2_097_152,
            gpus: 8,
            gpu_model: Some("H100".into()),
            gpu_manufacturer: Some("NVIDIA".into()),
            gpu_memory_mib: Some(81_920),
            efa_supported: true,
            max_efa_interfaces: 32,
            network_cards: (0..32).collect(),
            architectures: vec!["x86_64".into()],
        };
        assert_eq!(efa_cards(&t).len(), 32);
        t.network_cards = vec![0];
        t.max_efa_interfaces = 1;
        assert_eq!(efa_cards(&t), vec![0]);
    }

    #[tokio::test]
    async fn bad_partitions_are_rejected_with_paths() {
        let mut c = Value::null_object(&schema().ty());
        c.set_attr("name", Value::string("GPU!"));
        c.set_attr("min_nodes", Value::int(5));
        c.set_attr("max_nodes", Value::int(2));
        c.set_attr(
            "instance_types",
            of_list(Some(&["p5.48xlarge".to_string(), "p5.48xlarge".to_string()])),
        );
        c.set_attr("allocation_strategy", Value::string("cheapest"));
        c.set_attr("ami_id", Value::string("img-1"));
        c.set_attr(
            "capacity_pool",
            Value::List(vec![convert::object(vec![
                ("subnet_ids", of_list(Some(&["net-1".to_string()]))),
                ("region", Value::string("us-west-2")),
                ("capacity_type", Value::string("reserved")),
                ("capacity_reservation_id", Value::Null),
                ("ami_id", Value::Null),
            ])]),
        );
        let d = HpcPartition.validate(ValidateRequest { config: c }).await;
        let paths: Vec<String> =
            d.0.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .collect();
        for want in [
            "name",
            "min_nodes",
            "instance_types[1]",
            "allocation_strategy",
            "ami_id",
            "capacity_pool[0].capacity_type",
            "capacity_pool[0].subnet_ids[0]",
            "capacity_pool[0].ami_id",
        ] {
            assert!(paths.contains(&want.to_string()), "missing {want} in {paths:?}");
        }
    }
}
