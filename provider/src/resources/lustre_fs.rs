//! `hpc_lustre_fs`: an FSx for Lustre file system with S3 data repositories.
//!
//! Order: schema, model (Terraform value ↔ [`LustreSpec`]), plan, create/read/update/delete/
//! import, then data repository helpers.

use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::fsx::{
    DataRepositoryAssociation, DataRepositorySpec, LogSpec, LustreFileSystem, LustreSpec, MetadataSpec, RootSquashSpec,
};
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, Block, BlockNesting, CreateRequest, Ctx, DeleteRequest, Diagnostic, Diagnostics,
    ImportRequest, NestedBlock, Nesting, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest,
    ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::convert::{self, boolean, int, object, of_int, of_list, of_map, of_set, of_string, pairs, string, strings};
use crate::resources::{aws_diag, or_stop};

mod rules;

pub struct LustreFs;

const CREATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
const MOUNT_POINT: &str = "/fsx";
const MAP_ATTRS: &[&str] = &["tags", "final_backup_tags"];

fn s(name: &str) -> Attribute {
    Attribute::optional(name, Type::String)
}

fn n(name: &str) -> Attribute {
    Attribute::optional(name, Type::Number)
}

fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(attributes()).with_blocks(blocks()).description(
            "An Amazon FSx for Lustre file system, with S3 data repository associations managed in place. \
             Every setting is checked at plan time against FSx's documented rules, without calling AWS.",
        ),
    )
}

/// The top-level attributes.
fn attributes() -> Vec<Attribute> {
    vec![
        Attribute::computed_kept("id", Type::String, "File system id, `fs-...`."),
        Attribute::computed_kept("arn", Type::String, "File system ARN."),
        Attribute::computed_kept("dns_name", Type::String, "DNS name clients mount."),
        Attribute::computed_kept("mount_name", Type::String, "Lustre mount name (`fsx` for SCRATCH_1)."),
        Attribute::computed_kept(
            "network_interface_ids",
            Type::list(Type::String),
            "Elastic network interfaces of the file system.",
        ),
        Attribute::computed_kept("vpc_id", Type::String, "VPC of the file system's subnet."),
        Attribute::computed_kept("owner_id", Type::String, "AWS account that owns the file system."),
        Attribute::computed_kept(
            "mount_command",
            Type::String,
            "A ready-to-run command that mounts the file system at `/fsx`.",
        ),
        Attribute::computed("tags_all", Type::map(Type::String))
            .description("`tags` merged over the provider's `default_tags`."),
        Attribute::required("storage_capacity", Type::Number).description(
            "Capacity in GiB. Allowed values depend on deployment and storage type (e.g. 1200, 2400 or a multiple of \
                 2400 for PERSISTENT_2). Grows in place; shrinking replaces the file system.",
        ),
        Attribute::optional("deployment_type", Type::String)
            .description("`SCRATCH_1`, `SCRATCH_2`, `PERSISTENT_1` or `PERSISTENT_2`. Default `SCRATCH_1`.")
            .default(Value::string("SCRATCH_1")),
        Attribute::optional("storage_type", Type::String)
            .description("`SSD` or `HDD` (HDD only with PERSISTENT_1). Default `SSD`.")
            .default(Value::string("SSD")),
        n("per_unit_storage_throughput").description(
            "MB/s per TiB for persistent types: PERSISTENT_1 SSD 50/100/200, HDD 12/40; PERSISTENT_2 125/250/500/1000.",
        ),
        s("drive_cache_type").description("HDD read cache: `NONE` or `READ`. Required with HDD."),
        Attribute::optional("data_compression_type", Type::String)
            .description("`NONE` or `LZ4`. Default `NONE`.")
            .default(Value::string("NONE")),
        Attribute::nested(
            "metadata_configuration",
            Nesting::Single,
            vec![
                Attribute::required("mode", Type::String).description("`AUTOMATIC` or `USER_PROVISIONED`."),
                Attribute::optional_computed("iops", Type::Number).description(
                    "Metadata IOPS with USER_PROVISIONED: 1500, 3000, 6000, or a multiple of 12000 up to 192000.",
                ),
            ],
        )
        .description("Metadata server performance (PERSISTENT_2 only).")
        .into_optional_computed(),
        Attribute::optional_computed("efa_enabled", Type::Bool)
            .description("Serve clients over EFA (PERSISTENT_2 with a metadata configuration)."),
        Attribute::nested(
            "root_squash_configuration",
            Nesting::Single,
            vec![
                s("root_squash").description("`UID:GID` root is mapped to, e.g. `65534:65534`; `0:0` turns it off."),
                Attribute::optional("no_squash_nids", Type::set(Type::String))
                    .description("Client NIDs exempt from root squash, e.g. `10.0.1.6@tcp`."),
            ],
        )
        .description("Root squash: map root on clients to an unprivileged user."),
        Attribute::nested(
            "log_configuration",
            Nesting::Single,
            vec![
                Attribute::required("level", Type::String)
                    .description("`DISABLED`, `WARN_ONLY`, `ERROR_ONLY` or `WARN_ERROR`."),
                Attribute::optional_computed("destination", Type::String)
                    .description("CloudWatch Logs log group ARN; its name starts with `/aws/fsx`."),
            ],
        )
        .description("Lustre event logging to CloudWatch Logs.")
        .into_optional_computed(),
        Attribute::optional_computed("kms_key_id", Type::String)
            .description("KMS key for encryption at rest (persistent types). Default: the AWS managed FSx key."),
        Attribute::required("subnet_ids", Type::list(Type::String))
            .description("Exactly one subnet id: Lustre file systems live in one Availability Zone."),
        Attribute::optional("security_group_ids", Type::set(Type::String)).description(
            "Security groups of the file system's network interfaces (Lustre needs TCP 988 and 1018-1023).",
        ),
        Attribute::optional_computed("weekly_maintenance_start_time", Type::String)
            .description("Weekly maintenance window start, `d:HH:MM` in UTC (d = 1 Monday .. 7 Sunday)."),
        Attribute::optional_computed("automatic_backup_retention_days", Type::Number)
            .description("Days to keep daily automatic backups, 0 to 90 (persistent types; 0 turns them off)."),
        Attribute::optional_computed("daily_automatic_backup_start_time", Type::String)
            .description("Daily backup start, `HH:MM` in UTC."),
        Attribute::optional("copy_tags_to_backups", Type::Bool)
            .description("Copy the file system's tags to its backups.")
            .default(Value::Bool(false)),
        Attribute::optional_computed("skip_final_backup", Type::Bool).description(
            "Skip the final backup on destroy. Default: `false` for persistent file systems not linked to S3 \
                 (a final backup is taken), `true` otherwise (FSx cannot back those up).",
        ),
        Attribute::optional("final_backup_tags", Type::map(Type::String))
            .description("Tags for the final backup taken on destroy."),
        s("import_path").description("S3 URL imported at creation (not PERSISTENT_2: use `data_repository` there)."),
        Attribute::optional_computed("export_path", Type::String)
            .description("S3 URL exported to; same bucket as `import_path`."),
        Attribute::optional_computed("auto_import_policy", Type::String)
            .description("`NONE`, `NEW`, `NEW_CHANGED` or `NEW_CHANGED_DELETED`; needs `import_path`."),
        Attribute::optional_computed("imported_file_chunk_size", Type::Number)
            .description("Stripe size in MiB for files imported from `import_path` (1 to 512000)."),
        Attribute::optional_computed("file_system_type_version", Type::String)
            .description("Lustre version: `2.10`, `2.12` or `2.15`. Upgrades in place."),
        Attribute::optional("tags", Type::map(Type::String)).description("Tags of the file system."),
    ]
}

