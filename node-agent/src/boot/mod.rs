//! What each role does at boot. The user data the provider renders execs `hpc-node head-init`,
//! `login-init` or `node-init` (hpc_desired_state::boot); each runs its steps in order, logs
//! them on the console, and is idempotent: a reboot or a re-run converges.
//!
//! Steps shared by the roles live here: the cluster's environment file, the munge key, users
//! and shared file systems; [`crate::host`] is the host plumbing below them.

pub mod access;
pub mod accounting;
pub mod backup;
pub mod head;
pub mod imds;
pub mod login;
pub mod mfa;
pub mod node;
pub mod report;
pub mod state;
pub mod users;

use std::path::Path;
use std::time::Duration;

use hpc_aws::imds::Identity;
use hpc_aws::Aws;
use hpc_desired_state::boot::{head_param, BootReport, Phase, Role};
use hpc_desired_state::{ClusterDoc, MountDoc};

use crate::cli::ClusterArgs;
use crate::error::{Context as _, Error, Result};
use crate::host::{self as system, log, write_file};

/// The environment file the agent's units and Slurm's programs read.
pub const CLUSTER_ENV: &str = "/etc/hpcforge/cluster.env";
const MUNGE_KEY: &str = "/etc/munge/munge.key";
/// Users and mounts follow the desired state on every node (`hpc-node sync`).
pub const SYNC_TIMER: &str = "hpc-node-sync.timer";
/// How long a booting node waits for what the provider or the head node publishes.
const PUBLISH_WAIT: Duration = Duration::from_secs(600);

/// What every role knows once its first steps are done.
pub struct Booted {
    pub cluster: String,
    pub identity: Identity,
    pub doc: ClusterDoc,
}

/// Identity, environment file and the cluster's published document.
pub async fn begin(args: &ClusterArgs, aws: &Aws, role: Role, partition: Option<&str>) -> Result<Booted> {
    // Before any user is made or any job can run on this node.
    imds::restrict(hpc_desired_state::SLURM_USER)?;
    let identity = hpc_aws::imds::identity(aws).await?;
    log(
        role.command(),
        &format!(
            "instance {} ({}) of cluster {}",
            identity.instance_id, identity.private_ip, args.cluster
        ),
    );
    let mut env = format!(
        "HPC_CLUSTER={}\nAWS_REGION={}\nHPC_ROLE={}\n",
        args.cluster,
        aws.region,
        role_name(role)
    );
    if let Some(p) = partition {
        env.push_str(&format!("HPC_PARTITION={p}\n"));
    }
    write_file(Path::new(CLUSTER_ENV), env.as_bytes(), 0o644, None)?;
    let doc = system::wait_for(
        "the cluster's published desired state",
        PUBLISH_WAIT,
        Duration::from_secs(2),
        || crate::published::cluster_doc_with_users(aws, args),
    )
    .await?;
    Ok(Booted {
        cluster: args.cluster.clone(),
        identity,
        doc,
    })
}

/// What login and compute nodes share: the first steps, munge, mounts, users, then the head
/// node's address, written as a client slurm.conf at `client_conf_path`.
pub async fn join(
    args: &ClusterArgs,
    aws: &Aws,
    role: Role,
    partition: Option<&str>,
    client_conf_path: &str,
) -> Result<(Booted, BootReport)> {
    let booted = begin(args, aws, role, partition).await?;
    slurm_release(&booted.doc, role)?;
    munge(aws, &booted.doc).await?;
    report_mounts(mounts(aws, &booted.doc, &booted.identity.region).await);
    users::users(&booted.doc.users)?;
    ssh_entry(aws, &booted.doc, role).await?;
    let head = ready_head(aws, &booted.cluster).await?;
    write_file(
        Path::new(client_conf_path),
        client_conf(&booted.doc, &head).as_bytes(),
        0o644,
        None,
    )?;
    Ok((booted, head))
}

/// The Slurm release series (`22.05`) of a `--version` line (`slurm-wlm 22.05.8`, `slurm 24.11.1`).
pub fn release_series(version_line: &str) -> Option<String> {
    hpc_desired_state::release_series(version_line.split_whitespace().last()?)
}

/// The daemons print their release without a configuration (clients such as `sinfo` first
/// look for one, and fail on a node not configured yet); every role's image has one of them.
const RELEASE_PROBES: &[&str] = &["slurmd", "slurmctld"];

