terraform {
  required_providers {
    hpc = {
      source  = "hpcforge/hpc"
      version = ">= 0.1.0"
    }
  }
}

# Credentials come from the AWS SDK's default chain (environment, shared files, SSO, instance
# role); AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> work as in every AWS SDK.
provider "hpc" {
  region = "us-east-1"

  # Optional: act in another account.
  assume_role {
    role_arn     = "arn:aws:iam::111111111111:role/hpcforge"
    session_name = "terraform"
  }

  # Checked at plan time, before anything is launched.
  guardrails {
    allowed_instance_types      = ["p5.*", "c7i.*", "r7i.*"]
    max_nodes_per_partition     = 64
    max_gpus_per_cluster        = 64
    max_hourly_cost_per_cluster = 2000
  }

  default_tags {
    tags = {
      project = "genomics"
    }
  }
}
