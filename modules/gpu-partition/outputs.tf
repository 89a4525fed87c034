output "id" {
  description = "The partition's id, `<cluster>/<partition>`."
  value       = hpc_partition.this.id
}

output "name" {
  description = "The partition's name (`sbatch -p <name>`)."
  value       = hpc_partition.this.name
}

output "node_names" {
  description = "Slurm node names, one host list per instance type."
  value       = hpc_partition.this.node_names
}

output "gpu_model" {
  description = "GPU model of the first instance type, as in the nodes' `Gres=gpu:<model>:<count>`."
  value       = hpc_partition.this.gpu_model
}

output "max_gpus" {
  description = "GPUs at full scale."
  value       = hpc_partition.this.max_gpus
}

output "max_vcpus" {
  description = "vCPUs at full scale."
  value       = hpc_partition.this.max_vcpus
}

output "estimated_max_hourly_cost" {
  description = "On-demand USD/hour at full scale (null when a type has no known price; set one with the provider's `guardrails { prices }`)."
  value       = hpc_partition.this.estimated_max_hourly_cost
}

output "capacity_pools" {
  description = "The capacity pools in failover order: subnets, capacity type and reservation."
  value = [for p in hpc_partition.this.capacity_pool : {
    subnet_ids              = p.subnet_ids
    capacity_type           = p.capacity_type
    capacity_reservation_id = p.capacity_reservation_id
    region                  = p.region
  }]
}

output "placement_group_names" {
  description = "The cluster placement group of each pool, in pool order."
  value       = hpc_partition.this.placement_group_names
}

output "rendered_partition" {
  description = "The NodeName and PartitionName lines Slurm gets, with the GPU gres and per-GPU defaults."
  value       = hpc_partition.this.rendered_partition
}

output "recommended_cluster_slurm_extra" {
  description = "Cluster-wide slurm.conf settings that suit GPU nodes, for the cluster's `slurm.extra`: the health check (GPU count, EFA and mounts, run by hpc-node on every node) runs on idle nodes only, cycling through them, so it never competes with a job for the GPUs."
  value = {
    HealthCheckNodeState = "IDLE,CYCLE"
  }
}
