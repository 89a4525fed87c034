variable "region" {
  description = "AWS region of the cluster."
  type        = string
  default     = "us-east-1"
}

variable "availability_zones" {
  description = "Zones of the network, in failover order for every partition."
  type        = list(string)
  default     = ["us-east-1a", "us-east-1b", "us-east-1c"]
}

variable "name" {
  description = "Cluster name."
  type        = string
  default     = "gpu-research"
}

variable "ami_id" {
  description = "hpc-image AMI of the head, login and CPU nodes (image-builder/templates/debian-slurm)."
  type        = string
}

variable "gpu_ami_id" {
  description = "hpc-image GPU AMI (NVIDIA driver, CUDA, NCCL, EFA). Null: `ami_id`."
  type        = string
  default     = null
}

variable "datasets_bucket" {
  description = "S3 bucket whose datasets/ prefix appears at /fsx/datasets and which receives /scratch/results."
  type        = string
  default     = "hpcforge-research-data"
}

variable "allowed_ssh_cidrs" {
  description = "Networks that may SSH to the login node. Default: none (use SSM Session Manager)."
  type        = list(string)
  default     = []
}

variable "users" {
  description = "Cluster users."
  type = list(object({
    name            = string
    uid             = number
    ssh_public_keys = optional(list(string), [])
    sudo            = optional(bool, false)
  }))
  default = [
    { name = "alice", uid = 2001 },
    { name = "bob", uid = 2002 },
  ]
}

variable "wait_for_ready" {
  description = "Wait at apply until the head node reports slurmctld running (false where no instance boots, e.g. the emulator's API-only mode)."
  type        = bool
  default     = true
}
