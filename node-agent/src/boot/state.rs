//! The head node's state volume: what must outlive any one head node of the cluster.
//!
//! The provider makes one encrypted EBS volume per cluster and attaches it to each head node
//! it launches (the old head is gone first: a volume is attached to one instance at a time, so
//! two controllers never share the state). At boot the head waits for the disk, formats it the
//! first time, mounts it, and binds its directories over the ones the daemons use: slurmctld's
//! StateSaveLocation (queued and running jobs), MariaDB's data (local accounting) and the
//! agent's own state. The first head copies what its image put there; every later head finds
//! the cluster's state instead. At every later boot a unit of its own (`hpcforge-state.service`,
//! `hpc-node state-mount`) does the same before the daemons start, and they require it: a head
//! whose volume does not show up does not start them on empty directories of its root disk.
//! (An fstab entry would wait for udev's device unit, and with `nofail` let the binds go ahead
//! without the volume.) Room the provider adds to the volume (ModifyVolume) is taken by the
//! head's periodic sync, online, and before each mount.
//!
//! With a backup controller (`head_node.backup_controller`) both controllers must see one
//! slurmctld state: slurmctld's StateSaveLocation and the agent's records (node map, pool
//! cool-downs) are on the cluster's controller-state EFS file system instead, mounted by both;
//! MariaDB stays on the head's volume (InnoDB wants a block device, and slurmdbd runs on the
//! head only).

use std::path::Path;
use std::time::Duration;

use hpc_desired_state::boot::Role;
use hpc_desired_state::{ebs_by_id, ClusterDoc, STATE_DEVICE};

use crate::cli::ClusterArgs;
use crate::error::{Error, Result};
use crate::host::{self as system, log};

/// Where the state volume is mounted.
pub const STATE_MOUNT: &str = "/var/lib/hpcforge-state";
/// Where the controllers' shared state (EFS) is mounted, with a backup controller.
pub const SHARED_MOUNT: &str = "/var/lib/hpcforge-controller";
/// How long a controller waits for the shared state's mount target to answer.
const SHARED_WAIT: Duration = Duration::from_secs(600);
const FSTAB: &str = "/etc/fstab";
const LABEL: &str = "hpc-state";
/// How long the head waits for the provider's attachment to show up as a disk.
const DEVICE_WAIT: Duration = Duration::from_secs(600);

/// A directory kept on the volume: where the daemon reads it, the volume's subdirectory, its
/// mode and owner (a user the image may lack: then it is not kept, e.g. MariaDB without
/// local accounting).
struct Kept {
    path: &'static str,
    on_volume: &'static str,
    mode: u32,
    owner: &'static str,
    /// The units that write it: they start after its mount and stop before it goes (else at
    /// shutdown the bind is undone while slurmctld saves its state, which then lands on the
    /// dying root disk).
    units: &'static [&'static str],
    /// Both controllers use it: on the shared EFS when the cluster has a backup controller.
    shared: bool,
}

const AGENT_UNITS: &[&str] = &[
    "slurmctld.service",
    "hpc-node-reconcile.service",
    "hpc-node-events.service",
    "hpc-node-sweep.service",
    "hpc-node-evict.service",
    "hpc-node-sync.service",
];

const KEPT: &[Kept] = &[
    Kept {
        path: "/var/spool/slurmctld",
        on_volume: "slurmctld",
        mode: 0o700,
        owner: "slurm",
        units: &["slurmctld.service"],
        shared: true,
    },
    Kept {
        path: "/var/lib/mysql",
        on_volume: "mysql",
        mode: 0o755,
        owner: "mysql",
        units: &["mariadb.service"],
        shared: false,
    },
    Kept {
        path: "/var/lib/hpc-node",
        on_volume: "hpc-node",
        mode: 0o700,
        owner: "slurm",
        units: AGENT_UNITS,
        shared: true,
    },
];
/// The drop-in that ties a unit to the state volume's mounts.
const DROP_IN: &str = "hpcforge-state.conf";

/// The unit that mounts the state volume at each boot, before the units that keep state on it.
const UNIT: &str = "hpcforge-state.service";

/// Where a controller's state lives: the head's volume (the backup has none) and the EFS both
/// controllers share (none without a backup controller).
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    pub volume: Option<&'a str>,
    pub shared: Option<&'a str>,
    pub region: &'a str,
}

impl<'a> Places<'a> {
    /// This role's places per the published document.
    pub fn of(doc: &'a ClusterDoc, role: Role) -> Self {
        Places {
            volume: doc.head_node.state_volume_id.as_deref().filter(|_| role == Role::Head),
            shared: shared_efs(doc),
            region: &doc.region,
        }
    }

