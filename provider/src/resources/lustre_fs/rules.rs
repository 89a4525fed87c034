//! Plan-time validation of hpc_lustre_fs arguments: every rule FSx documents, checked without an API call.
//!
//! The rules come from the Amazon FSx API Reference (`CreateFileSystem`,
//! `CreateFileSystemLustreConfiguration`, `CreateFileSystemLustreMetadataConfiguration`,
//! `LustreLogCreateConfiguration`, `LustreRootSquashConfiguration`, `UpdateFileSystem`,
//! `CreateDataRepositoryAssociation`, `DeleteFileSystemLustreConfiguration`, `Tag`) and the
//! FSx for Lustre User Guide. Each check names its source in a comment.
//!
//! How `None` is read:
//! * Format and range rules only look at values that are `Some`.
//! * Rules that depend on another attribute use the FSx default when that attribute is `None`:
//!   `deployment_type` = `SCRATCH_1`, `storage_type` = `SSD`, `skip_final_backup` = `true`,
//!   `file_system_type_version` = 2.10 (2.12 for `PERSISTENT_2`, 2.15 for `PERSISTENT_2` with a
//!   metadata configuration).
//! * "X is required" and "X needs Y" rules treat `None` as unset. `LustreSpec` cannot tell an
//!   unset value from one that is unknown at plan time, so a caller that maps unknown values to
//!   `None` should skip `validate` (or drop those violations) until the values are known.

use std::collections::HashSet;

use hpc_aws::fsx::{DataRepositorySpec, LustreSpec};

/// A value from the configuration: `None` means unset OR not yet known at plan time; rules only check known values.
/// One broken rule. `path` is the attribute path from the resource root, e.g. ["storage_capacity"],
/// ["metadata_configuration", "iops"], ["data_repository", "1", "data_repository_path"] (list index as a decimal string).
#[rustfmt::skip]
#[derive(Debug, Clone, PartialEq)]
pub struct Violation { pub path: Vec<String>, pub summary: String, pub detail: String }

// ---------------------------------------------------------------------------------------------
// Documented limits
// ---------------------------------------------------------------------------------------------

/// CreateFileSystem: StorageCapacity is a 32-bit integer.
const STORAGE_CAPACITY_MAX: i64 = i32::MAX as i64;
/// CreateFileSystemLustreConfiguration: AutomaticBackupRetentionDays 0..=90.
const MAX_BACKUP_RETENTION_DAYS: i64 = 90;
/// CreateFileSystemLustreConfiguration / CreateDataRepositoryAssociation: ImportedFileChunkSize 1..=512000 MiB.
const CHUNK_SIZE_MIN: i64 = 1;
const CHUNK_SIZE_MAX: i64 = 512_000;
/// ArchivePath (ImportPath, ExportPath, DataRepositoryPath): 3..=4357 characters.
const ARCHIVE_PATH_MIN: usize = 3;
const ARCHIVE_PATH_MAX: usize = 4357;
/// Namespace (FileSystemPath): 1..=4096 characters.
const NAMESPACE_MAX: usize = 4096;
/// Characters the ArchivePath and Namespace patterns exclude.
const FORBIDDEN_PATH_CHARS: [char; 6] = ['\u{0000}', '\u{0085}', '\u{2028}', '\u{2029}', '\r', '\n'];
/// CreateDataRepositoryAssociation: at most 8 associations per file system.
const MAX_DATA_REPOSITORY_ASSOCIATIONS: usize = 8;
/// EventTypes: at most 3 items.
const MAX_EVENTS: usize = 3;
const EVENT_TYPES: [&str; 3] = ["NEW", "CHANGED", "DELETED"];
/// CreateFileSystem: Tags and DeleteFileSystemLustreConfiguration: FinalBackupTags, at most 50.
const MAX_TAGS: usize = 50;
const TAG_KEY_MAX: usize = 128;
const TAG_VALUE_MAX: usize = 256;
/// CreateFileSystem: SecurityGroupIds, at most 50.
const MAX_SECURITY_GROUPS: usize = 50;
/// LustreRootSquashConfiguration: NoSquashNids at most 64, each 11..=43 characters.
const MAX_NO_SQUASH_NIDS: usize = 64;
const NID_MIN: usize = 11;
const NID_MAX: usize = 43;
/// LustreRootSquashConfiguration: UID and GID range 0..=4294967294.
const ROOT_SQUASH_ID_MAX: u64 = 4_294_967_294;
/// KmsKeyId: 1..=2048 characters.
const KMS_KEY_ID_MAX: usize = 2048;
/// GeneralARN (log destination): 8..=1024 characters.
const ARN_MIN: usize = 8;
const ARN_MAX: usize = 1024;
/// MetadataIops: 1500, 3000, 6000, 12000, then multiples of 12000 up to 192000.
const METADATA_IOPS_SMALL: [i64; 4] = [1500, 3000, 6000, 12000];
const METADATA_IOPS_STEP: i64 = 12_000;
const METADATA_IOPS_MAX: i64 = 192_000;
/// FileSystemTypeVersion values documented for FSx for Lustre.
const DOCUMENTED_VERSIONS: [&str; 3] = ["2.10", "2.12", "2.15"];

/// Top-level attribute names in the order `validate` reports them.
const ATTRIBUTE_ORDER: [&str; 26] = [
    "storage_capacity",
    "deployment_type",
    "storage_type",
    "per_unit_storage_throughput",
    "drive_cache_type",
    "data_compression_type",
    "metadata_configuration",
    "efa_enabled",
    "root_squash_configuration",
    "log_configuration",
    "kms_key_id",
    "subnet_ids",
    "security_group_ids",
    "weekly_maintenance_start_time",
    "automatic_backup_retention_days",
    "daily_automatic_backup_start_time",
    "copy_tags_to_backups",
    "skip_final_backup",
    "final_backup_tags",
    "import_path",
    "export_path",
    "auto_import_policy",
    "imported_file_chunk_size",
    "file_system_type_version",
    "data_repository",
    "tags",
];

// ---------------------------------------------------------------------------------------------
// Typed views of the enumerations
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deployment {
    Scratch1,
    Scratch2,
    Persistent1,
    Persistent2,
}

