//! Accounting on the head node: slurmdbd (and, for `local` accounting, MariaDB beside it)
//! running before slurmctld, so the controller registers the cluster on its first start.
//!
//! `local`: MariaDB listens on loopback only; the database `slurm_acct_db` and its user
//! (SlurmUser) get the password the provider generated in Secrets Manager. `external`: the
//! database is the user's; slurmdbd logs in with the password their secret holds. Either way
//! slurmdbd.conf (the only file with the password) is mode 0600, owned by SlurmUser.

use std::path::Path;
use std::time::Duration;

use hpc_aws::Aws;
use hpc_desired_state::ClusterDoc;

use crate::error::{Error, Result};
use crate::host::{self as system, log};
use crate::reconcile::Layout;

const SLURMDBD_PORT: u16 = 6819;
const MARIADB_SOCKET: &str = "/run/mysqld/mysqld.sock";
/// Slurm's recommendations for its database (accounting docs): a long lock wait for rollups.
const MARIADB_CONF: &str = "/etc/mysql/mariadb.conf.d/90-hpcforge-slurm.cnf";
const MARIADB_SETTINGS: &str = "# hpcforge: MariaDB for slurmdbd (written by hpc-node head-init)\n\
[mysqld]\nbind-address = 127.0.0.1\ninnodb_lock_wait_timeout = 900\ninnodb_buffer_pool_size = 256M\n";

/// Database (for `local`), slurmdbd.conf, then slurmdbd accepting connections.
pub async fn start(aws: &Aws, doc: &ClusterDoc, layout: &Layout) -> Result<()> {
    let model = layout.model(doc, &[])?;
    let path = layout.conf_dir.join("slurmdbd.conf");
    let installed = std::fs::read_to_string(&path).ok();
    let conf = crate::reconcile::slurmdbd_conf(aws, doc, &model, installed.as_deref())
        .await?
        .ok_or_else(|| Error::new("accounting is on but the cluster renders no slurmdbd.conf"))?;
    if doc.accounting.mode == "local" {
        local_database(database_password(&conf).as_deref()).await?;
    }
    let changed = system::write_file(&path, conf.as_bytes(), 0o600, Some(&model.slurm_user))?;
    service("slurmdbd.service", changed, "slurmdbd accepting connections", || {
        system::listening("127.0.0.1", SLURMDBD_PORT)
    })
    .await?;
    log(
        "accounting",
        &format!("slurmdbd runs ({} database)", doc.accounting.mode),
    );
    Ok(())
}

/// Enables `unit`, restarts it when its configuration `changed` (else starts it), and waits up
/// to a minute until `ready` holds.
async fn service(unit: &str, changed: bool, what: &str, ready: impl Fn() -> bool) -> Result<()> {
    system::systemctl(&["enable", unit])?;
    system::systemctl(&[if changed { "restart" } else { "start" }, unit])?;
    system::wait_for(what, Duration::from_secs(60), Duration::from_millis(250), || async {
        Ok(ready().then_some(()))
    })
    .await
}

/// The password slurmdbd.conf carries (the one the secret holds), if any.
fn database_password(conf: &str) -> Option<String> {
    conf.lines()
        .find_map(|l| l.strip_prefix("StoragePass="))
        .map(str::to_string)
}

/// MariaDB on loopback with Slurm's settings, the accounting database, and SlurmUser's login
/// to it: with `password` (set again on every boot: the secret is the truth), or without one
/// by the socket SlurmUser connects through (a cluster published with no password secret).
async fn local_database(password: Option<&str>) -> Result<()> {
    let reconfigured = system::write_file(Path::new(MARIADB_CONF), MARIADB_SETTINGS.as_bytes(), 0o644, None)?;
    service("mariadb.service", reconfigured, "MariaDB's socket", || {
        Path::new(MARIADB_SOCKET).exists()
    })
    .await?;
    let user = hpc_desired_state::SLURM_USER;
    let db = slurm_model::LOCAL_DATABASE;
    // The generated password is letters and digits (slurm_model checked what slurmdbd.conf can
    // hold); it reaches MariaDB on standard input, never in an argument list.
    let identified = match password {
        Some(p) if p.chars().all(|c| c.is_ascii_alphanumeric()) => format!("IDENTIFIED BY '{p}'"),
        Some(_) => return Err(Error::new("the local database password must be letters and digits")),
        None => "IDENTIFIED VIA unix_socket".to_string(),
    };
    let sql = format!(
        "CREATE DATABASE IF NOT EXISTS {db};\n\
         CREATE USER IF NOT EXISTS '{user}'@'localhost' {identified};\n\
         ALTER USER '{user}'@'localhost' {identified};\n\
         GRANT ALL ON {db}.* TO '{user}'@'localhost';\n"
    );
    system::run_with_input("mariadb", &["--protocol=socket", "-u", "root"], sql.as_bytes())
        .map_err(|e| Error::new(format!("creating the accounting database: {e}")))?;
    log(
        "accounting",
        &format!("database {db} ready for {user} on MariaDB (loopback only)"),
    );
    Ok(())
}
