//! Creating a network so that a create killed at any point and run again finishes the network
//! the first run started instead of making a second one: every step first looks for what it
//! would make (by the network's `Name` tags, which carry its name, and by what EC2 itself keeps
//! unique: a subnet's CIDR in its VPC, a gateway's attachment, an endpoint's service), and makes
//! it only when it is not there. A network's name is unique in its account and region, as a
//! cluster's is.

use std::time::Duration;

use aws_sdk_ec2::types::{AttributeBooleanValue, DomainType, ResourceType, VpcEndpointType};

use super::{filter, network_cidrs, tag_specs, Ec2, Network, NetworkSpec};
use crate::error::{AwsError, Result};

/// The network's tags with `Name` = `<network>-<suffix>`.
fn name_tags(spec: &NetworkSpec, suffix: &str) -> Vec<(String, String)> {
    let mut t = spec.tags.clone();
    t.retain(|(k, _)| k != "Name");
    t.push(("Name".to_string(), format!("{}-{suffix}", spec.name)));
    t
}

fn name_of(spec: &NetworkSpec, suffix: &str) -> String {
    format!("{}-{suffix}", spec.name)
}

impl Ec2 {
    /// Creates the VPC and everything in it, recording each id in `net` as it goes; what an
    /// interrupted run of the same network made is found and kept.
    pub async fn create_network(&self, spec: &NetworkSpec, net: &mut Network, timeout: Duration) -> Result<()> {
        net.vpc_id = self.ensure_vpc(spec).await?;
        net.internet_gateway_id = self.ensure_internet_gateway(spec, &net.vpc_id).await?;
        self.ensure_subnets(spec, net).await?;
        net.public_route_table_id = self.ensure_route_table(spec, &net.vpc_id, "public").await?;
        self.ensure_route(&net.public_route_table_id, Target::Gateway(&net.internet_gateway_id))
            .await?;
        for (_, subnet) in &net.public_subnets {
            self.ensure_association(&net.public_route_table_id, subnet).await?;
        }
        net.private_route_table_id = self.ensure_route_table(spec, &net.vpc_id, "private").await?;
        for (_, subnet) in &net.private_subnets {
            self.ensure_association(&net.private_route_table_id, subnet).await?;
        }
        if spec.nat_gateway {
            self.ensure_nat(spec, net, timeout).await?;
        }
        if spec.s3_endpoint {
            net.s3_endpoint_id = Some(self.ensure_s3_endpoint(spec, net).await?);
        }
        net.security_group_id = self
            .ensure_security_group(
                &name_of(spec, "cluster"),
                "hpcforge cluster nodes: all traffic between members (EFA needs it)",
                &net.vpc_id,
                &[],
                &name_tags(spec, "cluster"),
            )
            .await?;
        self.allow_self(&net.security_group_id).await?;
        Ok(())
    }

    async fn ensure_vpc(&self, spec: &NetworkSpec) -> Result<String> {
        let found = self
            .client
            .describe_vpcs()
            .filters(filter("tag:Name", &[&name_of(spec, "vpc")]))
            .filters(filter("cidr", &[&spec.cidr_block]))
            .send()
            .await
            .map_err(|e| self.err("looking up the network's VPC", &e))?;
        let vpc_id = match found.vpcs().first().and_then(|v| v.vpc_id()) {
            Some(id) => id.to_string(),
            None => self
                .client
                .create_vpc()
                .cidr_block(&spec.cidr_block)
                .set_tag_specifications(tag_specs(&[ResourceType::Vpc], &name_tags(spec, "vpc")))
                .send()
                .await
                .map_err(|e| self.err("creating VPC", &e))?
                .vpc()
                .and_then(|v| v.vpc_id())
                .unwrap_or_default()
                .to_string(),
        };
        for attr in ["hostnames", "support"] {
            let mut req = self.client.modify_vpc_attribute().vpc_id(&vpc_id);
            let yes = AttributeBooleanValue::builder().value(true).build();
            req = if attr == "hostnames" {
                req.enable_dns_hostnames(yes)
            } else {
                req.enable_dns_support(yes)
            };
            req.send().await.map_err(|e| self.err("enabling DNS in VPC", &e))?;
        }
        Ok(vpc_id)
    }

