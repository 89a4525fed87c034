//! VPC peering: the network path between a cluster's VPC and a VPC in another region (or
//! the same one): the connection (requested here, accepted in the peer's region), a route
//! for the other side's range in every route table of both VPCs, and each side's groups
//! admitting the other side's range. Requests are found again by their two VPCs, routes and
//! rules by what they are, so a create interrupted at any point and run again finishes what
//! the first run started instead of making a second connection.

use std::time::Duration;

use aws_sdk_ec2::types::{IpPermission, IpRange, ResourceType, RouteTable, VpcPeeringConnection};

use super::{filter, tag_specs, Ec2};
use crate::cidr::Cidr;
use crate::error::{AwsError, Result};
use crate::wait::{self, Backoff, Poll};

/// States after which a connection carries no traffic and cannot come back.
const GONE: &[&str] = &["deleted", "deleting", "rejected", "failed", "expired"];

/// A VPC peering connection as EC2 describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peering {
    pub id: String,
    /// `pending-acceptance`, `active`, ... (EC2's status code), and what EC2 says of it.
    pub status: String,
    pub message: String,
    pub vpc_id: String,
    pub cidr_block: String,
    pub region: String,
    pub peer_vpc_id: String,
    pub peer_cidr_block: String,
    pub peer_region: String,
    /// The connection's tags (in the requester's region), sorted.
    pub tags: Vec<(String, String)>,
}

impl Peering {
    fn of(p: &VpcPeeringConnection) -> Peering {
        let requester = p.requester_vpc_info();
        let accepter = p.accepter_vpc_info();
        let text = |s: Option<&str>| s.unwrap_or_default().to_string();
        Peering {
            id: text(p.vpc_peering_connection_id()),
            status: text(p.status().and_then(|s| s.code()).map(|c| c.as_str())),
            message: text(p.status().and_then(|s| s.message())),
            vpc_id: text(requester.and_then(|v| v.vpc_id())),
            cidr_block: text(requester.and_then(|v| v.cidr_block())),
            region: text(requester.and_then(|v| v.region())),
            peer_vpc_id: text(accepter.and_then(|v| v.vpc_id())),
            peer_cidr_block: text(accepter.and_then(|v| v.cidr_block())),
            peer_region: text(accepter.and_then(|v| v.region())),
            tags: {
                let mut t: Vec<(String, String)> = p.tags().iter().map(|t| (text(t.key()), text(t.value()))).collect();
                t.sort();
                t
            },
        }
    }

    /// Whether the connection still exists (active, or on its way there).
    pub fn is_live(&self) -> bool {
        !GONE.contains(&self.status.as_str())
    }

    pub fn is_active(&self) -> bool {
        self.status == "active"
    }

    /// Whether this connection joins the two VPCs (either way round).
    pub fn joins(&self, a: &str, b: &str) -> bool {
        (self.vpc_id == a && self.peer_vpc_id == b) || (self.vpc_id == b && self.peer_vpc_id == a)
    }
}

/// Where a subnet's route table sends an address range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteTarget {
    pub route_table_id: String,
    /// The most specific route containing the range: its destination and target (a peering
    /// connection, gateway, ... id, or `local`); None when no route contains it.
    pub route: Option<(String, String)>,
}

fn route_target_id(r: &aws_sdk_ec2::types::Route) -> String {
    [
        r.vpc_peering_connection_id(),
        r.transit_gateway_id(),
        r.nat_gateway_id(),
        r.gateway_id(),
        r.network_interface_id(),
        r.instance_id(),
    ]
    .into_iter()
    .flatten()
    .next()
    .unwrap_or("unknown")
    .to_string()
}

/// The most specific route of `table` whose destination contains `dest`, as (destination,
/// target).
fn most_specific(table: &RouteTable, dest: &Cidr) -> Option<(String, String)> {
    table
        .routes()
        .iter()
        .filter_map(|r| {
            let d: Cidr = r.destination_cidr_block()?.parse().ok()?;
            d.contains(dest).then(|| (d, route_target_id(r)))
        })
        .max_by_key(|(d, _)| d.prefix())
        .map(|(d, t)| (d.to_string(), t))
}

