output "id" {
  description = "The file system id (`fs-...`)."
  value       = hpc_lustre_fs.this.id
}

output "arn" {
  description = "The file system ARN."
  value       = hpc_lustre_fs.this.arn
}

output "dns_name" {
  description = "DNS name clients mount."
  value       = hpc_lustre_fs.this.dns_name
}

output "mount_name" {
  description = "Lustre mount name."
  value       = hpc_lustre_fs.this.mount_name
}

output "mount_command" {
  description = "A ready-to-run command that mounts the file system at `mount_point` on a Lustre client (cluster nodes mount it by themselves)."
  value       = "sudo mkdir -p ${var.mount_point} && sudo mount -t lustre -o relatime,flock ${hpc_lustre_fs.this.dns_name}@tcp:/${hpc_lustre_fs.this.mount_name} ${var.mount_point}"
}

output "cluster_storage" {
  description = "The file system as an `hpc_cluster` `storage` entry (also the shape of the slurm-cluster module's `extra_storage` items)."
  value = {
    lustre_id   = hpc_lustre_fs.this.id
    dns_name    = hpc_lustre_fs.this.dns_name
    mount_name  = hpc_lustre_fs.this.mount_name
    mount_point = var.mount_point
  }
}

output "data_repositories" {
  description = "Linked S3 locations: file system path => S3 URL."
  value       = { for r in hpc_lustre_fs.this.data_repository : r.file_system_path => r.data_repository_path }
}

output "release_policy" {
  description = "The release policy in effect (null when none: no data repository, or turned off)."
  value       = hpc_lustre_fs.this.release_policy
}
