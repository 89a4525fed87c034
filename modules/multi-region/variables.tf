variable "cluster_id" {
  description = "The cluster (in the provider's region, the home region) the partitions belong to: an `hpc_cluster` id or the slurm-cluster module's `cluster_name`."
  type        = string
}

variable "ami_id" {
  description = "Node image in the home region (the provider's region)."
  type        = string

  validation {
    condition     = startswith(var.ami_id, "ami-")
    error_message = "ami_id must be an AMI id such as \"ami-0123456789abcdef0\"."
  }
}

variable "regions" {
  description = "Where the partitions get capacity, in failover order. `region = null` is the home region; any other region needs `ami_id` (the image copied there, e.g. by `hpc-image publish` with several regions), `security_group_ids` of its VPC (security groups are regional; they must allow traffic with the home region's nodes) and `peering_connection_id`: the `hpc_network_peering` between its subnets' VPC and the home VPC (ranges not overlapping), which the provider checks at plan (active, routes both ways). With `pool_per_subnet` each subnet is a pool of its own (failover zone by zone), else the region's subnets form one pool."
  type = list(object({
    region                = optional(string)
    subnet_ids            = list(string)
    ami_id                = optional(string)
    security_group_ids    = optional(list(string))
    peering_connection_id = optional(string)
    pool_per_subnet       = optional(bool, true)
  }))

  validation {
    condition     = length(var.regions) >= 1
    error_message = "regions must list at least one entry; the first is usually the home region (region = null)."
  }

  validation {
    condition     = alltrue([for r in var.regions : r.region == null || r.ami_id != null])
    error_message = "Every region other than the home region needs ami_id: AMI ids are regional, so copy the image there (hpc-image publish with regions = [...]) and give the copy's id."
  }

  validation {
    condition     = alltrue([for r in var.regions : r.region == null || r.security_group_ids != null])
    error_message = "Every region other than the home region needs security_group_ids from its own VPC (security groups are regional), e.g. the hpc_network security_group_id there."
  }

  validation {
    condition     = alltrue([for r in var.regions : r.region == null || r.peering_connection_id != null])
    error_message = "Every region other than the home region needs peering_connection_id: its nodes reach slurmctld and /home only through a network path, e.g. an hpc_network_peering between that region's VPC and the home VPC (peering_connection_id = hpc_network_peering.<name>.id)."
  }

  validation {
    condition     = alltrue([for r in var.regions : length(r.subnet_ids) > 0 && alltrue([for s in r.subnet_ids : startswith(s, "subnet-")])])
    error_message = "Each region needs at least one subnet id such as \"subnet-0123456789abcdef0\"."
  }

  validation {
    condition     = length(distinct([for r in var.regions : coalesce(r.region, "(home)")])) == length(var.regions)
    error_message = "List each region once (the home region as region = null); put all of a region's subnets in its subnet_ids."
  }

  validation {
    condition     = alltrue([for r in var.regions : r.region == null || can(regex("^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", coalesce(r.region, "x")))])
    error_message = "region must be an AWS region name such as \"us-west-2\", or null for the home region."
  }
}

variable "partitions" {
  description = "Partitions by name. Every partition gets the pools of `regions` in order: on-demand pools first, then (with `spot`) the same pools as Spot."
  type = map(object({
    instance_types      = list(string)
    max_nodes           = number
    min_nodes           = optional(number, 0)
    default             = optional(bool, false)
    efa_enabled         = optional(bool, false)
    spot                = optional(bool, false)
    exclusive           = optional(bool, false)
    max_time            = optional(string)
    allocation_strategy = optional(string, "prioritized")
    provision_timeout   = optional(string, "15m")
    ice_cooldown        = optional(string, "15m")
    root_volume_size    = optional(number, 100)
    slurm_extra         = optional(map(string))
    allow_accounts      = optional(list(string))
    tags                = optional(map(string), {})
  }))

  validation {
    condition     = length(var.partitions) > 0 && alltrue([for n, _ in var.partitions : can(regex("^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$", n))])
    error_message = "partitions must name at least one partition; names (the map keys) are 1 to 24 lowercase letters, digits and '-', starting with a letter."
  }

  validation {
    condition     = alltrue([for p in values(var.partitions) : length(p.instance_types) > 0 && p.max_nodes >= 1 && p.min_nodes >= 0 && p.min_nodes <= p.max_nodes])
    error_message = "Each partition needs at least one instance type, max_nodes of 1 or more, and 0 <= min_nodes <= max_nodes."
  }

  validation {
    condition     = length([for p in values(var.partitions) : p if p.default]) <= 1
    error_message = "At most one partition may set default = true."
  }
}

variable "wait_for_apply" {
  description = "Wait until the head node's agent reports each partition applied to Slurm (skipped, with a warning, while no agent has reported yet)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags of the launch templates, placement groups and instances, in every region."
  type        = map(string)
  default     = {}
}
