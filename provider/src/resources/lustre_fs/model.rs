//! The typed model of an `hpc_lustre_fs` value and its maps: to the FSx settings ([`LustreSpec`],
//! the one FSx model, in the AWS crate) and from what FSx reports (refresh and apply).

use std::collections::BTreeMap;

use hpc_aws::fsx::{
    DataRepositoryAssociation, DataRepositorySpec, LogSpec, LustreFileSystem, LustreSpec, MetadataSpec, RootSquashSpec,
};
use tfplugin::model::{Field, Model, ModelError};
use tfplugin::Value;

use crate::desired_state::tag::{
    PREFIX as PROVIDER_TAG_PREFIX, RELEASE_UNACCESSED_DAYS as RELEASE_DAYS_TAG,
    RELEASE_USAGE_PERCENT as RELEASE_PERCENT_TAG,
};

tfplugin::model! {
    /// An `hpc_lustre_fs`: every attribute and block of its schema. A setting that is null or
    /// not known yet reads as None: the FSx rules check what is known.
    #[derive(Debug, Clone)]
    pub struct FileSystem {
        pub id: Option<String>,
        pub arn: Option<String>,
        pub dns_name: Option<String>,
        pub mount_name: Option<String>,
        pub network_interface_ids: Option<Vec<String>>,
        pub vpc_id: Option<String>,
        pub owner_id: Option<String>,
        pub mount_command: Option<String>,
        pub tags_all: Option<BTreeMap<String, String>>,
        pub storage_capacity: Option<i64>,
        pub deployment_type: Option<String>,
        pub storage_type: Option<String>,
        pub per_unit_storage_throughput: Option<i64>,
        pub drive_cache_type: Option<String>,
        pub data_compression_type: Option<String>,
        pub metadata_configuration: Option<Metadata>,
        pub efa_enabled: Option<bool>,
        pub root_squash_configuration: Option<RootSquash>,
        pub log_configuration: Option<Log>,
        pub kms_key_id: Option<String>,
        pub subnet_ids: Option<Vec<String>>,
        pub security_group_ids: Option<Vec<String>>,
        pub weekly_maintenance_start_time: Option<String>,
        pub automatic_backup_retention_days: Option<i64>,
        pub daily_automatic_backup_start_time: Option<String>,
        pub copy_tags_to_backups: Option<bool>,
        pub skip_final_backup: Option<bool>,
        pub final_backup_tags: Option<BTreeMap<String, String>>,
        pub import_path: Option<String>,
        pub export_path: Option<String>,
        pub auto_import_policy: Option<String>,
        pub imported_file_chunk_size: Option<i64>,
        pub file_system_type_version: Option<String>,
        pub tags: Option<BTreeMap<String, String>>,
        pub data_repository: Option<Vec<DataRepository>>,
        pub release_policy: Option<ReleasePolicy>,
        pub timeouts: Value,
    }
}

tfplugin::model! {
    /// `metadata_configuration`.
    #[derive(Debug, Clone)]
    pub struct Metadata {
        pub mode: Option<String>,
        pub iops: Option<i64>,
    }
}

tfplugin::model! {
    /// `root_squash_configuration`.
    #[derive(Debug, Clone)]
    pub struct RootSquash {
        pub root_squash: Option<String>,
        pub no_squash_nids: Option<Vec<String>>,
    }
}

tfplugin::model! {
    /// `log_configuration`.
    #[derive(Debug, Clone)]
    pub struct Log {
        pub level: Option<String>,
        pub destination: Option<String>,
    }
}

tfplugin::model! {
    /// One `data_repository` block.
    #[derive(Debug, Clone)]
    pub struct DataRepository {
        pub file_system_path: Option<String>,
        pub data_repository_path: Option<String>,
        pub batch_import_meta_data_on_create: Option<bool>,
        pub imported_file_chunk_size: Option<i64>,
        pub auto_import_events: Option<Vec<String>>,
        pub auto_export_events: Option<Vec<String>>,
        pub delete_data_in_file_system: Option<bool>,
        pub association_id: Option<String>,
    }
}

tfplugin::model! {
    /// `release_policy`.
    #[derive(Debug, Clone)]
    pub struct ReleasePolicy {
        pub unaccessed_days: Option<i64>,
        pub usage_percent: Option<i64>,
    }
}

tfplugin::model! {
    /// What the plan carries over from the prior state to a `data_repository` block matched
    /// by its paths (not by its place in the list).
    #[derive(Debug, Clone)]
    pub struct RepositoryPlan {
        pub file_system_path: Field<String>,
        pub data_repository_path: Field<String>,
        pub imported_file_chunk_size: Field<i64>,
        pub association_id: Field<String>,
    }
}

