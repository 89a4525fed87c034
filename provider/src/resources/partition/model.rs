//! The typed model of an `hpc_partition` value, read with the schema's defaults, and its maps
//! to the published partition document and back (read and import).

use std::collections::BTreeMap;

use hpc_aws::ec2::InstanceTypeInfo;
use tfplugin::model::{Field, Model, ModelError};
use tfplugin::{timeouts, Number, Value};

use crate::desired_state::{self, PartitionDoc, PartitionSettings, PoolDoc, ScalingStrategy, ShapeDoc, SCHEMA};

tfplugin::model! {
    /// An `hpc_partition`: every attribute and block of its schema.
    #[derive(Debug, Clone)]
    pub struct Partition {
        pub id: Option<String>,
        /// Not known at plan while the cluster is made in the same apply.
        pub cluster_id: Option<String>,
        pub name: String,
        pub instance_types: Vec<String>,
        pub min_nodes: i64,
        pub max_nodes: i64,
        pub allocation_strategy: String,
        pub scaling_strategy: String,
        pub efa_enabled: bool,
        pub placement_group: Option<bool>,
        pub ami_id: String,
        pub root_volume_size: i64,
        pub instance_profile_arn: Option<String>,
        pub user_data_extra: Option<String>,
        pub max_time: Option<String>,
        pub default_time: Option<String>,
        pub max_nodes_per_job: Option<i64>,
        pub min_nodes_per_job: Option<i64>,
        pub allow_accounts: Option<Vec<String>>,
        pub allow_groups: Option<Vec<String>>,
        pub allow_qos: Option<Vec<String>>,
        pub priority_tier: Option<i64>,
        pub oversubscribe: Option<String>,
        pub exclusive: bool,
        pub default: bool,
        pub slurm_extra: Option<BTreeMap<String, String>>,
        pub provision_timeout: String,
        pub ice_cooldown: String,
        pub wait_for_apply: bool,
        pub tags: Option<BTreeMap<String, String>>,
        pub tags_all: Option<BTreeMap<String, String>>,
        pub node_names: Option<Vec<String>>,
        pub launch_template_ids: Option<BTreeMap<String, String>>,
        pub placement_group_names: Option<Vec<String>>,
        pub max_vcpus: Option<i64>,
        pub max_gpus: Option<i64>,
        pub gpu_model: Option<String>,
        pub estimated_max_hourly_cost: Option<Number>,
        pub rendered_partition: Option<String>,
        pub desired_state_version: Option<i64>,
        pub capacity_pool: Vec<Pool>,
        pub timeouts: Value,
    }
}

tfplugin::model! {
    /// One `capacity_pool` block.
    #[derive(Debug, Clone)]
    pub struct Pool {
        pub subnet_ids: Vec<String>,
        pub region: Option<String>,
        pub capacity_type: String,
        pub capacity_reservation_id: Option<String>,
        pub ami_id: Option<String>,
        pub security_group_ids: Option<Vec<String>>,
        pub peering_connection_id: Option<String>,
    }
}

tfplugin::model! {
    /// The attributes of an `hpc_partition` configuration its validation checks, as written:
    /// unset, known only at apply, or known (no defaults filled in).
    #[derive(Debug, Clone, Default)]
    pub struct PartitionConfig {
        pub name: Field<String>,
        pub instance_types: Field<Vec<String>>,
        pub min_nodes: Field<i64>,
        pub max_nodes: Field<i64>,
        pub scaling_strategy: Field<String>,
        pub allocation_strategy: Field<String>,
        pub provision_timeout: Field<String>,
        pub ice_cooldown: Field<String>,
        pub ami_id: Field<String>,
        pub root_volume_size: Field<i64>,
        pub instance_profile_arn: Field<String>,
        pub tags: Field<BTreeMap<String, String>>,
        pub user_data_extra: Field<String>,
        pub priority_tier: Field<i64>,
        pub max_nodes_per_job: Field<i64>,
        pub min_nodes_per_job: Field<i64>,
        pub capacity_pool: Field<Vec<PoolConfig>>,
    }
}

tfplugin::model! {
    /// One `capacity_pool` block of a configuration, as validation reads it.
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct PoolConfig {
        pub subnet_ids: Field<Vec<String>>,
        pub region: Field<String>,
        pub capacity_type: Field<String>,
        pub capacity_reservation_id: Field<String>,
        pub ami_id: Field<String>,
        pub security_group_ids: Field<Vec<Field<String>>>,
        pub peering_connection_id: Field<String>,
    }
}

