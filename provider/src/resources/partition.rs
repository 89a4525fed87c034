//! `hpc_partition`: a Slurm partition of elastic EC2 capacity. Owns its launch templates
//! (per capacity pool and instance type, with an EFA interface on every network card when EFA
//! is on), its placement groups, and its own desired-state document. Creating, changing or
//! removing a partition never touches the cluster or the other partitions.

use std::time::Duration;

use async_trait::async_trait;
use tfplugin::{
    timeouts, ApplyOutcome, AttributePath, CreateRequest, DeleteRequest, Diagnostic, Diagnostics, ImportRequest,
    PlanRequest, ReadRequest, Resource, Schema, UpdateRequest, ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::desired_state::{self, tag, ClusterDoc, PartitionDoc};
use crate::resources::{aws_diag, or_stop};

mod apply;
mod events;
mod model;
mod paths;
mod plan;
mod pool_checks;
mod schema;
mod validate;

use apply::{apply, remove_templates};
use plan::{plan_checks, plan_identity, plan_unknowns, set_derived};
use schema::schema;
use validate::{pool_value_checks, setting_checks, shape_checks, shared_checks, slurm_checks, PROBE_SLURM_VERSION};

use model::{Identity, Partition, PartitionConfig};
use tfplugin::model::Field;
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
        let config = match PartitionConfig::from_value(c) {
            Ok(config) => config,
            Err(e) => return e.into_diagnostics("The partition's configuration cannot be read"),
        };
        let mut diags = Diagnostics::new();
        shape_checks(&config, &mut diags);
        setting_checks(&config, &mut diags);
        for (i, pool) in config.capacity_pool.items().iter().enumerate() {
            pool_value_checks(i, pool, &mut diags);
        }
        shared_checks(&config, &mut diags);
        pool_checks::strategy(&config, &mut diags);
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
        clients.plan_tags_all(&mut req.planned);
        if let Err(d) = plan_identity(req) {
            req.diagnostics.extend(d);
        }
        plan_checks(clients, req).await;
        if let Err(d) = plan_unknowns(req) {
            req.diagnostics.extend(d);
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        apply(req.ctx, Value::Null, req.planned).await
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        apply(req.ctx, req.prior, req.planned).await
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let identity =
            Identity::from_value(&req.state).map_err(|e| e.into_diagnostics("The partition's state cannot be read"))?;
        let (Field::Known(cluster), Field::Known(name)) = (identity.cluster_id, identity.name) else {
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
            let ec2s = clients.ec2_by_region(prior.capacity_pool.iter().map(|p| p.region.as_deref()));
            for ec2 in ec2s.values() {
                let running = ec2
                    .instances_tagged(tag::PARTITION, &tag::partition_value(cluster, name))
                    .await?;
                let ids: Vec<String> = running.into_iter().map(|i| i.id).collect();
                or_stop(&req.ctx, "terminating partition nodes", ec2.terminate(&ids, timeout)).await?;
            }
            remove_templates(clients, &prior, &ec2s, &[]).await?;
            events::remove(clients, cluster, name, events::regions(clients, &prior)).await?;
            // Last: until everything else is gone, the name still belongs to this state.
            clients
                .ssm
                .delete(&desired_state::partition_owner_param(cluster, name))
                .await
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

#[cfg(test)]
mod tests {
    use super::apply::efa_cards;
    use super::*;
    use crate::convert::{self, of_list};
    use hpc_aws::ec2::InstanceTypeInfo;

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

    /// A value known only at apply is set (a rule that needs it holds) and is checked when known.
    #[tokio::test]
    async fn values_known_only_at_apply_are_set_but_not_yet_checked() {
        let pool = |reservation: Value, groups: Value, ami: Value| {
            convert::object(vec![
                ("subnet_ids", of_list(Some(&["subnet-1".to_string()]))),
                ("region", Value::string("us-west-2")),
                ("capacity_type", Value::string("capacity_block")),
                ("capacity_reservation_id", reservation),
                ("security_group_ids", groups),
                ("ami_id", ami),
            ])
        };
        let errors = |pools: Value| async move {
            let mut c = Value::null_object(&schema().ty());
            c.set_attr("name", Value::string("gpu"));
            c.set_attr("allocation_strategy", Value::string("capacity-optimized"));
            c.set_attr("capacity_pool", pools);
            let d = HpcPartition.validate(ValidateRequest { config: c }).await;
            d.0.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .filter(|p| p.starts_with("capacity_pool") || p == "allocation_strategy")
                .collect::<Vec<String>>()
        };
        // Pools made by a dynamic block over what is known only at apply: nothing to check yet.
        assert_eq!(errors(Value::Unknown).await, Vec::<String>::new());
        let unknown = Value::List(vec![pool(Value::Unknown, Value::Unknown, Value::Unknown)]);
        assert_eq!(errors(unknown).await, vec!["allocation_strategy".to_string()]);
        let unset = Value::List(vec![pool(Value::Null, Value::Null, Value::Null)]);
        assert_eq!(
            errors(unset).await,
            [
                "capacity_pool[0].capacity_reservation_id",
                "capacity_pool[0].security_group_ids",
                "capacity_pool[0].ami_id",
                "allocation_strategy",
            ]
        );
    }
}
