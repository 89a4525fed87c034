# Two accounts from one configuration: a research cluster and a teaching cluster, each in its
# own AWS account, reached by assuming a role there. Each provider alias acts only in its
# account; the modules get theirs through `providers`.

provider "hpc" {
  alias  = "research"
  region = var.region

  assume_role {
    role_arn     = var.research_role_arn
    session_name = "terraform-research"
  }

  guardrails {
    max_gpus_per_cluster        = 32
    max_hourly_cost_per_cluster = 500
  }

  default_tags {
    tags = { account = "research", managed-by = "terraform" }
  }
}

provider "hpc" {
  alias  = "teaching"
  region = var.region

  assume_role {
    role_arn     = var.teaching_role_arn
    session_name = "terraform-teaching"
    external_id  = var.teaching_external_id
  }

  # Students get small CPU nodes only.
  guardrails {
    allowed_instance_types      = ["c7i.*", "c7a.*"]
    max_hourly_cost_per_cluster = 40
  }

  default_tags {
    tags = { account = "teaching", managed-by = "terraform" }
  }
}

module "research" {
  source    = "../../modules/slurm-cluster"
  providers = { hpc = hpc.research }

  name           = "research"
  wait_for_ready = var.wait_for_ready
  ami_id         = var.research_ami_id

  lustre = {
    deployment_type = "SCRATCH_2"
    mount_point     = "/scratch"
  }

  partitions = {
    cpu = {
      instance_types = ["c7i.8xlarge"]
      max_nodes      = 16
      default        = true
    }
    gpu = {
      instance_types = ["p5.48xlarge"]
      max_nodes      = 2
      efa_enabled    = true
      max_time       = "2-00:00:00"
    }
  }
}

module "teaching" {
  source    = "../../modules/slurm-cluster"
  providers = { hpc = hpc.teaching }

  name           = "teaching"
  wait_for_ready = var.wait_for_ready
  ami_id         = var.teaching_ami_id

  login_nodes = { count = 2 }

  partitions = {
    class = {
      instance_types = ["c7i.2xlarge"]
      max_nodes      = 8
      default        = true
      max_time       = "04:00:00"
      capacity_type  = "spot"
    }
  }
}
