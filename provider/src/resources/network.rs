//! `hpc_network`: a VPC for a cluster: public and private subnets in several Availability
//! Zones, internet gateway, optional NAT gateway, route tables, an S3 gateway endpoint, and a
//! cluster security group whose members may talk to each other freely (EFA needs it).

use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::ec2::{network_cidrs, Network, NetworkSpec};
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, AttributePath, Block, CreateRequest, DeleteRequest, Diagnostic, Diagnostics,
    ImportRequest, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest, ValidateRequest, Value,
};

use crate::convert::{self, boolean, of_map, pairs, string, strings};
use crate::provider::Clients;
use crate::resources::{aws_diag, checks, or_stop, valid_name};

pub struct HpcNetwork;

const CREATE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const MAX_ZONES: usize = 6;

fn schema() -> Schema {
    let computed =
        |name: &str, ty: Type, doc: &str| Attribute::computed(name, ty).description(doc).use_state_for_unknown();
    Schema::new(
        0,
        Block::new(vec![
            computed("id", Type::String, "The VPC id."),
            Attribute::required("name", Type::String)
                .description("Name prefix of everything created (lowercase letters, digits, `-`).")
                .requires_replace(),
            Attribute::optional("cidr_block", Type::String)
                .description("VPC IPv4 range, /16 to /22 (public subnets get /+6 blocks, and EC2's smallest subnet is a /28). Private subnets get /+3 blocks.")
                .default(Value::string("10.0.0.0/16"))
                .requires_replace(),
            Attribute::optional_computed("availability_zones", Type::list(Type::String))
                .description("Zones to put a public and a private subnet in (1 to 6). Default: the region's first two.")
                .requires_replace(),
            Attribute::optional("nat_gateway", Type::Bool)
                .description("A NAT gateway so private subnets reach the internet (about $0.045/h plus data). Default true.")
                .default(Value::Bool(true))
                .requires_replace(),
            Attribute::optional("s3_endpoint", Type::Bool)
                .description("An S3 gateway endpoint: S3 and Lustre data repository traffic skips the NAT. Default true.")
                .default(Value::Bool(true))
                .requires_replace(),
            Attribute::optional("tags", Type::map(Type::String)).description("Tags of every resource of the network."),
            Attribute::computed("tags_all", Type::map(Type::String))
                .description("`tags` merged over the provider's `default_tags`."),
            computed("vpc_id", Type::String, "The VPC id."),
            computed("public_subnet_ids", Type::map(Type::String), "Public subnet id per Availability Zone."),
            computed("private_subnet_ids", Type::map(Type::String), "Private subnet id per Availability Zone."),
            computed("security_group_id", Type::String, "Cluster security group: all traffic between its members."),
            computed("internet_gateway_id", Type::String, "Internet gateway id."),
            computed("public_route_table_id", Type::String, "Route table of the public subnets."),
            computed("private_route_table_id", Type::String, "Route table of the private subnets."),
            computed("nat_gateway_id", Type::String, "NAT gateway id (null without `nat_gateway`)."),
            computed("nat_eip_allocation_id", Type::String, "Elastic IP allocation of the NAT gateway."),
            computed("s3_endpoint_id", Type::String, "S3 gateway endpoint id (null without `s3_endpoint`)."),
        ])
        .with_blocks(vec![timeouts::block(&["create", "delete"])])
        .description("A VPC laid out for Slurm clusters. hpc_cluster and hpc_partition also accept plain subnet ids of an existing VPC."),
    )
}

fn zone_map(pairs: &[(String, String)]) -> Value {
    of_map(pairs)
}

fn state_of(net: &Network, planned: &Value) -> Value {
    let mut v = planned.clone();
    let s = |x: &str| {
        if x.is_empty() {
            Value::Null
        } else {
            Value::string(x)
        }
    };
    v.set_attr("id", s(&net.vpc_id));
    v.set_attr("vpc_id", s(&net.vpc_id));
    v.set_attr("public_subnet_ids", zone_map(&net.public_subnets));
    v.set_attr("private_subnet_ids", zone_map(&net.private_subnets));
    v.set_attr("security_group_id", s(&net.security_group_id));
    v.set_attr("internet_gateway_id", s(&net.internet_gateway_id));
    v.set_attr("public_route_table_id", s(&net.public_route_table_id));
    v.set_attr("private_route_table_id", s(&net.private_route_table_id));
    v.set_attr("nat_gateway_id", convert::of_string(net.nat_gateway_id.clone()));
    v.set_attr(
        "nat_eip_allocation_id",
        convert::of_string(net.eip_allocation_id.clone()),
    );
    v.set_attr("s3_endpoint_id", convert::of_string(net.s3_endpoint_id.clone()));
    v
}

