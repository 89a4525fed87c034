//! hpc_partition's plan-time checks of its capacity pools against EC2 (reads only): the
//! reservations they name, the zones their subnets are in, what those zones offer, and the
//! allocation strategy against the pools' markets.

use std::collections::{BTreeMap, BTreeSet};

use tfplugin::model::Field;
use tfplugin::{AttributePath, Diagnostics};

use super::model::{PartitionConfig, PoolConfig};
use crate::clients::Clients;
use crate::resources::aws_diag;
use hpc_aws::ec2::CapacityReservationInfo;

/// Allocation strategies EC2 has only for Spot: On-Demand capacity launches by priority.
const SPOT_ONLY_STRATEGIES: &[&str] = &["capacity-optimized", "price-capacity-optimized"];

/// A spot-only allocation strategy needs a spot pool to apply to (config only).
pub(super) fn strategy(config: &PartitionConfig, diags: &mut Diagnostics) {
    let Some(strategy) = config.allocation_strategy.as_str() else {
        return;
    };
    if !SPOT_ONLY_STRATEGIES.contains(&strategy) || config.capacity_pool.known().is_none() {
        return;
    }
    let types: Vec<&Field<String>> = config.capacity_pool.items().iter().map(|p| &p.capacity_type).collect();
    let all_known = types.iter().all(|t| !t.is_unknown());
    if all_known && !types.iter().any(|t| t.as_str() == Some("spot")) {
        diags.error_at(
            AttributePath::root("allocation_strategy"),
            format!("allocation_strategy {strategy:?} is for spot pools, and this partition has none"),
            "EC2 offers it only for Spot capacity; on-demand and capacity-block pools launch by \
             priority. Use \"prioritized\" (instance_types in order) or \"lowest-price\", or add a \
             capacity_pool with capacity_type = \"spot\".",
        );
    }
}

/// A partition made the default while another published one is: Slurm has one default, and
/// the agent refuses a state with two, so this apply must also unset the other (a warning: that
/// change may be in the same plan, which this partition's plan cannot see).
pub(super) fn one_default(name: &str, others: &[crate::desired_state::PartitionDoc]) -> Diagnostics {
    let mut diags = Diagnostics::default();
    for other in others.iter().filter(|o| o.slurm.default) {
        diags.push(
            tfplugin::Diagnostic::warning(
                format!("partition {} is the cluster's default partition now", other.name),
                format!(
                    "Slurm has one default partition, and the node agent refuses a cluster with two: \
                     set default = false on {} (in this apply or an earlier one); until that lands, the agent \
                     refuses {name}'s change and its apply may fail with that refusal.",
                    other.name
                ),
            )
            .at(AttributePath::root("default")),
        );
    }
    diags
}

/// One EC2 client per region the planned pools name.
fn planned_pool_clients(clients: &Clients, pools: &[PoolConfig]) -> BTreeMap<String, hpc_aws::ec2::Ec2> {
    clients.ec2_by_region(pools.iter().map(|p| p.region.as_str()))
}

/// The region of a planned pool (the provider's when unset); None while not known.
fn pool_region(clients: &Clients, pool: &PoolConfig) -> Option<String> {
    match &pool.region {
        Field::Known(region) => Some(region.clone()),
        Field::Unset => Some(clients.aws.region.clone()),
        Field::Unknown => None,
    }
}

/// Each pool's subnets exist in its region, and every instance type is offered in their zones:
/// none of them is an error (every launch there would fail), some of them a warning.
pub(super) async fn offerings(clients: &Clients, pools: &[PoolConfig], types: &[String]) -> Diagnostics {
    let mut diags = Diagnostics::default();
    let ec2s = planned_pool_clients(clients, pools);
    let mut offered: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (i, pool) in pools.iter().enumerate() {
        let at = || AttributePath::root("capacity_pool").index(i).attr("subnet_ids");
        // Subnets or a region not known until apply (a network made in the same apply).
        let (Some(subnets), Some(region)) = (pool.subnet_ids.known(), pool_region(clients, pool)) else {
            continue;
        };
        let Some(ec2) = ec2s.get(&region) else { continue };
        let zones = match ec2.subnet_zones(subnets).await {
            Ok(zones) => zones,
            Err(e) if e.code_is(&["InvalidSubnetID.NotFound", "InvalidSubnetID.Malformed"]) => {
                diags.error_at(
                    at(),
                    format!("a subnet of the pool does not exist in {region}: {}", e.message),
                    "Give subnets of the pool's region (region, or the provider's when unset).",
                );
                continue;
            }
            Err(e) => {
                diags.extend(aws_diag("Cannot describe the pool's subnets", &e));
                continue;
            }
        };
        if !offered.contains_key(&region) {
            match ec2.instance_type_zones(types).await {
                Ok(by_type) => offered.insert(region.clone(), by_type),
                Err(e) => {
                    diags.extend(aws_diag("Cannot describe instance type offerings", &e));
                    continue;
                }
            };
        }
        let Some(by_type) = offered.get(&region) else { continue };
        for t in types {
            let empty = BTreeSet::new();
            let offering = by_type.get(t).unwrap_or(&empty);
            let missing: Vec<String> = zones
                .iter()
                .filter(|(_, zone)| !offering.contains(zone))
                .map(|(subnet, zone)| format!("{subnet} ({zone})"))
                .collect();
            if missing.is_empty() {
                continue;
            }
            let elsewhere = if offering.is_empty() {
                format!("{t} is offered in no zone of {region}")
            } else {
                let zones: Vec<&str> = offering.iter().map(String::as_str).collect();
                format!("{t} is offered in {}", zones.join(", "))
            };
            if missing.len() == zones.len() {
                diags.error_at(
                    at(),
                    format!(
                        "{t} is not offered in any zone of capacity_pool {i}: {}",
                        missing.join(", ")
                    ),
                    format!("{elsewhere}. Give the pool subnets there, or remove {t} from instance_types."),
                );
            } else {
                diags.push(
                    tfplugin::Diagnostic::warning(
                        format!("{t} is not offered in {} of capacity_pool {i}", missing.join(", ")),
                        format!("{elsewhere}; the pool launches {t} only in its other subnets."),
                    )
                    .at(at()),
                );
            }
        }
    }
    diags
}

