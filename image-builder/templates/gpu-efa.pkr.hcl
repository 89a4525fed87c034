# A GPU node image for p5/p4d/g6e: NVIDIA driver and CUDA, NCCL with aws-ofi-nccl over EFA
# (AWS EFA installer), the FSx Lustre client, DCGM, enroot/pyxis, Slurm and the node agent.
# Vendor downloads are pinned by SHA-256: set the *_sha256 variables to the checksums of the
# exact files you use (e.g. in a gpu.pkrvars.hcl passed with -var-file).
#
#   hpc-image validate templates/gpu-efa.pkr.hcl -var-file gpu.pkrvars.hcl
#   hpc-image build templates/gpu-efa.pkr.hcl -var-file gpu.pkrvars.hcl --only gpu

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "builder_cidr" {
  type        = string
  description = "This machine's public address as a /32: the only place SSH to the builder may come from"
}

variable "efa_installer_url" {
  type    = string
  default = "https://efa-installer.amazonaws.com/aws-efa-installer-1.38.0.tar.gz"
}
variable "efa_installer_sha256" { type = string }

variable "nccl_url" { type = string }
variable "nccl_sha256" { type = string }
variable "aws_ofi_nccl_url" { type = string }
variable "aws_ofi_nccl_sha256" { type = string }
variable "lustre_packages_url" { type = string }
variable "lustre_packages_sha256" { type = string }
variable "dcgm_deb_url" { type = string }
variable "dcgm_deb_sha256" { type = string }
variable "enroot_url" { type = string }
variable "enroot_sha256" { type = string }
variable "enroot_caps_url" { type = string }
variable "enroot_caps_sha256" { type = string }
variable "pyxis_url" { type = string }
variable "pyxis_sha256" { type = string }

source "amazon-ebs" "gpu" {
  region          = var.region
  instance_type   = "g6e.xlarge"
  ssh_username    = "admin"
  ssh_cidrs       = [var.builder_cidr]
  root_volume_gib = 60
  source_ami_filter {
    name   = "debian-12-amd64-*"
    owners = ["136693071363"]
  }
}

build {
  sources = ["source.amazon-ebs.gpu"]

  component "munge" {}
  component "slurm" {
    # slurmdbd and MariaDB: the provider's default accounting is local, on the head node.
    accounting = true
  }
  component "efa" {
    method           = "installer"
    installer_url    = var.efa_installer_url
    installer_sha256 = var.efa_installer_sha256
  }
  component "nvidia-driver" {}
  component "cuda" {}
  component "nccl" {
    nccl_url            = var.nccl_url
    nccl_sha256         = var.nccl_sha256
    aws_ofi_nccl_url    = var.aws_ofi_nccl_url
    aws_ofi_nccl_sha256 = var.aws_ofi_nccl_sha256
  }
  component "lustre-client" {
    packages_url    = var.lustre_packages_url
    packages_sha256 = var.lustre_packages_sha256
  }
  component "dcgm" {
    deb_url    = var.dcgm_deb_url
    deb_sha256 = var.dcgm_deb_sha256
  }
  component "enroot-pyxis" {
    enroot_url         = var.enroot_url
    enroot_sha256      = var.enroot_sha256
    enroot_caps_url    = var.enroot_caps_url
    enroot_caps_sha256 = var.enroot_caps_sha256
    pyxis_url          = var.pyxis_url
    pyxis_sha256       = var.pyxis_sha256
  }
  component "hpc-node" {}
  component "health-checks" {}
}

publish {
  ami_name    = "hpcforge-gpu-efa"
  description = "hpcforge GPU node: NVIDIA, CUDA, NCCL + aws-ofi-nccl, EFA, Lustre, DCGM, enroot/pyxis, Slurm"
  regions     = [var.region, "us-west-2"]
}