/// The top-level blocks.
fn blocks() -> Vec<NestedBlock> {
    vec![
            NestedBlock::new("data_repository", BlockNesting::List, data_repository_block().description("An S3 data repository association: a file system path linked to an S3 prefix, imported and exported automatically.")).max_items(8),
                        NestedBlock::new(
                "release_policy",
                BlockNesting::Single,
                Block::new(vec![
                    Attribute::required("unaccessed_days", Type::Number).description(
                        "Release (from the file system, keeping them in S3) files not accessed for this many days.",
                    ),
                    Attribute::optional("usage_percent", Type::Number)
                        .description("Only when the file system is fuller than this. Default 80.")
                        .default(Value::int(80)),
                ]),
            ),
            timeouts::block(&["create", "update", "delete"]),
        ]
}

fn data_repository_block() -> Block {
    Block::new(vec![
        Attribute::required("file_system_path", Type::String)
            .description("Path in the file system the S3 prefix appears at, e.g. `/ns1`. Unique per file system."),
        Attribute::required("data_repository_path", Type::String)
            .description("S3 location linked to `file_system_path`, `s3://bucket/prefix`."),
        Attribute::optional("batch_import_meta_data_on_create", Type::Bool)
            .description("Import the metadata of existing S3 objects when the association is created.")
            .default(Value::Bool(false)),
        Attribute::optional_computed("imported_file_chunk_size", Type::Number)
            .description("Stripe size in MiB for files imported from S3 (1 to 512000). FSx default 1024."),
        Attribute::optional("auto_import_events", Type::set(Type::String))
            .description("S3 events imported automatically: any of `NEW`, `CHANGED`, `DELETED`."),
        Attribute::optional("auto_export_events", Type::set(Type::String))
            .description("File system changes exported to S3 automatically: any of `NEW`, `CHANGED`, `DELETED`."),
        Attribute::optional("delete_data_in_file_system", Type::Bool)
            .description("When the association is removed, also delete its files from the file system.")
            .default(Value::Bool(false)),
        Attribute::computed("association_id", Type::String)
            .description("The data repository association id (`dra-...`)."),
    ])
}

trait OptionalComputed {
    fn into_optional_computed(self) -> Self;
}