impl Deployment {
    const ALL: [Deployment; 4] = [
        Deployment::Scratch1,
        Deployment::Scratch2,
        Deployment::Persistent1,
        Deployment::Persistent2,
    ];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == s)
    }

    fn name(self) -> &'static str {
        match self {
            Deployment::Scratch1 => "SCRATCH_1",
            Deployment::Scratch2 => "SCRATCH_2",
            Deployment::Persistent1 => "PERSISTENT_1",
            Deployment::Persistent2 => "PERSISTENT_2",
        }
    }

    fn is_scratch(self) -> bool {
        matches!(self, Deployment::Scratch1 | Deployment::Scratch2)
    }

    /// The deployment in effect: FSx uses SCRATCH_1 when none is given; an unrecognised name has none.
    fn effective(value: &Option<String>) -> Option<Self> {
        match value {
            None => Some(Deployment::Scratch1),
            Some(s) => Self::parse(s),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Storage {
    Ssd,
    Hdd,
    IntelligentTiering,
}

impl Storage {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "SSD" => Some(Storage::Ssd),
            "HDD" => Some(Storage::Hdd),
            "INTELLIGENT_TIERING" => Some(Storage::IntelligentTiering),
            _ => None,
        }
    }

    /// The storage class in effect: FSx uses SSD when none is given.
    fn effective(value: &Option<String>) -> Option<Self> {
        match value {
            None => Some(Storage::Ssd),
            Some(s) => Self::parse(s),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LustreVersion {
    major: u32,
    minor: u32,
}

impl LustreVersion {
    const V2_10: LustreVersion = LustreVersion { major: 2, minor: 10 };
    const V2_12: LustreVersion = LustreVersion { major: 2, minor: 12 };
    const V2_15: LustreVersion = LustreVersion { major: 2, minor: 15 };

    /// Parses "major.minor" made of ASCII digits.
    fn parse(s: &str) -> Option<Self> {
        let (major, minor) = s.split_once('.')?;
        if !is_ascii_digits(major) || !is_ascii_digits(minor) {
            return None;
        }
        Some(LustreVersion {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// CreateFileSystem FileSystemTypeVersion: the default when none is given.
    fn default_for(deployment: Deployment, has_metadata_configuration: bool) -> Self {
        match (deployment, has_metadata_configuration) {
            (Deployment::Persistent2, true) => Self::V2_15,
            (Deployment::Persistent2, false) => Self::V2_12,
            _ => Self::V2_10,
        }
    }
}

/// What validation knows about the file system as a whole.
struct Ctx {
    deployment: Option<Deployment>,
    storage: Option<Storage>,
    /// Linked to S3 through the legacy import path or through data repository associations.
    linked_to_s3: bool,
    version: Option<LustreVersion>,
}

impl Ctx {
    fn new(spec: &LustreSpec) -> Self {
        let deployment = Deployment::effective(&spec.deployment_type);
        let version = match &spec.file_system_type_version {
            Some(v) => LustreVersion::parse(v),
            None => deployment.map(|d| LustreVersion::default_for(d, spec.metadata_configuration.is_some())),
        };
        Ctx {
            deployment,
            storage: Storage::effective(&spec.storage_type),
            linked_to_s3: spec.import_path.is_some() || !spec.data_repositories.is_empty(),
            version,
        }
    }

    fn is_scratch(&self) -> bool {
        self.deployment.is_some_and(Deployment::is_scratch)
    }

    fn deployment_name(&self) -> &'static str {
        self.deployment.map_or("this deployment type", Deployment::name)
    }
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// All violations, in attribute order; empty means valid.
pub fn validate(spec: &LustreSpec) -> Vec<Violation> {
    let ctx = Ctx::new(spec);
    let mut out = Vec::new();
    check_storage_capacity(spec, &ctx, &mut out);
    check_deployment_type(spec, &mut out);
    check_storage_type(spec, &ctx, &mut out);
    check_throughput(spec, &ctx, &mut out);
    check_drive_cache(spec, &ctx, &mut out);
    check_data_compression(spec, &mut out);
    check_metadata(spec, &ctx, &mut out);
    check_efa(spec, &ctx, &mut out);
    check_root_squash(spec, &mut out);
    check_log_configuration(spec, &mut out);
    check_kms_key(spec, &ctx, &mut out);
    check_subnets(spec, &mut out);
    check_security_groups(spec, &mut out);
    check_weekly_maintenance(spec, &mut out);
    check_backups(spec, &ctx, &mut out);
    check_legacy_data_repository(spec, &ctx, &mut out);
    check_file_system_type_version(spec, &ctx, &mut out);
    check_data_repositories(spec, &ctx, &mut out);
    if let Some(tags) = &spec.tags {
        check_tag_list("tags", tags, &mut out);
    }
    out.sort_by_key(order_key);
    out
}

/// Capacity rule for a deployment/storage/throughput combination, e.g. "1200, 2400, or a multiple
/// of 2400 GiB", as the messages word it (the tests read each combination's through it).
#[cfg(test)]
fn capacity_rule(deployment_type: &str, storage_type: &str, per_unit_storage_throughput: Option<i64>) -> String {
    let Some(deployment) = Deployment::parse(deployment_type) else {
        return format!("no capacity rule: \"{deployment_type}\" is not a Lustre deployment type");
    };
    let Some(storage) = Storage::parse(storage_type) else {
        return format!("no capacity rule: \"{storage_type}\" is not a Lustre storage type");
    };
    match (
        storage,
        capacity_steps(deployment, storage, per_unit_storage_throughput),
    ) {
        (_, Some(steps)) => steps.describe(),
        (Storage::Hdd, None) if deployment == Deployment::Persistent1 => {
            "a multiple of 6000 GiB (12 MB/s/TiB) or a multiple of 1800 GiB (40 MB/s/TiB)".to_string()
        }
        (Storage::Hdd, None) => "no capacity rule: HDD storage requires PERSISTENT_1".to_string(),
        (Storage::IntelligentTiering, None) => "no capacity rule: Intelligent-Tiering storage is elastic".to_string(),
        (Storage::Ssd, None) => "no capacity rule for this combination".to_string(),
    }
}

/// Whether an in-place change from `old` to `new` spec is possible, or which attribute forces replacement. Storage can only grow
/// in place (shrinking forces replacement); list which attributes FSx UpdateFileSystem can change for Lustre and return the
/// paths of changed attributes that it cannot change.
///
/// UpdateFileSystem changes these Lustre attributes in place: `auto_import_policy`,
/// `automatic_backup_retention_days`, `daily_automatic_backup_start_time`, `data_compression_type`,
/// `file_system_type_version` (upgrades only), `log_configuration`, `root_squash_configuration`,
/// `metadata_configuration` (only on a file system created with one; Metadata IOPS never
/// decrease), `per_unit_storage_throughput` (persistent SSD without EFA), `storage_capacity` (grow
/// only, not SCRATCH_1) and `weekly_maintenance_start_time`. Tags change through
/// TagResource/UntagResource, `skip_final_backup`/`final_backup_tags` only matter at deletion, and
/// `data_repository` blocks change through the data repository association API; none of those
/// replace the file system. Every other attribute is fixed at creation.
///
/// A `None` in `new` means "not configured or not known yet" and counts as no change, except for
/// attributes with a fixed FSx default (`deployment_type`, `storage_type`, `efa_enabled`,
/// `copy_tags_to_backups`), which are compared with that default applied.
pub fn replacement_paths(old: &LustreSpec, new: &LustreSpec) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let old_deployment = Deployment::effective(&old.deployment_type);
    let old_storage = Storage::effective(&old.storage_type);
    let old_efa = old.efa_enabled.unwrap_or(false);

    // UpdateFileSystem StorageCapacity: the target must be greater than the current capacity, and
    // SCRATCH_1 capacity cannot be increased.
    if let (Some(before), Some(after)) = (old.storage_capacity, new.storage_capacity) {
        let scratch_1 = old_deployment == Some(Deployment::Scratch1);
        if after < before || (after > before && scratch_1) {
            out.push(path(&["storage_capacity"]));
        }
    }
    if old.deployment_type.as_deref().unwrap_or("SCRATCH_1") != new.deployment_type.as_deref().unwrap_or("SCRATCH_1") {
        out.push(path(&["deployment_type"]));
    }
    if old.storage_type.as_deref().unwrap_or("SSD") != new.storage_type.as_deref().unwrap_or("SSD") {
        out.push(path(&["storage_type"]));
    }
    // UpdateFileSystemLustreConfiguration PerUnitStorageThroughput: persistent SSD file systems only;
    // EFA-enabled file systems cannot change it.
    if changed(&old.per_unit_storage_throughput, &new.per_unit_storage_throughput) {
        let persistent = old_deployment.is_some_and(|d| !d.is_scratch());
        if !(persistent && old_storage == Some(Storage::Ssd) && !old_efa) {
            out.push(path(&["per_unit_storage_throughput"]));
        }
    }
    if changed(&old.drive_cache_type, &new.drive_cache_type) {
        out.push(path(&["drive_cache_type"]));
    }
    out.extend(metadata_replacement(old, new));
    if old_efa != new.efa_enabled.unwrap_or(false) {
        out.push(path(&["efa_enabled"]));
    }
    if changed(&old.kms_key_id, &new.kms_key_id) {
        out.push(path(&["kms_key_id"]));
    }
    if changed(&old.subnet_ids, &new.subnet_ids) {
        out.push(path(&["subnet_ids"]));
    }
    if let Some(after) = &new.security_group_ids {
        let before: HashSet<&str> = old.security_group_ids.iter().flatten().map(String::as_str).collect();
        let after: HashSet<&str> = after.iter().map(String::as_str).collect();
        if before != after {
            out.push(path(&["security_group_ids"]));
        }
    }
    if old.copy_tags_to_backups.unwrap_or(false) != new.copy_tags_to_backups.unwrap_or(false) {
        out.push(path(&["copy_tags_to_backups"]));
    }
    if changed(&old.import_path, &new.import_path) {
        out.push(path(&["import_path"]));
    }
    if changed(&old.export_path, &new.export_path) {
        out.push(path(&["export_path"]));
    }
    if changed(&old.imported_file_chunk_size, &new.imported_file_chunk_size) {
        out.push(path(&["imported_file_chunk_size"]));
    }
    // UpdateFileSystem FileSystemTypeVersion: the new version must be newer than the current one.
    let version = |spec: &LustreSpec| spec.file_system_type_version.as_deref().and_then(LustreVersion::parse);
    if let (Some(before), Some(after)) = (version(old), version(new)) {
        if after < before {
            out.push(path(&["file_system_type_version"]));
        }
    }
    out
}

/// Managing metadata performance: a metadata configuration can't be added after creation, and
/// the Metadata IOPS value can only grow.
fn metadata_replacement(old: &LustreSpec, new: &LustreSpec) -> Option<Vec<String>> {
    match (&old.metadata_configuration, &new.metadata_configuration) {
        (None, Some(_)) => Some(path(&["metadata_configuration"])),
        (Some(before), Some(after)) => match (before.iops, after.iops) {
            (Some(b), Some(a)) if a < b => Some(path(&["metadata_configuration", "iops"])),
            _ => None,
        },
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Checks, one attribute (or block) each
// ---------------------------------------------------------------------------------------------

/// CreateFileSystem StorageCapacity.
fn check_storage_capacity(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let rule = capacity_rule_for(spec, ctx);
    let Some(capacity) = spec.storage_capacity else {
        let detail = match &rule {
            Some(steps) => format!("Set storage_capacity in GiB: {}.", steps.describe()),
            None => "Set storage_capacity in GiB.".to_string(),
        };
        out.push(violation(&["storage_capacity"], "storage_capacity is required", detail));
        return;
    };
    if !(1..=STORAGE_CAPACITY_MAX).contains(&capacity) {
        out.push(violation(
            &["storage_capacity"],
            format!("storage_capacity {capacity} is out of range"),
            format!("Use a positive number of GiB no larger than {STORAGE_CAPACITY_MAX}."),
        ));
        return;
    }
    if let Some(steps) = rule {
        if !steps.allows(capacity) {
            out.push(violation(
                &["storage_capacity"],
                format!(
                    "storage_capacity {capacity} is not valid for {}",
                    combination_label(spec, ctx)
                ),
                format!("Use {}.", steps.describe()),
            ));
        }
    }
}

/// CreateFileSystemLustreConfiguration DeploymentType.
fn check_deployment_type(spec: &LustreSpec, out: &mut Vec<Violation>) {
    if let Some(value) = &spec.deployment_type {
        if Deployment::parse(value).is_none() {
            out.push(violation(
                &["deployment_type"],
                format!("deployment_type \"{value}\" is not a Lustre deployment type"),
                "Use SCRATCH_1, SCRATCH_2, PERSISTENT_1, or PERSISTENT_2.",
            ));
        }
    }
}

/// CreateFileSystem StorageType: HDD only on PERSISTENT_1 Lustre file systems.
fn check_storage_type(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let Some(value) = &spec.storage_type else {
        return;
    };
    match Storage::parse(value) {
        None => out.push(violation(
            &["storage_type"],
            format!("storage_type \"{value}\" is not a Lustre storage type"),
            "Use SSD or HDD.",
        )),
        Some(Storage::IntelligentTiering) => out.push(violation(
            &["storage_type"],
            "storage_type INTELLIGENT_TIERING is not supported by hpc_lustre_fs",
            "Use SSD or HDD. Intelligent-Tiering needs throughput_capacity and a read cache \
             configuration, which this resource does not manage.",
        )),
        Some(Storage::Hdd) => {
            if let Some(d) = ctx.deployment.filter(|d| *d != Deployment::Persistent1) {
                out.push(violation(
                    &["storage_type"],
                    format!("storage_type HDD is not available for {}", d.name()),
                    "Use SSD, or set deployment_type to PERSISTENT_1 for HDD storage.",
                ));
            }
        }
        Some(Storage::Ssd) => {}
    }
}

/// CreateFileSystemLustreConfiguration PerUnitStorageThroughput.
fn check_throughput(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let Some(deployment) = ctx.deployment else {
        return;
    };
    if deployment.is_scratch() {
        if let Some(t) = spec.per_unit_storage_throughput {
            out.push(violation(
                &["per_unit_storage_throughput"],
                format!(
                    "per_unit_storage_throughput {t} is not supported on {}",
                    deployment.name()
                ),
                "Remove per_unit_storage_throughput; scratch file systems have a fixed baseline of \
                 200 MB/s/TiB. Use a PERSISTENT deployment type to choose a throughput tier.",
            ));
        }
        return;
    }
    let Some(allowed) = ctx.storage.and_then(|s| throughput_tiers(deployment, s)) else {
        return;
    };
    match spec.per_unit_storage_throughput {
        None => out.push(violation(
            &["per_unit_storage_throughput"],
            format!(
                "per_unit_storage_throughput is required for {}",
                combination_name(deployment, ctx.storage)
            ),
            format!("Set it to one of {} MB/s/TiB.", join_numbers(allowed)),
        )),
        Some(t) if !allowed.contains(&t) => out.push(violation(
            &["per_unit_storage_throughput"],
            format!(
                "per_unit_storage_throughput {t} is not valid for {}",
                combination_name(deployment, ctx.storage)
            ),
            format!("Use one of {} MB/s/TiB.", join_numbers(allowed)),
        )),
        Some(_) => {}
    }
}

/// CreateFileSystemLustreConfiguration DriveCacheType: only for, and required with, HDD storage.
fn check_drive_cache(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let hdd = ctx.storage == Some(Storage::Hdd);
    match &spec.drive_cache_type {
        Some(value) if value != "NONE" && value != "READ" => out.push(violation(
            &["drive_cache_type"],
            format!("drive_cache_type \"{value}\" is not valid"),
            "Use NONE or READ.",
        )),
        Some(value) if !hdd && ctx.storage.is_some() => out.push(violation(
            &["drive_cache_type"],
            format!("drive_cache_type {value} needs storage_type HDD"),
            "Remove drive_cache_type; it only applies to PERSISTENT_1 HDD file systems.",
        )),
        None if hdd => out.push(violation(
            &["drive_cache_type"],
            "drive_cache_type is required with storage_type HDD",
            "Set drive_cache_type to NONE, or READ for an SSD read cache of 20% of the storage capacity.",
        )),
        _ => {}
    }
}

/// CreateFileSystemLustreConfiguration DataCompressionType.
fn check_data_compression(spec: &LustreSpec, out: &mut Vec<Violation>) {
    if let Some(value) = &spec.data_compression_type {
        if value != "NONE" && value != "LZ4" {
            out.push(violation(
                &["data_compression_type"],
                format!("data_compression_type \"{value}\" is not valid"),
                "Use NONE or LZ4.",
            ));
        }
    }
}

/// CreateFileSystemLustreMetadataConfiguration: PERSISTENT_2 only, Mode required, Iops only in
/// USER_PROVISIONED mode and one of the documented values.
fn check_metadata(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let Some(metadata) = &spec.metadata_configuration else {
        return;
    };
    if let Some(d) = ctx.deployment.filter(|d| *d != Deployment::Persistent2) {
        out.push(violation(
            &["metadata_configuration"],
            format!("metadata_configuration is not supported on {}", d.name()),
            "Remove metadata_configuration, or set deployment_type to PERSISTENT_2.",
        ));
    }
    match metadata.mode.as_deref() {
        None => out.push(violation(
            &["metadata_configuration", "mode"],
            "metadata_configuration.mode is required",
            "Set mode to AUTOMATIC or USER_PROVISIONED.",
        )),
        Some("AUTOMATIC") | Some("USER_PROVISIONED") => {}
        Some(other) => out.push(violation(
            &["metadata_configuration", "mode"],
            format!("metadata_configuration.mode \"{other}\" is not valid"),
            "Use AUTOMATIC or USER_PROVISIONED.",
        )),
    }
    let Some(iops) = metadata.iops else { return };
    if metadata.mode.as_deref() == Some("AUTOMATIC") {
        out.push(violation(
            &["metadata_configuration", "iops"],
            "metadata_configuration.iops cannot be set in AUTOMATIC mode",
            "Remove iops (FSx sizes Metadata IOPS from the storage capacity), or set mode to USER_PROVISIONED.",
        ));
    } else if !is_valid_metadata_iops(iops) {
        out.push(violation(
            &["metadata_configuration", "iops"],
            format!("metadata_configuration.iops {iops} is not valid"),
            "Use 1500, 3000, 6000, 12000, or a multiple of 12000 up to 192000.",
        ));
    }
}

/// EFA-enabled file systems: PERSISTENT_2 with a metadata configuration.
fn check_efa(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    if spec.efa_enabled != Some(true) {
        return;
    }
    if let Some(d) = ctx.deployment.filter(|d| *d != Deployment::Persistent2) {
        out.push(violation(
            &["efa_enabled"],
            format!("efa_enabled is not supported on {}", d.name()),
            "EFA needs deployment_type PERSISTENT_2 with a metadata_configuration block; otherwise set efa_enabled = false.",
        ));
    } else if spec.metadata_configuration.is_none() {
        out.push(violation(
            &["efa_enabled"],
            "efa_enabled needs a metadata_configuration block",
            "Add metadata_configuration (mode AUTOMATIC or USER_PROVISIONED), or set efa_enabled = false.",
        ));
    }
}

/// LustreRootSquashConfiguration: RootSquash "UID:GID", NoSquashNids in Lustre NID format.
fn check_root_squash(spec: &LustreSpec, out: &mut Vec<Violation>) {
    let Some(config) = &spec.root_squash_configuration else {
        return;
    };
    let mut squash_enabled = false;
    if let Some(value) = &config.root_squash {
        match parse_root_squash(value) {
            Ok((uid, _)) => squash_enabled = uid != 0,
            Err(problem) => out.push(violation(
                &["root_squash_configuration", "root_squash"],
                format!("root_squash \"{value}\" {problem}"),
                "Use UID:GID with both IDs between 1 and 4294967294 (for example 65534:65534), or 0:0 to disable root squash.",
            )),
        }
    }
    let Some(nids) = &config.no_squash_nids else {
        return;
    };
    if nids.len() > MAX_NO_SQUASH_NIDS {
        out.push(violation(
            &["root_squash_configuration", "no_squash_nids"],
            format!("no_squash_nids has {} entries", nids.len()),
            format!("List at most {MAX_NO_SQUASH_NIDS} client NIDs; use address ranges to cover more clients."),
        ));
    }
    for (i, nid) in nids.iter().enumerate() {
        if let Some(problem) = nid_problem(nid) {
            out.push(Violation {
                path: indexed(&["root_squash_configuration", "no_squash_nids"], i),
                summary: format!("no_squash_nids entry \"{nid}\" {problem}"),
                detail: "Use <IPv4 address>@tcp (10.0.1.6@tcp) or a range with [low-high] octets \
                         (10.0.[2-10].[1-255]@tcp)."
                    .to_string(),
            });
        }
    }
    let valid_root_squash = config
        .root_squash
        .as_deref()
        .is_none_or(|v| parse_root_squash(v).is_ok());
    if !nids.is_empty() && !squash_enabled && valid_root_squash {
        out.push(violation(
            &["root_squash_configuration", "no_squash_nids"],
            "no_squash_nids has no effect while root squash is disabled",
            "Set root_squash to a non-zero UID:GID, or remove no_squash_nids.",
        ));
    }
}

/// LustreLogCreateConfiguration: Level required; Destination a CloudWatch Logs log group ARN
/// whose name begins with /aws/fsx, and not allowed when Level is DISABLED.
fn check_log_configuration(spec: &LustreSpec, out: &mut Vec<Violation>) {
    let Some(log) = &spec.log_configuration else {
        return;
    };
    const LEVELS: [&str; 4] = ["DISABLED", "WARN_ONLY", "ERROR_ONLY", "WARN_ERROR"];
    match log.level.as_deref() {
        None => out.push(violation(
            &["log_configuration", "level"],
            "log_configuration.level is required",
            "Set level to DISABLED, WARN_ONLY, ERROR_ONLY, or WARN_ERROR.",
        )),
        Some(level) if !LEVELS.contains(&level) => out.push(violation(
            &["log_configuration", "level"],
            format!("log_configuration.level \"{level}\" is not valid"),
            "Use DISABLED, WARN_ONLY, ERROR_ONLY, or WARN_ERROR.",
        )),
        _ => {}
    }
    let Some(destination) = &log.destination else {
        return;
    };
    if log.level.as_deref() == Some("DISABLED") {
        out.push(violation(
            &["log_configuration", "destination"],
            "log_configuration.destination cannot be set when level is DISABLED",
            "Remove destination, or choose a level that logs events (WARN_ONLY, ERROR_ONLY, WARN_ERROR).",
        ));
    } else if let Some(problem) = log_destination_problem(destination) {
        out.push(violation(
            &["log_configuration", "destination"],
            format!("log_configuration.destination {problem}"),
            "Use a CloudWatch Logs log group ARN in the file system's account and Region whose name \
             begins with /aws/fsx, e.g. arn:aws:logs:us-east-1:111122223333:log-group:/aws/fsx/lustre; \
             omit destination to use /aws/fsx/lustre.",
        ));
    }
}

/// KmsKeyId: PERSISTENT_1 and PERSISTENT_2 only; a key ID, key ARN, alias name, or alias ARN.
fn check_kms_key(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let Some(key) = &spec.kms_key_id else { return };
    if ctx.is_scratch() {
        out.push(violation(
            &["kms_key_id"],
            format!("kms_key_id is not supported on {}", ctx.deployment_name()),
            "Remove kms_key_id; scratch file systems are encrypted with the FSx service key. \
             Use PERSISTENT_1 or PERSISTENT_2 for a customer managed key.",
        ));
    } else if let Some(problem) = kms_key_problem(key) {
        out.push(violation(
            &["kms_key_id"],
            format!("kms_key_id \"{key}\" {problem}"),
            "Use a key ID, a key ARN (arn:aws:kms:<region>:<account>:key/<id>), an alias name \
             (alias/<name>), or an alias ARN.",
        ));
    }
}

/// CreateFileSystem SubnetIds: exactly one for every Lustre deployment type.
fn check_subnets(spec: &LustreSpec, out: &mut Vec<Violation>) {
    let Some(subnets) = &spec.subnet_ids else {
        return;
    };
    if subnets.len() != 1 {
        out.push(violation(
            &["subnet_ids"],
            format!("subnet_ids has {} entries; Lustre needs exactly 1", subnets.len()),
            "List exactly one subnet ID; FSx for Lustre file systems live in a single Availability Zone.",
        ));
    }
    for (i, id) in subnets.iter().enumerate() {
        if !is_resource_id(id, "subnet-", 15, 24) {
            out.push(Violation {
                path: indexed(&["subnet_ids"], i),
                summary: format!("subnet_ids entry \"{id}\" is not a subnet ID"),
                detail: "Use an ID of the form subnet-0123456789abcdef0.".to_string(),
            });
        }
    }
}

/// CreateFileSystem SecurityGroupIds: at most 50 IDs of the form sg-….
fn check_security_groups(spec: &LustreSpec, out: &mut Vec<Violation>) {
    let Some(groups) = &spec.security_group_ids else {
        return;
    };
    if groups.len() > MAX_SECURITY_GROUPS {
        out.push(violation(
            &["security_group_ids"],
            format!("security_group_ids has {} entries", groups.len()),
            format!("List at most {MAX_SECURITY_GROUPS} security groups."),
        ));
    }
    let mut seen = HashSet::new();
    for (i, id) in groups.iter().enumerate() {
        if !is_resource_id(id, "sg-", 11, 20) {
            out.push(Violation {
                path: indexed(&["security_group_ids"], i),
                summary: format!("security_group_ids entry \"{id}\" is not a security group ID"),
                detail: "Use an ID of the form sg-0123456789abcdef0.".to_string(),
            });
        } else if !seen.insert(id.as_str()) {
            out.push(Violation {
                path: indexed(&["security_group_ids"], i),
                summary: format!("security_group_ids lists {id} twice"),
                detail: "List each security group once.".to_string(),
            });
        }
    }
}

/// WeeklyTime: d:HH:MM, d = 1 (Monday) ..= 7 (Sunday), UTC.
fn check_weekly_maintenance(spec: &LustreSpec, out: &mut Vec<Violation>) {
    if let Some(value) = &spec.weekly_maintenance_start_time {
        if !is_weekly_time(value) {
            out.push(violation(
                &["weekly_maintenance_start_time"],
                format!("weekly_maintenance_start_time \"{value}\" is not d:HH:MM"),
                "Use d:HH:MM in UTC with d from 1 (Monday) to 7 (Sunday), e.g. 7:03:30.",
            ));
        }
    }
}

/// Backups: persistent file systems only (CreateBackup, "Working with backups"), never on file
/// systems linked to S3 ("Using data repositories"), retention 0..=90, start time HH:MM; the final
/// backup settings of DeleteFileSystemLustreConfiguration.
fn check_backups(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    check_backup_schedule(spec, ctx, out);
    check_backup_tags_and_final(spec, ctx, out);
}

/// Automatic backups: their retention and daily start time.
fn check_backup_schedule(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let scratch = ctx.is_scratch();
    let deployment = ctx.deployment_name();
    if let Some(days) = spec.automatic_backup_retention_days {
        if !(0..=MAX_BACKUP_RETENTION_DAYS).contains(&days) {
            out.push(violation(
                &["automatic_backup_retention_days"],
                format!("automatic_backup_retention_days {days} is out of range"),
                "Use 0 (no automatic backups) to 90 days.",
            ));
        } else if days > 0 && scratch {
            out.push(violation(
                &["automatic_backup_retention_days"],
                format!("automatic backups are not supported on {deployment}"),
                "Set automatic_backup_retention_days to 0, or use a PERSISTENT deployment type.",
            ));
        } else if days > 0 && ctx.linked_to_s3 {
            out.push(violation(
                &["automatic_backup_retention_days"],
                "automatic backups are not supported on a file system linked to S3",
                "Set automatic_backup_retention_days to 0, or remove import_path and data_repository blocks.",
            ));
        }
    }
    if let Some(value) = &spec.daily_automatic_backup_start_time {
        if !is_daily_time(value) {
            out.push(violation(
                &["daily_automatic_backup_start_time"],
                format!("daily_automatic_backup_start_time \"{value}\" is not HH:MM"),
                "Use HH:MM in UTC (00:00 to 23:59), e.g. 05:00.",
            ));
        } else if scratch {
            out.push(violation(
                &["daily_automatic_backup_start_time"],
                format!("daily_automatic_backup_start_time is not supported on {deployment}"),
                "Remove it; scratch file systems have no backups.",
            ));
        }
    }
}

/// Tags copied to backups, and the final backup at deletion.
fn check_backup_tags_and_final(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let scratch = ctx.is_scratch();
    let deployment = ctx.deployment_name();
    if spec.copy_tags_to_backups == Some(true) {
        if scratch {
            out.push(violation(
                &["copy_tags_to_backups"],
                format!("copy_tags_to_backups is not supported on {deployment}"),
                "Remove it or set it to false; scratch file systems have no backups.",
            ));
        } else if ctx.linked_to_s3 {
            out.push(violation(
                &["copy_tags_to_backups"],
                "copy_tags_to_backups is not available on a file system linked to S3",
                "Set copy_tags_to_backups to false, or remove import_path and data_repository blocks.",
            ));
        }
    }
    if spec.skip_final_backup == Some(false) {
        if scratch {
            out.push(violation(
                &["skip_final_backup"],
                format!("a final backup is not possible on {deployment}"),
                "Set skip_final_backup to true; scratch file systems have no backups.",
            ));
        } else if ctx.linked_to_s3 {
            out.push(violation(
                &["skip_final_backup"],
                "a final backup is not possible on a file system linked to S3",
                "Set skip_final_backup to true, or remove import_path and data_repository blocks.",
            ));
        }
    }
    let Some(tags) = &spec.final_backup_tags else {
        return;
    };
    if scratch {
        out.push(violation(
            &["final_backup_tags"],
            format!("final_backup_tags is not supported on {deployment}"),
            "Remove final_backup_tags; scratch file systems have no backups.",
        ));
        return;
    }
    if spec.skip_final_backup != Some(false) && !tags.is_empty() {
        out.push(violation(
            &["final_backup_tags"],
            "final_backup_tags needs skip_final_backup = false",
            "Set skip_final_backup = false to take a final backup, or remove final_backup_tags.",
        ));
    }
    check_tag_list("final_backup_tags", tags, out);
}

/// The legacy S3 link (ImportPath, ExportPath, AutoImportPolicy, ImportedFileChunkSize):
/// not on PERSISTENT_2 and not together with data repository associations.
fn check_legacy_data_repository(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let import = spec.import_path.as_deref();
    if let Some(import_path) = import {
        if !legacy_refused("import_path", spec, ctx, out) {
            if let Err(problem) = parse_s3_url(import_path) {
                out.push(s3_url_violation(&["import_path"], "import_path", import_path, &problem));
            }
        }
    }
    if let Some(export_path) = spec.export_path.as_deref() {
        if !legacy_refused("export_path", spec, ctx, out) {
            check_export_path(export_path, import, out);
        }
    }
    if let Some(policy) = spec.auto_import_policy.as_deref() {
        if !legacy_refused("auto_import_policy", spec, ctx, out) {
            const POLICIES: [&str; 4] = ["NONE", "NEW", "NEW_CHANGED", "NEW_CHANGED_DELETED"];
            if !POLICIES.contains(&policy) {
                out.push(violation(
                    &["auto_import_policy"],
                    format!("auto_import_policy \"{policy}\" is not valid"),
                    "Use NONE, NEW, NEW_CHANGED, or NEW_CHANGED_DELETED.",
                ));
            } else if import.is_none() {
                out.push(violation(
                    &["auto_import_policy"],
                    "auto_import_policy needs import_path",
                    "Set import_path to the S3 bucket to import from, or remove auto_import_policy.",
                ));
            }
        }
    }
    if let Some(chunk) = spec.imported_file_chunk_size {
        if !legacy_refused("imported_file_chunk_size", spec, ctx, out) {
            if !(CHUNK_SIZE_MIN..=CHUNK_SIZE_MAX).contains(&chunk) {
                out.push(chunk_violation(&["imported_file_chunk_size"], chunk));
            } else if import.is_none() {
                out.push(violation(
                    &["imported_file_chunk_size"],
                    "imported_file_chunk_size needs import_path",
                    "Set import_path to the S3 bucket to import from, or remove imported_file_chunk_size.",
                ));
            }
        }
    }
}

/// Reports `name`, a setting of the legacy S3 link, when that link is not allowed at all (on
/// PERSISTENT_2, or beside data repository associations); true when it did.
fn legacy_refused(name: &'static str, spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) -> bool {
    if ctx.deployment == Some(Deployment::Persistent2) {
        out.push(violation(
            &[name],
            format!("{name} is not supported on PERSISTENT_2"),
            "Link S3 with data_repository blocks (data repository associations) instead.",
        ));
        true
    } else if !spec.data_repositories.is_empty() {
        out.push(violation(
            &[name],
            format!("{name} cannot be combined with data_repository blocks"),
            "Use either data_repository blocks or import_path/export_path, not both.",
        ));
        true
    } else {
        false
    }
}

/// `export_path`: an S3 URL in the bucket of `import_path`, which it needs.
fn check_export_path(export_path: &str, import: Option<&str>, out: &mut Vec<Violation>) {
    let import_bucket = import.and_then(|p| parse_s3_url(p).ok()).map(|u| u.bucket);
    match parse_s3_url(export_path) {
        Err(problem) => out.push(s3_url_violation(&["export_path"], "export_path", export_path, &problem)),
        Ok(_) if import.is_none() => out.push(violation(
            &["export_path"],
            "export_path needs import_path",
            "Set import_path to s3://<bucket>[/prefix]; export_path must use the same bucket.",
        )),
        Ok(url) => {
            if let Some(bucket) = import_bucket.filter(|b| *b != url.bucket) {
                out.push(violation(
                    &["export_path"],
                    format!(
                        "export_path bucket {} differs from import_path bucket {bucket}",
                        url.bucket
                    ),
                    format!("Use s3://{bucket}[/prefix] for export_path."),
                ));
            }
        }
    }
}

/// CreateFileSystem FileSystemTypeVersion: 2.10, 2.12, or 2.15; 2.10 not on PERSISTENT_2; a
/// metadata configuration needs 2.15 ("Managing metadata performance").
fn check_file_system_type_version(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let Some(value) = &spec.file_system_type_version else {
        return;
    };
    if !DOCUMENTED_VERSIONS.contains(&value.as_str()) {
        out.push(violation(
            &["file_system_type_version"],
            format!("file_system_type_version \"{value}\" is not a supported Lustre version"),
            "Use 2.10, 2.12, or 2.15 (2.15 is recommended for new file systems).",
        ));
        return;
    }
    if ctx.deployment != Some(Deployment::Persistent2) {
        return;
    }
    if ctx.version == Some(LustreVersion::V2_10) {
        out.push(violation(
            &["file_system_type_version"],
            "file_system_type_version 2.10 is not supported on PERSISTENT_2",
            "Use 2.12 or 2.15.",
        ));
    } else if spec.metadata_configuration.is_some() && ctx.version != Some(LustreVersion::V2_15) {
        out.push(violation(
            &["file_system_type_version"],
            format!("file_system_type_version {value} does not support metadata_configuration"),
            "Use 2.15, or remove metadata_configuration.",
        ));
    }
}

/// CreateDataRepositoryAssociation: at most 8 per file system, not on SCRATCH_1, Lustre 2.12 or
/// 2.15, absolute non-overlapping FileSystemPath, unique S3 DataRepositoryPath, chunk size and
/// event lists.
fn check_data_repositories(spec: &LustreSpec, ctx: &Ctx, out: &mut Vec<Violation>) {
    let repos = &spec.data_repositories;
    if repos.is_empty() {
        return;
    }
    if repos.len() > MAX_DATA_REPOSITORY_ASSOCIATIONS {
        out.push(violation(
            &["data_repository"],
            format!(
                "{} data_repository blocks exceed the limit of {MAX_DATA_REPOSITORY_ASSOCIATIONS}",
                repos.len()
            ),
            format!("Use at most {MAX_DATA_REPOSITORY_ASSOCIATIONS} data repository associations per file system."),
        ));
    }
    if ctx.deployment == Some(Deployment::Scratch1) {
        out.push(violation(
            &["data_repository"],
            "data_repository blocks are not supported on SCRATCH_1",
            "Use SCRATCH_2, PERSISTENT_1, or PERSISTENT_2, or link S3 with import_path on SCRATCH_1.",
        ));
    } else if ctx.version.is_some_and(|v| v < LustreVersion::V2_12) {
        out.push(violation(
            &["data_repository"],
            "data_repository blocks need Lustre 2.12 or later",
            "Set file_system_type_version to 2.12 or 2.15 (FSx defaults to 2.10 on this deployment type).",
        ));
    }
    for (i, repo) in repos.iter().enumerate() {
        check_one_data_repository(i, repo, out);
    }
    check_data_repository_overlaps(repos, out);
}

fn check_one_data_repository(i: usize, repo: &DataRepositorySpec, out: &mut Vec<Violation>) {
    let at = |leaf: &str| vec!["data_repository".to_string(), i.to_string(), leaf.to_string()];
    if let Some(fs_path) = &repo.file_system_path {
        if let Some(problem) = namespace_problem(fs_path) {
            out.push(Violation {
                path: at("file_system_path"),
                summary: format!("file_system_path \"{fs_path}\" {problem}"),
                detail: format!("Use an absolute directory path such as /ns1/ (1 to {NAMESPACE_MAX} characters)."),
            });
        }
    }
    if let Some(s3_path) = &repo.data_repository_path {
        if let Err(problem) = parse_s3_url(s3_path) {
            out.push(Violation {
                path: at("data_repository_path"),
                ..s3_url_violation(&[], "data_repository_path", s3_path, &problem)
            });
        }
    }
    if let Some(chunk) = repo.imported_file_chunk_size {
        if !(CHUNK_SIZE_MIN..=CHUNK_SIZE_MAX).contains(&chunk) {
            out.push(Violation {
                path: at("imported_file_chunk_size"),
                ..chunk_violation(&[], chunk)
            });
        }
    }
    if let Some(events) = &repo.auto_import_events {
        check_events(at("auto_import_events"), "auto_import_events", events, out);
    }
    if let Some(events) = &repo.auto_export_events {
        check_events(at("auto_export_events"), "auto_export_events", events, out);
    }
}

/// Two associations may not share or nest file system paths, and each needs its own S3 location.
fn check_data_repository_overlaps(repos: &[DataRepositorySpec], out: &mut Vec<Violation>) {
    for (j, later) in repos.iter().enumerate() {
        for (i, earlier) in repos.iter().enumerate().take(j) {
            if let (Some(a), Some(b)) = (&earlier.file_system_path, &later.file_system_path) {
                if namespace_problem(a).is_none() && namespace_problem(b).is_none() && namespaces_overlap(a, b) {
                    out.push(Violation {
                        path: vec!["data_repository".into(), j.to_string(), "file_system_path".into()],
                        summary: format!("file_system_path {b} overlaps data_repository {i} ({a})"),
                        detail: "Give each association its own directory; paths may not be equal or nested, \
                                 and / can only be used when it is the only association."
                            .to_string(),
                    });
                }
            }
            if let (Some(a), Some(b)) = (&earlier.data_repository_path, &later.data_repository_path) {
                if a.trim_end_matches('/') == b.trim_end_matches('/') {
                    out.push(Violation {
                        path: vec!["data_repository".into(), j.to_string(), "data_repository_path".into()],
                        summary: format!("data_repository_path {b} is already used by data_repository {i}"),
                        detail: "Link each association to its own S3 bucket or prefix.".to_string(),
                    });
                }
            }
        }
    }
}

/// EventTypes: at most 3 of NEW, CHANGED, DELETED.
fn check_events(at: Vec<String>, name: &str, events: &[String], out: &mut Vec<Violation>) {
    if events.len() > MAX_EVENTS {
        out.push(Violation {
            path: at.clone(),
            summary: format!("{name} has {} entries", events.len()),
            detail: "List each of NEW, CHANGED, DELETED at most once.".to_string(),
        });
    }
    let mut seen = HashSet::new();
    for (k, event) in events.iter().enumerate() {
        let mut path = at.clone();
        path.push(k.to_string());
        if !EVENT_TYPES.contains(&event.as_str()) {
            out.push(Violation {
                path,
                summary: format!("{name} entry \"{event}\" is not an event type"),
                detail: "Use NEW, CHANGED, or DELETED.".to_string(),
            });
        } else if !seen.insert(event.as_str()) {
            out.push(Violation {
                path,
                summary: format!("{name} lists {event} twice"),
                detail: "List each of NEW, CHANGED, DELETED at most once.".to_string(),
            });
        }
    }
}

/// CreateFileSystem Tags / Tag: at most 50, keys 1..=128 and values 0..=256 characters from
/// letters, numbers, spaces and _ . : / = + - @, keys unique and not starting with aws:.
fn check_tag_list(root: &str, tags: &[(String, String)], out: &mut Vec<Violation>) {
    if tags.len() > MAX_TAGS {
        out.push(Violation {
            path: vec![root.to_string()],
            summary: format!("{root} has {} tags", tags.len()),
            detail: format!("Use at most {MAX_TAGS} tags."),
        });
    }
    let mut seen = HashSet::new();
    for (key, value) in tags {
        let at = vec![root.to_string(), key.clone()];
        let key_len = key.chars().count();
        let problem = if !(1..=TAG_KEY_MAX).contains(&key_len) {
            Some(format!("tag key \"{key}\" must be 1 to {TAG_KEY_MAX} characters"))
        } else if key.to_ascii_lowercase().starts_with("aws:") {
            Some(format!("tag key \"{key}\" uses the reserved aws: prefix"))
        } else if !key.chars().all(is_tag_char) {
            Some(format!("tag key \"{key}\" contains a character tags do not allow"))
        } else if value.chars().count() > TAG_VALUE_MAX {
            Some(format!(
                "tag value for \"{key}\" is longer than {TAG_VALUE_MAX} characters"
            ))
        } else if !value.chars().all(is_tag_char) {
            Some(format!(
                "tag value for \"{key}\" contains a character tags do not allow"
            ))
        } else if !seen.insert(key.as_str()) {
            Some(format!("tag key \"{key}\" appears twice"))
        } else {
            None
        };
        if let Some(summary) = problem {
            out.push(Violation {
                path: at,
                summary,
                detail: format!(
                    "Tag keys are 1-{TAG_KEY_MAX} and values 0-{TAG_VALUE_MAX} characters of letters, numbers, \
                     spaces and _ . : / = + - @; keys are unique and must not start with aws:."
                ),
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Capacity rules
// ---------------------------------------------------------------------------------------------

/// Valid capacities: any of `fixed`, or a positive multiple of `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CapacitySteps {
    fixed: &'static [i64],
    step: i64,
}

impl CapacitySteps {
    fn allows(self, capacity: i64) -> bool {
        self.fixed.contains(&capacity) || (capacity > 0 && capacity % self.step == 0)
    }

    fn describe(self) -> String {
        if self.fixed.is_empty() {
            format!("a multiple of {} GiB", self.step)
        } else {
            let fixed: Vec<String> = self.fixed.iter().map(i64::to_string).collect();
            format!("{}, or a multiple of {} GiB", fixed.join(", "), self.step)
        }
    }
}

/// CreateFileSystem StorageCapacity for Lustre. `None` when the combination is itself invalid or
/// the HDD throughput tier is not known.
fn capacity_steps(deployment: Deployment, storage: Storage, throughput: Option<i64>) -> Option<CapacitySteps> {
    const SMALL: &[i64] = &[1200, 2400];
    match (deployment, storage) {
        (Deployment::Scratch1, Storage::Ssd) => Some(CapacitySteps {
            fixed: SMALL,
            step: 3600,
        }),
        (Deployment::Scratch2 | Deployment::Persistent1 | Deployment::Persistent2, Storage::Ssd) => {
            Some(CapacitySteps {
                fixed: SMALL,
                step: 2400,
            })
        }
        (Deployment::Persistent1, Storage::Hdd) => match throughput {
            Some(12) => Some(CapacitySteps { fixed: &[], step: 6000 }),
            Some(40) => Some(CapacitySteps { fixed: &[], step: 1800 }),
            _ => None,
        },
        _ => None,
    }
}

fn capacity_rule_for(spec: &LustreSpec, ctx: &Ctx) -> Option<CapacitySteps> {
    capacity_steps(ctx.deployment?, ctx.storage?, spec.per_unit_storage_throughput)
}

/// "PERSISTENT_1 HDD at 12 MB/s/TiB", "PERSISTENT_2", …
fn combination_label(spec: &LustreSpec, ctx: &Ctx) -> String {
    match (ctx.deployment, ctx.storage, spec.per_unit_storage_throughput) {
        (Some(d), Some(Storage::Hdd), Some(t)) => format!("{} HDD at {t} MB/s/TiB", d.name()),
        (Some(d), storage, _) => combination_name(d, storage),
        (None, _, _) => "this deployment type".to_string(),
    }
}

fn combination_name(deployment: Deployment, storage: Option<Storage>) -> String {
    match (deployment, storage) {
        (Deployment::Persistent1, Some(Storage::Ssd)) => "PERSISTENT_1 SSD".to_string(),
        (Deployment::Persistent1, Some(Storage::Hdd)) => "PERSISTENT_1 HDD".to_string(),
        (d, _) => d.name().to_string(),
    }
}

/// CreateFileSystemLustreConfiguration PerUnitStorageThroughput tiers.
fn throughput_tiers(deployment: Deployment, storage: Storage) -> Option<&'static [i64]> {
    match (deployment, storage) {
        (Deployment::Persistent1, Storage::Ssd) => Some(&[50, 100, 200]),
        (Deployment::Persistent1, Storage::Hdd) => Some(&[12, 40]),
        (Deployment::Persistent2, Storage::Ssd) => Some(&[125, 250, 500, 1000]),
        _ => None,
    }
}

fn is_valid_metadata_iops(iops: i64) -> bool {
    METADATA_IOPS_SMALL.contains(&iops) || (iops > 0 && iops <= METADATA_IOPS_MAX && iops % METADATA_IOPS_STEP == 0)
}

// ---------------------------------------------------------------------------------------------
// Format helpers
// ---------------------------------------------------------------------------------------------

struct S3Url<'a> {
    bucket: &'a str,
}

/// `s3://bucket[/prefix]` within the ArchivePath limits, with a valid general purpose bucket name.
fn parse_s3_url(url: &str) -> Result<S3Url<'_>, String> {
    let len = url.chars().count();
    if !(ARCHIVE_PATH_MIN..=ARCHIVE_PATH_MAX).contains(&len) {
        return Err(format!(
            "must be {ARCHIVE_PATH_MIN} to {ARCHIVE_PATH_MAX} characters long"
        ));
    }
    if url.chars().any(|c| FORBIDDEN_PATH_CHARS.contains(&c)) {
        return Err("contains a line break or control character".to_string());
    }
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| "does not start with s3://".to_string())?;
    let bucket = rest.split_once('/').map_or(rest, |(bucket, _)| bucket);
    if bucket.is_empty() {
        return Err("has no bucket name".to_string());
    }
    match bucket_name_problem(bucket) {
        Some(problem) => Err(format!("names bucket \"{bucket}\", which {problem}")),
        None => Ok(S3Url { bucket }),
    }
}

/// Amazon S3 general purpose bucket naming rules.
fn bucket_name_problem(bucket: &str) -> Option<&'static str> {
    let bytes = bucket.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&bucket.len()) {
        Some("must be 3 to 63 characters long")
    } else if !bytes
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-')
    {
        Some("may only contain lowercase letters, digits, '.' and '-'")
    } else if !edge_ok(bytes.first()) || !edge_ok(bytes.last()) {
        Some("must begin and end with a letter or digit")
    } else if bucket.contains("..") {
        Some("must not contain two adjacent periods")
    } else if looks_like_ipv4(bucket) {
        Some("must not be formatted as an IP address")
    } else if ["xn--", "sthree-", "amzn-s3-demo-"]
        .iter()
        .any(|p| bucket.starts_with(p))
    {
        Some("uses a prefix reserved by Amazon S3")
    } else {
        None
    }
}

fn looks_like_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4 && parts.iter().all(|p| (1..=3).contains(&p.len()) && is_ascii_digits(p))
}

fn s3_url_violation(at: &[&str], name: &str, value: &str, problem: &str) -> Violation {
    violation(
        at,
        format!("{name} \"{value}\" {problem}"),
        "Use s3://<bucket>[/prefix] with a valid bucket name (3-63 lowercase letters, digits, '.' or '-').",
    )
}

fn chunk_violation(at: &[&str], chunk: i64) -> Violation {
    violation(
        at,
        format!("imported_file_chunk_size {chunk} is out of range"),
        format!("Use {CHUNK_SIZE_MIN} to {CHUNK_SIZE_MAX} MiB (the default is 1024)."),
    )
}

/// Namespace: begins with '/', 1..=4096 characters, no line breaks or control characters.
fn namespace_problem(fs_path: &str) -> Option<String> {
    if !fs_path.starts_with('/') {
        Some("must start with /".to_string())
    } else if fs_path.chars().count() > NAMESPACE_MAX {
        Some(format!("is longer than {NAMESPACE_MAX} characters"))
    } else if fs_path.chars().any(|c| FORBIDDEN_PATH_CHARS.contains(&c)) {
        Some("contains a line break or control character".to_string())
    } else {
        None
    }
}

/// Equal, nested, or either one is the root "/".
fn namespaces_overlap(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_end_matches('/'), b.trim_end_matches('/'));
    a == b || is_within(a, b) || is_within(b, a)
}

/// Whether directory `child` lies inside directory `parent` (both without trailing '/').
fn is_within(child: &str, parent: &str) -> bool {
    parent.is_empty() || child.strip_prefix(parent).is_some_and(|rest| rest.starts_with('/'))
}

fn is_ascii_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_lower_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// SubnetId / SecurityGroupId: `<prefix>` followed by at least 8 lowercase hex digits.
fn is_resource_id(id: &str, prefix: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&id.len())
        && id
            .strip_prefix(prefix)
            .is_some_and(|hex| hex.len() >= 8 && is_lower_hex(hex))
}

/// Two zero-padded digits in 0..=limit.
fn two_digits_at_most(s: &str, limit: u8) -> bool {
    s.len() == 2 && is_ascii_digits(s) && s.parse::<u8>().is_ok_and(|n| n <= limit)
}

/// DailyTime: HH:MM.
fn is_daily_time(s: &str) -> bool {
    match s.split_once(':') {
        Some((hh, mm)) => two_digits_at_most(hh, 23) && two_digits_at_most(mm, 59),
        None => false,
    }
}

/// WeeklyTime: d:HH:MM.
fn is_weekly_time(s: &str) -> bool {
    match s.split_once(':') {
        Some((day, time)) => matches!(day, "1" | "2" | "3" | "4" | "5" | "6" | "7") && is_daily_time(time),
        None => false,
    }
}

/// LustreRootSquash: "UID:GID", 1-10 digits each, at most 4294967294; both zero (disabled) or
/// both non-zero (enabled).
fn parse_root_squash(value: &str) -> Result<(u64, u64), String> {
    let (uid, gid) = value.split_once(':').ok_or_else(|| "is not UID:GID".to_string())?;
    let id = |s: &str| -> Result<u64, String> {
        if s.len() > 10 || !is_ascii_digits(s) {
            return Err("is not UID:GID".to_string());
        }
        match s.parse::<u64>() {
            Ok(n) if n <= ROOT_SQUASH_ID_MAX => Ok(n),
            _ => Err(format!("has an ID above {ROOT_SQUASH_ID_MAX}")),
        }
    };
    let (uid, gid) = (id(uid)?, id(gid)?);
    if (uid == 0) != (gid == 0) {
        return Err("mixes a zero and a non-zero ID".to_string());
    }
    Ok((uid, gid))
}

/// LustreNoSquashNid: an IPv4 address followed by @tcp, where any octet may be a [low-high] range.
fn nid_problem(nid: &str) -> Option<String> {
    let len = nid.chars().count();
    if !(NID_MIN..=NID_MAX).contains(&len) {
        return Some(format!("must be {NID_MIN} to {NID_MAX} characters long"));
    }
    let Some(address) = nid.strip_suffix("@tcp") else {
        return Some("does not end with @tcp".to_string());
    };
    let octets: Vec<&str> = address.split('.').collect();
    if octets.len() != 4 || !octets.iter().all(|o| nid_octet_ok(o)) {
        return Some("is not an IPv4 address or address range".to_string());
    }
    None
}

fn nid_octet_ok(octet: &str) -> bool {
    match octet.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(range) => match range.split_once('-') {
            Some((low, high)) => match (parse_octet(low), parse_octet(high)) {
                (Some(l), Some(h)) => l <= h,
                _ => false,
            },
            None => false,
        },
        None => parse_octet(octet).is_some(),
    }
}

fn parse_octet(s: &str) -> Option<u8> {
    if s.len() > 3 || !is_ascii_digits(s) {
        return None;
    }
    s.parse::<u8>().ok()
}

/// KmsKeyId: key ID, key ARN, alias name, or alias ARN (KMS key identifiers), 1..=2048 characters.
fn kms_key_problem(key: &str) -> Option<&'static str> {
    if !(1..=KMS_KEY_ID_MAX).contains(&key.len()) {
        return Some("must be 1 to 2048 characters long");
    }
    if let Some(alias) = key.strip_prefix("alias/") {
        return (!is_alias_name(alias)).then_some("is not a valid alias name");
    }
    if key.starts_with("arn:") {
        let parts: Vec<&str> = key.splitn(6, ':').collect();
        let [_, partition, service, region, account, resource] = parts.as_slice() else {
            return Some("is not a valid KMS ARN");
        };
        if partition.is_empty() || *service != "kms" || region.is_empty() || !is_account_id(account) {
            return Some("is not a KMS key or alias ARN");
        }
        return match (resource.strip_prefix("key/"), resource.strip_prefix("alias/")) {
            (Some(id), _) if is_kms_key_id(id) => None,
            (_, Some(alias)) if is_alias_name(alias) => None,
            _ => Some("is not a KMS key or alias ARN"),
        };
    }
    (!is_kms_key_id(key)).then_some("is not a KMS key ID, key ARN, or alias")
}

