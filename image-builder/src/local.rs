//! The local builder: debootstrap a Debian base, run each step in a chroot (services kept
//! from starting), cache the root file system after every step, clean the image so every
//! instance boots unique, and write a bootable GPT disk (UEFI ESP + ext4 root) without
//! mounting anything. Needs root, debootstrap, sfdisk, mkfs.ext4, mkfs.vfat, mtools,
//! grub-mkstandalone (grub-efi-amd64-bin), tar and zstd.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Instant, SystemTime};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::process::Command;

use crate::host::{io, missing_tools, run};
pub use crate::host::{BuildError, Result};
use crate::plan::{step_key, FileContent, LocalSource, Step};
use crate::progress::{secs, Progress};

/// Packages every image has: the cloud kernel, systemd, SSH, cloud-init and growpart.
pub const BASE_PACKAGES: &[&str] = &[
    "linux-image-cloud-amd64",
    "systemd-sysv",
    "systemd-resolved",
    "udev",
    "dbus",
    "openssh-server",
    "cloud-init",
    "cloud-guest-utils",
    "ca-certificates",
    "iproute2",
    "netbase",
    "sudo",
    "e2fsprogs",
    "procps",
    "less",
    "curl",
];

/// Version of the base recipe below; part of the base layer's key.
const BASE_RECIPE: &str = "base-v1";

/// Tools the local builder runs, with the Debian package that has each.
pub const HOST_TOOLS: &[(&str, &str)] = &[
    ("debootstrap", "debootstrap"),
    ("sfdisk", "fdisk"),
    ("mkfs.ext4", "e2fsprogs"),
    ("mkfs.vfat", "dosfstools"),
    ("mcopy", "mtools"),
    ("grub-mkstandalone", "grub-efi-amd64-bin (and grub-common)"),
    ("zstd", "zstd"),
    ("tar", "tar"),
];

/// Puts a step's script (`step.sh`) and its files (`files/...`, with their modes) into `dir`,
/// emptied first: what both builders copy into the target before running the step.
pub fn stage_step(step: &Step, dir: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(dir);
    let files = dir.join("files");
    fs::create_dir_all(&files).map_err(io("creating the staging directory"))?;
    for f in &step.files {
        let dest = files.join(&f.name);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
        }
        match &f.content {
            FileContent::Path(p) => fs::copy(p, &dest).map(|_| ()),
            FileContent::Text(t) => fs::write(&dest, t),
        }
        .map_err(io(format!("staging {}", f.name)))?;
        set_mode(&dest, f.mode)?;
    }
    fs::write(dir.join("step.sh"), &step.script).map_err(io("writing the step script"))
}

// ---------------------------------------------------------------------------------------------
// Chroot
// ---------------------------------------------------------------------------------------------

/// proc, sys, dev and dev/pts mounted into a root, a policy-rc.d that keeps services from
/// starting, and the host's DNS; all undone on drop (also on Ctrl-C or error).
pub struct Chroot {
    root: PathBuf,
    resolv_saved: bool,
}

const POLICY_RC: &str = "usr/sbin/policy-rc.d";
const RESOLV: &str = "etc/resolv.conf";
const RESOLV_SAVED: &str = "etc/resolv.conf.hpc-image";

