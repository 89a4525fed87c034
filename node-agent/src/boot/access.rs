//! Who may log in by SSH, by role:
//! - the controllers (head and backup), on a cluster with login nodes: administrators only
//!   (root, the image's default user with uid 1000, the cluster's users with `sudo`).
//!   Researchers work on the login nodes; the controllers hold what they must not reach
//!   (Slurm's state, the database, every secret the head reads). Without login nodes users log
//!   in on the head, which then admits them (with the second factor where set, see `mfa`).
//! - compute nodes: administrators, and a user only while a job of theirs runs there
//!   (`pam_slurm_adopt`, Slurm's own module; SchedMD's answer to the same question).
//! - login nodes: every user of the cluster (with the second factor where set, see `mfa`).
//!
//! Lines of ours in sshd's account stack (which runs whatever the authentication: a key alone
//! too), after Debian's: `pam_access` with an access file of our own, then on compute nodes
//! `pam_slurm_adopt`. PAM logs each refusal (`access denied for user`, `Access denied by
//! pam_slurm_adopt`).

use std::path::Path;

use hpc_desired_state::boot::Role;
use hpc_desired_state::{ClusterDoc, UserDoc};

use crate::error::{Context as _, Error, Result};
use crate::host::{self as system, log, write_file};

const PAM_SSHD: &str = "/etc/pam.d/sshd";
const ACCESS_FILE: &str = "/etc/security/hpcforge-sshd-access.conf";
/// Where our line goes: after Debian's account stack, which it narrows.
const AFTER: &str = "@include common-account";
/// The image's default user (`admin` on Debian's AMIs, `debian` on ours) has this uid.
const DEFAULT_USER_UID: &str = "1000";

/// What sshd's account stack admits on a node of one role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Everyone,
    Administrators,
    AdministratorsAndJobOwners,
}

impl Policy {
    fn of(doc: &ClusterDoc, role: Role) -> Policy {
        match role {
            Role::Head | Role::Backup if doc.login_count > 0 => Policy::Administrators,
            Role::Head | Role::Backup | Role::Login => Policy::Everyone,
            Role::Compute => Policy::AdministratorsAndJobOwners,
        }
    }

    /// Our lines in sshd's account stack.
    fn lines(self) -> Vec<String> {
        let access = format!("accessfile={ACCESS_FILE}");
        match self {
            Policy::Everyone => vec![],
            Policy::Administrators => vec![format!("account required pam_access.so {access}")],
            // An administrator passes pam_access and needs nothing more; anyone else passes
            // only with a job on this node. A job whose processes cannot be adopted (no
            // extern step) still admits its owner; any other failure of the module refuses.
            Policy::AdministratorsAndJobOwners => vec![
                format!("account sufficient pam_access.so {access}"),
                "account required pam_slurm_adopt.so action_no_jobs=deny action_adopt_failure=allow action_generic_failure=deny"
                    .to_string(),
            ],
        }
    }
}

/// Whether the cluster's users log in on a node of `role` (and the second factor, where set,
/// guards it).
pub fn users_log_in(doc: &ClusterDoc, role: Role) -> bool {
    Policy::of(doc, role) == Policy::Everyone
}

/// Applies the policy of `role` for `doc`'s cluster; returns whether anything changed.
pub fn apply(doc: &ClusterDoc, role: Role) -> Result<bool> {
    let policy = Policy::of(doc, role);
    let mut admins = vec!["root".to_string()];
    admins.extend(default_user());
    admins.extend(doc.users.iter().filter(|u| u.sudo).map(|u: &UserDoc| u.name.clone()));
    let mut changed = if policy == Policy::Everyone {
        remove_access_file()?
    } else {
        let access = format!(
            "# hpcforge: the administrators, who may log in to this node by SSH whatever runs on it\n\
             # (written by hpc-node)\n+:{}:ALL\n-:ALL:ALL\n",
            admins.join(" ")
        );
        write_file(Path::new(ACCESS_FILE), access.as_bytes(), 0o644, None)?
    };
    if policy == Policy::AdministratorsAndJobOwners && super::mfa::module_path("pam_slurm_adopt.so").is_none() {
        return Err(Error::new(
            "pam_slurm_adopt.so is not in this image (Debian's libpam-slurm-adopt, which hpc-image's \
             slurm component installs): users could not be kept off nodes running no job of theirs",
        ));
    }
    let pam = std::fs::read_to_string(PAM_SSHD).context(|| format!("reading {PAM_SSHD}"))?;
    let wanted = with_lines(&pam, &policy.lines())?;
    if wanted != pam {
        changed |= write_file(Path::new(PAM_SSHD), wanted.as_bytes(), 0o644, None)?;
    }
    if changed {
        let who = match policy {
            Policy::Everyone => "every user of the cluster".to_string(),
            Policy::Administrators => format!("{} only", admins.join(", ")),
            Policy::AdministratorsAndJobOwners => format!("{}, and users with a job here", admins.join(", ")),
        };
        log("access", &format!("SSH to this node: {who}"));
    }
    Ok(changed)
}

