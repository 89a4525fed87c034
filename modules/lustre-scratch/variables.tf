variable "name" {
  description = "Name of the file system, used for its Name tag (lowercase letters, digits and `-`)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,62}$", var.name))
    error_message = "name must start with a lowercase letter and use only lowercase letters, digits and '-' (at most 63 characters), e.g. \"research-scratch\"."
  }
}

variable "subnet_id" {
  description = "Subnet of the file system. Lustre lives in one Availability Zone: pick the zone of the nodes that use it most."
  type        = string

  validation {
    condition     = startswith(var.subnet_id, "subnet-")
    error_message = "subnet_id must be a subnet id such as \"subnet-0123456789abcdef0\" (for a module-made network: hpc_network.<name>.private_subnet_ids[\"<zone>\"])."
  }
}

variable "security_group_ids" {
  description = "Security groups of the file system's network interfaces. They must admit Lustre (TCP 988 and 1018-1023) from the clients; the cluster security group of an `hpc_network` does. Null: the VPC's default group."
  type        = list(string)
  default     = null

  validation {
    condition     = var.security_group_ids == null || alltrue([for g in coalesce(var.security_group_ids, []) : startswith(g, "sg-")])
    error_message = "security_group_ids must hold security group ids such as \"sg-0123456789abcdef0\"."
  }
}

variable "deployment_type" {
  description = "`SCRATCH_2` (no replication, cheapest, for data that also lives in S3) or `PERSISTENT_2` (replicated in its zone, backups, metadata and throughput tiers)."
  type        = string
  default     = "SCRATCH_2"

  validation {
    condition     = contains(["SCRATCH_2", "PERSISTENT_2"], var.deployment_type)
    error_message = "deployment_type must be \"SCRATCH_2\" or \"PERSISTENT_2\" (SCRATCH_1 cannot link S3 data repositories and PERSISTENT_1 is superseded; use hpc_lustre_fs directly for those)."
  }
}

variable "storage_capacity" {
  description = "Capacity in GiB: 1200, 2400, or a multiple of 2400. Grows in place; shrinking replaces the file system."
  type        = number
  default     = 1200

  validation {
    condition     = var.storage_capacity == 1200 || (var.storage_capacity >= 2400 && var.storage_capacity % 2400 == 0)
    error_message = "storage_capacity must be 1200, 2400 or a multiple of 2400 GiB (e.g. 4800, 9600)."
  }
}

variable "per_unit_storage_throughput" {
  description = "MB/s per TiB of storage for PERSISTENT_2: 125, 250, 500 or 1000. Ignored for SCRATCH_2 (200 MB/s/TiB)."
  type        = number
  default     = 125

  validation {
    condition     = contains([125, 250, 500, 1000], var.per_unit_storage_throughput)
    error_message = "per_unit_storage_throughput must be 125, 250, 500 or 1000 (MB/s per TiB, PERSISTENT_2 tiers)."
  }
}

variable "lustre_version" {
  description = "Lustre version. Data repository associations need 2.12 or later."
  type        = string
  default     = "2.15"

  validation {
    condition     = contains(["2.12", "2.15"], var.lustre_version)
    error_message = "lustre_version must be \"2.12\" or \"2.15\": S3 data repository associations need Lustre 2.12 or later."
  }
}

variable "data_repositories" {
  description = "S3 prefixes linked to directories of the file system (at most 8). Files appear lazily on first access; with auto export, what jobs write goes back to S3."
  type = list(object({
    file_system_path                 = string
    data_repository_path             = string
    auto_import_events               = optional(list(string), ["NEW", "CHANGED", "DELETED"])
    auto_export_events               = optional(list(string), ["NEW", "CHANGED", "DELETED"])
    batch_import_meta_data_on_create = optional(bool, true)
  }))
  default = []

  validation {
    condition     = length(var.data_repositories) <= 8
    error_message = "At most 8 data repositories per file system: merge prefixes or use a second file system."
  }

  validation {
    condition     = alltrue([for r in var.data_repositories : can(regex("^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", r.data_repository_path))])
    error_message = "Each data_repository_path must be an S3 URL such as \"s3://my-bucket/datasets/\"."
  }

  validation {
    condition     = alltrue([for r in var.data_repositories : startswith(r.file_system_path, "/")])
    error_message = "Each file_system_path must be an absolute directory of the file system such as \"/datasets\"."
  }

  validation {
    condition     = length(distinct([for r in var.data_repositories : r.file_system_path])) == length(var.data_repositories)
    error_message = "Each data repository needs its own file_system_path."
  }

  validation {
    condition = alltrue(flatten([for r in var.data_repositories : [
      for e in concat(r.auto_import_events, r.auto_export_events) : contains(["NEW", "CHANGED", "DELETED"], e)
    ]]))
    error_message = "auto_import_events and auto_export_events may only list NEW, CHANGED and DELETED."
  }
}

