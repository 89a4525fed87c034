//! `hpc_cluster`: the head node (Slurm controller, accounting), login nodes, Unix users,
//! shared storage mounts, the munge key, and the cluster's desired-state document.
//!
//! Secrets (the munge key, a database password) are generated or taken write-only and go
//! straight to Secrets Manager; state and plan only ever hold their ARNs.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::ec2::{LaunchTemplateSpec, RootVolume};
use hpc_aws::secrets::SecretValue;
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, AttributePath, Block, BlockNesting, CreateRequest, DeleteRequest, Diagnostic,
    Diagnostics, ImportRequest, NestedBlock, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest,
    ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::convert::{self, boolean, int, of_list, pairs, string, strings};
use crate::desired_state::boot::Role;
use crate::desired_state::{self, tag, ClusterDoc};
use crate::pricing;
use crate::resources::{aws_diag, image_fits, image_release, or_stop, planned_image, valid_name};

mod checks;
mod head;
mod model;

use model::{part, Cluster, InstanceType, LoginNodes, Secrets, User};
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

fn schema() -> Schema {
    let computed =
        |name: &str, ty: Type, doc: &str| Attribute::computed(name, ty).description(doc).use_state_for_unknown();
    let head = Block::new(vec![
        Attribute::required("ami_id", Type::String).description(
            "AMI of the head node (an hpc-image build). Changing it (or the type, root volume, key pair or \
                 instance profile) replaces the head node in place: the old head stops, a new one starts on the \
                 same address with the same state volume; queued jobs, accounting and compute nodes stay.",
        ),
        Attribute::optional("instance_type", Type::String)
            .description("Head node instance type. Default `c7i.2xlarge`.")
            .default(Value::string("c7i.2xlarge")),
        Attribute::optional("root_volume_size", Type::Number)
            .description("Root volume GiB. Default 100.")
            .default(Value::int(100)),
        Attribute::optional("root_volume_type", Type::String)
            .description("`gp3` (default) or `gp2`.")
            .default(Value::string("gp3")),
        Attribute::optional("root_volume_encrypted", Type::Bool)
            .description("Encrypt the root volume. Default true.")
            .default(Value::Bool(true)),
        Attribute::optional("key_name", Type::String).description("EC2 key pair for SSH as the AMI's default user."),
        Attribute::optional("allowed_ssh_cidrs", Type::list(Type::String))
            .description("Networks allowed to SSH to head and login nodes. Default: none (use SSM Session Manager)."),
        Attribute::optional("instance_profile_arn", Type::String)
            .description("Instance profile of the cluster's nodes; see `instance_profile_policy` for what it needs."),
        Attribute::optional("node_role_arns", Type::list(Type::String)).description(
            "IAM roles of the instance profiles nodes launch with (the cluster's, and any partition's own). `instance_profile_policy` then lets the head node pass only these roles, and only to EC2. Default: any role, to EC2 only.",
        ),
        Attribute::optional("state_volume_size", Type::Number)
            .description(&format!(
                "GiB of the encrypted gp3 volume that keeps the cluster's state across head nodes \
             (slurmctld's saved state, the local accounting database). Default {}; set at creation.",
                head::DEFAULT_STATE_VOLUME_GIB
            ))
            .default(Value::int(head::DEFAULT_STATE_VOLUME_GIB)),
    ]);
    let slurm = Block::new(vec![
        Attribute::optional("version", Type::String)
            .description("Slurm release series on the images: `22.05` or `24.11` (default).")
            .default(Value::string("24.11")),
        Attribute::optional("scaledown_idletime", Type::String)
            .description(&format!(
                "Idle time before a cloud node is powered down (SuspendTime). Default `{}`.",
                desired_state::duration_text(DEFAULT_SCALEDOWN_IDLETIME_S)
            ))
            .default(Value::string(desired_state::duration_text(
                DEFAULT_SCALEDOWN_IDLETIME_S,
            ))),
        Attribute::optional("resume_timeout", Type::String)
            .description(&format!(
                "How long a node may take to boot and register (ResumeTimeout); every partition's \
                 `provision_timeout` must be shorter. Default `{}`.",
                desired_state::duration_text(DEFAULT_RESUME_TIMEOUT_S)
            ))
            .default(Value::string(desired_state::duration_text(DEFAULT_RESUME_TIMEOUT_S))),
        Attribute::optional("extra", Type::map(Type::String))
            .description("More slurm.conf settings; unknown keys and keys hpcforge manages are rejected."),
    ]);
    let accounting = Block::new(vec![
        Attribute::optional("mode", Type::String)
            .description("`local` (MariaDB on the head node, default), `external` (your database) or `none`.")
            .default(Value::string("local")),
        Attribute::optional("host", Type::String).description("External database host."),
        Attribute::optional("port", Type::Number).description("External database port. Default 3306."),
        Attribute::optional("user", Type::String).description("External database user."),
        Attribute::optional("database", Type::String).description("External database name. Default `slurm_acct_db`."),
        Attribute::optional("password_secret_arn", Type::String)
            .description("Secrets Manager secret holding the external database password."),
        Attribute::optional("password", Type::String)
            .description("External database password, stored in Secrets Manager by the provider; never kept in state.")
            .sensitive()
            .write_only(),
        Attribute::optional("password_version", Type::Number).description(
            "Any number; change it whenever `password` changes. Terraform never compares write-only values between plans, so this is what makes the provider store the new password (as a new version of the same secret).",
        ),
    ]);
    let login = Block::new(vec![
        Attribute::optional("count", Type::Number)
            .description("Number of login nodes. Default 0.")
            .default(Value::int(0)),
        Attribute::optional("instance_type", Type::String)
            .description("Login node instance type. Default `c7i.xlarge`.")
            .default(Value::string("c7i.xlarge")),
    ]);
    let user = Block::new(vec![
        Attribute::required("name", Type::String).description("Login name."),
        Attribute::required("uid", Type::Number).description("Numeric user id (1000 or more)."),
        Attribute::optional("gid", Type::Number).description("Primary group id. Default: the uid."),
        Attribute::optional("ssh_public_keys", Type::list(Type::String)).description("Authorized SSH public keys."),
        Attribute::optional("sudo", Type::Bool)
            .description("Passwordless sudo. Default false.")
            .default(Value::Bool(false)),
        Attribute::optional("accounts", Type::list(Type::String)).description(
            "Slurm accounts the user may charge, the first their default: made in the accounting database \
             with the user's associations (what partitions' `allow_accounts` admit). Lowercase.",
        ),
    ]);
    let home = Block::new(vec![
        Attribute::optional("storage", Type::String)
            .description("`efs` (the default and the only kind: the head node exports nothing).")
            .default(Value::string("efs")),
        Attribute::optional("efs_id", Type::String).description(
            "Your EFS file system (`fs-...`), with a mount target in each zone the nodes run in. Without it the \
             provider makes one for the cluster (`home_file_system_id`).",
        ),
    ]);
    let mfa = Block::new(vec![
        Attribute::required("pam_module", Type::String)
            .description(
                "PAM module for the second factor on login nodes' SSH, after the key, e.g. \
                 `pam_google_authenticator.so` or `pam_duo.so` (hpc-image's `mfa` component bakes both).",
            ),
        Attribute::optional("config", Type::String)
            .description("The module's arguments on its PAM line, e.g. `nullok` (users not enrolled yet log in by key)."),
        Attribute::optional("settings_file", Type::String).description(
            "Where login nodes write the module's settings, root-only (mode 0600), e.g. `/etc/security/pam_duo.conf`: \
             a path under /etc. Requires `settings_secret_arn`.",
        ),
        Attribute::optional("settings_secret_arn", Type::String).description(
            "A Secrets Manager secret whose text is the module's settings (e.g. pam_duo's host, ikey and skey). \
             Login nodes fetch it (`instance_profile_policy` grants reading it) and follow its changes within a minute.",
        ),
    ]);
    let storage = Block::new(vec![
        Attribute::optional("lustre_id", Type::String).description("An hpc_lustre_fs id."),
        Attribute::optional("dns_name", Type::String)
            .description("The file system's DNS name (hpc_lustre_fs.dns_name); required."),
        Attribute::optional("mount_name", Type::String)
            .description("The file system's mount name (hpc_lustre_fs.mount_name); required."),
        Attribute::required("mount_point", Type::String).description("Where nodes mount it, e.g. `/fsx`."),
    ]);
    Schema::new(
        0,
        Block::new(vec![
            computed("id", Type::String, "The cluster name."),
            Attribute::required("name", Type::String)
                .description("Cluster name (Slurm ClusterName): lowercase letters, digits, `-`.")
                .requires_replace(),
            Attribute::required("subnet_id", Type::String)
                .description("Subnet of the head and login nodes.")
                .requires_replace(),
            Attribute::optional("security_group_id", Type::String)
                .description(
                    "Use this security group as the cluster group (all traffic between members) instead of \
                     creating one, e.g. `hpc_network.security_group_id`, so a Lustre file system made before the \
                     cluster in that group is reachable from every node. It is never deleted by the cluster.",
                )
                .requires_replace(),
            Attribute::optional("wait_for_ready", Type::Bool)
                .description(
                    "Create and update wait (within their timeouts) until the head node reports slurmctld running, \
                     and fail with the head node's own error and its console's last lines when it reports a failure \
                     or never reports. Default true.",
                )
                .default(Value::Bool(true)),
            Attribute::optional("tags", Type::map(Type::String)).description("Tags of everything the cluster creates."),
            Attribute::computed("tags_all", Type::map(Type::String))
                .description("`tags` merged over the provider's `default_tags`."),
            computed("vpc_id", Type::String, "VPC of the subnet."),
            computed("head_node_instance_id", Type::String, "Head node instance."),
            computed(
                "head_node_private_ip",
                Type::String,
                "Head node address (SlurmctldHost): the kept network interface's, the same for every head node.",
            ),
            computed(
                "head_node_network_interface_id",
                Type::String,
                "Network interface every head node of the cluster is launched on.",
            ),
            computed(
                "state_volume_id",
                Type::String,
                "EBS volume with the cluster's state, attached to each head node.",
            ),
            computed(
                "home_file_system_id",
                Type::String,
                "EFS file system every node mounts at /home: `home.efs_id`, or the one the provider made \
                 (encrypted, elastic throughput, a mount target in each zone of the cluster's and its partitions' \
                 subnets in this region; deleted with the cluster, the users' files with it).",
            ),
            Attribute::computed("login_node_ids", Type::list(Type::String)).description("Login node instances."),
            Attribute::computed("login_node_private_ips", Type::list(Type::String))
                .description("Login node addresses."),
            computed(
                "security_group_ids",
                Type::list(Type::String),
                "Cluster security group and SSH security group.",
            ),
            computed(
                "munge_key_secret_arn",
                Type::String,
                "Secrets Manager secret with the munge key (generated; never in state).",
            ),
            computed(
                "desired_state_parameter",
                Type::String,
                "SSM parameter of the cluster's desired state.",
            ),
            Attribute::computed("desired_state_version", Type::Number)
                .description("Version of the published cluster document."),
            Attribute::computed("slurm_conf", Type::String)
                .description("The cluster-wide part of slurm.conf (each hpc_partition shows its own lines)."),
            computed(
                "instance_profile_policy",
                Type::String,
                "IAM policy JSON the instance profile needs.",
            ),
            Attribute::computed("estimated_hourly_cost", Type::Number)
                .description("On-demand USD/hour of the head and login nodes (partitions report their own)."),
        ])
        .with_blocks(vec![
            NestedBlock::new("head_node", BlockNesting::Single, head.description("The head node: slurmctld, accounting and the node agent; its AMI, type, root volume and SSH access."))
                .min_items(1)
                .max_items(1),
            NestedBlock::new("slurm", BlockNesting::Single, slurm.description("Slurm version, power saving timings and extra slurm.conf settings.")),
            NestedBlock::new("accounting", BlockNesting::Single, accounting.description("Job accounting: slurmdbd with a local MariaDB on the head node, an external database, or none.")),
            NestedBlock::new("login_nodes", BlockNesting::Single, login.description("Login nodes users SSH to; their count changes in place.")),
            NestedBlock::new("user", BlockNesting::List, user.description("A Unix user on every node (same uid everywhere).")),
            NestedBlock::new("mfa", BlockNesting::Single, mfa.description("Multi-factor authentication for SSH logins (a PAM module and its configuration).")),
            NestedBlock::new("home", BlockNesting::Single, home.description("Where /home lives: an EFS file system, the cluster's own unless you give one.")),
            NestedBlock::new("storage", BlockNesting::List, storage.description("A Lustre file system every node mounts.")),
            timeouts::block(&["create", "update", "delete"]),
        ])
        .description(
            "A Slurm cluster: head node with slurmctld and accounting, login nodes, users and shared storage.",
        ),
    )
}

