output "partitions" {
  description = "Per partition: id, Slurm node names, GPUs and vCPUs at full scale, estimated on-demand USD/hour at full scale, and the pools in failover order (region, subnets, capacity type)."
  value = {
    for name, p in hpc_partition.this : name => {
      id                        = p.id
      node_names                = p.node_names
      max_gpus                  = p.max_gpus
      max_vcpus                 = p.max_vcpus
      estimated_max_hourly_cost = p.estimated_max_hourly_cost
      pools = [for pool in p.capacity_pool : {
        region        = pool.region
        subnet_ids    = pool.subnet_ids
        capacity_type = pool.capacity_type
      }]
    }
  }
}

output "regions" {
  description = "Regions the partitions launch in, in failover order (null is the home region)."
  value       = [for r in var.regions : r.region]
}

output "launch_template_ids" {
  description = "Per partition: launch template id per `<pool index>/<instance type>` (pools in other regions have theirs there)."
  value       = { for name, p in hpc_partition.this : name => p.launch_template_ids }
}