/// The image's Slurm against the release the cluster's configuration is rendered for
/// (`slurm.version`): the head's daemons must be that release (they read its keys and its
/// state); a login or compute node may also be an older release its controller still talks
/// to, an image not upgraded yet (Slurm upgrades slurmdbd and slurmctld before the nodes).
pub fn slurm_release(doc: &ClusterDoc, role: Role) -> Result<()> {
    let line = image_release_line()?;
    let series =
        release_series(&line).ok_or_else(|| Error::new(format!("cannot read Slurm's release from {line:?}")))?;
    let (node, wanted) = (line.trim(), &doc.slurm_version);
    let release = slurm_model::node_release(&series, wanted);
    // Either controller reads the other's saved state: both run the cluster's release.
    let controller = matches!(role, Role::Head | Role::Backup);
    let fits = match release {
        slurm_model::NodeRelease::Same => true,
        slurm_model::NodeRelease::Older => !controller,
        slurm_model::NodeRelease::Newer | slurm_model::NodeRelease::Unfit => false,
    };
    if !fits {
        let name = &doc.name;
        return Err(Error::new(if controller {
            format!(
                "this image has Slurm {node} but cluster {name} is configured for slurm.version = \"{wanted}\": \
                 use a head node image baked with Slurm {wanted} (or, on a new cluster, set slurm {{ version = \"{series}\" }})"
            )
        } else {
            format!(
                "this image has Slurm {node} but cluster {name} is configured for slurm.version = \"{wanted}\" (a node \
                 may run an older release than its controller only within Slurm's upgrade window, and never a newer \
                 one): set slurm {{ version = \"{series}\" }} on the cluster, or use an image baked with Slurm {wanted}"
            )
        }));
    }
    let lag = match release {
        slurm_model::NodeRelease::Older => ", an older release its controller still talks to",
        _ => "",
    };
    log(
        "slurm",
        &format!("image has {node} (cluster's slurm.version {wanted}{lag})"),
    );
    Ok(())
}

/// The first daemon's `-V` line (`slurm 24.11.5`).
fn image_release_line() -> Result<String> {
    let mut failures = Vec::new();
    RELEASE_PROBES
        .iter()
        .find_map(|daemon| match system::run(daemon, &["-V"]) {
            Ok(line) => Some(line),
            Err(e) => {
                failures.push(e.to_string());
                None
            }
        })
        .ok_or_else(|| {
            Error::new(format!(
                "this image has no Slurm daemon to ask its release: {}",
                failures.join("; ")
            ))
        })
}

/// The cluster's munge key from Secrets Manager, then munged (re)started on it.
pub async fn munge(aws: &Aws, doc: &ClusterDoc) -> Result<()> {
    if doc.munge_key_secret_arn.is_empty() {
        return Err(Error::new("the cluster's desired state names no munge key secret"));
    }
    let key = aws
        .secrets()
        .value(&doc.munge_key_secret_arn)
        .await
        .context(|| "the munge key".to_string())?;
    if key.bytes().len() < 32 {
        return Err(Error::new(format!(
            "the munge key in {} is {} bytes; munge needs at least 32",
            doc.munge_key_secret_arn,
            key.bytes().len()
        )));
    }
    let changed = write_file(Path::new(MUNGE_KEY), key.bytes(), 0o400, Some("munge"))?;
    system::systemctl(&["enable", "munge.service"])?;
    system::systemctl(&[if changed { "restart" } else { "start" }, "munge.service"])?;
    log(
        "munge",
        if changed {
            "installed the cluster's key; munged restarted"
        } else {
            "key unchanged; munged running"
        },
    );
    Ok(())
}

/// Who sshd admits on a node of `role` (`access`), and with what (`mfa`).
pub async fn ssh_entry(aws: &Aws, doc: &ClusterDoc, role: Role) -> Result<()> {
    access::apply(doc, role)?;
    mfa::apply(aws, doc, access::users_log_in(doc, role)).await?;
    Ok(())
}