/// The cluster-wide slurm.conf, or the model's objections.
fn render(doc: &ClusterDoc) -> Result<String, Vec<slurm_model::ModelError>> {
    let model = doc.to_model(&[]).map_err(|e| vec![e])?;
    let errors: Vec<_> = slurm_model::validate(&model)
        .into_iter()
        .filter(|e| e.path.first().map(String::as_str) != Some("partition") && !e.summary.contains("no partition"))
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(slurm_model::render_unvalidated(&model).slurm_conf)
}

fn model_path(path: &[String]) -> AttributePath {
    match path.get(1).map(String::as_str) {
        Some("extra") => {
            let p = AttributePath::root("slurm").attr("extra");
            match path.get(2) {
                Some(k) => p.key(k),
                None => p,
            }
        }
        Some("version") => AttributePath::root("slurm").attr("version"),
        Some("name") => AttributePath::root("name"),
        _ => AttributePath::root("slurm"),
    }
}

/// A shorter `slurm.resume_timeout` must still leave each published partition room to fail
/// over (`ClusterDoc::check_timeouts`); read only when the timeout changes.
async fn partitions_fit(clients: &Clients, doc: &ClusterDoc) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let published = match clients.ssm.list(&desired_state::partitions_path(&doc.name)).await {
        Ok(p) => p,
        Err(e) => return aws_diag("Cannot read the cluster's partitions", &e),
    };
    for p in published {
        let Ok(part) = serde_json::from_str::<desired_state::PartitionDoc>(&p.value) else {
            continue;
        };
        if let Err(e) = doc.check_timeouts(&part) {
            diags.error_at(
                AttributePath::root("slurm").attr("resume_timeout"),
                e.summary,
                format!("{} (partition {})", e.detail, part.name),
            );
        }
    }
    diags
}