impl Chroot {
    pub fn enter(root: &Path) -> Result<Chroot> {
        let mut c = Chroot {
            root: root.to_path_buf(),
            resolv_saved: false,
        };
        let mounts: [(&str, &[&str]); 4] = [
            ("proc", &["-t", "proc", "proc"]),
            ("sys", &["-t", "sysfs", "sysfs"]),
            ("dev", &["--bind", "/dev"]),
            ("dev/pts", &["--bind", "/dev/pts"]),
        ];
        for (dir, args) in mounts {
            let target = root.join(dir);
            fs::create_dir_all(&target).map_err(io(format!("creating {}", target.display())))?;
            let status = std::process::Command::new("mount")
                .args(args)
                .arg(&target)
                .stdin(Stdio::null())
                .status()
                .map_err(io("running mount"))?;
            if !status.success() {
                return Err(BuildError::new(format!(
                    "mounting {} failed ({status}): the local builder needs root",
                    target.display()
                )));
            }
        }
        let policy = root.join(POLICY_RC);
        fs::write(
            &policy,
            "#!/bin/sh\n# hpc-image: no services start while the image is built\nexit 101\n",
        )
        .map_err(io("writing policy-rc.d"))?;
        set_mode(&policy, 0o755)?;
        let resolv = root.join(RESOLV);
        if resolv.symlink_metadata().is_ok() {
            fs::rename(&resolv, root.join(RESOLV_SAVED)).map_err(io("saving resolv.conf"))?;
            c.resolv_saved = true;
        }
        let host = fs::read("/etc/resolv.conf").unwrap_or_default();
        fs::write(&resolv, host).map_err(io("writing resolv.conf"))?;
        Ok(c)
    }

    /// Runs a step's script as root inside the chroot, its files staged under $HPC_FILES.
    pub async fn run_step(&self, step: &Step, log: &Path) -> Result<()> {
        let stage = self.root.join("var/tmp/hpc-image");
        stage_step(step, &stage)?;
        let result = run(
            Command::new("chroot")
                .arg(&self.root)
                .args(["/bin/sh", "/var/tmp/hpc-image/step.sh"])
                .env_clear()
                .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
                .env("HOME", "/root")
                .env("LANG", "C.UTF-8")
                .env("HPC_FILES", "/var/tmp/hpc-image/files"),
            &step.label,
            log,
        )
        .await;
        let _ = fs::remove_dir_all(&stage);
        result
    }

    fn exit(&mut self) {
        // Everything under the root, deepest first: ours, and anything a step left mounted.
        let _ = unmount_all_under(&self.root);
        let _ = fs::remove_file(self.root.join(POLICY_RC));
        if self.resolv_saved {
            let _ = fs::remove_file(self.root.join(RESOLV));
            let _ = fs::rename(self.root.join(RESOLV_SAVED), self.root.join(RESOLV));
            self.resolv_saved = false;
        }
    }
}

impl Drop for Chroot {
    fn drop(&mut self) {
        self.exit();
    }
}

/// Mount points at or under `root` (from /proc/self/mountinfo), deepest first.
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    // mountinfo holds absolute paths: a relative root (the default `output/<source>`) must be too.
    let root = fs::canonicalize(root)
        .or_else(|_| std::path::absolute(root))
        .unwrap_or_else(|_| root.to_path_buf());
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .map(PathBuf::from)
        .filter(|p| p.starts_with(&root))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape_mount_path(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&code, 8) {
                Ok(b) => out.push(b as char),
                Err(_) => {
                    out.push(c);
                    out.push_str(&code);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Unmounts everything under `root` (ours, and what an interrupted debootstrap left).
pub fn unmount_all_under(root: &Path) -> Result<()> {
    for m in mounts_under(root) {
        let ok = std::process::Command::new("umount")
            .arg(&m)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&m)
                .stdin(Stdio::null())
                .status();
        }
    }
    let left = mounts_under(root);
    if left.is_empty() {
        Ok(())
    } else {
        Err(BuildError::new(format!(
            "could not unmount {}: unmount them by hand before removing {}",
            left.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            root.display()
        )))
    }
}

/// Removes a build tree, but never while anything is mounted inside it (a bind-mounted /dev
/// would otherwise be emptied).
pub fn remove_tree(root: &Path) -> Result<()> {
    if !root.exists() {
        return Ok(());
    }
    unmount_all_under(root)?;
    fs::remove_dir_all(root).map_err(io(format!("removing {}", root.display())))
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io(format!("chmod {}", path.display())))
}

// ---------------------------------------------------------------------------------------------
// Layer cache
// ---------------------------------------------------------------------------------------------

/// Root file systems after each step, as zstd tarballs named by their key.
pub struct Cache {
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LayerInfo {
    pub key: String,
    pub step: String,
    pub bytes: u64,
    pub created: u64,
}

impl Cache {
    fn layer(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.tar.zst"))
    }

