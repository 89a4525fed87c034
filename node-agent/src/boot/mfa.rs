//! A second factor for SSH on the nodes users log in to (login nodes, and the controllers of a
//! cluster without login nodes: see `access`): the cluster's `mfa` PAM module after the key.
//!
//! sshd asks for the key first, then for keyboard-interactive, whose PAM stack is only the
//! cluster's module (the Unix password stack is taken out of it: users have no passwords, and
//! password logins stay off). `nullok` in the module's arguments lets a user who has not
//! enrolled yet log in with the key alone, to enrol (`google-authenticator`); without it every
//! login needs the code. A cluster published without `mfa` gets Debian's files back.
//!
//! A module that reads settings with keys in them (pam_duo's `/etc/duo/pam_duo.conf`) gets them
//! from the secret `settings_secret_arn` names, written root-only to `settings_file`; the file
//! goes when the cluster stops naming it.
//!
//! Every pass converges: login-init at boot and `hpc-node sync` on the timer, so adding,
//! changing or removing `mfa` (or the settings' secret) reaches running login nodes within a
//! minute.

use std::path::{Path, PathBuf};

use hpc_aws::Aws;
use hpc_desired_state::ClusterDoc;

use crate::error::{Context as _, Error, Result};
use crate::host::{self as system, log, write_file};

const PAM_SSHD: &str = "/etc/pam.d/sshd";
/// The PAM stack keyboard-interactive logins run while `mfa` is on.
const PAM_MFA: &str = "/etc/pam.d/hpcforge-mfa";
/// Before Debian's and cloud-init's drop-ins: sshd keeps the first value it reads.
const SSHD_DROP_IN: &str = "/etc/ssh/sshd_config.d/10-hpcforge-mfa.conf";
const UNIX_AUTH: &str = "@include common-auth";
const MFA_AUTH: &str = "@include hpcforge-mfa";
/// The settings file this node wrote last, so that it is removed when no longer published.
const SETTINGS_RECORD: &str = "/var/lib/hpc-node/mfa-settings";
const SSHD_SETTINGS: &str = "# hpcforge: the key, then the cluster's second factor (written by hpc-node)\n\
UsePAM yes\nPasswordAuthentication no\nKbdInteractiveAuthentication yes\n\
AuthenticationMethods publickey,keyboard-interactive\n";
/// Where Debian and other distributions keep PAM modules.
const MODULE_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/security",
    "/lib/x86_64-linux-gnu/security",
    "/usr/lib/aarch64-linux-gnu/security",
    "/lib/aarch64-linux-gnu/security",
    "/usr/lib64/security",
    "/usr/lib/security",
    "/lib/security",
];

/// The cluster's second factor, as published.
struct Mfa<'a> {
    module: &'a str,
    args: &'a str,
    /// Where the module's settings go, and the secret they come from.
    settings: Option<(&'a str, &'a str)>,
}

fn published(doc: &ClusterDoc) -> Option<Mfa<'_>> {
    doc.mfa_pam_module.as_deref().map(|module| Mfa {
        module,
        args: doc.mfa_config.as_deref().unwrap_or(""),
        settings: doc
            .mfa_settings_file
            .as_deref()
            .zip(doc.mfa_settings_secret_arn.as_deref()),
    })
}

/// sshd on this node asks for what the cluster publishes where users log in (`users_log_in`):
/// the key and the module's code, or the key alone. Returns whether anything changed (sshd
/// reloaded).
pub async fn apply(aws: &Aws, doc: &ClusterDoc, users_log_in: bool) -> Result<bool> {
    let mfa = published(doc).filter(|_| users_log_in);
    let settings = match mfa.as_ref().and_then(|m| m.settings) {
        Some((file, arn)) => Some((file, settings_text(aws, arn).await?)),
        None => None,
    };
    forget_settings(settings.as_ref().map(|(file, _)| *file))?;
    if let Some((file, text)) = &settings {
        write_settings(file, text)?;
    }
    let changed = match &mfa {
        Some(mfa) => enable(mfa)?,
        None => disable()?,
    };
    if changed {
        if let Err(e) = system::run("/usr/sbin/sshd", &["-t"]) {
            // Never leave sshd a configuration it refuses: take ours out, say why.
            disable()?;
            return Err(Error::new(format!(
                "sshd refused the second factor's settings (taken out again): {e}"
            )));
        }
        system::systemctl(&["reload-or-restart", "ssh.service"])?;
        let what = mfa.map_or("the key alone".to_string(), |m| format!("the key, then {}", m.module));
        log("mfa", &format!("SSH logins need {what}"));
    }
    Ok(changed)
}

