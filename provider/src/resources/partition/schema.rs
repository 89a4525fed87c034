//! hpc_partition's schema: its attributes, capacity pools, defaults and plan behaviour.

use crate::desired_state::ScalingStrategy;
use tfplugin::timeouts;
use tfplugin::Attribute;
use tfplugin::Block;
use tfplugin::BlockNesting;
use tfplugin::NestedBlock;
use tfplugin::Schema;
use tfplugin::Type;
use tfplugin::Value;

pub(super) fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(attributes())
            .with_blocks(blocks())
            .description("A Slurm partition of elastic EC2 capacity with ordered capacity pools and failover."),
    )
}

/// A computed attribute (planned again on every change).
fn computed(name: &str, ty: Type, doc: &str) -> Attribute {
    Attribute::computed(name, ty).description(doc)
}

/// The top-level attributes.
fn attributes() -> Vec<Attribute> {
    vec![
            computed("id", Type::String, "`<cluster>/<partition>`.").use_state_for_unknown(),
            Attribute::required("cluster_id", Type::String).description("The hpc_cluster's id.").requires_replace(),
            Attribute::required("name", Type::String)
                .description(
                    "Partition name as users see it in Slurm (`sbatch -p <name>`). One partition per name in a \
                     cluster: creating a name another Terraform state's partition has is refused before anything \
                     is made (import that partition instead).",
                )
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
        ]
}

/// The top-level blocks.
fn blocks() -> Vec<NestedBlock> {
    vec![
            NestedBlock::new("capacity_pool", BlockNesting::List, pool_block().description("Where capacity comes from, in failover order: subnets (zones), region, capacity type, reservation. The node agent tries the next pool when one has no capacity or its nodes do not arrive in time.")).min_items(1).max_items(16),
            timeouts::block(&["create", "update", "delete"]),
        ]
}

fn pool_block() -> Block {
    Block::new(vec![
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
        Attribute::optional("peering_connection_id", Type::String).description(
            "The network path of a pool in another region: a VPC peering connection between the pool's \
             VPC and the cluster's, with routes both ways (`hpc_network_peering.<name>.id`). Required for a \
             pool in another region; checked at plan (active, joins the two VPCs, routes from every subnet \
             of the pool and from the head node's).",
        ),
    ])
}
