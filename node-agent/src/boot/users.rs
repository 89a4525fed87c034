//! The cluster's users on this node: the same uid and gid on every node, a home on the shared
//! /home, their SSH keys, sudo where granted.
//!
//! A home belongs to its user, who may plant links in it: root changes it only through
//! [`crate::userdir`] (nothing followed, files replaced rather than written through), and a
//! broken home (a link or a file at `~/.ssh`) is logged and skips that user only.

use std::path::{Path, PathBuf};

use hpc_desired_state::UserDoc;

use crate::error::{Context as _, Error, Result};
use crate::host::{self as system, log, write_file};
use crate::userdir::{Owner, UserDir};

const SUDOERS: &str = "/etc/sudoers.d/hpcforge-users";
/// The users hpc-node made, so that one removed from the desired state is found again.
const MANAGED_USERS: &str = "/var/lib/hpc-node/users";

/// The cluster's users. Users no longer published are expired and lose their keys and sudo
/// (their files stay). Returns whether anything changed.
pub fn users(users: &[UserDoc]) -> Result<bool> {
    let before = std::fs::read_to_string(MANAGED_USERS).unwrap_or_default();
    let known: Vec<&str> = before.lines().collect();
    let mut changed = false;
    for u in users {
        match user(u, known.contains(&u.name.as_str())) {
            Ok(made) => changed |= made,
            Err(e) => log(
                "users",
                &format!("{}: {e} (this user only: the others are in place)", u.name),
            ),
        }
    }
    let sudoers: String = users
        .iter()
        .filter(|u| u.sudo)
        .map(|u| format!("{} ALL=(ALL) NOPASSWD:ALL\n", u.name))
        .collect();
    changed |= write_file(
        Path::new(SUDOERS),
        format!("# hpcforge: the cluster's users with sudo (written by hpc-node)\n{sudoers}").as_bytes(),
        0o440,
        None,
    )?;
    let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
    for gone in known.iter().filter(|n| !n.is_empty() && !names.contains(n)) {
        retire(gone)?;
        changed = true;
    }
    let record: String = names.iter().map(|n| format!("{n}\n")).collect();
    write_file(Path::new(MANAGED_USERS), record.as_bytes(), 0o600, None)?;
    if changed {
        log("users", &format!("{} user(s) in place", users.len()));
    }
    Ok(changed)
}

/// One user: group, account, home and authorized keys. `known`: made by an earlier pass.
fn user(u: &UserDoc, known: bool) -> Result<bool> {
    let mut changed = account(u, known)?;
    let owner = Owner { uid: u.uid, gid: u.gid };
    changed |= make_home(u, owner)?;
    let ssh = UserDir::open(&home_of(&u.name))?.ensure_subdir(".ssh", 0o700, owner)?;
    let keys = u.ssh_public_keys.join("\n") + "\n";
    changed |= ssh.write("authorized_keys", keys.as_bytes(), 0o600, owner)?;
    Ok(changed)
}

/// The user's group and account; returns whether either was made or let in again.
fn account(u: &UserDoc, known: bool) -> Result<bool> {
    let mut changed = false;
    if !system::exists("group", &u.name) {
        system::run("groupadd", &["--gid", &u.gid.to_string(), &u.name])?;
        changed = true;
    }
    if system::exists("passwd", &u.name) {
        if !known {
            // A user removed once and published again (or one the image had): may log in.
            system::run("usermod", &["--expiredate", "", &u.name])?;
            changed = true;
        }
        return Ok(changed);
    }
    let (uid, gid) = (u.uid.to_string(), u.gid.to_string());
    let home = home_of(&u.name);
    let home = home.to_string_lossy();
    let args = [
        "--uid",
        &uid,
        "--gid",
        &gid,
        "--no-create-home",
        "--home-dir",
        &home,
        "--shell",
        "/bin/bash",
        &u.name,
    ];
    system::run("useradd", &args)?;
    Ok(true)
}

/// A user no longer published: expired (PAM's account check refuses any login, by key or
/// otherwise) and their authorized keys removed, without following a link in their home.
fn retire(gone: &str) -> Result<()> {
    if system::exists("passwd", gone) {
        system::run("usermod", &["--expiredate", "1", gone])?;
    }
    let home = home_of(gone);
    let keys = if std::fs::symlink_metadata(&home).is_err() {
        "no home".to_string()
    } else {
        match UserDir::open(&home).and_then(|h| h.subdir(".ssh")) {
            Ok(Some(ssh)) => match ssh.remove("authorized_keys") {
                Ok(true) => "keys removed".to_string(),
                Ok(false) => "no keys".to_string(),
                Err(e) => format!("keys not removed: {e}"),
            },
            Ok(None) => "no keys".to_string(),
            Err(e) => format!("keys not removed: {e}"),
        }
    };
    log(
        "users",
        &format!("{gone} is no longer a user of the cluster: expired; {keys}"),
    );
    Ok(())
}

fn home_of(name: &str) -> PathBuf {
    Path::new("/home").join(name)
}

/// The user's home on the shared /home, made (mode 0700, the skeleton's files, owned by the
/// user) by the first node that gets there: nodes booting together race for it, and the others
/// find it made. Root's until its files are in, so nothing can be planted in it meanwhile.
/// Returns whether this node made it.
fn make_home(u: &UserDoc, owner: Owner) -> Result<bool> {
    let path = home_of(&u.name);
    match std::fs::create_dir(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(Error::new(format!("creating {}: {e}", path.display()))),
    }
    let home = UserDir::open(&path)?;
    home.set(0o700, Owner { uid: 0, gid: 0 })?;
    let skeleton = std::fs::read_dir("/etc/skel").into_iter().flatten().flatten();
    for entry in skeleton.filter(|e| e.file_type().is_ok_and(|t| t.is_file())) {
        use std::os::unix::fs::PermissionsExt as _;
        let from = entry.path();
        let contents = std::fs::read(&from).context(|| format!("reading {}", from.display()))?;
        let mode = entry.metadata().map_or(0o644, |m| m.permissions().mode() & 0o777);
        home.write(&entry.file_name().to_string_lossy(), &contents, mode, owner)?;
    }
    home.set(0o700, owner)?;
    Ok(true)
}
