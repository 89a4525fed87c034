# Quickstart: a small Slurm cluster with a CPU partition, an EFA GPU partition and a Lustre
# file system at /fsx linked to S3. Runs against real AWS or, with `make demo`, against the
# local emulator (no AWS account needed).

terraform {
  required_version = ">= 1.11"
  required_providers {
    hpc = {
      source  = "hpcforge/hpc"
      version = "~> 0.1"
    }
  }
}

provider "hpc" {
  region = var.region

  # Cost guardrails, checked at plan time.
  guardrails {
    allowed_instance_types      = ["c7i.*", "g6e.*"]
    max_nodes_per_partition     = 16
    max_gpus_per_cluster        = 16
    max_hourly_cost_per_cluster = 150
  }

  default_tags {
    tags = {
      project    = "hpcforge-quickstart"
      managed-by = "terraform"
    }
  }
}

resource "hpc_network" "this" {
  name               = var.name
  availability_zones = var.availability_zones
}

resource "hpc_lustre_fs" "fsx" {
  storage_capacity            = 1200
  deployment_type             = "PERSISTENT_2"
  per_unit_storage_throughput = 125
  data_compression_type       = "LZ4"
  subnet_ids                  = [hpc_network.this.private_subnet_ids[var.availability_zones[0]]]
  security_group_ids          = [hpc_network.this.security_group_id]

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
    Name = "${var.name}-fsx"
  }
}

resource "hpc_cluster" "this" {
  name      = var.name
  subnet_id = hpc_network.this.private_subnet_ids[var.availability_zones[0]]

  wait_for_ready = var.wait_for_ready

  head_node {
    ami_id               = var.ami_id
    instance_type        = "c7i.xlarge"
    key_name             = var.key_name
    allowed_ssh_cidrs    = var.allowed_ssh_cidrs
    instance_profile_arn = var.instance_profile_arn
  }

  slurm {
    version = var.slurm_version
  }

  dynamic "home" {
    for_each = var.home_efs_id == null ? [] : [var.home_efs_id]
    content {
      storage = "efs"
      efs_id  = home.value
    }
  }

  dynamic "user" {
    for_each = var.users
    content {
      name            = user.value.name
      uid             = user.value.uid
      ssh_public_keys = user.value.ssh_public_keys
    }
  }

  login_nodes {
    count         = 1
    instance_type = "c7i.large"
  }

  storage {
    mount_point = "/fsx"
    lustre_id   = hpc_lustre_fs.fsx.id
    dns_name    = hpc_lustre_fs.fsx.dns_name
    mount_name  = hpc_lustre_fs.fsx.mount_name
  }
}

resource "hpc_partition" "cpu" {
  cluster_id     = hpc_cluster.this.id
  name           = "cpu"
  default        = true
  instance_types = [var.cpu_instance_type]
  max_nodes      = 8
  ami_id         = var.ami_id

  instance_profile_arn = var.instance_profile_arn

  capacity_pool {
    subnet_ids = values(hpc_network.this.private_subnet_ids)
  }
}

# GPUs fail over zone by zone: the first zone's pool first, then the next.
resource "hpc_partition" "gpu" {
  cluster_id      = hpc_cluster.this.id
  name            = "gpu"
  instance_types  = ["g6e.12xlarge"]
  max_nodes       = 2
  ami_id          = var.ami_id
  efa_enabled     = true
  placement_group = true
  max_time        = "1-00:00:00"

  instance_profile_arn = var.instance_profile_arn

  dynamic "capacity_pool" {
    for_each = var.availability_zones
    content {
      subnet_ids = [hpc_network.this.private_subnet_ids[capacity_pool.value]]
    }
  }
}