/// Every role's periodic pass (`hpc-node sync`, on a timer): users and mounts follow the
/// published desired state without a reboot and without touching Slurm.
pub async fn sync(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    let doc = crate::published::cluster_doc_with_users(aws, args)
        .await?
        .ok_or_else(|| Error::new(format!("cluster {} has no published desired state", args.cluster)))?;
    // Where this node runs; IMDS unreachable: assume the cluster's region.
    let region = match hpc_aws::imds::identity(aws).await {
        Ok(identity) => identity.region,
        Err(_) => doc.region.clone(),
    };
    report_mounts(mounts(aws, &doc, &region).await);
    users::users(&doc.users)?;
    let role = this_role();
    let roles = [Role::Head, Role::Backup, Role::Login, Role::Compute];
    if let Some(role) = roles.into_iter().find(|r| role.as_ref() == Some(&role_name(*r))) {
        ssh_entry(aws, &doc, role).await?;
    }
    if role.as_deref() == Some(role_name(Role::Head).as_str()) {
        // Not fatal: the rest of the pass is done, and the next mount grows it offline.
        if let Err(e) = state::grow(&doc) {
            log("sync", &e.to_string());
        }
    }
    Ok(())
}

/// A role as [`CLUSTER_ENV`] names it.
fn role_name(role: Role) -> String {
    format!("{role:?}").to_lowercase()
}

/// The role this node booted into (`HPC_ROLE` in [`CLUSTER_ENV`]), once its boot began.
fn this_role() -> Option<String> {
    let env = std::fs::read_to_string(CLUSTER_ENV).ok()?;
    env.lines()
        .find_map(|l| l.strip_prefix("HPC_ROLE="))
        .map(|r| r.trim().to_string())
}

/// The head node's latest boot report.
pub async fn head_report(aws: &Aws, cluster: &str) -> Result<Option<BootReport>> {
    match aws.ssm().get(&head_param(cluster)).await? {
        Some(p) => serde_json::from_str(&p.value).context(|| p.name.clone()).map(Some),
        None => Ok(None),
    }
}

/// Waits until the head node reports slurmctld ready; fails at once when it reports a failure.
pub async fn ready_head(aws: &Aws, cluster: &str) -> Result<BootReport> {
    system::wait_for(
        "the head node's slurmctld",
        PUBLISH_WAIT,
        Duration::from_secs(2),
        || async {
            match head_report(aws, cluster).await? {
                Some(r) if r.phase == Phase::Ready => Ok(Some(r)),
                Some(r) if r.phase == Phase::Failed => Err(Error::new(format!(
                    "the head node failed at {}: {}",
                    r.step,
                    r.error.unwrap_or_default()
                ))),
                _ => Ok(None),
            }
        },
    )
    .await
}

/// The smallest slurm.conf a Slurm client needs: which cluster and where its controller is.
/// Login nodes keep it as /etc/slurm/slurm.conf; compute nodes use it only to find their node
/// name before slurmd fetches the whole configuration from slurmctld (configless).
pub fn client_conf(doc: &ClusterDoc, head: &BootReport) -> String {
    let mut conf = format!(
        "# hpcforge: Slurm client configuration (written by hpc-node; slurmctld holds the rest)\n\
         ClusterName={}\nSlurmctldHost={}({})\n",
        doc.name, head.host, head.addr,
    );
    if let Some(addr) = backup_addr(doc) {
        conf.push_str(&format!("SlurmctldHost={}({addr})\n", hpc_desired_state::BACKUP_HOST));
    }
    conf.push_str(&format!(
        "SlurmUser={}\nAuthType=auth/munge\n",
        hpc_desired_state::SLURM_USER
    ));
    // sacct and sacctmgr ask slurmdbd, which runs beside slurmctld on the head node.
    if doc.accounting.enabled() {
        conf.push_str(&format!(
            "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost={}\n",
            head.addr
        ));
    }
    conf
}

/// The backup controller's address, when the cluster has one.
pub fn backup_addr(doc: &ClusterDoc) -> Option<&str> {
    doc.head_node.backup_controller.as_ref()?.address.as_deref()
}

/// Where a configless slurmd fetches its configuration (`--conf-server`): the head, then the
/// backup controller, which answers while the head is away.
pub fn conf_servers(doc: &ClusterDoc, head: &BootReport) -> String {
    match backup_addr(doc) {
        Some(backup) => format!("{},{backup}", head.addr),
        None => head.addr.clone(),
    }
}

/// NFS options for EFS as AWS documents them for the Linux NFS client, and no setuid file or
/// device node honoured: a file written there through a spoofed uid gives no one root.
pub(crate) const EFS_OPTIONS: &str =
    "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,nosuid,nodev";
