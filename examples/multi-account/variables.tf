variable "region" {
  description = "AWS region of both clusters."
  type        = string
  default     = "us-east-1"
}

variable "research_role_arn" {
  description = "Role Terraform assumes in the research account, e.g. arn:aws:iam::111111111111:role/hpcforge."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", var.research_role_arn))
    error_message = "research_role_arn must be an IAM role ARN such as \"arn:aws:iam::111111111111:role/hpcforge\"."
  }
}

variable "teaching_role_arn" {
  description = "Role Terraform assumes in the teaching account, e.g. arn:aws:iam::222222222222:role/hpcforge."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", var.teaching_role_arn))
    error_message = "teaching_role_arn must be an IAM role ARN such as \"arn:aws:iam::222222222222:role/hpcforge\"."
  }
}

variable "teaching_external_id" {
  description = "External ID the teaching role's trust policy requires (null when it requires none)."
  type        = string
  default     = null
}

variable "research_ami_id" {
  description = "hpc-image AMI available in the research account (shared with it by hpc-image publish's share_with_accounts)."
  type        = string
}

variable "teaching_ami_id" {
  description = "hpc-image AMI available in the teaching account."
  type        = string
}

variable "wait_for_ready" {
  description = "Wait at apply until the head node reports slurmctld running (false where no instance boots, e.g. the emulator's API-only mode)."
  type        = bool
  default     = true
}
