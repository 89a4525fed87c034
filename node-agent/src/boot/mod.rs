//! What each role does at boot. The user data the provider renders execs `hpc-node head-init`,
//! `login-init` or `node-init` (hpc_desired_state::boot); each runs its steps in order, logs
//! them on the console, and is idempotent: a reboot or a re-run converges.
//!
//! Steps shared by the roles live here: the cluster's environment file, the munge key, users
//! and shared file systems; [`system`] is the host plumbing below them.

pub mod head;
pub mod login;
pub mod node;
pub mod system;

use std::path::Path;
use std::time::Duration;

use hpc_aws::imds::Identity;
use hpc_aws::Aws;
use hpc_desired_state::boot::{head_param, HeadReport, Phase, Role};
use hpc_desired_state::{ClusterDoc, UserDoc};

use crate::cli::ClusterArgs;
use crate::error::{Context as _, Error, Result};
use system::{log, write_file};

/// The environment file the agent's units and Slurm's programs read.
pub const CLUSTER_ENV: &str = "/etc/hpcforge/cluster.env";
const MUNGE_KEY: &str = "/etc/munge/munge.key";
const SUDOERS: &str = "/etc/sudoers.d/hpcforge-users";
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
    let identity = hpc_aws::imds::identity().await?;
    log(
        role.command(),
        &format!(
            "instance {} ({}) of cluster {}",
            identity.instance_id, identity.private_ip, args.cluster
        ),
    );
    let role_name = format!("{role:?}").to_lowercase();
    let mut env = format!(
        "HPC_CLUSTER={}\nAWS_REGION={}\nHPC_ROLE={role_name}\n",
        args.cluster, aws.region
    );
    if let Some(p) = partition {
        env.push_str(&format!("HPC_PARTITION={p}\n"));
    }
    write_file(Path::new(CLUSTER_ENV), env.as_bytes(), 0o644, None)?;
    let doc = system::wait_for(
        "the cluster's published desired state",
        PUBLISH_WAIT,
        Duration::from_secs(2),
        || crate::cmd::cluster_doc(aws, &args.cluster),
    )
    .await?;
    Ok(Booted {
        cluster: args.cluster.clone(),
        identity,
        doc,
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

/// The cluster's users: same uid and gid on every node, their SSH keys, sudo where granted.
/// Users no longer published lose their keys and sudo (their files stay).
pub fn users(users: &[UserDoc]) -> Result<()> {
    for u in users {
        if !system::exists("group", &u.name) {
            system::run("groupadd", &["--gid", &u.gid.to_string(), &u.name])?;
        }
        if !system::exists("passwd", &u.name) {
            let (uid, gid) = (u.uid.to_string(), u.gid.to_string());
            system::run(
                "useradd",
                &[
                    "--uid",
                    &uid,
                    "--gid",
                    &gid,
                    "--create-home",
                    "--shell",
                    "/bin/bash",
                    &u.name,
                ],
            )?;
        }
        let home = Path::new("/home").join(&u.name);
        let keys = u.ssh_public_keys.join("\n") + "\n";
        let ssh = home.join(".ssh");
        std::fs::create_dir_all(&ssh).context(|| format!("creating {}", ssh.display()))?;
        system::run("chown", &[&format!("{}:{}", u.uid, u.gid), &ssh.display().to_string()])?;
        system::run("chmod", &["0700", &ssh.display().to_string()])?;
        write_file(&ssh.join("authorized_keys"), keys.as_bytes(), 0o600, Some(&u.name))?;
    }
    let sudoers: String = users
        .iter()
        .filter(|u| u.sudo)
        .map(|u| format!("{} ALL=(ALL) NOPASSWD:ALL\n", u.name))
        .collect();
    write_file(
        Path::new(SUDOERS),
        format!("# hpcforge: the cluster's users with sudo (written at boot)\n{sudoers}").as_bytes(),
        0o440,
        None,
    )?;
    log("users", &format!("{} user(s) in place", users.len()));
    Ok(())
}

/// The head node's latest boot report.
pub async fn head_report(aws: &Aws, cluster: &str) -> Result<Option<HeadReport>> {
    match aws.ssm().get(&head_param(cluster)).await? {
        Some(p) => serde_json::from_str(&p.value).context(|| p.name.clone()).map(Some),
        None => Ok(None),
    }
}

/// Waits until the head node reports slurmctld ready; fails at once when it reports a failure.
pub async fn ready_head(aws: &Aws, cluster: &str) -> Result<HeadReport> {
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
pub fn client_conf(cluster: &str, head: &HeadReport) -> String {
    format!(
        "# hpcforge: Slurm client configuration (written by hpc-node; slurmctld holds the rest)\n\
         ClusterName={cluster}\nSlurmctldHost={}({})\nAuthType=auth/munge\n",
        head.host, head.addr
    )
}

/// NFS options for EFS as AWS documents them for the Linux NFS client.
const EFS_OPTIONS: &str = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport";
/// How long a mount may take before the boot goes on without it.
const MOUNT_TIMEOUT_S: &str = "90";

/// The shared file systems every node mounts: /home on EFS when the cluster keeps it there.
/// Each is also in /etc/fstab (`_netdev,nofail`), so a reboot mounts it without hanging. A
/// mount that fails is returned, for the caller to report; the boot goes on (the health check
/// drains a node whose mounts are missing).
pub fn mounts(doc: &ClusterDoc) -> Vec<Error> {
    let mut failed = Vec::new();
    if doc.home == "efs" {
        match &doc.home_efs_id {
            Some(id) => {
                let source = format!("{id}.efs.{}.amazonaws.com:/", doc.region);
                if let Err(e) = mount(&source, "/home", "nfs4", EFS_OPTIONS) {
                    failed.push(e);
                }
            }
            None => failed.push(Error::new("home is on EFS but the desired state names no file system")),
        }
    }
    failed
}

/// Logs the mounts that failed on the console.
pub fn report_mounts(failed: Vec<Error>) {
    for e in failed {
        log("mounts", &format!("not mounted (the boot goes on): {e}"));
    }
}

fn mount(source: &str, target: &str, fstype: &str, options: &str) -> Result<()> {
    let line = format!("{source} {target} {fstype} {options},_netdev,nofail 0 0");
    let fstab = std::fs::read_to_string("/etc/fstab").unwrap_or_default();
    if !fstab.lines().any(|l| l.trim() == line) {
        write_file(
            Path::new("/etc/fstab"),
            format!("{fstab}{line}\n").as_bytes(),
            0o644,
            None,
        )?;
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
