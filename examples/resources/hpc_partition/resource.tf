# An EFA GPU partition scaling from zero to four p5.48xlarge nodes: on-demand capacity in one
# zone first, then Spot in a second zone when the first has none.
resource "hpc_partition" "example" {
  cluster_id     = "research" # hpc_cluster.<name>.id
  name           = "gpu"
  instance_types = ["p5.48xlarge"]
  max_nodes      = 4
  efa_enabled    = true # EFA on every network card, a placement group per pool
  ami_id         = "ami-0123456789abcdef0"
  max_time       = "2-00:00:00"

  capacity_pool {
    subnet_ids = ["subnet-0123456789abcdef0"]
  }

  capacity_pool {
    subnet_ids    = ["subnet-0fedcba9876543210"]
    capacity_type = "spot"
  }
}
