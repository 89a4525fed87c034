# A Slurm cluster for research: a network (or your subnets), an optional Lustre file system,
# the head node with local accounting, a login pool, users, and a map of elastic partitions
# whose capacity pools fail over across the network's zones.

locals {
  create_network = length(var.subnet_ids) == 0

  # Private subnets in failover order: the module's network by zone name, or yours as given.
  private_subnet_ids = local.create_network ? [
    for zone in sort(keys(hpc_network.this[0].private_subnet_ids)) : hpc_network.this[0].private_subnet_ids[zone]
  ] : var.subnet_ids
  head_subnet_id = local.private_subnet_ids[0]

  # Nodes and Lustre share one group whose members talk freely: the module's network group, or
  # the one you give with your own subnets.
  cluster_security_group_id = local.create_network ? hpc_network.this[0].security_group_id : var.cluster_security_group_id
  lustre_security_group_ids = (
    local.create_network ? [hpc_network.this[0].security_group_id] :
    var.lustre_security_group_ids != null ? var.lustre_security_group_ids :
    var.cluster_security_group_id != null ? [var.cluster_security_group_id] : null
  )

  storage = concat(
    var.lustre == null ? [] : [module.lustre[0].cluster_storage],
    var.extra_storage,
  )

  default_pools = [for s in local.private_subnet_ids : { subnet_ids = [s] }]
}

resource "hpc_network" "this" {
  count = local.create_network ? 1 : 0

  name               = var.name
  cidr_block         = var.network.cidr_block
  availability_zones = var.network.availability_zones
  nat_gateway        = var.network.nat_gateway
  s3_endpoint        = var.network.s3_endpoint
  tags               = var.tags
}

module "lustre" {
  source = "../lustre-scratch"
  count  = var.lustre == null ? 0 : 1

  name                        = "${var.name}-fsx"
  subnet_id                   = local.head_subnet_id
  security_group_ids          = local.lustre_security_group_ids
  deployment_type             = var.lustre.deployment_type
  storage_capacity            = var.lustre.storage_capacity
  per_unit_storage_throughput = var.lustre.per_unit_storage_throughput
  mount_point                 = var.lustre.mount_point
  data_repositories           = var.lustre.data_repositories
  release_policy              = var.lustre.release_policy
  kms_key_id                  = var.lustre.kms_key_id
  backup_retention_days       = var.lustre.backup_retention_days
  root_squash                 = var.lustre.root_squash
  tags                        = var.tags
}

resource "hpc_cluster" "this" {
  name              = var.name
  subnet_id         = local.head_subnet_id
  security_group_id = local.cluster_security_group_id
  wait_for_ready    = var.wait_for_ready

  head_node {
    ami_id                = var.ami_id
    instance_type         = var.head_node.instance_type
    root_volume_size      = var.head_node.root_volume_size
    root_volume_encrypted = true
    instance_profile_arn  = var.head_node.instance_profile_arn
    key_name              = var.head_node.key_name
    allowed_ssh_cidrs     = var.allowed_ssh_cidrs
  }

  slurm {
    version            = var.slurm.version
    scaledown_idletime = var.slurm.scaledown_idletime
    resume_timeout     = var.slurm.resume_timeout
    extra              = length(var.slurm.extra) > 0 ? var.slurm.extra : null
  }

  accounting {
    mode                = var.accounting.mode
    host                = var.accounting.host
    port                = var.accounting.port
    database            = var.accounting.database
    user                = var.accounting.user
    password_secret_arn = var.accounting.password_secret_arn
    password            = var.accounting_password
  }

  login_nodes {
    count         = var.login_nodes.count
    instance_type = var.login_nodes.instance_type
  }

  dynamic "home" {
    for_each = var.home_efs_id == null ? [] : [var.home_efs_id]
    content {
      storage = "efs"
      efs_id  = home.value
    }
  }

  dynamic "mfa" {
    for_each = var.mfa == null ? [] : [var.mfa]
    content {
      pam_module          = mfa.value.pam_module
      config              = mfa.value.config
      settings_file       = mfa.value.settings_file
      settings_secret_arn = mfa.value.settings_secret_arn
    }
  }

  dynamic "user" {
    for_each = var.users
    content {
      name            = user.value.name
      uid             = user.value.uid
      gid             = user.value.gid
      ssh_public_keys = user.value.ssh_public_keys
      sudo            = user.value.sudo
    }
  }

  dynamic "storage" {
    for_each = local.storage
    content {
      lustre_id   = storage.value.lustre_id
      dns_name    = storage.value.dns_name
      mount_name  = storage.value.mount_name
      mount_point = storage.value.mount_point
    }
  }

  tags = var.tags
}

resource "hpc_partition" "this" {
  for_each = var.partitions

  cluster_id           = hpc_cluster.this.id
  name                 = each.key
  instance_types       = each.value.instance_types
  max_nodes            = each.value.max_nodes
  min_nodes            = each.value.min_nodes
  default              = each.value.default
  ami_id               = coalesce(each.value.ami_id, var.ami_id)
  efa_enabled          = each.value.efa_enabled
  placement_group      = each.value.placement_group
  exclusive            = each.value.exclusive
  max_time             = each.value.max_time
  default_time         = each.value.default_time
  allocation_strategy  = each.value.allocation_strategy
  allow_accounts       = each.value.allow_accounts
  allow_groups         = each.value.allow_groups
  allow_qos            = each.value.allow_qos
  priority_tier        = each.value.priority_tier
  max_nodes_per_job    = each.value.max_nodes_per_job
  root_volume_size     = each.value.root_volume_size
  provision_timeout    = each.value.provision_timeout
  ice_cooldown         = each.value.ice_cooldown
  slurm_extra          = each.value.slurm_extra
  user_data_extra      = each.value.user_data_extra
  instance_profile_arn = each.value.instance_profile_arn
  wait_for_apply       = var.wait_for_apply
  tags                 = merge(var.tags, each.value.tags)

  dynamic "capacity_pool" {
    for_each = each.value.capacity_pools != null ? each.value.capacity_pools : [
      for p in local.default_pools : merge(p, {
        capacity_type           = each.value.capacity_type
        capacity_reservation_id = null
        region                  = null
        ami_id                  = null
      })
    ]
    content {
      subnet_ids              = capacity_pool.value.subnet_ids
      capacity_type           = capacity_pool.value.capacity_type
      capacity_reservation_id = capacity_pool.value.capacity_reservation_id
      region                  = capacity_pool.value.region
      ami_id                  = capacity_pool.value.ami_id
    }
  }
}