fn all_traffic_from(cidr: &str, description: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("-1")
        .ip_ranges(IpRange::builder().cidr_ip(cidr).description(description).build())
        .build()
}

impl Ec2 {
    /// A VPC's primary IPv4 range; None when the VPC does not exist.
    pub async fn vpc_cidr(&self, vpc_id: &str) -> Result<Option<String>> {
        match self.client.describe_vpcs().vpc_ids(vpc_id).send().await {
            Ok(out) => Ok(out.vpcs().first().and_then(|v| v.cidr_block()).map(str::to_string)),
            Err(e) => self
                .err(&format!("describing VPC {vpc_id}"), &e)
                .or_ok_if(&["InvalidVpcID.NotFound"], None),
        }
    }

    /// The connection with this id in whatever state it is; None when EC2 does not know it.
    async fn describe_peering(&self, id: &str) -> Result<Option<Peering>> {
        match self
            .client
            .describe_vpc_peering_connections()
            .vpc_peering_connection_ids(id)
            .send()
            .await
        {
            Ok(out) => Ok(out.vpc_peering_connections().first().map(Peering::of)),
            Err(e) => self
                .err(&format!("describing peering connection {id}"), &e)
                .or_ok_if(&["InvalidVpcPeeringConnectionID.NotFound"], None),
        }
    }

    /// The connection with this id; None when EC2 does not know it or it is gone.
    pub async fn peering(&self, id: &str) -> Result<Option<Peering>> {
        Ok(self.describe_peering(id).await?.filter(Peering::is_live))
    }

    /// The live connection this region requested from `vpc_id` to `peer_vpc_id` carrying the
    /// `marker` tag, if any (a connection without it is someone else's).
    async fn requested_peering(
        &self,
        vpc_id: &str,
        peer_vpc_id: &str,
        marker: &(String, String),
    ) -> Result<Option<Peering>> {
        let out = self
            .client
            .describe_vpc_peering_connections()
            .filters(filter("requester-vpc-info.vpc-id", &[vpc_id]))
            .filters(filter("accepter-vpc-info.vpc-id", &[peer_vpc_id]))
            .filters(filter(&format!("tag:{}", marker.0), &[&marker.1]))
            .send()
            .await
            .map_err(|e| self.err("looking up peering connections", &e))?;
        Ok(out
            .vpc_peering_connections()
            .iter()
            .map(Peering::of)
            .find(Peering::is_live))
    }

    /// Requests a connection from `vpc_id` (in this region) to `peer_vpc_id` in `peer_region`
    /// tagged `tags` and `marker`, or finds the one an earlier run requested by `marker`.
    pub async fn request_peering(
        &self,
        vpc_id: &str,
        peer_vpc_id: &str,
        peer_region: &str,
        tags: &[(String, String)],
        marker: (String, String),
    ) -> Result<Peering> {
        if let Some(found) = self.requested_peering(vpc_id, peer_vpc_id, &marker).await? {
            return Ok(found);
        }
        let mut tags = tags.to_vec();
        tags.retain(|(k, _)| *k != marker.0);
        tags.push(marker);
        let out = self
            .client
            .create_vpc_peering_connection()
            .vpc_id(vpc_id)
            .peer_vpc_id(peer_vpc_id)
            .peer_region(peer_region)
            .set_tag_specifications(tag_specs(&[ResourceType::VpcPeeringConnection], &tags))
            .send()
            .await
            .map_err(|e| self.err(&format!("requesting peering of {vpc_id} with {peer_vpc_id}"), &e))?;
        out.vpc_peering_connection()
            .map(Peering::of)
            .ok_or_else(|| AwsError::new(self.ctx("requesting peering"), None, "EC2 returned no connection"))
    }

