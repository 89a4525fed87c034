# Capacity failover: partitions whose nodes come from three zones of the home region and, when
# none of them has capacity, from two zones of a second region. The head node stays home.
#
# Nodes in the second region reach the head node and /home through a VPC peering connection
# (hpc_network_peering: routes both ways, each side's cluster group admitting the other's range;
# the ranges below do not overlap). See modules/multi-region/README.md for this design against
# one cluster per region.

provider "hpc" {
  region = var.home_region

  default_tags {
    tags = {
      project    = "capacity-failover"
      managed-by = "terraform"
    }
  }
}

provider "hpc" {
  alias  = "second"
  region = var.second_region

  default_tags {
    tags = {
      project    = "capacity-failover"
      managed-by = "terraform"
    }
  }
}

module "cluster" {
  source = "../../modules/slurm-cluster"

  wait_for_ready = var.wait_for_ready

  name   = var.name
  ami_id = var.ami_id

  network = {
    cidr_block         = "10.0.0.0/16"
    availability_zones = var.home_zones
  }

  # Every partition comes from the multi-region module below.
  partitions = {}
}

# The second region's network: private subnets only need to reach the home VPC and S3.
resource "hpc_network" "second" {
  provider = hpc.second

  name               = "${var.name}-failover"
  cidr_block         = "10.1.0.0/16"
  availability_zones = var.second_zones
  nat_gateway        = false
}

# The path between the two VPCs: nodes in the second region register with slurmctld and mount
# /home (by a mount target's address), and slurmctld reaches their slurmd.
resource "hpc_network_peering" "second" {
  vpc_id                  = module.cluster.vpc_id
  peer_vpc_id             = hpc_network.second.vpc_id
  peer_region             = var.second_region
  security_group_ids      = [module.cluster.network_security_group_id]
  peer_security_group_ids = [hpc_network.second.security_group_id]
}

module "failover" {
  source = "../../modules/multi-region"

  cluster_id = module.cluster.cluster_name
  ami_id     = var.ami_id

  regions = [
    { subnet_ids = module.cluster.private_subnet_ids },
    {
      region     = var.second_region
      subnet_ids = [for zone in sort(keys(hpc_network.second.private_subnet_ids)) : hpc_network.second.private_subnet_ids[zone]]
      ami_id     = var.second_region_ami_id
      # Security groups are regional: the second network's group, open to its members and,
      # through the peering, to the home VPC's range.
      security_group_ids    = [hpc_network.second.security_group_id]
      peering_connection_id = hpc_network_peering.second.id
    },
  ]

  partitions = {
    cpu = {
      instance_types = ["c7i.8xlarge", "c7i.4xlarge"]
      max_nodes      = 32
      default        = true
      spot           = true # after every on-demand pool, the same pools as Spot
      max_time       = "1-00:00:00"
    }
    gpu = {
      instance_types    = ["p5.48xlarge"]
      max_nodes         = 2
      efa_enabled       = true
      max_time          = "2-00:00:00"
      provision_timeout = "20m"
      ice_cooldown      = "30m"
    }
  }
}
