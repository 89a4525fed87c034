# A GPU research cluster: a network over three zones, a persistent Lustre file system at /fsx
# linked to an S3 bucket of datasets, a scratch file system at /scratch, a login node, CPU and
# high-memory partitions, and an EFA H100 partition that fails over zone by zone. Guardrails
# cap what it may cost at full scale.

provider "hpc" {
  region = var.region

  guardrails {
    allowed_instance_types      = ["c7i.*", "r7i.*", "p5.*"]
    max_nodes_per_partition     = 64
    max_gpus_per_cluster        = 64
    max_hourly_cost_per_cluster = 800
  }

  default_tags {
    tags = {
      project    = "gpu-research"
      managed-by = "terraform"
    }
  }
}

module "cluster" {
  source = "../../modules/slurm-cluster"

  wait_for_ready = var.wait_for_ready

  name              = var.name
  ami_id            = var.ami_id
  allowed_ssh_cidrs = var.allowed_ssh_cidrs
  users             = var.users

  network = {
    availability_zones = var.availability_zones
  }

  slurm = {
    version = "24.11"
    # GPU nodes: health checks only on idle nodes, cycling through them.
    extra = module.gpu.recommended_cluster_slurm_extra
  }

  lustre = {
    deployment_type  = "PERSISTENT_2"
    storage_capacity = 1200
    mount_point      = "/fsx"
    data_repositories = [{
      file_system_path     = "/datasets"
      data_repository_path = "s3://${var.datasets_bucket}/datasets/"
      auto_export_events   = []
    }]
    release_policy = {
      unaccessed_days = 14
      usage_percent   = 85
    }
  }

  extra_storage = [module.scratch.cluster_storage]

  partitions = {
    cpu = {
      instance_types = ["c7i.8xlarge", "c7i.4xlarge"]
      max_nodes      = 16
      default        = true
      max_time       = "1-00:00:00"
    }
    himem = {
      instance_types = ["r7i.8xlarge"]
      max_nodes      = 4
      max_time       = "2-00:00:00"
      capacity_type  = "spot"
    }
  }
}

# Fast temporary space for job output, exported to S3 and released after a week unread.
module "scratch" {
  source = "../../modules/lustre-scratch"

  name               = "${var.name}-scratch"
  subnet_id          = module.cluster.private_subnet_ids[0]
  security_group_ids = [module.cluster.network_security_group_id]
  deployment_type    = "SCRATCH_2"
  storage_capacity   = 2400
  mount_point        = "/scratch"

  data_repositories = [{
    file_system_path     = "/results"
    data_repository_path = "s3://${var.datasets_bucket}/results/"
  }]
  release_policy = {
    unaccessed_days = 7
  }
}

module "gpu" {
  source = "../../modules/gpu-partition"

  cluster_id     = module.cluster.cluster_name
  name           = "gpu"
  instance_types = ["p5.48xlarge"]
  ami_id         = coalesce(var.gpu_ami_id, var.ami_id)
  subnet_ids     = module.cluster.private_subnet_ids
  max_nodes      = 4
  max_time       = "2-00:00:00"
}
