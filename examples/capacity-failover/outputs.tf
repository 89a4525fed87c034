output "cluster_name" {
  description = "The cluster's name."
  value       = module.cluster.cluster_name
}

output "head_node_private_ip" {
  description = "Head node address, which nodes in both regions must reach."
  value       = module.cluster.head_node_private_ip
}

output "failover_order" {
  description = "Per partition, its capacity pools in the order they are tried: region, subnets, capacity type."
  value = { for name, p in module.failover.partitions : name => [
    for pool in p.pools : {
      region        = coalesce(pool.region, var.home_region)
      subnet_ids    = pool.subnet_ids
      capacity_type = pool.capacity_type
    }
  ] }
}

output "partitions" {
  description = "Per partition: Slurm node names and GPUs at full scale."
  value = { for name, p in module.failover.partitions : name => {
    node_names = p.node_names
    max_gpus   = p.max_gpus
  } }
}

output "vpc_cidrs" {
  description = "VPC ranges of the two regions, joined by the peering connection."
  value = {
    (var.home_region)   = "10.0.0.0/16"
    (var.second_region) = hpc_network.second.cidr_block
  }
}
