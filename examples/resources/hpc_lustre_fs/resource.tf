# A persistent Lustre file system whose /datasets directory is linked to S3, with files
# released from the file system (kept in S3) after 30 days unread once it is 80 % full.
resource "hpc_lustre_fs" "example" {
  storage_capacity            = 2400
  deployment_type             = "PERSISTENT_2"
  per_unit_storage_throughput = 250
  file_system_type_version    = "2.15"
  data_compression_type       = "LZ4"
  subnet_ids                  = ["subnet-0123456789abcdef0"]
  security_group_ids          = ["sg-0123456789abcdef0"]

  metadata_configuration = {
    mode = "AUTOMATIC"
  }

  data_repository {
    file_system_path     = "/datasets"
    data_repository_path = "s3://my-bucket/datasets/"
    auto_import_events   = ["NEW", "CHANGED", "DELETED"]
    auto_export_events   = ["NEW", "CHANGED", "DELETED"]
  }

  release_policy {
    unaccessed_days = 30
    usage_percent   = 80
  }

  tags = {
    Name = "research-fsx"
  }

  timeouts {
    create = "45m"
  }
}
