//! hpc_cluster's plan-time checks beyond the attribute types: values the head node's launch,
//! the nodes' boot or Slurm would refuse later (see also `resources::checks`).

use std::collections::BTreeMap;

use tfplugin::model::Field;
use tfplugin::{timeouts, AttributePath, Diagnostics};

use super::model::{
    AccountingConfig, HeadConfig, HomeConfig, LoginConfig, MfaConfig, SlurmConfig, StorageConfig, UserConfig,
};
use crate::desired_state::rules;
use crate::resources::checks;

/// Root volume types a head or login node boots from (io1/io2 need provisioned IOPS, which the
/// provider does not take).
const ROOT_VOLUME_TYPES: &[&str] = &["gp3", "gp2"];

pub(super) fn head_node(head: &HeadConfig, diags: &mut Diagnostics) {
    let at = || AttributePath::root("head_node");
    super::deletion::check_state_volume(head.state_volume_on_delete.as_str(), diags);
    if let Some(id) = head.state_snapshot_id.as_str().filter(|id| !id.starts_with("snap-")) {
        diags.error_at(
            at().attr("state_snapshot_id"),
            format!("{id:?} is not an EBS snapshot id"),
            "Use an id like snap-0123456789abcdef0.",
        );
    }
    checks::root_volume_size(
        head.root_volume_size.known().copied(),
        at().attr("root_volume_size"),
        diags,
    );
    if let Some(t) = head.root_volume_type.as_str() {
        if !ROOT_VOLUME_TYPES.contains(&t) {
            diags.error_at(
                at().attr("root_volume_type"),
                format!("{t:?} is not a root volume type the head node can use"),
                "Use gp3 (the default) or gp2.",
            );
        }
    }
    checks::instance_profile_arn(
        head.instance_profile_arn.as_str(),
        at().attr("instance_profile_arn"),
        diags,
    );
}

/// SSH sources: a CIDR block, not the whole internet in any spelling, without host bits.
pub(super) fn ssh_cidr(cidr: &str, at: AttributePath, diags: &mut Diagnostics) {
    match parse_cidr(cidr) {
        None if cidr.contains(':') => diags.error_at(
            at,
            format!("{cidr:?} is an IPv6 range"),
            "The cluster's network is IPv4: list IPv4 ranges such as 192.0.2.0/24.",
        ),
        None => diags.error_at(
            at,
            format!("{cidr:?} is not a CIDR block"),
            "Use a range like 192.0.2.0/24.",
        ),
        Some((_, prefix)) if prefix < 8 => diags.error_at(
            at,
            "SSH from the whole internet is not allowed",
            format!(
                "{cidr} covers a /{prefix} of the internet. List the networks that need SSH (e.g. your VPN's \
                 range), or use SSM Session Manager."
            ),
        ),
        Some((addr, prefix)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            if addr & !mask != 0 {
                let net = std::net::Ipv4Addr::from(addr & mask);
                diags.error_at(
                    at,
                    format!("{cidr:?} has host bits set"),
                    format!("Write the network's own address: {net}/{prefix}."),
                );
            }
        }
    }
}

/// An IPv4 CIDR block as (address, prefix length).
pub(super) fn parse_cidr(s: &str) -> Option<(u32, u8)> {
    let (addr, prefix) = s.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((u32::from(addr), prefix))
}