impl OptionalComputed for Attribute {
    fn into_optional_computed(mut self) -> Self {
        self.optional = true;
        self.computed = true;
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Model: Terraform value <-> LustreSpec
// ---------------------------------------------------------------------------------------------

fn data_repository_spec(v: &Value) -> DataRepositorySpec {
    DataRepositorySpec {
        file_system_path: string(v.attr("file_system_path")),
        data_repository_path: string(v.attr("data_repository_path")),
        batch_import_meta_data_on_create: boolean(v.attr("batch_import_meta_data_on_create")),
        imported_file_chunk_size: int(v.attr("imported_file_chunk_size")),
        auto_import_events: strings(v.attr("auto_import_events")),
        auto_export_events: strings(v.attr("auto_export_events")),
    }
}

/// The settings in a configuration, plan or state value (unknown and null read as None).
fn spec_of(v: &Value) -> LustreSpec {
    let md = v.attr("metadata_configuration");
    let rs = v.attr("root_squash_configuration");
    let log = v.attr("log_configuration");
    LustreSpec {
        storage_capacity: int(v.attr("storage_capacity")),
        deployment_type: string(v.attr("deployment_type")),
        storage_type: string(v.attr("storage_type")),
        per_unit_storage_throughput: int(v.attr("per_unit_storage_throughput")),
        drive_cache_type: string(v.attr("drive_cache_type")),
        data_compression_type: string(v.attr("data_compression_type")),
        metadata_configuration: matches!(md, Value::Object(_)).then(|| MetadataSpec {
            mode: string(md.attr("mode")),
            iops: int(md.attr("iops")),
        }),
        efa_enabled: boolean(v.attr("efa_enabled")),
        root_squash_configuration: matches!(rs, Value::Object(_)).then(|| RootSquashSpec {
            root_squash: string(rs.attr("root_squash")),
            no_squash_nids: strings(rs.attr("no_squash_nids")),
        }),
        log_configuration: matches!(log, Value::Object(_)).then(|| LogSpec {
            level: string(log.attr("level")),
            destination: string(log.attr("destination")),
        }),
        kms_key_id: string(v.attr("kms_key_id")),
        subnet_ids: strings(v.attr("subnet_ids")),
        security_group_ids: strings(v.attr("security_group_ids")),
        weekly_maintenance_start_time: string(v.attr("weekly_maintenance_start_time")),
        automatic_backup_retention_days: int(v.attr("automatic_backup_retention_days")),
        daily_automatic_backup_start_time: string(v.attr("daily_automatic_backup_start_time")),
        copy_tags_to_backups: boolean(v.attr("copy_tags_to_backups")),
        skip_final_backup: boolean(v.attr("skip_final_backup")),
        final_backup_tags: pairs(v.attr("final_backup_tags")),
        import_path: string(v.attr("import_path")),
        export_path: string(v.attr("export_path")),
        auto_import_policy: string(v.attr("auto_import_policy")),
        imported_file_chunk_size: int(v.attr("imported_file_chunk_size")),
        file_system_type_version: string(v.attr("file_system_type_version")),
        data_repositories: v
            .attr("data_repository")
            .elements()
            .iter()
            .map(data_repository_spec)
            .collect(),
        tags: pairs(v.attr("tags")),
    }
}

/// FSx reports "no events" as absent; a configured empty set stays an empty set (not null),
/// so `auto_export_events = []` reads back as written.
fn events_value(reported: Option<&[String]>, prior: &Value) -> Value {
    match reported.filter(|e| !e.is_empty()) {
        Some(events) => of_set(Some(events)),
        None if !prior.is_null() && !prior.is_unknown() && prior.elements().is_empty() => prior.clone(),
        None => Value::Null,
    }
}

fn data_repository_value(d: &DataRepositoryAssociation, prior: &Value) -> Value {
    object(vec![
        ("file_system_path", of_string(d.spec.file_system_path.clone())),
        ("data_repository_path", of_string(d.spec.data_repository_path.clone())),
        (
            "batch_import_meta_data_on_create",
            Value::Bool(d.spec.batch_import_meta_data_on_create.unwrap_or(false)),
        ),
        ("imported_file_chunk_size", of_int(d.spec.imported_file_chunk_size)),
        (
            "auto_import_events",
            events_value(d.spec.auto_import_events.as_deref(), prior.attr("auto_import_events")),
        ),
        (
            "auto_export_events",
            events_value(d.spec.auto_export_events.as_deref(), prior.attr("auto_export_events")),
        ),
        (
            "delete_data_in_file_system",
            Value::Bool(boolean(prior.attr("delete_data_in_file_system")).unwrap_or(false)),
        ),
        ("association_id", Value::string(&d.id)),
    ])
}

/// State from what FSx reports. Settings FSx does not report (security groups, final backup
/// settings, timeouts, user tags vs default tags) come from `prior`.
/// The release policy travels as tags on the file system, where the node agent reads it.
use crate::desired_state::tag::{
    RELEASE_UNACCESSED_DAYS as RELEASE_DAYS_TAG, RELEASE_USAGE_PERCENT as RELEASE_PERCENT_TAG,
};

fn policy_tags(v: &Value) -> Vec<(String, String)> {
    let p = v.attr("release_policy");
    match (int(p.attr("unaccessed_days")), int(p.attr("usage_percent"))) {
        (Some(days), percent) => vec![
            (RELEASE_DAYS_TAG.to_string(), days.to_string()),
            (RELEASE_PERCENT_TAG.to_string(), percent.unwrap_or(80).to_string()),
        ],
        _ => Vec::new(),
    }
}

/// The release policy FSx carries as the file system's tags (null without).
fn release_policy_value(reported: &[(String, String)]) -> Value {
    let tag = |k: &str| {
        reported
            .iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.parse::<i64>().ok())
    };
    match (tag(RELEASE_DAYS_TAG), tag(RELEASE_PERCENT_TAG)) {
        (Some(days), percent) => object(vec![
            ("unaccessed_days", Value::int(days)),
            ("usage_percent", Value::int(percent.unwrap_or(80))),
        ]),
        _ => Value::Null,
    }
}

/// The data repositories in the configured order (`prior`'s); new ones (import, drift) go last.
fn repositories_value(dras: &[DataRepositoryAssociation], prior: &Value) -> Value {
    let prior_repos = prior.attr("data_repository").elements();
    let prior_of = |d: &DataRepositoryAssociation| {
        prior_repos
            .iter()
            .find(|p| p.attr("file_system_path").as_str() == d.spec.file_system_path.as_deref())
    };
    let mut ordered: Vec<&DataRepositoryAssociation> = prior_repos
        .iter()
        .filter_map(|p| {
            dras.iter()
                .find(|d| d.spec.file_system_path.as_deref() == p.attr("file_system_path").as_str())
        })
        .collect();
    let mut rest: Vec<&DataRepositoryAssociation> =
        dras.iter().filter(|d| !ordered.iter().any(|o| o.id == d.id)).collect();
    rest.sort_by(|a, b| a.spec.file_system_path.cmp(&b.spec.file_system_path));
    ordered.extend(rest);
    Value::List(
        ordered
            .iter()
            .map(|d| data_repository_value(d, prior_of(d).unwrap_or(&Value::Null)))
            .collect(),
    )
}

/// The reported tags without the provider's own (`tags_all`), and of those the user's: all but
/// the default tags nobody overrode (`tags`, null when empty and unset before).
fn tags_values(reported: Vec<(String, String)>, prior: &Value, clients: &Clients) -> (Value, Value) {
    let tags_all: Vec<(String, String)> = reported
        .into_iter()
        .filter(|(k, _)| !k.starts_with(crate::desired_state::tag::PREFIX))
        .collect();
    let tags: Vec<(String, String)> = tags_all
        .iter()
        .filter(|(k, v)| {
            let prior_has = prior.attr("tags").entries().is_some_and(|m| m.contains_key(k));
            prior_has || clients.default_tags.get(k) != Some(v)
        })
        .cloned()
        .collect();
    let tags = if tags.is_empty() && prior.attr("tags").is_null() {
        Value::Null
    } else {
        of_map(&tags)
    };
    (of_map(&tags_all), tags)
}

fn state_of(fs: &LustreFileSystem, dras: &[DataRepositoryAssociation], prior: &Value, clients: &Clients) -> Value {
    let sp = &fs.spec;
    let reported = sp.tags.clone().unwrap_or_default();
    let release_policy = release_policy_value(&reported);
    let (tags_all, tags) = tags_values(reported, prior, clients);
    let repos = repositories_value(dras, prior);
    // FSx reports associations separately from the file system's settings.
    let skip_final_backup =
        boolean(prior.attr("skip_final_backup")).unwrap_or_else(|| default_skip_final_backup(sp) || !dras.is_empty());
    object(vec![
        ("id", Value::string(&fs.id)),
        ("arn", Value::string(&fs.arn)),
        ("dns_name", Value::string(&fs.dns_name)),
        ("mount_name", Value::string(&fs.mount_name)),
        ("network_interface_ids", of_list(Some(&fs.network_interface_ids))),
        ("vpc_id", Value::string(&fs.vpc_id)),
        ("owner_id", Value::string(&fs.owner_id)),
        (
            "mount_command",
            Value::string(fs.mount_command(clients.fsx.region(), MOUNT_POINT)),
        ),
        ("tags_all", tags_all),
        ("storage_capacity", of_int(sp.storage_capacity)),
        ("deployment_type", of_string(sp.deployment_type.clone())),
        (
            "storage_type",
            of_string(sp.storage_type.clone().or_else(|| Some("SSD".into()))),
        ),
        ("per_unit_storage_throughput", of_int(sp.per_unit_storage_throughput)),
        ("drive_cache_type", of_string(sp.drive_cache_type.clone())),
        (
            "data_compression_type",
            of_string(sp.data_compression_type.clone().or_else(|| Some("NONE".into()))),
        ),
        ("metadata_configuration", metadata_value(sp)),
        ("efa_enabled", Value::Bool(sp.efa_enabled.unwrap_or(false))),
        ("root_squash_configuration", root_squash_value(sp)),
        ("log_configuration", log_value(sp)),
        ("kms_key_id", of_string(sp.kms_key_id.clone())),
        ("subnet_ids", of_list(sp.subnet_ids.as_deref())),
        ("security_group_ids", prior.attr("security_group_ids").clone()),
        (
            "weekly_maintenance_start_time",
            of_string(sp.weekly_maintenance_start_time.clone()),
        ),
        (
            "automatic_backup_retention_days",
            of_int(sp.automatic_backup_retention_days.or(Some(0))),
        ),
        (
            "daily_automatic_backup_start_time",
            of_string(sp.daily_automatic_backup_start_time.clone()),
        ),
        (
            "copy_tags_to_backups",
            Value::Bool(sp.copy_tags_to_backups.unwrap_or(false)),
        ),
        ("skip_final_backup", Value::Bool(skip_final_backup)),
        ("final_backup_tags", prior.attr("final_backup_tags").clone()),
        ("import_path", of_string(sp.import_path.clone())),
        ("export_path", of_string(sp.export_path.clone())),
        ("auto_import_policy", of_string(sp.auto_import_policy.clone())),
        ("imported_file_chunk_size", of_int(sp.imported_file_chunk_size)),
        (
            "file_system_type_version",
            of_string(sp.file_system_type_version.clone()),
        ),
        ("tags", tags),
        ("data_repository", repos),
        ("timeouts", prior.attr("timeouts").clone()),
        ("release_policy", release_policy),
    ])
}

/// The `metadata_configuration` block FSx reports (absent: null).
fn metadata_value(sp: &LustreSpec) -> Value {
    sp.metadata_configuration
        .as_ref()
        .map(|m| object(vec![("mode", of_string(m.mode.clone())), ("iops", of_int(m.iops))]))
        .unwrap_or(Value::Null)
}

/// The `root_squash_configuration` block, null when FSx reports nothing squashed or exempt.
fn root_squash_value(sp: &LustreSpec) -> Value {
    let nids = |r: &RootSquashSpec| r.no_squash_nids.clone().filter(|n| !n.is_empty());
    sp.root_squash_configuration
        .as_ref()
        .filter(|r| r.root_squash.is_some() || nids(r).is_some())
        .map(|r| {
            object(vec![
                ("root_squash", of_string(r.root_squash.clone())),
                ("no_squash_nids", of_set(nids(r).as_deref())),
            ])
        })
        .unwrap_or(Value::Null)
}

/// The `log_configuration` block FSx reports (absent: null).
fn log_value(sp: &LustreSpec) -> Value {
    sp.log_configuration
        .as_ref()
        .map(|l| {
            object(vec![
                ("level", of_string(l.level.clone())),
                ("destination", of_string(l.destination.clone())),
            ])
        })
        .unwrap_or(Value::Null)
}

/// The configuration's settings with this provider's defaults applied, for the rules.
fn config_spec(config: &Value) -> LustreSpec {
    let mut spec = spec_of(config);
    if spec.skip_final_backup.is_none() {
        spec.skip_final_backup = Some(default_skip_final_backup(&spec));
    }
    spec
}

/// FSx backs up only persistent file systems not linked to S3 (CreateBackup).
fn default_skip_final_backup(spec: &LustreSpec) -> bool {
    let scratch = spec.deployment_type.as_deref().is_none_or(|d| d.starts_with("SCRATCH"));
    scratch || spec.import_path.is_some() || !spec.data_repositories.is_empty()
}

fn violations_to_diags(violations: Vec<rules::Violation>) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for v in violations {
        diags.error_at(convert::path(&v.path, MAP_ATTRS), v.summary, v.detail);
    }
    diags
}

