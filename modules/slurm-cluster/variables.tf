variable "name" {
  description = "Cluster name (Slurm ClusterName); also prefixes the network and file system names."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$", var.name))
    error_message = "name must be 1 to 32 lowercase letters, digits and '-', starting with a letter and not ending with '-', e.g. \"research\"."
  }
}

variable "ami_id" {
  description = "hpc-image AMI for the head node, the login nodes and (unless a partition sets its own) the compute nodes."
  type        = string

  validation {
    condition     = startswith(var.ami_id, "ami-")
    error_message = "ami_id must be an AMI id such as \"ami-0123456789abcdef0\" (build one with `hpc-image build --publish`)."
  }
}

# --- network -------------------------------------------------------------------------------

variable "subnet_ids" {
  description = "Existing private subnets to use instead of creating a network. The first holds the head node, the login nodes and the Lustre file system; each one becomes a capacity pool (in this order) of every partition that does not list its own pools. Empty: the module creates an `hpc_network`."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.subnet_ids : startswith(s, "subnet-")])
    error_message = "subnet_ids must hold subnet ids such as \"subnet-0123456789abcdef0\"; leave it empty to let the module create a network."
  }
}

variable "cluster_security_group_id" {
  description = "With existing `subnet_ids`: a security group of that VPC allowing all traffic between its members, used as the cluster group of every node and for the Lustre file system. Null: the cluster creates its own group (then give `lustre_security_group_ids` that admit the nodes). Ignored when the module creates the network (its group is used)."
  type        = string
  default     = null

  validation {
    condition     = var.cluster_security_group_id == null || startswith(coalesce(var.cluster_security_group_id, "sg-"), "sg-")
    error_message = "cluster_security_group_id must be a security group id such as \"sg-0123456789abcdef0\"."
  }
}

variable "lustre_security_group_ids" {
  description = "With existing `subnet_ids`: security groups for the Lustre file system, admitting TCP 988 and 1018-1023 from the nodes. Ignored when the module creates the network (its cluster security group is used)."
  type        = list(string)
  default     = null
}

variable "network" {
  description = "The network the module creates when `subnet_ids` is empty: VPC range, zones (a public and a private subnet each; compute pools fail over across them in this order), NAT gateway and S3 endpoint."
  type = object({
    cidr_block         = optional(string, "10.0.0.0/16")
    availability_zones = optional(list(string))
    nat_gateway        = optional(bool, true)
    s3_endpoint        = optional(bool, true)
  })
  default = {}

  validation {
    condition     = can(cidrnetmask(var.network.cidr_block)) && tonumber(split("/", var.network.cidr_block)[1]) >= 16 && tonumber(split("/", var.network.cidr_block)[1]) <= 24
    error_message = "network.cidr_block must be an IPv4 range from /16 to /24, e.g. \"10.0.0.0/16\"."
  }

  validation {
    condition     = var.network.availability_zones == null || (length(coalesce(var.network.availability_zones, [])) >= 1 && length(coalesce(var.network.availability_zones, [])) <= 6)
    error_message = "network.availability_zones must list 1 to 6 zones (two or more let partitions fail over between zones), or be null for the region's first two."
  }
}

# --- head and login nodes ------------------------------------------------------------------

variable "head_node" {
  description = "Head node (slurmctld, and slurmdbd and MariaDB with local accounting). `root_volume_size` is GiB of encrypted gp3. `instance_profile_arn` should grant the cluster's `instance_profile_policy` output."
  type = object({
    instance_type        = optional(string, "c7i.2xlarge")
    root_volume_size     = optional(number, 200)
    instance_profile_arn = optional(string)
    key_name             = optional(string)
  })
  default = {}

  validation {
    condition     = var.head_node.root_volume_size >= 50 && var.head_node.root_volume_size <= 16384
    error_message = "head_node.root_volume_size must be 50 to 16384 GiB; it holds the OS, Slurm's state, the accounting database and (without EFS) /home."
  }
}

variable "allowed_ssh_cidrs" {
  description = "Networks allowed to SSH to the head and login nodes. Default: none (reach them with SSM Session Manager)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.allowed_ssh_cidrs : can(cidrnetmask(c)) || can(cidrhost(c, 0))])
    error_message = "allowed_ssh_cidrs must hold CIDR blocks such as \"192.0.2.0/24\"."
  }

  validation {
    condition     = !contains(var.allowed_ssh_cidrs, "0.0.0.0/0") && !contains(var.allowed_ssh_cidrs, "::/0")
    error_message = "SSH from the whole internet is refused: list your VPN's or campus's ranges, or leave allowed_ssh_cidrs empty and use SSM Session Manager."
  }
}

variable "login_nodes" {
  description = "The login pool: how many login nodes users SSH to (and submit from), and their type. 0 turns it off."
  type = object({
    count         = optional(number, 1)
    instance_type = optional(string, "c7i.xlarge")
  })
  default = {}

  validation {
    condition     = var.login_nodes.count >= 0 && var.login_nodes.count <= 10 && floor(var.login_nodes.count) == var.login_nodes.count
    error_message = "login_nodes.count must be a whole number from 0 to 10."
  }
}