/// Lowercase letters, digits, '_' and '-': what login names and Slurm account names share.
fn slurm_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_' || ch == '-')
}

/// The head node's image: its Slurm release against slurm.version, its architecture against the
/// head's instance type, its root snapshot against root_volume_size (reads only).
async fn head_image_checks(clients: &Clients, planned: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let head = planned.attr("head_node");
    let Some(ami) = string(head.attr("ami_id")) else {
        return diags;
    };
    let Some(image) = planned_image(clients, &ami, &mut diags).await else {
        return diags;
    };
    let at = || AttributePath::root("head_node");
    if let Some(version) = string(planned.attr("slurm").attr("version")) {
        diags.extend(image_release(&image, &version, at().attr("ami_id")));
    }
    let types = match string(head.attr("instance_type")) {
        Some(t) => clients.ec2.instance_types(&[t]).await.unwrap_or_default(),
        None => Vec::new(),
    };
    diags.extend(image_fits(
        &image,
        int(head.attr("root_volume_size")),
        &types,
        at().attr("instance_type"),
        at().attr("root_volume_size"),
    ));
    diags
}

/// The external database password's secret the user named (not the one the provider keeps for
/// a write-only `password`).
/// An external database's password secret of the user's own (not the one the provider
/// generates from the write-only password).
fn external_password_secret(doc: &ClusterDoc) -> Option<String> {
    let generated = desired_state::db_password_secret(&doc.name);
    doc.accounting
        .password_secret_arn
        .clone()
        .filter(|arn| !arn.contains(&generated))
}

/// The secrets of the user's own that nodes read: an external database's password and the
/// second factor's settings.
fn external_secrets(doc: &ClusterDoc) -> Vec<String> {
    external_password_secret(doc)
        .into_iter()
        .chain(doc.mfa_settings_secret_arn.clone())
        .collect()
}

/// The IAM policy the cluster's instance profile needs, scoped to this cluster: its own
/// parameters and secrets (and `external_secrets`, the user's own that nodes read); tags only
/// on what it launches; terminate only instances tagged with the cluster; pass only
/// `node_roles` (any role when none are named) and only to EC2.
fn instance_profile_policy(name: &str, node_roles: &[String], external_secrets: &[String]) -> String {
    let pass_roles = if node_roles.is_empty() {
        serde_json::json!("*")
    } else {
        serde_json::json!(node_roles)
    };
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadDesiredState",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "ssm:PutParameter"],
                "Resource": format!("arn:aws:ssm:*:*:parameter{}/*", desired_state::cluster_prefix(name))
            },
            {
                "Sid": "ReadClusterSecrets",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue"],
                "Resource": std::iter::once(format!("arn:aws:secretsmanager:*:*:secret:{}/*", desired_state::secrets_prefix(name)))
                    .chain(external_secrets.iter().cloned())
                    .collect::<Vec<_>>()
            },
            {
                "Sid": "LaunchComputeNodes",
                "Effect": "Allow",
                "Action": ["ec2:CreateFleet", "ec2:RunInstances",
                           "ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
                           "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSubnets", "ec2:DescribeCapacityReservations"],
                "Resource": "*"
            },
            {
                "Sid": "TagOnlyWhatItLaunches",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": "*",
                "Condition": {"StringEquals": {"ec2:CreateAction": ["CreateFleet", "RunInstances"]}}
            },
            {
                "Sid": "TerminateOnlyThisClustersNodes",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "arn:aws:ec2:*:*:instance/*",
                "Condition": {"StringEquals": {format!("aws:ResourceTag/{}", tag::CLUSTER): name}}
            },
            {
                "Sid": "PassTheNodeRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": pass_roles,
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
            },
            {
                "Sid": "LustreReleaseTasks",
                "Effect": "Allow",
                "Action": ["fsx:CreateDataRepositoryTask", "fsx:DescribeDataRepositoryTasks", "fsx:DescribeFileSystems",
                           "fsx:DescribeDataRepositoryAssociations"],
                "Resource": "*"
            }
        ]
    })
    .to_string()
}

