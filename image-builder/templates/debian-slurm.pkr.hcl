# A CPU node image: Debian with Slurm, MUNGE, EFA userspace (distro path), PAM modules for a
# second SSH factor and the hpcforge node agent. Builds offline-capable with the local builder,
# boots it under qemu to verify, and publishes to the regions below.
#
#   hpc-image validate templates/debian-slurm.pkr.hcl
#   sudo hpc-image build templates/debian-slurm.pkr.hcl --publish

variable "suite" {
  type        = string
  default     = "bookworm"
  description = "Debian suite: bookworm (Slurm 22.05), trixie (Slurm 24.11) or forky (Slurm 26.05)"
}

variable "check_valid_until" {
  type        = bool
  default     = true
  description = "false for a snapshot mirror, whose Release files of a testing suite (forky) are past their Valid-Until date"
}

variable "duo" {
  type        = bool
  default     = true
  description = "Duo's PAM module (libpam-duo) for the mfa block; Debian 14 (forky) does not ship it: false there"
}

variable "verify" {
  type    = bool
  default = true
}

variable "regions" {
  type    = list(string)
  default = ["us-east-1", "us-west-2"]
}

variable "name_suffix" {
  type        = string
  default     = ""
  description = "Appended to the AMI name: a rebuild of the same suite (a patched image) gets a name of its own"
}

variable "motd" {
  type    = string
  default = "hpcforge node image"
}

source "local" "debian" {
  suite             = var.suite
  check_valid_until = var.check_valid_until
  disk_size         = "4G"
  verify            = var.verify
  verify_timeout    = "20m"
}

build {
  sources = ["source.local.debian"]

  component "munge" {}
  component "slurm" {
    # slurmdbd and MariaDB: the provider's default accounting is local, on the head node.
    accounting = true
  }
  component "efa" {
    method = "distro"
  }
  # Second SSH factors a cluster's `mfa` block can name (TOTP, Duo); enabled only by it.
  component "mfa" {
    duo = var.duo
  }
  component "hpc-node" {}
  component "health-checks" {}

  provisioner "shell" {
    inline = ["printf '%s\\n' '${var.motd}' > /etc/motd"]
  }
}

publish {
  ami_name    = "hpcforge-${var.suite}-slurm${var.name_suffix}"
  description = "hpcforge: Debian ${var.suite} with Slurm, MUNGE, EFA and hpc-node"
  regions     = var.regions
  tags = {
    project = "hpcforge"
  }
}