// ---------------------------------------------------------------------------------------------
// The resource
// ---------------------------------------------------------------------------------------------

#[async_trait]
impl Resource for LustreFs {
    fn type_name(&self) -> &'static str {
        "hpc_lustre_fs"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn validate(&self, req: ValidateRequest) -> Diagnostics {
        // Cross-attribute rules cannot tell "unset" from "known later": check once all is known
        // (Terraform validates again, with known values, before it applies).
        if !req.config.is_wholly_known() {
            return Diagnostics::new();
        }
        let mut diags = violations_to_diags(rules::validate(&config_spec(&req.config)));
        let policy = req.config.attr("release_policy");
        if !policy.is_null() {
            let at = |a: &str| tfplugin::AttributePath::root("release_policy").attr(a);
            if let Some(d) = int(policy.attr("unaccessed_days")).filter(|d| !(1..=3650).contains(d)) {
                diags.error_at(
                    at("unaccessed_days"),
                    format!("unaccessed_days {d} is out of range"),
                    "Use 1 to 3650 days.",
                );
            }
            if let Some(p) = int(policy.attr("usage_percent")).filter(|p| !(0..=99).contains(p)) {
                diags.error_at(
                    at("usage_percent"),
                    format!("usage_percent {p} is out of range"),
                    "Use 0 to 99.",
                );
            }
            let linked =
                !req.config.attr("import_path").is_null() || !req.config.attr("data_repository").elements().is_empty();
            if !linked {
                diags.error_at(
                    tfplugin::AttributePath::root("release_policy"),
                    "release_policy needs an S3 data repository",
                    "Releasing keeps files in S3 and frees the file system: add a data_repository block (or import_path).",
                );
            }
        }
        diags
    }

