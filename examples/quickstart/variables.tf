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

variable "slurm_version" {
  description = "The Slurm release series on the AMI: \"24.11\", \"26.05\" for Debian 14 images, or \"22.05\" for the default (Debian 12) template's images."
  type        = string
  default     = "24.11"
}

variable "cpu_instance_type" {
  description = "The CPU partition's instance type (the demo's booted nodes use c7i.large: the host's cores are what a node gets)."
  type        = string
  default     = "c7i.8xlarge"
}

variable "instance_profile_arn" {
  description = "The nodes' instance profile; its role needs the cluster's instance_profile_policy output. Null: the nodes get no AWS credentials and the head cannot start."
  type        = string
  default     = null
}

variable "key_name" {
  description = "EC2 key pair for SSH to the head and login nodes as the image's default user."
  type        = string
  default     = null
}

variable "allowed_ssh_cidrs" {
  description = "Networks allowed to SSH to the head and login nodes (none by default: use SSM Session Manager)."
  type        = list(string)
  default     = []
}

variable "home_efs_id" {
  description = "Your EFS file system for /home (null: the cluster makes an encrypted one, deleted with it)."
  type        = string
  default     = null
}

variable "users" {
  description = "The cluster's users: the same uid on every node, their SSH keys on the login nodes."
  type = list(object({
    name            = string
    uid             = number
    ssh_public_keys = list(string)
  }))
  default = []
}