tfplugin::model! {
    /// What the provider computes for a partition: its id, the templates and groups apply
    /// makes, the published version and what is derived from the document. Unknown in a plan
    /// until known, null where there is none. Plan, apply and read change them through [`record`].
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Computed {
        pub id: Field<String>,
        pub node_names: Field<Vec<String>>,
        pub launch_template_ids: Field<BTreeMap<String, String>>,
        pub placement_group_names: Field<Vec<String>>,
        pub max_vcpus: Field<i64>,
        pub max_gpus: Field<i64>,
        pub gpu_model: Field<String>,
        pub estimated_max_hourly_cost: Field<Number>,
        pub rendered_partition: Field<String>,
        pub desired_state_version: Field<i64>,
    }
}

/// Changes the computed attributes of the plan or state `v` through [`Computed`]; its other
/// attributes stay as they are.
pub fn record(v: &mut Value, change: impl FnOnce(&mut Computed)) -> Result<(), tfplugin::Diagnostics> {
    tfplugin::model::change(v, &super::schema().ty(), change)
        .map_err(|e| e.into_diagnostics("The partition's computed attributes cannot be read"))
}

tfplugin::model! {
    /// What the pools' launch templates and placement groups are made of: a change of any
    /// makes them again.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Structure {
        pub instance_types: Field<Vec<String>>,
        pub capacity_pool: Field<Vec<PoolConfig>>,
        pub efa_enabled: Field<bool>,
        pub placement_group: Field<bool>,
        pub ami_id: Field<String>,
        pub root_volume_size: Field<i64>,
        pub instance_profile_arn: Field<String>,
        pub user_data_extra: Field<String>,
    }
}

tfplugin::model! {
    /// What names a partition: its cluster and its name (the id is both).
    #[derive(Debug, Clone)]
    pub struct Identity {
        pub cluster_id: Field<String>,
        pub name: Field<String>,
    }
}

impl Identity {
    /// `<cluster>/<name>`, once both are known.
    pub fn id(&self) -> Option<String> {
        Some(format!("{}/{}", self.cluster_id.known()?, self.name.known()?))
    }
}

tfplugin::model! {
    /// `placement_group`, which follows `efa_enabled` unless set.
    #[derive(Debug, Clone)]
    pub struct Placement {
        pub placement_group: Field<bool>,
        pub efa_enabled: Field<bool>,
    }
}

/// The key of a launch template in `launch_template_ids`: `<pool index>/<instance type>`.
pub fn template_key(pool: usize, instance_type: &str) -> String {
    format!("{pool}/{instance_type}")
}

/// The pool index and instance type of a `launch_template_ids` key.
pub fn parse_template_key(key: &str) -> Option<(usize, &str)> {
    let (pool, instance_type) = key.split_once('/')?;
    Some((pool.parse().ok()?, instance_type))
}

/// The launch templates of pool `pool`, by instance type, out of `launch_template_ids`.
fn pool_templates(ids: &BTreeMap<String, String>, pool: usize) -> BTreeMap<String, String> {
    ids.iter()
        .filter_map(|(k, id)| match parse_template_key(k) {
            Some((i, t)) if i == pool => Some((t.to_string(), id.clone())),
            _ => None,
        })
        .collect()
}

/// A duration attribute's seconds, or `default` when it does not parse (validation refuses
/// such a value before anything is published).
fn secs(text: &str, default: u32) -> u32 {
    timeouts::parse_duration(text)
        .ok()
        .and_then(|d| u32::try_from(d.as_secs()).ok())
        .unwrap_or(default)
}

fn u32_of(n: Option<i64>) -> Option<u32> {
    n.and_then(|n| u32::try_from(n).ok())
}

fn non_empty(l: &[String]) -> Option<Vec<String>> {
    (!l.is_empty()).then(|| l.to_vec())
}

/// A duration as the prior state wrote it when it means the same seconds (`600s` stays `600s`
/// rather than becoming `10m`), else in the document's own words.
fn duration_as_written(prior: Option<&str>, secs: u32) -> String {
    match prior {
        Some(text) if timeouts::parse_duration(text).is_ok_and(|d| d.as_secs() == u64::from(secs)) => text.to_string(),
        _ => desired_state::duration_text(secs),
    }
}

impl Partition {
    /// Reads a configuration, plan or state value with the schema's defaults filled in.
    pub fn of(v: &Value) -> Result<Partition, ModelError> {
        Partition::from_value(&super::schema().block.with_defaults(v))
    }

    /// The cluster's name (the empty string only at plan, while it is not known).
    pub fn cluster(&self) -> &str {
        self.cluster_id.as_deref().unwrap_or("")
    }

    pub fn value(&self) -> Value {
        self.write(&super::schema().ty())
    }