/// Lustre client options as AWS documents them for FSx for Lustre; users write there too.
const LUSTRE_OPTIONS: &str = "relatime,flock,nosuid,nodev";
/// How long a mount may take before the boot goes on without it.
pub(crate) const MOUNT_TIMEOUT_S: &str = "90";

/// What `mount -t lustre` mounts for a `storage` block: `<dns name>@tcp:/<mount name>`.
pub fn lustre_source(m: &MountDoc) -> Result<String> {
    match (m.dns_name.as_deref(), m.mount_name.as_deref()) {
        (Some(dns), Some(name)) if !dns.is_empty() && !name.is_empty() => Ok(format!("{dns}@tcp:/{name}")),
        _ => Err(Error::new(format!(
            "storage on {}: the desired state names no dns_name and mount_name{}",
            m.mount_point,
            m.lustre_id
                .as_deref()
                .map(|id| format!(" for {id}"))
                .unwrap_or_default()
        ))),
    }
}

/// The shared file systems every node mounts: /home on EFS when the cluster keeps it there,
/// then each Lustre `storage` block at its mount point. `node_region` is where this node runs
/// (a pool may be in another region than the cluster's).
/// Each is also in /etc/fstab (`_netdev,nofail`), so a reboot mounts it without hanging. A
/// mount that fails is returned, for the caller to report; the boot goes on (the health check
/// drains a node whose mounts are missing).
pub async fn mounts(aws: &Aws, doc: &ClusterDoc, node_region: &str) -> Vec<Error> {
    let mut failed = Vec::new();
    if doc.home == "efs" {
        if let Err(e) = mount_home(aws, doc, node_region).await {
            failed.push(e);
        }
    }
    for m in &doc.mounts {
        let mounted = lustre_source(m).and_then(|source| mount(&source, &m.mount_point, "lustre", LUSTRE_OPTIONS));
        if let Err(e) = mounted {
            failed.push(e);
        }
    }
    failed
}

/// /home from the cluster's EFS file system: by its DNS name in the cluster's region; from a
/// node of another region (a pool reached through a peering connection, where that name does
/// not resolve) by a mount target's address, as AWS documents for peered VPCs.
async fn mount_home(aws: &Aws, doc: &ClusterDoc, node_region: &str) -> Result<()> {
    let id = doc
        .home_efs_id
        .as_deref()
        .ok_or_else(|| Error::new("home is on EFS but the desired state names no file system"))?;
    let source = if node_region == doc.region {
        format!("{}:/", hpc_aws::efs::dns_name(id, &doc.region))
    } else if crate::health::Probe::mounted(&crate::health::System, "/home") {
        return Ok(());
    } else {
        format!("{}:/", remote_home_address(aws, doc, id).await?)
    };
    seed_home(&source).and_then(|()| mount(&source, "/home", "nfs4", EFS_OPTIONS))
}

/// The address a node of another region mounts /home by: the mount target in the head node's
/// subnet, else any available one (EFS has one per zone of the cluster's region).
async fn remote_home_address(aws: &Aws, doc: &ClusterDoc, id: &str) -> Result<String> {
    let targets = aws
        .efs()
        .mount_targets(id)
        .await
        .map_err(|e| Error::new(format!("finding a mount target of {id} in {}: {e}", doc.region)))?;
    let available: Vec<_> = targets
        .iter()
        .filter(|t| t.state == "available" && t.ip_address.is_some())
        .collect();
    available
        .iter()
        .find(|t| t.subnet_id == doc.subnet_id)
        .or_else(|| available.first())
        .and_then(|t| t.ip_address.clone())
        .ok_or_else(|| Error::new(format!("{id} has no available mount target in {}", doc.region)))
}

/// Logs the mounts that failed on the console.
pub fn report_mounts(failed: Vec<Error>) {
    for e in failed {
        log("mounts", &format!("not mounted (the boot goes on): {e}"));
    }
}

/// Where the shared /home is mounted first, to receive what the image's /home holds.
const HOME_SEED: &str = "/run/hpc-node/home-seed";

