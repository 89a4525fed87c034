variable "cluster_id" {
  description = "The cluster to add the partition to: an `hpc_cluster` id, or the slurm-cluster module's `cluster_name` output."
  type        = string
}

variable "name" {
  description = "Partition name as users see it (`sbatch -p <name>`)."
  type        = string
  default     = "gpu"

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$", var.name))
    error_message = "name must be 1 to 24 lowercase letters, digits and '-', starting with a letter, e.g. \"gpu\" or \"h100\"."
  }
}

variable "instance_types" {
  description = "EFA-capable GPU instance types, most preferred first; each becomes a Slurm node set with `Gres=gpu:<model>:<count>` from EC2. Families: p6-b200, p5en, p5e, p5, p4de, p4d, g6e (8xlarge and up), g5 (8xlarge and up)."
  type        = list(string)
  default     = ["p5.48xlarge"]

  validation {
    condition     = length(var.instance_types) > 0 && length(distinct(var.instance_types)) == length(var.instance_types)
    error_message = "instance_types must list at least one type, each once, e.g. [\"p5.48xlarge\"]."
  }

  validation {
    condition     = alltrue([for t in var.instance_types : can(regex("^(p6-b200|p5en|p5e|p5|p4de|p4d|g6e|g5)\\.", t))])
    error_message = "instance_types must be EFA GPU types of the p6-b200, p5en, p5e, p5, p4de, p4d, g6e or g5 families (e.g. p5.48xlarge, p4d.24xlarge, g6e.48xlarge); use the slurm-cluster module's partitions for CPU types."
  }
}

variable "ami_id" {
  description = "GPU image of the nodes (an hpc-image build with the nvidia-driver, cuda, nccl and efa components)."
  type        = string

  validation {
    condition     = startswith(var.ami_id, "ami-")
    error_message = "ami_id must be an AMI id such as \"ami-0123456789abcdef0\" (build a GPU image from image-builder/templates with `hpc-image build --publish`)."
  }
}

variable "subnet_ids" {
  description = "Subnets in different Availability Zones, in failover order: each becomes an on-demand capacity pool with its own cluster placement group (a placement group lives in one zone), so a zone without capacity hands its nodes to the next."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 1 && length(var.subnet_ids) <= 8 && length(distinct(var.subnet_ids)) == length(var.subnet_ids)
    error_message = "subnet_ids must list 1 to 8 distinct subnets, one per zone; two or more give the partition somewhere to fail over to."
  }

  validation {
    condition     = alltrue([for s in var.subnet_ids : startswith(s, "subnet-")])
    error_message = "subnet_ids must hold subnet ids such as \"subnet-0123456789abcdef0\"."
  }
}

variable "capacity_reservations" {
  description = "Capacity you have reserved, tried before the on-demand pools: Capacity Blocks for ML (`capacity_type = \"capacity_block\"`) or On-Demand Capacity Reservations (`\"on_demand\"`), each with the subnet in the reservation's zone."
  type = list(object({
    reservation_id = string
    subnet_id      = string
    capacity_type  = optional(string, "capacity_block")
  }))
  default = []

  validation {
    condition     = alltrue([for r in var.capacity_reservations : startswith(r.reservation_id, "cr-") && startswith(r.subnet_id, "subnet-")])
    error_message = "Each capacity reservation needs a reservation_id such as \"cr-0123456789abcdef0\" and the subnet_id of a subnet in the reservation's zone."
  }

  validation {
    condition     = alltrue([for r in var.capacity_reservations : contains(["capacity_block", "on_demand"], r.capacity_type)])
    error_message = "capacity_reservations[*].capacity_type must be \"capacity_block\" (Capacity Blocks for ML) or \"on_demand\" (an On-Demand Capacity Reservation)."
  }
}

variable "spot_fallback" {
  description = "After the on-demand pools, try the same zones with Spot capacity. Jobs on Spot nodes can be interrupted: use it for checkpointed or short jobs."
  type        = bool
  default     = false
}

variable "extra_pools" {
  description = "More capacity pools, tried last, e.g. a zone in another region (`region` and that region's `ami_id` needed; see the multi-region module for what that requires)."
  type = list(object({
    subnet_ids              = list(string)
    capacity_type           = optional(string, "on_demand")
    capacity_reservation_id = optional(string)
    region                  = optional(string)
    ami_id                  = optional(string)
  }))
  default = []

  validation {
    condition     = alltrue([for p in var.extra_pools : p.region == null || p.ami_id != null])
    error_message = "An extra pool in another region needs its own ami_id: AMI ids are regional (copy the image with hpc-image publish and use the copy's id)."
  }

  validation {
    condition     = alltrue([for p in var.extra_pools : contains(["on_demand", "spot", "capacity_block"], p.capacity_type)])
    error_message = "extra_pools[*].capacity_type must be \"on_demand\", \"spot\" or \"capacity_block\"."
  }
}