/// Each pool's capacity reservation exists in the pool's region, is for one of the partition's
/// instance types in a zone of the pool's subnets, and is a Capacity Block exactly when the
/// pool says `capacity_block` (reads only).
pub(super) async fn reservations(clients: &Clients, pools: &[PoolConfig], types: &[String]) -> Diagnostics {
    let mut diags = Diagnostics::default();
    let ec2s = planned_pool_clients(clients, pools);
    for (i, pool) in pools.iter().enumerate() {
        let (Some(id), Some(region)) = (pool.capacity_reservation_id.known(), pool_region(clients, pool)) else {
            continue;
        };
        let Some(ec2) = ec2s.get(&region) else { continue };
        let at = AttributePath::root("capacity_pool").index(i);
        let found = match ec2.capacity_reservations(std::slice::from_ref(id)).await {
            Ok(found) => found,
            Err(e)
                if e.code_is(&[
                    "InvalidCapacityReservationId.NotFound",
                    "InvalidCapacityReservationId.Malformed",
                ]) =>
            {
                diags.error_at(
                    at.attr("capacity_reservation_id"),
                    format!("capacity reservation {id} does not exist in {region}"),
                    "Give the id of a reservation or Capacity Block of this account in the pool's region.",
                );
                continue;
            }
            Err(e) => {
                diags.extend(aws_diag("Cannot describe capacity reservations", &e));
                continue;
            }
        };
        let Some(r) = found.into_iter().next() else { continue };
        diags.extend(reservation_fits(id, &r, pool, types, &at));
        let subnets = pool.subnet_ids.known().cloned().unwrap_or_default();
        match ec2.subnet_zones(&subnets).await {
            Ok(zones) => diags.extend(reservation_zone(id, &r, &zones, &at)),
            Err(e) => diags.extend(aws_diag("Cannot describe the pool's subnets", &e)),
        }
    }
    diags
}

/// The reservation `r` (`id` as configured) of the pool at `at` is for one of `types`, and a Capacity Block exactly
/// when the pool's `capacity_type` says so.
fn reservation_fits(
    id: &str,
    r: &CapacityReservationInfo,
    pool: &PoolConfig,
    types: &[String],
    at: &AttributePath,
) -> Diagnostics {
    let mut diags = Diagnostics::default();
    if !types.contains(&r.instance_type) {
        diags.error_at(
            at.clone().attr("capacity_reservation_id"),
            format!("{id} reserves {}, which is not in instance_types", r.instance_type),
            format!(
                "Add {} to instance_types, or use a reservation for one of them.",
                r.instance_type
            ),
        );
    }
    // The planned pool has its capacity_type (the schema's default when unset).
    let Some(kind) = pool.capacity_type.as_str() else {
        return diags;
    };
    if r.capacity_block != (kind == "capacity_block") {
        diags.error_at(
            at.clone().attr("capacity_type"),
            format!(
                "{id} is {}, but the pool's capacity_type is {}",
                if r.capacity_block {
                    "a Capacity Block"
                } else {
                    "an On-Demand Capacity Reservation"
                },
                kind
            ),
            if r.capacity_block {
                "Set capacity_type = \"capacity_block\"."
            } else {
                "Set capacity_type = \"on_demand\" (a reservation is on-demand capacity)."
            },
        );
    }
    diags
}

/// Every subnet of the pool at `at` (`zones`: subnet, zone) is in the zone of reservation `id`.
fn reservation_zone(
    id: &str,
    r: &CapacityReservationInfo,
    zones: &[(String, String)],
    at: &AttributePath,
) -> Diagnostics {
    let mut diags = Diagnostics::default();
    let outside: Vec<String> = zones
        .iter()
        .filter(|(_, zone)| *zone != r.availability_zone)
        .map(|(subnet, zone)| format!("{subnet} ({zone})"))
        .collect();
    if !outside.is_empty() {
        diags.error_at(
            at.clone().attr("subnet_ids"),
            format!("{id} is in {}, but {} is not", r.availability_zone, outside.join(", ")),
            format!("Give the pool only subnets in {}.", r.availability_zone),
        );
    }
    diags
}
