//! The rules for the values a node writes into its own files (passwd and group, each user's
//! `authorized_keys`, fstab), in one place: the provider refuses a configuration that breaks
//! one at plan, naming the attribute, and every node checks a published document against the
//! same rules before applying any of it ([`problems`]), so a document written by other hands
//! than the provider's is refused whole. A value that passes is one token, or one line, where
//! the node writes it.

use std::collections::BTreeMap;

use crate::{ClusterDoc, MountDoc, UserDoc};

/// Login names the image, its packages or the Slurm stack already own: giving one to a cluster
/// user would take over a system account (or fail its creation on every node).
pub const RESERVED_USERS: &[&str] = &[
    "root",
    "daemon",
    "bin",
    "sys",
    "sync",
    "games",
    "man",
    "lp",
    "mail",
    "news",
    "uucp",
    "proxy",
    "www-data",
    "backup",
    "list",
    "irc",
    "gnats",
    "nobody",
    "_apt",
    "messagebus",
    "sshd",
    "ntp",
    "_chrony",
    "chrony",
    "polkitd",
    "systemd-network",
    "systemd-resolve",
    "systemd-timesync",
    "admin",
    "debian",
    "ec2-user",
    "ubuntu",
    "slurm",
    "munge",
    "mysql",
    "dnsmasq",
    "statd",
];
/// The first uid and gid a cluster user may have: the image's default user (`debian`) has 1000.
pub const FIRST_UID: i64 = 1001;
pub const LAST_UID: i64 = 60000;
/// Where a file system may not be mounted: the system's own folders and what lives under them.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/etc", "/var", "/proc", "/sys", "/dev", "/boot", "/run", "/bin", "/sbin", "/lib", "/lib64",
];
/// Folders the nodes already use for something else.
pub const TAKEN_MOUNT_POINTS: &[&str] = &["/home", "/tmp", "/root", "/opt", "/srv", "/mnt", "/media"];
/// The SSH public key types OpenSSH accepts in `authorized_keys` (DSA is gone from OpenSSH 9.8).
pub const SSH_KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Lowercase letters, digits, '_' and '-': what login names and Slurm account names share.
pub fn slurm_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_' || ch == '-')
}

/// A login name of its own: up to 32 of [`slurm_name`]'s characters, starting with a letter or
/// '_', and not a system account's.
pub fn login_name(n: &str) -> Result<(), String> {
    let valid = n.len() <= 32 && n.starts_with(|ch: char| ch.is_ascii_lowercase() || ch == '_') && slurm_name(n);
    if !valid {
        return Err(format!("{n:?} is not a valid login name"));
    }
    if RESERVED_USERS.contains(&n) {
        return Err(format!("{n:?} is a system account's name"));
    }
    Ok(())
}

/// A uid or gid (`kind`) in the users' range.
pub fn user_id(kind: &str, id: i64) -> Result<(), String> {
    if (FIRST_UID..=LAST_UID).contains(&id) {
        Ok(())
    } else {
        Err(format!("{kind} {id} is outside {FIRST_UID}-{LAST_UID}"))
    }
}

/// One public key as one `authorized_keys` line: a key type OpenSSH knows, its base64 blob,
/// an optional comment; no options (`command=`, `from=`) and no line break, tab or other
/// control character. One trailing newline (as `file("id_ed25519.pub")` reads) is allowed.
pub fn ssh_public_key(key: &str) -> Result<(), String> {
    let line = key.strip_suffix('\n').unwrap_or(key);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let shown = || {
        let head: String = line.chars().take(24).collect();
        format!("{head:?}{}", if line.chars().count() > 24 { "…" } else { "" })
    };
    if line.chars().any(char::is_control) {
        return Err(format!(
            "the key {} holds a line break or another control character",
            shown()
        ));
    }
    let mut fields = line.split(' ');
    let kind = fields.next().unwrap_or_default();
    let blob = fields.next().unwrap_or_default();
    if !SSH_KEY_TYPES.contains(&kind) {
        return Err(format!(
            "{} is not an SSH public key (it must start with its type, e.g. ssh-ed25519; options are not taken)",
            shown()
        ));
    }
    let base64 = blob.len() >= 16
        && blob
            .trim_end_matches('=')
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/');
    if !base64 {
        return Err(format!("{} has no base64 key after its type", shown()));
    }
    Ok(())
}

/// A mount point: absolute, normal, one fstab token, not a system folder or one the nodes use.
pub fn mount_point(p: &str) -> Result<(), String> {
    let normal = p.starts_with('/')
        && p.len() > 1
        && !p.ends_with('/')
        && p.split('/').skip(1).all(|c| !c.is_empty() && c != "." && c != "..")
        && !p.chars().any(|c| c.is_control() || c.is_whitespace());
    let system = SYSTEM_DIRS.iter().any(|d| p == *d || p.starts_with(&format!("{d}/")));
    if !normal || system || TAKEN_MOUNT_POINTS.contains(&p) {
        return Err(format!("{p:?} cannot be a mount point"));
    }
    Ok(())
}