variable "release_policy" {
  description = "Free space by releasing files (their data stays in S3) that were not read for `unaccessed_days`, once the file system is more than `usage_percent` full. Applies only with a data repository; run by `hpc-node evict` on the head node. Null: never release."
  type = object({
    unaccessed_days = optional(number, 30)
    usage_percent   = optional(number, 80)
  })
  default = {}

  validation {
    condition     = var.release_policy == null || try(var.release_policy.unaccessed_days >= 1 && var.release_policy.unaccessed_days <= 3650, false)
    error_message = "release_policy.unaccessed_days must be between 1 and 3650 days."
  }

  validation {
    condition     = var.release_policy == null || try(var.release_policy.usage_percent >= 0 && var.release_policy.usage_percent <= 99, false)
    error_message = "release_policy.usage_percent must be between 0 and 99 (the fill level above which releasing starts)."
  }
}

variable "data_compression" {
  description = "LZ4 compression: less storage and S3 transfer for most scientific data, at little CPU cost on the servers."
  type        = bool
  default     = true
}

variable "kms_key_id" {
  description = "KMS key for encryption at rest (PERSISTENT_2). Null: the AWS managed FSx key. Data is always encrypted at rest; SCRATCH_2 always uses the AWS managed key."
  type        = string
  default     = null
}

variable "efa_enabled" {
  description = "Serve clients over EFA (PERSISTENT_2 only; needs EFA-enabled clients in the same zone)."
  type        = bool
  default     = false

  validation {
    condition     = !var.efa_enabled || var.deployment_type == "PERSISTENT_2"
    error_message = "efa_enabled needs deployment_type = \"PERSISTENT_2\"."
  }
}

variable "backup_retention_days" {
  description = "Days of daily automatic backups (PERSISTENT_2 without data repositories: FSx does not back up a file system linked to S3, whose data lives in the bucket), 0 to 90; 0 turns them off."
  type        = number
  default     = 7

  validation {
    condition     = var.backup_retention_days >= 0 && var.backup_retention_days <= 90
    error_message = "backup_retention_days must be between 0 and 90 (0 turns automatic backups off)."
  }
}

variable "weekly_maintenance_start_time" {
  description = "Weekly maintenance window start, `d:HH:MM` in UTC (d = 1 Monday .. 7 Sunday). Null: chosen by FSx."
  type        = string
  default     = null

  validation {
    condition     = var.weekly_maintenance_start_time == null || can(regex("^[1-7]:([01][0-9]|2[0-3]):[0-5][0-9]$", coalesce(var.weekly_maintenance_start_time, "x")))
    error_message = "weekly_maintenance_start_time must look like \"7:03:00\" (day 1-7, then HH:MM in UTC)."
  }
}

variable "root_squash" {
  description = "`UID:GID` that root on clients is mapped to (e.g. `65534:65534`), so a compromised node cannot act as root on shared data. Null: no root squash."
  type        = string
  default     = null

  validation {
    condition     = var.root_squash == null || can(regex("^[0-9]+:[0-9]+$", coalesce(var.root_squash, "x")))
    error_message = "root_squash must be \"UID:GID\", e.g. \"65534:65534\"."
  }
}

variable "mount_point" {
  description = "Where cluster nodes mount the file system (used in the `cluster_storage` output)."
  type        = string
  default     = "/scratch"

  validation {
    condition     = can(regex("^/[A-Za-z0-9._/-]+$", var.mount_point)) && !contains(["/usr", "/etc", "/var", "/proc", "/sys", "/dev", "/boot", "/home"], var.mount_point)
    error_message = "mount_point must be an absolute path of its own such as \"/scratch\" or \"/fsx\" (not /, /home or a system directory)."
  }
}

variable "create_timeout" {
  description = "How long to wait for FSx to create the file system (large persistent ones can take 30 minutes or more)."
  type        = string
  default     = "60m"
}

variable "tags" {
  description = "Tags of the file system (merged over the provider's `default_tags`)."
  type        = map(string)
  default     = {}
}