fn network_of(state: &Value) -> Network {
    let zones = |v: &Value| pairs(v).unwrap_or_default();
    let zones_in_order = |v: &Value| {
        let order = strings(state.attr("availability_zones")).unwrap_or_default();
        let mut z = zones(v);
        z.sort_by_key(|(az, _)| order.iter().position(|o| o == az).unwrap_or(usize::MAX));
        z
    };
    Network {
        vpc_id: string(state.attr("vpc_id")).unwrap_or_default(),
        internet_gateway_id: string(state.attr("internet_gateway_id")).unwrap_or_default(),
        public_subnets: zones_in_order(state.attr("public_subnet_ids")),
        private_subnets: zones_in_order(state.attr("private_subnet_ids")),
        public_route_table_id: string(state.attr("public_route_table_id")).unwrap_or_default(),
        private_route_table_id: string(state.attr("private_route_table_id")).unwrap_or_default(),
        nat_gateway_id: string(state.attr("nat_gateway_id")),
        eip_allocation_id: string(state.attr("nat_eip_allocation_id")),
        s3_endpoint_id: string(state.attr("s3_endpoint_id")),
        security_group_id: string(state.attr("security_group_id")).unwrap_or_default(),
    }
}

fn all_ids(net: &Network) -> Vec<String> {
    let mut ids = vec![
        net.vpc_id.clone(),
        net.internet_gateway_id.clone(),
        net.public_route_table_id.clone(),
        net.private_route_table_id.clone(),
        net.security_group_id.clone(),
    ];
    ids.extend(
        net.public_subnets
            .iter()
            .chain(&net.private_subnets)
            .map(|(_, id)| id.clone()),
    );
    ids.extend(
        net.nat_gateway_id
            .iter()
            .chain(&net.eip_allocation_id)
            .chain(&net.s3_endpoint_id)
            .cloned(),
    );
    ids
}

#[async_trait]
impl Resource for HpcNetwork {
    fn type_name(&self) -> &'static str {
        "hpc_network"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn validate(&self, req: ValidateRequest) -> Diagnostics {
        let c = &req.config;
        let mut diags = Diagnostics::new();
        if let Some(name) = c.attr("name").as_str() {
            if let Err(why) = valid_name(name, 32) {
                diags.error_at(AttributePath::root("name"), format!("name {name:?} is not valid"), why);
            }
        }
        if let Some(cidr) = c.attr("cidr_block").as_str() {
            let prefix = cidr.split_once('/').and_then(|(_, p)| p.parse::<u8>().ok());
            let ok = matches!(prefix, Some(16..=22)) && network_cidrs(cidr, 0).is_some();
            if !ok {
                diags.error_at(
                    AttributePath::root("cidr_block"),
                    format!("cidr_block {cidr:?} is not a usable IPv4 range"),
                    "Use a private range with a prefix from /16 to /22 (a public subnet gets a /+6 block, and EC2's smallest is a /28), e.g. 10.0.0.0/16.",
                );
            }
        }
        checks::tags(c.attr("tags"), AttributePath::root("tags"), &mut diags);
        if let Some(zones) = strings(c.attr("availability_zones")) {
            let mut sorted = zones.clone();
            sorted.sort();
            sorted.dedup();
            if zones.is_empty() || zones.len() > MAX_ZONES || sorted.len() != zones.len() {
                diags.error_at(
                    AttributePath::root("availability_zones"),
                    "availability_zones must list 1 to 6 different zones",
                    "Name zones of the provider's region, e.g. [\"us-east-1a\", \"us-east-1b\"].",
                );
            }
        }
        diags
    }

