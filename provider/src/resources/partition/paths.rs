//! A capacity pool in another region reaches the cluster only through the network path it
//! names (`peering_connection_id`): an active peering connection between its subnets' VPC and
//! the cluster's, with routes both ways (slurmd registers with slurmctld, slurmctld reaches
//! slurmd, the node mounts /home by a mount target's address). Checked at plan when the
//! connection is known, and again at apply before anything of the pool is made.

use std::collections::BTreeMap;

use hpc_aws::cidr::Cidr;
use hpc_aws::ec2::{Ec2, Peering};
use tfplugin::{AttributePath, Diagnostic, Diagnostics};

use super::model::{Pool, PoolConfig};
use crate::clients::Clients;
use crate::desired_state::ClusterDoc;
use crate::resources::aws_diag;

fn at(i: usize) -> AttributePath {
    AttributePath::root("capacity_pool")
        .index(i)
        .attr("peering_connection_id")
}

/// Whether a pool's region (None: the provider's) is another region than `home`.
pub(super) fn is_remote(region: Option<&str>, home: &str) -> bool {
    region.is_some_and(|r| r != home)
}

/// Every pool in another region names its path (planned values; unknown ones pass).
pub(super) fn named(pools: &[PoolConfig], home: &str) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (i, pool) in pools.iter().enumerate() {
        let Some(region) = pool.region.as_str() else {
            continue;
        };
        if is_remote(Some(region), home) && !pool.peering_connection_id.is_set() {
            diags.error_at(
                at(i),
                format!("a pool in {region} needs a network path to the cluster in {home}"),
                format!(
                    "Its nodes must reach slurmctld and /home, and slurmctld must reach them. Connect the \
                     pool's VPC with the cluster's (resource \"hpc_network_peering\", peer_region = \"{region}\") \
                     and give its id here: peering_connection_id = hpc_network_peering.<name>.id."
                ),
            );
        }
    }
    diags
}

/// Checks the path of every pool in another region that names one.
pub(super) async fn check_all(
    clients: &Clients,
    cdoc: &ClusterDoc,
    pools: &[Pool],
    ec2s: &BTreeMap<String, Ec2>,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (i, pool) in pools.iter().enumerate() {
        let (Some(region), Some(pcx)) = (pool.region.as_deref(), pool.peering_connection_id.as_deref()) else {
            continue;
        };
        if !is_remote(Some(region), &clients.aws.region) {
            continue;
        }
        diags.extend(lustre_out_of_reach(cdoc, i, region));
        let Some(ec2) = ec2s.get(region) else { continue };
        if let Err(d) = check(clients, cdoc, i, pool, pcx, ec2).await {
            diags.extend(d);
        }
    }
    diags
}

/// A Lustre file system's DNS name resolves only in its own region, and nodes mount it by
/// name: nodes of another region start without it, and the health check drains them.
fn lustre_out_of_reach(cdoc: &ClusterDoc, i: usize, region: &str) -> Diagnostics {
    let points: Vec<&str> = cdoc.mounts.iter().map(|m| m.mount_point.as_str()).collect();
    if points.is_empty() {
        return Diagnostics::new();
    }
    Diagnostic::warning(
        format!(
            "nodes of capacity_pool {i} in {region} cannot mount {}",
            points.join(", ")
        ),
        format!(
            "The cluster's Lustre file systems live in {} and their DNS names resolve only there; a node \
             of {region} starts without them, and Slurm's health check drains it. Keep storage blocks off \
             clusters whose partitions fail over to another region, or move this pool to the cluster's region.",
            cdoc.region
        ),
    )
    .at(AttributePath::root("capacity_pool").index(i).attr("region"))
    .into()
}

