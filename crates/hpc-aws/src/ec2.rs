//! EC2: instance type facts, networks (VPC, subnets, gateways, routes, S3 endpoint, cluster
//! security group), launch templates, placement groups and instances.
//!
//! Creation is find-or-create wherever EC2 offers a unique name or a client token, so a
//! create that was interrupted and run again adopts what the first run made instead of
//! making a second copy.

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_ec2::types::{
    Filter, InstanceStateName, InstanceType, IpPermission, IpRange, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplatePlacementRequest, LaunchTemplateSpecification, LaunchTemplateTagSpecificationRequest, LocationType,
    PlacementStrategy, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, UserIdGroupPair, VolumeType,
};
use aws_sdk_ec2::Client;
use base64::Engine as _;

use crate::error::{AwsError, Result};
use crate::view::Views;
use crate::wait::{self, Backoff, Poll};

mod network;

mod persist;
pub use persist::{InterfaceInfo, VolumeInfo, VolumeSpec};

/// What EC2 says about an instance type: what Slurm and the guardrails need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceTypeInfo {
    pub instance_type: String,
    pub vcpus: u32,
    pub cores: u32,
    pub threads_per_core: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub gpu_manufacturer: Option<String>,
    pub gpu_memory_mib: Option<u64>,
    pub efa_supported: bool,
    pub max_efa_interfaces: u32,
    /// Network card indexes (EFA gets one interface per card).
    pub network_cards: Vec<i32>,
    pub architectures: Vec<String>,
}

/// A network made by [`Ec2::create_network`]; ids are filled in as they are created, so a
/// failure part-way still says what exists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Network {
    pub vpc_id: String,
    pub internet_gateway_id: String,
    /// (availability zone, subnet id), in the order of the requested zones.
    pub public_subnets: Vec<(String, String)>,
    pub private_subnets: Vec<(String, String)>,
    pub public_route_table_id: String,
    pub private_route_table_id: String,
    pub nat_gateway_id: Option<String>,
    pub eip_allocation_id: Option<String>,
    pub s3_endpoint_id: Option<String>,
    pub security_group_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSpec {
    pub name: String,
    pub cidr_block: String,
    pub availability_zones: Vec<String>,
    pub nat_gateway: bool,
    pub s3_endpoint: bool,
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootVolume {
    pub size_gib: i32,
    pub volume_type: String,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
}

/// Everything a launch template says; instances get the tags too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateSpec {
    pub name: String,
    pub image_id: String,
    pub instance_type: Option<String>,
    pub key_name: Option<String>,
    pub security_group_ids: Vec<String>,
    pub instance_profile_arn: Option<String>,
    pub user_data: Option<String>,
    pub root_volume: Option<RootVolume>,
    /// Network card indexes to put an EFA interface on; empty means one plain interface.
    pub efa_network_cards: Vec<i32>,
    pub placement_group: Option<String>,
    /// The capacity reservation (or Capacity Block) instances from this template launch into.
    pub capacity_reservation: Option<ReservationTarget>,
    pub tags: Vec<(String, String)>,
}

/// A launch template's target reservation: an On-Demand Capacity Reservation, or a Capacity
/// Block (which also needs the `capacity-block` market on the template and the fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationTarget {
    pub id: String,
    pub capacity_block: bool,
}

/// What an instant fleet buys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Market {
    #[default]
    OnDemand,
    Spot,
    /// Inside a Capacity Block the launch templates target.
    CapacityBlock,
}

/// A capacity reservation as EC2 describes it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityReservationInfo {
    pub id: String,
    pub instance_type: String,
    pub availability_zone: String,
    /// `active`, `scheduled`, `expired`, `cancelled`, `pending`, `failed`, ...
    pub state: String,
    pub total: i32,
    pub available: i32,
    pub capacity_block: bool,
    /// Start and end, unix seconds (end `None`: until cancelled).
    pub start_s: Option<i64>,
    pub end_s: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceInfo {
    pub id: String,
    pub state: String,
    pub private_ip: Option<String>,
    pub public_ip: Option<String>,
    pub subnet_id: Option<String>,
    pub instance_type: String,
    pub tags: Vec<(String, String)>,
    /// Launch time, unix seconds (0 when EC2 did not say).
    pub launched_at: i64,
}

impl InstanceInfo {
    /// The value of one of the instance's tags.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// One launch choice of an instant fleet: a launch template (which fixes the instance type's
/// interfaces), the type, a subnet, and its priority (lower first).
#[derive(Debug, Clone, PartialEq)]
pub struct FleetOverride {
    pub launch_template_id: String,
    pub instance_type: String,
    pub subnet_id: String,
    pub priority: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FleetRequest {
    pub overrides: Vec<FleetOverride>,
    pub count: i32,
    pub market: Market,
    /// `prioritized`, `lowest-price`, `capacity-optimized` or `price-capacity-optimized`.
    pub allocation_strategy: String,
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetInstance {
    pub id: String,
    pub instance_type: String,
    pub subnet_id: Option<String>,
}

/// A capacity failure EC2 reports inside a successful instant-fleet answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub subnet_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetOutcome {
    pub instances: Vec<FleetInstance>,
    pub errors: Vec<FleetError>,
}

#[derive(Clone, Debug)]
pub struct Ec2 {
    pub(crate) client: Client,
    region: String,
    /// Instance type facts already described (they do not change while a process runs).
    /// (`None`: EC2 does not know the name.)
    types: std::sync::Arc<tokio::sync::Mutex<std::collections::HashMap<String, Option<InstanceTypeInfo>>>>,
    /// Instances carrying a tag key, by tag key, for refreshes (see [`crate::view`]).
    tagged: std::sync::Arc<Views<std::collections::HashMap<String, InstanceInfo>>>,
}

pub(crate) fn sdk_tags(tags: &[(String, String)]) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// Tag specifications for the given resource kinds; none when there are no tags (EC2
/// rejects an empty specification).
pub(crate) fn tag_specs(kinds: &[ResourceType], tags: &[(String, String)]) -> Option<Vec<TagSpecification>> {
    (!tags.is_empty()).then(|| {
        kinds
            .iter()
            .map(|k| {
                TagSpecification::builder()
                    .resource_type(k.clone())
                    .set_tags(Some(sdk_tags(tags)))
                    .build()
            })
            .collect()
    })
}

/// TCP ingress on one port from one IPv4 CIDR.
fn tcp_from(port: i32, cidr: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(port)
        .to_port(port)
        .ip_ranges(IpRange::builder().cidr_ip(cidr).build())
        .build()
}

/// The (port, CIDR) pairs of a group's single-port TCP rules from IPv4 ranges.
fn tcp_cidr_rules(perms: &[IpPermission]) -> BTreeSet<(i32, String)> {
    perms
        .iter()
        .filter(|p| p.ip_protocol() == Some("tcp") && p.from_port().is_some() && p.from_port() == p.to_port())
        .flat_map(|p| {
            let port = p.from_port().unwrap_or_default();
            p.ip_ranges()
                .iter()
                .filter_map(move |r| r.cidr_ip().map(|c| (port, c.to_string())))
        })
        .collect()
}

pub(crate) fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.iter().map(|v| v.to_string()).collect()))
        .build()
}