    pub fn has(&self, key: &str) -> bool {
        self.layer(key).is_file()
    }

    pub async fn save(&self, key: &str, step: &str, root: &Path, log: &Path) -> Result<()> {
        fs::create_dir_all(&self.dir).map_err(io(format!("creating {}", self.dir.display())))?;
        let tmp = self.dir.join(format!("{key}.tmp-{}", std::process::id()));
        run(
            Command::new("tar")
                .args([
                    "--numeric-owner",
                    "--xattrs",
                    "--xattrs-include=*",
                    "--acls",
                    "-I",
                    "zstd -1 -T0 -q",
                    "-cf",
                ])
                .arg(&tmp)
                .arg("-C")
                .arg(root)
                .arg("."),
            "saving the layer",
            log,
        )
        .await
        .inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        fs::rename(&tmp, self.layer(key)).map_err(io("storing the layer"))?;
        let info = LayerInfo {
            key: key.to_string(),
            step: step.to_string(),
            bytes: fs::metadata(self.layer(key)).map(|m| m.len()).unwrap_or(0),
            created: unix_now(),
        };
        let json = serde_json::to_vec_pretty(&info).map_err(|e| BuildError::new(e.to_string()))?;
        fs::write(self.dir.join(format!("{key}.json")), json).map_err(io("writing layer info"))?;
        Ok(())
    }

    pub async fn restore(&self, key: &str, root: &Path, log: &Path) -> Result<()> {
        fs::create_dir_all(root).map_err(io(format!("creating {}", root.display())))?;
        run(
            Command::new("tar")
                .args([
                    "--numeric-owner",
                    "--xattrs",
                    "--xattrs-include=*",
                    "--acls",
                    "-I",
                    "zstd -q",
                    "-xpf",
                ])
                .arg(self.layer(key))
                .arg("-C")
                .arg(root),
            "restoring a cached layer",
            log,
        )
        .await?;
        // Mark it used, for pruning by age.
        if let Ok(f) = File::options().append(true).open(self.layer(key)) {
            let _ = f.set_modified(SystemTime::now());
        }
        Ok(())
    }

    pub fn list(&self) -> Vec<(LayerInfo, SystemTime)> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return vec![];
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let Ok(info) = fs::read(&p)
                .map_err(|_| ())
                .and_then(|b| serde_json::from_slice::<LayerInfo>(&b).map_err(|_| ()))
            else {
                continue;
            };
            let used = fs::metadata(self.layer(&info.key)).and_then(|m| m.modified());
            if let Ok(used) = used {
                out.push((info, used));
            }
        }
        out.sort_by_key(|(_, used)| *used);
        out
    }

    /// Deletes layers not used for `older_than`; returns (layers, bytes) removed.
    pub fn prune(&self, older_than: std::time::Duration) -> (usize, u64) {
        let now = SystemTime::now();
        let mut removed = (0, 0);
        for (info, used) in self.list() {
            if now.duration_since(used).unwrap_or_default() >= older_than {
                let _ = fs::remove_file(self.layer(&info.key));
                let _ = fs::remove_file(self.dir.join(format!("{}.json", info.key)));
                removed.0 += 1;
                removed.1 += info.bytes;
            }
        }
        // Leftovers of interrupted saves.
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().contains(".tmp-") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        removed
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The build
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub id: String,
    pub label: String,
    pub key: String,
    /// `cached` (layer reused), `built`, or `run` (not cached: the final steps).
    pub status: String,
    pub seconds: f64,
}

impl StepReport {
    /// A final step that is run every build, not cached.
    fn run(id: &str, seconds: f64) -> Self {
        StepReport {
            id: id.into(),
            label: id.into(),
            key: String::new(),
            status: "run".into(),
            seconds,
        }
    }
}

/// One cached layer of a local build: the base system or one step on top of it.
struct Layer {
    key: String,
    id: String,
    label: String,
}

