# An opinionated GPU partition: EFA on every network card, a cluster placement group per
# capacity pool (one zone each), reserved capacity first, then on-demand zone by zone, then
# optionally Spot; GPU gres and per-GPU CPU/memory defaults from EC2's facts about the types.

data "hpc_instance_type" "this" {
  for_each      = toset(var.instance_types)
  instance_type = each.value
}

locals {
  types = [for t in var.instance_types : data.hpc_instance_type.this[t]]

  # Each GPU's share of the smallest type (RealMemory keeps 512 MiB + 5 % back for the OS).
  cpus_per_gpu = min([for t in local.types : floor(t.vcpus / max(t.gpus, 1))]...)
  mem_per_gpu = min([
    for t in local.types : floor((t.memory_mib - 512 - ceil(t.memory_mib * 0.05)) / max(t.gpus, 1))
  ]...)

  gpu_extra = var.gpu_defaults ? {
    DefCPUPerGPU = tostring(local.cpus_per_gpu)
    DefMemPerGPU = tostring(local.mem_per_gpu)
  } : {}
  slurm_extra = merge(local.gpu_extra, var.slurm_extra)

  pools = concat(
    [for r in var.capacity_reservations : {
      subnet_ids              = [r.subnet_id]
      capacity_type           = r.capacity_type
      capacity_reservation_id = r.reservation_id
      region                  = null
      ami_id                  = null
    }],
    [for s in var.subnet_ids : {
      subnet_ids              = [s]
      capacity_type           = "on_demand"
      capacity_reservation_id = null
      region                  = null
      ami_id                  = null
    }],
    var.spot_fallback ? [for s in var.subnet_ids : {
      subnet_ids              = [s]
      capacity_type           = "spot"
      capacity_reservation_id = null
      region                  = null
      ami_id                  = null
    }] : [],
    var.extra_pools,
  )
}

resource "hpc_partition" "this" {
  cluster_id          = var.cluster_id
  name                = var.name
  instance_types      = var.instance_types
  ami_id              = var.ami_id
  max_nodes           = var.max_nodes
  min_nodes           = var.min_nodes
  efa_enabled         = true
  placement_group     = true
  exclusive           = var.exclusive
  max_time            = var.max_time
  allocation_strategy = var.allocation_strategy
  provision_timeout   = var.provision_timeout
  ice_cooldown        = var.ice_cooldown
  root_volume_size    = var.root_volume_size
  allow_accounts      = var.allow_accounts
  allow_qos           = var.allow_qos
  priority_tier       = var.priority_tier
  slurm_extra         = length(local.slurm_extra) > 0 ? local.slurm_extra : null

  instance_profile_arn = var.instance_profile_arn
  user_data_extra      = var.user_data_extra
  wait_for_apply       = var.wait_for_apply
  tags                 = var.tags

  dynamic "capacity_pool" {
    for_each = local.pools
    content {
      subnet_ids              = capacity_pool.value.subnet_ids
      capacity_type           = capacity_pool.value.capacity_type
      capacity_reservation_id = capacity_pool.value.capacity_reservation_id
      region                  = capacity_pool.value.region
      ami_id                  = capacity_pool.value.ami_id
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.pools) <= 16
      error_message = "The partition has ${length(local.pools)} capacity pools; at most 16 are allowed. List fewer subnets, turn spot_fallback off or drop extra_pools."
    }
    precondition {
      condition     = alltrue([for t in local.types : t.gpus > 0])
      error_message = "Every instance type must have GPUs; ${join(", ", [for t in local.types : t.instance_type if t.gpus == 0])} has none. Put CPU types in a partition of their own."
    }
    precondition {
      condition     = alltrue([for t in local.types : t.efa_supported])
      error_message = "Every instance type must support EFA; ${join(", ", [for t in local.types : t.instance_type if !t.efa_supported])} does not (for g6e and g5 use 8xlarge or larger)."
    }
  }
}