/// A KMS key ID: a UUID, or mrk- and 32 hex digits for multi-Region keys.
fn is_kms_key_id(id: &str) -> bool {
    if let Some(hex) = id.strip_prefix("mrk-") {
        return hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_alias_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 250
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b':'))
}

fn is_account_id(account: &str) -> bool {
    account.len() == 12 && is_ascii_digits(account)
}

/// LustreLogCreateConfiguration Destination: a CloudWatch Logs log group ARN (GeneralARN,
/// 8..=1024 characters) whose log group name begins with /aws/fsx.
fn log_destination_problem(arn: &str) -> Option<String> {
    if !(ARN_MIN..=ARN_MAX).contains(&arn.len()) {
        return Some(format!("must be {ARN_MIN} to {ARN_MAX} characters long"));
    }
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ["arn", partition, service, region, account, resource] = parts.as_slice() else {
        return Some(format!("\"{arn}\" is not an ARN"));
    };
    if *service == "firehose" {
        return Some("cannot be a Firehose stream; Lustre logs go to CloudWatch Logs".to_string());
    }
    if partition.is_empty() || *service != "logs" || region.is_empty() || !is_account_id(account) {
        return Some(format!("\"{arn}\" is not a CloudWatch Logs ARN"));
    }
    let Some(name) = resource.strip_prefix("log-group:") else {
        return Some(format!("\"{arn}\" does not name a log group"));
    };
    let name = name.strip_suffix(":*").unwrap_or(name);
    if !name.starts_with("/aws/fsx") {
        return Some(format!("log group \"{name}\" does not begin with /aws/fsx"));
    }
    None
}