tfplugin::model! {
    /// `skip_final_backup`, whose default depends on whether `import_path` links the file
    /// system to S3.
    pub struct FinalBackup {
        pub skip_final_backup: Field<bool>,
        pub import_path: Field<String>,
    }
}

tfplugin::model! {
    /// The `data_repository` blocks as they are, for the plan to change one by one.
    pub struct Repositories {
        pub data_repository: Field<Vec<Value>>,
    }
}

impl FileSystem {
    /// Reads a configuration, plan or state value with the schema's defaults filled in.
    pub fn of(v: &Value) -> Result<FileSystem, ModelError> {
        FileSystem::from_value(&super::schema().block.with_defaults(v))
    }

    /// A plan's prior state: for a create (null), a file system with nothing set.
    pub fn of_prior(v: &Value) -> Result<FileSystem, ModelError> {
        if v.is_null() {
            return FileSystem::of(&Value::Object(BTreeMap::new()));
        }
        FileSystem::of(v)
    }

    /// The value of this model, unset settings given the schema's defaults.
    pub fn value(&self) -> Value {
        let schema = super::schema();
        schema.block.with_defaults(&self.write(&schema.ty()))
    }

    /// The FSx settings.
    pub fn spec(&self) -> LustreSpec {
        LustreSpec {
            storage_capacity: self.storage_capacity,
            deployment_type: self.deployment_type.clone(),
            storage_type: self.storage_type.clone(),
            per_unit_storage_throughput: self.per_unit_storage_throughput,
            drive_cache_type: self.drive_cache_type.clone(),
            data_compression_type: self.data_compression_type.clone(),
            metadata_configuration: self.metadata_configuration.as_ref().map(|m| MetadataSpec {
                mode: m.mode.clone(),
                iops: m.iops,
            }),
            efa_enabled: self.efa_enabled,
            root_squash_configuration: self.root_squash_configuration.as_ref().map(|r| RootSquashSpec {
                root_squash: r.root_squash.clone(),
                no_squash_nids: r.no_squash_nids.clone(),
            }),
            log_configuration: self.log_configuration.as_ref().map(|l| LogSpec {
                level: l.level.clone(),
                destination: l.destination.clone(),
            }),
            kms_key_id: self.kms_key_id.clone(),
            subnet_ids: self.subnet_ids.clone(),
            security_group_ids: self.security_group_ids.clone(),
            weekly_maintenance_start_time: self.weekly_maintenance_start_time.clone(),
            automatic_backup_retention_days: self.automatic_backup_retention_days,
            daily_automatic_backup_start_time: self.daily_automatic_backup_start_time.clone(),
            copy_tags_to_backups: self.copy_tags_to_backups,
            skip_final_backup: self.skip_final_backup,
            final_backup_tags: self.final_backup_tags.as_ref().map(pairs),
            import_path: self.import_path.clone(),
            export_path: self.export_path.clone(),
            auto_import_policy: self.auto_import_policy.clone(),
            imported_file_chunk_size: self.imported_file_chunk_size,
            file_system_type_version: self.file_system_type_version.clone(),
            data_repositories: self.repositories().iter().map(DataRepository::spec).collect(),
            tags: self.tags.as_ref().map(pairs),
        }
    }

    /// The `data_repository` blocks (none while the list is not known).
    pub fn repositories(&self) -> &[DataRepository] {
        self.data_repository.as_deref().unwrap_or_default()
    }

    /// Linked to S3: by `import_path` or a data repository.
    pub fn linked(&self) -> bool {
        self.import_path.is_some() || !self.repositories().is_empty()
    }

    /// `tags_all` with the release policy, which travels as the file system's tags (where the
    /// node agent reads it).
    pub fn tags_with_policy(&self) -> Vec<(String, String)> {
        let mut tags = self.tags_all.as_ref().map(pairs).unwrap_or_default();
        tags.extend(self.policy_tags());
        tags
    }

    /// The release policy as tags (none without one).
    pub fn policy_tags(&self) -> Vec<(String, String)> {
        let Some(ReleasePolicy {
            unaccessed_days: Some(days),
            usage_percent,
        }) = &self.release_policy
        else {
            return Vec::new();
        };
        let mut tags = vec![(RELEASE_DAYS_TAG.to_string(), days.to_string())];
        tags.extend(usage_percent.map(|p| (RELEASE_PERCENT_TAG.to_string(), p.to_string())));
        tags
    }

