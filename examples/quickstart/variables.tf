variable "region" {
  description = "AWS region of the cluster."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Cluster name (also names the network and file system)."
  type        = string
  default     = "quickstart"
}

variable "availability_zones" {
  description = "Zones of the network; the GPU partition tries them in this order."
  type        = list(string)
  default     = ["us-east-1a", "us-east-1b"]
}

variable "ami_id" {
  description = "An hpc-image AMI (image-builder/templates/debian-slurm.pkr.hcl) for the head, login and compute nodes."
  type        = string
}

variable "bucket" {
  description = "S3 bucket whose datasets/ prefix appears at /fsx/datasets."
  type        = string
  default     = "hpcforge-quickstart-data"
}

variable "wait_for_ready" {
  description = "Wait at apply until the head node reports slurmctld running (false where no instance boots, e.g. the emulator's API-only mode)."
  type        = bool
  default     = true
}
