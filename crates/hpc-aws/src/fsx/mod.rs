//! FSx for Lustre: create, find, update, delete, waiters, and S3 data repository associations.
//!
//! One model ([`LustreSpec`]) describes a file system's settings; it is what the provider's
//! plan rules check, what create and update send, and what [`Fsx::find_lustre`] reads back.

mod spec;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_fsx::types::{
    AutoExportPolicy, AutoImportPolicy, AutoImportPolicyType, CreateFileSystemLustreConfiguration,
    CreateFileSystemLustreMetadataConfiguration, DataCompressionType, DataRepositoryAssociation as SdkDra,
    DataRepositoryLifecycle, DeleteFileSystemLustreConfiguration, DriveCacheType, EventType, FileSystem,
    FileSystemLifecycle, FileSystemType, Filter, FilterName, LustreAccessAuditLogLevel, LustreDeploymentType,
    LustreLogCreateConfiguration, LustreRootSquashConfiguration, MetadataConfigurationMode,
    S3DataRepositoryConfiguration, StorageType, Tag, UpdateFileSystemLustreConfiguration,
    UpdateFileSystemLustreMetadataConfiguration,
};
use aws_sdk_fsx::Client;

pub use spec::{DataRepositorySpec, LogSpec, LustreSpec, MetadataSpec, RootSquashSpec};

use sha2::{Digest, Sha256};

use crate::error::{AwsError, Result};
use crate::view::Views;
use crate::wait::{self, Backoff, Poll};

const FS_NOT_FOUND: &[&str] = &["FileSystemNotFound"];
const DRA_NOT_FOUND: &[&str] = &["DataRepositoryAssociationNotFound"];

/// A Lustre file system as FSx reports it.
/// How many destroyed file systems of identical settings a create steps over.
const MAX_CREATE_ATTEMPTS: u32 = 64;

/// The ClientRequestToken of a create: a digest of everything the request carries (`request`'s
/// Debug form: settings and tags) and the attempt number; at most 63 characters, as FSx requires.
pub fn create_token(request: &impl std::fmt::Debug, attempt: u32) -> String {
    let digest = Sha256::digest(format!("{request:?}").as_bytes());
    let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("hpc-{hex}-{attempt}")
}

#[derive(Debug, Clone, PartialEq)]
pub struct LustreFileSystem {
    pub id: String,
    pub arn: String,
    pub dns_name: String,
    pub mount_name: String,
    pub owner_id: String,
    pub vpc_id: String,
    pub network_interface_ids: Vec<String>,
    pub lifecycle: String,
    pub failure: Option<String>,
    /// Administrative actions still running, e.g. `FILE_SYSTEM_UPDATE IN_PROGRESS`.
    pub pending_actions: Vec<String>,
    /// The settings FSx reports (security groups and final-backup settings are not reported).
    pub spec: LustreSpec,
}

/// An S3 data repository association.
#[derive(Debug, Clone, PartialEq)]
pub struct DataRepositoryAssociation {
    pub id: String,
    pub arn: String,
    pub file_system_id: String,
    pub lifecycle: String,
    pub failure: Option<String>,
    pub spec: DataRepositorySpec,
}

#[derive(Clone, Debug)]
pub struct Fsx {
    client: Client,
    region: String,
    /// The region-wide view for refreshes (one key: the region).
    views: Arc<Views<View>>,
}

/// Every file system and data repository association of the region, read in a few paginated
/// calls instead of two calls per file system.
#[derive(Debug, Default)]
struct View {
    file_systems: HashMap<String, LustreFileSystem>,
    associations: HashMap<String, Vec<DataRepositoryAssociation>>,
}

fn tags_to_sdk(tags: &[(String, String)]) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

