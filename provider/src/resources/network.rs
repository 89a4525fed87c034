//! `hpc_network`: a VPC for a cluster: public and private subnets in several Availability
//! Zones, internet gateway, optional NAT gateway, route tables, an S3 gateway endpoint, and a
//! cluster security group whose members may talk to each other freely (EFA needs it).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::ec2::{network_cidrs, Network, NetworkSpec};
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, AttributePath, Block, CreateRequest, DeleteRequest, Diagnostic, Diagnostics,
    ImportRequest, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest, ValidateRequest, Value,
};

use tfplugin::model::{Field, Model};

use crate::clients::Clients;
use crate::convert::user_tags;
use crate::resources::{aws_diag, checks, or_stop, valid_name};

pub struct HpcNetwork;

const CREATE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const MAX_ZONES: usize = 6;

fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(vec![
            Attribute::computed_kept("id", Type::String, "The VPC id."),
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
            Attribute::computed_kept("vpc_id", Type::String, "The VPC id."),
            Attribute::computed_kept("public_subnet_ids", Type::map(Type::String), "Public subnet id per Availability Zone."),
            Attribute::computed_kept("private_subnet_ids", Type::map(Type::String), "Private subnet id per Availability Zone."),
            Attribute::computed_kept("security_group_id", Type::String, "Cluster security group: all traffic between its members."),
            Attribute::computed_kept("internet_gateway_id", Type::String, "Internet gateway id."),
            Attribute::computed_kept("public_route_table_id", Type::String, "Route table of the public subnets."),
            Attribute::computed_kept("private_route_table_id", Type::String, "Route table of the private subnets."),
            Attribute::computed_kept("nat_gateway_id", Type::String, "NAT gateway id (null without `nat_gateway`)."),
            Attribute::computed_kept("nat_eip_allocation_id", Type::String, "Elastic IP allocation of the NAT gateway."),
            Attribute::computed_kept("s3_endpoint_id", Type::String, "S3 gateway endpoint id (null without `s3_endpoint`)."),
        ])
        .with_blocks(vec![timeouts::block(&["create", "delete"])])
        .description("A VPC laid out for Slurm clusters. hpc_cluster and hpc_partition also accept plain subnet ids of an existing VPC."),
    )
}

tfplugin::model! {
    /// The attributes of an `hpc_network` configuration its validation checks, as written.
    #[derive(Debug, Clone, Default)]
    struct NetworkConfig {
        name: Field<String>,
        cidr_block: Field<String>,
        availability_zones: Field<Vec<String>>,
        tags: Field<BTreeMap<String, String>>,
    }
}

impl NetworkConfig {
    /// A configuration, plan or prior state (null for a create: every attribute unset).
    fn of_state(v: &Value) -> Result<NetworkConfig, tfplugin::model::ModelError> {
        if v.is_null() {
            return Ok(NetworkConfig::default());
        }
        NetworkConfig::from_value(v)
    }
}

tfplugin::model! {
    /// `availability_zones`, which the plan fills in when the configuration leaves it out.
    struct Zones {
        availability_zones: Field<Vec<String>>,
    }
}

tfplugin::model! {
    /// An `hpc_network`: every attribute of its schema.
    #[derive(Debug, Clone, PartialEq)]
    struct NetworkModel {
        id: Option<String>,
        name: String,
        cidr_block: String,
        availability_zones: Option<Vec<String>>,
        nat_gateway: bool,
        s3_endpoint: bool,
        tags: Option<BTreeMap<String, String>>,
        tags_all: Option<BTreeMap<String, String>>,
        vpc_id: Option<String>,
        public_subnet_ids: Option<BTreeMap<String, String>>,
        private_subnet_ids: Option<BTreeMap<String, String>>,
        security_group_id: Option<String>,
        internet_gateway_id: Option<String>,
        public_route_table_id: Option<String>,
        private_route_table_id: Option<String>,
        nat_gateway_id: Option<String>,
        nat_eip_allocation_id: Option<String>,
        s3_endpoint_id: Option<String>,
        timeouts: Value,
    }
}

impl NetworkModel {
    fn of(v: &Value) -> Result<NetworkModel, Diagnostics> {
        NetworkModel::from_value(&schema().block.with_defaults(v))
            .map_err(|e| e.into_diagnostics("The network's values cannot be read"))
    }

    fn value(&self) -> Value {
        self.write(&schema().ty())
    }

