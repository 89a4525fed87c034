# An FSx for Lustre file system linked to S3: SCRATCH_2 for fast temporary space, or
# PERSISTENT_2 for replicated, backed-up storage. A release policy keeps it from filling up.

locals {
  persistent = var.deployment_type == "PERSISTENT_2"
  linked     = length(var.data_repositories) > 0
}

resource "hpc_lustre_fs" "this" {
  storage_capacity            = var.storage_capacity
  deployment_type             = var.deployment_type
  per_unit_storage_throughput = local.persistent ? var.per_unit_storage_throughput : null
  file_system_type_version    = var.lustre_version
  data_compression_type       = var.data_compression ? "LZ4" : "NONE"
  subnet_ids                  = [var.subnet_id]
  security_group_ids          = var.security_group_ids

  # Encryption at rest is always on; a customer key is possible on persistent file systems.
  kms_key_id = local.persistent ? var.kms_key_id : null

  metadata_configuration = local.persistent ? { mode = "AUTOMATIC" } : null
  efa_enabled            = local.persistent ? var.efa_enabled : null
  # FSx takes no backups of a file system linked to S3: the data lives in the bucket.
  automatic_backup_retention_days = local.persistent ? (local.linked ? 0 : var.backup_retention_days) : null
  weekly_maintenance_start_time   = var.weekly_maintenance_start_time

  root_squash_configuration = var.root_squash == null ? null : {
    root_squash = var.root_squash
  }

  dynamic "data_repository" {
    for_each = var.data_repositories
    content {
      file_system_path     = data_repository.value.file_system_path
      data_repository_path = data_repository.value.data_repository_path
      # An empty event list is sent as null: the provider reads "no events" back as null.
      auto_import_events               = length(data_repository.value.auto_import_events) > 0 ? data_repository.value.auto_import_events : null
      auto_export_events               = length(data_repository.value.auto_export_events) > 0 ? data_repository.value.auto_export_events : null
      batch_import_meta_data_on_create = data_repository.value.batch_import_meta_data_on_create
    }
  }

  dynamic "release_policy" {
    for_each = local.linked && var.release_policy != null ? [var.release_policy] : []
    content {
      unaccessed_days = release_policy.value.unaccessed_days
      usage_percent   = release_policy.value.usage_percent
    }
  }

  tags = merge(var.tags, { Name = var.name })

  timeouts {
    create = var.create_timeout
  }
}