fn tags_from_sdk(tags: &[Tag]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = tags
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn events(list: &Option<Vec<String>>) -> Option<Vec<EventType>> {
    list.as_ref()
        .map(|l| l.iter().map(|e| EventType::from(e.as_str())).collect())
}

fn s3_config(spec: &DataRepositorySpec) -> Option<S3DataRepositoryConfiguration> {
    if spec.auto_import_events.is_none() && spec.auto_export_events.is_none() {
        return None;
    }
    Some(
        S3DataRepositoryConfiguration::builder()
            .set_auto_import_policy(
                events(&spec.auto_import_events).map(|e| AutoImportPolicy::builder().set_events(Some(e)).build()),
            )
            .set_auto_export_policy(
                events(&spec.auto_export_events).map(|e| AutoExportPolicy::builder().set_events(Some(e)).build()),
            )
            .build(),
    )
}

fn i32_of(v: Option<i64>) -> Option<i32> {
    v.and_then(|v| i32::try_from(v).ok())
}

fn log_config(log: &Option<LogSpec>) -> Option<LustreLogCreateConfiguration> {
    log.as_ref().map(|l| {
        LustreLogCreateConfiguration::builder()
            .set_level(l.level.as_deref().map(LustreAccessAuditLogLevel::from))
            .set_destination(l.destination.clone())
            .build()
    })
}

fn root_squash(rs: &Option<RootSquashSpec>) -> Option<LustreRootSquashConfiguration> {
    rs.as_ref().map(|r| {
        LustreRootSquashConfiguration::builder()
            .set_root_squash(r.root_squash.clone())
            .set_no_squash_nids(r.no_squash_nids.clone())
            .build()
    })
}

/// What the file system is, in the terms of its configuration.
fn spec_from_sdk(fs: &FileSystem) -> LustreSpec {
    let lc = fs.lustre_configuration();
    let drc = lc.and_then(|l| l.data_repository_configuration());
    LustreSpec {
        storage_capacity: fs.storage_capacity().map(i64::from),
        deployment_type: lc.and_then(|l| l.deployment_type()).map(|d| d.as_str().to_string()),
        storage_type: fs.storage_type().map(|s| s.as_str().to_string()),
        per_unit_storage_throughput: lc.and_then(|l| l.per_unit_storage_throughput()).map(i64::from),
        drive_cache_type: lc.and_then(|l| l.drive_cache_type()).map(|d| d.as_str().to_string()),
        data_compression_type: lc
            .and_then(|l| l.data_compression_type())
            .map(|d| d.as_str().to_string()),
        metadata_configuration: lc.and_then(|l| l.metadata_configuration()).map(|m| MetadataSpec {
            mode: m.mode().map(|x| x.as_str().to_string()),
            iops: m.iops().map(i64::from),
        }),
        efa_enabled: lc.and_then(|l| l.efa_enabled()),
        root_squash_configuration: lc.and_then(|l| l.root_squash_configuration()).map(|r| RootSquashSpec {
            root_squash: r.root_squash().map(str::to_string),
            no_squash_nids: Some(r.no_squash_nids().to_vec()),
        }),
        log_configuration: lc.and_then(|l| l.log_configuration()).map(|l| LogSpec {
            level: l.level().map(|x| x.as_str().to_string()),
            destination: l.destination().map(str::to_string),
        }),
        kms_key_id: fs.kms_key_id().map(str::to_string),
        subnet_ids: Some(fs.subnet_ids().to_vec()),
        security_group_ids: None,
        weekly_maintenance_start_time: lc.and_then(|l| l.weekly_maintenance_start_time()).map(str::to_string),
        automatic_backup_retention_days: lc.and_then(|l| l.automatic_backup_retention_days()).map(i64::from),
        daily_automatic_backup_start_time: lc
            .and_then(|l| l.daily_automatic_backup_start_time())
            .map(str::to_string),
        copy_tags_to_backups: lc.and_then(|l| l.copy_tags_to_backups()),
        skip_final_backup: None,
        final_backup_tags: None,
        import_path: drc.and_then(|d| d.import_path()).map(str::to_string),
        export_path: drc.and_then(|d| d.export_path()).map(str::to_string),
        auto_import_policy: drc.and_then(|d| d.auto_import_policy()).map(|p| p.as_str().to_string()),
        imported_file_chunk_size: drc.and_then(|d| d.imported_file_chunk_size()).map(i64::from),
        file_system_type_version: fs.file_system_type_version().map(str::to_string),
        data_repositories: Vec::new(),
        tags: Some(tags_from_sdk(fs.tags())),
    }
}

/// Administrative actions still running (storage optimization aside).
fn pending_actions(fs: &FileSystem) -> Vec<String> {
    fs.administrative_actions()
        .iter()
        .filter(|a| {
            a.status()
                .is_some_and(|s| matches!(s.as_str(), "PENDING" | "IN_PROGRESS"))
                && a.administrative_action_type()
                    .is_some_and(|t| t.as_str() != "STORAGE_OPTIMIZATION")
        })
        .map(|a| {
            format!(
                "{} {}",
                a.administrative_action_type().map(|t| t.as_str()).unwrap_or("ACTION"),
                a.status().map(|s| s.as_str()).unwrap_or("")
            )
        })
        .collect()
}

/// Why the file system (or its last administrative action) failed.
fn failure(fs: &FileSystem) -> Option<String> {
    fs.failure_details()
        .and_then(|f| f.message())
        .map(str::to_string)
        .or_else(|| {
            fs.administrative_actions()
                .iter()
                .find(|a| a.status().is_some_and(|s| s.as_str() == "FAILED"))
                .and_then(|a| a.failure_details())
                .and_then(|f| f.message())
                .map(str::to_string)
        })
}

impl LustreFileSystem {
    fn from_sdk(fs: &FileSystem) -> Self {
        let lc = fs.lustre_configuration();
        LustreFileSystem {
            id: fs.file_system_id().unwrap_or_default().to_string(),
            arn: fs.resource_arn().unwrap_or_default().to_string(),
            dns_name: fs.dns_name().unwrap_or_default().to_string(),
            mount_name: lc.and_then(|l| l.mount_name()).unwrap_or_default().to_string(),
            owner_id: fs.owner_id().unwrap_or_default().to_string(),
            vpc_id: fs.vpc_id().unwrap_or_default().to_string(),
            network_interface_ids: fs.network_interface_ids().to_vec(),
            lifecycle: fs.lifecycle().map(|l| l.as_str().to_string()).unwrap_or_default(),
            failure: failure(fs),
            pending_actions: pending_actions(fs),
            spec: spec_from_sdk(fs),
        }
    }

    /// The command that mounts this file system on a Lustre client.
    pub fn mount_command(&self, region: &str, mount_point: &str) -> String {
        let dns = if self.dns_name.is_empty() {
            format!("{}.fsx.{region}.amazonaws.com", self.id)
        } else {
            self.dns_name.clone()
        };
        format!(
            "sudo mkdir -p {mount_point} && sudo mount -t lustre -o relatime,flock {dns}@tcp:/{} {mount_point}",
            self.mount_name
        )
    }
}

impl DataRepositoryAssociation {
    fn from_sdk(d: &SdkDra) -> Self {
        let s3 = d.s3();
        let ev = |l: Option<&[EventType]>| l.map(|e| e.iter().map(|x| x.as_str().to_string()).collect::<Vec<_>>());
        DataRepositoryAssociation {
            id: d.association_id().unwrap_or_default().to_string(),
            arn: d.resource_arn().unwrap_or_default().to_string(),
            file_system_id: d.file_system_id().unwrap_or_default().to_string(),
            lifecycle: d.lifecycle().map(|l| l.as_str().to_string()).unwrap_or_default(),
            failure: d.failure_details().and_then(|f| f.message()).map(str::to_string),
            spec: DataRepositorySpec {
                file_system_path: d.file_system_path().map(str::to_string),
                data_repository_path: d.data_repository_path().map(str::to_string),
                batch_import_meta_data_on_create: d.batch_import_meta_data_on_create(),
                imported_file_chunk_size: d.imported_file_chunk_size().map(i64::from),
                auto_import_events: ev(s3.and_then(|s| s.auto_import_policy()).map(|p| p.events())),
                auto_export_events: ev(s3.and_then(|s| s.auto_export_policy()).map(|p| p.events())),
            },
        }
    }
}

impl Fsx {
    pub fn new(client: Client, region: String) -> Self {
        Fsx {
            client,
            region,
            views: Arc::default(),
        }
    }

    /// A file system and its associations for a refresh. Concurrent and successive refreshes
    /// share one region-wide view (DescribeFileSystems and DescribeDataRepositoryAssociations,
    /// paginated), read again after [`crate::view::VIEW_TTL`] or any change made here. A file system the
    /// view lacks is looked up directly, so nothing is reported gone on the view's word alone.
    pub async fn read_lustre(&self, id: &str) -> Result<Option<(LustreFileSystem, Vec<DataRepositoryAssociation>)>> {
        let view = self.views.get(&self.region, || self.read_view()).await?;
        if let Some(fs) = view.file_systems.get(id) {
            return Ok(Some((
                fs.clone(),
                view.associations.get(id).cloned().unwrap_or_default(),
            )));
        }
        match self.find_lustre(id).await? {
            None => Ok(None),
            Some(fs) => {
                let dras = self.list_data_repositories(id).await?;
                Ok(Some((fs, dras)))
            }
        }
    }

    async fn read_view(&self) -> Result<View> {
        let mut view = View::default();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_file_systems()
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("listing file systems", ""), &e))?;
            for fs in page.file_systems() {
                if let Some(id) = fs.file_system_id() {
                    view.file_systems.insert(id.to_string(), LustreFileSystem::from_sdk(fs));
                }
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_data_repository_associations()
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("listing data repository associations", ""), &e))?;
            for a in page.associations() {
                if let Some(fs) = a.file_system_id() {
                    view.associations
                        .entry(fs.to_string())
                        .or_default()
                        .push(DataRepositoryAssociation::from_sdk(a));
                }
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(view)
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    fn ctx(&self, what: &str, id: &str) -> String {
        if id.is_empty() {
            format!("{what} ({})", self.region)
        } else {
            format!("{what} ({id}, {})", self.region)
        }
    }

    /// Creates a Lustre file system (not waiting for it), idempotently across processes: FSx
    /// answers a CreateFileSystem whose ClientRequestToken it has seen with the file system that
    /// token made, so the token is derived from the request ([`create_token`]) and a create
    /// killed at any point and run again finds the file system the first run started. A token
    /// whose file system is being deleted or failed (one destroyed earlier with the same
    /// settings) moves on to the token of the next attempt number.
    pub async fn create_lustre_once(&self, spec: &LustreSpec) -> Result<LustreFileSystem> {
        let mut attempt = 1;
        loop {
            let fs = self.create_lustre(spec, &create_token(spec, attempt)).await?;
            let spent = matches!(fs.lifecycle.as_str(), "DELETING" | "DELETED" | "FAILED");
            if !spent || attempt >= MAX_CREATE_ATTEMPTS {
                return Ok(fs);
            }
            tracing::info!(file_system = %fs.id, lifecycle = %fs.lifecycle, attempt, "create token already spent, trying the next");
            attempt += 1;
        }
    }

    /// Creates a Lustre file system (not waiting for it). `token` makes retries idempotent.
    pub async fn create_lustre(&self, spec: &LustreSpec, token: &str) -> Result<LustreFileSystem> {
        let _changing = self.views.changing();
        let lustre = CreateFileSystemLustreConfiguration::builder()
            .set_weekly_maintenance_start_time(spec.weekly_maintenance_start_time.clone())
            .set_import_path(spec.import_path.clone())
            .set_export_path(spec.export_path.clone())
            .set_imported_file_chunk_size(i32_of(spec.imported_file_chunk_size))
            .set_deployment_type(spec.deployment_type.as_deref().map(LustreDeploymentType::from))
            .set_auto_import_policy(spec.auto_import_policy.as_deref().map(AutoImportPolicyType::from))
            .set_per_unit_storage_throughput(i32_of(spec.per_unit_storage_throughput))
            .set_daily_automatic_backup_start_time(spec.daily_automatic_backup_start_time.clone())
            .set_automatic_backup_retention_days(i32_of(spec.automatic_backup_retention_days))
            .set_copy_tags_to_backups(spec.copy_tags_to_backups)
            .set_drive_cache_type(spec.drive_cache_type.as_deref().map(DriveCacheType::from))
            .set_data_compression_type(spec.data_compression_type.as_deref().map(DataCompressionType::from))
            .set_efa_enabled(spec.efa_enabled)
            .set_log_configuration(log_config(&spec.log_configuration))
            .set_root_squash_configuration(root_squash(&spec.root_squash_configuration))
            .set_metadata_configuration(spec.metadata_configuration.as_ref().map(|m| {
                CreateFileSystemLustreMetadataConfiguration::builder()
                    .set_mode(m.mode.as_deref().map(MetadataConfigurationMode::from))
                    .set_iops(i32_of(m.iops))
                    .build()
            }))
            .build();
        let out = self
            .client
            .create_file_system()
            .client_request_token(token)
            .file_system_type(FileSystemType::Lustre)
            .set_storage_capacity(i32_of(spec.storage_capacity))
            .set_storage_type(spec.storage_type.as_deref().map(StorageType::from))
            .set_subnet_ids(spec.subnet_ids.clone())
            .set_security_group_ids(spec.security_group_ids.clone())
            .set_kms_key_id(spec.kms_key_id.clone())
            .set_file_system_type_version(spec.file_system_type_version.clone())
            .set_tags(spec.tags.as_deref().map(tags_to_sdk))
            .lustre_configuration(lustre)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx("creating Lustre file system", ""), &e))?;
        let fs = out.file_system().ok_or_else(|| {
            AwsError::new(
                self.ctx("creating Lustre file system", ""),
                None,
                "response had no file system",
            )
        })?;
        Ok(LustreFileSystem::from_sdk(fs))
    }

    /// The file system, or None when it does not exist (or is already deleted).
    pub async fn find_lustre(&self, id: &str) -> Result<Option<LustreFileSystem>> {
        let res = self.client.describe_file_systems().file_system_ids(id).send().await;
        match res {
            Ok(out) => Ok(out
                .file_systems()
                .iter()
                .find(|f| f.file_system_id() == Some(id))
                .map(LustreFileSystem::from_sdk)),
            Err(e) => {
                let err = AwsError::from_sdk(self.ctx("reading Lustre file system", id), &e);
                if err.code_is(FS_NOT_FOUND) {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Waits until AVAILABLE with no administrative action running. Fails fast on FAILED
    /// or MISCONFIGURED with FSx's failure details.
    pub async fn wait_lustre_available(&self, id: &str, timeout: Duration) -> Result<LustreFileSystem> {
        // Right after create, describe may not see the file system yet: allow a short window.
        let mut not_found = 0;
        wait::until(&format!("Lustre file system {id}"), timeout, Backoff::default(), || {
            let this = self.clone();
            let id = id.to_string();
            not_found += 1;
            let tries = not_found;
            async move {
                let Some(fs) = this.find_lustre(&id).await? else {
                    if tries <= 5 {
                        return Ok(Poll::Pending("not yet visible".into()));
                    }
                    return Err(AwsError::new(
                        this.ctx("waiting for Lustre file system", &id),
                        Some("FileSystemNotFound"),
                        "it no longer exists",
                    ));
                };
                match fs.lifecycle.as_str() {
                    "AVAILABLE" if fs.pending_actions.is_empty() => Ok(Poll::Done(fs)),
                    "AVAILABLE" => Ok(Poll::Pending(format!(
                        "AVAILABLE with {}",
                        fs.pending_actions.join(", ")
                    ))),
                    "FAILED" | "MISCONFIGURED" | "MISCONFIGURED_UNAVAILABLE" => Err(AwsError::new(
                        this.ctx("waiting for Lustre file system", &id),
                        Some(&fs.lifecycle),
                        fs.failure
                            .clone()
                            .unwrap_or_else(|| "FSx gave no failure details".into()),
                    )),
                    other => {
                        if let Some(f) = fs.failure.as_ref().filter(|_| other == "UPDATING") {
                            tracing::warn!(file_system = %id, "update reported a failure: {f}");
                        }
                        Ok(Poll::Pending(other.to_string()))
                    }
                }
            }
        })
        .await
    }

    pub async fn wait_lustre_deleted(&self, id: &str, timeout: Duration) -> Result<()> {
        wait::until(
            &format!("deletion of Lustre file system {id}"),
            timeout,
            Backoff::default(),
            || async {
                match self.find_lustre(id).await? {
                    None => Ok(Poll::Done(())),
                    Some(fs) if fs.lifecycle == FileSystemLifecycle::Failed.as_str() => Err(AwsError::new(
                        self.ctx("deleting Lustre file system", id),
                        Some("FAILED"),
                        fs.failure.unwrap_or_else(|| "FSx gave no failure details".into()),
                    )),
                    Some(fs) => Ok(Poll::Pending(fs.lifecycle)),
                }
            },
        )
        .await
    }

    /// Applies the in-place changes from `old` to `new`, one FSx update at a time (FSx runs
    /// one administrative action at a time), waiting for each. Returns the final state.
    pub async fn update_lustre(
        &self,
        id: &str,
        old: &LustreSpec,
        new: &LustreSpec,
        timeout: Duration,
    ) -> Result<Option<LustreFileSystem>> {
        let _changing = self.views.changing();
        let mut last = None;
        for step in update_steps(old, new) {
            let mut req = self.client.update_file_system().file_system_id(id);
            req = match step {
                UpdateStep::Capacity(c) => req.storage_capacity(c),
                UpdateStep::Lustre(conf) => req.lustre_configuration(*conf),
                UpdateStep::Version(v) => req.file_system_type_version(v),
            };
            req.send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("updating Lustre file system", id), &e))?;
            last = Some(self.wait_lustre_available(id, timeout).await?);
        }
        Ok(last)
    }

    /// Deletes the file system; a missing one counts as deleted.
    pub async fn delete_lustre(
        &self,
        id: &str,
        skip_final_backup: bool,
        final_backup_tags: &[(String, String)],
    ) -> Result<()> {
        let _changing = self.views.changing();
        let mut conf = DeleteFileSystemLustreConfiguration::builder().skip_final_backup(skip_final_backup);
        if !skip_final_backup && !final_backup_tags.is_empty() {
            conf = conf.set_final_backup_tags(Some(tags_to_sdk(final_backup_tags)));
        }
        let res = self
            .client
            .delete_file_system()
            .file_system_id(id)
            .lustre_configuration(conf.build())
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) => {
                let err = AwsError::from_sdk(self.ctx("deleting Lustre file system", id), &e);
                if err.code_is(FS_NOT_FOUND) {
                    Ok(())
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Makes the resource's tags equal to `new` (from `old`).
    pub async fn update_tags(&self, arn: &str, old: &[(String, String)], new: &[(String, String)]) -> Result<()> {
        let _changing = self.views.changing();
        let removed: Vec<String> = old
            .iter()
            .filter(|(k, _)| !new.iter().any(|(nk, _)| nk == k))
            .map(|(k, _)| k.clone())
            .collect();
        let changed: Vec<(String, String)> = new.iter().filter(|kv| !old.contains(kv)).cloned().collect();
        if !removed.is_empty() {
            self.client
                .untag_resource()
                .resource_arn(arn)
                .set_tag_keys(Some(removed))
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("removing tags", arn), &e))?;
        }
        if !changed.is_empty() {
            self.client
                .tag_resource()
                .resource_arn(arn)
                .set_tags(Some(tags_to_sdk(&changed)))
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("tagging", arn), &e))?;
        }
        Ok(())
    }

    /// Starts a task that releases, from the file system, files under `paths` not accessed
    /// for `days` (their data stays in S3). Returns the task id.
    pub async fn start_release_task(&self, fs_id: &str, paths: &[String], days: i64) -> Result<String> {
        let _changing = self.views.changing();
        use aws_sdk_fsx::types::{
            CompletionReport, DataRepositoryTaskType, DurationSinceLastAccess, ReleaseConfiguration, Unit,
        };
        let out = self
            .client
            .create_data_repository_task()
            .file_system_id(fs_id)
            .r#type(DataRepositoryTaskType::Eviction)
            .set_paths(Some(paths.to_vec()))
            .release_configuration(
                ReleaseConfiguration::builder()
                    .duration_since_last_access(DurationSinceLastAccess::builder().unit(Unit::Days).value(days).build())
                    .build(),
            )
            .report(CompletionReport::builder().enabled(false).build())
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx("starting a release task", fs_id), &e))?;
        Ok(out
            .data_repository_task()
            .and_then(|t| t.task_id())
            .unwrap_or_default()
            .to_string())
    }

    /// Every data repository association of a file system.
    pub async fn list_data_repositories(&self, fs_id: &str) -> Result<Vec<DataRepositoryAssociation>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_data_repository_associations()
                .filters(Filter::builder().name(FilterName::FileSystemId).values(fs_id).build())
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("listing data repository associations", fs_id), &e))?;
            out.extend(page.associations().iter().map(DataRepositoryAssociation::from_sdk));
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// Like [`Fsx::create_lustre_once`], an association: the token is derived from the file
    /// system and the association's settings, and one being deleted or failed (removed earlier
    /// with the same settings) moves on to the next attempt's token.
    pub async fn create_data_repository_once(
        &self,
        fs_id: &str,
        spec: &DataRepositorySpec,
        tags: &[(String, String)],
    ) -> Result<DataRepositoryAssociation> {
        let mut attempt = 1;
        loop {
            let token = create_token(&(fs_id, spec, tags), attempt);
            let dra = self.create_data_repository(fs_id, spec, &token, tags).await?;
            let spent = matches!(dra.lifecycle.as_str(), "DELETING" | "FAILED");
            if !spent || attempt >= MAX_CREATE_ATTEMPTS {
                return Ok(dra);
            }
            attempt += 1;
        }
    }

    pub async fn create_data_repository(
        &self,
        fs_id: &str,
        spec: &DataRepositorySpec,
        token: &str,
        tags: &[(String, String)],
    ) -> Result<DataRepositoryAssociation> {
        let _changing = self.views.changing();
        let out = self
            .client
            .create_data_repository_association()
            .file_system_id(fs_id)
            .set_file_system_path(spec.file_system_path.clone())
            .set_data_repository_path(spec.data_repository_path.clone())
            .set_batch_import_meta_data_on_create(spec.batch_import_meta_data_on_create)
            .set_imported_file_chunk_size(i32_of(spec.imported_file_chunk_size))
            .set_s3(s3_config(spec))
            .client_request_token(token)
            .set_tags((!tags.is_empty()).then(|| tags_to_sdk(tags)))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx("creating data repository association", fs_id), &e))?;
        out.association()
            .map(DataRepositoryAssociation::from_sdk)
            .ok_or_else(|| {
                AwsError::new(
                    self.ctx("creating data repository association", fs_id),
                    None,
                    "response had no association",
                )
            })
    }

    pub async fn update_data_repository(&self, id: &str, spec: &DataRepositorySpec) -> Result<()> {
        let _changing = self.views.changing();
        self.client
            .update_data_repository_association()
            .association_id(id)
            .set_imported_file_chunk_size(i32_of(spec.imported_file_chunk_size))
            .set_s3(s3_config(spec))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx("updating data repository association", id), &e))?;
        Ok(())
    }

    pub async fn delete_data_repository(&self, id: &str, delete_data: bool) -> Result<()> {
        let _changing = self.views.changing();
        let res = self
            .client
            .delete_data_repository_association()
            .association_id(id)
            .delete_data_in_file_system(delete_data)
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) => {
                let err = AwsError::from_sdk(self.ctx("deleting data repository association", id), &e);
                if err.code_is(DRA_NOT_FOUND) {
                    Ok(())
                } else {
                    Err(err)
                }
            }
        }
    }

    async fn find_data_repository(&self, id: &str) -> Result<Option<DataRepositoryAssociation>> {
        match self
            .client
            .describe_data_repository_associations()
            .association_ids(id)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .associations()
                .iter()
                .find(|a| a.association_id() == Some(id))
                .map(DataRepositoryAssociation::from_sdk)),
            Err(e) => {
                let err = AwsError::from_sdk(self.ctx("reading data repository association", id), &e);
                if err.code_is(DRA_NOT_FOUND) {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Waits for an association to be AVAILABLE (`gone = false`) or deleted (`gone = true`).
    pub async fn wait_data_repository(&self, id: &str, gone: bool, timeout: Duration) -> Result<()> {
        wait::until(
            &format!("data repository association {id}"),
            timeout,
            Backoff::default(),
            || async {
                let found = self.find_data_repository(id).await?;
                match (found, gone) {
                    (None, true) => Ok(Poll::Done(())),
                    (None, false) => Err(AwsError::new(
                        self.ctx("waiting for data repository association", id),
                        Some("DataRepositoryAssociationNotFound"),
                        "it no longer exists",
                    )),
                    (Some(a), _)
                        if a.lifecycle == DataRepositoryLifecycle::Failed.as_str()
                            || a.lifecycle == DataRepositoryLifecycle::Misconfigured.as_str() =>
                    {
                        Err(AwsError::new(
                            self.ctx("waiting for data repository association", id),
                            Some(&a.lifecycle),
                            a.failure.unwrap_or_else(|| "FSx gave no failure details".into()),
                        ))
                    }
                    (Some(a), false) if a.lifecycle == DataRepositoryLifecycle::Available.as_str() => {
                        Ok(Poll::Done(()))
                    }
                    (Some(a), _) => Ok(Poll::Pending(a.lifecycle)),
                }
            },
        )
        .await
    }
}

/// One UpdateFileSystem call.
#[derive(Debug, Clone, PartialEq)]
enum UpdateStep {
    Capacity(i32),
    Lustre(Box<UpdateFileSystemLustreConfiguration>),
    Version(String),
}

fn changed<T: PartialEq + Clone>(old: &Option<T>, new: &Option<T>) -> Option<T> {
    match new {
        Some(n) if old.as_ref() != Some(n) => Some(n.clone()),
        _ => None,
    }
}

/// The UpdateFileSystem calls that take a file system from `old` to `new` settings: small
/// settings together, then throughput, metadata, capacity and version each on their own.
fn update_steps(old: &LustreSpec, new: &LustreSpec) -> Vec<UpdateStep> {
    let mut steps = Vec::new();
    let small = UpdateFileSystemLustreConfiguration::builder()
        .set_weekly_maintenance_start_time(changed(
            &old.weekly_maintenance_start_time,
            &new.weekly_maintenance_start_time,
        ))
        .set_daily_automatic_backup_start_time(changed(
            &old.daily_automatic_backup_start_time,
            &new.daily_automatic_backup_start_time,
        ))
        .set_automatic_backup_retention_days(i32_of(changed(
            &old.automatic_backup_retention_days,
            &new.automatic_backup_retention_days,
        )))
        .set_auto_import_policy(
            changed(&old.auto_import_policy, &new.auto_import_policy)
                .as_deref()
                .map(AutoImportPolicyType::from),
        )
        .set_data_compression_type(
            changed(&old.data_compression_type, &new.data_compression_type)
                .as_deref()
                .map(DataCompressionType::from),
        )
        .set_log_configuration(changed(&old.log_configuration, &new.log_configuration).map(|l| {
            LustreLogCreateConfiguration::builder()
                .set_level(l.level.as_deref().map(LustreAccessAuditLogLevel::from))
                .set_destination(l.destination)
                .build()
        }))
        .set_root_squash_configuration(root_squash(&changed(
            &old.root_squash_configuration,
            &new.root_squash_configuration,
        )))
        .build();
    if small != UpdateFileSystemLustreConfiguration::builder().build() {
        steps.push(UpdateStep::Lustre(Box::new(small)));
    }
    if let Some(t) = i32_of(changed(
        &old.per_unit_storage_throughput,
        &new.per_unit_storage_throughput,
    )) {
        steps.push(UpdateStep::Lustre(Box::new(
            UpdateFileSystemLustreConfiguration::builder()
                .per_unit_storage_throughput(t)
                .build(),
        )));
    }
    if let Some(m) = changed(&old.metadata_configuration, &new.metadata_configuration) {
        steps.push(UpdateStep::Lustre(Box::new(
            UpdateFileSystemLustreConfiguration::builder()
                .metadata_configuration(
                    UpdateFileSystemLustreMetadataConfiguration::builder()
                        .set_mode(m.mode.as_deref().map(MetadataConfigurationMode::from))
                        .set_iops(i32_of(m.iops))
                        .build(),
                )
                .build(),
        )));
    }
    if let Some(c) = i32_of(changed(&old.storage_capacity, &new.storage_capacity)) {
        steps.push(UpdateStep::Capacity(c));
    }
    if let Some(v) = changed(&old.file_system_type_version, &new.file_system_type_version) {
        steps.push(UpdateStep::Version(v));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LustreSpec {
        LustreSpec {
            storage_capacity: Some(1200),
            deployment_type: Some("PERSISTENT_2".into()),
            per_unit_storage_throughput: Some(125),
            weekly_maintenance_start_time: Some("1:05:00".into()),
            ..LustreSpec::default()
        }
    }

    #[test]
    fn no_change_means_no_update_call() {
        assert!(update_steps(&spec(), &spec()).is_empty());
    }

    #[test]
    fn changes_are_split_into_one_action_per_call() {
        let mut new = spec();
        new.storage_capacity = Some(2400);
        new.per_unit_storage_throughput = Some(250);
        new.weekly_maintenance_start_time = Some("2:05:00".into());
        let steps = update_steps(&spec(), &new);
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert!(
            matches!(&steps[0], UpdateStep::Lustre(c) if c.weekly_maintenance_start_time() == Some("2:05:00") && c.per_unit_storage_throughput().is_none())
        );
        assert!(matches!(&steps[1], UpdateStep::Lustre(c) if c.per_unit_storage_throughput() == Some(250)));
        assert_eq!(steps[2], UpdateStep::Capacity(2400));
    }

    #[test]
    fn unset_new_values_are_not_sent() {
        let mut new = spec();
        new.weekly_maintenance_start_time = None;
        assert!(update_steps(&spec(), &new).is_empty());
    }

    #[test]
    fn mount_command_uses_dns_and_mount_name() {
        let fs = LustreFileSystem {
            id: "fs-0123".into(),
            arn: String::new(),
            dns_name: "fs-0123.fsx.us-east-1.amazonaws.com".into(),
            mount_name: "abcdefgh".into(),
            owner_id: String::new(),
            vpc_id: String::new(),
            network_interface_ids: vec![],
            lifecycle: "AVAILABLE".into(),
            failure: None,
            pending_actions: vec![],
            spec: LustreSpec::default(),
        };
        assert_eq!(
            fs.mount_command("us-east-1", "/fsx"),
            "sudo mkdir -p /fsx && sudo mount -t lustre -o relatime,flock fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx"
        );
    }
}
