terraform {
  required_version = ">= 1.11"

  required_providers {
    hpc = {
      source  = "hpcforge/hpc"
      version = ">= 0.1.0"
    }
  }
}