/// A file system's DNS name (`fs-….fsx.<region>.amazonaws.com`): DNS labels only.
pub fn dns_name(n: &str) -> Result<(), String> {
    let valid = !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if valid {
        Ok(())
    } else {
        Err(format!("{n:?} is not a DNS name"))
    }
}

/// An FSx for Lustre mount name (`abcdefgh`, or `fsx` for older scratch file systems).
pub fn lustre_mount_name(n: &str) -> Result<(), String> {
    if !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        Ok(())
    } else {
        Err(format!("{n:?} is not a Lustre mount name"))
    }
}

/// Every rule a node applies the document's users and mounts by; empty when it may be applied.
/// Each problem names the user or mount point it is about.
pub fn problems(doc: &ClusterDoc) -> Vec<String> {
    let mut found = user_problems(&doc.users);
    found.extend(mount_problems(&doc.mounts));
    found
}

fn user_problems(users: &[UserDoc]) -> Vec<String> {
    let mut found = Vec::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut uids: BTreeMap<u32, &str> = BTreeMap::new();
    let mut gids: BTreeMap<u32, &str> = BTreeMap::new();
    for u in users {
        let who = &u.name;
        if let Err(e) = login_name(who) {
            found.push(format!("user {e}"));
        }
        *names.entry(who).or_default() += 1;
        for (kind, id, seen) in [("uid", u.uid, &mut uids), ("gid", u.gid, &mut gids)] {
            if let Err(e) = user_id(kind, i64::from(id)) {
                found.push(format!("user {who}: {e}"));
            }
            if let Some(other) = seen.insert(id, who) {
                found.push(format!("user {who}: {kind} {id} is also {other}'s"));
            }
        }
        for key in &u.ssh_public_keys {
            if let Err(e) = ssh_public_key(key) {
                found.push(format!("user {who}: {e}"));
            }
        }
        for account in u.accounts.iter().filter(|a| !slurm_name(a)) {
            found.push(format!("user {who}: {account:?} is not a valid Slurm account name"));
        }
    }
    found.extend(
        names
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(name, _)| format!("user {name} is listed twice")),
    );
    found
}

fn mount_problems(mounts: &[MountDoc]) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for m in mounts {
        let at = &m.mount_point;
        if let Err(e) = mount_point(at) {
            found.push(e);
        } else if seen.contains(&at.as_str()) {
            found.push(format!("{at} is used twice"));
        }
        seen.push(at);
        if let Some(Err(e)) = m.dns_name.as_deref().map(dns_name) {
            found.push(format!("storage on {at}: {e}"));
        }
        if let Some(Err(e)) = m.mount_name.as_deref().map(lustre_mount_name) {
            found.push(format!("storage on {at}: {e}"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly alice@example.org";

    #[test]
    fn a_key_is_one_authorized_keys_line_of_a_known_type() {
        assert_eq!(ssh_public_key(KEY), Ok(()));
        assert_eq!(ssh_public_key(&format!("{KEY}\n")), Ok(()), "file()'s trailing newline");
        for bad in [
            format!("{KEY}\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAttacker x"),
            format!("command=\"/bin/sh\" {KEY}"),
            "ssh-dss AAAAB3NzaC1kc3MAAACBAP x".to_string(),
            "ssh-ed25519".to_string(),
            "ssh-ed25519 not*base64!".to_string(),
            format!("{KEY}\tcomment"),
        ] {
            assert!(ssh_public_key(&bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn mount_points_and_file_system_names_are_single_fstab_tokens() {
        assert_eq!(mount_point("/fsx"), Ok(()));
        for bad in ["/fsx data", "/fsx\n/x", "/etc", "/home", "fsx", "/a/../etc", "/fsx/"] {
            assert!(mount_point(bad).is_err(), "{bad:?} passed");
        }
        assert_eq!(dns_name("fs-0123.fsx.us-east-1.amazonaws.com"), Ok(()));
        assert!(dns_name("fs-1.fsx.amazonaws.com /etc").is_err());
        assert!(dns_name("a..b").is_err());
        assert_eq!(lustre_mount_name("abcdefgh"), Ok(()));
        assert!(lustre_mount_name("ab,cd").is_err());
    }

    #[test]
    fn a_document_is_checked_whole_with_each_problem_named() {
        let user = |name: &str, uid: u32, gid: u32| UserDoc {
            name: name.into(),
            uid,
            gid,
            ssh_public_keys: vec![KEY.into()],
            sudo: false,
            accounts: vec![],
        };
        let mut evil = user("mallory", 2003, 2003);
        evil.ssh_public_keys = vec![format!("{KEY}\nssh-rsa AAAAB3NzaC1yc2EAAAADAQAB root")];
        let users = vec![
            user("alice", 2001, 2001),
            user("bob", 2002, 2001),
            user("root", 0, 0),
            evil,
        ];
        let found = user_problems(&users);
        let has = |text: &str| found.iter().any(|p| p.contains(text));
        assert!(has("user bob: gid 2001 is also alice's"), "{found:?}");
        assert!(has("\"root\" is a system account's name"), "{found:?}");
        assert!(has("user root: uid 0 is outside 1001-60000"), "{found:?}");
        assert!(has("user mallory: the key"), "{found:?}");
        assert!(user_problems(&users[..1]).is_empty());
    }
}