    /// State from what FSx reports. What FSx does not report (security groups, final backup
    /// settings, timeouts, which tags are the user's) comes from `prior`; unset settings get
    /// the schema's defaults.
    pub fn reported(
        fs: &LustreFileSystem,
        dras: &[DataRepositoryAssociation],
        prior: &FileSystem,
        at: &Reporting,
    ) -> Self {
        let sp = &fs.spec;
        let reported = sp.tags.clone().unwrap_or_default();
        let (tags_all, tags) = tags_of(&reported, prior, at.default_tags);
        // FSx reports associations apart from the file system's settings.
        let skip_final_backup = prior
            .skip_final_backup
            .unwrap_or_else(|| default_skip_final_backup(sp) || !dras.is_empty());
        FileSystem {
            id: Some(fs.id.clone()),
            arn: Some(fs.arn.clone()),
            dns_name: Some(fs.dns_name.clone()),
            mount_name: Some(fs.mount_name.clone()),
            network_interface_ids: Some(fs.network_interface_ids.clone()),
            vpc_id: Some(fs.vpc_id.clone()),
            owner_id: Some(fs.owner_id.clone()),
            mount_command: Some(fs.mount_command(at.region, at.mount_point)),
            tags_all: Some(tags_all),
            storage_capacity: sp.storage_capacity,
            deployment_type: sp.deployment_type.clone(),
            storage_type: sp.storage_type.clone(),
            per_unit_storage_throughput: sp.per_unit_storage_throughput,
            drive_cache_type: sp.drive_cache_type.clone(),
            data_compression_type: sp.data_compression_type.clone(),
            metadata_configuration: sp.metadata_configuration.as_ref().map(|m| Metadata {
                mode: m.mode.clone(),
                iops: m.iops,
            }),
            efa_enabled: Some(sp.efa_enabled.unwrap_or(false)),
            root_squash_configuration: root_squash_of(sp),
            log_configuration: sp.log_configuration.as_ref().map(|l| Log {
                level: l.level.clone(),
                destination: l.destination.clone(),
            }),
            kms_key_id: sp.kms_key_id.clone(),
            subnet_ids: sp.subnet_ids.clone(),
            security_group_ids: prior.security_group_ids.clone(),
            weekly_maintenance_start_time: sp.weekly_maintenance_start_time.clone(),
            automatic_backup_retention_days: Some(sp.automatic_backup_retention_days.unwrap_or(0)),
            daily_automatic_backup_start_time: sp.daily_automatic_backup_start_time.clone(),
            copy_tags_to_backups: sp.copy_tags_to_backups,
            skip_final_backup: Some(skip_final_backup),
            final_backup_tags: prior.final_backup_tags.clone(),
            import_path: sp.import_path.clone(),
            export_path: sp.export_path.clone(),
            auto_import_policy: sp.auto_import_policy.clone(),
            imported_file_chunk_size: sp.imported_file_chunk_size,
            file_system_type_version: sp.file_system_type_version.clone(),
            tags,
            data_repository: Some(repositories_of(dras, prior.repositories())),
            release_policy: release_policy_of(&reported),
            timeouts: prior.timeouts.clone(),
        }
    }
}

/// Where a reported file system is: what [`FileSystem::reported`] needs besides FSx's report.
pub struct Reporting<'a> {
    pub region: &'a str,
    pub mount_point: &'a str,
    pub default_tags: &'a BTreeMap<String, String>,
}

impl DataRepository {
    /// The association's FSx settings.
    pub fn spec(&self) -> DataRepositorySpec {
        DataRepositorySpec {
            file_system_path: self.file_system_path.clone(),
            data_repository_path: self.data_repository_path.clone(),
            batch_import_meta_data_on_create: self.batch_import_meta_data_on_create,
            imported_file_chunk_size: self.imported_file_chunk_size,
            auto_import_events: self.auto_import_events.clone(),
            auto_export_events: self.auto_export_events.clone(),
        }
    }

    /// What identifies an association: its two paths (a new S3 path is a new association).
    pub fn key(&self) -> (Option<&str>, Option<&str>) {
        (self.file_system_path.as_deref(), self.data_repository_path.as_deref())
    }