    /// The partition document for `cluster`, with the shapes of `infos` (instance types
    /// without facts are left out) and `region` for pools that name none.
    pub fn doc(&self, cluster: &str, infos: &[InstanceTypeInfo], region: &str) -> PartitionDoc {
        let shapes = self
            .instance_types
            .iter()
            .filter_map(|t| infos.iter().find(|i| &i.instance_type == t))
            .map(|i| shape_of(i, self.efa_enabled))
            .collect();
        let templates = self.launch_template_ids.clone().unwrap_or_default();
        let groups = self.placement_group_names.clone().unwrap_or_default();
        let pools = self
            .capacity_pool
            .iter()
            .enumerate()
            .map(|(i, p)| PoolDoc {
                region: p.region.clone().unwrap_or_else(|| region.to_string()),
                subnet_ids: p.subnet_ids.clone(),
                capacity_type: p.capacity_type.clone(),
                capacity_reservation_id: p.capacity_reservation_id.clone(),
                launch_templates: pool_templates(&templates, i),
                placement_group: groups.get(i).filter(|g| !g.is_empty()).cloned(),
            })
            .collect();
        PartitionDoc {
            schema: SCHEMA,
            cluster: cluster.to_string(),
            name: self.name.clone(),
            shapes,
            min_nodes: u32_of(Some(self.min_nodes)).unwrap_or(0),
            max_nodes: u32_of(Some(self.max_nodes)).unwrap_or(0),
            pools,
            allocation_strategy: self.allocation_strategy.clone(),
            provision_timeout_s: secs(&self.provision_timeout, 600),
            ice_cooldown_s: secs(&self.ice_cooldown, 600),
            scaling_strategy: ScalingStrategy::parse(&self.scaling_strategy).unwrap_or_default(),
            slurm: self.slurm_settings(),
            ami_id: self.ami_id.clone(),
            root_volume_size: i32::try_from(self.root_volume_size).unwrap_or(i32::MAX),
            instance_profile_arn: self.instance_profile_arn.clone(),
            user_data_extra: self.user_data_extra.clone(),
            tags: self.tags_all.clone().unwrap_or_default(),
        }
    }

    /// The partition's Slurm settings, as the document carries them.
    pub fn slurm_settings(&self) -> PartitionSettings {
        PartitionSettings {
            max_time: self.max_time.clone(),
            default_time: self.default_time.clone(),
            max_nodes_per_job: u32_of(self.max_nodes_per_job),
            min_nodes_per_job: u32_of(self.min_nodes_per_job),
            allow_accounts: self.allow_accounts.clone().unwrap_or_default(),
            allow_groups: self.allow_groups.clone().unwrap_or_default(),
            allow_qos: self.allow_qos.clone().unwrap_or_default(),
            priority_tier: u32_of(self.priority_tier),
            oversubscribe: self.oversubscribe.clone(),
            exclusive: self.exclusive,
            default: self.default,
            extra: self.slurm_extra.clone().unwrap_or_default(),
        }
    }

    /// The state a published document stands for (read, import). What the document does not
    /// carry comes from `prior` (a pool's region, AMI, groups and peering connection as written, `wait_for_apply`,
    /// the values derived at plan); durations keep the prior's spelling.
    pub fn of_doc(
        doc: &PartitionDoc,
        version: i64,
        prior: Option<&Partition>,
        default_tags: &BTreeMap<String, String>,
    ) -> Partition {
        let user_tags = crate::convert::user_tags(&doc.tags, default_tags);
        let had_tags = prior.is_some_and(|p| p.tags.is_some());
        let slurm = &doc.slurm;
        Partition {
            id: Some(format!("{}/{}", doc.cluster, doc.name)),
            cluster_id: Some(doc.cluster.clone()),
            name: doc.name.clone(),
            instance_types: doc.shapes.iter().map(|s| s.instance_type.clone()).collect(),
            min_nodes: i64::from(doc.min_nodes),
            max_nodes: i64::from(doc.max_nodes),
            allocation_strategy: doc.allocation_strategy.clone(),
            scaling_strategy: doc.scaling_strategy.as_str().to_string(),
            efa_enabled: doc.shapes.iter().any(|s| s.efa),
            placement_group: Some(doc.pools.iter().any(|p| p.placement_group.is_some())),
            ami_id: doc.ami_id.clone(),
            root_volume_size: i64::from(doc.root_volume_size),
            instance_profile_arn: doc.instance_profile_arn.clone(),
            user_data_extra: doc.user_data_extra.clone(),
            max_time: slurm.max_time.clone(),
            default_time: slurm.default_time.clone(),
            max_nodes_per_job: slurm.max_nodes_per_job.map(i64::from),
            min_nodes_per_job: slurm.min_nodes_per_job.map(i64::from),
            allow_accounts: non_empty(&slurm.allow_accounts),
            allow_groups: non_empty(&slurm.allow_groups),
            allow_qos: non_empty(&slurm.allow_qos),
            priority_tier: slurm.priority_tier.map(i64::from),
            oversubscribe: slurm.oversubscribe.clone(),
            exclusive: slurm.exclusive,
            default: slurm.default,
            slurm_extra: (!slurm.extra.is_empty()).then(|| slurm.extra.clone()),
            provision_timeout: duration_as_written(
                prior.map(|p| p.provision_timeout.as_str()),
                doc.provision_timeout_s,
            ),
            ice_cooldown: duration_as_written(prior.map(|p| p.ice_cooldown.as_str()), doc.ice_cooldown_s),
            wait_for_apply: prior.is_none_or(|p| p.wait_for_apply),
            tags: (!user_tags.is_empty() || had_tags).then_some(user_tags),
            tags_all: Some(doc.tags.clone()),
            node_names: prior.and_then(|p| p.node_names.clone()),
            launch_template_ids: Some(templates_of(doc)),
            placement_group_names: Some(
                doc.pools
                    .iter()
                    .map(|p| p.placement_group.clone().unwrap_or_default())
                    .collect(),
            ),
            max_vcpus: prior.and_then(|p| p.max_vcpus),
            max_gpus: prior.and_then(|p| p.max_gpus),
            gpu_model: prior.and_then(|p| p.gpu_model.clone()),
            estimated_max_hourly_cost: prior.and_then(|p| p.estimated_max_hourly_cost.clone()),
            rendered_partition: prior.and_then(|p| p.rendered_partition.clone()),
            desired_state_version: Some(version),
            capacity_pool: pools_of(doc, prior),
            timeouts: prior.map(|p| p.timeouts.clone()).unwrap_or(Value::Null),
        }
    }
}