variable "home_efs_id" {
  description = "Your EFS file system for /home (with a mount target in each zone the nodes run in); it outlives the cluster. Null: the cluster makes its own encrypted EFS, deleted with the cluster."
  type        = string
  default     = null

  validation {
    condition     = var.home_efs_id == null || startswith(coalesce(var.home_efs_id, "x"), "fs-")
    error_message = "home_efs_id must be an EFS file system id such as \"fs-0123456789abcdef0\", or null for an EFS the cluster makes."
  }
}

variable "users" {
  description = "Cluster users created on every node, with their SSH keys. `uid` must be 1000-60000 and stable: it owns files on shared storage."
  type = list(object({
    name            = string
    uid             = number
    gid             = optional(number)
    ssh_public_keys = optional(list(string), [])
    sudo            = optional(bool, false)
  }))
  default = []

  validation {
    condition     = alltrue([for u in var.users : u.uid >= 1000 && u.uid <= 60000])
    error_message = "Each user's uid must be between 1000 and 60000 (ids below 1000 belong to the image)."
  }

  validation {
    condition     = length(distinct([for u in var.users : u.name])) == length(var.users) && length(distinct([for u in var.users : u.uid])) == length(var.users)
    error_message = "User names and uids must be unique: list each user once with its own uid."
  }

  validation {
    condition     = alltrue([for u in var.users : can(regex("^[a-z_][a-z0-9_-]{0,31}$", u.name))])
    error_message = "User names must be lowercase letters, digits, '_' and '-', starting with a letter or '_' (at most 32 characters)."
  }
}

# --- Slurm and accounting ------------------------------------------------------------------

variable "slurm" {
  description = "Slurm settings: release series on the images (`22.05`, `24.11` or `26.05`), how long idle cloud nodes stay up (`scaledown_idletime`), how long a node may take to boot (`resume_timeout`), and more slurm.conf settings (`extra`; keys the provider manages are refused with the attribute to use instead)."
  type = object({
    version            = optional(string, "24.11")
    scaledown_idletime = optional(string, "10m")
    resume_timeout     = optional(string, "30m")
    extra              = optional(map(string), {})
  })
  default = {}

  validation {
    condition     = contains(["22.05", "24.11", "26.05"], var.slurm.version)
    error_message = "slurm.version must be \"22.05\" (Debian 12 images), \"24.11\" (Debian 13 images) or \"26.05\" (Debian 14 images), matching the images' Slurm."
  }

  validation {
    condition     = alltrue([for d in [var.slurm.scaledown_idletime, var.slurm.resume_timeout] : can(regex("^([0-9]+[hms])+$", d))])
    error_message = "slurm.scaledown_idletime and slurm.resume_timeout must be durations such as \"10m\", \"1h30m\" or \"90s\"."
  }
}

variable "accounting" {
  description = "Job accounting (sacct, fair share, limits). `local` (default): slurmdbd and MariaDB on the head node. `external`: your database (`host`, `user`, and `password_secret_arn` or the write-only `accounting_password`). `none`: no accounting."
  type = object({
    mode                = optional(string, "local")
    host                = optional(string)
    port                = optional(number)
    database            = optional(string)
    user                = optional(string)
    password_secret_arn = optional(string)
  })
  default = {}

  validation {
    condition     = contains(["local", "external", "none"], var.accounting.mode)
    error_message = "accounting.mode must be \"local\" (MariaDB on the head node), \"external\" (your database) or \"none\"."
  }

  validation {
    condition     = var.accounting.mode != "external" || var.accounting.host != null
    error_message = "accounting.mode = \"external\" needs accounting.host (the database host)."
  }
}

variable "accounting_password" {
  description = "Password of the external accounting database. Ephemeral and write-only: the provider stores it in Secrets Manager and it never reaches plan or state. Alternative to `accounting.password_secret_arn`."
  type        = string
  default     = null
  sensitive   = true
  ephemeral   = true
}

variable "mfa" {
  description = "A second SSH factor on the login nodes, after the key: `pam_module` (e.g. `pam_google_authenticator.so`, or `pam_duo.so` with `settings_file = \"/etc/security/pam_duo.conf\"` and `settings_secret_arn` naming the secret that holds its `[duo]` section), `config` (the module's arguments, e.g. `nullok`). Null (default): the key alone."
  type = object({
    pam_module          = string
    config              = optional(string)
    settings_file       = optional(string)
    settings_secret_arn = optional(string)
  })
  default = null
}

# --- storage -------------------------------------------------------------------------------