/// Before the shared /home hides the local one, copies the local home directories the shared
/// one lacks (the image's default user, with the key pair's key cloud-init installed there), as
/// ParallelCluster does for its shared /home. Already mounted: nothing to do.
fn seed_home(source: &str) -> Result<()> {
    if crate::health::Probe::mounted(&crate::health::System, "/home") {
        return Ok(());
    }
    std::fs::create_dir_all(HOME_SEED).context(|| format!("creating {HOME_SEED}"))?;
    system::run(
        "timeout",
        &[
            MOUNT_TIMEOUT_S,
            "mount",
            "-t",
            "nfs4",
            "-o",
            EFS_OPTIONS,
            source,
            HOME_SEED,
        ],
    )
    .context(|| format!("mounting {source}"))?;
    let copied = copy_missing_homes();
    let unmounted = system::run("umount", &[HOME_SEED]).map(|_| ());
    copied.and(unmounted)
}

fn copy_missing_homes() -> Result<()> {
    for entry in std::fs::read_dir("/home")
        .context(|| "reading /home".to_string())?
        .flatten()
    {
        let target = Path::new(HOME_SEED).join(entry.file_name());
        if !target.exists() {
            let from = entry.path().display().to_string();
            system::run("cp", &["-a", &from, &target.display().to_string()])?;
            log("mounts", &format!("copied {from} to the shared /home"));
        }
    }
    Ok(())
}

/// `fstab` with `line` as the one entry for its mount point (an earlier entry for it, such as
/// one with an older agent's options, replaced).
fn fstab_with(fstab: &str, line: &str) -> String {
    let target = line.split_whitespace().nth(1);
    let mut kept: String = fstab
        .lines()
        .filter(|l| l.trim() == line || l.trim_start().starts_with('#') || l.split_whitespace().nth(1) != target)
        .map(|l| format!("{l}\n"))
        .collect();
    if !kept.lines().any(|l| l.trim() == line) {
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

fn mount(source: &str, target: &str, fstype: &str, options: &str) -> Result<()> {
    let fstab = std::fs::read_to_string("/etc/fstab").unwrap_or_default();
    let updated = fstab_with(
        &fstab,
        &format!("{source} {target} {fstype} {options},_netdev,nofail 0 0"),
    );
    if updated != fstab {
        write_file(Path::new("/etc/fstab"), updated.as_bytes(), 0o644, None)?;
    }
    if crate::health::Probe::mounted(&crate::health::System, target) {
        return Ok(());
    }
    std::fs::create_dir_all(target).context(|| format!("creating {target}"))?;
    system::run(
        "timeout",
        &[MOUNT_TIMEOUT_S, "mount", "-t", fstype, "-o", options, source, target],
    )
    .context(|| format!("mounting {source} on {target}"))?;
    log("mounts", &format!("{source} on {target}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{fstab_with, lustre_source, release_series, MountDoc};

    #[test]
    fn a_mount_point_keeps_one_fstab_entry_with_the_newest_options() {
        let old = "# /etc/fstab\nUUID=1 / ext4 defaults 0 1\nfs-1:/ /home nfs4 hard,_netdev,nofail 0 0\n";
        let line = "fs-1:/ /home nfs4 hard,nosuid,nodev,_netdev,nofail 0 0";
        let updated = fstab_with(old, line);
        assert_eq!(
            updated,
            format!("# /etc/fstab\nUUID=1 / ext4 defaults 0 1\n{line}\n"),
            "{updated}"
        );
        assert_eq!(fstab_with(&updated, line), updated, "written again unchanged");
    }

    #[test]
    fn a_lustre_storage_block_mounts_its_dns_name_and_mount_name() {
        let mut m = MountDoc {
            lustre_id: Some("fs-0123".into()),
            dns_name: Some("fs-0123.fsx.us-east-1.amazonaws.com".into()),
            mount_name: Some("abcdef".into()),
            mount_point: "/fsx".into(),
        };
        assert_eq!(
            lustre_source(&m).expect("source"),
            "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdef"
        );
        m.mount_name = None;
        let e = lustre_source(&m).expect_err("no mount name").to_string();
        assert!(e.contains("/fsx") && e.contains("fs-0123"), "{e}");
    }

    #[test]
    fn the_release_series_is_read_from_each_packagings_version_line() {
        assert_eq!(release_series("slurm-wlm 22.05.8\n").as_deref(), Some("22.05"));
        assert_eq!(release_series("slurm 24.11.1").as_deref(), Some("24.11"));
        assert_eq!(release_series("slurm 25.05"), Some("25.05".into()));
        for bad in ["", "slurm", "slurm 24", "slurm v24.11", "sinfo: command not found"] {
            assert_eq!(release_series(bad), None, "{bad:?}");
        }
    }
}
