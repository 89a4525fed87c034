output "cluster_name" {
  description = "The cluster's name."
  value       = module.cluster.cluster_name
}

output "head_node_private_ip" {
  description = "Head node address."
  value       = module.cluster.head_node_private_ip
}

output "login_node_private_ips" {
  description = "Where users SSH to."
  value       = module.cluster.login_node_private_ips
}

output "partitions" {
  description = "Every partition: node names, GPUs and vCPUs at full scale, estimated USD/hour at full scale."
  value = merge(
    { for name, p in module.cluster.partitions : name => {
      node_names                = p.node_names
      max_gpus                  = p.max_gpus
      max_vcpus                 = p.max_vcpus
      estimated_max_hourly_cost = p.estimated_max_hourly_cost
    } },
    {
      (module.gpu.name) = {
        node_names                = module.gpu.node_names
        max_gpus                  = module.gpu.max_gpus
        max_vcpus                 = module.gpu.max_vcpus
        estimated_max_hourly_cost = module.gpu.estimated_max_hourly_cost
      }
    },
  )
}

output "gpu_pools" {
  description = "The GPU partition's capacity pools, in failover order, and their placement groups."
  value = {
    pools            = module.gpu.capacity_pools
    placement_groups = module.gpu.placement_group_names
  }
}

output "estimated_max_hourly_cost" {
  description = "Estimated on-demand USD/hour with everything at full scale."
  value       = module.cluster.estimated_max_hourly_cost == null || module.gpu.estimated_max_hourly_cost == null ? null : module.cluster.estimated_max_hourly_cost + module.gpu.estimated_max_hourly_cost
}

output "mounts" {
  description = "Shared file systems: mount point => mount command."
  value = {
    (module.cluster.lustre.mount_point) = module.cluster.lustre.mount_command
    "/scratch"                          = module.scratch.mount_command
  }
}

output "slurm_conf" {
  description = "The cluster-wide part of slurm.conf."
  value       = module.cluster.slurm_conf
}