/// The `capacity_pool` blocks a document stands for; what it does not carry (a pool's region,
/// AMI, groups and peering connection as written) comes from `prior`.
fn pools_of(doc: &PartitionDoc, prior: Option<&Partition>) -> Vec<Pool> {
    doc.pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let before = prior.and_then(|m| m.capacity_pool.get(i));
            Pool {
                subnet_ids: p.subnet_ids.clone(),
                region: before.and_then(|b| b.region.clone()),
                capacity_type: p.capacity_type.clone(),
                capacity_reservation_id: p.capacity_reservation_id.clone(),
                ami_id: before.and_then(|b| b.ami_id.clone()),
                security_group_ids: before.and_then(|b| b.security_group_ids.clone()),
                peering_connection_id: before.and_then(|b| b.peering_connection_id.clone()),
            }
        })
        .collect()
}

/// `launch_template_ids` out of a document's pools.
fn templates_of(doc: &PartitionDoc) -> BTreeMap<String, String> {
    doc.pools
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.launch_templates
                .iter()
                .map(move |(t, id)| (template_key(i, t), id.clone()))
        })
        .collect()
}

/// What a node set is made of, from EC2's facts about its instance type.
pub fn shape_of(t: &InstanceTypeInfo, efa: bool) -> ShapeDoc {
    ShapeDoc {
        instance_type: t.instance_type.clone(),
        vcpus: t.vcpus,
        cores: t.cores,
        threads_per_core: t.threads_per_core,
        memory_mib: t.memory_mib,
        gpus: t.gpus,
        gpu_model: t.gpu_model.clone(),
        gpu_memory_mib: t.gpu_memory_mib,
        efa: efa && t.efa_supported,
        hourly_price: None,
    }
}

#[cfg(test)]
mod schema_tests {
    use super::*;
    use tfplugin::model::{fields_outside_schema, schema_mismatches};

    #[test]
    fn the_models_read_exactly_the_schemas_attributes() {
        let schema = super::super::schema::schema();
        assert_eq!(schema_mismatches::<Partition>(&schema.block), Vec::<String>::new());
        let pool = schema
            .block
            .blocks
            .iter()
            .find(|b| b.name == "capacity_pool")
            .map(|b| b.block.clone())
            .unwrap_or_default();
        assert_eq!(schema_mismatches::<Pool>(&pool), Vec::<String>::new());
    }

    #[test]
    fn the_configuration_views_read_only_attributes_of_the_schema() {
        let schema = super::super::schema::schema();
        assert_eq!(
            fields_outside_schema::<PartitionConfig>(&schema.block),
            Vec::<String>::new()
        );
        let pool = schema
            .block
            .blocks
            .iter()
            .find(|b| b.name == "capacity_pool")
            .map(|b| b.block.clone());
        let pool = pool.unwrap_or_default();
        assert_eq!(fields_outside_schema::<PoolConfig>(&pool), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<Structure>(&schema.block), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<Placement>(&schema.block), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<Identity>(&schema.block), Vec::<String>::new());
    }

    #[test]
    fn computed_is_every_attribute_the_provider_computes_and_nothing_the_user_sets() {
        // tags_all: the provider's default tags merged in, for every resource alike.
        let block = super::super::schema::schema().block;
        let mismatches = tfplugin::model::computed_mismatches::<Computed>(&block, &["tags_all"]);
        assert_eq!(mismatches, Vec::<String>::new());
    }
}