    /// Accepts connection `id` in this (the peer's) region once it is visible here, and waits
    /// until it is active; a connection EC2 failed, rejected or let expire is an error with
    /// EC2's reason.
    pub async fn accept_peering(&self, id: &str, timeout: Duration) -> Result<Peering> {
        wait::until(
            &format!("accepting peering connection {id} in {}", self.region()),
            timeout,
            Backoff::default(),
            || async {
                let Some(p) = self.describe_peering(id).await? else {
                    // A cross-region request takes a moment to reach the peer's region.
                    return Ok(Poll::Pending("not visible in the peer's region yet".into()));
                };
                match p.status.as_str() {
                    "active" => Ok(Poll::Done(p)),
                    status if GONE.contains(&status) => Err(self.gone(&p)),
                    "pending-acceptance" => {
                        match self
                            .client
                            .accept_vpc_peering_connection()
                            .vpc_peering_connection_id(id)
                            .send()
                            .await
                        {
                            Ok(_) => Ok(Poll::Pending("accepted".into())),
                            Err(e) => Err(self.err(&format!("accepting peering connection {id}"), &e)),
                        }
                    }
                    other => Ok(Poll::Pending(other.to_string())),
                }
            },
        )
        .await
    }

    /// Waits until connection `id` is active as this region sees it (a cross-region connection's
    /// two sides may lag each other).
    pub async fn wait_peering_active(&self, id: &str, timeout: Duration) -> Result<Peering> {
        wait::until(
            &format!("peering connection {id} active in {}", self.region()),
            timeout,
            Backoff::default(),
            || async {
                match self.describe_peering(id).await? {
                    Some(p) if p.is_active() => Ok(Poll::Done(p)),
                    Some(p) if !p.is_live() => Err(self.gone(&p)),
                    Some(p) => Ok(Poll::Pending(p.status)),
                    None => Ok(Poll::Pending("not visible yet".into())),
                }
            },
        )
        .await
    }

    fn gone(&self, p: &Peering) -> AwsError {
        AwsError::new(
            self.ctx(&format!("peering connection {}", p.id)),
            Some(&p.status),
            format!("EC2 says {}: {}", p.status, p.message),
        )
    }