    async fn modify_plan(&self, req: &mut PlanRequest) {
        let planned = &mut req.planned;
        let spec = spec_of(planned);
        if req.config.attr("skip_final_backup").is_null() {
            let default = if spec.import_path.is_none() && planned.attr("import_path").is_unknown() {
                Value::Unknown
            } else {
                Value::Bool(default_skip_final_backup(&spec))
            };
            planned.set_attr("skip_final_backup", default);
        }
        // tags_all: the resource's tags over the provider's default tags.
        if let Ok(clients) = Clients::of(&req.ctx) {
            clients.plan_tags_all(planned);
        }
        // Data repositories are matched by file_system_path, not by list position.
        let prior_repos = req.prior.attr("data_repository").elements().to_vec();
        if let Value::List(repos) = planned.attr("data_repository").clone() {
            let realigned = repos
                .into_iter()
                .map(|mut r| {
                    let same = prior_repos.iter().find(|p| {
                        p.attr("file_system_path") == r.attr("file_system_path")
                            && p.attr("data_repository_path") == r.attr("data_repository_path")
                    });
                    let id = same.map(|p| p.attr("association_id").clone()).unwrap_or(Value::Unknown);
                    r.set_attr("association_id", id);
                    if r.attr("imported_file_chunk_size").is_null() || r.attr("imported_file_chunk_size").is_unknown() {
                        let prior_chunk = same
                            .map(|p| p.attr("imported_file_chunk_size").clone())
                            .unwrap_or(Value::Unknown);
                        r.set_attr("imported_file_chunk_size", prior_chunk);
                    }
                    r
                })
                .collect();
            planned.set_attr("data_repository", Value::List(realigned));
        }
        if req.prior.is_null() {
            // A plan made with values known only now is checked here (validate skipped it).
            if planned_is_checkable(&req.config) {
                req.diagnostics
                    .extend(violations_to_diags(rules::validate(&config_spec(&req.config))));
            }
            return;
        }
        let old = spec_of(&req.prior);
        let mut new = spec_of(&req.planned);
        // FSx does not report security groups: an imported file system has none in state, and
        // recording the configured ones is not a change to the file system.
        if req.prior.attr("security_group_ids").is_null() {
            new.security_group_ids = None;
        }
        for p in rules::replacement_paths(&old, &new) {
            req.requires_replace.push(convert::path(&p, MAP_ATTRS));
        }
        if planned_is_checkable(&req.config) {
            req.diagnostics
                .extend(violations_to_diags(rules::validate(&config_spec(&req.config))));
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let timeout = timeouts::get(&req.planned, "create", CREATE_TIMEOUT);
        let mut spec = spec_of(&req.planned);
        let mut tags = clients.tags_all(&spec.tags.clone().unwrap_or_default());
        tags.extend(policy_tags(&req.planned));
        spec.tags = Some(tags);
        let created = match clients.fsx.create_lustre_once(&spec).await {
            Ok(fs) => fs,
            Err(e) => return ApplyOutcome::failed(Value::Null, aws_diag("Cannot create Lustre file system", &e)),
        };
        tracing::info!(file_system = %created.id, "created Lustre file system, waiting for AVAILABLE");
        // From here on, a failure still records the file system (tainted) so it is not leaked.
        let partial = state_of(&created, &[], &req.planned, clients);
        let fs = match or_stop(
            &req.ctx,
            "waiting for Lustre file system",
            clients.fsx.wait_lustre_available(&created.id, timeout),
        )
        .await
        {
            Ok(fs) => fs,
            Err(e) => {
                return ApplyOutcome::failed(partial, aws_diag("Lustre file system did not become available", &e))
            }
        };
        let tags = spec.tags.clone().unwrap_or_default();
        let mut diags = Diagnostics::new();
        for repo in &spec.data_repositories {
            if let Err(e) = create_repository(&req.ctx, clients, &fs.id, repo, &tags, timeout).await {
                diags.extend(aws_diag("Cannot create data repository association", &e));
                break;
            }
        }
        match read_state(clients, &fs.id, &req.planned).await {
            Ok(Some(state)) => ApplyOutcome {
                state,
                diagnostics: diags,
            },
            Ok(None) => ApplyOutcome::failed(
                partial,
                Diagnostic::error("Lustre file system vanished after create", fs.id),
            ),
            Err(e) => {
                diags.extend(aws_diag("Cannot read Lustre file system after create", &e));
                ApplyOutcome::failed(partial, diags)
            }
        }
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let Some(id) = req.state.attr("id").as_str() else {
            return Ok(None);
        };
        read_state(clients, id, &req.state)
            .await
            .map_err(|e| aws_diag("Cannot read Lustre file system", &e))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(req.prior, d),
        };
        let Some(id) = req.prior.attr("id").as_str().map(str::to_string) else {
            return ApplyOutcome::failed(
                req.prior,
                Diagnostic::error("Lustre file system has no id in state", ""),
            );
        };
        let timeout = timeouts::get(&req.planned, "update", UPDATE_TIMEOUT);
        let old = spec_of(&req.prior);
        let new = spec_of(&req.planned);
        let mut diags = Diagnostics::new();
        let steps = async {
            or_stop(
                &req.ctx,
                "updating Lustre file system",
                clients.fsx.update_lustre(&id, &old, &new, timeout),
            )
            .await?;
            let arn = req.prior.attr("arn").as_str().unwrap_or_default().to_string();
            let mut old_tags = pairs(req.prior.attr("tags_all")).unwrap_or_default();
            old_tags.extend(policy_tags(&req.prior));
            let mut new_tags = pairs(req.planned.attr("tags_all")).unwrap_or_default();
            new_tags.extend(policy_tags(&req.planned));
            if old_tags != new_tags {
                clients.fsx.update_tags(&arn, &old_tags, &new_tags).await?;
            }
            sync_repositories(&req.ctx, clients, &id, &req.prior, &req.planned, &new_tags, timeout).await
        };
        if let Err(e) = steps.await {
            diags.extend(aws_diag("Cannot update Lustre file system", &e));
        }
        match read_state(clients, &id, &req.planned).await {
            Ok(Some(state)) => ApplyOutcome {
                state,
                diagnostics: diags,
            },
            Ok(None) => ApplyOutcome::failed(
                Value::Null,
                Diagnostic::error("Lustre file system vanished during update", id),
            ),
            Err(e) => {
                diags.extend(aws_diag("Cannot read Lustre file system after update", &e));
                ApplyOutcome::failed(req.prior, diags)
            }
        }
    }

