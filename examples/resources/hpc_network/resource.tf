# A VPC for Slurm clusters: a public and a private subnet in each of three zones, a NAT gateway
# and an S3 gateway endpoint.
resource "hpc_network" "example" {
  name               = "research"
  cidr_block         = "10.0.0.0/16"
  availability_zones = ["us-east-1a", "us-east-1b", "us-east-1c"]

  tags = {
    team = "research-computing"
  }
}