/// The `index`-th block of `new_prefix` inside `cidr` (IPv4), e.g. 10.0.0.0/16, /19, 2 → 10.0.64.0/19.
pub fn subnet_cidr(cidr: &str, new_prefix: u8, index: u32) -> Option<String> {
    let (addr, prefix) = cidr.split_once('/')?;
    let prefix: u8 = prefix.parse().ok()?;
    if new_prefix < prefix || new_prefix > 28 {
        return None;
    }
    let octets: Vec<u32> = addr.split('.').map(|o| o.parse().ok()).collect::<Option<_>>()?;
    if octets.len() != 4 || octets.iter().any(|o| *o > 255) {
        return None;
    }
    let base = octets.iter().fold(0u32, |acc, o| (acc << 8) | o);
    let slots = 1u64 << (new_prefix - prefix);
    if u64::from(index) >= slots {
        return None;
    }
    let size = 1u32 << (32 - new_prefix);
    let net = (base & (u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0))) + index * size;
    Some(format!(
        "{}.{}.{}.{}/{new_prefix}",
        net >> 24,
        (net >> 16) & 255,
        (net >> 8) & 255,
        net & 255
    ))
}

/// Private subnets are /+3 blocks 0..6 of the VPC; public ones are /+6 blocks inside block 7.
pub fn network_cidrs(cidr: &str, zone_index: u32) -> Option<(String, String)> {
    let prefix: u8 = cidr.split_once('/')?.1.parse().ok()?;
    if zone_index >= 7 {
        return None;
    }
    let private = subnet_cidr(cidr, prefix + 3, zone_index)?;
    let last = subnet_cidr(cidr, prefix + 3, 7)?;
    let public = subnet_cidr(&last, prefix + 6, zone_index)?;
    Some((public, private))
}