/// Users: uids and gids of their own in the users' range (a user without a gid gets a group of
/// their uid, which may collide with another user's gid: reported on the uid), and keys that
/// stay one line of `authorized_keys` each. The rules are the nodes' own (`desired_state::rules`).
pub(super) fn users(users: &[UserConfig], diags: &mut Diagnostics) {
    let mut uids: BTreeMap<i64, String> = BTreeMap::new();
    let mut gids: BTreeMap<i64, String> = BTreeMap::new();
    for (i, u) in users.iter().enumerate() {
        let at = || AttributePath::root("user").index(i);
        let name = u.name.as_str().unwrap_or_default().to_string();
        let uid = u.uid.known().copied();
        let (gid, gid_attr) = if u.gid.is_set() {
            (u.gid.known().copied(), "gid")
        } else {
            (uid, "uid")
        };
        let range = "Ids up to 1000 belong to the image (1000 is its default user's): pick one from that range.";
        if let Some(uid) = uid {
            if let Err(e) = rules::user_id("uid", uid) {
                diags.error_at(at().attr("uid"), e, range);
            }
            if let Some(other) = uids.insert(uid, name.clone()) {
                diags.error_at(
                    at().attr("uid"),
                    format!("uid {uid} is also {other}'s"),
                    "Give every user a uid of their own.",
                );
            }
        }
        if let Some(gid) = gid {
            if let Some(Err(e)) = u.gid.is_set().then(|| rules::user_id("gid", gid)) {
                diags.error_at(at().attr("gid"), e, range);
            }
            if let Some(other) = gids.insert(gid, name.clone()) {
                diags.error_at(
                    at().attr(gid_attr),
                    format!("gid {gid} is also {other}'s"),
                    "Each user gets a group of their own (a user without gid gets one of their uid); \
                     give this user another gid or uid.",
                );
            }
        }
        for (j, key) in u.ssh_public_keys.items().iter().enumerate() {
            if let Some(Err(e)) = key.as_str().map(rules::ssh_public_key) {
                diags.error_at(
                    at().attr("ssh_public_keys").index(j),
                    e,
                    "Give each key as one line of its .pub file (type, base64, comment), e.g. \
                     trimspace(file(\"~/.ssh/id_ed25519.pub\")); list several keys as several items.",
                );
            }
        }
    }
}

/// Slurm's node timers: a node must have time to boot before it is given up, and to be reused
/// before it is powered down.
pub(super) fn slurm_timers(slurm: &SlurmConfig, diags: &mut Diagnostics) {
    let parsed = |value: &Field<String>| {
        value
            .as_str()
            .and_then(|s| timeouts::parse_duration(s).ok())
            .map(|d| d.as_secs())
    };
    checks::duration_at_least(
        parsed(&slurm.scaledown_idletime),
        60,
        AttributePath::root("slurm").attr("scaledown_idletime"),
        "a node powered down sooner is launched again for the next job, at the cost of a boot",
        diags,
    );
    checks::duration_at_least(
        parsed(&slurm.resume_timeout),
        120,
        AttributePath::root("slurm").attr("resume_timeout"),
        "an instance takes a minute or more to boot and join; Slurm marks slower nodes DOWN",
        diags,
    );
}

/// An external database password's secret is named by its full ARN (the node reads it by that
/// ARN, and the node policy grants exactly it).
pub(super) fn accounting_secret(accounting: &AccountingConfig, diags: &mut Diagnostics) {
    if let Some(arn) = accounting.password_secret_arn.as_str() {
        if checks::secret_arn_region(arn).is_none() {
            diags.error_at(
                AttributePath::root("accounting").attr("password_secret_arn"),
                checks::refused_arn(arn, "a Secrets Manager secret"),
                "Use the secret's full ARN, like arn:aws:secretsmanager:us-east-1:111122223333:secret:slurmdbd-AbCdEf \
                 (aws_secretsmanager_secret.<name>.arn), not its name.",
            );
        }
    }
}

/// /home is on EFS: the cluster's own, or the one `efs_id` names.
pub(super) fn home(home: &HomeConfig, diags: &mut Diagnostics) {
    match home.storage.as_str() {
        Some("head_node") => diags.error_at(
            AttributePath::root("home").attr("storage"),
            "/home on the head node is not available",
            "The head node exports no file system, so every node would keep its own /home. Remove the home \
             block (the provider makes an encrypted EFS for the cluster), or give efs_id.",
        ),
        Some(other) if other != "efs" => diags.error_at(
            AttributePath::root("home").attr("storage"),
            format!("unknown home storage {other:?}"),
            "Use efs, or leave storage out.",
        ),
        _ => {}
    }
    super::deletion::check_home(home.on_delete.as_str(), diags);
    if let Some(id) = home.efs_id.as_str().filter(|id| !id.starts_with("fs-")) {
        diags.error_at(
            AttributePath::root("home").attr("efs_id"),
            format!("{id:?} is not an EFS file system id"),
            "Use an id like fs-0123456789abcdef0.",
        );
    }
}