    /// The gateway attached to the VPC, else one of this network's left unattached, else a new one.
    async fn ensure_internet_gateway(&self, spec: &NetworkSpec, vpc_id: &str) -> Result<String> {
        let found = self
            .client
            .describe_internet_gateways()
            .filters(filter("tag:Name", &[&name_of(spec, "igw")]))
            .send()
            .await
            .map_err(|e| self.err("looking up the network's internet gateway", &e))?;
        let attached_to = |g: &aws_sdk_ec2::types::InternetGateway| {
            g.attachments()
                .iter()
                .filter_map(|a| a.vpc_id())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        if let Some(g) = found
            .internet_gateways()
            .iter()
            .find(|g| attached_to(g).iter().any(|v| v == vpc_id))
        {
            return Ok(g.internet_gateway_id().unwrap_or_default().to_string());
        }
        let id = match found.internet_gateways().iter().find(|g| attached_to(g).is_empty()) {
            Some(g) => g.internet_gateway_id().unwrap_or_default().to_string(),
            None => self
                .client
                .create_internet_gateway()
                .set_tag_specifications(tag_specs(&[ResourceType::InternetGateway], &name_tags(spec, "igw")))
                .send()
                .await
                .map_err(|e| self.err("creating internet gateway", &e))?
                .internet_gateway()
                .and_then(|g| g.internet_gateway_id())
                .unwrap_or_default()
                .to_string(),
        };
        self.client
            .attach_internet_gateway()
            .internet_gateway_id(&id)
            .vpc_id(vpc_id)
            .send()
            .await
            .map_err(|e| self.err("attaching internet gateway", &e))?;
        Ok(id)
    }

    /// A public and a private subnet per zone; a CIDR is unique in its VPC, so one already
    /// there is the one an earlier run made.
    async fn ensure_subnets(&self, spec: &NetworkSpec, net: &mut Network) -> Result<()> {
        net.public_subnets.clear();
        net.private_subnets.clear();
        for (i, az) in spec.availability_zones.iter().enumerate() {
            let (public_cidr, private_cidr) = network_cidrs(&spec.cidr_block, i as u32).ok_or_else(|| {
                AwsError::new(
                    self.ctx("planning subnets"),
                    None,
                    format!("{} has no room for zone {}", spec.cidr_block, i + 1),
                )
            })?;
            for (public, cidr) in [(true, public_cidr), (false, private_cidr)] {
                let label = format!("{}-{az}", if public { "public" } else { "private" });
                let id = self.ensure_subnet(spec, &net.vpc_id, &cidr, az, &label).await?;
                let list = if public {
                    &mut net.public_subnets
                } else {
                    &mut net.private_subnets
                };
                list.push((az.clone(), id));
            }
        }
        Ok(())
    }

    async fn ensure_subnet(
        &self,
        spec: &NetworkSpec,
        vpc_id: &str,
        cidr: &str,
        az: &str,
        label: &str,
    ) -> Result<String> {
        let found = self
            .client
            .describe_subnets()
            .filters(filter("vpc-id", &[vpc_id]))
            .filters(filter("cidr-block", &[cidr]))
            .send()
            .await
            .map_err(|e| self.err(&format!("looking up subnet {cidr}"), &e))?;
        if let Some(id) = found.subnets().first().and_then(|s| s.subnet_id()) {
            return Ok(id.to_string());
        }
        let out = self
            .client
            .create_subnet()
            .vpc_id(vpc_id)
            .cidr_block(cidr)
            .availability_zone(az)
            .set_tag_specifications(tag_specs(&[ResourceType::Subnet], &name_tags(spec, label)))
            .send()
            .await
            .map_err(|e| self.err(&format!("creating subnet {cidr} in {az}"), &e))?;
        Ok(out.subnet().and_then(|s| s.subnet_id()).unwrap_or_default().to_string())
    }

    async fn ensure_route_table(&self, spec: &NetworkSpec, vpc_id: &str, label: &str) -> Result<String> {
        let found = self
            .client
            .describe_route_tables()
            .filters(filter("vpc-id", &[vpc_id]))
            .filters(filter("tag:Name", &[&name_of(spec, label)]))
            .send()
            .await
            .map_err(|e| self.err("looking up route table", &e))?;
        if let Some(id) = found.route_tables().first().and_then(|r| r.route_table_id()) {
            return Ok(id.to_string());
        }
        let out = self
            .client
            .create_route_table()
            .vpc_id(vpc_id)
            .set_tag_specifications(tag_specs(&[ResourceType::RouteTable], &name_tags(spec, label)))
            .send()
            .await
            .map_err(|e| self.err("creating route table", &e))?;
        Ok(out
            .route_table()
            .and_then(|r| r.route_table_id())
            .unwrap_or_default()
            .to_string())
    }

    /// The default route through `target`; one already there (an earlier run's) is kept.
    async fn ensure_route(&self, route_table: &str, target: Target<'_>) -> Result<()> {
        let req = self
            .client
            .create_route()
            .route_table_id(route_table)
            .destination_cidr_block("0.0.0.0/0");
        let req = match target {
            Target::Gateway(id) => req.gateway_id(id),
            Target::Nat(id) => req.nat_gateway_id(id),
        };
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("adding the default route", &e)
                .or_ok_if(&["RouteAlreadyExists"], ()),
        }
    }

