//! EC2: instance type facts and zones here; networks (`network` makes them, `vpc` finds and
//! deletes them), `security_groups`, launch templates and placement groups (`templates`),
//! instances and fleets (`instances`), kept interfaces and volumes (`persist`), VPC peering
//! (`peering`).
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

mod instances;
mod network;
mod peering;
mod security_groups;
mod templates;
mod vpc;

mod persist;
pub use peering::{Peering, RouteTarget};
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

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceInfo {
    pub id: String,
    pub state: String,
    /// The image it was launched from.
    pub image_id: String,
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
