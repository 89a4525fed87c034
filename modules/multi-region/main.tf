# Partitions of one cluster whose capacity pools span regions: the head node, slurmctld and
# accounting stay in the home region; compute nodes launch wherever capacity is found, in the
# order of var.regions. See README.md for the trade-off against one cluster per region joined
# in a Slurm federation.

locals {
  # On-demand pools in failover order: region by region, zone by zone (or one pool per region).
  on_demand_pools = flatten([
    for r in var.regions : r.pool_per_subnet ? [
      for s in r.subnet_ids : { subnet_ids = [s], region = r.region, ami_id = r.ami_id, security_group_ids = r.security_group_ids, peering_connection_id = r.peering_connection_id }
      ] : [
      { subnet_ids = r.subnet_ids, region = r.region, ami_id = r.ami_id, security_group_ids = r.security_group_ids, peering_connection_id = r.peering_connection_id }
    ]
  ])

  pools = {
    for name, p in var.partitions : name => concat(
      [for pool in local.on_demand_pools : merge(pool, { capacity_type = "on_demand" })],
      p.spot ? [for pool in local.on_demand_pools : merge(pool, { capacity_type = "spot" })] : [],
    )
  }
}

resource "hpc_partition" "this" {
  for_each = var.partitions

  cluster_id          = var.cluster_id
  name                = each.key
  instance_types      = each.value.instance_types
  ami_id              = var.ami_id
  max_nodes           = each.value.max_nodes
  min_nodes           = each.value.min_nodes
  default             = each.value.default
  efa_enabled         = each.value.efa_enabled
  exclusive           = each.value.exclusive
  max_time            = each.value.max_time
  allocation_strategy = each.value.allocation_strategy
  provision_timeout   = each.value.provision_timeout
  ice_cooldown        = each.value.ice_cooldown
  root_volume_size    = each.value.root_volume_size
  slurm_extra         = each.value.slurm_extra
  allow_accounts      = each.value.allow_accounts
  wait_for_apply      = var.wait_for_apply
  tags                = merge(var.tags, each.value.tags)

  dynamic "capacity_pool" {
    for_each = local.pools[each.key]
    content {
      subnet_ids            = capacity_pool.value.subnet_ids
      capacity_type         = capacity_pool.value.capacity_type
      region                = capacity_pool.value.region
      ami_id                = capacity_pool.value.ami_id
      security_group_ids    = capacity_pool.value.security_group_ids
      peering_connection_id = capacity_pool.value.peering_connection_id
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.pools[each.key]) <= 16
      error_message = "Partition ${each.key} would have ${length(local.pools[each.key])} capacity pools; at most 16 are allowed. Set pool_per_subnet = false for some regions, list fewer subnets, or turn spot off."
    }
    precondition {
      condition     = !each.value.efa_enabled || alltrue([for r in var.regions : r.pool_per_subnet])
      error_message = "Partition ${each.key} uses EFA, whose placement groups live in one zone: set pool_per_subnet = true (the default) in every region."
    }
  }
}
