output "cluster" {
  description = "The cluster's name."
  value       = hpc_cluster.this.name
}

output "file_system_id" {
  description = "The FSx for Lustre file system id."
  value       = hpc_lustre_fs.fsx.id
}

output "mount_command" {
  description = "Run this on a Lustre client to mount the file system at /fsx."
  value       = hpc_lustre_fs.fsx.mount_command
}

output "partitions" {
  description = "Per partition: Slurm node names, GPUs and on-demand USD/hour at full scale."
  value = {
    for p in [hpc_partition.cpu, hpc_partition.gpu] : p.name => {
      node_names                = p.node_names
      max_gpus                  = p.max_gpus
      estimated_max_hourly_cost = p.estimated_max_hourly_cost
    }
  }
}

output "estimated_max_hourly_cost" {
  description = "On-demand USD/hour with every node up: head, login and both partitions at full scale."
  value       = hpc_cluster.this.estimated_hourly_cost + hpc_partition.cpu.estimated_max_hourly_cost + hpc_partition.gpu.estimated_max_hourly_cost
}

output "slurm_conf" {
  description = "The slurm.conf the head node runs: the cluster's part, then each partition's lines."
  value       = join("\n", [hpc_cluster.this.slurm_conf, hpc_partition.cpu.rendered_partition, hpc_partition.gpu.rendered_partition])
}

output "login_node_private_ips" {
  description = "Where the cluster's users SSH to."
  value       = hpc_cluster.this.login_node_private_ips
}

output "instance_profile_policy" {
  description = "The IAM policy the nodes' role needs, scoped to this cluster."
  value       = hpc_cluster.this.instance_profile_policy
}