/// The on-demand cost per hour of the head and login nodes; unknown while their types or
/// count are.
fn fixed_cost(v: &Value, overrides: &[(String, f64)]) -> Value {
    let (Ok(head), Ok(login)) = (
        part::<InstanceType>(v, "head_node"),
        part::<LoginNodes>(v, "login_nodes"),
    ) else {
        return Value::Unknown;
    };
    let count = u32::try_from(login.count).unwrap_or(0);
    let usage = pricing::max_usage(
        &[(head.instance_type, 1, 0, 0), (login.instance_type, count, 0, 0)],
        overrides,
    );
    usage
        .hourly_cost
        .and_then(|c| tfplugin::Number::parse(&format!("{c:.2}")).ok())
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// The cluster's name and subnet.
fn identity_checks(c: &Value, diags: &mut Diagnostics) {
    if let Some(name) = c.attr("name").as_str() {
        if let Err(why) = valid_name(name, 40) {
            diags.error_at(
                AttributePath::root("name"),
                format!("cluster name {name:?} is not valid"),
                why,
            );
        }
    }
    if let Some(s) = c.attr("subnet_id").as_str() {
        if !s.starts_with("subnet-") {
            diags.error_at(
                AttributePath::root("subnet_id"),
                format!("{s:?} is not a subnet id"),
                "Use an id like subnet-0123456789abcdef0.",
            );
        }
    }
}

/// The head node's ids, sizes, roles and SSH ranges.
fn head_checks(head: &Value, diags: &mut Diagnostics) {
    if let Some(ami) = head.attr("ami_id").as_str() {
        if !ami.starts_with("ami-") {
            diags.error_at(
                AttributePath::root("head_node").attr("ami_id"),
                format!("{ami:?} is not an AMI id"),
                "Use an id like ami-0123456789abcdef0.",
            );
        }
    }
    if let Some(size) = int(head.attr("state_volume_size")) {
        if !(1..=16384).contains(&size) {
            diags.error_at(
                AttributePath::root("head_node").attr("state_volume_size"),
                format!("a state volume of {size} GiB is not possible"),
                "Give 1 to 16384 GiB (gp3's range).",
            );
        }
    }
    if head.attr("root_volume_encrypted").as_bool() == Some(false) {
        diags.push(
            Diagnostic::warning(
                "head node root volume is not encrypted",
                "Encryption at rest is on by default; turning it off is rarely wanted.",
            )
            .at(AttributePath::root("head_node").attr("root_volume_encrypted")),
        );
    }
    for (i, arn) in strings(head.attr("node_role_arns"))
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if !crate::resources::checks::is_iam_arn(arn, "role") {
            diags.error_at(
                AttributePath::root("head_node").attr("node_role_arns").index(i),
                format!("{arn:?} is not an IAM role ARN"),
                "Write the role's ARN, e.g. arn:aws:iam::111122223333:role/hpc-nodes (the role, not its instance profile).",
            );
        }
    }
    for (i, cidr) in strings(head.attr("allowed_ssh_cidrs"))
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        checks::ssh_cidr(
            cidr,
            AttributePath::root("head_node").attr("allowed_ssh_cidrs").index(i),
            diags,
        );
    }
}

/// slurm's durations parse.
fn duration_checks(s: &Value, diags: &mut Diagnostics) {
    for attr in ["scaledown_idletime", "resume_timeout"] {
        if let Some(v) = s.attr(attr).as_str() {
            if let Err(e) = timeouts::parse_duration(v) {
                diags.error_at(
                    AttributePath::root("slurm").attr(attr),
                    format!("{attr} is not a duration"),
                    e,
                );
            }
        }
    }
}

/// The accounting mode and what each mode takes.
fn accounting_checks(a: &Value, diags: &mut Diagnostics) {
    if let Some(mode) = a.attr("mode").as_str() {
        if !ACCOUNTING_MODES.contains(&mode) {
            diags.error_at(
                AttributePath::root("accounting").attr("mode"),
                format!("unknown accounting mode {mode:?}"),
                "Use local, external or none.",
            );
        }
        if mode == "external" {
            if a.attr("host").is_null() {
                diags.error_at(
                    AttributePath::root("accounting").attr("host"),
                    "external accounting needs host",
                    "Give the database host.",
                );
            }
            if a.attr("password").is_null() && a.attr("password_secret_arn").is_null() {
                diags.error_at(
                    AttributePath::root("accounting").attr("password_secret_arn"),
                    "external accounting needs a password",
                    "Set password_secret_arn to a Secrets Manager secret, or password (write-only: kept out of state).",
                );
            }
        } else if mode == "local" || mode == "none" {
            for key in ["host", "password", "password_secret_arn", "password_version"] {
                if !a.attr(key).is_null() {
                    diags.error_at(
                        AttributePath::root("accounting").attr(key),
                        format!("{key} is for external accounting only"),
                        format!(
                            "With mode {mode:?} the provider {} the database; remove {key}, or set mode = \"external\".",
                            if mode == "local" { "makes and keeps" } else { "uses no" }
                        ),
                    );
                }
            }
        }
    }
    if let Some(p) = a.attr("password").as_str() {
        if let Err(e) = slurm_model::check_storage_password(p) {
            diags.error_at(AttributePath::root("accounting").attr("password"), e.summary, e.detail);
        }
    }
}

/// Login names and account names, each user once, each in one shard (`c` with the schema's
/// defaults).
fn user_checks(c: &Value, diags: &mut Diagnostics) {
    let mut names = Vec::new();
    for (i, u) in c.attr("user").elements().iter().enumerate() {
        let at = || AttributePath::root("user").index(i);
        if let Some(n) = u.attr("name").as_str() {
            let ok = n.len() <= 32 && n.starts_with(|ch: char| ch.is_ascii_lowercase() || ch == '_') && slurm_name(n);
            if !ok {
                diags.error_at(
                    at().attr("name"),
                    format!("{n:?} is not a valid login name"),
                    "Use lowercase letters, digits, '_' and '-', starting with a letter.",
                );
            }
            if names.contains(&n.to_string()) {
                diags.error_at(
                    at().attr("name"),
                    format!("user {n} is listed twice"),
                    "List each user once.",
                );
            }
            names.push(n.to_string());
        }
        for (j, account) in u.attr("accounts").elements().iter().enumerate() {
            if let Some(a) = account.as_str() {
                if !slurm_name(a) {
                    diags.error_at(
                        at().attr("accounts").index(j),
                        format!("{a:?} is not a valid Slurm account name"),
                        "Use lowercase letters, digits, '_' and '-' (Slurm keeps account names in lowercase).",
                    );
                }
            }
        }
        let shard = User::read(u, &at()).map(|user| desired_state::user_shards(&[user.doc()]));
        if let Ok(Err(e)) = shard {
            diags.error_at(
                at().attr("ssh_public_keys"),
                e,
                "Each user is published whole in one 8 KiB shard.",
            );
        }
    }
}

/// Each storage block names what nodes mount.
fn storage_checks(storage: &[Value], diags: &mut Diagnostics) {
    for (i, m) in storage.iter().enumerate() {
        for attr in ["dns_name", "mount_name"] {
            if m.attr(attr).is_null() {
                diags.error_at(
                    AttributePath::root("storage").index(i).attr(attr),
                    format!("storage needs {attr}: nodes mount <dns_name>@tcp:/<mount_name>"),
                    format!("Set {attr} = hpc_lustre_fs.<name>.{attr} (or the file system's own value)."),
                );
            }
        }
    }
}