    /// This network as `net` made it.
    fn with(mut self, net: &Network) -> NetworkModel {
        let id = |x: &str| (!x.is_empty()).then(|| x.to_string());
        let zones = |z: &[(String, String)]| Some(z.iter().cloned().collect());
        self.id = id(&net.vpc_id);
        self.vpc_id = id(&net.vpc_id);
        self.public_subnet_ids = zones(&net.public_subnets);
        self.private_subnet_ids = zones(&net.private_subnets);
        self.security_group_id = id(&net.security_group_id);
        self.internet_gateway_id = id(&net.internet_gateway_id);
        self.public_route_table_id = id(&net.public_route_table_id);
        self.private_route_table_id = id(&net.private_route_table_id);
        self.nat_gateway_id = net.nat_gateway_id.clone();
        self.nat_eip_allocation_id = net.eip_allocation_id.clone();
        self.s3_endpoint_id = net.s3_endpoint_id.clone();
        self
    }

    /// The network this state records, subnets in the order of `availability_zones`.
    fn network(&self) -> Network {
        let order = self.availability_zones.clone().unwrap_or_default();
        let in_order = |m: &Option<BTreeMap<String, String>>| {
            let mut z: Vec<(String, String)> = m.iter().flatten().map(|(a, b)| (a.clone(), b.clone())).collect();
            z.sort_by_key(|(az, _)| order.iter().position(|o| o == az).unwrap_or(usize::MAX));
            z
        };
        Network {
            vpc_id: self.vpc_id.clone().unwrap_or_default(),
            internet_gateway_id: self.internet_gateway_id.clone().unwrap_or_default(),
            public_subnets: in_order(&self.public_subnet_ids),
            private_subnets: in_order(&self.private_subnet_ids),
            public_route_table_id: self.public_route_table_id.clone().unwrap_or_default(),
            private_route_table_id: self.private_route_table_id.clone().unwrap_or_default(),
            nat_gateway_id: self.nat_gateway_id.clone(),
            eip_allocation_id: self.nat_eip_allocation_id.clone(),
            s3_endpoint_id: self.s3_endpoint_id.clone(),
            security_group_id: self.security_group_id.clone().unwrap_or_default(),
        }
    }