    async fn ensure_association(&self, route_table: &str, subnet: &str) -> Result<()> {
        match self
            .client
            .associate_route_table()
            .route_table_id(route_table)
            .subnet_id(subnet)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("associating route table", &e)
                .or_ok_if(&["Resource.AlreadyAssociated"], ()),
        }
    }

    /// The NAT gateway's address and the gateway in the first public subnet, found by their
    /// `Name` tags (a gateway that failed or is going away is not one to keep), then its route.
    async fn ensure_nat(&self, spec: &NetworkSpec, net: &mut Network, timeout: Duration) -> Result<()> {
        let nat_name = name_of(spec, "nat");
        let addresses = self
            .client
            .describe_addresses()
            .filters(filter("tag:Name", &[&nat_name]))
            .send()
            .await
            .map_err(|e| self.err("looking up the NAT gateway's address", &e))?;
        let allocation = match addresses.addresses().first().and_then(|a| a.allocation_id()) {
            Some(id) => id.to_string(),
            None => self
                .client
                .allocate_address()
                .domain(DomainType::Vpc)
                .set_tag_specifications(tag_specs(&[ResourceType::ElasticIp], &name_tags(spec, "nat")))
                .send()
                .await
                .map_err(|e| self.err("allocating the NAT gateway's address", &e))?
                .allocation_id()
                .unwrap_or_default()
                .to_string(),
        };
        net.eip_allocation_id = Some(allocation.clone());
        let subnet = net.public_subnets.first().map(|(_, s)| s.clone()).unwrap_or_default();
        let gateways = self
            .client
            .describe_nat_gateways()
            .filter(filter("subnet-id", &[&subnet]))
            .filter(filter("state", &["pending", "available"]))
            .send()
            .await
            .map_err(|e| self.err("looking up the NAT gateway", &e))?;
        let nat_id = match gateways.nat_gateways().first().and_then(|n| n.nat_gateway_id()) {
            Some(id) => id.to_string(),
            None => self
                .client
                .create_nat_gateway()
                .subnet_id(subnet)
                .allocation_id(&allocation)
                .set_tag_specifications(tag_specs(&[ResourceType::Natgateway], &name_tags(spec, "nat")))
                .send()
                .await
                .map_err(|e| self.err("creating NAT gateway", &e))?
                .nat_gateway()
                .and_then(|n| n.nat_gateway_id())
                .unwrap_or_default()
                .to_string(),
        };
        net.nat_gateway_id = Some(nat_id.clone());
        self.wait_nat(&nat_id, "available", timeout).await?;
        self.ensure_route(&net.private_route_table_id, Target::Nat(&nat_id))
            .await
    }

    async fn ensure_s3_endpoint(&self, spec: &NetworkSpec, net: &Network) -> Result<String> {
        let service = format!("com.amazonaws.{}.s3", self.region);
        let found = self
            .client
            .describe_vpc_endpoints()
            .filters(filter("vpc-id", &[&net.vpc_id]))
            .filters(filter("service-name", &[&service]))
            .send()
            .await
            .map_err(|e| self.err("looking up the S3 gateway endpoint", &e))?;
        let live = found.vpc_endpoints().iter().find(|v| {
            !matches!(
                v.state().map(|s| s.as_str()),
                Some("deleted" | "deleting" | "failed" | "Deleted" | "Deleting" | "Failed")
            )
        });
        if let Some(id) = live.and_then(|v| v.vpc_endpoint_id()) {
            return Ok(id.to_string());
        }
        let out = self
            .client
            .create_vpc_endpoint()
            .vpc_id(&net.vpc_id)
            .vpc_endpoint_type(VpcEndpointType::Gateway)
            .service_name(service)
            .route_table_ids(&net.private_route_table_id)
            .route_table_ids(&net.public_route_table_id)
            .set_tag_specifications(tag_specs(&[ResourceType::VpcEndpoint], &name_tags(spec, "s3")))
            .send()
            .await
            .map_err(|e| self.err("creating the S3 gateway endpoint", &e))?;
        Ok(out
            .vpc_endpoint()
            .and_then(|v| v.vpc_endpoint_id())
            .unwrap_or_default()
            .to_string())
    }
}

/// Where a default route goes.
enum Target<'a> {
    Gateway(&'a str),
    Nat(&'a str),
}
