# A Slurm cluster: head node with slurmctld and local accounting, one login node, a user, and
# a Lustre file system mounted on every node.
resource "hpc_cluster" "example" {
  name      = "research"
  subnet_id = "subnet-0123456789abcdef0"

  head_node {
    ami_id               = "ami-0123456789abcdef0" # an hpc-image build
    instance_type        = "c7i.2xlarge"
    allowed_ssh_cidrs    = ["192.0.2.0/24"] # none by default: use SSM Session Manager
    instance_profile_arn = "arn:aws:iam::111111111111:instance-profile/hpcforge-nodes"
  }

  slurm {
    version            = "24.11"
    scaledown_idletime = "10m"
  }

  accounting {
    mode = "local"
  }

  login_nodes {
    count = 1
  }

  user {
    name            = "alice"
    uid             = 2001
    ssh_public_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly alice@example.org"]
  }

  storage {
    lustre_id   = "fs-0123456789abcdef0"
    dns_name    = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    mount_name  = "abcdefgh"
    mount_point = "/fsx"
  }
}
