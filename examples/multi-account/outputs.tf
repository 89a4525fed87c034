output "clusters" {
  description = "Per account: cluster name, head node address, login node addresses and estimated USD/hour at full scale."
  value = {
    research = {
      cluster_name              = module.research.cluster_name
      head_node_private_ip      = module.research.head_node_private_ip
      login_node_private_ips    = module.research.login_node_private_ips
      estimated_max_hourly_cost = module.research.estimated_max_hourly_cost
    }
    teaching = {
      cluster_name              = module.teaching.cluster_name
      head_node_private_ip      = module.teaching.head_node_private_ip
      login_node_private_ips    = module.teaching.login_node_private_ips
      estimated_max_hourly_cost = module.teaching.estimated_max_hourly_cost
    }
  }
}

output "research_scratch_mount" {
  description = "Mount command of the research cluster's scratch file system."
  value       = module.research.lustre.mount_command
}