variable "lustre" {
  description = "A Lustre file system for the cluster, made with the lustre-scratch module (see it for the fields) in the head node's subnet and mounted on every node at `mount_point`. `{}` gives PERSISTENT_2, 1200 GiB at /fsx, linked to S3 when `data_repositories` are given, with a release policy. Null (default): no file system."
  type = object({
    deployment_type             = optional(string, "PERSISTENT_2")
    storage_capacity            = optional(number, 1200)
    per_unit_storage_throughput = optional(number, 125)
    mount_point                 = optional(string, "/fsx")
    data_repositories = optional(list(object({
      file_system_path                 = string
      data_repository_path             = string
      auto_import_events               = optional(list(string), ["NEW", "CHANGED", "DELETED"])
      auto_export_events               = optional(list(string), ["NEW", "CHANGED", "DELETED"])
      batch_import_meta_data_on_create = optional(bool, true)
    })), [])
    release_policy = optional(object({
      unaccessed_days = optional(number, 30)
      usage_percent   = optional(number, 80)
    }), {})
    kms_key_id            = optional(string)
    backup_retention_days = optional(number, 7)
    root_squash           = optional(string)
  })
  default = null
}

variable "extra_storage" {
  description = "More Lustre file systems to mount on every node, e.g. the `cluster_storage` output of a lustre-scratch module."
  type = list(object({
    lustre_id   = string
    dns_name    = string
    mount_name  = string
    mount_point = string
  }))
  default = []

  validation {
    condition     = length(distinct([for s in var.extra_storage : s.mount_point])) == length(var.extra_storage)
    error_message = "Each extra_storage entry needs its own mount_point."
  }
}

# --- partitions ----------------------------------------------------------------------------

variable "partitions" {
  description = "Partitions by name. Each instance type becomes a Slurm node set of up to `max_nodes` nodes scaling from zero. Without `capacity_pools`, a partition gets one pool per private subnet (zone), tried in order: a zone without capacity hands its nodes to the next. `capacity_type` sets the type of those default pools."
  type = map(object({
    instance_types       = list(string)
    max_nodes            = number
    min_nodes            = optional(number, 0)
    default              = optional(bool, false)
    ami_id               = optional(string)
    efa_enabled          = optional(bool, false)
    placement_group      = optional(bool)
    exclusive            = optional(bool, false)
    max_time             = optional(string, "1-00:00:00")
    default_time         = optional(string)
    allocation_strategy  = optional(string, "prioritized")
    capacity_type        = optional(string, "on_demand")
    allow_accounts       = optional(list(string))
    allow_groups         = optional(list(string))
    allow_qos            = optional(list(string))
    priority_tier        = optional(number)
    max_nodes_per_job    = optional(number)
    root_volume_size     = optional(number, 100)
    provision_timeout    = optional(string, "10m")
    ice_cooldown         = optional(string, "10m")
    slurm_extra          = optional(map(string))
    user_data_extra      = optional(string)
    instance_profile_arn = optional(string)
    tags                 = optional(map(string), {})
    capacity_pools = optional(list(object({
      subnet_ids              = list(string)
      capacity_type           = optional(string, "on_demand")
      capacity_reservation_id = optional(string)
      region                  = optional(string)
      ami_id                  = optional(string)
    })))
  }))
  default = {
    cpu = {
      instance_types = ["c7i.4xlarge"]
      max_nodes      = 16
      default        = true
    }
  }

  validation {
    condition     = alltrue([for n, _ in var.partitions : can(regex("^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$", n))])
    error_message = "Partition names (the map keys) must be 1 to 24 lowercase letters, digits and '-', starting with a letter, e.g. \"cpu\" or \"gpu-h100\"."
  }

  validation {
    condition     = length([for p in values(var.partitions) : p if p.default]) <= 1
    error_message = "At most one partition may set default = true (it is where jobs without -p go)."
  }

  validation {
    condition     = alltrue([for p in values(var.partitions) : length(p.instance_types) > 0 && p.max_nodes >= 1 && p.min_nodes >= 0 && p.min_nodes <= p.max_nodes])
    error_message = "Each partition needs at least one instance type, max_nodes of 1 or more, and 0 <= min_nodes <= max_nodes."
  }

  validation {
    condition = alltrue(flatten([for p in values(var.partitions) : concat(
      [contains(["on_demand", "spot"], p.capacity_type)],
      [for c in coalesce(p.capacity_pools, []) : contains(["on_demand", "spot", "capacity_block"], c.capacity_type)]
    )]))
    error_message = "capacity_type must be \"on_demand\" or \"spot\" (and, in capacity_pools, \"capacity_block\" with a capacity_reservation_id)."
  }

  validation {
    condition     = alltrue([for p in values(var.partitions) : contains(["prioritized", "lowest-price", "capacity-optimized", "price-capacity-optimized"], p.allocation_strategy)])
    error_message = "allocation_strategy must be \"prioritized\", \"lowest-price\", \"capacity-optimized\" or \"price-capacity-optimized\"."
  }
}

variable "wait_for_apply" {
  description = "Partitions wait until the head node's agent reports their configuration applied to Slurm (skipped, with a warning, while no agent has reported yet)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags of everything the module creates (merged over the provider's `default_tags`)."
  type        = map(string)
  default     = {}
}

variable "wait_for_ready" {
  description = "Wait at apply until the head node reports slurmctld running (false where no instance boots, e.g. the emulator's API-only mode)."
  type        = bool
  default     = true
}
