# A file system is imported by its id.
terraform import hpc_lustre_fs.example fs-0123456789abcdef0
