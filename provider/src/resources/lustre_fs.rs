//! `hpc_lustre_fs`: an FSx for Lustre file system with S3 data repositories.
//!
//! Order: schema, validate, plan, create/read/update/delete/import, then data repository
//! helpers. The typed model and its maps to [`LustreSpec`] and from FSx's report are in
//! `model.rs`; FSx's own rules in `rules.rs`.

use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::fsx::{DataRepositorySpec, LustreSpec};
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, Block, BlockNesting, CreateRequest, Ctx, DeleteRequest, Diagnostic, Diagnostics,
    ImportRequest, NestedBlock, Nesting, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest,
    ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::convert;
use crate::resources::{aws_diag, or_stop};

mod model;
mod rules;

use model::{default_skip_final_backup, FileSystem, FinalBackup, Reporting, Repositories, RepositoryPlan};
use tfplugin::model::{Field, Model};

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

/// The configuration's settings with this provider's defaults applied, for the rules.
fn config_spec(config: &FileSystem) -> LustreSpec {
    let mut spec = config.spec();
    if spec.skip_final_backup.is_none() {
        spec.skip_final_backup = Some(default_skip_final_backup(&spec));
    }
    spec
}

/// Reads a value for `what` ("The planned file system"), or says why it cannot be read.
fn read(v: &Value, what: &str) -> Result<FileSystem, Diagnostics> {
    FileSystem::of(v).map_err(|e| e.into_diagnostics(&format!("{what} cannot be read")))
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
        let config = match read(&req.config, "The configuration") {
            Ok(c) => c,
            Err(d) => return d,
        };
        let mut diags = violations_to_diags(rules::validate(&config_spec(&config)));
        if let Some(policy) = &config.release_policy {
            let at = |a: &str| tfplugin::AttributePath::root("release_policy").attr(a);
            if let Some(d) = policy.unaccessed_days.filter(|d| !(1..=3650).contains(d)) {
                diags.error_at(
                    at("unaccessed_days"),
                    format!("unaccessed_days {d} is out of range"),
                    "Use 1 to 3650 days.",
                );
            }
            if let Some(p) = policy.usage_percent.filter(|p| !(0..=99).contains(p)) {
                diags.error_at(
                    at("usage_percent"),
                    format!("usage_percent {p} is out of range"),
                    "Use 0 to 99.",
                );
            }
            if !config.linked() {
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
        if let Err(d) = plan(req) {
            req.diagnostics.extend(d);
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        let (clients, planned) = match (Clients::of(&req.ctx), read(&req.planned, "The planned file system")) {
            (Ok(c), Ok(p)) => (c, p),
            (Err(d), _) => return ApplyOutcome::failed(Value::Null, d),
            (_, Err(d)) => return ApplyOutcome::failed(Value::Null, d),
        };
        let timeout = timeouts::get(&req.planned, "create", CREATE_TIMEOUT);
        let mut spec = planned.spec();
        let mut tags = clients.tags_all(&spec.tags.clone().unwrap_or_default());
        tags.extend(planned.policy_tags());
        spec.tags = Some(tags);
        let created = match clients.fsx.create_lustre_once(&spec).await {
            Ok(fs) => fs,
            Err(e) => return ApplyOutcome::failed(Value::Null, aws_diag("Cannot create Lustre file system", &e)),
        };
        tracing::info!(file_system = %created.id, "created Lustre file system, waiting for AVAILABLE");
        // From here on, a failure still records the file system (tainted) so it is not leaked.
        let partial = FileSystem::reported(&created, &[], &planned, &reporting(clients)).value();
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
        match read_state(clients, &fs.id, &planned).await {
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
        let state = read(&req.state, "The file system's state")?;
        let Some(id) = &state.id else {
            return Ok(None);
        };
        read_state(clients, id, &state)
            .await
            .map_err(|e| aws_diag("Cannot read Lustre file system", &e))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let read_both = || Ok::<_, Diagnostics>((read(&req.prior, "The state")?, read(&req.planned, "The plan")?));
        let (clients, (prior, planned)) = match (Clients::of(&req.ctx), read_both()) {
            (Ok(c), Ok(both)) => (c, both),
            (Err(d), _) => return ApplyOutcome::failed(req.prior, d),
            (_, Err(d)) => return ApplyOutcome::failed(req.prior, d),
        };
        let Some(id) = prior.id.clone() else {
            return ApplyOutcome::failed(
                req.prior,
                Diagnostic::error("Lustre file system has no id in state", ""),
            );
        };
        let timeout = timeouts::get(&req.planned, "update", UPDATE_TIMEOUT);
        let (old, new) = (prior.spec(), planned.spec());
        let mut diags = Diagnostics::new();
        let steps = async {
            or_stop(
                &req.ctx,
                "updating Lustre file system",
                clients.fsx.update_lustre(&id, &old, &new, timeout),
            )
            .await?;
            let (old_tags, new_tags) = (prior.tags_with_policy(), planned.tags_with_policy());
            if old_tags != new_tags {
                let arn = prior.arn.as_deref().unwrap_or_default();
                clients.fsx.update_tags(arn, &old_tags, &new_tags).await?;
            }
            sync_repositories(&req.ctx, clients, &id, &prior, &planned, &new_tags, timeout).await
        };
        if let Err(e) = steps.await {
            diags.extend(aws_diag("Cannot update Lustre file system", &e));
        }
        match read_state(clients, &id, &planned).await {
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
        let (clients, prior) = match (Clients::of(&req.ctx), read(&req.prior, "The file system's state")) {
            (Ok(c), Ok(p)) => (c, p),
            (Err(d), _) => return d.into(),
            (_, Err(d)) => return d,
        };
        let Some(id) = prior.id.as_deref() else {
            return Diagnostics::new();
        };
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        let skip = prior.skip_final_backup.unwrap_or(true);
        let backup_tags = prior.spec().final_backup_tags.unwrap_or_default();
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
        // The read that follows fills in the rest.
        let mut fs = FileSystem::of_prior(&Value::Null).map_err(|e| e.into_diagnostics("Cannot import"))?;
        fs.id = Some(id.to_string());
        fs.data_repository = Some(Vec::new());
        Ok(fs.value())
    }
}

/// The plan: `skip_final_backup`'s default, `tags_all`, data repositories matched to the
/// prior state's by their paths, what forces a new file system, and FSx's rules on values
/// known only now (validate skipped them).
fn plan(req: &mut PlanRequest) -> Result<(), Diagnostics> {
    let ty = schema().block.ty();
    let unreadable = |e: tfplugin::model::ModelError| e.into_diagnostics("The planned file system cannot be read");
    let given = FinalBackup::from_value(&req.config)
        .map_err(unreadable)?
        .skip_final_backup
        .is_set();
    if !given {
        let default = Field::Known(default_skip_final_backup(&read(&req.planned, "The plan")?.spec()));
        tfplugin::model::change(&mut req.planned, &ty, |f: &mut FinalBackup| {
            // Linked to S3 or not is not known yet.
            f.skip_final_backup = if f.import_path.is_unknown() {
                Field::Unknown
            } else {
                default
            };
        })
        .map_err(unreadable)?;
    }
    // tags_all: the resource's tags over the provider's default tags.
    if let Ok(clients) = Clients::of(&req.ctx) {
        clients.plan_tags_all(&mut req.planned);
    }
    realign_repositories(req).map_err(unreadable)?;
    let checks = |config: &Value| match planned_is_checkable(config) {
        true => read(config, "The configuration").map(|c| violations_to_diags(rules::validate(&config_spec(&c)))),
        false => Ok(Diagnostics::new()),
    };
    if !req.prior.is_null() {
        let old = read(&req.prior, "The state")?.spec();
        let mut new = read(&req.planned, "The plan")?.spec();
        // FSx does not report security groups: an imported file system has none in state, and
        // recording the configured ones is not a change to the file system.
        if old.security_group_ids.is_none() {
            new.security_group_ids = None;
        }
        for p in rules::replacement_paths(&old, &new) {
            req.requires_replace.push(convert::path(&p, MAP_ATTRS));
        }
    }
    let diags = checks(&req.config)?;
    req.diagnostics.extend(diags);
    Ok(())
}

/// Data repositories are matched by their paths, not by their place in the list: a kept one
/// keeps its association id and (unless set) its chunk size; a new one learns both at apply.
fn realign_repositories(req: &mut PlanRequest) -> Result<(), tfplugin::model::ModelError> {
    let elem = data_repository_block().ty();
    let prior: Vec<RepositoryPlan> = match Repositories::from_value(&req.prior).map(|r| r.data_repository) {
        Ok(Field::Known(repos)) => repos.iter().map(RepositoryPlan::from_value).collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    let realign = |r: &mut RepositoryPlan| {
        let same = prior
            .iter()
            .find(|p| p.file_system_path == r.file_system_path && p.data_repository_path == r.data_repository_path);
        r.association_id = same.map_or(Field::Unknown, |p| p.association_id.clone());
        if !matches!(r.imported_file_chunk_size, Field::Known(_)) {
            r.imported_file_chunk_size = same.map_or(Field::Unknown, |p| p.imported_file_chunk_size.clone());
        }
    };
    let mut failed = None;
    tfplugin::model::change(&mut req.planned, &schema().block.ty(), |r: &mut Repositories| {
        for repo in r.data_repository.known_mut().into_iter().flatten() {
            if let Err(e) = tfplugin::model::change(repo, &elem, realign) {
                failed = Some(e);
            }
        }
    })?;
    failed.map_or(Ok(()), Err)
}

fn planned_is_checkable(config: &Value) -> bool {
    config.is_wholly_known()
}

/// What a reported file system needs besides FSx's report.
fn reporting(clients: &Clients) -> Reporting<'_> {
    Reporting {
        region: clients.fsx.region(),
        mount_point: MOUNT_POINT,
        default_tags: &clients.default_tags,
    }
}

async fn read_state(clients: &Clients, id: &str, prior: &FileSystem) -> hpc_aws::Result<Option<Value>> {
    let Some((fs, dras)) = clients.fsx.read_lustre(id).await? else {
        return Ok(None);
    };
    if fs.lifecycle == "DELETING" {
        return Ok(None);
    }
    Ok(Some(
        FileSystem::reported(&fs, &dras, prior, &reporting(clients)).value(),
    ))
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
    prior: &FileSystem,
    planned: &FileSystem,
    tags: &[(String, String)],
    timeout: Duration,
) -> hpc_aws::Result<()> {
    let (before, after) = (prior.repositories(), planned.repositories());
    for p in before {
        if !after.iter().any(|n| n.key() == p.key()) {
            if let Some(id) = &p.association_id {
                let delete_data = p.delete_data_in_file_system.unwrap_or(false);
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
    for n in after {
        let spec = n.spec();
        match before.iter().find(|p| p.key() == n.key()) {
            None => create_repository(ctx, clients, fs_id, &spec, tags, timeout).await?,
            Some(p) => {
                let old = p.spec();
                let changed = old.auto_import_events != spec.auto_import_events
                    || old.auto_export_events != spec.auto_export_events
                    || (spec.imported_file_chunk_size.is_some()
                        && old.imported_file_chunk_size != spec.imported_file_chunk_size);
                if let (true, Some(id)) = (changed, &p.association_id) {
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
    use crate::convert::object;
    use hpc_aws::fsx::MetadataSpec;

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
        let spec = FileSystem::of(&c).expect("a file system").spec();
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