    /// Where `kept` lives, if it is kept here.
    fn of_kept(&self, kept: &Kept) -> Option<&'static str> {
        match (kept.shared && self.shared.is_some(), self.volume) {
            (true, _) => Some(SHARED_MOUNT),
            (false, Some(_)) => Some(STATE_MOUNT),
            (false, None) => None,
        }
    }
}

/// The controllers' shared state file system, when the cluster has a backup controller.
pub fn shared_efs(doc: &ClusterDoc) -> Option<&str> {
    doc.head_node.backup_controller.as_ref()?.state_efs_id.as_deref()
}

/// Mounts the cluster's state (volume, shared EFS) and binds its directories, and makes every
/// later boot do the same first; a cluster published without either (an older provider) keeps
/// its state on the root disk, as before.
pub async fn mount(doc: &ClusterDoc, args: &ClusterArgs, role: Role) -> Result<()> {
    let places = Places::of(doc, role);
    if places.volume.is_none() && places.shared.is_none() {
        log(
            "state",
            "no state volume published: the head keeps its state on its root disk",
        );
        return Ok(());
    }
    mount_places(places).await?;
    at_every_boot(places, args)
}

/// Mounts the volume and the shared EFS (what is already mounted stays) and binds each kept
/// directory from where it lives.
pub async fn mount_places(places: Places<'_>) -> Result<()> {
    if let Some(volume) = places.volume {
        mount_volume(volume).await?;
    }
    if let Some(fs) = places.shared {
        mount_shared(fs, places.region).await?;
    }
    for kept in KEPT {
        if let Some(from) = places.of_kept(kept) {
            if system::account(kept.owner).is_ok() {
                bind(kept, from)?;
            }
        }
    }
    Ok(())
}

/// Mounts the controllers' shared EFS, waiting for its mount target (made with the cluster,
/// it may still be coming up).
async fn mount_shared(fs: &str, region: &str) -> Result<()> {
    if mounted_at(SHARED_MOUNT) {
        return Ok(());
    }
    system::directory(SHARED_MOUNT, 0o755, "root")?;
    let source = format!("{}:/", hpc_aws::efs::dns_name(fs, region));
    system::wait_for(
        &format!("the controllers' shared state {source}"),
        SHARED_WAIT,
        Duration::from_secs(5),
        || async {
            let tried = system::run(
                "timeout",
                &[
                    super::MOUNT_TIMEOUT_S,
                    "mount",
                    "-t",
                    "nfs4",
                    "-o",
                    super::EFS_OPTIONS,
                    &source,
                    SHARED_MOUNT,
                ],
            );
            match tried {
                Ok(_) => Ok(Some(())),
                Err(e) => {
                    log("state", &format!("mounting {source}: {e}; trying again"));
                    Ok(None)
                }
            }
        },
    )
    .await?;
    log(
        "state",
        &format!("the controllers' shared state is {source} at {SHARED_MOUNT}"),
    );
    Ok(())
}

/// Waits for the volume's disk, formats it the first time (grows it into added room) and
/// mounts it.
async fn mount_volume(volume: &str) -> Result<()> {
    let device = system::wait_for(
        &format!("the state volume {volume} as a disk"),
        DEVICE_WAIT,
        Duration::from_millis(500),
        || async { Ok(device_of(volume)) },
    )
    .await?;
    if !mounted_at(STATE_MOUNT) {
        if filesystem(&device)?.is_none() {
            log("state", &format!("{volume} ({device}) is blank: formatting it"));
            system::run("mkfs.ext4", &["-q", "-L", LABEL, &device])?;
        } else {
            grow_unmounted(&device)?;
        }
        system::directory(STATE_MOUNT, 0o755, "root")?;
        system::run("mount", &[&device, STATE_MOUNT])?;
    }
    log(
        "state",
        &format!("the cluster's state is on {volume} ({device}) at {STATE_MOUNT}"),
    );
    Ok(())
}

