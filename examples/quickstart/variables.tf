variable "region" {
  description = "AWS region to create the file system in."
  type        = string
  default     = "us-east-1"
}

variable "subnet_id" {
  description = "Subnet for the file system (Lustre lives in one Availability Zone)."
  type        = string
}

variable "security_group_ids" {
  description = "Security groups for the file system; they must allow Lustre traffic (TCP 988, 1018-1023) from clients."
  type        = list(string)
  default     = null
}

variable "bucket" {
  description = "S3 bucket whose datasets/ prefix appears at /datasets in the file system."
  type        = string
  default     = "hpcforge-quickstart-data"
}