variable "max_nodes" {
  description = "Most nodes of each instance type running at once (a p5.48xlarge has 8 GPUs)."
  type        = number
  default     = 2

  validation {
    condition     = var.max_nodes >= 1 && floor(var.max_nodes) == var.max_nodes
    error_message = "max_nodes must be a whole number of 1 or more."
  }
}

variable "min_nodes" {
  description = "Always-on nodes of the first type. GPU nodes are expensive: the default 0 scales from zero."
  type        = number
  default     = 0

  validation {
    condition     = var.min_nodes >= 0 && var.min_nodes <= var.max_nodes
    error_message = "min_nodes must be between 0 and max_nodes."
  }
}

variable "max_time" {
  description = "Slurm MaxTime of jobs, e.g. `2-00:00:00` or `UNLIMITED`."
  type        = string
  default     = "2-00:00:00"
}

variable "exclusive" {
  description = "Give jobs whole nodes. Off by default: GPUs are scheduled one by one (`--gpus`), with the CPUs and memory of `gpu_defaults`; multi-node EFA jobs should ask `--exclusive`."
  type        = bool
  default     = false
}

variable "gpu_defaults" {
  description = "Set DefCPUPerGPU and DefMemPerGPU to each GPU's share of the smallest node type, so `srun --gpus=1` gets a fair slice of CPUs and memory."
  type        = bool
  default     = true
}

variable "provision_timeout" {
  description = "A node not registered with Slurm this long after launch is replaced from the next pool. GPU nodes load drivers and EFA before slurmd starts: 20m by default."
  type        = string
  default     = "20m"

  validation {
    condition     = can(regex("^([0-9]+[hms])+$", var.provision_timeout))
    error_message = "provision_timeout must be a duration such as \"20m\" or \"1h\"."
  }
}

variable "ice_cooldown" {
  description = "How long a pool that reported InsufficientInstanceCapacity is skipped. GPU capacity rarely returns within minutes: 30m by default."
  type        = string
  default     = "30m"

  validation {
    condition     = can(regex("^([0-9]+[hms])+$", var.ice_cooldown))
    error_message = "ice_cooldown must be a duration such as \"30m\" or \"1h\"."
  }
}

variable "allocation_strategy" {
  description = "How a pool picks among `instance_types`: `prioritized` (in the listed order, default) or `capacity-optimized`."
  type        = string
  default     = "prioritized"

  validation {
    condition     = contains(["prioritized", "lowest-price", "capacity-optimized", "price-capacity-optimized"], var.allocation_strategy)
    error_message = "allocation_strategy must be \"prioritized\", \"lowest-price\", \"capacity-optimized\" or \"price-capacity-optimized\"."
  }
}

variable "root_volume_size" {
  description = "Root volume GiB (encrypted gp3); container images (enroot/pyxis) and CUDA caches need room."
  type        = number
  default     = 200

  validation {
    condition     = var.root_volume_size >= 50
    error_message = "root_volume_size must be at least 50 GiB for a GPU image."
  }
}

variable "allow_accounts" {
  description = "Slurm accounts allowed to use the partition (null: all)."
  type        = list(string)
  default     = null
}

variable "allow_qos" {
  description = "Slurm QOS allowed in the partition (null: all)."
  type        = list(string)
  default     = null
}

variable "priority_tier" {
  description = "Slurm PriorityTier of the partition."
  type        = number
  default     = null
}

variable "slurm_extra" {
  description = "More PartitionName settings, merged over the GPU defaults (keys the provider manages are refused with the attribute to use instead)."
  type        = map(string)
  default     = {}
}

variable "instance_profile_arn" {
  description = "Instance profile of the nodes. Null: the cluster's."
  type        = string
  default     = null
}

variable "user_data_extra" {
  description = "Shell commands appended to the nodes' boot script."
  type        = string
  default     = null
}

variable "wait_for_apply" {
  description = "Wait until the head node's agent reports the partition applied to Slurm (skipped, with a warning, while no agent has reported yet)."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags of the launch templates, placement groups and instances."
  type        = map(string)
  default     = {}
}
