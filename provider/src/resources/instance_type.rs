//! Data source `hpc_instance_type`: what EC2 says about an instance type (CPUs, memory, GPUs,
//! EFA, network cards), plus the on-demand price this provider uses for cost guardrails.

use async_trait::async_trait;
use tfplugin::model::Model;
use tfplugin::{
    Attribute, AttributePath, Block, Ctx, DataSource, Diagnostic, Diagnostics, Number, Schema, Type, Value,
};

use crate::clients::Clients;
use crate::pricing;
use crate::resources::aws_diag;

pub struct InstanceTypeData;

fn schema() -> Schema {
    let c = |name: &str, ty: Type, doc: &str| Attribute::computed(name, ty).description(doc);
    Schema::new(
        0,
        Block::new(vec![
            Attribute::required("instance_type", Type::String).description("EC2 instance type, e.g. `p5.48xlarge`."),
            c("id", Type::String, "The instance type."),
            c("vcpus", Type::Number, "Default vCPUs."),
            c("cores", Type::Number, "Physical cores."),
            c("threads_per_core", Type::Number, "Hardware threads per core."),
            c("memory_mib", Type::Number, "Memory in MiB."),
            c("gpus", Type::Number, "GPU count (0 without GPUs)."),
            c("gpu_model", Type::String, "GPU model as EC2 names it, e.g. `H100`."),
            c("gpu_manufacturer", Type::String, "GPU manufacturer, e.g. `NVIDIA`."),
            c("gpu_memory_mib", Type::Number, "Memory per GPU in MiB."),
            c(
                "efa_supported",
                Type::Bool,
                "Whether the type supports Elastic Fabric Adapter.",
            ),
            c(
                "max_efa_interfaces",
                Type::Number,
                "Most EFA interfaces an instance can have.",
            ),
            c(
                "network_cards",
                Type::Number,
                "Network cards (a GPU partition puts one EFA interface on each).",
            ),
            c(
                "architectures",
                Type::list(Type::String),
                "CPU architectures, e.g. `x86_64`.",
            ),
            c(
                "on_demand_hourly_price",
                Type::Number,
                "On-demand USD/hour used by the guardrails (null when unknown).",
            ),
        ])
        .description("Facts about an EC2 instance type from DescribeInstanceTypes."),
    )
}

#[async_trait]
impl DataSource for InstanceTypeData {
    fn type_name(&self) -> &'static str {
        "hpc_instance_type"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn read(&self, ctx: Ctx, config: Value) -> Result<Value, Diagnostics> {
        let clients = Clients::of(&ctx).map_err(Diagnostics::from)?;
        let name = InstanceTypeConfig::from_value(&config)
            .map_err(|e| e.into_diagnostics("The data source's configuration cannot be read"))?
            .instance_type;
        let infos = clients
            .ec2
            .instance_types(std::slice::from_ref(&name))
            .await
            .map_err(|e| aws_diag("Cannot describe instance type", &e))?;
        let Some(t) = infos.into_iter().next() else {
            return Err(Diagnostic::error(
                format!("{name:?} is not an EC2 instance type in {}", clients.aws.region),
                "Check the spelling (e.g. p5.48xlarge) and that the type is offered in this region.",
            )
            .at(AttributePath::root("instance_type"))
            .into());
        };
        let price = pricing::on_demand_price(&t.instance_type, &clients.price_overrides);
        let facts = InstanceTypeFacts {
            instance_type: name,
            id: t.instance_type.clone(),
            vcpus: t.vcpus,
            cores: t.cores,
            threads_per_core: t.threads_per_core,
            memory_mib: t.memory_mib,
            gpus: t.gpus,
            gpu_model: t.gpu_model.clone(),
            gpu_manufacturer: t.gpu_manufacturer.clone(),
            gpu_memory_mib: t.gpu_memory_mib,
            efa_supported: t.efa_supported,
            max_efa_interfaces: t.max_efa_interfaces,
            network_cards: t.network_cards.len().max(1),
            architectures: t.architectures.clone(),
            on_demand_hourly_price: price.and_then(|p| Number::parse(&p.to_string()).ok()),
        };
        Ok(facts.write(&schema().ty()))
    }
}

tfplugin::model! {
    /// What the configuration gives.
    struct InstanceTypeConfig {
        instance_type: String,
    }
}

tfplugin::model! {
    /// The data source's value.
    struct InstanceTypeFacts {
        instance_type: String,
        id: String,
        vcpus: u32,
        cores: u32,
        threads_per_core: u32,
        memory_mib: u64,
        gpus: u32,
        gpu_model: Option<String>,
        gpu_manufacturer: Option<String>,
        gpu_memory_mib: Option<u64>,
        efa_supported: bool,
        max_efa_interfaces: u32,
        network_cards: usize,
        architectures: Vec<String>,
        on_demand_hourly_price: Option<Number>,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn schema_is_well_formed() {
        super::schema().check().expect("hpc_instance_type schema");
    }
}