/// Slurm's own rules for the cluster-wide slurm.conf (a configuration known whole).
fn render_checks(c: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    match Cluster::of(c) {
        Ok(m) => {
            if let Err(errors) = render(&m.doc(Secrets::none())) {
                for e in errors {
                    diags.error_at(model_path(&e.path), e.summary, e.detail);
                }
            }
        }
        Err(e) => diags.push(e.diagnostic("The cluster's configuration cannot be read")),
    }
    diags
}

/// The cluster's id, parameter and instance profile policy (with the user's secrets, which
/// must be in the cluster's region), and its tags.
fn plan_identity(clients: &Clients, req: &mut PlanRequest) {
    let p = &mut req.planned;
    clients.plan_tags_all(p);
    if let Some(name) = string(p.attr("name")) {
        p.set_attr("id", Value::string(&name));
        p.set_attr(
            "desired_state_parameter",
            Value::string(desired_state::cluster_param(&name)),
        );
        let roles = strings(p.attr("head_node").attr("node_role_arns")).unwrap_or_default();
        let password = AttributePath::root("accounting").attr("password_secret_arn");
        let settings = AttributePath::root("mfa").attr("settings_secret_arn");
        let mut secrets = Vec::new();
        for (at, what, arn) in [
            (
                password,
                "the password's",
                string(p.attr("accounting").attr("password_secret_arn")),
            ),
            (
                settings,
                "the second factor's settings'",
                string(p.attr("mfa").attr("settings_secret_arn")),
            ),
        ] {
            let Some(arn) = arn else { continue };
            let region = crate::resources::checks::secret_arn_region(&arn);
            if let Some(region) = region.filter(|r| *r != clients.aws.region) {
                req.diagnostics.error_at(
                    at,
                    format!("{what} secret is in {region}, the cluster in {}", clients.aws.region),
                    "Nodes read it in the cluster's region: replicate the secret there (Secrets Manager \
                     replica regions) and give the replica's ARN.",
                );
            }
            secrets.push(arn);
        }
        p.set_attr(
            "instance_profile_policy",
            Value::string(instance_profile_policy(&name, &roles, &secrets)),
        );
    }
}

/// The cluster-wide slurm.conf, rendered from a configuration known whole (Slurm's objections
/// are the plan's), else unknown.
fn plan_slurm_conf(clients: &Clients, req: &mut PlanRequest, munge: &str) {
    if req.config.is_wholly_known() {
        let secrets = Secrets {
            region: &clients.aws.region,
            munge_arn: munge,
            password_arn: None,
        };
        match Cluster::of(&req.config).map(|m| render(&m.doc(secrets))) {
            Ok(Ok(conf)) => req.planned.set_attr("slurm_conf", Value::string(conf)),
            Ok(Err(errors)) => {
                for e in errors {
                    req.diagnostics.error_at(model_path(&e.path), e.summary, e.detail);
                }
            }
            Err(e) => req
                .diagnostics
                .push(e.diagnostic("The cluster's configuration cannot be read")),
        }
    } else {
        req.planned.set_attr("slurm_conf", Value::Unknown);
    }
}

/// Checks that read AWS: the instance types against the guardrails, the head's image, the key
/// pair, and the Slurm upgrade path.
async fn plan_reads(clients: &Clients, req: &PlanRequest) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let head_type = string(req.planned.attr("head_node").attr("instance_type"));
    let login_type = string(req.planned.attr("login_nodes").attr("instance_type"));
    for (t, at) in [(head_type, "head_node"), (login_type, "login_nodes")] {
        let Some(t) = t else { continue };
        if !clients.limits.allowed_instance_types.is_empty()
            && !pricing::instance_type_allowed(&t, &clients.limits.allowed_instance_types)
        {
            diags.push(
                Diagnostic::error(
                    format!("{t} is not in guardrails.allowed_instance_types"),
                    format!("Allowed: {}.", clients.limits.allowed_instance_types.join(", ")),
                )
                .at(AttributePath::root(at).attr("instance_type")),
            );
        }
    }
    // The head's image against slurm.version, its type and root volume, when any is new.
    let image = |v: &Value| {
        let h = v.attr("head_node");
        (
            h.attr("ami_id").clone(),
            v.attr("slurm").attr("version").clone(),
            h.attr("instance_type").clone(),
            h.attr("root_volume_size").clone(),
        )
    };
    if req.prior.is_null() || image(&req.planned) != image(&req.prior) {
        diags.extend(head_image_checks(clients, &req.planned).await);
    }
    let key = |v: &Value| string(v.attr("head_node").attr("key_name"));
    if let Some(name) = key(&req.planned).filter(|k| key(&req.prior).as_ref() != Some(k)) {
        match clients.ec2.key_pair_exists(&name).await {
            Ok(true) => {}
            Ok(false) => diags.error_at(
                AttributePath::root("head_node").attr("key_name"),
                format!("there is no key pair {name:?} in {}", clients.aws.region),
                "Create or import it first (aws_key_pair), or give the name of one of this account's key pairs in the region.",
            ),
            Err(e) => diags.extend(aws_diag("Cannot describe key pairs", &e)),
        }
    }
    // A running cluster takes only the upgrades Slurm supports.
    let version = |v: &Value| string(v.attr("slurm").attr("version"));
    if let (Some(from), Some(to)) = (version(&req.prior), version(&req.planned)) {
        if let Err(e) = slurm_model::check_upgrade(&from, &to) {
            diags.error_at(AttributePath::root("slurm").attr("version"), e.summary, e.detail);
        }
    }
    diags
}