impl Ec2 {
    pub fn new(client: Client, region: String) -> Self {
        Ec2 {
            client,
            region,
            types: Default::default(),
            tagged: Default::default(),
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub(crate) fn ctx(&self, what: &str) -> String {
        format!("{what} ({})", self.region)
    }

    pub(crate) fn err<E>(&self, what: &str, e: &E) -> AwsError
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
    {
        AwsError::from_sdk(self.ctx(what), e)
    }

    // -----------------------------------------------------------------------------------------
    // Instance types and zones
    // -----------------------------------------------------------------------------------------

    /// Facts about the given instance types. Types EC2 does not know are left out; the
    /// caller compares the result with what it asked for. Answers are remembered, so plans of
    /// many partitions of the same types ask EC2 once.
    pub async fn instance_types(&self, names: &[String]) -> Result<Vec<InstanceTypeInfo>> {
        // Held across the describe: concurrent plans of partitions of the same types wait for
        // the first one's answer instead of each asking.
        let mut cache = self.types.lock().await;
        let missing: Vec<String> = names.iter().filter(|n| !cache.contains_key(*n)).cloned().collect();
        if !missing.is_empty() {
            let fetched = self.describe_instance_types(&missing).await?;
            for name in &missing {
                let info = fetched.iter().find(|i| &i.instance_type == name).cloned();
                cache.insert(name.clone(), info);
            }
        }
        Ok(names.iter().filter_map(|n| cache.get(n).cloned().flatten()).collect())
    }

    async fn describe_instance_types(&self, names: &[String]) -> Result<Vec<InstanceTypeInfo>> {
        let mut out = Vec::new();
        for chunk in names.chunks(100) {
            let res = self
                .client
                .describe_instance_types()
                .set_instance_types(Some(chunk.iter().map(|n| InstanceType::from(n.as_str())).collect()))
                .send()
                .await;
            match res {
                Ok(page) => out.extend(page.instance_types().iter().map(info_from_sdk)),
                Err(e) => {
                    let err = self.err("describing instance types", &e);
                    if !err.code_is(&["InvalidInstanceType"]) {
                        return Err(err);
                    }
                    // One unknown name fails the whole call: ask one at a time.
                    for name in chunk {
                        match self
                            .client
                            .describe_instance_types()
                            .instance_types(InstanceType::from(name.as_str()))
                            .send()
                            .await
                        {
                            Ok(page) => out.extend(page.instance_types().iter().map(info_from_sdk)),
                            Err(e) => {
                                let err = self.err("describing instance types", &e);
                                if !err.code_is(&["InvalidInstanceType"]) {
                                    return Err(err);
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The availability zones of the region that offer each of `names` (a type offered nowhere
    /// maps to an empty set).
    pub async fn instance_type_zones(
        &self,
        names: &[String],
    ) -> Result<std::collections::BTreeMap<String, BTreeSet<String>>> {
        let mut zones: std::collections::BTreeMap<String, BTreeSet<String>> =
            names.iter().map(|n| (n.clone(), BTreeSet::new())).collect();
        let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut pages = self
            .client
            .describe_instance_type_offerings()
            .location_type(LocationType::AvailabilityZone)
            .filters(filter("instance-type", &wanted))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.err("describing instance type offerings", &e))?;
            for offer in page.instance_type_offerings() {
                if let (Some(t), Some(zone)) = (offer.instance_type(), offer.location()) {
                    zones
                        .entry(t.as_str().to_string())
                        .or_default()
                        .insert(zone.to_string());
                }
            }
        }
        Ok(zones)
    }

    /// Availability zone names of the region, in order.
    pub async fn availability_zones(&self) -> Result<Vec<String>> {
        let out = self
            .client
            .describe_availability_zones()
            .filters(filter("state", &["available"]))
            .send()
            .await
            .map_err(|e| self.err("listing availability zones", &e))?;
        let mut zones: Vec<String> = out
            .availability_zones()
            .iter()
            .filter_map(|z| z.zone_name().map(str::to_string))
            .collect();
        zones.sort();
        Ok(zones)
    }

    /// The availability zone of each subnet, in order (missing subnets are an error).
    pub async fn subnet_zones(&self, subnet_ids: &[String]) -> Result<Vec<(String, String)>> {
        let out = self
            .client
            .describe_subnets()
            .set_subnet_ids(Some(subnet_ids.to_vec()))
            .send()
            .await
            .map_err(|e| self.err("describing subnets", &e))?;
        subnet_ids
            .iter()
            .map(|id| {
                out.subnets()
                    .iter()
                    .find(|s| s.subnet_id() == Some(id))
                    .and_then(|s| s.availability_zone())
                    .map(|az| (id.clone(), az.to_string()))
                    .ok_or_else(|| {
                        AwsError::new(
                            self.ctx("describing subnets"),
                            Some("InvalidSubnetID.NotFound"),
                            format!("subnet {id} does not exist"),
                        )
                    })
            })
            .collect()
    }

    /// The VPC of a subnet.
    pub async fn subnet_vpc(&self, subnet_id: &str) -> Result<String> {
        let out = self
            .client
            .describe_subnets()
            .subnet_ids(subnet_id)
            .send()
            .await
            .map_err(|e| self.err("describing subnet", &e))?;
        out.subnets()
            .first()
            .and_then(|s| s.vpc_id())
            .map(str::to_string)
            .ok_or_else(|| {
                AwsError::new(
                    self.ctx("describing subnet"),
                    Some("InvalidSubnetID.NotFound"),
                    format!("subnet {subnet_id} does not exist"),
                )
            })
    }

    // -----------------------------------------------------------------------------------------
    // Networks
    // -----------------------------------------------------------------------------------------

    /// Removes a route table's subnet associations (it cannot be deleted while it has any).
    async fn disassociate_all(&self, route_table: &str) -> Result<()> {
        let out = match self
            .client
            .describe_route_tables()
            .route_table_ids(route_table)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let err = self.err("describing route table", &e);
                return if err.code_is(&["InvalidRouteTableID.NotFound"]) {
                    Ok(())
                } else {
                    Err(err)
                };
            }
        };
        for assoc in out.route_tables().iter().flat_map(|r| r.associations()) {
            if assoc.main() == Some(true) {
                continue;
            }
            if let Some(id) = assoc.route_table_association_id() {
                if let Err(e) = self.client.disassociate_route_table().association_id(id).send().await {
                    let err = self.err("disassociating route table", &e);
                    if !err.code_is(&["InvalidAssociationID.NotFound"]) {
                        return Err(err);
                    }
                }
            }
        }
        Ok(())
    }

    async fn wait_nat(&self, id: &str, want: &str, timeout: Duration) -> Result<()> {
        wait::until(&format!("NAT gateway {id}"), timeout, Backoff::default(), || async {
            let out = self
                .client
                .describe_nat_gateways()
                .nat_gateway_ids(id)
                .send()
                .await
                .map_err(|e| self.err("describing NAT gateway", &e))?;
            let state = out
                .nat_gateways()
                .first()
                .and_then(|n| n.state())
                .map(|s| s.as_str().to_string());
            match state.as_deref() {
                Some(s) if s == want => Ok(Poll::Done(())),
                None if want == "deleted" => Ok(Poll::Done(())),
                Some("failed") if want != "deleted" => Err(AwsError::new(
                    self.ctx("creating NAT gateway"),
                    Some("failed"),
                    format!("NAT gateway {id} failed"),
                )),
                Some(s) => Ok(Poll::Pending(s.to_string())),
                None => Ok(Poll::Pending("not visible yet".into())),
            }
        })
        .await
    }

    /// Finds the parts of a network that [`Ec2::create_network`] made, from the VPC id and the
    /// names it tagged them with (`<name>-public-<zone>`, `<name>-cluster`, ...), for import.
    /// Returns the name, the network, the VPC's CIDR and its tags (without `Name`).
    pub async fn discover_network(
        &self,
        vpc_id: &str,
    ) -> Result<Option<(String, Network, String, Vec<(String, String)>)>> {
        let vpcs = match self.client.describe_vpcs().vpc_ids(vpc_id).send().await {
            Ok(out) => out,
            Err(e) => {
                let err = self.err("describing VPC", &e);
                return if err.code_is(&["InvalidVpcID.NotFound"]) {
                    Ok(None)
                } else {
                    Err(err)
                };
            }
        };
        let Some(vpc) = vpcs.vpcs().first() else {
            return Ok(None);
        };
        let tag = |tags: &[Tag], key: &str| {
            tags.iter()
                .find(|t| t.key() == Some(key))
                .and_then(|t| t.value())
                .map(str::to_string)
        };
        let Some(name) = tag(vpc.tags(), "Name").and_then(|n| n.strip_suffix("-vpc").map(str::to_string)) else {
            return Err(AwsError::new(
                self.ctx("importing network"),
                None,
                format!("VPC {vpc_id} has no Name tag ending in -vpc: it was not made by hpc_network"),
            ));
        };
        let mut tags: Vec<(String, String)> = vpc
            .tags()
            .iter()
            .filter(|t| t.key() != Some("Name"))
            .map(|t| {
                (
                    t.key().unwrap_or_default().to_string(),
                    t.value().unwrap_or_default().to_string(),
                )
            })
            .collect();
        tags.sort();
        let in_vpc = || filter("vpc-id", &[vpc_id]);
        let mut net = Network {
            vpc_id: vpc_id.to_string(),
            ..Network::default()
        };
        let igws = self
            .client
            .describe_internet_gateways()
            .filters(filter("attachment.vpc-id", &[vpc_id]))
            .send()
            .await
            .map_err(|e| self.err("describing internet gateways", &e))?;
        net.internet_gateway_id = igws
            .internet_gateways()
            .first()
            .and_then(|g| g.internet_gateway_id())
            .unwrap_or_default()
            .to_string();
        let subnets = self
            .client
            .describe_subnets()
            .filters(in_vpc())
            .send()
            .await
            .map_err(|e| self.err("describing subnets", &e))?;
        for s in subnets.subnets() {
            let (Some(n), Some(az), Some(id)) = (tag(s.tags(), "Name"), s.availability_zone(), s.subnet_id()) else {
                continue;
            };
            if n == format!("{name}-public-{az}") {
                net.public_subnets.push((az.to_string(), id.to_string()));
            } else if n == format!("{name}-private-{az}") {
                net.private_subnets.push((az.to_string(), id.to_string()));
            }
        }
        net.public_subnets.sort();
        net.private_subnets.sort();
        let tables = self
            .client
            .describe_route_tables()
            .filters(in_vpc())
            .send()
            .await
            .map_err(|e| self.err("describing route tables", &e))?;
        for t in tables.route_tables() {
            let id = t.route_table_id().unwrap_or_default().to_string();
            match tag(t.tags(), "Name") {
                Some(n) if n == format!("{name}-public") => net.public_route_table_id = id,
                Some(n) if n == format!("{name}-private") => net.private_route_table_id = id,
                _ => {}
            }
        }
        let nats = self
            .client
            .describe_nat_gateways()
            .filter(in_vpc())
            .send()
            .await
            .map_err(|e| self.err("describing NAT gateways", &e))?;
        if let Some(nat) = nats
            .nat_gateways()
            .iter()
            .find(|n| n.state().is_some_and(|s| s.as_str() == "available"))
        {
            net.nat_gateway_id = nat.nat_gateway_id().map(str::to_string);
            net.eip_allocation_id = nat
                .nat_gateway_addresses()
                .first()
                .and_then(|a| a.allocation_id())
                .map(str::to_string);
        }
        let endpoints = self
            .client
            .describe_vpc_endpoints()
            .filters(in_vpc())
            .send()
            .await
            .map_err(|e| self.err("describing VPC endpoints", &e))?;
        net.s3_endpoint_id = endpoints
            .vpc_endpoints()
            .iter()
            .find(|e| e.service_name().is_some_and(|s| s.ends_with(".s3")))
            .and_then(|e| e.vpc_endpoint_id())
            .map(str::to_string);
        let groups = self
            .client
            .describe_security_groups()
            .filters(in_vpc())
            .filters(filter("group-name", &[&format!("{name}-cluster")]))
            .send()
            .await
            .map_err(|e| self.err("describing security groups", &e))?;
        net.security_group_id = groups
            .security_groups()
            .first()
            .and_then(|g| g.group_id())
            .unwrap_or_default()
            .to_string();
        let cidr = vpc.cidr_block().unwrap_or_default().to_string();
        Ok(Some((name, net, cidr, tags)))
    }

    /// Deletes a network made by [`Ec2::create_network`], in reverse order; missing parts are skipped.
    pub async fn delete_network(&self, net: &Network, timeout: Duration) -> Result<()> {
        let gone = |e: &AwsError| {
            e.code
                .as_deref()
                .is_some_and(|c| c.ends_with(".NotFound") || c == "InvalidAllocationID.NotFound")
        };
        if let Some(id) = &net.s3_endpoint_id {
            let r = self.client.delete_vpc_endpoints().vpc_endpoint_ids(id).send().await;
            if let Err(e) = r {
                let err = self.err("deleting S3 endpoint", &e);
                if !gone(&err) {
                    return Err(err);
                }
            }
        }
        if let Some(id) = &net.nat_gateway_id {
            match self.client.delete_nat_gateway().nat_gateway_id(id).send().await {
                Ok(_) => self.wait_nat(id, "deleted", timeout).await?,
                Err(e) => {
                    let err = self.err("deleting NAT gateway", &e);
                    if !gone(&err) {
                        return Err(err);
                    }
                }
            }
        }
        if let Some(id) = &net.eip_allocation_id {
            if let Err(e) = self.client.release_address().allocation_id(id).send().await {
                let err = self.err("releasing the NAT address", &e);
                if !gone(&err) {
                    return Err(err);
                }
            }
        }
        for rt in [&net.public_route_table_id, &net.private_route_table_id] {
            if !rt.is_empty() {
                self.disassociate_all(rt).await?;
            }
        }
        for (_, subnet) in net.public_subnets.iter().chain(&net.private_subnets) {
            if let Err(e) = self.client.delete_subnet().subnet_id(subnet).send().await {
                let err = self.err(&format!("deleting subnet {subnet}"), &e);
                if !gone(&err) {
                    return Err(err);
                }
            }
        }
        for rt in [&net.public_route_table_id, &net.private_route_table_id] {
            if rt.is_empty() {
                continue;
            }
            if let Err(e) = self.client.delete_route_table().route_table_id(rt).send().await {
                let err = self.err(&format!("deleting route table {rt}"), &e);
                if !gone(&err) {
                    return Err(err);
                }
            }
        }
        if !net.internet_gateway_id.is_empty() {
            let _ = self
                .client
                .detach_internet_gateway()
                .internet_gateway_id(&net.internet_gateway_id)
                .vpc_id(&net.vpc_id)
                .send()
                .await;
            if let Err(e) = self
                .client
                .delete_internet_gateway()
                .internet_gateway_id(&net.internet_gateway_id)
                .send()
                .await
            {
                let err = self.err("deleting internet gateway", &e);
                if !gone(&err) {
                    return Err(err);
                }
            }
        }
        if !net.security_group_id.is_empty() {
            self.delete_security_group(&net.security_group_id).await?;
        }
        if !net.vpc_id.is_empty() {
            if let Err(e) = self.client.delete_vpc().vpc_id(&net.vpc_id).send().await {
                let err = self.err("deleting VPC", &e);
                if !gone(&err) {
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Makes the tags of every given resource go from `old` to `new`.
    pub async fn retag(&self, ids: &[String], old: &[(String, String)], new: &[(String, String)]) -> Result<()> {
        let _changing = self.tagged.changing();
        let ids: Vec<String> = ids.iter().filter(|i| !i.is_empty()).cloned().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let removed: Vec<Tag> = old
            .iter()
            .filter(|(k, _)| !new.iter().any(|(nk, _)| nk == k))
            .map(|(k, _)| Tag::builder().key(k).build())
            .collect();
        let changed: Vec<(String, String)> = new.iter().filter(|kv| !old.contains(kv)).cloned().collect();
        if !removed.is_empty() {
            self.client
                .delete_tags()
                .set_resources(Some(ids.clone()))
                .set_tags(Some(removed))
                .send()
                .await
                .map_err(|e| self.err("removing tags", &e))?;
        }
        if !changed.is_empty() {
            self.client
                .create_tags()
                .set_resources(Some(ids))
                .set_tags(Some(sdk_tags(&changed)))
                .send()
                .await
                .map_err(|e| self.err("tagging", &e))?;
        }
        Ok(())
    }

    /// The tags of a VPC, sorted (None when the VPC is gone).
    pub async fn vpc_tags(&self, vpc_id: &str) -> Result<Option<Vec<(String, String)>>> {
        match self.client.describe_vpcs().vpc_ids(vpc_id).send().await {
            Ok(out) => Ok(out.vpcs().first().map(|v| {
                let mut t: Vec<(String, String)> = v
                    .tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().unwrap_or_default().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect();
                t.sort();
                t
            })),
            Err(e) => self
                .err("describing VPC", &e)
                .or_ok_if(&["InvalidVpcID.NotFound"], None),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Security groups
    // -----------------------------------------------------------------------------------------

    /// The security group with this name in the VPC, created if missing, whose single-port TCP
    /// ingress from CIDRs is exactly `ingress`: pairs no longer listed are revoked, new ones
    /// authorized; other kinds of rules (e.g. [`Ec2::allow_self`]) are left as they are. Never
    /// opens anything to 0.0.0.0/0 by itself.
    pub async fn ensure_security_group(
        &self,
        name: &str,
        description: &str,
        vpc_id: &str,
        ingress: &[(i32, String)],
        tags: &[(String, String)],
    ) -> Result<String> {
        let existing = self
            .client
            .describe_security_groups()
            .filters(filter("vpc-id", &[vpc_id]))
            .filters(filter("group-name", &[name]))
            .send()
            .await
            .map_err(|e| self.err("looking up security group", &e))?;
        let (id, current) = match existing.security_groups().first() {
            Some(group) if group.group_id().is_some() => (
                group.group_id().unwrap_or_default().to_string(),
                tcp_cidr_rules(group.ip_permissions()),
            ),
            _ => {
                let out = self
                    .client
                    .create_security_group()
                    .group_name(name)
                    .description(description)
                    .vpc_id(vpc_id)
                    .set_tag_specifications(tag_specs(&[ResourceType::SecurityGroup], tags))
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("creating security group {name}"), &e))?;
                (out.group_id().unwrap_or_default().to_string(), BTreeSet::new())
            }
        };
        let wanted: BTreeSet<(i32, String)> = ingress.iter().cloned().collect();
        for (port, cidr) in current.difference(&wanted) {
            self.revoke(&id, tcp_from(*port, cidr)).await?;
        }
        for (port, cidr) in wanted.difference(&current) {
            self.authorize(&id, tcp_from(*port, cidr)).await?;
        }
        Ok(id)
    }

    /// Allows all traffic between members of the group (what EFA requires), ingress and egress.
    pub async fn allow_self(&self, group_id: &str) -> Result<()> {
        let perm = IpPermission::builder()
            .ip_protocol("-1")
            .user_id_group_pairs(UserIdGroupPair::builder().group_id(group_id).build())
            .build();
        self.authorize(group_id, perm.clone()).await?;
        match self
            .client
            .authorize_security_group_egress()
            .group_id(group_id)
            .ip_permissions(perm)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("allowing egress within the group", &e)
                .or_ok_if(&["InvalidPermission.Duplicate"], ()),
        }
    }

    async fn revoke(&self, group_id: &str, perm: IpPermission) -> Result<()> {
        match self
            .client
            .revoke_security_group_ingress()
            .group_id(group_id)
            .ip_permissions(perm)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("revoking a security group rule", &e)
                .or_ok_if(&["InvalidPermission.NotFound"], ()),
        }
    }

    async fn authorize(&self, group_id: &str, perm: IpPermission) -> Result<()> {
        match self
            .client
            .authorize_security_group_ingress()
            .group_id(group_id)
            .ip_permissions(perm)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("adding a security group rule", &e)
                .or_ok_if(&["InvalidPermission.Duplicate"], ()),
        }
    }

    /// Deletes a security group; retries while instances that used it are still shutting down.
    pub async fn delete_security_group(&self, id: &str) -> Result<()> {
        wait::until(
            &format!("deleting security group {id}"),
            Duration::from_secs(300),
            Backoff::default(),
            || async {
                match self.client.delete_security_group().group_id(id).send().await {
                    Ok(_) => Ok(Poll::Done(())),
                    Err(e) => {
                        let err = self.err("deleting security group", &e);
                        if err.code_is(&["InvalidGroup.NotFound"]) {
                            Ok(Poll::Done(()))
                        } else if err.code_is(&["DependencyViolation"]) {
                            Ok(Poll::Pending("in use".into()))
                        } else {
                            Err(err)
                        }
                    }
                }
            },
        )
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Launch templates and placement groups
    // -----------------------------------------------------------------------------------------

    fn template_data(&self, spec: &LaunchTemplateSpec, root_device: &str) -> RequestLaunchTemplateData {
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(&spec.image_id)
            .set_instance_type(spec.instance_type.as_deref().map(InstanceType::from))
            .set_key_name(spec.key_name.clone())
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                    .http_put_response_hop_limit(2)
                    .build(),
            )
            .set_user_data(
                spec.user_data
                    .as_ref()
                    .map(|u| base64::engine::general_purpose::STANDARD.encode(u)),
            )
            .set_iam_instance_profile(spec.instance_profile_arn.as_ref().map(|arn| {
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .arn(arn)
                    .build()
            }))
            .set_tag_specifications((!spec.tags.is_empty()).then(|| {
                [ResourceType::Instance, ResourceType::Volume]
                    .into_iter()
                    .map(|k| {
                        LaunchTemplateTagSpecificationRequest::builder()
                            .resource_type(k)
                            .set_tags(Some(sdk_tags(&spec.tags)))
                            .build()
                    })
                    .collect()
            }));
        if let Some(root) = &spec.root_volume {
            data = data.block_device_mappings(
                LaunchTemplateBlockDeviceMappingRequest::builder()
                    .device_name(root_device)
                    .ebs(
                        LaunchTemplateEbsBlockDeviceRequest::builder()
                            .volume_size(root.size_gib)
                            .volume_type(VolumeType::from(root.volume_type.as_str()))
                            .encrypted(root.encrypted)
                            .set_kms_key_id(root.kms_key_id.clone())
                            .delete_on_termination(true)
                            .build(),
                    )
                    .build(),
            );
        }
        if spec.efa_network_cards.is_empty() {
            data = data.set_security_group_ids(Some(spec.security_group_ids.clone()));
        } else {
            for (i, card) in spec.efa_network_cards.iter().enumerate() {
                data = data.network_interfaces(
                    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                        .device_index(if i == 0 { 0 } else { 1 })
                        .network_card_index(*card)
                        .interface_type("efa")
                        .set_groups(Some(spec.security_group_ids.clone()))
                        .delete_on_termination(true)
                        .build(),
                );
            }
        }
        if let Some(pg) = &spec.placement_group {
            data = data.placement(LaunchTemplatePlacementRequest::builder().group_name(pg).build());
        }
        if let Some(target) = &spec.capacity_reservation {
            use aws_sdk_ec2::types::{
                CapacityReservationTarget, LaunchTemplateCapacityReservationSpecificationRequest,
                LaunchTemplateInstanceMarketOptionsRequest, MarketType,
            };
            data = data.capacity_reservation_specification(
                LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_target(
                        CapacityReservationTarget::builder()
                            .capacity_reservation_id(&target.id)
                            .build(),
                    )
                    .build(),
            );
            if target.capacity_block {
                data = data.instance_market_options(
                    LaunchTemplateInstanceMarketOptionsRequest::builder()
                        .market_type(MarketType::CapacityBlock)
                        .build(),
                );
            }
        }
        data.build()
    }

    /// The AMI's root device name (where the root volume settings go).
    pub async fn image_root_device(&self, image_id: &str) -> Result<String> {
        let out = self
            .client
            .describe_images()
            .image_ids(image_id)
            .send()
            .await
            .map_err(|e| self.err(&format!("describing image {image_id}"), &e))?;
        out.images()
            .first()
            .map(|i| i.root_device_name().unwrap_or("/dev/xvda").to_string())
            .ok_or_else(|| {
                AwsError::new(
                    self.ctx("describing image"),
                    Some("InvalidAMIID.NotFound"),
                    format!("image {image_id} does not exist"),
                )
            })
    }

    /// Creates the launch template, or (same name exists) makes a new default version when
    /// the settings differ. Returns (id, default version).
    pub async fn ensure_launch_template(&self, spec: &LaunchTemplateSpec) -> Result<(String, i64)> {
        let root_device = if spec.root_volume.is_some() {
            self.image_root_device(&spec.image_id).await?
        } else {
            String::new()
        };
        let data = self.template_data(spec, &root_device);
        let existing = self.find_launch_template(&spec.name).await?;
        match existing {
            None => {
                let out = self
                    .client
                    .create_launch_template()
                    .launch_template_name(&spec.name)
                    .launch_template_data(data)
                    .set_tag_specifications(tag_specs(&[ResourceType::LaunchTemplate], &spec.tags))
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("creating launch template {}", spec.name), &e))?;
                let lt = out.launch_template();
                Ok((
                    lt.and_then(|l| l.launch_template_id()).unwrap_or_default().to_string(),
                    lt.and_then(|l| l.default_version_number()).unwrap_or(1),
                ))
            }
            Some(id) => {
                let out = self
                    .client
                    .create_launch_template_version()
                    .launch_template_id(&id)
                    .launch_template_data(data)
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("updating launch template {}", spec.name), &e))?;
                let version = out
                    .launch_template_version()
                    .and_then(|v| v.version_number())
                    .unwrap_or(1);
                self.client
                    .modify_launch_template()
                    .launch_template_id(&id)
                    .default_version(version.to_string())
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("setting default version of {}", spec.name), &e))?;
                Ok((id, version))
            }
        }
    }

    pub async fn find_launch_template(&self, name: &str) -> Result<Option<String>> {
        match self
            .client
            .describe_launch_templates()
            .launch_template_names(name)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .launch_templates()
                .first()
                .and_then(|l| l.launch_template_id())
                .map(str::to_string)),
            Err(e) => self.err("looking up launch template", &e).or_ok_if(
                &[
                    "InvalidLaunchTemplateName.NotFoundException",
                    "InvalidLaunchTemplateId.NotFound",
                ],
                None,
            ),
        }
    }