    /// Deletes connection `id` (a connection already gone, or on its way, is fine).
    pub async fn delete_peering(&self, id: &str) -> Result<()> {
        match self
            .client
            .delete_vpc_peering_connection()
            .vpc_peering_connection_id(id)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self.err(&format!("deleting peering connection {id}"), &e).or_ok_if(
                &["InvalidVpcPeeringConnectionID.NotFound", "InvalidStateTransition"],
                (),
            ),
        }
    }

    async fn route_tables(&self, filters: Vec<aws_sdk_ec2::types::Filter>) -> Result<Vec<RouteTable>> {
        let out = self
            .client
            .describe_route_tables()
            .set_filters(Some(filters))
            .send()
            .await
            .map_err(|e| self.err("describing route tables", &e))?;
        Ok(out.route_tables().to_vec())
    }

    /// Routes `dest` through connection `pcx` in every route table of `vpc_id`; returns the
    /// tables. A table that already routes `dest` through `pcx` is left as it is; one that
    /// routes it elsewhere is an error naming the route (never replaced).
    pub async fn add_peering_routes(&self, vpc_id: &str, dest: &str, pcx: &str) -> Result<Vec<String>> {
        let tables = self.route_tables(vec![filter("vpc-id", &[vpc_id])]).await?;
        let mut ids = Vec::new();
        for table in &tables {
            let id = table.route_table_id().unwrap_or_default().to_string();
            let existing = table.routes().iter().find(|r| r.destination_cidr_block() == Some(dest));
            let blackhole = existing.is_some_and(|r| r.state() == Some(&aws_sdk_ec2::types::RouteState::Blackhole));
            match existing.map(route_target_id) {
                Some(target) if target == pcx => {}
                // A route to a connection deleted since (EC2 keeps it, carrying nothing).
                Some(target) if blackhole && target.starts_with("pcx-") => {
                    self.replace_peering_route(&id, dest, pcx).await?
                }
                Some(target) => {
                    return Err(AwsError::new(
                        self.ctx("adding peering routes"),
                        Some("RouteAlreadyExists"),
                        format!("route table {id} of {vpc_id} already sends {dest} to {target}"),
                    ))
                }
                None => self.create_peering_route(&id, dest, pcx).await?,
            }
            ids.push(id);
        }
        Ok(ids)
    }

    async fn create_peering_route(&self, table: &str, dest: &str, pcx: &str) -> Result<()> {
        match self
            .client
            .create_route()
            .route_table_id(table)
            .destination_cidr_block(dest)
            .vpc_peering_connection_id(pcx)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("routing {dest} through {pcx} in {table}"), &e)
                .or_ok_if(&["RouteAlreadyExists"], ()),
        }
    }

    async fn replace_peering_route(&self, table: &str, dest: &str, pcx: &str) -> Result<()> {
        self.client
            .replace_route()
            .route_table_id(table)
            .destination_cidr_block(dest)
            .vpc_peering_connection_id(pcx)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.err(&format!("routing {dest} through {pcx} in {table} again"), &e))
    }

    /// Removes the routes of `dest` through `pcx` from `tables` (routes to anything else, and
    /// tables that are gone, are left alone).
    pub async fn remove_peering_routes(&self, tables: &[String], dest: &str, pcx: &str) -> Result<()> {
        let refs: Vec<&str> = tables.iter().map(String::as_str).collect();
        if refs.is_empty() {
            return Ok(());
        }
        for table in self.route_tables(vec![filter("route-table-id", &refs)]).await? {
            let ours = table
                .routes()
                .iter()
                .any(|r| r.destination_cidr_block() == Some(dest) && r.vpc_peering_connection_id() == Some(pcx));
            if !ours {
                continue;
            }
            let id = table.route_table_id().unwrap_or_default();
            if let Err(e) = self
                .client
                .delete_route()
                .route_table_id(id)
                .destination_cidr_block(dest)
                .send()
                .await
            {
                self.err(&format!("removing the route of {dest} from {id}"), &e)
                    .or_ok_if(&["InvalidRoute.NotFound", "InvalidRouteTableID.NotFound"], ())?;
            }
        }
        Ok(())
    }

    /// The route tables of `vpc_id` that send `dest` through `pcx`.
    pub async fn tables_routing(&self, vpc_id: &str, dest: &str, pcx: &str) -> Result<Vec<String>> {
        let tables = self.route_tables(vec![filter("vpc-id", &[vpc_id])]).await?;
        Ok(tables
            .iter()
            .filter(|t| {
                t.routes()
                    .iter()
                    .any(|r| r.destination_cidr_block() == Some(dest) && r.vpc_peering_connection_id() == Some(pcx))
            })
            .filter_map(|t| t.route_table_id().map(str::to_string))
            .collect())
    }

    /// Where `subnet_id`'s route table (its own, else the VPC's main one) sends `dest`.
    pub async fn route_for(&self, subnet_id: &str, vpc_id: &str, dest: &Cidr) -> Result<RouteTarget> {
        let mut tables = self
            .route_tables(vec![filter("association.subnet-id", &[subnet_id])])
            .await?;
        if tables.is_empty() {
            tables = self
                .route_tables(vec![filter("vpc-id", &[vpc_id]), filter("association.main", &["true"])])
                .await?;
        }
        let table = tables.first().ok_or_else(|| {
            AwsError::new(
                self.ctx("describing route tables"),
                None,
                format!("subnet {subnet_id} has no route table and {vpc_id} no main one"),
            )
        })?;
        Ok(RouteTarget {
            route_table_id: table.route_table_id().unwrap_or_default().to_string(),
            route: most_specific(table, dest),
        })
    }

    /// Admits all traffic from `cidr` into `group_id` (the rule says `description`).
    pub async fn allow_range(&self, group_id: &str, cidr: &str, description: &str) -> Result<()> {
        self.authorize(group_id, all_traffic_from(cidr, description)).await
    }

    /// The groups of `vpc_id` admitting all traffic from `cidr`, sorted, each with whether its
    /// rule says `description` (what [`Ec2::allow_range`] added).
    pub async fn groups_admitting(&self, vpc_id: &str, cidr: &str, description: &str) -> Result<Vec<(String, bool)>> {
        let out = self
            .client
            .describe_security_groups()
            .filters(filter("vpc-id", &[vpc_id]))
            .send()
            .await
            .map_err(|e| self.err(&format!("describing the security groups of {vpc_id}"), &e))?;
        let mut found: Vec<(String, bool)> = out
            .security_groups()
            .iter()
            .filter_map(|g| Some((g.group_id()?.to_string(), admits(g, cidr)?)))
            .map(|(g, said)| (g, said.as_deref() == Some(description)))
            .collect();
        found.sort();
        Ok(found)
    }

    /// Takes back [`Ec2::allow_range`]: the rule from `cidr` that says `description` (a rule
    /// the group had of its own, or a group already gone, is left alone).
    pub async fn revoke_range(&self, group_id: &str, cidr: &str, description: &str) -> Result<()> {
        let out = match self.client.describe_security_groups().group_ids(group_id).send().await {
            Ok(out) => out,
            Err(e) => {
                return self
                    .err(&format!("describing security group {group_id}"), &e)
                    .or_ok_if(&["InvalidGroup.NotFound"], ())
            }
        };
        let ours = out
            .security_groups()
            .iter()
            .any(|g| admits(g, cidr).flatten().as_deref() == Some(description));
        if !ours {
            return Ok(());
        }
        self.revoke(group_id, all_traffic_from(cidr, description)).await
    }
}

