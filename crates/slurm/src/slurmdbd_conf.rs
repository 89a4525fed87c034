//! slurmdbd.conf: the accounting daemon and its database.
//!
//! The database password is the only secret in any rendered file. [`render`](crate::render)
//! never sees it: it renders a comment in its place. Only hpc-node, on the head node,
//! calls [`slurmdbd_conf`] with the password it fetched, and writes the result with mode
//! 600 owned by `SlurmUser` (slurmdbd exits otherwise).

use crate::error::ModelError;
use crate::model::{Accounting, Cluster, Storage};
use crate::slurm_conf::{header, join};
use crate::text::unsafe_value;

/// Database name for [`Storage::Local`].
pub const LOCAL_DATABASE: &str = "slurm_acct_db";

/// Checks that a database password can be written into slurmdbd.conf.
///
/// Slurm's parser cannot carry `#` (a comment), quotes, backslashes, whitespace or line
/// breaks in `StoragePass=`; generate passwords from letters, digits and punctuation
/// such as `-_.+=`.
pub fn check_storage_password(password: &str) -> Result<(), ModelError> {
    let problem = if password.is_empty() {
        Some("the password is empty")
    } else if password.chars().any(char::is_whitespace) {
        Some("the password contains whitespace")
    } else {
        unsafe_value(password)
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ModelError::new(
            ["accounting", "storage", "password"],
            "database password cannot be written to slurmdbd.conf",
            format!(
                "{problem}. slurmdbd.conf cannot hold '#', quotes, backslashes, whitespace or line \
                 breaks in StoragePass; choose a password without them."
            ),
        )),
    }
}

/// slurmdbd.conf, or `None` when the cluster has no slurmdbd accounting.
///
/// With a password (on the head node only) the file is complete; without one it carries
/// a comment saying hpc-node fills the password in. Returns `None` as well when the
/// password cannot be written safely; [`try_slurmdbd_conf`] says why.
pub fn slurmdbd_conf(cluster: &Cluster, storage_pass: Option<&str>) -> Option<String> {
    try_slurmdbd_conf(cluster, storage_pass).ok().flatten()
}

/// Like [`slurmdbd_conf`], but reports a password that cannot be written.
pub fn try_slurmdbd_conf(cluster: &Cluster, storage_pass: Option<&str>) -> Result<Option<String>, ModelError> {
    let Accounting::Slurmdbd { host, port, storage } = &cluster.accounting else {
        return Ok(None);
    };
    if let Some(pass) = storage_pass {
        check_storage_password(pass)?;
    }
    let mut out = header("slurmdbd.conf", cluster);
    out.push_str("# Mode 600, owned by SlurmUser: it holds the database password.\n");
    let mut set = |key: &str, value: &str| {
        out.push_str(key);
        out.push('=');
        out.push_str(value);
        out.push('\n');
    };
    set("AuthType", "auth/munge");
    if let Some(socket) = &cluster.munge_socket {
        set("AuthInfo", &format!("socket={socket}"));
    }
    set("DbdHost", host);
    set("DbdPort", &port.to_string());
    set("SlurmUser", &cluster.slurm_user);
    set("LogFile", &join(&cluster.log_dir, "slurmdbd.log"));
    set("PidFile", &join(&cluster.run_dir, "slurmdbd.pid"));
    set("StorageType", "accounting_storage/mysql");
    match storage {
        Storage::Local => {
            // The MySQL client library reaches "localhost" through the server's unix socket.
            set("StorageHost", "localhost");
            set("StorageUser", &cluster.slurm_user);
            set("StorageLoc", LOCAL_DATABASE);
        }
        Storage::External {
            host,
            port,
            user,
            database,
        } => {
            set("StorageHost", host);
            set("StoragePort", &port.to_string());
            set("StorageUser", user);
            set("StorageLoc", database);
        }
    }
    match storage_pass {
        Some(pass) => set("StoragePass", pass),
        None => out.push_str("# StoragePass is filled in by hpc-node on the head node; it is never part of a plan.\n"),
    }
    Ok(Some(out))
}