fn enable(mfa: &Mfa) -> Result<bool> {
    let Some(found) = module_path(mfa.module) else {
        return Err(Error::new(format!(
            "the cluster's mfa.pam_module {} is not in this image (looked in {}): bake it with \
             hpc-image's `mfa` component, or name a module the image has",
            mfa.module,
            MODULE_DIRS.join(", ")
        )));
    };
    let line = format!("auth required {} {}", found.display(), mfa.args);
    let stack = format!(
        "# hpcforge: the cluster's second factor for SSH (written by hpc-node; the key was the first)\n\
         {}\n# A user the module ignores (e.g. `nullok`, not enrolled yet) is let in by the key alone.\n\
         auth required pam_permit.so\n",
        line.trim_end()
    );
    let mut changed = write_file(Path::new(PAM_MFA), stack.as_bytes(), 0o644, None)?;
    changed |= swap_include(UNIX_AUTH, MFA_AUTH)?;
    changed |= write_file(Path::new(SSHD_DROP_IN), SSHD_SETTINGS.as_bytes(), 0o644, None)?;
    Ok(changed)
}

/// The module's settings: the secret's text.
async fn settings_text(aws: &Aws, arn: &str) -> Result<String> {
    let value = aws
        .secrets()
        .value(arn)
        .await
        .map_err(|e| Error::new(format!("the second factor's settings (mfa.settings_secret_arn): {e}")))?;
    String::from_utf8(value.bytes().to_vec())
        .map_err(|_| Error::new(format!("the second factor's settings in {arn} are not text")))
}

/// The settings, root-only, where the module reads them (write_file makes a missing folder).
fn write_settings(file: &str, text: &str) -> Result<()> {
    if write_file(Path::new(file), text.as_bytes(), 0o600, None)? {
        log("mfa", &format!("the module's settings are in {file}"));
    }
    write_file(Path::new(SETTINGS_RECORD), format!("{file}\n").as_bytes(), 0o600, None)?;
    Ok(())
}

/// Removes the settings file written for an earlier publication unless it is `keep`.
fn forget_settings(keep: Option<&str>) -> Result<()> {
    let Ok(record) = std::fs::read_to_string(SETTINGS_RECORD) else {
        return Ok(());
    };
    let written = record.trim();
    if written.is_empty() || Some(written) == keep {
        return Ok(());
    }
    if Path::new(written).exists() {
        std::fs::remove_file(written).context(|| format!("removing {written}"))?;
        log("mfa", &format!("removed the module's settings from {written}"));
    }
    std::fs::remove_file(SETTINGS_RECORD).context(|| format!("removing {SETTINGS_RECORD}"))
}

fn disable() -> Result<bool> {
    let mut changed = swap_include(MFA_AUTH, UNIX_AUTH)?;
    for path in [SSHD_DROP_IN, PAM_MFA] {
        if Path::new(path).exists() {
            std::fs::remove_file(path).context(|| format!("removing {path}"))?;
            changed = true;
        }
    }
    Ok(changed)
}

/// sshd's PAM file with the line `from` replaced by `to` (already `to`: unchanged).
fn swap_include(from: &str, to: &str) -> Result<bool> {
    let text = std::fs::read_to_string(PAM_SSHD).context(|| format!("reading {PAM_SSHD}"))?;
    let (swapped, found) = replace_line(&text, from, to);
    if !found {
        if text.lines().any(|l| l.trim() == to) {
            return Ok(false);
        }
        return Err(Error::new(format!(
            "{PAM_SSHD} has neither `{from}` nor `{to}`: the image's sshd PAM stack is not Debian's"
        )));
    }
    write_file(Path::new(PAM_SSHD), swapped.as_bytes(), 0o644, None)
}

/// `text` with each line that is exactly `from` (ignoring surrounding blanks) made `to`.
fn replace_line(text: &str, from: &str, to: &str) -> (String, bool) {
    let mut found = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.trim() == from {
            found = true;
            out.push_str(to);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    (out, found)
}

/// Where PAM keeps `module` on this image, if it has it.
pub(super) fn module_path(module: &str) -> Option<PathBuf> {
    MODULE_DIRS
        .iter()
        .map(|d| Path::new(d).join(module))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "# PAM configuration for the Secure Shell service\n\n\
        # Standard Un*x authentication.\n@include common-auth\n\naccount    required     pam_nologin.so\n\
        @include common-account\n";

    #[test]
    fn the_unix_stack_is_swapped_for_the_second_factor_and_back() {
        let (on, found) = replace_line(DEBIAN, UNIX_AUTH, MFA_AUTH);
        assert!(found);
        assert!(on.contains("\n@include hpcforge-mfa\n"), "{on}");
        assert!(!on.contains("common-auth"), "{on}");
        assert!(on.contains("@include common-account"), "{on}");
        let (off, found) = replace_line(&on, MFA_AUTH, UNIX_AUTH);
        assert!(found);
        assert_eq!(off, DEBIAN);
    }

    #[test]
    fn sshd_asks_for_the_key_then_the_code_and_never_a_password() {
        assert!(SSHD_SETTINGS.contains("AuthenticationMethods publickey,keyboard-interactive\n"));
        assert!(SSHD_SETTINGS.contains("PasswordAuthentication no\n"));
    }
}