fn remove_access_file() -> Result<bool> {
    match std::fs::remove_file(ACCESS_FILE) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::new(format!("removing {ACCESS_FILE}: {e}"))),
    }
}

/// `pam` with exactly `lines` of ours (those of any policy taken out first) after Debian's
/// account stack.
fn with_lines(pam: &str, lines: &[String]) -> Result<String> {
    let ours = |l: &str| l.contains(ACCESS_FILE) || l.contains("pam_slurm_adopt.so");
    if !pam.lines().any(|l| l.trim() == AFTER) {
        return Err(Error::new(format!(
            "{PAM_SSHD} has no `{AFTER}`: the image's sshd PAM stack is not Debian's"
        )));
    }
    let mut out = String::with_capacity(pam.len());
    for l in pam.lines().filter(|l| !ours(l)) {
        out.push_str(l);
        out.push('\n');
        if l.trim() == AFTER {
            for line in lines {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// The image's default user, when it has one.
fn default_user() -> Option<String> {
    let line = system::run("getent", &["passwd", DEFAULT_USER_UID]).ok()?;
    line.split(':').next().map(str::to_string).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_SSHD: &str = "# PAM configuration for the Secure Shell service\n\
        @include common-auth\n\
        account    required     pam_nologin.so\n\
        @include common-account\n\
        @include common-session\n";

    #[test]
    fn each_policys_lines_follow_debians_account_stack_and_replace_the_others() {
        let compute = with_lines(DEBIAN_SSHD, &Policy::AdministratorsAndJobOwners.lines()).expect("debian");
        let lines: Vec<&str> = compute.lines().collect();
        let at = lines.iter().position(|l| *l == AFTER).expect("account stack");
        assert!(
            lines[at + 1].starts_with("account sufficient pam_access.so"),
            "{compute}"
        );
        assert!(
            lines[at + 2].starts_with("account required pam_slurm_adopt.so"),
            "{compute}"
        );
        assert_eq!(
            with_lines(&compute, &Policy::AdministratorsAndJobOwners.lines()).expect("again"),
            compute
        );
        let controller = with_lines(&compute, &Policy::Administrators.lines()).expect("controller");
        assert!(!controller.contains("pam_slurm_adopt") && controller.contains("account required pam_access.so"));
        assert_eq!(
            with_lines(&controller, &Policy::Everyone.lines()).expect("open"),
            DEBIAN_SSHD
        );
        assert!(with_lines("auth required pam_unix.so\n", &[]).is_err());
    }

    #[test]
    fn controllers_admit_users_only_without_login_nodes_and_compute_nodes_only_job_owners() {
        let mut doc = ClusterDoc::default();
        assert_eq!(Policy::of(&doc, Role::Head), Policy::Everyone);
        // Where users log in, the second factor guards the way in: the head without login nodes.
        assert!(users_log_in(&doc, Role::Head) && users_log_in(&doc, Role::Backup));
        assert!(!users_log_in(&doc, Role::Compute));
        doc.login_count = 1;
        assert!(!users_log_in(&doc, Role::Head) && users_log_in(&doc, Role::Login));
        assert_eq!(Policy::of(&doc, Role::Head), Policy::Administrators);
        assert_eq!(Policy::of(&doc, Role::Backup), Policy::Administrators);
        assert_eq!(Policy::of(&doc, Role::Login), Policy::Everyone);
        assert_eq!(Policy::of(&doc, Role::Compute), Policy::AdministratorsAndJobOwners);
    }
}