    async fn delete(&self, req: DeleteRequest) -> Diagnostics {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let Some(id) = req.prior.attr("id").as_str() else {
            return Diagnostics::new();
        };
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        let skip = boolean(req.prior.attr("skip_final_backup")).unwrap_or(true);
        let backup_tags = pairs(req.prior.attr("final_backup_tags")).unwrap_or_default();
        let result = async {
            clients.fsx.delete_lustre(id, skip, &backup_tags).await?;
            or_stop(
                &req.ctx,
                "deleting Lustre file system",
                clients.fsx.wait_lustre_deleted(id, timeout),
            )
            .await
        };
        match result.await {
            Ok(()) => Diagnostics::new(),
            Err(e) => aws_diag("Cannot delete Lustre file system", &e),
        }
    }

    async fn import(&self, req: ImportRequest) -> Result<Value, Diagnostics> {
        let id = req.id.trim();
        if !id.starts_with("fs-") {
            return Err(Diagnostic::error(
                "Invalid import id",
                format!("{id:?} is not an FSx file system id; use the id, e.g. fs-0123456789abcdef0."),
            )
            .into());
        }
        let mut v = tfplugin::Value::null_object(&schema().ty());
        v.set_attr("id", Value::string(id));
        v.set_attr("data_repository", Value::List(Vec::new()));
        Ok(v)
    }
}