impl Layer {
    fn report(&self, status: &str, seconds: f64) -> StepReport {
        StepReport {
            id: self.id.clone(),
            label: self.label.clone(),
            key: self.key.clone(),
            status: status.into(),
            seconds,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    pub source: String,
    pub disk: PathBuf,
    pub disk_bytes: u64,
    pub steps: Vec<StepReport>,
    pub layers_reused: usize,
    pub layers_built: usize,
    pub verify: Option<crate::verify::VerifyReport>,
    /// The Slurm version the image carries (Debian's package version), None without Slurm;
    /// `hpc-image publish` tags the AMI with it.
    pub slurm_version: Option<String>,
    pub seconds: f64,
}

/// Slurm's packages, any of which says which Slurm the image has.
const SLURM_PACKAGES: &[&str] = &["slurmctld", "slurmd", "slurm-client"];

/// The installed version of the first of Slurm's packages in a dpkg status file.
pub fn slurm_version_in_status(status: &str) -> Option<String> {
    let stanzas: Vec<&str> = status.split("\n\n").collect();
    SLURM_PACKAGES.iter().find_map(|package| {
        stanzas.iter().find_map(|stanza| {
            let field = |name: &str| stanza.lines().find_map(|l| l.strip_prefix(name).map(str::trim));
            (field("Package:") == Some(*package) && field("Status:").is_some_and(|st| st.ends_with(" installed")))
                .then(|| field("Version:").map(str::to_string))?
        })
    })
}

pub struct LocalBuild<'a> {
    pub source: &'a LocalSource,
    pub steps: &'a [Step],
    pub cache: Cache,
    pub use_cache: bool,
    /// Where the disk, logs and report go.
    pub out_dir: PathBuf,
}

/// Where debootstrap keeps its per-suite scripts.
const DEBOOTSTRAP_SCRIPTS: &str = "/usr/share/debootstrap/scripts";

/// The script for a suite the host's debootstrap is older than (bookworm's does not know
/// forky): every current Debian suite bootstraps with `sid`'s script, as debootstrap's own
/// per-suite entries for them are links to it. `None` when debootstrap knows the suite.
fn debootstrap_script(suite: &str, scripts: &Path) -> Option<PathBuf> {
    let sid = scripts.join("sid");
    (!scripts.join(suite).exists() && sid.exists()).then_some(sid)
}

/// The base layer's key: the suite, mirror, package set and recipe.
pub fn base_key(source: &LocalSource) -> String {
    let mut h = Sha256::new();
    h.update(BASE_RECIPE.as_bytes());
    h.update(source.suite.as_bytes());
    h.update(source.mirror.as_bytes());
    if !source.check_valid_until {
        h.update(b"check_valid_until=false\n");
    }
    for p in BASE_PACKAGES
        .iter()
        .copied()
        .chain(source.packages.iter().map(String::as_str))
    {
        h.update(p.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The script that makes the base layer after debootstrap.
fn base_script(source: &LocalSource) -> String {
    let mut packages: Vec<String> = BASE_PACKAGES.iter().map(|p| p.to_string()).collect();
    packages.extend(source.packages.iter().cloned());
    let valid_until = if source.check_valid_until {
        String::new()
    } else {
        format!("printf 'Acquire::Check-Valid-Until \"false\";\\n' > {VALID_UNTIL_CONF}\n")
    };
    format!(
        r#"set -eu
export DEBIAN_FRONTEND=noninteractive
{valid_until}apt-get -q update
apt-get -y -q --no-install-recommends install {packages}
# A DHCP catch-all so the image has a network even where cloud-init has no datasource.
mkdir -p /etc/systemd/network
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n' > /etc/systemd/network/80-hpc-image-dhcp.network
systemctl enable systemd-networkd.service systemd-resolved.service
# SSH host keys are made at first boot (cleanup removes the build's).
cat > /etc/systemd/system/hpc-image-ssh-hostkeys.service <<'EOF'
[Unit]
Description=Generate SSH host keys on first boot
Before=ssh.service
ConditionPathExistsGlob=!/etc/ssh/ssh_host_*_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
EOF
systemctl enable hpc-image-ssh-hostkeys.service
printf 'localhost\n' > /etc/hostname
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > /etc/hosts
"#,
        packages = packages.join(" ")
    )
}

/// The build's apt setting for a snapshot mirror (`check_valid_until = false`); cleanup
/// removes it, so the image keeps apt's default.
const VALID_UNTIL_CONF: &str = "/etc/apt/apt.conf.d/80hpc-image-valid-until";

/// Removes what must not be shared between instances: machine id, SSH host keys, apt
/// caches, cloud-init state, logs, temporary files, any MUNGE key, the build's apt setting.
pub const CLEANUP_SCRIPT: &str = r#"set -eu
rm -f /etc/apt/apt.conf.d/80hpc-image-valid-until
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
rm -f /etc/ssh/ssh_host_*
rm -f /etc/munge/munge.key
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
rm -rf /var/lib/cloud/* /var/log/cloud-init*.log
find /var/log -type f -exec truncate -s 0 {} +
rm -rf /tmp/* /var/tmp/* /root/.bash_history /root/.cache
"#;

/// The verification runner baked into the image: inert unless the machine carries the
/// SMBIOS OEM string `io.hpcforge.verify` (only hpc-image's qemu boot does).
const VERIFY_RUNNER: &str = r#"#!/bin/sh
# hpc-image: runs the image's checks when booted by `hpc-image build` (SMBIOS OEM string
# io.hpcforge.verify), reports on the second serial port and powers off. Inert otherwise.
grep -aqs 'io.hpcforge.verify' /sys/firmware/dmi/entries/11-*/raw || exit 0
exec > /dev/ttyS1 2>&1
echo "HPCFORGE-VERIFY-BEGIN"
failed=0
for c in /usr/lib/hpcforge/checks/*.sh; do
    name=$(basename "$c" .sh)
    name=${name#*-}
    echo "HPCFORGE-CHECK-BEGIN $name"
    start=$(date +%s)
    if timeout 600 /bin/sh "$c" </dev/null; then rc=0; else rc=$?; failed=$((failed + 1)); fi
    echo "HPCFORGE-CHECK-END $name $rc $(($(date +%s) - start))"
done
echo "HPCFORGE-VERIFY-END $failed"
sync
systemctl poweroff --no-block
"#;

const VERIFY_UNIT: &str = r#"[Unit]
Description=hpc-image verification (only when booted by hpc-image)
After=multi-user.target ssh.service
ConditionPathExistsGlob=/sys/firmware/dmi/entries/11-*

[Service]
Type=oneshot
ExecStart=/usr/lib/hpcforge/verify
TimeoutStartSec=0

[Install]
WantedBy=multi-user.target
"#;

/// Checks every image gets: unique identity made at boot, SSH up, kernel and cloud-init.
const BASE_CHECK: &str = r#"set -eu
echo "kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
test -s /etc/machine-id || { echo "machine-id was not generated at boot"; exit 1; }
ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || { echo "no SSH host keys were generated at boot"; exit 1; }
systemctl is-active --quiet ssh.service || { systemctl status --no-pager ssh.service; exit 1; }
command -v cloud-init >/dev/null || { echo "cloud-init is missing"; exit 1; }
resolv=$(readlink /etc/resolv.conf || true)
[ "$resolv" = ../run/systemd/resolve/stub-resolv.conf ] || { echo "/etc/resolv.conf is not systemd-resolved's stub: $(ls -l /etc/resolv.conf)"; exit 1; }
want=$(sed -n 's/^locale: *//p' /etc/cloud/cloud.cfg.d/*.cfg | tail -n 1)
locale -a | grep -qix "$(printf '%s' "${want:-C.UTF-8}" | sed 's/UTF-8$/utf8/')" || { echo "cloud-init's locale ${want:-unset} is not generated (locale -a: $(locale -a | tr '\n' ' '))"; exit 1; }
echo "system state: $(systemctl is-system-running || true)"
systemctl --failed --no-pager --no-legend || true
"#;

impl LocalBuild<'_> {
    /// Builds the root file system, reusing cached layers, then cleans it and writes the disk.
    pub async fn run(&self, progress: &mut Progress) -> Result<BuildReport> {
        let started = Instant::now();
        let missing = missing_tools(HOST_TOOLS);
        if !missing.is_empty() {
            return Err(BuildError::new(format!(
                "the local builder needs these tools: {} (apt-get install them)",
                missing.join(", ")
            )));
        }
        fs::create_dir_all(&self.out_dir).map_err(io(format!("creating {}", self.out_dir.display())))?;
        let work = self.out_dir.join("work");
        let root = work.join("rootfs");
        let logs = self.out_dir.join("logs");
        fs::create_dir_all(&logs).map_err(io("creating the logs directory"))?;
        remove_tree(&root)?;

        let layers = self.layers()?;
        let total = layers.len() + 2;
        let mut reports = self.build_layers(&layers, &root, &logs, progress).await?;

        let t = progress.step(total - 1, total, "finalize: checks, verification unit, cleanup");
        self.finalize(&root, &logs.join("finalize.log")).await?;
        progress.done("finalized", t);
        reports.push(StepReport::run("finalize", t.elapsed().as_secs_f64()));

        let slurm_version = fs::read_to_string(root.join("var/lib/dpkg/status"))
            .ok()
            .and_then(|status| slurm_version_in_status(&status));
        let t = progress.step(total, total, "writing the disk image");
        let disk = self.out_dir.join("disk.raw");
        crate::disk::write_disk(&root, &work, &disk, self.source.disk_size, &logs.join("disk.log")).await?;
        progress.done(&format!("{}", disk.display()), t);
        reports.push(StepReport::run("disk", t.elapsed().as_secs_f64()));
        remove_tree(&root)?;
        let disk_bytes = fs::metadata(&disk).map(|m| m.len()).unwrap_or(0);
        Ok(BuildReport {
            source: format!("source.local.{}", self.source.name),
            disk,
            disk_bytes,
            layers_reused: reports.iter().filter(|r| r.status == "cached").count(),
            layers_built: reports.iter().filter(|r| r.status == "built").count(),
            steps: reports,
            verify: None,
            slurm_version,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// The cached layers of the build: the base, then one per step, each keyed by all before it.
    fn layers(&self) -> Result<Vec<Layer>> {
        let mut layers = vec![Layer {
            key: base_key(self.source),
            id: "base".to_string(),
            label: format!("base (debootstrap {})", self.source.suite),
        }];
        for s in self.steps {
            let prev = layers.last().map(|l| l.key.clone()).unwrap_or_default();
            layers.push(Layer {
                key: step_key(&prev, s).map_err(io(format!("reading the files of {}", s.label)))?,
                id: s.id.clone(),
                label: s.label.clone(),
            });
        }
        Ok(layers)
    }

    /// Restores the deepest cached layer into `root`, then builds (and caches) the rest.
    async fn build_layers(
        &self,
        layers: &[Layer],
        root: &Path,
        logs: &Path,
        progress: &mut Progress,
    ) -> Result<Vec<StepReport>> {
        let total = layers.len() + 2;
        let reuse = if self.use_cache {
            (0..layers.len()).rev().find(|&i| self.cache.has(&layers[i].key))
        } else {
            None
        };
        let mut reports = Vec::new();
        if let Some(i) = reuse {
            let t = progress.step(
                i + 1,
                total,
                &format!("restoring cached layers up to {}", layers[i].label),
            );
            self.cache
                .restore(&layers[i].key, root, &logs.join("cache.log"))
                .await?;
            progress.done("restored", t);
            reports.extend(layers[..=i].iter().map(|l| l.report("cached", 0.0)));
        }
        let first = reuse.map_or(0, |i| i + 1);
        for (i, layer) in layers.iter().enumerate().skip(first) {
            let t = progress.step(i + 1, total, &layer.label);
            let log = logs.join(format!("{:02}-{}.log", i, layer.id.replace(['@', '/'], "_")));
            let _ = fs::remove_file(&log);
            if i == 0 {
                self.bootstrap(root, &log).await?;
            } else {
                let chroot = Chroot::enter(root)?;
                chroot.run_step(&self.steps[i - 1], &log).await?;
                drop(chroot);
            }
            let built = t.elapsed();
            if self.use_cache {
                self.cache
                    .save(&layer.key, &layer.id, root, &logs.join("cache.log"))
                    .await?;
            }
            progress.done(&format!("built in {}, cached", secs(built)), t);
            reports.push(layer.report("built", built.as_secs_f64()));
        }
        Ok(reports)
    }

    async fn bootstrap(&self, root: &Path, log: &Path) -> Result<()> {
        fs::create_dir_all(root).map_err(io(format!("creating {}", root.display())))?;
        let mut debootstrap = Command::new("debootstrap");
        debootstrap
            .args(["--variant=minbase", "--merged-usr"])
            .arg(&self.source.suite)
            .arg(root)
            .arg(&self.source.mirror);
        if let Some(script) = debootstrap_script(&self.source.suite, Path::new(DEBOOTSTRAP_SCRIPTS)) {
            debootstrap.arg(script);
        }
        run(
            &mut debootstrap,
            &format!("debootstrap {} from {}", self.source.suite, self.source.mirror),
            log,
        )
        .await?;
        let step = Step {
            id: "base".into(),
            label: "base packages".into(),
            version: BASE_RECIPE.into(),
            script: base_script(self.source),
            files: vec![],
            check: None,
            args: Default::default(),
        };
        let chroot = Chroot::enter(root)?;
        chroot.run_step(&step, log).await
    }

    async fn finalize(&self, root: &Path, log: &Path) -> Result<()> {
        let checks = root.join("usr/lib/hpcforge/checks");
        let _ = fs::remove_dir_all(&checks);
        fs::create_dir_all(&checks).map_err(io("creating the checks directory"))?;
        fs::write(checks.join("00-base.sh"), BASE_CHECK).map_err(io("writing the base check"))?;
        for (n, s) in self.steps.iter().enumerate() {
            if let Some(check) = &s.check {
                fs::write(checks.join(format!("{:02}-{}.sh", n + 1, s.id)), check)
                    .map_err(io(format!("writing the check of {}", s.label)))?;
            }
        }
        let runner = root.join("usr/lib/hpcforge/verify");
        fs::write(&runner, VERIFY_RUNNER).map_err(io("writing the verification runner"))?;
        set_mode(&runner, 0o755)?;
        let unit = root.join("etc/systemd/system/hpc-image-verify.service");
        fs::write(&unit, VERIFY_UNIT).map_err(io("writing the verification unit"))?;
        let step = Step {
            id: "finalize".into(),
            label: "cleanup".into(),
            version: String::new(),
            script: format!("set -eu\nsystemctl enable hpc-image-verify.service\n{CLEANUP_SCRIPT}"),
            files: vec![],
            check: None,
            args: Default::default(),
        };
        {
            let chroot = Chroot::enter(root)?;
            chroot.run_step(&step, log).await?;
        }
        write_platform_files(root)
    }
}

/// cloud-init's locale step: the locale every image has (en_US.UTF-8, cloud-init's default, is
/// not generated in a minimal root, so the step failed and left the system degraded).
const CLOUD_LOCALE: &str =
    "# hpc-image: C.UTF-8 exists in every glibc; en_US.UTF-8 is not generated\nlocale: C.UTF-8\n";
const STUB_RESOLV: &str = "../run/systemd/resolve/stub-resolv.conf";

/// What the image says of its own DNS and locale, written after the last chroot has put back
/// the resolv.conf it found (debootstrap's copy of the build host's, a resolver no VPC has):
/// /etc/resolv.conf becomes systemd-resolved's stub, which serves the DNS the instance's
/// network gives it.
fn write_platform_files(root: &Path) -> Result<()> {
    let resolv = root.join(RESOLV);
    if resolv.symlink_metadata().is_ok() {
        fs::remove_file(&resolv).map_err(io("removing the build's resolv.conf"))?;
    }
    std::os::unix::fs::symlink(STUB_RESOLV, &resolv).map_err(io("linking resolv.conf to systemd-resolved"))?;
    let cloud = root.join("etc/cloud/cloud.cfg.d");
    fs::create_dir_all(&cloud).map_err(io("creating etc/cloud/cloud.cfg.d"))?;
    fs::write(cloud.join("01-hpcforge-locale.cfg"), CLOUD_LOCALE).map_err(io("writing the cloud-init locale"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slurm_version_is_read_from_dpkgs_status() {
        let status = "Package: munge\nStatus: install ok installed\nVersion: 0.5.15-2\n\n\
                      Package: slurmd\nStatus: deinstall ok config-files\nVersion: 21.08.1\n\n\
                      Package: slurmctld\nStatus: install ok installed\nVersion: 22.05.8-4+deb12u3\n";
        assert_eq!(slurm_version_in_status(status).as_deref(), Some("22.05.8-4+deb12u3"));
        assert_eq!(
            slurm_version_in_status("Package: munge\nStatus: install ok installed\nVersion: 1\n"),
            None
        );
    }

    #[test]
    fn a_suite_newer_than_the_hosts_debootstrap_uses_sids_script() {
        let dir = std::env::temp_dir().join(format!("hpc-image-debootstrap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scripts dir");
        std::fs::write(dir.join("sid"), "").expect("sid");
        std::fs::write(dir.join("trixie"), "").expect("trixie");
        assert_eq!(debootstrap_script("trixie", &dir), None);
        assert_eq!(debootstrap_script("forky", &dir), Some(dir.join("sid")));
        std::fs::remove_file(dir.join("sid")).expect("rm sid");
        assert_eq!(
            debootstrap_script("forky", &dir),
            None,
            "no sid script: debootstrap names the problem"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn base_key_changes_with_suite_and_packages() {
        let mut s = LocalSource {
            name: "d".into(),
            suite: "bookworm".into(),
            mirror: "http://m".into(),
            disk_size: 4 << 30,
            packages: vec![],
            check_valid_until: true,
            verify: true,
            verify_timeout: std::time::Duration::from_secs(60),
            memory_mib: 2048,
            cpus: 2,
        };
        let a = base_key(&s);
        s.suite = "trixie".into();
        let b = base_key(&s);
        s.packages = vec!["vim".into()];
        assert_ne!(a, b);
        assert_ne!(b, base_key(&s));
        assert!(!base_script(&s).contains(VALID_UNTIL_CONF));
        let c = base_key(&s);
        s.check_valid_until = false;
        assert_ne!(c, base_key(&s), "a snapshot mirror's base is another layer");
        assert!(base_script(&s).contains(&format!("Check-Valid-Until \"false\";\\n' > {VALID_UNTIL_CONF}")));
        assert!(
            CLEANUP_SCRIPT.contains(&format!("rm -f {VALID_UNTIL_CONF}\n")),
            "the image keeps apt's default"
        );
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/var/tmp/a\\040b/proc"), "/var/tmp/a b/proc");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
    }

    #[test]
    fn mounts_under_a_relative_path_are_found() {
        let cwd = std::env::current_dir().expect("cwd");
        let up = "../".repeat(cwd.components().count() - 1);
        let relative = PathBuf::from(format!("{up}proc"));
        assert!(relative.is_relative());
        assert!(mounts_under(&relative).contains(&PathBuf::from("/proc")));
    }

    #[test]
    fn nothing_is_mounted_under_a_fresh_directory() {
        let dir = std::env::temp_dir().join(format!("hpc-image-mounts-{}", std::process::id()));
        fs::create_dir_all(dir.join("proc")).expect("dir");
        assert!(mounts_under(&dir).is_empty());
        remove_tree(&dir).expect("removed");
        assert!(!dir.exists());
    }
}
