//! `hpc_cluster`: the head node (Slurm controller, accounting), login nodes, Unix users,
//! shared storage mounts, the munge key, and the cluster's desired-state document.
//!
//! Secrets (the munge key, a database password) are generated or taken write-only and go
//! straight to Secrets Manager; state and plan only ever hold their ARNs.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::ec2::{InstanceInfo, LaunchTemplateSpec, RootVolume};
use hpc_aws::secrets::SecretValue;
use tfplugin::{
    timeouts, ApplyOutcome, AttributePath, CreateRequest, DeleteRequest, Diagnostic, Diagnostics, ImportRequest,
    PlanRequest, ReadRequest, Resource, Schema, UpdateRequest, ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::convert;
use crate::desired_state::boot::{launch_template_name, Role};
use crate::desired_state::{self, tag, ClusterDoc};
use crate::resources::{aws_diag, or_stop, owner};

mod checks;
mod deletion;
mod head;
mod login;
mod model;
mod plan;
mod policy;
mod schema;
mod validate;

use plan::{fixed_cost, partitions_fit, plan_identity, plan_reads, plan_slurm_conf, plan_unknowns};
use policy::{external_password_secret, external_secrets, instance_profile_policy};
use schema::schema;
use validate::{
    accounting_checks, duration_checks, head_checks, identity_checks, render, render_checks, storage_checks,
    user_checks, user_shard_checks,
};

use model::{known, record, Cluster, ClusterConfig, Computed, Secrets};
use tfplugin::model::Field;
use tfplugin::model::Model;

pub struct HpcCluster;

const CREATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const MUNGE_KEY_BYTES: usize = 1024;
/// Length of the generated local database password (letters and digits: ~190 bits).
const DB_PASSWORD_CHARS: usize = 32;
const ACCOUNTING_MODES: &[&str] = &["none", "local", "external"];
/// SuspendTime unless the user says otherwise.
const DEFAULT_SCALEDOWN_IDLETIME_S: u32 = 600;
/// ResumeTimeout unless the user says otherwise: ParallelCluster's 30 minutes, room for a
/// partition's `provision_timeout` (default 10m) to fail over and the next pool to boot.
const DEFAULT_RESUME_TIMEOUT_S: u32 = 1800;
/// GiB of a new cluster's state volume.
const DEFAULT_STATE_VOLUME_GIB: i64 = 20;

#[async_trait]
impl Resource for HpcCluster {
    fn type_name(&self) -> &'static str {
        "hpc_cluster"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn validate(&self, req: ValidateRequest) -> Diagnostics {
        let c = &req.config;
        let config = match ClusterConfig::from_value(c) {
            Ok(config) => config,
            Err(e) => return e.into_diagnostics("The cluster's configuration cannot be read"),
        };
        let mut diags = Diagnostics::new();
        identity_checks(&config, &mut diags);
        if let Some(head) = config.head_node.known() {
            head_checks(head, &mut diags);
            checks::head_node(head, &mut diags);
            checks::backup_controller(head, config.slurm_version(), &mut diags);
        }
        crate::resources::checks::tags(config.tags.known(), AttributePath::root("tags"), &mut diags);
        if let Some(login) = config.login_nodes.known() {
            checks::login_nodes(login, &mut diags);
        }
        if let Some(slurm) = config.slurm.known() {
            checks::slurm_timers(slurm, &mut diags);
            duration_checks(slurm, &mut diags);
        }
        if let Some(accounting) = config.accounting.known() {
            checks::accounting_port(accounting, &mut diags);
            checks::accounting_secret(accounting, &mut diags);
            accounting_checks(accounting, &mut diags);
        }
        if let Some(mfa) = config.mfa.known() {
            checks::mfa(mfa, &mut diags);
        }
        checks::users(config.user.items(), &mut diags);
        checks::mount_points(config.storage.items(), &mut diags);
        user_checks(config.user.items(), &mut diags);
        user_shard_checks(c, &mut diags);
        if let Some(home) = config.home.known() {
            checks::home(home, &mut diags);
        }
        storage_checks(config.storage.items(), &mut diags);
        if c.is_wholly_known() {
            diags.extend(render_checks(c));
        }
        diags
    }

    async fn modify_plan(&self, req: &mut PlanRequest) {
        let ctx = req.ctx.clone();
        let Ok(clients) = Clients::of(&ctx) else {
            return;
        };
        plan_identity(clients, req);
        let cost = fixed_cost(&req.planned, &clients.price_overrides);
        if let Err(d) = record(&mut req.planned, |m| m.estimated_hourly_cost = cost) {
            req.diagnostics.extend(d);
        }
        let prior = Computed::from_value(&req.prior).unwrap_or_default();
        let munge = prior.munge_key_secret_arn.as_str().unwrap_or_default();
        plan_slurm_conf(clients, req, munge);
        let diags = plan_reads(clients, req).await;
        req.diagnostics.extend(diags);
        plan_unknowns(req);
        if !req.prior.is_null() && !req.requires_replace.is_empty() {
            if let Ok(prior) = Cluster::of(&req.prior) {
                let home = managed_home(&req.prior);
                if let Some(warning) = deletion::replace_warning(&prior, home.as_deref()) {
                    req.diagnostics.push(warning);
                }
            }
        }
        let resume = |v: &Value| {
            let c = ClusterConfig::of_state(v).ok()?;
            c.slurm.known().map(|s| s.resume_timeout.clone())
        };
        let changed = !req.prior.is_null() && resume(&req.planned) != resume(&req.prior);
        if changed && !req.planned.is_null() && req.config.is_wholly_known() {
            let secrets = Secrets {
                region: &clients.aws.region,
                munge_arn: munge,
                password_arn: None,
            };
            if let Ok(m) = Cluster::of(&req.config) {
                req.diagnostics.extend(partitions_fit(clients, &m.doc(secrets)).await);
            }
        }
    }

    async fn plan_destroy(&self, _ctx: tfplugin::Ctx, prior: &Value) -> Diagnostics {
        let home = managed_home(prior);
        match Cluster::of(prior) {
            Ok(cluster) => deletion::destroy_warning(&cluster, home.as_deref())
                .map(Diagnostics::from)
                .unwrap_or_default(),
            Err(_) => Diagnostics::new(),
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let mut state = req.planned.clone();
        let cluster = match Cluster::of(&state) {
            Ok(c) => c,
            Err(e) => {
                return ApplyOutcome::failed(Value::Null, e.into_diagnostics("The planned cluster cannot be read"))
            }
        };
        let name = cluster.name.clone();
        let timeout = timeouts::get(&state, "create", CREATE_TIMEOUT);
        let result: Result<Diagnostics, Diagnostics> = async {
            owner::refuse_taken(clients, &owned(&name), owned_place).await?;
            let tags = cluster_tags(&cluster);
            let vpc = clients
                .ec2
                .subnet_vpc(&cluster.subnet_id)
                .await
                .map_err(|e| aws_diag("Cannot find the cluster's subnet", &e))?;
            record(&mut state, |m| m.vpc_id = known(&vpc))?;
            let sgs = ensure_security_groups(clients, &name, &vpc, &cluster, &tags).await?;
            record(&mut state, |m| m.security_group_ids = known(&sgs))?;
            let munge = clients
                .secrets
                .ensure_random_binary(&desired_state::munge_key_secret(&name), MUNGE_KEY_BYTES, &tags)
                .await
                .map_err(|e| aws_diag("Cannot create the munge key", &e))?;
            record(&mut state, |m| m.munge_key_secret_arn = known(&munge))?;
            let password_arn = store_password(clients, &name, &req.config, &tags).await?;
            head::ensure_kept(clients, &mut state, &name, &sgs, &tags).await?;
            head::ensure_backup_kept(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            ensure_home(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            publish(clients, &mut state, &munge, password_arn).await?;
            head::launch(&req.ctx, clients, &mut state, &name, &tags, false, timeout).await?;
            let owner = login::Owner {
                name: &name,
                sgs: &sgs,
                tags: &tags,
            };
            let mut warnings = nodes_ready(&req.ctx, clients, &mut state, &owner, timeout).await?;
            warnings.extend(head::launch_backup(&req.ctx, clients, &mut state, &name, &tags, false, timeout).await?);
            Ok(warnings)
        }
        .await;
        let outcome = match result {
            Ok(warnings) => ApplyOutcome::ok_with(state, warnings),
            Err(d) => {
                // Record what exists (tainted) so destroy removes it; nothing leaks.
                let made = Computed::of(&state).is_ok_and(|m| !m.security_group_ids.is_unknown());
                ApplyOutcome::failed(if made { scrub(state) } else { Value::Null }, d)
            }
        };
        claimed(clients, &cluster, outcome).await
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let state = ClusterConfig::of_state(&req.state)
            .map_err(|e| e.into_diagnostics("The cluster's state cannot be read"))?;
        let Some(name) = state.name.known().cloned() else {
            return Ok(None);
        };
        // Through shared views: a plan of many clusters lists their parameters and head nodes
        // in a few calls instead of two per cluster.
        let param = clients
            .ssm
            .get_viewed(
                &desired_state::cluster_prefix(&name),
                &desired_state::cluster_param(&name),
            )
            .await
            .map_err(|e| aws_diag("Cannot read cluster", &e))?;
        let head = match Computed::of(&req.state)?.head_node_instance_id.known() {
            Some(id) => clients
                .ec2
                .find_instance_viewed(tag::ROLE, id)
                .await
                .map_err(|e| aws_diag("Cannot read head node", &e))?,
            None => None,
        };
        // A cluster whose document and head node are both gone no longer exists.
        if param.is_none() && head.is_none() {
            return Ok(None);
        }
        let mut s = req.state.clone();
        record(&mut s, |m| match (&param, head) {
            (Some(p), Some(h)) => {
                m.desired_state_version = known(&p.version);
                m.head_node_private_ip = h.private_ip.into();
            }
            // Half a cluster: plan a replacement by forgetting the missing half's id.
            (None, _) => m.desired_state_version = Field::Unset,
            (Some(_), None) => m.head_node_instance_id = Field::Unset,
        })?;
        // A backup controller lost outside Terraform: the plan launches its successor.
        if let Some(id) = Computed::of(&s)?.backup_controller_instance_id.known() {
            let found = clients
                .ec2
                .find_instance_viewed(tag::ROLE, id)
                .await
                .map_err(|e| aws_diag("Cannot read the backup controller", &e))?;
            if found.is_none() {
                record(&mut s, |m| m.backup_controller_instance_id = Field::Unset)?;
            }
        }
        // Login nodes lost or failed drop out; the plan then launches their successors.
        if let Some((ids, ips)) = login::refreshed(clients, &s, &name).await? {
            record(&mut s, |m| {
                m.login_node_ids = known(&ids);
                m.login_node_private_ips = known(&ips);
            })?;
        }
        Ok(Some(s))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(req.prior, d),
        };
        let mut state = req.planned.clone();
        let (cluster, prior) = match (Cluster::of(&state), Computed::of(&req.prior)) {
            (Ok(c), Ok(p)) => (c, p),
            (Err(e), _) => {
                return ApplyOutcome::failed(req.prior, e.into_diagnostics("The planned cluster cannot be read"))
            }
            (_, Err(d)) => return ApplyOutcome::failed(req.prior, d),
        };
        let name = cluster.name.clone();
        let timeout = timeouts::get(&state, "update", CREATE_TIMEOUT);
        let result: Result<Diagnostics, Diagnostics> = async {
            let tags = cluster_tags(&cluster);
            let vpc = prior.vpc_id.as_str().unwrap_or_default();
            let sgs = ensure_security_groups(clients, &name, vpc, &cluster, &tags).await?;
            record(&mut state, |m| m.security_group_ids = known(&sgs))?;
            let munge = prior.munge_key_secret_arn.as_str().unwrap_or_default();
            let password_arn = store_password(clients, &name, &req.config, &tags).await?;
            head::ensure_kept(clients, &mut state, &name, &sgs, &tags).await?;
            head::ensure_backup_kept(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            head::grow_state(&req.ctx, clients, &req.prior, &state, timeout).await?;
            ensure_home(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            publish(clients, &mut state, munge, password_arn).await?;
            // A new image, type or root volume: a new head in place. A head lost outside
            // Terraform: its successor. Either way on the same interface and state volume.
            let replace = head::needs_new_instance(&req.prior, &state);
            let missing = Computed::of(&state)?.head_node_instance_id.known().is_none();
            if replace || missing {
                head::launch(&req.ctx, clients, &mut state, &name, &tags, replace, timeout).await?;
            }
            let owner = login::Owner {
                name: &name,
                sgs: &sgs,
                tags: &tags,
            };
            let mut warnings = nodes_ready(&req.ctx, clients, &mut state, &owner, timeout).await?;
            // The backup follows a new head (the same image and type), or comes back when lost.
            let backup_missing = Computed::of(&state)?.backup_controller_instance_id.known().is_none();
            if replace || backup_missing {
                let backup = head::launch_backup(&req.ctx, clients, &mut state, &name, &tags, replace, timeout).await?;
                warnings.extend(backup);
            }
            Ok(warnings)
        }
        .await;
        let outcome = match result {
            Ok(warnings) => ApplyOutcome::ok_with(state, warnings),
            Err(d) => ApplyOutcome::failed(req.prior, d),
        };
        // A cluster made by a provider from before owners were recorded gets one.
        claimed(clients, &cluster, outcome).await
    }

    async fn delete(&self, req: DeleteRequest) -> Diagnostics {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let prior = match Cluster::of(&req.prior) {
            Ok(c) => c,
            Err(e) => return e.into_diagnostics("The cluster's state cannot be read"),
        };
        let name = prior.name.clone();
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        let result = async {
            // Unpublish first: the agent stops acting on a cluster that is going away.
            clients.ssm.delete(&desired_state::cluster_param(&name)).await?;
            for shard in clients.ssm.list(&desired_state::users_path(&name)).await? {
                clients.ssm.delete(&shard.name).await?;
            }
            clients.ssm.delete(&desired_state::status_param(&name)).await?;
            clients.ssm.delete(&desired_state::boot::head_param(&name)).await?;
            clients.ssm.delete(&desired_state::boot::backup_param(&name)).await?;
            let nodes = clients.ec2.instances_tagged(tag::CLUSTER, &name).await?;
            let ids: Vec<String> = nodes.into_iter().map(|i| i.id).collect();
            or_stop(
                &req.ctx,
                "terminating cluster nodes",
                clients.ec2.terminate(&ids, timeout),
            )
            .await?;
            // After the nodes: a login node still booting writes its report until it ends.
            for report in clients
                .ssm
                .list(&desired_state::boot::login_reports_path(&name))
                .await?
            {
                clients.ssm.delete(&report.name).await?;
            }
            let kept = deletion::delete_state(&req.ctx, clients, &prior, managed_home(&req.prior), timeout).await?;
            for role in [Role::Head, Role::Backup, Role::Login] {
                clients
                    .ec2
                    .delete_launch_template(&launch_template_name(&name, role))
                    .await?;
            }
            for sg in prior.security_group_ids.iter().flatten() {
                if Some(sg) != prior.security_group_id.as_ref() {
                    clients.ec2.delete_security_group(sg).await?;
                }
            }
            clients.secrets.delete(&desired_state::munge_key_secret(&name)).await?;
            clients
                .secrets
                .delete(&desired_state::db_password_secret(&name))
                .await?;
            // Last: until everything else is gone, the name still belongs to this state.
            clients.ssm.delete(&desired_state::owner_param(&name)).await?;
            Ok::<Vec<String>, hpc_aws::AwsError>(kept)
        };
        match result.await {
            Ok(kept) => deletion::kept_warning(&name, &kept),
            Err(e) => aws_diag("Cannot delete cluster", &e),
        }
    }

    async fn import(&self, req: ImportRequest) -> Result<Value, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let name = req.id.trim();
        let param = clients
            .ssm
            .get(&desired_state::cluster_param(name))
            .await
            .map_err(|e| aws_diag("Cannot read cluster", &e))?
            .ok_or_else(|| {
                Diagnostics::from(Diagnostic::error(
                    "Cluster not found",
                    format!(
                        "No cluster {name:?} is published in {}; import by cluster name.",
                        clients.aws.region
                    ),
                ))
            })?;
        let mut doc: ClusterDoc = serde_json::from_str(&param.value).map_err(|e| {
            Diagnostics::from(Diagnostic::error(
                "The cluster's desired state is not readable",
                e.to_string(),
            ))
        })?;
        let shards = clients
            .ssm
            .list(&desired_state::users_path(name))
            .await
            .map_err(|e| aws_diag("Cannot read the cluster's users", &e))?;
        doc.users = desired_state::users_from_shards(&doc, &shards.into_iter().map(|p| (p.name, p.value)).collect())
            .map_err(|e| Diagnostics::from(Diagnostic::error("The cluster's users are not readable", e)))?;
        let head = role_instances(clients, name, Role::Head).await?;
        let logins = role_instances(clients, name, Role::Login).await?;
        let mut model = import_model(&doc, param.version, &clients.default_tags);
        model.head_node_instance_id = head.first().cloned();
        let mut ips = Vec::new();
        for id in &logins {
            let info = clients
                .ec2
                .find_instance(id)
                .await
                .map_err(|e| aws_diag("Cannot read login node", &e))?;
            ips.push(info.and_then(|i| i.private_ip).unwrap_or_default());
        }
        if let Some(h) = head.first() {
            let info = clients
                .ec2
                .find_instance(h)
                .await
                .map_err(|e| aws_diag("Cannot read head node", &e))?;
            model.head_node_private_ip = info.and_then(|i| i.private_ip);
        }
        model.head_node_network_interface_id = head::kept_interface(clients, name, Role::Head).await?;
        if doc.head_node.backup_controller.is_some() {
            model.backup_controller_instance_id = role_instances(clients, name, Role::Backup).await?.first().cloned();
            model.backup_controller_network_interface_id = head::kept_interface(clients, name, Role::Backup).await?;
        }
        model.login_node_ids = Some(logins);
        model.login_node_private_ips = Some(ips);
        model.slurm_conf = render(&doc).ok();
        let mut v = model.value();
        let cost = fixed_cost(&v, &clients.price_overrides);
        record(&mut v, |m| m.estimated_hourly_cost = cost)?;
        Ok(v)
    }
}

/// State from a published cluster document (import), its instances and addresses for the
/// caller to fill in. Blocks left at their defaults come back as absent (see
/// [`Cluster::value`]), the way a configuration that omits them reads.
fn import_model(doc: &ClusterDoc, version: i64, default_tags: &BTreeMap<String, String>) -> Cluster {
    let user_tags = convert::user_tags(&doc.tags, default_tags);
    let mut model = Cluster::of_doc(doc, version, (!user_tags.is_empty()).then_some(user_tags));
    model.instance_profile_policy = Some(instance_profile_policy(
        &doc.name,
        &doc.head_node.node_role_arns,
        &external_secrets(doc),
    ));
    model
}

/// The tags of everything the cluster makes: `tags_all` and the cluster's own.
fn cluster_tags(cluster: &Cluster) -> Vec<(String, String)> {
    let mut t: Vec<(String, String)> = cluster.tags_all.clone().unwrap_or_default().into_iter().collect();
    t.push((tag::CLUSTER.into(), cluster.name.clone()));
    t
}

/// The cluster's name as something a state owns (see [`owner`]).
fn owned(name: &str) -> owner::Name {
    owner::Name {
        param: desired_state::owner_param(name),
        document: desired_state::cluster_param(name),
        what: format!("cluster named {name:?}"),
        resource: "hpc_cluster",
        import_id: name.to_string(),
    }
}

/// Where the owning state's cluster lives, from its owner record.
fn owned_place(value: &str) -> String {
    serde_json::from_str::<desired_state::OwnerDoc>(value)
        .map(|doc| format!(" (VPC {}, subnet {})", doc.vpc_id, doc.subnet_id))
        .unwrap_or_default()
}

/// `outcome`, with the cluster recorded as this state's when it returns one (see [`owner`]).
async fn claimed(clients: &Clients, cluster: &Cluster, outcome: ApplyOutcome) -> ApplyOutcome {
    let made = Computed::of(&outcome.state).unwrap_or_default();
    let doc = desired_state::OwnerDoc {
        vpc_id: made.vpc_id.as_str().unwrap_or_default().to_string(),
        subnet_id: cluster.subnet_id.clone(),
    };
    let value = serde_json::to_string(&doc).unwrap_or_default();
    owner::claimed(clients, &owned(&cluster.name), &value, &cluster_tags(cluster), outcome).await
}

/// Unknown values left in a failed create become null (state holds only what exists).
fn scrub(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        for x in m.values_mut() {
            if x.is_unknown() {
                *x = Value::Null;
            }
        }
    }
    v
}

async fn ensure_security_groups(
    clients: &Clients,
    name: &str,
    vpc: &str,
    cluster: &Cluster,
    tags: &[(String, String)],
) -> Result<Vec<String>, Diagnostics> {
    let group = match &cluster.security_group_id {
        // Adopted (e.g. the network's group): used as it is, never changed or deleted here.
        Some(id) => id.clone(),
        None => create_cluster_group(clients, name, vpc, tags).await?,
    };
    let cidrs = cluster.head_node.allowed_ssh_cidrs.iter().flatten();
    let ssh: Vec<(i32, String)> = cidrs.map(|c| (22, c.clone())).collect();
    let ssh_sg = clients
        .ec2
        .ensure_security_group(
            &format!("hpc-{name}-ssh"),
            "hpcforge head and login nodes: SSH from allowed networks",
            vpc,
            &ssh,
            tags,
        )
        .await
        .map_err(|e| aws_diag("Cannot create the SSH security group", &e))?;
    Ok(vec![group, ssh_sg])
}

async fn create_cluster_group(
    clients: &Clients,
    name: &str,
    vpc: &str,
    tags: &[(String, String)],
) -> Result<String, Diagnostics> {
    let cluster = clients
        .ec2
        .ensure_security_group(
            &format!("hpc-{name}-cluster"),
            "hpcforge cluster nodes: all traffic between members",
            vpc,
            &[],
            tags,
        )
        .await
        .map_err(|e| aws_diag("Cannot create the cluster security group", &e))?;
    clients
        .ec2
        .allow_self(&cluster)
        .await
        .map_err(|e| aws_diag("Cannot open the cluster security group to its members", &e))?;
    Ok(cluster)
}

/// The database password's secret: generated once for local accounting (MariaDB on the head
/// node), the write-only `password` stored for external accounting, or none (the user's own
/// `password_secret_arn`, or no accounting).
async fn store_password(
    clients: &Clients,
    name: &str,
    config: &Value,
    tags: &[(String, String)],
) -> Result<Option<String>, Diagnostics> {
    // The password is write-only: in the configuration, never in the plan or state.
    let accounting = Cluster::read(config)?.accounting;
    let secret = desired_state::db_password_secret(name);
    if accounting.mode == "local" {
        return clients
            .secrets
            .ensure_random_password(&secret, DB_PASSWORD_CHARS, tags)
            .await
            .map(Some)
            .map_err(|e| aws_diag("Cannot create the database password", &e));
    }
    let Some(password) = accounting.password else {
        return Ok(None);
    };
    clients
        .secrets
        .put(&secret, &SecretValue::Text(password), tags)
        .await
        .map(Some)
        .map_err(|e| aws_diag("Cannot store the database password", &e))
}

/// The EFS the provider made for the cluster's /home, per `state` (none when the user gave one).
fn managed_home(state: &Value) -> Option<String> {
    let state = ClusterConfig::of_state(state).ok()?;
    let given = state.home.known().is_some_and(|h| h.efs_id.is_set());
    state.home_file_system_id.known().filter(|_| !given).cloned()
}

/// /home's file system: the user's (`home.efs_id`, used as it is), or the cluster's own, made
/// once (found again by its creation token after an interrupted apply) with a mount target in
/// the cluster subnet's zone, reached through the cluster security group.
async fn ensure_home(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    name: &str,
    sgs: &[String],
    tags: &[(String, String)],
    timeout: Duration,
) -> Result<(), Diagnostics> {
    let cluster = Cluster::of(state).map_err(|e| e.into_diagnostics("The cluster's state cannot be read"))?;
    if let Some(id) = cluster.home.efs_id {
        return record(state, |m| m.home_file_system_id = Field::Known(id));
    }
    let mut fs_tags = tags.to_vec();
    fs_tags.push(("Name".into(), format!("hpc-{name}-home")));
    let token = desired_state::home_efs_token(name);
    let made = cluster_efs(clients, &token, &fs_tags, &cluster.subnet_id, sgs, timeout);
    let fs = or_stop(ctx, "making the cluster's /home", made)
        .await
        .map_err(|e| aws_diag("Cannot make the EFS file system for /home", &e))?;
    record(state, |m| m.home_file_system_id = Field::Known(fs))
}

/// An EFS file system of the cluster (encrypted), made once and found again by its creation
/// `token` after an interrupted apply, with a mount target in `subnet`'s zone reached through
/// the cluster security group (the first of `sgs`).
async fn cluster_efs(
    clients: &Clients,
    token: &str,
    tags: &[(String, String)],
    subnet: &str,
    sgs: &[String],
    timeout: Duration,
) -> hpc_aws::Result<String> {
    let fs = clients.efs.ensure_file_system(token, tags, timeout).await?;
    let zones = clients.ec2.subnet_zones(&[subnet.to_string()]).await?;
    clients
        .efs
        .ensure_mount_targets(&fs, &zones, sgs.get(..1).unwrap_or_default(), timeout)
        .await?;
    Ok(fs)
}

async fn publish(
    clients: &Clients,
    state: &mut Value,
    munge: &str,
    password_arn: Option<String>,
) -> Result<(), Diagnostics> {
    let secrets = Secrets {
        region: &clients.aws.region,
        munge_arn: munge,
        password_arn,
    };
    let cluster = Cluster::of(state).map_err(|e| e.into_diagnostics("The cluster's state cannot be read"))?;
    let mut doc = cluster.doc(secrets);
    doc.max_hourly_cost = clients.limits.max_hourly_cost_per_cluster.map(|c| format!("{c:.2}"));
    doc.max_gpus = clients.limits.max_gpus_per_cluster;
    doc.fixed_hourly_cost = fixed_cost(state, &clients.price_overrides)
        .known()
        .map(ToString::to_string);
    let tags: Vec<(String, String)> = cluster.tags_all.unwrap_or_default().into_iter().collect();
    let shards = desired_state::user_shards(&doc.users)
        .map_err(|e| Diagnostics::from(Diagnostic::error("Cannot publish the cluster's users", e)))?;
    let stale = publish_user_shards(clients, &doc.name, &shards, &tags).await?;
    doc.user_shards = u32::try_from(shards.len()).unwrap_or(u32::MAX);
    doc.users_digest = Some(desired_state::users_digest(&shards));
    doc.users.clear();
    let json = serde_json::to_string(&doc)
        .map_err(|e| Diagnostics::from(Diagnostic::error("Cannot encode desired state", e.to_string())))?;
    let version = clients
        .ssm
        .put(&desired_state::cluster_param(&doc.name), &json, &tags)
        .await
        .map_err(|e| aws_diag("Cannot publish the cluster", &e))?;
    record(state, |m| m.desired_state_version = Field::Known(version))?;
    // Only now that the document no longer names them.
    for name in stale {
        clients
            .ssm
            .delete(&name)
            .await
            .map_err(|e| aws_diag("Cannot remove a user shard", &e))?;
    }
    Ok(())
}

/// Writes the user shards that differ from the published ones (the cluster document, written
/// after them, names the new set); returns the shards beyond it, to delete afterwards.
async fn publish_user_shards(
    clients: &Clients,
    cluster: &str,
    shards: &[String],
    tags: &[(String, String)],
) -> Result<Vec<String>, Diagnostics> {
    let published: BTreeMap<String, String> = clients
        .ssm
        .list(&desired_state::users_path(cluster))
        .await
        .map_err(|e| aws_diag("Cannot read the cluster's users", &e))?
        .into_iter()
        .map(|p| (p.name, p.value))
        .collect();
    for (i, shard) in shards.iter().enumerate() {
        let name = desired_state::user_shard_param(cluster, i);
        if published.get(&name) != Some(shard) {
            clients
                .ssm
                .put(&name, shard, tags)
                .await
                .map_err(|e| aws_diag("Cannot publish the cluster's users", &e))?;
        }
    }
    let current: Vec<String> = (0..shards.len())
        .map(|i| desired_state::user_shard_param(cluster, i))
        .collect();
    Ok(published.into_keys().filter(|n| !current.contains(n)).collect())
}

fn template(
    head: &model::HeadNode,
    name: &str,
    role: Role,
    instance_type: String,
    sgs: &[String],
    tags: &[(String, String)],
    user_data: String,
) -> LaunchTemplateSpec {
    let mut tags = tags.to_vec();
    tags.push((tag::ROLE.into(), role.tag().to_string()));
    tags.push(("Name".into(), format!("{name}-{}", role.tag())));
    LaunchTemplateSpec {
        name: launch_template_name(name, role),
        image_id: head.ami_id.clone(),
        instance_type: Some(instance_type),
        key_name: head.key_name.clone(),
        security_group_ids: sgs.to_vec(),
        instance_profile_arn: head.instance_profile_arn.clone(),
        user_data: Some(user_data),
        root_volume: Some(RootVolume {
            // Validation keeps it within EBS's 16 TiB.
            size_gib: i32::try_from(head.root_volume_size).unwrap_or(i32::MAX),
            volume_type: head.root_volume_type.clone(),
            encrypted: head.root_volume_encrypted,
            kms_key_id: None,
        }),
        efa_network_cards: Vec::new(),
        placement_group: None,
        capacity_reservation: None,
        tags,
    }
}

/// The login nodes (new ones where the plan shows them: unknown ids, else the promised ones),
/// then the head's report, then the new login nodes' reports and the retirement of those they
/// replace: a login node waits for the head, so the head's own error comes first.
async fn nodes_ready(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    owner: &login::Owner<'_>,
    timeout: Duration,
) -> Result<Diagnostics, Diagnostics> {
    let roll_out = Computed::of(state)?.login_node_ids.is_unknown();
    let logins = login::start(ctx, clients, state, owner, roll_out, timeout).await?;
    let warnings = head::ready(ctx, clients, state, owner.name, Role::Head, timeout).await?;
    login::finish(ctx, clients, owner.name, logins, timeout).await?;
    Ok(warnings)
}

/// The cluster's head or login instances not on their way out.
async fn role_nodes(clients: &Clients, name: &str, role: Role) -> Result<Vec<InstanceInfo>, Diagnostics> {
    let all = clients
        .ec2
        .instances_tagged(tag::CLUSTER, name)
        .await
        .map_err(|e| aws_diag("Cannot list cluster instances", &e))?;
    Ok(all
        .into_iter()
        .filter(|i| i.tag(tag::ROLE) == Some(role.tag()) && i.state != "shutting-down")
        .collect())
}

/// The ids of [`role_nodes`], sorted.
async fn role_instances(clients: &Clients, name: &str, role: Role) -> Result<Vec<String>, Diagnostics> {
    let mut ids: Vec<String> = role_nodes(clients, name, role)
        .await?
        .into_iter()
        .map(|i| i.id)
        .collect();
    ids.sort();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_well_formed() {
        schema().check().expect("hpc_cluster schema");
    }

    /// An external database's host and password known only at apply are set; unset, refused.
    #[tokio::test]
    async fn accounting_values_known_only_at_apply_are_set() {
        let errors = |host: Value, secret: Value| async move {
            let mut c = Value::null_object(&schema().ty());
            let accounting = convert::object(vec![
                ("mode", Value::string("external")),
                ("host", host),
                ("password_secret_arn", secret),
            ]);
            c.set_attr("accounting", accounting);
            let d = HpcCluster.validate(ValidateRequest { config: c }).await;
            d.0.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .filter(|p| p.starts_with("accounting"))
                .collect::<Vec<String>>()
        };
        assert_eq!(errors(Value::Unknown, Value::Unknown).await, Vec::<String>::new());
        assert_eq!(
            errors(Value::Null, Value::Null).await,
            ["accounting.host", "accounting.password_secret_arn"]
        );
        let named = Value::string("arn:aws:secretsmanager:us-east-1:111122223333:secret:db-AbCdEf");
        assert_eq!(
            errors(Value::string("db.example.org"), named).await,
            Vec::<String>::new()
        );
    }

    #[test]
    fn policy_is_scoped_to_the_cluster() {
        let role = "arn:aws:iam::111122223333:role/hpc-nodes".to_string();
        let p: serde_json::Value =
            serde_json::from_str(&instance_profile_policy("research", std::slice::from_ref(&role), &[])).expect("json");
        assert!(p.to_string().contains("parameter/hpcforge/clusters/research/*"));
        assert!(p.to_string().contains("secret:hpcforge/research/*"));
        let statement = |sid: &str| {
            p["Statement"]
                .as_array()
                .and_then(|s| s.iter().find(|st| st["Sid"] == sid))
                .cloned()
                .unwrap_or_else(|| panic!("no statement {sid}: {p}"))
        };
        let terminate = statement("TerminateOnlyThisClustersNodes");
        assert_eq!(
            terminate["Condition"]["StringEquals"]["aws:ResourceTag/hpcforge:cluster"],
            "research"
        );
        assert_eq!(statement("PassTheNodeRole")["Resource"], serde_json::json!([role]));
        let tagging = statement("TagOnlyWhatItLaunches");
        assert_eq!(tagging["Action"], "ec2:CreateTags");
        assert!(tagging["Condition"]["StringEquals"]["ec2:CreateAction"].is_array());
        // Nothing else may terminate or tag.
        let unscoped: Vec<&serde_json::Value> = p["Statement"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|st| st["Condition"].is_null())
            .filter(|st| {
                st["Action"].to_string().contains("Terminate") || st["Action"].to_string().contains("CreateTags")
            })
            .collect();
        assert!(unscoped.is_empty(), "{unscoped:?}");
        let any: serde_json::Value =
            serde_json::from_str(&instance_profile_policy("research", &[], &[])).expect("json");
        assert!(any.to_string().contains(r#""Resource":"*""#));
        // An external database's password secret is readable by its ARN, and only it.
        let arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:slurmdbd-AbCdEf";
        let external: serde_json::Value =
            serde_json::from_str(&instance_profile_policy("research", &[], &[arn.to_string()])).expect("json");
        let read = external["Statement"]
            .as_array()
            .and_then(|s| s.iter().find(|st| st["Sid"] == "ReadClusterSecrets"))
            .map(|st| st["Resource"].clone());
        assert_eq!(
            read,
            Some(serde_json::json!([
                "arn:aws:secretsmanager:*:*:secret:hpcforge/research/*",
                arn
            ]))
        );
    }

    #[test]
    fn role_arns_are_checked() {
        assert!(crate::resources::checks::is_iam_arn(
            "arn:aws:iam::111122223333:role/hpc-nodes",
            "role"
        ));
        assert!(crate::resources::checks::is_iam_arn(
            "arn:aws-us-gov:iam::111122223333:role/path/hpc",
            "role"
        ));
        assert!(!crate::resources::checks::is_iam_arn(
            "arn:aws:iam::111122223333:instance-profile/hpc-nodes",
            "role"
        ));
        assert!(!crate::resources::checks::is_iam_arn(
            "arn:aws:iam::1111:role/x",
            "role"
        ));
        assert!(!crate::resources::checks::is_iam_arn("hpc-nodes", "role"));
        // A wildcard is many roles where one is meant.
        let wildcard = "arn:aws:iam::111122223333:role/hpc-*";
        assert!(!crate::resources::checks::is_iam_arn(wildcard, "role"));
        assert!(crate::resources::checks::refused_arn(wildcard, "an IAM role")
            .contains("is a wildcard where an IAM role is meant"));
        assert!(
            crate::resources::checks::secret_arn_region("arn:aws:secretsmanager:us-east-1:111122223333:secret:*")
                .is_none()
        );
    }

    #[test]
    fn cidrs_are_checked() {
        assert_eq!(checks::parse_cidr("192.0.2.0/24"), Some((0xC000_0200, 24)));
        assert!(checks::parse_cidr("192.0.2.0").is_none());
        assert!(checks::parse_cidr("300.0.2.0/24").is_none());
    }
}
