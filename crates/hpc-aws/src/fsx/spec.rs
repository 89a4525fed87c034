//! The one model of a Lustre file system's settings: what hpc_lustre_fs plans with and checks,
//! what create and update send, and what [`super::Fsx::find_lustre`] reads back.

#[rustfmt::skip]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LustreSpec {
    pub storage_capacity: Option<i64>,           // GiB
    pub deployment_type: Option<String>,         // SCRATCH_1 | SCRATCH_2 | PERSISTENT_1 | PERSISTENT_2 (FSx default SCRATCH_1)
    pub storage_type: Option<String>,            // SSD | HDD (default SSD)
    pub per_unit_storage_throughput: Option<i64>,// MB/s/TiB
    pub drive_cache_type: Option<String>,        // NONE | READ
    pub data_compression_type: Option<String>,   // NONE | LZ4
    pub metadata_configuration: Option<MetadataSpec>,
    pub efa_enabled: Option<bool>,
    pub root_squash_configuration: Option<RootSquashSpec>,
    pub log_configuration: Option<LogSpec>,
    pub kms_key_id: Option<String>,
    pub subnet_ids: Option<Vec<String>>,
    pub security_group_ids: Option<Vec<String>>,
    pub weekly_maintenance_start_time: Option<String>,
    pub automatic_backup_retention_days: Option<i64>,
    pub daily_automatic_backup_start_time: Option<String>,
    pub copy_tags_to_backups: Option<bool>,
    pub skip_final_backup: Option<bool>,
    pub final_backup_tags: Option<Vec<(String, String)>>,
    pub import_path: Option<String>,
    pub export_path: Option<String>,
    pub auto_import_policy: Option<String>,
    pub imported_file_chunk_size: Option<i64>,
    pub file_system_type_version: Option<String>,
    pub data_repositories: Vec<DataRepositorySpec>,
    pub tags: Option<Vec<(String, String)>>,
}
#[rustfmt::skip]
#[derive(Debug, Clone, Default, PartialEq)] pub struct MetadataSpec { pub mode: Option<String>, pub iops: Option<i64> }
#[rustfmt::skip]
#[derive(Debug, Clone, Default, PartialEq)] pub struct RootSquashSpec { pub root_squash: Option<String>, pub no_squash_nids: Option<Vec<String>> }
#[rustfmt::skip]
#[derive(Debug, Clone, Default, PartialEq)] pub struct LogSpec { pub level: Option<String>, pub destination: Option<String> }
#[rustfmt::skip]
#[derive(Debug, Clone, Default, PartialEq)] pub struct DataRepositorySpec {
    pub file_system_path: Option<String>, pub data_repository_path: Option<String>,
    pub batch_import_meta_data_on_create: Option<bool>, pub imported_file_chunk_size: Option<i64>,
    pub auto_import_events: Option<Vec<String>>, pub auto_export_events: Option<Vec<String>>,
}
