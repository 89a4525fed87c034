//! Data source `hpc_instance_type`: what EC2 says about an instance type (CPUs, memory, GPUs,
//! EFA, network cards), plus the on-demand price this provider uses for cost guardrails.

use async_trait::async_trait;
use tfplugin::{Attribute, AttributePath, Block, Ctx, DataSource, Diagnostic, Diagnostics, Schema, Type, Value};

use crate::clients::Clients;
use crate::convert::{object, of_int, of_string};
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
        let name = config.attr("instance_type").as_str().unwrap_or_default().to_string();
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
        Ok(object(vec![
            ("instance_type", Value::string(&name)),
            ("id", Value::string(&t.instance_type)),
            ("vcpus", Value::int(i64::from(t.vcpus))),
            ("cores", Value::int(i64::from(t.cores))),
            ("threads_per_core", Value::int(i64::from(t.threads_per_core))),
            ("memory_mib", of_int(i64::try_from(t.memory_mib).ok())),
            ("gpus", Value::int(i64::from(t.gpus))),
            ("gpu_model", of_string(t.gpu_model.clone())),
            ("gpu_manufacturer", of_string(t.gpu_manufacturer.clone())),
            (
                "gpu_memory_mib",
                of_int(t.gpu_memory_mib.and_then(|m| i64::try_from(m).ok())),
            ),
            ("efa_supported", Value::Bool(t.efa_supported)),
            ("max_efa_interfaces", Value::int(i64::from(t.max_efa_interfaces))),
            ("network_cards", Value::int(t.network_cards.len().max(1) as i64)),
            ("architectures", crate::convert::of_list(Some(&t.architectures))),
            (
                "on_demand_hourly_price",
                price
                    .and_then(|p| tfplugin::Number::parse(&p.to_string()).ok())
                    .map(Value::Number)
                    .unwrap_or(Value::Null),
            ),
        ]))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn schema_is_well_formed() {
        super::schema().check().expect("hpc_instance_type schema");
    }
}
