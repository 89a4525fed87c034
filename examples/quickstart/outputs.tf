output "file_system_id" {
  description = "The FSx for Lustre file system id."
  value       = hpc_lustre_fs.scratch.id
}

output "mount_command" {
  description = "Run this on a Lustre client to mount the file system at /fsx."
  value       = hpc_lustre_fs.scratch.mount_command
}

output "data_repositories" {
  description = "S3 data repository associations: file system path -> S3 path."
  value       = { for r in hpc_lustre_fs.scratch.data_repository : r.file_system_path => r.data_repository_path }
}