    fn tags_all(&self) -> Vec<(String, String)> {
        self.tags_all.clone().unwrap_or_default().into_iter().collect()
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
        let c = match NetworkConfig::from_value(&req.config) {
            Ok(c) => c,
            Err(e) => return e.into_diagnostics("The network's configuration cannot be read"),
        };
        let mut diags = Diagnostics::new();
        if let Some(name) = c.name.as_str() {
            if let Err(why) = valid_name(name, 32) {
                diags.error_at(AttributePath::root("name"), format!("name {name:?} is not valid"), why);
            }
        }
        if let Some(cidr) = c.cidr_block.as_str() {
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
        checks::tags(c.tags.known(), AttributePath::root("tags"), &mut diags);
        if let Some(zones) = c.availability_zones.known() {
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
        let Ok(clients) = Clients::of(&req.ctx) else {
            return;
        };
        clients.plan_tags_all(&mut req.planned);
        // Zones are fixed once the network exists; only a new (or replaced) network looks them up,
        // with one read: the defaults shown in the plan, and a check of configured ones.
        let zones = |v: &Value| NetworkConfig::of_state(v).map(|n| n.availability_zones);
        let (Ok(planned), Ok(prior), Ok(given)) = (zones(&req.planned), zones(&req.prior), zones(&req.config)) else {
            return;
        };
        if planned == prior {
            return;
        }
        let known = match clients.ec2.availability_zones().await {
            Ok(z) => z,
            Err(e) => {
                req.diagnostics.extend(aws_diag("Cannot list availability zones", &e));
                return;
            }
        };
        let planned = if planned.is_unknown() && !given.is_set() {
            let two = Field::Known(known.iter().take(2).cloned().collect());
            let shown = tfplugin::model::change(&mut req.planned, &schema().block.ty(), |z: &mut Zones| {
                z.availability_zones = two.clone();
            });
            if let Err(e) = shown {
                req.diagnostics.push(e.diagnostic("The planned network cannot be read"));
            }
            two
        } else {
            planned
        };
        if let Some(zones) = planned.known() {
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
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let planned = match NetworkModel::of(&req.planned) {
            Ok(m) => m,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let spec = NetworkSpec {
            name: planned.name.clone(),
            cidr_block: planned.cidr_block.clone(),
            availability_zones: planned.availability_zones.clone().unwrap_or_default(),
            nat_gateway: planned.nat_gateway,
            s3_endpoint: planned.s3_endpoint,
            tags: planned.tags_all(),
        };
        let timeout = timeouts::get(&req.planned, "create", CREATE_TIMEOUT);
        let mut net = Network::default();
        let result = or_stop(
            &req.ctx,
            "creating network",
            clients.ec2.create_network(&spec, &mut net, timeout),
        )
        .await;
        let state = planned.with(&net).value();
        match result {
            Ok(()) => ApplyOutcome::ok(state),
            // Whatever was made is recorded (tainted) so destroy or the next apply removes it.
            Err(e) if net.vpc_id.is_empty() => ApplyOutcome::failed(Value::Null, aws_diag("Cannot create network", &e)),
            Err(e) => ApplyOutcome::failed(state, aws_diag("Cannot create network", &e)),
        }
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let mut state = NetworkModel::of(&req.state)?;
        let Some(vpc) = state.vpc_id.clone() else {
            return Ok(None);
        };
        let tags = clients
            .ec2
            .vpc_tags(&vpc)
            .await
            .map_err(|e| aws_diag("Cannot read network", &e))?;
        let Some(tags) = tags else { return Ok(None) };
        // The VPC carries Name=<name>-vpc on top of the configured tags.
        let not_name = |(k, _): &(String, String)| k != "Name";
        let tags: BTreeMap<String, String> = tags.into_iter().filter(not_name).collect();
        let prior_all: BTreeMap<String, String> = state.tags_all().into_iter().filter(not_name).collect();
        if tags != prior_all {
            let user = user_tags(&tags, &clients.default_tags);
            state.tags = (!user.is_empty() || state.tags.is_some()).then_some(user);
            state.tags_all = Some(tags);
        }
        Ok(Some(state.value()))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(req.prior, d),
        };
        let (prior, planned) = match (NetworkModel::of(&req.prior), NetworkModel::of(&req.planned)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(d), _) | (_, Err(d)) => return ApplyOutcome::failed(req.prior, d),
        };
        let ids = all_ids(&prior.network());
        match clients.ec2.retag(&ids, &prior.tags_all(), &planned.tags_all()).await {
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
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
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
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let net = match NetworkModel::of(&req.prior) {
            Ok(m) => m.network(),
            Err(d) => return d,
        };
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        match or_stop(&req.ctx, "deleting network", clients.ec2.delete_network(&net, timeout)).await {
            Ok(()) => Diagnostics::new(),
            Err(e) => aws_diag("Cannot delete network", &e),
        }
    }
}

fn import_value(name: &str, net: &Network, cidr: &str, tags: &[(String, String)], clients: &Clients) -> Value {
    let tags_all: BTreeMap<String, String> = tags.iter().cloned().collect();
    let user = user_tags(&tags_all, &clients.default_tags);
    NetworkModel {
        id: None,
        name: name.to_string(),
        cidr_block: cidr.to_string(),
        availability_zones: Some(net.private_subnets.iter().map(|(az, _)| az.clone()).collect()),
        nat_gateway: net.nat_gateway_id.is_some(),
        s3_endpoint: net.s3_endpoint_id.is_some(),
        tags: (!user.is_empty()).then_some(user),
        tags_all: Some(tags_all),
        vpc_id: None,
        public_subnet_ids: None,
        private_subnet_ids: None,
        security_group_id: None,
        internet_gateway_id: None,
        public_route_table_id: None,
        private_route_table_id: None,
        nat_gateway_id: None,
        nat_eip_allocation_id: None,
        s3_endpoint_id: None,
        timeouts: Value::Null,
    }
    .with(net)
    .value()
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
            crate::convert::of_list(Some(&["a".to_string(), "a".to_string()])),
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
        planned.set_attr("name", Value::string("lab"));
        planned.set_attr(
            "availability_zones",
            crate::convert::of_list(Some(&["us-east-1b".to_string(), "us-east-1a".to_string()])),
        );
        let state = NetworkModel::of(&planned).expect("planned").with(&net).value();
        assert_eq!(NetworkModel::of(&state).expect("state").network(), net);
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use tfplugin::model::{fields_outside_schema, schema_mismatches};

    #[test]
    fn the_model_reads_the_schema_and_the_configuration_view_only_its_attributes() {
        let block = schema().block;
        assert_eq!(schema_mismatches::<NetworkModel>(&block), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<NetworkConfig>(&block), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<Zones>(&block), Vec::<String>::new());
    }
}
