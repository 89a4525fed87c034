//! hpc_cluster's checks of a configuration alone (no AWS): names, ids, sizes, modes, users,
//! storage, and Slurm's own rules for the cluster-wide slurm.conf.

use super::model::{AccountingConfig, ClusterConfig, HeadConfig, SlurmConfig, StorageConfig, UserConfig};
use super::{checks, model::Cluster, model::Secrets, model::Users, ACCOUNTING_MODES};
use crate::desired_state;
use crate::desired_state::rules;
use crate::desired_state::ClusterDoc;
use crate::resources::valid_name;
use tfplugin::model::Field;
use tfplugin::timeouts;
use tfplugin::AttributePath;
use tfplugin::Diagnostic;
use tfplugin::Diagnostics;
use tfplugin::Value;

/// The cluster-wide slurm.conf, or the model's objections.
pub(super) fn render(doc: &ClusterDoc) -> Result<String, Vec<slurm_model::ModelError>> {
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

pub(super) fn model_path(path: &[String]) -> AttributePath {
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

/// The cluster's name and subnet.
pub(super) fn identity_checks(c: &ClusterConfig, diags: &mut Diagnostics) {
    if let Some(name) = c.name.as_str() {
        if let Err(why) = valid_name(name, 40) {
            diags.error_at(
                AttributePath::root("name"),
                format!("cluster name {name:?} is not valid"),
                why,
            );
        }
    }
    if let Some(s) = c.subnet_id.as_str() {
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
pub(super) fn head_checks(head: &HeadConfig, diags: &mut Diagnostics) {
    if let Some(ami) = head.ami_id.as_str() {
        if !ami.starts_with("ami-") {
            diags.error_at(
                AttributePath::root("head_node").attr("ami_id"),
                format!("{ami:?} is not an AMI id"),
                "Use an id like ami-0123456789abcdef0.",
            );
        }
    }
    if let Some(size) = head.state_volume_size.known().copied() {
        if !(1..=16384).contains(&size) {
            diags.error_at(
                AttributePath::root("head_node").attr("state_volume_size"),
                format!("a state volume of {size} GiB is not possible"),
                "Give 1 to 16384 GiB (gp3's range).",
            );
        }
    }
    if head.root_volume_encrypted.known() == Some(&false) {
        diags.push(
            Diagnostic::warning(
                "head node root volume is not encrypted",
                "Encryption at rest is on by default; turning it off is rarely wanted.",
            )
            .at(AttributePath::root("head_node").attr("root_volume_encrypted")),
        );
    }
    for (i, arn) in head.node_role_arns.items().iter().enumerate() {
        if !crate::resources::checks::is_iam_arn(arn, "role") {
            diags.error_at(
                AttributePath::root("head_node").attr("node_role_arns").index(i),
                crate::resources::checks::refused_arn(arn, "an IAM role"),
                "Write the role's ARN, e.g. arn:aws:iam::111122223333:role/hpc-nodes (the role, not its instance profile).",
            );
        }
    }
    for (i, cidr) in head.allowed_ssh_cidrs.items().iter().enumerate() {
        checks::ssh_cidr(
            cidr,
            AttributePath::root("head_node").attr("allowed_ssh_cidrs").index(i),
            diags,
        );
    }
}

/// slurm's durations parse.
pub(super) fn duration_checks(s: &SlurmConfig, diags: &mut Diagnostics) {
    for (attr, value) in [
        ("scaledown_idletime", &s.scaledown_idletime),
        ("resume_timeout", &s.resume_timeout),
    ] {
        if let Some(v) = value.as_str() {
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
pub(super) fn accounting_checks(a: &AccountingConfig, diags: &mut Diagnostics) {
    if let Some(mode) = a.mode.as_str() {
        if !ACCOUNTING_MODES.contains(&mode) {
            diags.error_at(
                AttributePath::root("accounting").attr("mode"),
                format!("unknown accounting mode {mode:?}"),
                "Use local, external or none.",
            );
        }
        if mode == "external" {
            if !a.host.is_set() {
                diags.error_at(
                    AttributePath::root("accounting").attr("host"),
                    "external accounting needs host",
                    "Give the database host.",
                );
            }
            if !a.password.is_set() && !a.password_secret_arn.is_set() {
                diags.error_at(
                    AttributePath::root("accounting").attr("password_secret_arn"),
                    "external accounting needs a password",
                    "Set password_secret_arn to a Secrets Manager secret, or password (write-only: kept out of state).",
                );
            }
        } else if mode == "local" || mode == "none" {
            let external_only = [
                ("host", a.host.is_set()),
                ("password", a.password.is_set()),
                ("password_secret_arn", a.password_secret_arn.is_set()),
                ("password_version", a.password_version.is_set()),
            ];
            for (key, _) in external_only.into_iter().filter(|(_, set)| *set) {
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
    if let Some(p) = a.password.as_str() {
        if let Err(e) = slurm_model::check_storage_password(p) {
            diags.error_at(AttributePath::root("accounting").attr("password"), e.summary, e.detail);
        }
    }
}

/// Login names (valid, not a system account's) and account names, each user once.
pub(super) fn user_checks(users: &[UserConfig], diags: &mut Diagnostics) {
    for (i, u) in users.iter().enumerate() {
        let at = || AttributePath::root("user").index(i);
        if let Some(n) = u.name.as_str() {
            if let Err(e) = rules::login_name(n) {
                let detail = if rules::RESERVED_USERS.contains(&n) {
                    "The image, Slurm or munge already has this account: choose another login name."
                } else {
                    "Use lowercase letters, digits, '_' and '-', starting with a letter."
                };
                diags.error_at(at().attr("name"), e, detail);
            }
            if users[..i].iter().any(|earlier| earlier.name.as_str() == Some(n)) {
                diags.error_at(
                    at().attr("name"),
                    format!("user {n} is listed twice"),
                    "List each user once.",
                );
            }
        }
        for (j, a) in u.accounts.items().iter().enumerate() {
            if let Some(a) = a.as_str().filter(|a| !rules::slurm_name(a)) {
                diags.error_at(
                    at().attr("accounts").index(j),
                    format!("{a:?} is not a valid Slurm account name"),
                    "Use lowercase letters, digits, '_' and '-' (Slurm keeps account names in lowercase).",
                );
            }
        }
    }
}

/// Each user known whole fits one shard of the published users (read as the typed `User` it
/// is published from, with the schema's defaults).
pub(super) fn user_shard_checks(c: &Value, diags: &mut Diagnostics) {
    let users = super::model::view::<Users>(c).map(|u| u.user).unwrap_or_default();
    for (i, user) in users.items().iter().enumerate() {
        let Some(user) = user.known() else { continue };
        if let Err(e) = desired_state::user_shards(&[user.doc()]) {
            diags.error_at(
                AttributePath::root("user").index(i).attr("ssh_public_keys"),
                e,
                "Each user is published whole in one 8 KiB shard.",
            );
        }
    }
}

/// A rule of `hpc_desired_state::rules` for one value.
type Rule = fn(&str) -> Result<(), String>;

/// Each storage block names what nodes mount, as one fstab token each.
pub(super) fn storage_checks(storage: &[StorageConfig], diags: &mut Diagnostics) {
    for (i, m) in storage.iter().enumerate() {
        let named: [(&str, &Field<String>, Rule); 2] = [
            ("dns_name", &m.dns_name, rules::dns_name),
            ("mount_name", &m.mount_name, rules::lustre_mount_name),
        ];
        for (attr, value, rule) in named {
            let at = || AttributePath::root("storage").index(i).attr(attr);
            if !value.is_set() {
                diags.error_at(
                    at(),
                    format!("storage needs {attr}: nodes mount <dns_name>@tcp:/<mount_name>"),
                    format!("Set {attr} = hpc_lustre_fs.<name>.{attr} (or the file system's own value)."),
                );
            } else if let Some(Err(e)) = value.as_str().map(rule) {
                diags.error_at(
                    at(),
                    e,
                    format!("Set {attr} = hpc_lustre_fs.<name>.{attr} (the file system's own value)."),
                );
            }
        }
    }
}

/// Slurm's own rules for the cluster-wide slurm.conf (a configuration known whole).
pub(super) fn render_checks(c: &Value) -> Diagnostics {
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