    pub async fn delete_launch_template(&self, name: &str) -> Result<()> {
        match self
            .client
            .delete_launch_template()
            .launch_template_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self.err(&format!("deleting launch template {name}"), &e).or_ok_if(
                &[
                    "InvalidLaunchTemplateName.NotFoundException",
                    "InvalidLaunchTemplateId.NotFound",
                ],
                (),
            ),
        }
    }

    /// Creates a cluster placement group unless one of that name exists.
    pub async fn ensure_placement_group(&self, name: &str, tags: &[(String, String)]) -> Result<()> {
        match self
            .client
            .create_placement_group()
            .group_name(name)
            .strategy(PlacementStrategy::Cluster)
            .set_tag_specifications(tag_specs(&[ResourceType::PlacementGroup], tags))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("creating placement group {name}"), &e)
                .or_ok_if(&["InvalidPlacementGroup.Duplicate"], ()),
        }
    }

    pub async fn delete_placement_group(&self, name: &str) -> Result<()> {
        match self.client.delete_placement_group().group_name(name).send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("deleting placement group {name}"), &e)
                .or_ok_if(&["InvalidPlacementGroup.Unknown"], ()),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Instances
    // -----------------------------------------------------------------------------------------

    /// Launches one instance from a launch template, tagged at launch (so an interrupted run
    /// can find it by its tags). The client token makes the SDK's own retries idempotent.
    pub async fn run_instance(
        &self,
        template_id: &str,
        subnet_id: &str,
        client_token: &str,
        tags: &[(String, String)],
    ) -> Result<String> {
        let _changing = self.tagged.changing();
        let out = self
            .client
            .run_instances()
            .set_tag_specifications(tag_specs(&[ResourceType::Instance, ResourceType::Volume], tags))
            .launch_template(
                LaunchTemplateSpecification::builder()
                    .launch_template_id(template_id)
                    .version("$Default")
                    .build(),
            )
            .subnet_id(subnet_id)
            .min_count(1)
            .max_count(1)
            .client_token(client_token)
            .send()
            .await
            .map_err(|e| self.err("launching instance", &e))?;
        out.instances()
            .first()
            .and_then(|i| i.instance_id())
            .map(str::to_string)
            .ok_or_else(|| AwsError::new(self.ctx("launching instance"), None, "no instance in the response"))
    }

    /// An instance for a refresh, through a view of every live instance carrying `tag_key`
    /// (one paginated DescribeInstances serves the head nodes of every cluster a plan reads).
    /// An instance the view lacks is looked up directly before it is reported gone.
    pub async fn find_instance_viewed(&self, tag_key: &str, id: &str) -> Result<Option<InstanceInfo>> {
        let view = self
            .tagged
            .get(tag_key, || async {
                let found = self.instances_filtered(filter("tag-key", &[tag_key])).await?;
                Ok(found.into_iter().map(|i| (i.id.clone(), i)).collect())
            })
            .await?;
        if let Some(i) = view.get(id) {
            return Ok(Some(i.clone()));
        }
        self.find_instance(id).await
    }

    /// The instance's console output (decoded; empty while EC2 has none yet).
    pub async fn console_output(&self, id: &str) -> Result<String> {
        use base64::Engine as _;
        let out = self
            .client
            .get_console_output()
            .instance_id(id)
            .latest(true)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx(&format!("reading the console output of {id}")), &e))?;
        let encoded = out.output().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| {
                AwsError::new(
                    self.ctx(&format!("decoding the console output of {id}")),
                    None,
                    e.to_string(),
                )
            })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub async fn find_instance(&self, id: &str) -> Result<Option<InstanceInfo>> {
        match self.client.describe_instances().instance_ids(id).send().await {
            Ok(out) => Ok(out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .find(|i| i.instance_id() == Some(id))
                .map(instance_info)
                .filter(|i| i.state != InstanceStateName::Terminated.as_str())),
            Err(e) => self
                .err("describing instance", &e)
                .or_ok_if(&["InvalidInstanceID.NotFound"], None),
        }
    }

    pub async fn wait_instance_running(&self, id: &str, timeout: Duration) -> Result<InstanceInfo> {
        wait::until(&format!("instance {id}"), timeout, Backoff::default(), || async {
            match self.find_instance(id).await? {
                Some(i) if i.state == "running" => Ok(Poll::Done(i)),
                Some(i) if i.state == "pending" => Ok(Poll::Pending(i.state)),
                Some(i) => Err(AwsError::new(
                    self.ctx("waiting for instance"),
                    Some(&i.state),
                    format!("instance {id} is {}", i.state),
                )),
                None => Ok(Poll::Pending("not visible yet".into())),
            }
        })
        .await
    }

    /// Asks EC2 to terminate instances without waiting; missing ones count as terminated.
    pub async fn request_termination(&self, ids: &[String]) -> Result<()> {
        let _changing = self.tagged.changing();
        if ids.is_empty() {
            return Ok(());
        }
        match self
            .client
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("terminating instances", &e)
                .or_ok_if(&["InvalidInstanceID.NotFound"], ()),
        }
    }

    /// Terminates instances and waits until they are gone; missing ones count as gone.
    pub async fn terminate(&self, ids: &[String], timeout: Duration) -> Result<()> {
        self.request_termination(ids).await?;
        for id in ids {
            wait::until(&format!("termination of {id}"), timeout, Backoff::default(), || async {
                Ok(match self.find_instance(id).await? {
                    None => Poll::Done(()),
                    Some(i) => Poll::Pending(i.state),
                })
            })
            .await?;
        }
        Ok(())
    }

    /// Launches up to `count` instances with an instant fleet. EC2 answers capacity problems
    /// per override inside a successful response; they come back in `errors`.
    pub async fn launch_fleet(&self, req: &FleetRequest) -> Result<FleetOutcome> {
        let _changing = self.tagged.changing();
        use aws_sdk_ec2::types::{
            DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
            FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy, FleetType,
            OnDemandOptionsRequest, SpotAllocationStrategy, SpotOptionsRequest, TargetCapacitySpecificationRequest,
        };
        let mut templates: Vec<(String, Vec<&FleetOverride>)> = Vec::new();
        for o in &req.overrides {
            match templates.iter_mut().find(|(id, _)| *id == o.launch_template_id) {
                Some((_, list)) => list.push(o),
                None => templates.push((o.launch_template_id.clone(), vec![o])),
            }
        }
        let configs = templates
            .iter()
            .map(|(id, list)| {
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_id(id)
                            .version("$Default")
                            .build(),
                    )
                    .set_overrides(Some(
                        list.iter()
                            .map(|o| {
                                FleetLaunchTemplateOverridesRequest::builder()
                                    .instance_type(InstanceType::from(o.instance_type.as_str()))
                                    .subnet_id(&o.subnet_id)
                                    .priority(o.priority)
                                    .build()
                            })
                            .collect(),
                    ))
                    .build()
            })
            .collect();
        let capacity = TargetCapacitySpecificationRequest::builder()
            .total_target_capacity(req.count)
            .default_target_capacity_type(match req.market {
                Market::Spot => DefaultTargetCapacityType::Spot,
                Market::OnDemand => DefaultTargetCapacityType::OnDemand,
                Market::CapacityBlock => DefaultTargetCapacityType::CapacityBlock,
            })
            .build();
        let mut call = self
            .client
            .create_fleet()
            .r#type(FleetType::Instant)
            .set_launch_template_configs(Some(configs))
            .target_capacity_specification(capacity)
            .set_tag_specifications(tag_specs(&[ResourceType::Instance], &req.tags));
        call = if req.market == Market::Spot {
            let strategy = match req.allocation_strategy.as_str() {
                "lowest-price" => SpotAllocationStrategy::LowestPrice,
                "capacity-optimized" => SpotAllocationStrategy::CapacityOptimized,
                "prioritized" => SpotAllocationStrategy::CapacityOptimizedPrioritized,
                _ => SpotAllocationStrategy::PriceCapacityOptimized,
            };
            call.spot_options(SpotOptionsRequest::builder().allocation_strategy(strategy).build())
        } else {
            let strategy = if req.allocation_strategy == "lowest-price" {
                FleetOnDemandAllocationStrategy::LowestPrice
            } else {
                FleetOnDemandAllocationStrategy::Prioritized
            };
            call.on_demand_options(OnDemandOptionsRequest::builder().allocation_strategy(strategy).build())
        };
        let out = call
            .send()
            .await
            .map_err(|e| self.err("launching an instant fleet", &e))?;
        let instances = out
            .instances()
            .iter()
            .flat_map(|group| {
                let subnet = group
                    .launch_template_and_overrides()
                    .and_then(|l| l.overrides())
                    .and_then(|o| o.subnet_id())
                    .map(str::to_string);
                let itype = group
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default();
                group.instance_ids().iter().map(move |id| FleetInstance {
                    id: id.clone(),
                    instance_type: itype.clone(),
                    subnet_id: subnet.clone(),
                })
            })
            .collect();
        let errors = out
            .errors()
            .iter()
            .map(|e| {
                let o = e.launch_template_and_overrides().and_then(|l| l.overrides());
                FleetError {
                    code: e.error_code().unwrap_or_default().to_string(),
                    message: e.error_message().unwrap_or_default().to_string(),
                    instance_type: o.and_then(|o| o.instance_type()).map(|t| t.as_str().to_string()),
                    subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
                }
            })
            .collect();
        Ok(FleetOutcome { instances, errors })
    }

    /// Describes capacity reservations (and Capacity Blocks) by id, in one call.
    pub async fn capacity_reservations(&self, ids: &[String]) -> Result<Vec<CapacityReservationInfo>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .client
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(Some(ids.to_vec()))
            .send()
            .await
            .map_err(|e| self.err(&format!("describing capacity reservations {}", ids.join(", ")), &e))?;
        Ok(out
            .capacity_reservations()
            .iter()
            .map(|r| CapacityReservationInfo {
                id: r.capacity_reservation_id().unwrap_or_default().to_string(),
                instance_type: r.instance_type().unwrap_or_default().to_string(),
                availability_zone: r.availability_zone().unwrap_or_default().to_string(),
                state: r.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                total: r.total_instance_count().unwrap_or(0),
                available: r.available_instance_count().unwrap_or(0),
                capacity_block: r.reservation_type().is_some_and(|t| t.as_str() == "capacity-block"),
                start_s: r.start_date().map(|d| d.secs()),
                end_s: r.end_date().map(|d| d.secs()),
            })
            .collect())
    }

    /// Private addresses of instances (id → IP), a few describe calls for many instances.
    pub async fn private_ips(&self, ids: &[String]) -> Result<std::collections::BTreeMap<String, String>> {
        let mut out = std::collections::BTreeMap::new();
        for chunk in ids.chunks(500) {
            let mut token = None;
            loop {
                let page = self
                    .client
                    .describe_instances()
                    .set_instance_ids(Some(chunk.to_vec()))
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| self.err("describing instances", &e))?;
                for i in page.reservations().iter().flat_map(|r| r.instances()) {
                    if let (Some(id), Some(ip)) = (i.instance_id(), i.private_ip_address()) {
                        out.insert(id.to_string(), ip.to_string());
                    }
                }
                token = page.next_token().map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Instances (not terminated) carrying a tag.
    pub async fn instances_tagged(&self, key: &str, value: &str) -> Result<Vec<InstanceInfo>> {
        self.instances_filtered(filter(&format!("tag:{key}"), &[value])).await
    }

    /// Every pending or running instance in the region as (instance type, spot?): what counts
    /// against the account's vCPU quotas.
    pub async fn running_instance_types(&self) -> Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_instances()
                .filters(filter("instance-state-name", &["pending", "running"]))
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| self.err("listing running instances", &e))?;
            out.extend(page.reservations().iter().flat_map(|r| r.instances()).map(|i| {
                let spot = i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot");
                (
                    i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    spot,
                )
            }));
            token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Every instance matching `by` that is not terminated, all pages.
    async fn instances_filtered(&self, by: Filter) -> Result<Vec<InstanceInfo>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_instances()
                .filters(by.clone())
                .filters(filter(
                    "instance-state-name",
                    &["pending", "running", "stopping", "stopped", "shutting-down"],
                ))
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| self.err("listing instances", &e))?;
            out.extend(
                page.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .map(instance_info),
            );
            token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }
}

