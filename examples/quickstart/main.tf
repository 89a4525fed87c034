# Quickstart: a PERSISTENT_2 Lustre file system whose /datasets directory is linked to S3.
# Runs against real AWS or, with `make demo`, against the local emulator.

terraform {
  required_version = ">= 1.11"
  required_providers {
    hpc = {
      source = "hpcforge/hpc"
    }
  }
}

provider "hpc" {
  region = var.region
  default_tags {
    tags = {
      project    = "hpcforge-quickstart"
      managed-by = "terraform"
    }
  }
}

resource "hpc_lustre_fs" "scratch" {
  storage_capacity            = 1200
  deployment_type             = "PERSISTENT_2"
  per_unit_storage_throughput = 125
  data_compression_type       = "LZ4"
  subnet_ids                  = [var.subnet_id]
  security_group_ids          = var.security_group_ids

  metadata_configuration = {
    mode = "AUTOMATIC"
  }

  data_repository {
    file_system_path     = "/datasets"
    data_repository_path = "s3://${var.bucket}/datasets"
    auto_import_events   = ["NEW", "CHANGED", "DELETED"]
    auto_export_events   = ["NEW", "CHANGED"]
  }

  tags = {
    Name = "quickstart-scratch"
  }

  timeouts {
    create = "45m"
  }
}