/// Pool `i`'s connection is active, joins its VPC and the cluster's, and routes carry the
/// cluster's range from each of the pool's subnets and the pool's range from the head node's.
async fn check(
    clients: &Clients,
    cdoc: &ClusterDoc,
    i: usize,
    pool: &Pool,
    pcx: &str,
    ec2: &Ec2,
) -> Result<(), Diagnostics> {
    let read = |e: hpc_aws::AwsError| aws_diag(&format!("Cannot check capacity_pool {i}'s network path"), &e);
    let Some(first) = pool.subnet_ids.first() else {
        return Ok(());
    };
    let pool_vpc = ec2.subnet_vpc(first).await.map_err(read)?;
    let p = clients.ec2.peering(pcx).await.map_err(read)?;
    let p = connection(p, i, pcx, &cdoc.vpc_id, &pool_vpc, &clients.aws.region)?;
    let (home_cidr, pool_cidr) = if p.vpc_id == cdoc.vpc_id {
        (p.cidr_block.clone(), p.peer_cidr_block.clone())
    } else {
        (p.peer_cidr_block.clone(), p.cidr_block.clone())
    };
    let mut diags = Diagnostics::new();
    for subnet in &pool.subnet_ids {
        let route = routed(ec2, subnet, &pool_vpc, &home_cidr).await.map_err(read)?;
        diags.extend(route_check(route, i, pcx, subnet, &home_cidr));
    }
    let route = routed(&clients.ec2, &cdoc.subnet_id, &cdoc.vpc_id, &pool_cidr)
        .await
        .map_err(read)?;
    diags.extend(route_check(route, i, pcx, &cdoc.subnet_id, &pool_cidr));
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(())
    }
}

/// The connection, if it exists, is active and joins the two VPCs.
fn connection(
    found: Option<Peering>,
    i: usize,
    pcx: &str,
    cluster_vpc: &str,
    pool_vpc: &str,
    home: &str,
) -> Result<Peering, Diagnostics> {
    let refuse = |summary: String, detail: String| Diagnostics::from(Diagnostic::error(summary, detail).at(at(i)));
    let Some(p) = found else {
        return Err(refuse(
            format!("peering connection {pcx} does not exist in {home}"),
            "Give the id of an active connection between the pool's VPC and the cluster's (hpc_network_peering.<name>.id).".into(),
        ));
    };
    if !p.is_active() {
        return Err(refuse(
            format!("peering connection {pcx} is {}, not active", p.status),
            format!(
                "Accept it in {} (hpc_network_peering accepts the connections it makes).",
                p.peer_region
            ),
        ));
    }
    if !p.joins(cluster_vpc, pool_vpc) {
        return Err(refuse(
            format!("peering connection {pcx} joins {} and {}", p.vpc_id, p.peer_vpc_id),
            format!("capacity_pool {i} needs a connection between the cluster's VPC {cluster_vpc} and its subnets' VPC {pool_vpc}."),
        ));
    }
    Ok(p)
}

/// Where `subnet`'s route table sends `dest`: (route table, target) or the table alone.
async fn routed(ec2: &Ec2, subnet: &str, vpc: &str, dest: &str) -> hpc_aws::Result<(String, Option<String>)> {
    let Ok(range) = dest.parse::<Cidr>() else {
        return Ok((String::new(), None));
    };
    let r = ec2.route_for(subnet, vpc, &range).await?;
    Ok((r.route_table_id, r.route.map(|(_, target)| target)))
}

fn route_check(route: (String, Option<String>), i: usize, pcx: &str, subnet: &str, dest: &str) -> Diagnostics {
    let (table, target) = route;
    if target.as_deref() == Some(pcx) || table.is_empty() {
        return Diagnostics::new();
    }
    let now = target.map_or("nowhere".to_string(), |t| format!("to {t}"));
    Diagnostic::error(
        format!("subnet {subnet} sends {dest} {now}, not through {pcx}"),
        format!(
            "capacity_pool {i}'s nodes and the cluster reach each other only through the peering: add a route \
             for {dest} through {pcx} to route table {table} (hpc_network_peering adds one to every route \
             table of both VPCs when it is made)."
        ),
    )
    .at(at(i))
    .into()
}