fn instance_info(i: &aws_sdk_ec2::types::Instance) -> InstanceInfo {
    InstanceInfo {
        id: i.instance_id().unwrap_or_default().to_string(),
        state: i
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_string())
            .unwrap_or_default(),
        private_ip: i.private_ip_address().map(str::to_string),
        public_ip: i.public_ip_address().map(str::to_string),
        subnet_id: i.subnet_id().map(str::to_string),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        tags: instance_tags(i),
        launched_at: i.launch_time().map(|t| t.secs()).unwrap_or(0),
    }
}

fn instance_tags(i: &aws_sdk_ec2::types::Instance) -> Vec<(String, String)> {
    i.tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn info_from_sdk(t: &aws_sdk_ec2::types::InstanceTypeInfo) -> InstanceTypeInfo {
    let vcpu = t.v_cpu_info();
    let gpu = t.gpu_info().and_then(|g| g.gpus().first());
    let net = t.network_info();
    InstanceTypeInfo {
        instance_type: t.instance_type().map(|i| i.as_str().to_string()).unwrap_or_default(),
        vcpus: vcpu
            .and_then(|v| v.default_v_cpus())
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        cores: vcpu
            .and_then(|v| v.default_cores())
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        threads_per_core: vcpu
            .and_then(|v| v.default_threads_per_core())
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(1),
        memory_mib: t
            .memory_info()
            .and_then(|m| m.size_in_mib())
            .and_then(|m| u64::try_from(m).ok())
            .unwrap_or(0),
        gpus: t
            .gpu_info()
            .map(|g| {
                g.gpus()
                    .iter()
                    .filter_map(|d| d.count())
                    .map(|c| u32::try_from(c).unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0),
        gpu_model: gpu.and_then(|g| g.name()).map(str::to_string),
        gpu_manufacturer: gpu.and_then(|g| g.manufacturer()).map(str::to_string),
        gpu_memory_mib: gpu
            .and_then(|g| g.memory_info())
            .and_then(|m| m.size_in_mib())
            .and_then(|m| u64::try_from(m).ok()),
        efa_supported: net.and_then(|n| n.efa_supported()).unwrap_or(false),
        max_efa_interfaces: net
            .and_then(|n| n.efa_info())
            .and_then(|e| e.maximum_efa_interfaces())
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        network_cards: net
            .map(|n| {
                n.network_cards()
                    .iter()
                    .filter_map(|c| c.network_card_index())
                    .collect()
            })
            .unwrap_or_default(),
        architectures: t
            .processor_info()
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_are_carved_without_overlap() {
        assert_eq!(subnet_cidr("10.0.0.0/16", 19, 2).as_deref(), Some("10.0.64.0/19"));
        assert_eq!(subnet_cidr("10.0.0.0/16", 19, 8), None);
        assert_eq!(
            network_cidrs("10.0.0.0/16", 0),
            Some(("10.0.224.0/22".into(), "10.0.0.0/19".into()))
        );
        assert_eq!(
            network_cidrs("10.0.0.0/16", 1),
            Some(("10.0.228.0/22".into(), "10.0.32.0/19".into()))
        );
        assert_eq!(
            network_cidrs("10.0.0.0/16", 6),
            Some(("10.0.248.0/22".into(), "10.0.192.0/19".into()))
        );
        assert_eq!(
            network_cidrs("10.0.0.0/16", 7),
            None,
            "block 7 holds the public subnets"
        );
        assert_eq!(subnet_cidr("10.0.0.0/33", 19, 0), None);
        assert_eq!(subnet_cidr("10.0.300.0/16", 19, 0), None);
    }
}