/// The boot unit, and each kept directory's units made to require it (and to stop before the
/// binds go at shutdown).
fn at_every_boot(places: Places, args: &ClusterArgs) -> Result<()> {
    let region = args
        .region
        .as_deref()
        .map(|r| format!(" --region {r}"))
        .unwrap_or_default();
    let mut what = Vec::new();
    let mut options = String::new();
    if let Some(volume) = places.volume {
        what.push(format!("state volume {volume}"));
        options.push_str(&format!(" --volume {volume}"));
    }
    if let Some(fs) = places.shared {
        what.push(format!("shared controller state {fs}"));
        options.push_str(&format!(" --controller-efs {fs}"));
    }
    let what = what.join(", ");
    let unit = format!(
        "# hpcforge: the cluster's state, before the daemons that keep state on it (hpc-node head-init, backup-init)\n\
         [Unit]\nDescription=hpcforge {what}\n\n\
         [Service]\nType=oneshot\nRemainAfterExit=yes\n\
         ExecStart={agent} state-mount{options} --cluster {cluster}{region}\n\
         StandardOutput=journal+console\nStandardError=journal+console\n\n\
         [Install]\nWantedBy=multi-user.target\n",
        agent = hpc_desired_state::boot::AGENT,
        cluster = args.cluster,
    );
    system::write_file(
        Path::new(&format!("/etc/systemd/system/{UNIT}")),
        unit.as_bytes(),
        0o644,
        None,
    )?;
    let mut needs: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for kept in KEPT
        .iter()
        .filter(|k| places.of_kept(k).is_some() && system::account(k.owner).is_ok())
    {
        for unit in kept.units {
            needs.entry(unit).or_default().push(kept.path);
        }
    }
    for (unit, paths) in &needs {
        let text = format!(
            "# hpcforge: this unit's state is on the cluster's state volume (written by hpc-node head-init)\n\
             [Unit]\nRequires={UNIT}\nAfter={UNIT}\nRequiresMountsFor={}\n",
            paths.join(" ")
        );
        let path = format!("/etc/systemd/system/{unit}.d/{DROP_IN}");
        system::write_file(Path::new(&path), text.as_bytes(), 0o644, None)?;
    }
    drop_fstab_entries()?;
    system::systemctl(&["daemon-reload"])?;
    system::systemctl(&["enable", UNIT])
}

/// Grows the mounted state file system into room the provider added to its volume (ext4 grows
/// online; the kernel asks for CAP_SYS_RESOURCE); nothing when there is none or no volume is
/// mounted.
pub fn grow(doc: &ClusterDoc) -> Result<()> {
    let Some(device) = doc.head_node.state_volume_id.as_deref().and_then(device_of) else {
        return Ok(());
    };
    if !mounted_at(STATE_MOUNT) {
        return Ok(());
    }
    let Some((filesystem, disk)) = room(&device)? else {
        return Ok(());
    };
    system::run("resize2fs", &[&device]).map_err(|e| {
        Error::new(format!(
            "growing the mounted state file system (the next head grows it at mount): {e}"
        ))
    })?;
    log(
        "state",
        &format!("grew the state file system on {device} online from {filesystem} to {disk} bytes"),
    );
    Ok(())
}

/// Before the mount: room added while no head ran (or that the last head could not take
/// online) is taken offline, after the check resize2fs asks for.
fn grow_unmounted(device: &str) -> Result<()> {
    let Some((filesystem, disk)) = room(device)? else {
        return Ok(());
    };
    // e2fsck -p: 0 clean, 1 errors corrected; more is a file system to look at first.
    let checked = std::process::Command::new("e2fsck")
        .args(["-f", "-p", device])
        .output()
        .map_err(|e| Error::new(format!("running e2fsck: {e}")))?;
    if !matches!(checked.status.code(), Some(0 | 1)) {
        return Err(Error::new(format!(
            "e2fsck -f -p {device} before growing it ({}): {}",
            checked.status,
            String::from_utf8_lossy(&checked.stdout).trim()
        )));
    }
    system::run("resize2fs", &[device])?;
    log(
        "state",
        &format!("grew the state file system on {device} from {filesystem} to {disk} bytes"),
    );
    Ok(())
}

/// The file system's and the disk's sizes when the disk has room the file system does not use.
fn room(device: &str) -> Result<Option<(u64, u64)>> {
    let disk: u64 = system::run("blockdev", &["--getsize64", device])?
        .trim()
        .parse()
        .map_err(|e| Error::new(format!("blockdev --getsize64 {device}: {e}")))?;
    let superblock = system::run("dumpe2fs", &["-h", device])?;
    let Some(filesystem) = ext4_bytes(&superblock) else {
        return Err(Error::new(format!("dumpe2fs -h {device}: no block count and size")));
    };
    Ok(needs_growing(disk, filesystem).then_some((filesystem, disk)))
}