fn planned_is_checkable(config: &Value) -> bool {
    config.is_wholly_known()
}

async fn read_state(clients: &Clients, id: &str, prior: &Value) -> hpc_aws::Result<Option<Value>> {
    let Some((fs, dras)) = clients.fsx.read_lustre(id).await? else {
        return Ok(None);
    };
    if fs.lifecycle == "DELETING" {
        return Ok(None);
    }
    Ok(Some(state_of(&fs, &dras, prior, clients)))
}

async fn create_repository(
    ctx: &Ctx,
    clients: &Clients,
    fs_id: &str,
    repo: &DataRepositorySpec,
    tags: &[(String, String)],
    timeout: Duration,
) -> hpc_aws::Result<()> {
    let dra = clients.fsx.create_data_repository_once(fs_id, repo, tags).await?;
    or_stop(
        ctx,
        "creating data repository association",
        clients.fsx.wait_data_repository(&dra.id, false, timeout),
    )
    .await
}

/// Makes the file system's data repository associations match the plan: removed ones are
/// deleted, new ones created, changed ones updated (a changed S3 path means delete + create).
async fn sync_repositories(
    ctx: &Ctx,
    clients: &Clients,
    fs_id: &str,
    prior: &Value,
    planned: &Value,
    tags: &[(String, String)],
    timeout: Duration,
) -> hpc_aws::Result<()> {
    let prior_repos = prior.attr("data_repository").elements();
    let planned_repos = planned.attr("data_repository").elements();
    let key = |v: &Value| {
        (
            string(v.attr("file_system_path")),
            string(v.attr("data_repository_path")),
        )
    };
    for p in prior_repos {
        if !planned_repos.iter().any(|n| key(n) == key(p)) {
            if let Some(id) = p.attr("association_id").as_str() {
                let delete_data = boolean(p.attr("delete_data_in_file_system")).unwrap_or(false);
                clients.fsx.delete_data_repository(id, delete_data).await?;
                or_stop(
                    ctx,
                    "deleting data repository association",
                    clients.fsx.wait_data_repository(id, true, timeout),
                )
                .await?;
            }
        }
    }
    for n in planned_repos {
        let spec = data_repository_spec(n);
        match prior_repos.iter().find(|p| key(p) == key(n)) {
            None => create_repository(ctx, clients, fs_id, &spec, tags, timeout).await?,
            Some(p) => {
                let old = data_repository_spec(p);
                let changed = old.auto_import_events != spec.auto_import_events
                    || old.auto_export_events != spec.auto_export_events
                    || (spec.imported_file_chunk_size.is_some()
                        && old.imported_file_chunk_size != spec.imported_file_chunk_size);
                if let (true, Some(id)) = (changed, p.attr("association_id").as_str()) {
                    clients.fsx.update_data_repository(id, &spec).await?;
                    or_stop(
                        ctx,
                        "updating data repository association",
                        clients.fsx.wait_data_repository(id, false, timeout),
                    )
                    .await?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_well_formed() {
        schema().check().expect("hpc_lustre_fs schema");
    }

    fn config() -> Value {
        let mut v = Value::null_object(&schema().ty());
        v.set_attr("storage_capacity", Value::int(1000));
        v.set_attr("deployment_type", Value::string("PERSISTENT_2"));
        v.set_attr("per_unit_storage_throughput", Value::int(125));
        v.set_attr(
            "subnet_ids",
            Value::List(vec![Value::string("subnet-0123456789abcdef0")]),
        );
        v.set_attr("data_repository", Value::List(vec![]));
        v
    }

    #[tokio::test]
    async fn bad_capacity_is_rejected_with_its_path() {
        let diags = LustreFs.validate(ValidateRequest { config: config() }).await;
        assert!(diags.has_errors());
        let d = &diags.0[0];
        assert_eq!(
            d.path.as_ref().map(ToString::to_string).as_deref(),
            Some("storage_capacity")
        );
        assert!(d.detail.contains("2400"), "{d}");
    }

    #[tokio::test]
    async fn unknown_values_defer_validation() {
        let mut c = config();
        c.set_attr("subnet_ids", Value::Unknown);
        assert!(LustreFs.validate(ValidateRequest { config: c }).await.is_empty());
    }

    #[test]
    fn skip_final_backup_defaults_follow_what_fsx_can_back_up() {
        let mut s = LustreSpec {
            deployment_type: Some("PERSISTENT_2".into()),
            ..LustreSpec::default()
        };
        assert!(!default_skip_final_backup(&s));
        s.deployment_type = Some("SCRATCH_2".into());
        assert!(default_skip_final_backup(&s));
        s.deployment_type = Some("PERSISTENT_1".into());
        s.import_path = Some("s3://b".into());
        assert!(default_skip_final_backup(&s));
    }

    #[tokio::test]
    async fn linked_to_s3_without_skip_final_backup_is_valid() {
        let mut c = config();
        c.set_attr("storage_capacity", Value::int(1200));
        c.set_attr(
            "data_repository",
            Value::List(vec![object(vec![
                ("file_system_path", Value::string("/datasets")),
                ("data_repository_path", Value::string("s3://bucket/datasets")),
                ("batch_import_meta_data_on_create", Value::Null),
                ("imported_file_chunk_size", Value::Null),
                ("auto_import_events", Value::Null),
                ("auto_export_events", Value::Null),
                ("delete_data_in_file_system", Value::Null),
                ("association_id", Value::Null),
            ])]),
        );
        let diags = LustreFs.validate(ValidateRequest { config: c }).await;
        assert!(diags.is_empty(), "{diags}");
    }

    #[test]
    fn spec_round_trips_through_the_model() {
        let mut c = config();
        c.set_attr("storage_capacity", Value::int(2400));
        c.set_attr(
            "metadata_configuration",
            object(vec![
                ("mode", Value::string("USER_PROVISIONED")),
                ("iops", Value::int(3000)),
            ]),
        );
        let spec = spec_of(&c);
        assert_eq!(spec.storage_capacity, Some(2400));
        assert_eq!(
            spec.metadata_configuration,
            Some(MetadataSpec {
                mode: Some("USER_PROVISIONED".into()),
                iops: Some(3000)
            })
        );
        assert_eq!(spec.subnet_ids, Some(vec!["subnet-0123456789abcdef0".to_string()]));
    }
}
