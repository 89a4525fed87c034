//! Data source `hpc_capacity`: for capacity planning across accounts and regions, what each
//! instance type may still get in each region: the account's EC2 vCPU quota for its class, the
//! vCPUs running against it now, how many more instances and GPUs that leaves, and the price.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hpc_aws::quotas::vcpu_quota;
use tfplugin::model::Model;
use tfplugin::{
    Attribute, AttributePath, Block, Ctx, DataSource, Diagnostic, Diagnostics, Number, Schema, Type, Value,
};

use crate::clients::Clients;
use crate::pricing;
use crate::resources::aws_diag;

pub struct CapacityData;

/// The attributes of one entry of `pools`.
fn pool_type() -> Type {
    let n = || Type::Number;
    Type::Object(BTreeMap::from([
        ("region".to_string(), Type::String),
        ("instance_type".to_string(), Type::String),
        ("vcpus".to_string(), n()),
        ("gpus".to_string(), n()),
        ("quota_code".to_string(), Type::String),
        ("quota_name".to_string(), Type::String),
        ("quota_vcpus".to_string(), n()),
        ("used_vcpus".to_string(), n()),
        ("free_instances".to_string(), n()),
        ("free_gpus".to_string(), n()),
        ("hourly_price".to_string(), n()),
    ]))
}

fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(vec![
            Attribute::required("instance_types", Type::list(Type::String))
                .description("Instance types to plan for, e.g. `[\"p5.48xlarge\", \"p4d.24xlarge\"]`."),
            Attribute::optional("regions", Type::list(Type::String))
                .description("Regions to look in (same account and credentials). Default: the provider's region."),
            Attribute::optional("spot", Type::Bool).description("Spot quotas and use instead of on-demand. Default false."),
            Attribute::computed("id", Type::String).description("The regions and types asked for."),
            Attribute::computed("pools", Type::list(pool_type())).description(
                "One entry per region and type: `vcpus` and `gpus` per instance; the quota (`quota_code`, `quota_name`, `quota_vcpus`; null for types of no vCPU quota class, such as mac hosts, and for spot of HPC and High Memory types, which have no spot) and the vCPUs of pending and running instances of its class (`used_vcpus`); `free_instances` and `free_gpus` that leaves; `hourly_price` (on-demand USD from the guardrails' table or prices, known for us-east-1 only; null elsewhere and for spot, which has no fixed price).",
            ),
            Attribute::computed("total_free_gpus", Type::Number).description("The sum of `free_gpus` over `pools`."),
        ])
        .description("Quotas, current use, room and prices per region and instance type, for capacity planning."),
    )
}

#[async_trait]
impl DataSource for CapacityData {
    fn type_name(&self) -> &'static str {
        "hpc_capacity"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn read(&self, ctx: Ctx, config: Value) -> Result<Value, Diagnostics> {
        let clients = Clients::of(&ctx).map_err(Diagnostics::from)?;
        let mut c = Capacity::from_value(&config)
            .map_err(|e| e.into_diagnostics("The data source's configuration cannot be read"))?;
        let regions = c.regions.clone().unwrap_or_else(|| vec![clients.aws.region.clone()]);
        let spot = c.spot.unwrap_or(false);
        let mut pools = Vec::new();
        for region in &regions {
            for mut room in region_pools(clients, region, &c.instance_types, spot).await? {
                room.hourly_price = (!spot && room.region == "us-east-1")
                    .then(|| pricing::on_demand_price(&room.instance_type, &clients.price_overrides))
                    .flatten()
                    .and_then(|p| Number::parse(&p.to_string()).ok());
                pools.push(room);
            }
        }
        c.id = Some(format!("{}:{}", regions.join(","), c.instance_types.join(",")));
        c.total_free_gpus = Some(pools.iter().filter_map(|p| p.free_gpus).sum());
        c.pools = Some(pools);
        Ok(c.write(&schema().ty()))
    }
}

tfplugin::model! {
    /// The data source's configuration and value.
    struct Capacity {
        instance_types: Vec<String>,
        regions: Option<Vec<String>>,
        spot: Option<bool>,
        id: Option<String>,
        pools: Option<Vec<PoolRoom>>,
        total_free_gpus: Option<u64>,
    }
}

tfplugin::model! {
    /// One entry of `pools`: a type's room in a region.
    struct PoolRoom {
        region: String,
        instance_type: String,
        vcpus: u64,
        gpus: u64,
        quota_code: Option<String>,
        quota_name: Option<String>,
        quota_vcpus: Option<u64>,
        used_vcpus: Option<u64>,
        free_instances: Option<u64>,
        free_gpus: Option<u64>,
        hourly_price: Option<Number>,
    }
}

/// The room of each type in one region: its quota, what runs against it, what is left.
async fn region_pools(
    clients: &Clients,
    region: &str,
    types: &[String],
    spot: bool,
) -> Result<Vec<PoolRoom>, Diagnostics> {
    let ec2 = clients.aws.ec2_in(region);
    let infos = ec2
        .instance_types(types)
        .await
        .map_err(|e| aws_diag(&format!("Cannot describe instance types in {region}"), &e))?;
    if let Some(missing) = types.iter().find(|t| !infos.iter().any(|i| &i.instance_type == *t)) {
        return Err(Diagnostic::error(
            format!("{missing:?} is not an EC2 instance type in {region}"),
            "Check the spelling (e.g. p5.48xlarge) and that the type is offered in that region.",
        )
        .at(AttributePath::root("instance_types"))
        .into());
    }
    let running = ec2
        .running_instance_types()
        .await
        .map_err(|e| aws_diag(&format!("Cannot list running instances in {region}"), &e))?;
    let running_types: Vec<String> = {
        let mut t: Vec<String> = running.iter().map(|(t, _)| t.clone()).collect();
        t.sort();
        t.dedup();
        t
    };
    let running_infos = ec2
        .instance_types(&running_types)
        .await
        .map_err(|e| aws_diag(&format!("Cannot describe running instance types in {region}"), &e))?;
    let quotas = clients.aws.quotas_in(region);
    let mut out = Vec::new();
    for t in types {
        let Some(info) = infos.iter().find(|i| &i.instance_type == t) else {
            continue;
        };
        let (vcpus, gpus) = (u64::from(info.vcpus), u64::from(info.gpus));
        let mut room = PoolRoom {
            region: region.to_string(),
            instance_type: t.clone(),
            vcpus,
            gpus,
            quota_code: None,
            quota_name: None,
            quota_vcpus: None,
            used_vcpus: None,
            free_instances: None,
            free_gpus: None,
            hourly_price: None,
        };
        if let Some(q) = vcpu_quota(t, spot) {
            let value = quotas
                .ec2_value(q.code)
                .await
                .map_err(|e| aws_diag(&format!("Cannot read the EC2 quota {} in {region}", q.code), &e))?;
            let used: u64 = running
                .iter()
                .filter(|(rt, rspot)| *rspot == spot && vcpu_quota(rt, spot) == Some(q))
                .filter_map(|(rt, _)| running_infos.iter().find(|i| &i.instance_type == rt))
                .map(|i| u64::from(i.vcpus))
                .sum();
            let free = ((value as u64).saturating_sub(used)) / vcpus.max(1);
            room.quota_code = Some(q.code.to_string());
            room.quota_name = Some(q.name.to_string());
            room.quota_vcpus = Some(value as u64);
            room.used_vcpus = Some(used);
            room.free_instances = Some(free);
            room.free_gpus = Some(free * gpus);
        }
        out.push(room);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn schema_is_well_formed() {
        super::schema().check().expect("hpc_capacity schema");
    }
}