/// Tag characters: letters, numbers, separators (spaces) and _ . : / = + - @.
fn is_tag_char(c: char) -> bool {
    c.is_alphanumeric() || (c.is_whitespace() && !c.is_control()) || "_.:/=+-@".contains(c)
}

fn join_numbers(values: &[i64]) -> String {
    let text: Vec<String> = values.iter().map(i64::to_string).collect();
    match text.as_slice() {
        [] => String::new(),
        [only] => only.clone(),
        [first, second] => format!("{first} or {second}"),
        [init @ .., last] => format!("{}, or {last}", init.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------------
// Violation and path helpers
// ---------------------------------------------------------------------------------------------

fn violation(at: &[&str], summary: impl Into<String>, detail: impl Into<String>) -> Violation {
    Violation {
        path: path(at),
        summary: summary.into(),
        detail: detail.into(),
    }
}

fn path(at: &[&str]) -> Vec<String> {
    at.iter().map(|s| s.to_string()).collect()
}

fn indexed(at: &[&str], index: usize) -> Vec<String> {
    let mut p = path(at);
    p.push(index.to_string());
    p
}

/// `None` in `new` keeps the current value; otherwise any difference is a change.
fn changed<T: PartialEq>(old: &Option<T>, new: &Option<T>) -> bool {
    new.is_some() && old != new
}

/// Sort key: top-level attribute position, then list index for indexed blocks.
fn order_key(v: &Violation) -> (usize, usize) {
    let root = v.path.first().map(String::as_str).unwrap_or("");
    let attribute = ATTRIBUTE_ORDER
        .iter()
        .position(|a| *a == root)
        .unwrap_or(ATTRIBUTE_ORDER.len());
    let index = match root {
        "data_repository" => v.path.get(1).and_then(|s| s.parse::<usize>().ok()).map_or(0, |i| i + 1),
        _ => 0,
    };
    (attribute, index)
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use hpc_aws::fsx::{LogSpec, MetadataSpec, RootSquashSpec};

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    fn list(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|x| x.to_string()).collect())
    }

    fn pairs(v: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(v.iter().map(|(k, val)| (k.to_string(), val.to_string())).collect())
    }

    /// A valid PERSISTENT_2 file system with most optional settings filled in.
    fn p2() -> LustreSpec {
        LustreSpec {
            storage_capacity: Some(2400),
            deployment_type: s("PERSISTENT_2"),
            storage_type: s("SSD"),
            per_unit_storage_throughput: Some(250),
            data_compression_type: s("LZ4"),
            metadata_configuration: Some(MetadataSpec {
                mode: s("USER_PROVISIONED"),
                iops: Some(6000),
            }),
            efa_enabled: Some(true),
            root_squash_configuration: Some(RootSquashSpec {
                root_squash: s("65534:65534"),
                no_squash_nids: list(&["10.0.1.6@tcp", "10.0.[2-10].[1-255]@tcp"]),
            }),
            log_configuration: Some(LogSpec {
                level: s("WARN_ERROR"),
                destination: s("arn:aws:logs:us-east-1:111122223333:log-group:/aws/fsx/lustre-logs"),
            }),
            kms_key_id: s("arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
            subnet_ids: list(&["subnet-0123456789abcdef0"]),
            security_group_ids: list(&["sg-0123456789abcdef0", "sg-0fedcba987654321f"]),
            weekly_maintenance_start_time: s("7:03:30"),
            automatic_backup_retention_days: Some(7),
            daily_automatic_backup_start_time: s("05:00"),
            copy_tags_to_backups: Some(true),
            skip_final_backup: Some(false),
            final_backup_tags: pairs(&[("purpose", "final")]),
            file_system_type_version: s("2.15"),
            tags: pairs(&[("Name", "hpc scratch"), ("cost-center", "42")]),
            ..Default::default()
        }
    }

    /// A valid SCRATCH_2 file system linked to S3 through the legacy import path.
    fn scratch2() -> LustreSpec {
        LustreSpec {
            storage_capacity: Some(1200),
            deployment_type: s("SCRATCH_2"),
            subnet_ids: list(&["subnet-0123456789abcdef0"]),
            import_path: s("s3://my-bucket/input"),
            export_path: s("s3://my-bucket/output"),
            auto_import_policy: s("NEW_CHANGED"),
            imported_file_chunk_size: Some(1024),
            ..Default::default()
        }
    }

    /// A valid PERSISTENT_1 HDD file system.
    fn p1_hdd() -> LustreSpec {
        LustreSpec {
            storage_capacity: Some(6000),
            deployment_type: s("PERSISTENT_1"),
            storage_type: s("HDD"),
            per_unit_storage_throughput: Some(12),
            drive_cache_type: s("READ"),
            subnet_ids: list(&["subnet-0123456789abcdef0"]),
            ..Default::default()
        }
    }

    /// A valid PERSISTENT_2 file system with data repository associations and no backups.
    fn p2_dra() -> LustreSpec {
        LustreSpec {
            storage_capacity: Some(1200),
            deployment_type: s("PERSISTENT_2"),
            per_unit_storage_throughput: Some(125),
            subnet_ids: list(&["subnet-0123456789abcdef0"]),
            data_repositories: vec![
                DataRepositorySpec {
                    file_system_path: s("/ns1"),
                    data_repository_path: s("s3://data-bucket/ns1/"),
                    batch_import_meta_data_on_create: Some(true),
                    imported_file_chunk_size: Some(1024),
                    auto_import_events: list(&["NEW", "CHANGED", "DELETED"]),
                    auto_export_events: list(&["NEW"]),
                },
                DataRepositorySpec {
                    file_system_path: s("/ns2/sub"),
                    data_repository_path: s("s3://data-bucket/ns2"),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    fn paths(spec: &LustreSpec) -> Vec<Vec<String>> {
        validate(spec).into_iter().map(|v| v.path).collect()
    }

    fn assert_valid(spec: &LustreSpec) {
        let violations = validate(spec);
        assert!(violations.is_empty(), "expected no violations, got {violations:#?}");
    }

    fn assert_flags(spec: &LustreSpec, at: &[&str]) -> Violation {
        let want = path(at);
        let violations = validate(spec);
        match violations.iter().find(|v| v.path == want) {
            Some(v) => {
                assert!(!v.summary.is_empty() && !v.detail.is_empty());
                v.clone()
            }
            None => panic!("expected a violation at {want:?}, got {violations:#?}"),
        }
    }

    fn assert_not_flagged(spec: &LustreSpec, at: &[&str]) {
        let want = path(at);
        assert!(
            !paths(spec).contains(&want),
            "unexpected violation at {want:?}: {:#?}",
            validate(spec)
        );
    }

    // --- baselines --------------------------------------------------------------------------

    #[test]
    fn baseline_specs_are_valid() {
        assert_valid(&p2());
        assert_valid(&scratch2());
        assert_valid(&p1_hdd());
        assert_valid(&p2_dra());
    }

    #[test]
    fn defaults_are_scratch_1_ssd() {
        let spec = LustreSpec {
            storage_capacity: Some(3600),
            ..Default::default()
        };
        assert_valid(&spec);
        let spec = LustreSpec {
            storage_capacity: Some(4800),
            ..Default::default()
        };
        let v = assert_flags(&spec, &["storage_capacity"]);
        assert_eq!(v.summary, "storage_capacity 4800 is not valid for SCRATCH_1");
        assert_eq!(v.detail, "Use 1200, 2400, or a multiple of 3600 GiB.");
    }

    // --- storage_capacity -------------------------------------------------------------------

    #[test]
    fn storage_capacity_message_format() {
        let spec = LustreSpec {
            storage_capacity: Some(1000),
            ..p2()
        };
        let v = assert_flags(&spec, &["storage_capacity"]);
        assert_eq!(v.summary, "storage_capacity 1000 is not valid for PERSISTENT_2");
        assert_eq!(v.detail, "Use 1200, 2400, or a multiple of 2400 GiB.");
    }

    #[test]
    fn storage_capacity_ssd_steps() {
        for ok in [1200, 2400, 4800, 96000] {
            assert_valid(&LustreSpec {
                storage_capacity: Some(ok),
                ..p2()
            });
            assert_valid(&LustreSpec {
                storage_capacity: Some(ok),
                ..scratch2()
            });
        }
        for bad in [600, 3600, 6000] {
            assert_flags(
                &LustreSpec {
                    storage_capacity: Some(bad),
                    ..p2()
                },
                &["storage_capacity"],
            );
        }
        let p1_ssd = LustreSpec {
            storage_type: None,
            per_unit_storage_throughput: Some(100),
            drive_cache_type: None,
            ..p1_hdd()
        };
        assert_valid(&LustreSpec {
            storage_capacity: Some(4800),
            ..p1_ssd.clone()
        });
        assert_flags(
            &LustreSpec {
                storage_capacity: Some(3600),
                ..p1_ssd
            },
            &["storage_capacity"],
        );
    }

    #[test]
    fn storage_capacity_scratch_1_steps() {
        let base = LustreSpec {
            deployment_type: s("SCRATCH_1"),
            ..scratch2()
        };
        for ok in [1200, 2400, 3600, 7200] {
            assert_valid(&LustreSpec {
                storage_capacity: Some(ok),
                ..base.clone()
            });
        }
        assert_flags(
            &LustreSpec {
                storage_capacity: Some(4800),
                ..base
            },
            &["storage_capacity"],
        );
    }

    #[test]
    fn storage_capacity_hdd_steps_follow_throughput() {
        assert_valid(&LustreSpec {
            storage_capacity: Some(12000),
            ..p1_hdd()
        });
        let v = assert_flags(
            &LustreSpec {
                storage_capacity: Some(1800),
                ..p1_hdd()
            },
            &["storage_capacity"],
        );
        assert_eq!(
            v.summary,
            "storage_capacity 1800 is not valid for PERSISTENT_1 HDD at 12 MB/s/TiB"
        );
        assert_eq!(v.detail, "Use a multiple of 6000 GiB.");
        let fast = LustreSpec {
            per_unit_storage_throughput: Some(40),
            ..p1_hdd()
        };
        assert_valid(&LustreSpec {
            storage_capacity: Some(1800),
            ..fast.clone()
        });
        assert_flags(
            &LustreSpec {
                storage_capacity: Some(2000),
                ..fast
            },
            &["storage_capacity"],
        );
    }

    #[test]
    fn storage_capacity_required_and_in_range() {
        let v = assert_flags(
            &LustreSpec {
                storage_capacity: None,
                ..p2()
            },
            &["storage_capacity"],
        );
        assert_eq!(v.summary, "storage_capacity is required");
        assert_flags(
            &LustreSpec {
                storage_capacity: Some(0),
                ..p2()
            },
            &["storage_capacity"],
        );
        assert_flags(
            &LustreSpec {
                storage_capacity: Some(-2400),
                ..p2()
            },
            &["storage_capacity"],
        );
        assert_flags(
            &LustreSpec {
                storage_capacity: Some(4_800_000_000),
                ..p2()
            },
            &["storage_capacity"],
        );
    }

    #[test]
    fn capacity_rule_strings() {
        assert_eq!(
            capacity_rule("PERSISTENT_2", "SSD", None),
            "1200, 2400, or a multiple of 2400 GiB"
        );
        assert_eq!(
            capacity_rule("SCRATCH_2", "SSD", None),
            "1200, 2400, or a multiple of 2400 GiB"
        );
        assert_eq!(
            capacity_rule("PERSISTENT_1", "SSD", Some(50)),
            "1200, 2400, or a multiple of 2400 GiB"
        );
        assert_eq!(
            capacity_rule("SCRATCH_1", "SSD", None),
            "1200, 2400, or a multiple of 3600 GiB"
        );
        assert_eq!(capacity_rule("PERSISTENT_1", "HDD", Some(12)), "a multiple of 6000 GiB");
        assert_eq!(capacity_rule("PERSISTENT_1", "HDD", Some(40)), "a multiple of 1800 GiB");
        assert!(capacity_rule("PERSISTENT_1", "HDD", None).contains("6000"));
        assert!(capacity_rule("SCRATCH_2", "HDD", None).contains("PERSISTENT_1"));
        assert!(capacity_rule("BOGUS", "SSD", None).contains("BOGUS"));
        assert!(capacity_rule("PERSISTENT_2", "NVME", None).contains("NVME"));
    }

    // --- deployment_type / storage_type -----------------------------------------------------

    #[test]
    fn deployment_type_values() {
        assert_valid(&p2());
        let v = assert_flags(
            &LustreSpec {
                deployment_type: s("PERSISTENT_3"),
                ..p2()
            },
            &["deployment_type"],
        );
        assert!(v.detail.contains("PERSISTENT_2"));
    }

    #[test]
    fn storage_type_values_and_hdd_only_on_persistent_1() {
        assert_valid(&p1_hdd());
        assert_flags(
            &LustreSpec {
                storage_type: s("NVME"),
                ..p2()
            },
            &["storage_type"],
        );
        assert_flags(
            &LustreSpec {
                storage_type: s("INTELLIGENT_TIERING"),
                ..p2()
            },
            &["storage_type"],
        );
        let v = assert_flags(
            &LustreSpec {
                storage_type: s("HDD"),
                ..p2()
            },
            &["storage_type"],
        );
        assert_eq!(v.summary, "storage_type HDD is not available for PERSISTENT_2");
        assert_flags(
            &LustreSpec {
                storage_type: s("HDD"),
                ..scratch2()
            },
            &["storage_type"],
        );
    }

    // --- per_unit_storage_throughput --------------------------------------------------------

    #[test]
    fn throughput_tiers_per_deployment() {
        for ok in [125, 250, 500, 1000] {
            assert_valid(&LustreSpec {
                per_unit_storage_throughput: Some(ok),
                ..p2()
            });
        }
        let v = assert_flags(
            &LustreSpec {
                per_unit_storage_throughput: Some(200),
                ..p2()
            },
            &["per_unit_storage_throughput"],
        );
        assert_eq!(v.detail, "Use one of 125, 250, 500, or 1000 MB/s/TiB.");
        let p1_ssd = LustreSpec {
            storage_type: s("SSD"),
            drive_cache_type: None,
            storage_capacity: Some(2400),
            ..p1_hdd()
        };
        for ok in [50, 100, 200] {
            assert_valid(&LustreSpec {
                per_unit_storage_throughput: Some(ok),
                ..p1_ssd.clone()
            });
        }
        assert_flags(
            &LustreSpec {
                per_unit_storage_throughput: Some(125),
                ..p1_ssd
            },
            &["per_unit_storage_throughput"],
        );
        assert_flags(
            &LustreSpec {
                per_unit_storage_throughput: Some(50),
                ..p1_hdd()
            },
            &["per_unit_storage_throughput"],
        );
    }

    #[test]
    fn throughput_required_for_persistent_forbidden_for_scratch() {
        let v = assert_flags(
            &LustreSpec {
                per_unit_storage_throughput: None,
                ..p2()
            },
            &["per_unit_storage_throughput"],
        );
        assert_eq!(v.summary, "per_unit_storage_throughput is required for PERSISTENT_2");
        assert_flags(
            &LustreSpec {
                per_unit_storage_throughput: None,
                ..p1_hdd()
            },
            &["per_unit_storage_throughput"],
        );
        assert_flags(
            &LustreSpec {
                per_unit_storage_throughput: Some(200),
                ..scratch2()
            },
            &["per_unit_storage_throughput"],
        );
        assert_not_flagged(&scratch2(), &["per_unit_storage_throughput"]);
    }

    // --- drive_cache_type -------------------------------------------------------------------

    #[test]
    fn drive_cache_type_only_and_required_with_hdd() {
        assert_valid(&LustreSpec {
            drive_cache_type: s("NONE"),
            ..p1_hdd()
        });
        assert_flags(
            &LustreSpec {
                drive_cache_type: None,
                ..p1_hdd()
            },
            &["drive_cache_type"],
        );
        assert_flags(
            &LustreSpec {
                drive_cache_type: s("WRITE"),
                ..p1_hdd()
            },
            &["drive_cache_type"],
        );
        assert_flags(
            &LustreSpec {
                drive_cache_type: s("READ"),
                ..p2()
            },
            &["drive_cache_type"],
        );
    }

    // --- data_compression_type --------------------------------------------------------------

    #[test]
    fn data_compression_values() {
        assert_valid(&LustreSpec {
            data_compression_type: s("NONE"),
            ..p2()
        });
        assert_flags(
            &LustreSpec {
                data_compression_type: s("GZIP"),
                ..p2()
            },
            &["data_compression_type"],
        );
    }

    // --- metadata_configuration -------------------------------------------------------------

    #[test]
    fn metadata_only_on_persistent_2() {
        let spec = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("AUTOMATIC"),
                iops: None,
            }),
            ..scratch2()
        };
        let v = assert_flags(&spec, &["metadata_configuration"]);
        assert_eq!(v.summary, "metadata_configuration is not supported on SCRATCH_2");
    }

    #[test]
    fn metadata_mode_values() {
        let auto = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("AUTOMATIC"),
                iops: None,
            }),
            ..p2()
        };
        assert_valid(&auto);
        let bad = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("MANUAL"),
                iops: None,
            }),
            ..p2()
        };
        assert_flags(&bad, &["metadata_configuration", "mode"]);
        let missing = LustreSpec {
            metadata_configuration: Some(MetadataSpec { mode: None, iops: None }),
            ..p2()
        };
        assert_flags(&missing, &["metadata_configuration", "mode"]);
    }

    #[test]
    fn metadata_iops_values() {
        for ok in [1500, 3000, 6000, 12000, 24000, 96000, 192000] {
            let spec = LustreSpec {
                metadata_configuration: Some(MetadataSpec {
                    mode: s("USER_PROVISIONED"),
                    iops: Some(ok),
                }),
                ..p2()
            };
            assert_valid(&spec);
        }
        for bad in [0, 1000, 4500, 18000, 204000] {
            let spec = LustreSpec {
                metadata_configuration: Some(MetadataSpec {
                    mode: s("USER_PROVISIONED"),
                    iops: Some(bad),
                }),
                ..p2()
            };
            assert_flags(&spec, &["metadata_configuration", "iops"]);
        }
        // USER_PROVISIONED may leave iops unset: the API documents it as optional.
        let spec = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("USER_PROVISIONED"),
                iops: None,
            }),
            ..p2()
        };
        assert_valid(&spec);
    }

    #[test]
    fn metadata_iops_only_in_user_provisioned_mode() {
        let spec = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("AUTOMATIC"),
                iops: Some(12000),
            }),
            ..p2()
        };
        let v = assert_flags(&spec, &["metadata_configuration", "iops"]);
        assert!(v.summary.contains("AUTOMATIC"));
    }

    // --- efa_enabled ------------------------------------------------------------------------

    #[test]
    fn efa_accepted_on_persistent_2_with_metadata() {
        assert_valid(&p2());
        let auto = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("AUTOMATIC"),
                iops: None,
            }),
            ..p2()
        };
        assert_valid(&auto);
    }

    #[test]
    fn efa_rejections() {
        assert_flags(
            &LustreSpec {
                efa_enabled: Some(true),
                ..scratch2()
            },
            &["efa_enabled"],
        );
        let v = assert_flags(
            &LustreSpec {
                metadata_configuration: None,
                ..p2()
            },
            &["efa_enabled"],
        );
        assert_eq!(v.summary, "efa_enabled needs a metadata_configuration block");
        assert_valid(&LustreSpec {
            efa_enabled: Some(false),
            metadata_configuration: None,
            file_system_type_version: s("2.12"),
            ..p2()
        });
    }

    // --- root_squash_configuration ----------------------------------------------------------

    #[test]
    fn root_squash_format() {
        let with = |rs: &str| LustreSpec {
            root_squash_configuration: Some(RootSquashSpec {
                root_squash: s(rs),
                no_squash_nids: None,
            }),
            ..p2()
        };
        assert_valid(&with("365534:65534"));
        assert_valid(&with("0:0"));
        assert_valid(&with("4294967294:1"));
        for bad in [
            "65534",
            "a:b",
            "0:65534",
            "65534:0",
            "4294967295:1",
            "12345678901:1",
            ":1",
        ] {
            assert_flags(&with(bad), &["root_squash_configuration", "root_squash"]);
        }
    }

    #[test]
    fn no_squash_nids_format() {
        let with = |nids: &[&str]| LustreSpec {
            root_squash_configuration: Some(RootSquashSpec {
                root_squash: s("65534:65534"),
                no_squash_nids: list(nids),
            }),
            ..p2()
        };
        assert_valid(&with(&[
            "10.0.1.6@tcp",
            "10.0.[2-10].[1-255]@tcp",
            "192.168.0.[0-255]@tcp",
        ]));
        for bad in [
            "10.0.1.6",
            "10.0.1@tcp",
            "10.0.1.256@tcp",
            "10.0.[10-2].1@tcp",
            "10.0.1.6@o2ib",
            "a.b.c.d@tcp",
        ] {
            assert_flags(&with(&[bad]), &["root_squash_configuration", "no_squash_nids", "0"]);
        }
        let many: Vec<String> = (0..65).map(|i| format!("10.0.0.{i}@tcp")).collect();
        let too_many = LustreSpec {
            root_squash_configuration: Some(RootSquashSpec {
                root_squash: s("65534:65534"),
                no_squash_nids: Some(many),
            }),
            ..p2()
        };
        assert_flags(&too_many, &["root_squash_configuration", "no_squash_nids"]);
    }

    #[test]
    fn no_squash_nids_need_root_squash_enabled() {
        let spec = LustreSpec {
            root_squash_configuration: Some(RootSquashSpec {
                root_squash: s("0:0"),
                no_squash_nids: list(&["10.0.1.6@tcp"]),
            }),
            ..p2()
        };
        let v = assert_flags(&spec, &["root_squash_configuration", "no_squash_nids"]);
        assert!(v.summary.contains("disabled"));
    }

    // --- log_configuration ------------------------------------------------------------------

    #[test]
    fn log_level_values() {
        for level in ["DISABLED", "WARN_ONLY", "ERROR_ONLY", "WARN_ERROR"] {
            assert_valid(&LustreSpec {
                log_configuration: Some(LogSpec {
                    level: s(level),
                    destination: None,
                }),
                ..p2()
            });
        }
        assert_flags(
            &LustreSpec {
                log_configuration: Some(LogSpec {
                    level: s("FAILURE_ONLY"),
                    destination: None,
                }),
                ..p2()
            },
            &["log_configuration", "level"],
        );
        assert_flags(
            &LustreSpec {
                log_configuration: Some(LogSpec {
                    level: None,
                    destination: None,
                }),
                ..p2()
            },
            &["log_configuration", "level"],
        );
    }

    #[test]
    fn log_destination_rules() {
        let with = |level: &str, dest: &str| LustreSpec {
            log_configuration: Some(LogSpec {
                level: s(level),
                destination: s(dest),
            }),
            ..p2()
        };
        assert_valid(&with(
            "ERROR_ONLY",
            "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/fsx/lustre:*",
        ));
        assert_valid(&with(
            "WARN_ONLY",
            "arn:aws-cn:logs:cn-north-1:111122223333:log-group:/aws/fsx/hpc",
        ));
        let disabled = assert_flags(
            &with(
                "DISABLED",
                "arn:aws:logs:us-east-1:111122223333:log-group:/aws/fsx/lustre",
            ),
            &["log_configuration", "destination"],
        );
        assert!(disabled.summary.contains("DISABLED"));
        for bad in [
            "arn:aws:logs:us-east-1:111122223333:log-group:/my/app",
            "arn:aws:firehose:us-east-1:111122223333:deliverystream/aws-fsx-logs",
            "arn:aws:s3:::aws-fsx-bucket",
            "/aws/fsx/lustre",
            "arn:aws:logs:us-east-1:111122223333:destination:/aws/fsx/x",
        ] {
            assert_flags(&with("WARN_ERROR", bad), &["log_configuration", "destination"]);
        }
    }

    // --- kms_key_id -------------------------------------------------------------------------

    #[test]
    fn kms_key_formats() {
        for ok in [
            "1234abcd-12ab-34cd-56ef-1234567890ab",
            "mrk-1234abcd12ab34cd56ef1234567890ab",
            "alias/hpc-fsx",
            "arn:aws:kms:us-east-1:111122223333:alias/hpc-fsx",
            "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        ] {
            assert_valid(&LustreSpec {
                kms_key_id: s(ok),
                ..p2()
            });
        }
        for bad in [
            "my-key",
            "alias/",
            "arn:aws:s3:::bucket",
            "arn:aws:kms:us-east-1:1111:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "",
        ] {
            assert_flags(
                &LustreSpec {
                    kms_key_id: s(bad),
                    ..p2()
                },
                &["kms_key_id"],
            );
        }
    }

    #[test]
    fn kms_key_only_on_persistent() {
        let v = assert_flags(
            &LustreSpec {
                kms_key_id: s("alias/hpc-fsx"),
                ..scratch2()
            },
            &["kms_key_id"],
        );
        assert_eq!(v.summary, "kms_key_id is not supported on SCRATCH_2");
        assert_flags(
            &LustreSpec {
                kms_key_id: s("alias/hpc-fsx"),
                deployment_type: None,
                ..scratch2()
            },
            &["kms_key_id"],
        );
    }

    // --- subnet_ids / security_group_ids ----------------------------------------------------

    #[test]
    fn exactly_one_subnet() {
        assert_valid(&LustreSpec {
            subnet_ids: list(&["subnet-12345678"]),
            ..p2()
        });
        let v = assert_flags(
            &LustreSpec {
                subnet_ids: list(&["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]),
                ..p2()
            },
            &["subnet_ids"],
        );
        assert!(v.summary.contains("exactly 1"));
        assert_flags(
            &LustreSpec {
                subnet_ids: list(&[]),
                ..p2()
            },
            &["subnet_ids"],
        );
        assert_flags(
            &LustreSpec {
                subnet_ids: list(&["sn-0123456789abcdef0"]),
                ..p2()
            },
            &["subnet_ids", "0"],
        );
        assert_flags(
            &LustreSpec {
                subnet_ids: list(&["subnet-0123"]),
                ..p2()
            },
            &["subnet_ids", "0"],
        );
        assert_flags(
            &LustreSpec {
                subnet_ids: list(&["subnet-0123456789ABCDEF0"]),
                ..p2()
            },
            &["subnet_ids", "0"],
        );
    }

    #[test]
    fn security_group_ids() {
        assert_valid(&LustreSpec {
            security_group_ids: list(&["sg-12345678"]),
            ..p2()
        });
        assert_flags(
            &LustreSpec {
                security_group_ids: list(&["group-1"]),
                ..p2()
            },
            &["security_group_ids", "0"],
        );
        assert_flags(
            &LustreSpec {
                security_group_ids: list(&["sg-12345678", "sg-12345678"]),
                ..p2()
            },
            &["security_group_ids", "1"],
        );
        let many: Vec<String> = (0..51).map(|i| format!("sg-{i:017x}")).collect();
        assert_flags(
            &LustreSpec {
                security_group_ids: Some(many),
                ..p2()
            },
            &["security_group_ids"],
        );
    }

    // --- maintenance and backup windows -----------------------------------------------------

    #[test]
    fn weekly_maintenance_format() {
        for ok in ["1:00:00", "7:23:59", "3:12:30"] {
            assert_valid(&LustreSpec {
                weekly_maintenance_start_time: s(ok),
                ..p2()
            });
        }
        for bad in [
            "0:00:00",
            "8:01:00",
            "1:24:00",
            "1:00:60",
            "1:0000",
            "Mon:01:00",
            "1:1:00",
        ] {
            assert_flags(
                &LustreSpec {
                    weekly_maintenance_start_time: s(bad),
                    ..p2()
                },
                &["weekly_maintenance_start_time"],
            );
        }
    }

    #[test]
    fn daily_backup_time_format() {
        assert_valid(&LustreSpec {
            daily_automatic_backup_start_time: s("23:59"),
            ..p2()
        });
        for bad in ["24:00", "5:00", "05:60", "0500"] {
            assert_flags(
                &LustreSpec {
                    daily_automatic_backup_start_time: s(bad),
                    ..p2()
                },
                &["daily_automatic_backup_start_time"],
            );
        }
    }

    #[test]
    fn backup_retention_range() {
        for ok in [0, 1, 90] {
            assert_valid(&LustreSpec {
                automatic_backup_retention_days: Some(ok),
                ..p2()
            });
        }
        for bad in [-1, 91] {
            assert_flags(
                &LustreSpec {
                    automatic_backup_retention_days: Some(bad),
                    ..p2()
                },
                &["automatic_backup_retention_days"],
            );
        }
    }

    #[test]
    fn no_backups_on_scratch() {
        assert_valid(&LustreSpec {
            automatic_backup_retention_days: Some(0),
            skip_final_backup: Some(true),
            copy_tags_to_backups: Some(false),
            ..scratch2()
        });
        let base = LustreSpec {
            import_path: None,
            export_path: None,
            auto_import_policy: None,
            imported_file_chunk_size: None,
            ..scratch2()
        };
        assert_flags(
            &LustreSpec {
                automatic_backup_retention_days: Some(7),
                ..base.clone()
            },
            &["automatic_backup_retention_days"],
        );
        assert_flags(
            &LustreSpec {
                daily_automatic_backup_start_time: s("05:00"),
                ..base.clone()
            },
            &["daily_automatic_backup_start_time"],
        );
        assert_flags(
            &LustreSpec {
                copy_tags_to_backups: Some(true),
                ..base.clone()
            },
            &["copy_tags_to_backups"],
        );
        assert_flags(
            &LustreSpec {
                skip_final_backup: Some(false),
                ..base.clone()
            },
            &["skip_final_backup"],
        );
        assert_flags(
            &LustreSpec {
                final_backup_tags: pairs(&[("a", "b")]),
                ..base
            },
            &["final_backup_tags"],
        );
    }

    #[test]
    fn no_backups_when_linked_to_s3() {
        let linked = LustreSpec {
            automatic_backup_retention_days: Some(7),
            ..p2_dra()
        };
        let v = assert_flags(&linked, &["automatic_backup_retention_days"]);
        assert!(v.summary.contains("linked to S3"));
        assert_flags(
            &LustreSpec {
                copy_tags_to_backups: Some(true),
                ..p2_dra()
            },
            &["copy_tags_to_backups"],
        );
        assert_flags(
            &LustreSpec {
                skip_final_backup: Some(false),
                ..p2_dra()
            },
            &["skip_final_backup"],
        );
        assert_valid(&LustreSpec {
            automatic_backup_retention_days: Some(0),
            ..p2_dra()
        });
    }

    #[test]
    fn final_backup_tags_need_a_final_backup() {
        assert_valid(&p2());
        let v = assert_flags(
            &LustreSpec {
                skip_final_backup: None,
                ..p2()
            },
            &["final_backup_tags"],
        );
        assert!(v.summary.contains("skip_final_backup = false"));
        assert_flags(
            &LustreSpec {
                final_backup_tags: pairs(&[("aws:backup", "x")]),
                ..p2()
            },
            &["final_backup_tags", "aws:backup"],
        );
    }

    // --- legacy S3 link ---------------------------------------------------------------------

    #[test]
    fn s3_url_syntax_and_bucket_names() {
        for ok in ["s3://abc", "s3://my.bucket-1/prefix/", "s3://a1b/deep/ly/nested"] {
            assert_valid(&LustreSpec {
                import_path: s(ok),
                export_path: None,
                ..scratch2()
            });
        }
        for bad in [
            "my-bucket/prefix",
            "https://my-bucket.s3.amazonaws.com/x",
            "s3://",
            "s3:///prefix",
            "s3://ab",
            "s3://My-Bucket",
            "s3://-bucket",
            "s3://bucket-",
            "s3://my..bucket",
            "s3://192.168.5.4",
            "s3://xn--bucket",
            "s3://my_bucket",
            "s3://bucket/line\nbreak",
        ] {
            let spec = LustreSpec {
                import_path: s(bad),
                export_path: None,
                ..scratch2()
            };
            assert_flags(&spec, &["import_path"]);
        }
    }

    #[test]
    fn export_path_needs_import_and_same_bucket() {
        let v = assert_flags(
            &LustreSpec {
                export_path: s("s3://other-bucket/out"),
                ..scratch2()
            },
            &["export_path"],
        );
        assert!(v.summary.contains("differs"));
        assert_flags(
            &LustreSpec {
                import_path: None,
                auto_import_policy: None,
                imported_file_chunk_size: None,
                ..scratch2()
            },
            &["export_path"],
        );
        assert_flags(
            &LustreSpec {
                export_path: s("s3:/my-bucket"),
                ..scratch2()
            },
            &["export_path"],
        );
    }

    #[test]
    fn auto_import_policy_values_and_import_path() {
        for ok in ["NONE", "NEW", "NEW_CHANGED", "NEW_CHANGED_DELETED"] {
            assert_valid(&LustreSpec {
                auto_import_policy: s(ok),
                ..scratch2()
            });
        }
        assert_flags(
            &LustreSpec {
                auto_import_policy: s("ALL"),
                ..scratch2()
            },
            &["auto_import_policy"],
        );
        let orphan = LustreSpec {
            import_path: None,
            export_path: None,
            imported_file_chunk_size: None,
            ..scratch2()
        };
        assert_flags(&orphan, &["auto_import_policy"]);
        // Auto import works with the legacy link on SCRATCH_1 too.
        assert_valid(&LustreSpec {
            deployment_type: s("SCRATCH_1"),
            ..scratch2()
        });
    }

    #[test]
    fn imported_file_chunk_size_range_and_import_path() {
        for ok in [1, 512000] {
            assert_valid(&LustreSpec {
                imported_file_chunk_size: Some(ok),
                ..scratch2()
            });
        }
        for bad in [0, 512001] {
            assert_flags(
                &LustreSpec {
                    imported_file_chunk_size: Some(bad),
                    ..scratch2()
                },
                &["imported_file_chunk_size"],
            );
        }
        let orphan = LustreSpec {
            import_path: None,
            export_path: None,
            auto_import_policy: None,
            ..scratch2()
        };
        assert_flags(&orphan, &["imported_file_chunk_size"]);
    }

    #[test]
    fn legacy_link_not_on_persistent_2() {
        let spec = LustreSpec {
            import_path: s("s3://my-bucket"),
            export_path: s("s3://my-bucket/out"),
            auto_import_policy: s("NEW"),
            imported_file_chunk_size: Some(2048),
            automatic_backup_retention_days: Some(0),
            copy_tags_to_backups: Some(false),
            skip_final_backup: Some(true),
            final_backup_tags: None,
            ..p2()
        };
        for name in [
            "import_path",
            "export_path",
            "auto_import_policy",
            "imported_file_chunk_size",
        ] {
            let v = assert_flags(&spec, &[name]);
            assert!(v.summary.contains("PERSISTENT_2"));
            assert!(v.detail.contains("data_repository"));
        }
    }

    #[test]
    fn legacy_link_not_with_data_repositories() {
        let spec = LustreSpec {
            deployment_type: s("SCRATCH_2"),
            per_unit_storage_throughput: None,
            file_system_type_version: s("2.15"),
            import_path: s("s3://my-bucket"),
            ..p2_dra()
        };
        let v = assert_flags(&spec, &["import_path"]);
        assert!(v.summary.contains("data_repository"));
    }

    // --- file_system_type_version -----------------------------------------------------------

    #[test]
    fn file_system_type_version_values() {
        for ok in ["2.10", "2.12", "2.15"] {
            assert_valid(&LustreSpec {
                file_system_type_version: s(ok),
                ..scratch2()
            });
        }
        for bad in ["2.11", "3", "2.16", "v2.15"] {
            assert_flags(
                &LustreSpec {
                    file_system_type_version: s(bad),
                    ..scratch2()
                },
                &["file_system_type_version"],
            );
        }
    }

    #[test]
    fn persistent_2_version_rules() {
        let no_meta = LustreSpec {
            metadata_configuration: None,
            efa_enabled: None,
            ..p2()
        };
        assert_valid(&LustreSpec {
            file_system_type_version: s("2.12"),
            ..no_meta.clone()
        });
        assert_flags(
            &LustreSpec {
                file_system_type_version: s("2.10"),
                ..no_meta
            },
            &["file_system_type_version"],
        );
        let v = assert_flags(
            &LustreSpec {
                file_system_type_version: s("2.12"),
                ..p2()
            },
            &["file_system_type_version"],
        );
        assert!(v.detail.contains("2.15"));
    }

    // --- data_repository --------------------------------------------------------------------

    #[test]
    fn data_repositories_allowed_on_2_12_plus_except_scratch_1() {
        let p1 = LustreSpec {
            deployment_type: s("PERSISTENT_1"),
            per_unit_storage_throughput: Some(50),
            file_system_type_version: s("2.12"),
            ..p2_dra()
        };
        assert_valid(&p1);
        let v = assert_flags(
            &LustreSpec {
                file_system_type_version: None,
                ..p1.clone()
            },
            &["data_repository"],
        );
        assert!(v.detail.contains("2.12"));
        assert_flags(
            &LustreSpec {
                file_system_type_version: s("2.10"),
                ..p1
            },
            &["data_repository"],
        );
        let s1 = LustreSpec {
            deployment_type: s("SCRATCH_1"),
            per_unit_storage_throughput: None,
            ..p2_dra()
        };
        let v = assert_flags(&s1, &["data_repository"]);
        assert!(v.summary.contains("SCRATCH_1"));
    }

    #[test]
    fn data_repository_limit() {
        let mut spec = p2_dra();
        spec.data_repositories = (0..9)
            .map(|i| DataRepositorySpec {
                file_system_path: Some(format!("/ns{i}")),
                data_repository_path: Some(format!("s3://bucket-{i}")),
                ..Default::default()
            })
            .collect();
        assert_flags(&spec, &["data_repository"]);
        spec.data_repositories.truncate(8);
        assert_valid(&spec);
    }

    #[test]
    fn data_repository_paths() {
        let mut spec = p2_dra();
        spec.data_repositories[1].file_system_path = s("ns2");
        spec.data_repositories[0].data_repository_path = s("s3://Data");
        let found = paths(&spec);
        assert!(found.contains(&path(&["data_repository", "0", "data_repository_path"])));
        assert!(found.contains(&path(&["data_repository", "1", "file_system_path"])));
        // Reported in attribute order, then by block index.
        assert_eq!(
            found,
            vec![
                path(&["data_repository", "0", "data_repository_path"]),
                path(&["data_repository", "1", "file_system_path"])
            ]
        );
        let mut long = p2_dra();
        long.data_repositories[1].file_system_path = Some(format!("/{}", "a".repeat(4096)));
        assert_flags(&long, &["data_repository", "1", "file_system_path"]);
    }

    #[test]
    fn data_repository_overlaps() {
        let mut nested = p2_dra();
        nested.data_repositories[1].file_system_path = s("/ns1/deeper");
        let v = assert_flags(&nested, &["data_repository", "1", "file_system_path"]);
        assert!(v.summary.contains("overlaps"));
        let mut root = p2_dra();
        root.data_repositories[0].file_system_path = s("/");
        assert_flags(&root, &["data_repository", "1", "file_system_path"]);
        let mut same = p2_dra();
        same.data_repositories[1].file_system_path = s("/ns1/");
        assert_flags(&same, &["data_repository", "1", "file_system_path"]);
        let mut sibling = p2_dra();
        sibling.data_repositories[1].file_system_path = s("/ns10");
        assert_valid(&sibling);
        let mut dup_s3 = p2_dra();
        dup_s3.data_repositories[1].data_repository_path = s("s3://data-bucket/ns1");
        assert_flags(&dup_s3, &["data_repository", "1", "data_repository_path"]);
        let mut single_root = p2_dra();
        single_root.data_repositories.truncate(1);
        single_root.data_repositories[0].file_system_path = s("/");
        assert_valid(&single_root);
    }

    #[test]
    fn data_repository_chunk_and_events() {
        let mut spec = p2_dra();
        spec.data_repositories[0].imported_file_chunk_size = Some(600_000);
        spec.data_repositories[0].auto_import_events = list(&["NEW", "NEW"]);
        spec.data_repositories[1].auto_export_events = list(&["MODIFIED"]);
        let found = paths(&spec);
        assert!(found.contains(&path(&["data_repository", "0", "imported_file_chunk_size"])));
        assert!(found.contains(&path(&["data_repository", "0", "auto_import_events", "1"])));
        assert!(found.contains(&path(&["data_repository", "1", "auto_export_events", "0"])));
        let mut too_many = p2_dra();
        too_many.data_repositories[0].auto_import_events = list(&["NEW", "CHANGED", "DELETED", "NEW"]);
        assert_flags(&too_many, &["data_repository", "0", "auto_import_events"]);
        let mut empty = p2_dra();
        empty.data_repositories[0].auto_export_events = list(&[]);
        assert_valid(&empty);
    }

    // --- tags -------------------------------------------------------------------------------

    #[test]
    fn tag_rules() {
        assert_valid(&LustreSpec {
            tags: pairs(&[("Team", "hpc/ml: a+b=c @x"), ("empty", "")]),
            ..p2()
        });
        assert_flags(
            &LustreSpec {
                tags: pairs(&[("aws:cloudformation", "x")]),
                ..p2()
            },
            &["tags", "aws:cloudformation"],
        );
        assert_flags(
            &LustreSpec {
                tags: pairs(&[("AWS:Owner", "x")]),
                ..p2()
            },
            &["tags", "AWS:Owner"],
        );
        assert_flags(
            &LustreSpec {
                tags: pairs(&[("", "x")]),
                ..p2()
            },
            &["tags", ""],
        );
        let long_key = "k".repeat(129);
        assert_flags(
            &LustreSpec {
                tags: pairs(&[(long_key.as_str(), "x")]),
                ..p2()
            },
            &["tags", long_key.as_str()],
        );
        let long_value = "v".repeat(257);
        assert_flags(
            &LustreSpec {
                tags: pairs(&[("k", long_value.as_str())]),
                ..p2()
            },
            &["tags", "k"],
        );
        assert_flags(
            &LustreSpec {
                tags: pairs(&[("k", "semi;colon")]),
                ..p2()
            },
            &["tags", "k"],
        );
        assert_flags(
            &LustreSpec {
                tags: pairs(&[("k", "1"), ("k", "2")]),
                ..p2()
            },
            &["tags", "k"],
        );
        let many: Vec<(String, String)> = (0..51).map(|i| (format!("k{i}"), String::new())).collect();
        assert_flags(
            &LustreSpec {
                tags: Some(many),
                ..p2()
            },
            &["tags"],
        );
    }

    // --- ordering ---------------------------------------------------------------------------

    #[test]
    fn violations_come_in_attribute_order() {
        let spec = LustreSpec {
            tags: pairs(&[("aws:x", "y")]),
            storage_capacity: Some(1000),
            weekly_maintenance_start_time: s("9:00:00"),
            deployment_type: s("PERSISTENT_2"),
            per_unit_storage_throughput: Some(7),
            ..p2()
        };
        let roots: Vec<String> = validate(&spec).into_iter().map(|v| v.path[0].clone()).collect();
        assert_eq!(
            roots,
            vec![
                "storage_capacity",
                "per_unit_storage_throughput",
                "weekly_maintenance_start_time",
                "tags"
            ]
        );
    }

    // --- replacement_paths ------------------------------------------------------------------

    #[test]
    fn identical_specs_need_no_replacement() {
        assert!(replacement_paths(&p2(), &p2()).is_empty());
        assert!(replacement_paths(&p2_dra(), &p2_dra()).is_empty());
    }

    #[test]
    fn storage_grows_in_place_and_shrink_replaces() {
        let grown = LustreSpec {
            storage_capacity: Some(4800),
            ..p2()
        };
        assert!(replacement_paths(&p2(), &grown).is_empty());
        let shrunk = LustreSpec {
            storage_capacity: Some(1200),
            ..p2()
        };
        assert_eq!(replacement_paths(&p2(), &shrunk), vec![path(&["storage_capacity"])]);
    }

    #[test]
    fn scratch_1_storage_cannot_grow() {
        let old = LustreSpec {
            deployment_type: s("SCRATCH_1"),
            ..scratch2()
        };
        let new = LustreSpec {
            storage_capacity: Some(3600),
            ..old.clone()
        };
        assert_eq!(replacement_paths(&old, &new), vec![path(&["storage_capacity"])]);
        let unset = LustreSpec {
            deployment_type: None,
            ..old.clone()
        };
        let grown = LustreSpec {
            storage_capacity: Some(3600),
            ..unset.clone()
        };
        assert_eq!(replacement_paths(&unset, &grown), vec![path(&["storage_capacity"])]);
    }

    #[test]
    fn fixed_attributes_force_replacement() {
        let old = p2();
        let cases: Vec<(LustreSpec, &[&str])> = vec![
            (
                LustreSpec {
                    deployment_type: s("PERSISTENT_1"),
                    ..old.clone()
                },
                &["deployment_type"],
            ),
            (
                LustreSpec {
                    deployment_type: None,
                    ..old.clone()
                },
                &["deployment_type"],
            ),
            (
                LustreSpec {
                    storage_type: s("HDD"),
                    ..old.clone()
                },
                &["storage_type"],
            ),
            (
                LustreSpec {
                    kms_key_id: s("alias/other"),
                    ..old.clone()
                },
                &["kms_key_id"],
            ),
            (
                LustreSpec {
                    subnet_ids: list(&["subnet-0123456789abcdef9"]),
                    ..old.clone()
                },
                &["subnet_ids"],
            ),
            (
                LustreSpec {
                    security_group_ids: list(&["sg-0123456789abcdef0"]),
                    ..old.clone()
                },
                &["security_group_ids"],
            ),
            (
                LustreSpec {
                    efa_enabled: Some(false),
                    ..old.clone()
                },
                &["efa_enabled"],
            ),
            (
                LustreSpec {
                    copy_tags_to_backups: Some(false),
                    ..old.clone()
                },
                &["copy_tags_to_backups"],
            ),
            (
                LustreSpec {
                    file_system_type_version: s("2.12"),
                    ..old.clone()
                },
                &["file_system_type_version"],
            ),
            (
                LustreSpec {
                    metadata_configuration: Some(MetadataSpec {
                        mode: s("USER_PROVISIONED"),
                        iops: Some(3000),
                    }),
                    ..old.clone()
                },
                &["metadata_configuration", "iops"],
            ),
        ];
        for (new, want) in cases {
            assert_eq!(replacement_paths(&old, &new), vec![path(want)], "for {want:?}");
        }
    }

    #[test]
    fn legacy_link_and_drive_cache_force_replacement() {
        let old = scratch2();
        assert_eq!(
            replacement_paths(
                &old,
                &LustreSpec {
                    import_path: s("s3://my-bucket/other"),
                    ..old.clone()
                }
            ),
            vec![path(&["import_path"])]
        );
        assert_eq!(
            replacement_paths(
                &old,
                &LustreSpec {
                    export_path: s("s3://my-bucket/x"),
                    ..old.clone()
                }
            ),
            vec![path(&["export_path"])]
        );
        assert_eq!(
            replacement_paths(
                &old,
                &LustreSpec {
                    imported_file_chunk_size: Some(2048),
                    ..old.clone()
                }
            ),
            vec![path(&["imported_file_chunk_size"])]
        );
        assert!(replacement_paths(
            &old,
            &LustreSpec {
                auto_import_policy: s("NEW_CHANGED_DELETED"),
                ..old.clone()
            }
        )
        .is_empty());
        let hdd = p1_hdd();
        assert_eq!(
            replacement_paths(
                &hdd,
                &LustreSpec {
                    drive_cache_type: s("NONE"),
                    ..hdd.clone()
                }
            ),
            vec![path(&["drive_cache_type"])]
        );
    }

    #[test]
    fn updatable_attributes_change_in_place() {
        let old = p2();
        let new = LustreSpec {
            storage_capacity: Some(7200),
            data_compression_type: s("NONE"),
            metadata_configuration: Some(MetadataSpec {
                mode: s("USER_PROVISIONED"),
                iops: Some(24000),
            }),
            root_squash_configuration: Some(RootSquashSpec {
                root_squash: s("0:0"),
                no_squash_nids: None,
            }),
            log_configuration: Some(LogSpec {
                level: s("DISABLED"),
                destination: None,
            }),
            weekly_maintenance_start_time: s("1:01:00"),
            automatic_backup_retention_days: Some(30),
            daily_automatic_backup_start_time: s("02:00"),
            skip_final_backup: Some(true),
            final_backup_tags: None,
            tags: pairs(&[("Name", "renamed")]),
            security_group_ids: list(&["sg-0fedcba987654321f", "sg-0123456789abcdef0"]),
            ..old.clone()
        };
        assert!(
            replacement_paths(&old, &new).is_empty(),
            "{:?}",
            replacement_paths(&old, &new)
        );
        let auto = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("AUTOMATIC"),
                iops: None,
            }),
            ..old.clone()
        };
        assert!(replacement_paths(&old, &auto).is_empty());
        let upgraded_from = LustreSpec {
            file_system_type_version: s("2.12"),
            metadata_configuration: None,
            efa_enabled: None,
            ..old.clone()
        };
        let upgraded_to = LustreSpec {
            file_system_type_version: s("2.15"),
            ..upgraded_from.clone()
        };
        assert!(replacement_paths(&upgraded_from, &upgraded_to).is_empty());
    }

    #[test]
    fn throughput_changes_in_place_only_for_persistent_ssd_without_efa() {
        let no_efa = LustreSpec {
            efa_enabled: Some(false),
            ..p2()
        };
        assert!(replacement_paths(
            &no_efa,
            &LustreSpec {
                per_unit_storage_throughput: Some(1000),
                ..no_efa.clone()
            }
        )
        .is_empty());
        assert_eq!(
            replacement_paths(
                &p2(),
                &LustreSpec {
                    per_unit_storage_throughput: Some(1000),
                    ..p2()
                }
            ),
            vec![path(&["per_unit_storage_throughput"])]
        );
        let hdd = p1_hdd();
        assert_eq!(
            replacement_paths(
                &hdd,
                &LustreSpec {
                    per_unit_storage_throughput: Some(40),
                    ..hdd.clone()
                }
            ),
            vec![path(&["per_unit_storage_throughput"])]
        );
    }

    #[test]
    fn metadata_configuration_cannot_be_added_later() {
        let old = LustreSpec {
            metadata_configuration: None,
            efa_enabled: None,
            file_system_type_version: s("2.15"),
            ..p2()
        };
        let new = LustreSpec {
            metadata_configuration: Some(MetadataSpec {
                mode: s("AUTOMATIC"),
                iops: None,
            }),
            ..old.clone()
        };
        assert_eq!(replacement_paths(&old, &new), vec![path(&["metadata_configuration"])]);
    }

    #[test]
    fn unknown_new_values_keep_current_state() {
        let new = LustreSpec {
            kms_key_id: None,
            subnet_ids: None,
            security_group_ids: None,
            storage_capacity: None,
            ..p2()
        };
        assert!(replacement_paths(&p2(), &new).is_empty());
    }

    #[test]
    fn data_repository_changes_do_not_replace_the_file_system() {
        let old = p2_dra();
        let mut new = old.clone();
        new.data_repositories.pop();
        new.data_repositories[0].file_system_path = s("/moved");
        assert!(replacement_paths(&old, &new).is_empty());
    }
}