/// What apply computes or launches becomes unknown: /home's file system, a new head node, the
/// login nodes, the document's version; a state volume cannot be resized.
fn plan_unknowns(req: &mut PlanRequest) {
    // The file system for /home: the given one, or the cluster's own (made at apply).
    match string(req.planned.attr("home").attr("efs_id")) {
        Some(id) => req.planned.set_attr("home_file_system_id", Value::string(id)),
        None if managed_home(&req.prior).is_none() => req.planned.set_attr("home_file_system_id", Value::Unknown),
        None => {}
    }
    if req.prior.is_null() {
        for a in [
            "login_node_ids",
            "login_node_private_ips",
            "desired_state_version",
            "head_node_network_interface_id",
            "state_volume_id",
        ] {
            req.planned.set_attr(a, Value::Unknown);
        }
        return;
    }
    // A head node terminated outside Terraform is launched again, and a changed image,
    // type or root volume launches a new one: in place, on the same address.
    let relaunch =
        req.prior.attr("head_node_instance_id").is_null() || head::needs_new_instance(&req.prior, &req.planned);
    if relaunch {
        req.planned.set_attr("head_node_instance_id", Value::Unknown);
    }
    // A cluster made before heads had a kept interface gets one (and a new address with
    // its next head).
    if req.prior.attr("head_node_network_interface_id").is_null() {
        for a in ["head_node_network_interface_id", "state_volume_id"] {
            req.planned.set_attr(a, Value::Unknown);
        }
        if relaunch {
            req.planned.set_attr("head_node_private_ip", Value::Unknown);
        }
    }
    let size = |v: &Value| v.attr("head_node").attr("state_volume_size").clone();
    if !req.prior.attr("state_volume_id").is_null() && size(&req.prior) != size(&req.planned) {
        req.diagnostics.push(
            Diagnostic::error(
                "the state volume's size is set when the cluster is created",
                format!(
                    "The volume {} keeps the cluster's state; resizing it is not supported yet. \
                     Keep state_volume_size at {}.",
                    string(req.prior.attr("state_volume_id")).unwrap_or_default(),
                    int(&size(&req.prior)).unwrap_or(head::DEFAULT_STATE_VOLUME_GIB)
                ),
            )
            .at(AttributePath::root("head_node").attr("state_volume_size")),
        );
    }
    if req.planned.attr("login_nodes") != req.prior.attr("login_nodes") {
        req.planned.set_attr("login_node_ids", Value::Unknown);
        req.planned.set_attr("login_node_private_ips", Value::Unknown);
    }
    if req.planned != req.prior {
        req.planned.set_attr("desired_state_version", Value::Unknown);
    }
}

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
        let mut diags = Diagnostics::new();
        identity_checks(c, &mut diags);
        head_checks(c.attr("head_node"), &mut diags);
        checks::head_node(c.attr("head_node"), &mut diags);
        crate::resources::checks::tags(c.attr("tags"), AttributePath::root("tags"), &mut diags);
        checks::login_nodes(c.attr("login_nodes"), &mut diags);
        checks::slurm_timers(c.attr("slurm"), &mut diags);
        checks::accounting_port(c.attr("accounting"), &mut diags);
        checks::accounting_secret(c.attr("accounting"), &mut diags);
        checks::mfa(c.attr("mfa"), &mut diags);
        checks::users(c.attr("user").elements(), &mut diags);
        checks::mount_points(c.attr("storage").elements(), &mut diags);
        duration_checks(c.attr("slurm"), &mut diags);
        accounting_checks(c.attr("accounting"), &mut diags);
        user_checks(&schema().block.with_defaults(c), &mut diags);
        checks::home(c.attr("home"), &mut diags);
        storage_checks(c.attr("storage").elements(), &mut diags);
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
        req.planned.set_attr(
            "estimated_hourly_cost",
            fixed_cost(&req.planned, &clients.price_overrides),
        );
        let munge = string(req.prior.attr("munge_key_secret_arn")).unwrap_or_default();
        plan_slurm_conf(clients, req, &munge);
        let diags = plan_reads(clients, req).await;
        req.diagnostics.extend(diags);
        plan_unknowns(req);
        let resume = |v: &Value| v.attr("slurm").attr("resume_timeout").clone();
        let changed = !req.prior.is_null() && resume(&req.planned) != resume(&req.prior);
        if changed && !req.planned.is_null() && req.config.is_wholly_known() {
            let secrets = Secrets {
                region: &clients.aws.region,
                munge_arn: &munge,
                password_arn: None,
            };
            if let Ok(m) = Cluster::of(&req.config) {
                req.diagnostics.extend(partitions_fit(clients, &m.doc(secrets)).await);
            }
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let mut state = req.planned.clone();
        let name = string(state.attr("name")).unwrap_or_default();
        let timeout = timeouts::get(&state, "create", CREATE_TIMEOUT);
        let result: Result<Diagnostics, Diagnostics> = async {
            let subnet = string(state.attr("subnet_id")).unwrap_or_default();
            let tags = cluster_tags(&state, &name);
            let vpc = clients
                .ec2
                .subnet_vpc(&subnet)
                .await
                .map_err(|e| aws_diag("Cannot find the cluster's subnet", &e))?;
            state.set_attr("vpc_id", Value::string(&vpc));
            let sgs = ensure_security_groups(clients, &name, &vpc, &state, &tags).await?;
            state.set_attr("security_group_ids", of_list(Some(&sgs)));
            let munge = clients
                .secrets
                .ensure_random_binary(&desired_state::munge_key_secret(&name), MUNGE_KEY_BYTES, &tags)
                .await
                .map_err(|e| aws_diag("Cannot create the munge key", &e))?;
            state.set_attr("munge_key_secret_arn", Value::string(&munge));
            let password_arn = store_password(clients, &name, &req.config, &tags).await?;
            head::ensure_kept(clients, &mut state, &name, &sgs, &tags).await?;
            ensure_home(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            publish(clients, &mut state, &munge, password_arn).await?;
            head::launch(&req.ctx, clients, &mut state, &name, &tags, false, timeout).await?;
            sync_login_nodes(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            head::ready(&req.ctx, clients, &state, &name, timeout).await
        }
        .await;
        match result {
            Ok(warnings) => ApplyOutcome::ok_with(state, warnings),
            Err(d) => {
                // Record what exists (tainted) so destroy removes it; nothing leaks.
                let made = !state.attr("security_group_ids").is_unknown();
                ApplyOutcome::failed(if made { scrub(state) } else { Value::Null }, d)
            }
        }
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let Some(name) = string(req.state.attr("name")) else {
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
        let head = match string(req.state.attr("head_node_instance_id")) {
            Some(id) => clients
                .ec2
                .find_instance_viewed(tag::ROLE, &id)
                .await
                .map_err(|e| aws_diag("Cannot read head node", &e))?,
            None => None,
        };
        // A cluster whose document and head node are both gone no longer exists.
        if param.is_none() && head.is_none() {
            return Ok(None);
        }
        let mut s = req.state.clone();
        match (&param, head) {
            (Some(p), Some(h)) => {
                s.set_attr("desired_state_version", Value::int(p.version));
                s.set_attr("head_node_private_ip", convert::of_string(h.private_ip));
            }
            // Half a cluster: plan a replacement by forgetting the missing half's id.
            (None, _) => s.set_attr("desired_state_version", Value::Null),
            (Some(_), None) => s.set_attr("head_node_instance_id", Value::Null),
        }
        Ok(Some(s))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(req.prior, d),
        };
        let mut state = req.planned.clone();
        let name = string(state.attr("name")).unwrap_or_default();
        let timeout = timeouts::get(&state, "update", CREATE_TIMEOUT);
        let result: Result<Diagnostics, Diagnostics> = async {
            let tags = cluster_tags(&state, &name);
            let vpc = string(req.prior.attr("vpc_id")).unwrap_or_default();
            let sgs = ensure_security_groups(clients, &name, &vpc, &state, &tags).await?;
            state.set_attr("security_group_ids", of_list(Some(&sgs)));
            let munge = string(req.prior.attr("munge_key_secret_arn")).unwrap_or_default();
            let password_arn = store_password(clients, &name, &req.config, &tags).await?;
            head::ensure_kept(clients, &mut state, &name, &sgs, &tags).await?;
            ensure_home(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            publish(clients, &mut state, &munge, password_arn).await?;
            // A new image, type or root volume: a new head in place. A head lost outside
            // Terraform: its successor. Either way on the same interface and state volume.
            let replace = head::needs_new_instance(&req.prior, &state);
            let missing =
                state.attr("head_node_instance_id").is_null() || state.attr("head_node_instance_id").is_unknown();
            if replace || missing {
                head::launch(&req.ctx, clients, &mut state, &name, &tags, replace, timeout).await?;
            }
            sync_login_nodes(&req.ctx, clients, &mut state, &name, &sgs, &tags, timeout).await?;
            head::ready(&req.ctx, clients, &state, &name, timeout).await
        }
        .await;
        match result {
            Ok(warnings) => ApplyOutcome::ok_with(state, warnings),
            Err(d) => ApplyOutcome::failed(req.prior, d),
        }
    }

    async fn delete(&self, req: DeleteRequest) -> Diagnostics {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let Some(name) = string(req.prior.attr("name")) else {
            return Diagnostics::new();
        };
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        let result = async {
            // Unpublish first: the agent stops acting on a cluster that is going away.
            clients.ssm.delete(&desired_state::cluster_param(&name)).await?;
            for shard in clients.ssm.list(&desired_state::users_path(&name)).await? {
                clients.ssm.delete(&shard.name).await?;
            }
            clients.ssm.delete(&desired_state::status_param(&name)).await?;
            clients.ssm.delete(&desired_state::boot::head_param(&name)).await?;
            let nodes = clients.ec2.instances_tagged(tag::CLUSTER, &name).await?;
            let ids: Vec<String> = nodes.into_iter().map(|i| i.id).collect();
            or_stop(
                &req.ctx,
                "terminating cluster nodes",
                clients.ec2.terminate(&ids, timeout),
            )
            .await?;
            head::delete_kept(clients, &req.prior, timeout).await?;
            if let Some(fs) = managed_home(&req.prior) {
                or_stop(
                    &req.ctx,
                    "deleting the cluster's /home",
                    clients.efs.delete(&fs, timeout),
                )
                .await?;
            }
            clients.ec2.delete_launch_template(&format!("hpc-{name}-head")).await?;
            clients.ec2.delete_launch_template(&format!("hpc-{name}-login")).await?;
            let adopted = string(req.prior.attr("security_group_id"));
            for sg in strings(req.prior.attr("security_group_ids")).unwrap_or_default() {
                if Some(&sg) != adopted.as_ref() {
                    clients.ec2.delete_security_group(&sg).await?;
                }
            }
            clients.secrets.delete(&desired_state::munge_key_secret(&name)).await?;
            clients
                .secrets
                .delete(&desired_state::db_password_secret(&name))
                .await?;
            Ok::<(), hpc_aws::AwsError>(())
        };
        match result.await {
            Ok(()) => Diagnostics::new(),
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
        let head = role_instances(clients, name, "head").await?;
        let logins = role_instances(clients, name, "login").await?;
        let mut v = import_value(&doc, param.version, &clients.default_tags);
        v.set_attr("head_node_instance_id", convert::of_string(head.first().cloned()));
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
            v.set_attr(
                "head_node_private_ip",
                convert::of_string(info.and_then(|i| i.private_ip)),
            );
        }
        v.set_attr(
            "head_node_network_interface_id",
            convert::of_string(head::kept_interface(clients, name).await?),
        );
        v.set_attr("login_node_ids", of_list(Some(&logins)));
        v.set_attr("login_node_private_ips", of_list(Some(&ips)));
        if let Ok(conf) = render(&doc) {
            v.set_attr("slurm_conf", Value::string(conf));
        }
        v.set_attr("estimated_hourly_cost", fixed_cost(&v, &clients.price_overrides));
        Ok(v)
    }
}

/// State from a published cluster document (import). Blocks left at their defaults come
/// back as absent, the way a configuration that omits them reads.
fn import_value(doc: &ClusterDoc, version: i64, default_tags: &BTreeMap<String, String>) -> Value {
    let user_tags = convert::user_tags(&doc.tags, default_tags);
    let mut model = Cluster::of_doc(doc, version, (!user_tags.is_empty()).then_some(user_tags));
    model.instance_profile_policy = Some(instance_profile_policy(
        &doc.name,
        &doc.head_node.node_role_arns,
        &external_secrets(doc),
    ));
    model.value()
}

fn cluster_tags(state: &Value, name: &str) -> Vec<(String, String)> {
    let mut t = pairs(state.attr("tags_all")).unwrap_or_default();
    t.push((tag::CLUSTER.into(), name.to_string()));
    t
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
    state: &Value,
    tags: &[(String, String)],
) -> Result<Vec<String>, Diagnostics> {
    let cluster = match string(state.attr("security_group_id")) {
        // Adopted (e.g. the network's group): used as it is, never changed or deleted here.
        Some(id) => id,
        None => create_cluster_group(clients, name, vpc, tags).await?,
    };
    let ssh: Vec<(i32, String)> = strings(state.attr("head_node").attr("allowed_ssh_cidrs"))
        .unwrap_or_default()
        .into_iter()
        .map(|c| (22, c))
        .collect();
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
    Ok(vec![cluster, ssh_sg])
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
    let accounting = config.attr("accounting");
    let secret = desired_state::db_password_secret(name);
    if string(accounting.attr("mode")).is_none_or(|m| m == "local") {
        return clients
            .secrets
            .ensure_random_password(&secret, DB_PASSWORD_CHARS, tags)
            .await
            .map(Some)
            .map_err(|e| aws_diag("Cannot create the database password", &e));
    }
    let Some(password) = accounting.attr("password").as_str() else {
        return Ok(None);
    };
    clients
        .secrets
        .put(&secret, &SecretValue::Text(password.to_string()), tags)
        .await
        .map(Some)
        .map_err(|e| aws_diag("Cannot store the database password", &e))
}

/// The EFS the provider made for the cluster's /home, per `state` (none when the user gave one).
fn managed_home(state: &Value) -> Option<String> {
    if state.attr("home").attr("efs_id").is_null() {
        string(state.attr("home_file_system_id"))
    } else {
        None
    }
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
    if let Some(id) = string(state.attr("home").attr("efs_id")) {
        state.set_attr("home_file_system_id", Value::string(id));
        return Ok(());
    }
    let made = async {
        let mut fs_tags = tags.to_vec();
        fs_tags.push(("Name".into(), format!("hpc-{name}-home")));
        let fs = clients
            .efs
            .ensure_file_system(&desired_state::home_efs_token(name), &fs_tags, timeout)
            .await?;
        let subnet = string(state.attr("subnet_id")).unwrap_or_default();
        let zones = clients.ec2.subnet_zones(std::slice::from_ref(&subnet)).await?;
        clients
            .efs
            .ensure_mount_targets(&fs, &zones, sgs.get(..1).unwrap_or_default(), timeout)
            .await?;
        Ok::<String, hpc_aws::AwsError>(fs)
    };
    let fs = or_stop(ctx, "making the cluster's /home", made)
        .await
        .map_err(|e| aws_diag("Cannot make the EFS file system for /home", &e))?;
    state.set_attr("home_file_system_id", Value::string(fs));
    Ok(())
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
    let mut doc = Cluster::of(state)
        .map_err(|e| e.into_diagnostics("The cluster's state cannot be read"))?
        .doc(secrets);
    doc.max_hourly_cost = clients.limits.max_hourly_cost_per_cluster.map(|c| format!("{c:.2}"));
    doc.max_gpus = clients.limits.max_gpus_per_cluster;
    doc.fixed_hourly_cost = match fixed_cost(state, &clients.price_overrides) {
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let tags = pairs(state.attr("tags_all")).unwrap_or_default();
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
    state.set_attr("desired_state_version", Value::int(version));
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
    state: &Value,
    name: &str,
    role: &str,
    instance_type: String,
    sgs: &[String],
    tags: &[(String, String)],
    user_data: String,
) -> LaunchTemplateSpec {
    let head = state.attr("head_node");
    let mut tags = tags.to_vec();
    tags.push((tag::ROLE.into(), role.to_string()));
    tags.push(("Name".into(), format!("{name}-{role}")));
    LaunchTemplateSpec {
        name: format!("hpc-{name}-{role}"),
        image_id: string(head.attr("ami_id")).unwrap_or_default(),
        instance_type: Some(instance_type),
        key_name: string(head.attr("key_name")),
        security_group_ids: sgs.to_vec(),
        instance_profile_arn: string(head.attr("instance_profile_arn")),
        user_data: Some(user_data),
        root_volume: Some(RootVolume {
            size_gib: int(head.attr("root_volume_size"))
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(100),
            volume_type: string(head.attr("root_volume_type")).unwrap_or_else(|| "gp3".into()),
            encrypted: boolean(head.attr("root_volume_encrypted")).unwrap_or(true),
            kms_key_id: None,
        }),
        efa_network_cards: Vec::new(),
        placement_group: None,
        capacity_reservation: None,
        tags,
    }
}

async fn role_instances(clients: &Clients, name: &str, role: &str) -> Result<Vec<String>, Diagnostics> {
    let all = clients
        .ec2
        .instances_tagged(tag::CLUSTER, name)
        .await
        .map_err(|e| aws_diag("Cannot list cluster instances", &e))?;
    let mut ids = Vec::new();
    for i in all {
        if i.state == "shutting-down" {
            continue;
        }
        if i.tag(tag::ROLE) == Some(role) {
            ids.push(i.id);
        }
    }
    ids.sort();
    Ok(ids)
}

/// Brings the login nodes to the planned count (launching or terminating the newest).
async fn sync_login_nodes(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    name: &str,
    sgs: &[String],
    tags: &[(String, String)],
    timeout: Duration,
) -> Result<(), Diagnostics> {
    let want = int(state.attr("login_nodes").attr("count")).unwrap_or(0).max(0) as usize;
    let mut ids = role_instances(clients, name, "login").await?;
    if want > 0 {
        let login_type = string(state.attr("login_nodes").attr("instance_type")).unwrap_or_else(|| "c7i.xlarge".into());
        let spec = template(
            state,
            name,
            "login",
            login_type,
            sgs,
            tags,
            desired_state::boot::user_data(Role::Login, name, &clients.aws.region, None, None),
        );
        let (lt, _) = clients
            .ec2
            .ensure_launch_template(&spec)
            .await
            .map_err(|e| aws_diag("Cannot create the login node launch template", &e))?;
        let subnet = string(state.attr("subnet_id")).unwrap_or_default();
        while ids.len() < want {
            let id = clients
                .ec2
                .run_instance(
                    &lt,
                    &subnet,
                    &format!("{name}-login-{}", uuid::Uuid::new_v4()),
                    &spec.tags,
                )
                .await
                .map_err(|e| aws_diag("Cannot launch a login node", &e))?;
            ids.push(id);
        }
        // One order for every run (role_instances lists them sorted).
        ids.sort();
    }
    if ids.len() > want {
        let extra: Vec<String> = ids.split_off(want);
        or_stop(ctx, "terminating login nodes", clients.ec2.terminate(&extra, timeout))
            .await
            .map_err(|e| aws_diag("Cannot terminate login nodes", &e))?;
    }
    let mut ips = Vec::new();
    for id in &ids {
        let info = or_stop(
            ctx,
            "waiting for login nodes",
            clients.ec2.wait_instance_running(id, timeout),
        )
        .await
        .map_err(|e| aws_diag("A login node did not start", &e))?;
        ips.push(info.private_ip.unwrap_or_default());
    }
    state.set_attr("login_node_ids", of_list(Some(&ids)));
    state.set_attr("login_node_private_ips", of_list(Some(&ips)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_well_formed() {
        schema().check().expect("hpc_cluster schema");
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
    }

    #[test]
    fn cidrs_are_checked() {
        assert_eq!(checks::parse_cidr("192.0.2.0/24"), Some((0xC000_0200, 24)));
        assert!(checks::parse_cidr("192.0.2.0").is_none());
        assert!(checks::parse_cidr("300.0.2.0/24").is_none());
    }
}