/// The second factor: a PAM module by its file name (the node finds it in the image's module
/// directories) that can say no, and arguments that stay on the one PAM line they are for.
pub(super) fn mfa(mfa: &MfaConfig, diags: &mut Diagnostics) {
    let at = |attr: &str| AttributePath::root("mfa").attr(attr);
    if let Some(module) = mfa.pam_module.as_str() {
        let stem = module.strip_prefix("pam_").and_then(|m| m.strip_suffix(".so"));
        let named =
            stem.is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        if !named {
            diags.error_at(
                at("pam_module"),
                format!("{module:?} is not a PAM module's file name"),
                "Name the module's file without a folder, e.g. pam_google_authenticator.so or pam_duo.so \
                 (hpc-image's mfa component bakes both); login nodes look for it where PAM keeps modules.",
            );
        } else if ["pam_permit.so", "pam_rootok.so", "pam_succeed_if.so"].contains(&module) {
            diags.error_at(
                at("pam_module"),
                format!("{module} is no second factor: it lets logins in without asking"),
                "Use a module that asks for a code, e.g. pam_google_authenticator.so or pam_duo.so.",
            );
        }
    }
    settings(mfa, diags);
    if let Some(args) = mfa.config.as_str() {
        if args.chars().any(|c| c.is_control()) || args.contains('#') {
            diags.error_at(
                at("config"),
                "the module's arguments must stay on one PAM line",
                "Write the arguments separated by spaces, without line breaks, tabs or '#', \
                 e.g. \"nullok\" or \"conf=/etc/security/pam_duo.conf\".",
            );
        }
    }
}

/// The module's settings: a file under /etc and the secret it comes from, both or neither.
fn settings(mfa: &MfaConfig, diags: &mut Diagnostics) {
    let at = |attr: &str| AttributePath::root("mfa").attr(attr);
    let file = mfa.settings_file.as_str();
    let secret = mfa.settings_secret_arn.as_str();
    match (file, secret) {
        (Some(_), None) => diags.error_at(
            at("settings_file"),
            "settings_file needs settings_secret_arn",
            "Give the secret whose text the file holds (the module's keys are never published in the desired state), \
             or leave settings_file out.",
        ),
        (None, Some(_)) => diags.error_at(
            at("settings_secret_arn"),
            "settings_secret_arn needs settings_file",
            "Name where the module reads its settings, e.g. settings_file = \"/etc/security/pam_duo.conf\".",
        ),
        _ => {}
    }
    if let Some(path) = file {
        let normal = path.starts_with("/etc/")
            && path.len() > "/etc/".len()
            && !path.ends_with('/')
            && path.split('/').skip(1).all(|c| !c.is_empty() && c != "." && c != "..")
            && !path.chars().any(|c| c.is_control() || c.is_whitespace());
        let owned = ["/etc/passwd", "/etc/shadow", "/etc/group", "/etc/sudoers", "/etc/fstab"].contains(&path)
            || [
                "/etc/pam.d/",
                "/etc/ssh/",
                "/etc/slurm/",
                "/etc/munge/",
                "/etc/hpcforge/",
                "/etc/sudoers.d/",
            ]
            .iter()
            .any(|dir| path.starts_with(dir));
        if !normal || owned {
            diags.error_at(
                at("settings_file"),
                format!("{path:?} cannot hold the module's settings"),
                "Use an absolute path of a file under /etc that the system, sshd, Slurm and hpcforge do not own, \
                 e.g. /etc/security/pam_duo.conf.",
            );
        }
    }
    if let Some(arn) = secret.filter(|arn| checks::secret_arn_region(arn).is_none()) {
        diags.error_at(
            at("settings_secret_arn"),
            checks::refused_arn(arn, "a Secrets Manager secret"),
            "Use the secret's full ARN (aws_secretsmanager_secret.<name>.arn), not its name.",
        );
    }
}

pub(super) fn accounting_port(accounting: &AccountingConfig, diags: &mut Diagnostics) {
    if let Some(port) = accounting.port.known().copied() {
        if !(1..=65535).contains(&port) {
            diags.error_at(
                AttributePath::root("accounting").attr("port"),
                format!("port {port} is not a TCP port"),
                "Use 1 to 65535 (MySQL and MariaDB listen on 3306).",
            );
        }
    }
}