    async fn modify_plan(&self, req: &mut PlanRequest) {
        let Ok(clients) = req.ctx.provider::<Clients>() else {
            return;
        };
        clients.plan_tags_all(&mut req.planned);
        // Zones are fixed once the network exists; only a new (or replaced) network looks them up,
        // with one read: the defaults shown in the plan, and a check of configured ones.
        if req.planned.attr("availability_zones") == req.prior.attr("availability_zones") {
            return;
        }
        let known = match clients.ec2.availability_zones().await {
            Ok(z) => z,
            Err(e) => {
                req.diagnostics.extend(aws_diag("Cannot list availability zones", &e));
                return;
            }
        };
        if req.planned.attr("availability_zones").is_unknown() && req.config.attr("availability_zones").is_null() {
            let two: Vec<String> = known.iter().take(2).cloned().collect();
            req.planned.set_attr("availability_zones", convert::of_list(Some(&two)));
        }
        if let Some(zones) = strings(req.planned.attr("availability_zones")) {
            for z in zones.iter().filter(|z| !known.contains(z)) {
                req.diagnostics.push(
                    Diagnostic::error(
                        format!("availability zone {z} is not in region {}", clients.aws.region),
                        format!("Zones of {}: {}.", clients.aws.region, known.join(", ")),
                    )
                    .at(AttributePath::root("availability_zones")),
                );
            }
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        let clients = match req.ctx.provider::<Clients>() {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let p = &req.planned;
        let spec = NetworkSpec {
            name: string(p.attr("name")).unwrap_or_default(),
            cidr_block: string(p.attr("cidr_block")).unwrap_or_else(|| "10.0.0.0/16".into()),
            availability_zones: strings(p.attr("availability_zones")).unwrap_or_default(),
            nat_gateway: boolean(p.attr("nat_gateway")).unwrap_or(true),
            s3_endpoint: boolean(p.attr("s3_endpoint")).unwrap_or(true),
            tags: pairs(p.attr("tags_all")).unwrap_or_default(),
        };
        let timeout = timeouts::get(p, "create", CREATE_TIMEOUT);
        let mut net = Network::default();
        let result = or_stop(
            &req.ctx,
            "creating network",
            clients.ec2.create_network(&spec, &mut net, timeout),
        )
        .await;
        let state = state_of(&net, p);
        match result {
            Ok(()) => ApplyOutcome::ok(state),
            // Whatever was made is recorded (tainted) so destroy or the next apply removes it.
            Err(e) if net.vpc_id.is_empty() => ApplyOutcome::failed(Value::Null, aws_diag("Cannot create network", &e)),
            Err(e) => ApplyOutcome::failed(state, aws_diag("Cannot create network", &e)),
        }
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = req.ctx.provider::<Clients>().map_err(Diagnostics::from)?;
        let Some(vpc) = req.state.attr("vpc_id").as_str() else {
            return Ok(None);
        };
        let tags = clients
            .ec2
            .vpc_tags(vpc)
            .await
            .map_err(|e| aws_diag("Cannot read network", &e))?;
        let Some(tags) = tags else { return Ok(None) };
        let mut state = req.state.clone();
        // The VPC carries Name=<name>-vpc on top of the configured tags.
        let tags: Vec<(String, String)> = tags.into_iter().filter(|(k, _)| k != "Name").collect();
        let prior_all: Vec<(String, String)> = pairs(req.state.attr("tags_all"))
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k != "Name")
            .collect();
        if tags != prior_all {
            let user: Vec<(String, String)> = tags
                .iter()
                .filter(|(k, v)| clients.default_tags.get(k) != Some(v))
                .cloned()
                .collect();
            state.set_attr(
                "tags",
                if user.is_empty() && state.attr("tags").is_null() {
                    Value::Null
                } else {
                    of_map(&user)
                },
            );
            state.set_attr("tags_all", of_map(&tags));
        }
        Ok(Some(state))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let clients = match req.ctx.provider::<Clients>() {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(req.prior, d),
        };
        let net = network_of(&req.prior);
        let old = pairs(req.prior.attr("tags_all")).unwrap_or_default();
        let new = pairs(req.planned.attr("tags_all")).unwrap_or_default();
        match clients.ec2.retag(&all_ids(&net), &old, &new).await {
            Ok(()) => ApplyOutcome::ok(req.planned),
            Err(e) => ApplyOutcome::failed(req.prior, aws_diag("Cannot update network tags", &e)),
        }
    }

    async fn import(&self, req: ImportRequest) -> Result<Value, Diagnostics> {
        let id = req.id.trim();
        if !id.starts_with("vpc-") {
            return Err(Diagnostic::error(
                "Invalid import id",
                format!("{id:?}: import an hpc_network by its VPC id (vpc-...)."),
            )
            .into());
        }
        let clients = req.ctx.provider::<Clients>().map_err(Diagnostics::from)?;
        let found = clients
            .ec2
            .discover_network(id)
            .await
            .map_err(|e| aws_diag("Cannot import network", &e))?;
        let Some((name, net, cidr, tags)) = found else {
            return Err(Diagnostic::error(
                "Network not found",
                format!("VPC {id} does not exist in {}.", clients.aws.region),
            )
            .into());
        };
        Ok(import_value(&name, &net, &cidr, &tags, clients))
    }

    async fn delete(&self, req: DeleteRequest) -> Diagnostics {
        let clients = match req.ctx.provider::<Clients>() {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let net = network_of(&req.prior);
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        match or_stop(&req.ctx, "deleting network", clients.ec2.delete_network(&net, timeout)).await {
            Ok(()) => Diagnostics::new(),
            Err(e) => aws_diag("Cannot delete network", &e),
        }
    }
}

fn import_value(name: &str, net: &Network, cidr: &str, tags: &[(String, String)], clients: &Clients) -> Value {
    let mut v = Value::null_object(&schema().ty());
    v.set_attr("name", Value::string(name));
    v.set_attr("cidr_block", Value::string(cidr));
    let zones: Vec<String> = net.private_subnets.iter().map(|(az, _)| az.clone()).collect();
    v.set_attr("availability_zones", convert::of_list(Some(&zones)));
    v.set_attr("nat_gateway", Value::Bool(net.nat_gateway_id.is_some()));
    v.set_attr("s3_endpoint", Value::Bool(net.s3_endpoint_id.is_some()));
    let user: Vec<(String, String)> = tags
        .iter()
        .filter(|(k, val)| clients.default_tags.get(k) != Some(val))
        .cloned()
        .collect();
    v.set_attr("tags", if user.is_empty() { Value::Null } else { of_map(&user) });
    v.set_attr("tags_all", of_map(tags));
    state_of(net, &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_well_formed() {
        schema().check().expect("hpc_network schema");
    }

    #[tokio::test]
    async fn bad_inputs_are_named() {
        let mut c = Value::null_object(&schema().ty());
        c.set_attr("name", Value::string("Bad Name"));
        c.set_attr("cidr_block", Value::string("10.0.0.0/8"));
        c.set_attr(
            "availability_zones",
            convert::of_list(Some(&["a".to_string(), "a".to_string()])),
        );
        let d = HpcNetwork.validate(ValidateRequest { config: c }).await;
        let paths: Vec<String> =
            d.0.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .collect();
        assert_eq!(paths, vec!["name", "cidr_block", "availability_zones"]);
    }

    #[test]
    fn state_round_trips_the_network() {
        let net = Network {
            vpc_id: "vpc-1".into(),
            internet_gateway_id: "igw-1".into(),
            public_subnets: vec![
                ("us-east-1b".into(), "subnet-b".into()),
                ("us-east-1a".into(), "subnet-a".into()),
            ],
            private_subnets: vec![
                ("us-east-1b".into(), "subnet-d".into()),
                ("us-east-1a".into(), "subnet-c".into()),
            ],
            public_route_table_id: "rtb-1".into(),
            private_route_table_id: "rtb-2".into(),
            nat_gateway_id: Some("nat-1".into()),
            eip_allocation_id: Some("eipalloc-1".into()),
            s3_endpoint_id: None,
            security_group_id: "sg-1".into(),
        };
        let mut planned = Value::null_object(&schema().ty());
        planned.set_attr(
            "availability_zones",
            convert::of_list(Some(&["us-east-1b".to_string(), "us-east-1a".to_string()])),
        );
        let state = state_of(&net, &planned);
        assert_eq!(network_of(&state), net);
    }
}
