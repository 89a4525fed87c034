output "cluster_name" {
  description = "The cluster's name (Slurm ClusterName); the `cluster_id` of partitions added outside this module."
  value       = hpc_cluster.this.id
}

output "head_node_instance_id" {
  description = "Head node instance (connect with `aws ssm start-session --target <id>`)."
  value       = hpc_cluster.this.head_node_instance_id
}

output "head_node_private_ip" {
  description = "Head node address (SlurmctldHost)."
  value       = hpc_cluster.this.head_node_private_ip
}

output "login_node_private_ips" {
  description = "Login node addresses, where users SSH to and submit jobs from."
  value       = hpc_cluster.this.login_node_private_ips
}

output "vpc_id" {
  description = "VPC of the cluster."
  value       = hpc_cluster.this.vpc_id
}

output "private_subnet_ids" {
  description = "Private subnets in failover order (the default capacity pools); the first holds the head node."
  value       = local.private_subnet_ids
}

output "security_group_ids" {
  description = "The cluster's security groups: members talk freely; SSH only from `allowed_ssh_cidrs`."
  value       = hpc_cluster.this.security_group_ids
}

output "network_security_group_id" {
  description = "The module-made network's cluster security group (null with existing subnets); the Lustre file system uses it."
  value       = local.create_network ? hpc_network.this[0].security_group_id : null
}

output "instance_profile_policy" {
  description = "IAM policy JSON the nodes' instance profile needs (SSM desired state, the munge key secret, EC2 fleet launches)."
  value       = hpc_cluster.this.instance_profile_policy
}

output "munge_key_secret_arn" {
  description = "ARN of the Secrets Manager secret holding the generated munge key (the key itself is never in state)."
  value       = hpc_cluster.this.munge_key_secret_arn
}

output "slurm_conf" {
  description = "The cluster-wide part of slurm.conf (each partition's lines are in `partitions`)."
  value       = hpc_cluster.this.slurm_conf
}

output "lustre" {
  description = "The module's Lustre file system: id, DNS name, mount point and mount command (null without `lustre`)."
  value = var.lustre == null ? null : {
    id            = module.lustre[0].id
    dns_name      = module.lustre[0].dns_name
    mount_point   = var.lustre.mount_point
    mount_command = module.lustre[0].mount_command
  }
}

output "partitions" {
  description = "Per partition: Slurm node names, vCPUs and GPUs at full scale, estimated on-demand USD/hour at full scale, and the rendered NodeName/PartitionName lines."
  value = {
    for name, p in hpc_partition.this : name => {
      node_names                = p.node_names
      max_vcpus                 = p.max_vcpus
      max_gpus                  = p.max_gpus
      gpu_model                 = p.gpu_model
      estimated_max_hourly_cost = p.estimated_max_hourly_cost
      rendered_partition        = p.rendered_partition
    }
  }
}

output "estimated_max_hourly_cost" {
  description = "Estimated on-demand USD/hour with every partition at full scale, head and login nodes included (null when a type has no known price)."
  value = anytrue([for p in hpc_partition.this : p.estimated_max_hourly_cost == null]) || hpc_cluster.this.estimated_hourly_cost == null ? null : (
    hpc_cluster.this.estimated_hourly_cost + sum(concat([0], [for p in hpc_partition.this : p.estimated_max_hourly_cost]))
  )
}

output "home_file_system_id" {
  description = "EFS file system mounted at /home on every node (yours, or the one the cluster made)."
  value       = hpc_cluster.this.home_file_system_id
}