    /// The block FSx reports; what FSx does not report comes from the configured block.
    fn reported(d: &DataRepositoryAssociation, prior: Option<&DataRepository>) -> DataRepository {
        let prior_events = |f: fn(&DataRepository) -> &Option<Vec<String>>| prior.and_then(|p| f(p).as_ref());
        DataRepository {
            file_system_path: d.spec.file_system_path.clone(),
            data_repository_path: d.spec.data_repository_path.clone(),
            batch_import_meta_data_on_create: d.spec.batch_import_meta_data_on_create,
            imported_file_chunk_size: d.spec.imported_file_chunk_size,
            auto_import_events: events(
                d.spec.auto_import_events.as_deref(),
                prior_events(|p| &p.auto_import_events),
            ),
            auto_export_events: events(
                d.spec.auto_export_events.as_deref(),
                prior_events(|p| &p.auto_export_events),
            ),
            delete_data_in_file_system: prior.and_then(|p| p.delete_data_in_file_system),
            association_id: Some(d.id.clone()),
        }
    }
}

fn pairs(m: &BTreeMap<String, String>) -> Vec<(String, String)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// FSx backs up only persistent file systems not linked to S3 (CreateBackup).
pub fn default_skip_final_backup(spec: &LustreSpec) -> bool {
    let scratch = spec.deployment_type.as_deref().is_none_or(|d| d.starts_with("SCRATCH"));
    scratch || spec.import_path.is_some() || !spec.data_repositories.is_empty()
}

/// FSx reports "no events" as absent; a configured empty set stays an empty set (not null),
/// so `auto_export_events = []` reads back as written.
fn events(reported: Option<&[String]>, configured: Option<&Vec<String>>) -> Option<Vec<String>> {
    match reported.filter(|e| !e.is_empty()) {
        Some(events) => Some(events.to_vec()),
        None => configured.filter(|c| c.is_empty()).cloned(),
    }
}

/// The `root_squash_configuration` block, none when FSx reports nothing squashed or exempt.
fn root_squash_of(sp: &LustreSpec) -> Option<RootSquash> {
    let r = sp.root_squash_configuration.as_ref()?;
    let nids = r.no_squash_nids.clone().filter(|n| !n.is_empty());
    (r.root_squash.is_some() || nids.is_some()).then(|| RootSquash {
        root_squash: r.root_squash.clone(),
        no_squash_nids: nids,
    })
}

/// The release policy FSx carries as the file system's tags (none without).
fn release_policy_of(reported: &[(String, String)]) -> Option<ReleasePolicy> {
    let tag = |k: &str| {
        reported
            .iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.parse::<i64>().ok())
    };
    tag(RELEASE_DAYS_TAG).map(|days| ReleasePolicy {
        unaccessed_days: Some(days),
        usage_percent: tag(RELEASE_PERCENT_TAG),
    })
}

/// The data repositories in the configured order (`prior`'s); new ones (import, drift) go last.
fn repositories_of(dras: &[DataRepositoryAssociation], prior: &[DataRepository]) -> Vec<DataRepository> {
    let path = |d: &DataRepositoryAssociation| d.spec.file_system_path.clone();
    let prior_of = |d: &DataRepositoryAssociation| prior.iter().find(|p| p.file_system_path == path(d));
    let mut ordered: Vec<&DataRepositoryAssociation> = prior
        .iter()
        .filter_map(|p| dras.iter().find(|d| path(d) == p.file_system_path))
        .collect();
    let mut rest: Vec<&DataRepositoryAssociation> =
        dras.iter().filter(|d| !ordered.iter().any(|o| o.id == d.id)).collect();
    rest.sort_by(|a, b| a.spec.file_system_path.cmp(&b.spec.file_system_path));
    ordered.extend(rest);
    ordered
        .into_iter()
        .map(|d| DataRepository::reported(d, prior_of(d)))
        .collect()
}

