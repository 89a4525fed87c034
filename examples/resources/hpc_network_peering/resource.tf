# The path from a cluster's VPC (the provider's region) to a second region's VPC, where a
# partition's capacity pool launches when the home region has no capacity: the connection,
# routes both ways, and each side's cluster group admitting the other side's range.
resource "hpc_network" "home" {
  name       = "research"
  cidr_block = "10.0.0.0/16"
}

provider "hpc" {
  alias  = "west"
  region = "us-west-2"
}

resource "hpc_network" "west" {
  provider    = hpc.west
  name        = "research-west"
  cidr_block  = "10.1.0.0/16" # must not overlap the home VPC's range
  nat_gateway = false
}

resource "hpc_network_peering" "west" {
  vpc_id                  = hpc_network.home.vpc_id
  peer_vpc_id             = hpc_network.west.vpc_id
  peer_region             = "us-west-2"
  security_group_ids      = [hpc_network.home.security_group_id]
  peer_security_group_ids = [hpc_network.west.security_group_id]
}

# The partition's pool in us-west-2 names the path:
#   capacity_pool {
#     region                = "us-west-2"
#     subnet_ids            = values(hpc_network.west.private_subnet_ids)
#     ami_id                = "ami-0fedcba9876543210" # the image copied there
#     security_group_ids    = [hpc_network.west.security_group_id]
#     peering_connection_id = hpc_network_peering.west.id
#   }