/// An ext4 file system's size from `dumpe2fs -h`: its block count times its block size.
fn ext4_bytes(superblock: &str) -> Option<u64> {
    let field = |name: &str| {
        superblock
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(field("Block count")? * field("Block size")?)
}

/// Whether the disk has room the file system does not use; resize2fs rounds to whole block
/// groups' worth of metadata, so less than a MiB is no growth.
fn needs_growing(disk: u64, filesystem: u64) -> bool {
    disk > filesystem + (1 << 20)
}

/// The disk the volume is: udev's link on Nitro, else the attachment's own name on Xen.
fn device_of(volume: &str) -> Option<String> {
    let xen = STATE_DEVICE.replace("/dev/sd", "/dev/xvd");
    [ebs_by_id(volume), xen, STATE_DEVICE.to_string()]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// The file system type on `device`, or None for a blank disk.
fn filesystem(device: &str) -> Result<Option<String>> {
    let out = std::process::Command::new("blkid")
        .args(["-o", "value", "-s", "TYPE", device])
        .output()
        .map_err(|e| Error::new(format!("running blkid: {e}")))?;
    match out.status.code() {
        Some(0) => Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_string())),
        // blkid: 2 = nothing found.
        Some(2) => Ok(None),
        _ => Err(Error::new(format!(
            "blkid {device}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

fn mounted_at(path: &str) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .map(|m| m.lines().any(|l| l.split_whitespace().nth(1) == Some(path)))
        .unwrap_or(false)
}

/// The copy of `kept` under `mount` (the volume's or the shared one) bound over its path: made
/// from what the image has there the first time, owned by the image's user each time (a new
/// image may number it differently).
fn bind(kept: &Kept, mount: &str) -> Result<()> {
    if mounted_at(kept.path) {
        return Ok(());
    }
    let on_volume = format!("{mount}/{}", kept.on_volume);
    if !Path::new(&on_volume).exists() {
        let staging = format!("{on_volume}.new");
        let _ = std::fs::remove_dir_all(&staging);
        system::directory(&staging, kept.mode, kept.owner)?;
        if Path::new(kept.path).is_dir() {
            system::run("cp", &["-a", "--", &format!("{}/.", kept.path), &staging])?;
        }
        // Complete or absent: a head that dies mid-copy starts the copy again.
        std::fs::rename(&staging, &on_volume).map_err(|e| Error::new(format!("renaming {staging}: {e}")))?;
        log("state", &format!("{} moved to {mount}", kept.path));
    }
    let (uid, gid) = system::account(kept.owner)?;
    system::run("chown", &["-R", &format!("{uid}:{gid}"), &on_volume])?;
    system::directory(kept.path, kept.mode, kept.owner)?;
    system::run("mount", &["--bind", &on_volume, kept.path])?;
    Ok(())
}

/// fstab without the state mounts an earlier head-init wrote there (at boot they waited for
/// udev and, with `nofail`, let the binds go ahead without the volume).
fn drop_fstab_entries() -> Result<()> {
    let current = std::fs::read_to_string(FSTAB).unwrap_or_default();
    let kept: Vec<&str> = current.lines().filter(|l| !ours_in_fstab(l)).collect();
    if kept.len() == current.lines().count() {
        return Ok(());
    }
    let text: String = kept.iter().map(|l| format!("{l}\n")).collect();
    system::write_file(Path::new(FSTAB), text.as_bytes(), 0o644, None)?;
    Ok(())
}

fn ours_in_fstab(line: &str) -> bool {
    line.starts_with("# hpcforge: the cluster's state volume")
        || line
            .split_whitespace()
            .nth(1)
            .is_some_and(|at| at == STATE_MOUNT || KEPT.iter().any(|k| k.path == at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_mounts_an_earlier_head_wrote_into_fstab_are_found_and_nothing_else() {
        let fstab = "# hpcforge: the cluster's state volume (written by hpc-node head-init)\n\
            /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0 /var/lib/hpcforge-state ext4 defaults,nofail 0 2\n\
            /var/lib/hpcforge-state/slurmctld /var/spool/slurmctld none bind,nofail 0 0\n\
            /var/lib/hpcforge-state/mysql /var/lib/mysql none bind,nofail 0 0\n\
            fs-1.efs.us-east-1.amazonaws.com:/ /home nfs4 nfsvers=4.1,_netdev,nofail 0 0\n\
            UUID=abc / ext4 defaults 0 1";
        let kept: Vec<&str> = fstab.lines().filter(|l| !ours_in_fstab(l)).collect();
        assert_eq!(
            kept,
            [
                "fs-1.efs.us-east-1.amazonaws.com:/ /home nfs4 nfsvers=4.1,_netdev,nofail 0 0",
                "UUID=abc / ext4 defaults 0 1"
            ]
        );
    }

    #[test]
    fn the_file_system_size_is_read_from_dumpe2fs_and_grown_only_for_real_room() {
        let superblock = "Filesystem volume name:   hpc-state\nBlock count:              5242880\nReserved block count:     262144\nBlock size:               4096\n";
        assert_eq!(ext4_bytes(superblock), Some(20 << 30));
        assert_eq!(ext4_bytes("Block size: 4096\n"), None);
        assert!(needs_growing(30 << 30, 20 << 30));
        assert!(!needs_growing(20 << 30, 20 << 30));
        assert!(!needs_growing((20 << 30) + 4096, 20 << 30));
    }
}