/// The reported tags without the provider's own (`tags_all`), and of those the user's: all but
/// the default tags nobody overrode (`tags`, none when empty and unset before).
fn tags_of(
    reported: &[(String, String)],
    prior: &FileSystem,
    default_tags: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Option<BTreeMap<String, String>>) {
    let tags_all: BTreeMap<String, String> = reported
        .iter()
        .filter(|(k, _)| !k.starts_with(PROVIDER_TAG_PREFIX))
        .cloned()
        .collect();
    let set_before = |k: &String| prior.tags.as_ref().is_some_and(|m| m.contains_key(k));
    let tags: BTreeMap<String, String> = tags_all
        .iter()
        .filter(|(k, v)| set_before(k) || default_tags.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let tags = (!tags.is_empty() || prior.tags.is_some()).then_some(tags);
    (tags_all, tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::model::{fields_outside_schema, schema_mismatches};

    fn block(name: &str) -> tfplugin::Block {
        let schema = super::super::schema();
        let nested = schema
            .block
            .attributes
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.nested.clone());
        match nested {
            Some(n) => tfplugin::Block::new(n.attributes),
            None => schema
                .block
                .blocks
                .iter()
                .find(|b| b.name == name)
                .map(|b| b.block.clone())
                .unwrap_or_else(|| panic!("the schema has no block {name}")),
        }
    }

    #[test]
    fn the_models_read_exactly_the_schemas_attributes() {
        let schema = super::super::schema();
        let mismatches = [
            schema_mismatches::<FileSystem>(&schema.block),
            schema_mismatches::<Metadata>(&block("metadata_configuration")),
            schema_mismatches::<RootSquash>(&block("root_squash_configuration")),
            schema_mismatches::<Log>(&block("log_configuration")),
            schema_mismatches::<DataRepository>(&block("data_repository")),
            schema_mismatches::<ReleasePolicy>(&block("release_policy")),
            fields_outside_schema::<RepositoryPlan>(&block("data_repository")),
            fields_outside_schema::<Repositories>(&schema.block),
            fields_outside_schema::<FinalBackup>(&schema.block),
        ];
        let wrong: Vec<String> = mismatches.into_iter().flatten().collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_reported_file_system_keeps_what_fsx_does_not_report_and_orders_repositories_as_configured() {
        let mut prior = FileSystem::of_prior(&Value::Null).expect("an empty file system");
        prior.security_group_ids = Some(vec!["sg-1".into()]);
        prior.tags = Some(BTreeMap::new());
        let repo = |path: &str, events: Option<Vec<String>>| DataRepository {
            file_system_path: Some(path.into()),
            data_repository_path: Some(format!("s3://b{path}")),
            batch_import_meta_data_on_create: None,
            imported_file_chunk_size: None,
            auto_import_events: None,
            auto_export_events: events,
            delete_data_in_file_system: Some(true),
            association_id: None,
        };
        prior.data_repository = Some(vec![repo("/z", Some(Vec::new())), repo("/a", None)]);
        let dra = |id: &str, path: &str| DataRepositoryAssociation {
            id: id.into(),
            arn: String::new(),
            file_system_id: "fs-1".into(),
            lifecycle: "AVAILABLE".into(),
            failure: None,
            spec: repo(path, None).spec(),
        };
        let fs = LustreFileSystem {
            id: "fs-1".into(),
            arn: "arn:aws:fsx:us-east-1:123456789012:file-system/fs-1".into(),
            dns_name: "fs-1.fsx.us-east-1.amazonaws.com".into(),
            mount_name: "abcdef".into(),
            owner_id: "123456789012".into(),
            vpc_id: "vpc-1".into(),
            network_interface_ids: vec!["eni-1".into()],
            lifecycle: "AVAILABLE".into(),
            failure: None,
            pending_actions: Vec::new(),
            spec: LustreSpec {
                deployment_type: Some("PERSISTENT_2".into()),
                tags: Some(vec![
                    ("team".into(), "a".into()),
                    ("default".into(), "d".into()),
                    (RELEASE_DAYS_TAG.into(), "30".into()),
                ]),
                ..LustreSpec::default()
            },
        };
        let defaults = BTreeMap::from([("default".to_string(), "d".to_string())]);
        let at = Reporting {
            region: "us-east-1",
            mount_point: "/fsx",
            default_tags: &defaults,
        };
        let dras = [dra("dra-a", "/a"), dra("dra-new", "/m"), dra("dra-z", "/z")];
        let state = FileSystem::reported(&fs, &dras, &prior, &at);
        assert_eq!(state.security_group_ids, prior.security_group_ids);
        let order: Vec<_> = state.repositories().iter().map(|r| r.association_id.clone()).collect();
        assert_eq!(
            order,
            vec![Some("dra-z".into()), Some("dra-a".into()), Some("dra-new".into())]
        );
        // A configured empty set of events reads back empty, not null.
        assert_eq!(state.repositories()[0].auto_export_events, Some(Vec::new()));
        assert_eq!(state.repositories()[0].delete_data_in_file_system, Some(true));
        assert_eq!(state.tags, Some(BTreeMap::from([("team".into(), "a".into())])));
        assert_eq!(
            state.skip_final_backup,
            Some(true),
            "linked to S3: FSx cannot back it up"
        );
        let value = state.value();
        assert_eq!(
            value.attr("storage_type"),
            &Value::string("SSD"),
            "the schema's default"
        );
        let policy = value.attr("release_policy");
        assert_eq!(policy.attr("unaccessed_days"), &Value::int(30));
        assert_eq!(policy.attr("usage_percent"), &Value::int(80), "the schema's default");
    }
}
