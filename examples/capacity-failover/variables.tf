variable "name" {
  description = "Cluster name."
  type        = string
  default     = "failover"
}

variable "home_region" {
  description = "Region of the head node and the first capacity pools."
  type        = string
  default     = "us-east-1"
}

variable "home_zones" {
  description = "Zones of the home region, in failover order."
  type        = list(string)
  default     = ["us-east-1a", "us-east-1b", "us-east-1c"]
}

variable "second_region" {
  description = "Region tried when no zone of the home region has capacity."
  type        = string
  default     = "us-west-2"
}

variable "second_zones" {
  description = "Zones of the second region, in failover order."
  type        = list(string)
  default     = ["us-west-2a", "us-west-2b"]
}

variable "ami_id" {
  description = "hpc-image AMI in the home region."
  type        = string
}

variable "second_region_ami_id" {
  description = "The same image copied to the second region (hpc-image publish with both regions writes both ids to its manifest)."
  type        = string
}

variable "wait_for_ready" {
  description = "Wait at apply until the head node reports slurmctld running (false where no instance boots, e.g. the emulator's API-only mode)."
  type        = bool
  default     = true
}