pub(super) fn login_nodes(login: &LoginConfig, diags: &mut Diagnostics) {
    checks::not_negative(
        login.count.known().copied(),
        AttributePath::root("login_nodes").attr("count"),
        diags,
    );
}

/// Mount points of the cluster's file systems: absolute, normal, one fstab token, not a system
/// folder or one the nodes already use, each once (`desired_state::rules`).
pub(super) fn mount_points(storage: &[StorageConfig], diags: &mut Diagnostics) {
    let mut seen: Vec<String> = Vec::new();
    for (i, m) in storage.iter().enumerate() {
        let Some(p) = m.mount_point.as_str() else {
            continue;
        };
        let at = || AttributePath::root("storage").index(i).attr("mount_point");
        if let Err(e) = rules::mount_point(p) {
            diags.error_at(
                at(),
                e,
                "Use an absolute path of its own without spaces, such as /fsx or /scratch (not a system folder, /home or /tmp).",
            );
        } else if seen.iter().any(|s| s == p) {
            diags.error_at(
                at(),
                format!("{p} is used twice"),
                "Mount each file system at its own path.",
            );
        }
        seen.push(p.to_string());
    }
}

/// A backup controller needs Slurm 24.11 or later. In 22.05 the backup's main scheduling
/// thread, started while it stands by, ends at the takeover and is never started again
/// (`sched_g_init` returns early once it has run): only backfill runs after a takeover, and
/// only when something wakes it. 23.11 moved the scheduler's start and stop into the
/// controller's main path.
pub(super) fn backup_controller(head: &HeadConfig, version: Option<&str>, diags: &mut Diagnostics) {
    if head.backup_controller.known() == Some(&true) && version == Some("22.05") {
        diags.error_at(
            AttributePath::root("head_node").attr("backup_controller"),
            "a backup controller needs Slurm 24.11 or later",
            "Slurm 22.05's backup controller stops its main scheduler when it takes over, so jobs would wait \
             until the head is back. Set slurm { version = \"24.11\" } (the default) with images baked with it, \
             or leave backup_controller off.",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(check: impl Fn(&mut Diagnostics)) -> usize {
        let mut d = Diagnostics::new();
        check(&mut d);
        d.0.len()
    }

    #[test]
    fn ssh_sources_are_networks_not_the_internet() {
        let at = || AttributePath::root("allowed_ssh_cidrs");
        assert_eq!(count(|d| ssh_cidr("192.0.2.0/24", at(), d)), 0);
        for bad in [
            "0.0.0.0/0",
            "10.0.0.0/0",
            "0.0.0.0/1",
            "10.1.2.3/16",
            "::/0",
            "10.0.0/8",
            "300.0.0.0/8",
        ] {
            assert_eq!(count(|d| ssh_cidr(bad, at(), d)), 1, "{bad}");
        }
    }

    #[test]
    fn mount_points_of_their_own() {
        let m = |p: &str| StorageConfig {
            mount_point: Field::Known(p.to_string()),
            ..StorageConfig::default()
        };
        assert_eq!(count(|d| mount_points(&[m("/fsx"), m("/scratch/a")], d)), 0);
        for bad in ["/home", "/usr/local", "/run/x", "fsx", "/fsx/", "/a/../b", "/tmp"] {
            assert_eq!(count(|d| mount_points(&[m(bad)], d)), 1, "{bad}");
        }
        assert_eq!(count(|d| mount_points(&[m("/fsx"), m("/fsx")], d)), 1);
    }

    #[test]
    fn a_backup_controller_is_refused_only_with_slurm_22_05() {
        let head = |on: bool| HeadConfig {
            backup_controller: Field::Known(on),
            ..HeadConfig::default()
        };
        assert_eq!(count(|d| backup_controller(&head(true), Some("22.05"), d)), 1);
        for version in [Some("24.11"), Some("26.05"), None] {
            assert_eq!(count(|d| backup_controller(&head(true), version, d)), 0, "{version:?}");
        }
        assert_eq!(count(|d| backup_controller(&head(false), Some("22.05"), d)), 0);
    }
}