/// Whether `group` admits all traffic from `cidr`: None if not, else the rule's description.
fn admits(group: &aws_sdk_ec2::types::SecurityGroup, cidr: &str) -> Option<Option<String>> {
    group
        .ip_permissions()
        .iter()
        .filter(|p| p.ip_protocol() == Some("-1"))
        .flat_map(|p| p.ip_ranges())
        .find(|r| r.cidr_ip() == Some(cidr))
        .map(|r| r.description().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::Route;

    fn route(dest: &str, pcx: Option<&str>, gateway: Option<&str>) -> Route {
        Route::builder()
            .destination_cidr_block(dest)
            .set_vpc_peering_connection_id(pcx.map(str::to_string))
            .set_gateway_id(gateway.map(str::to_string))
            .build()
    }

    #[test]
    fn the_most_specific_route_decides_where_a_range_goes() {
        let table = RouteTable::builder()
            .routes(route("10.0.0.0/16", None, Some("local")))
            .routes(route("10.1.0.0/16", Some("pcx-1"), None))
            .routes(route("10.1.2.0/24", None, Some("tgw-9")))
            .routes(route("0.0.0.0/0", None, Some("igw-1")))
            .build();
        let to = |s: &str| most_specific(&table, &s.parse().expect("cidr")).map(|(_, t)| t);
        assert_eq!(to("10.1.7.0/24").as_deref(), Some("pcx-1"));
        assert_eq!(to("10.1.2.5/32").as_deref(), Some("tgw-9"));
        assert_eq!(to("10.0.3.0/24").as_deref(), Some("local"));
        assert_eq!(to("192.168.0.0/24").as_deref(), Some("igw-1"));
        // A route narrower than the range does not carry all of it.
        assert_eq!(to("10.1.0.0/15").as_deref(), Some("igw-1"));
    }

    #[test]
    fn a_connection_joins_its_two_vpcs_either_way_round_until_it_is_gone() {
        let p = Peering {
            status: "active".into(),
            vpc_id: "vpc-a".into(),
            peer_vpc_id: "vpc-b".into(),
            ..Peering::default()
        };
        assert!(p.joins("vpc-b", "vpc-a") && p.joins("vpc-a", "vpc-b") && !p.joins("vpc-a", "vpc-c"));
        assert!(p.is_live() && p.is_active());
        let gone = Peering {
            status: "deleted".into(),
            ..p
        };
        assert!(!gone.is_live());
    }
}
