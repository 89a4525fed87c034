//! Boot-mode support: the image baked from the repo's template and published to a booting
//! emulator, key pairs, SSH into instances.
//!
//! The disk is shared with the emulator's own boot tests (`/var/tmp/hpcforge-test-image`,
//! override with `HPCFORGE_TEST_IMAGE_DIR`): it is rebaked (with `hpc-image build`, cached
//! layers reused) only when the template, a component script, hpc-image or hpc-node is newer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use crate::{hpc_image_bin, hpc_image_command, hpc_node_bin, missing_root_and_tools, repo_root, scratch_dir, Emulator};

/// cloud-init's default user of the Debian image: the key pair's key is installed there.
pub const SSH_USER: &str = "debian";

const TOOLS: &[(&str, &str)] = &[
    ("systemd-nspawn", "systemd-container"),
    ("dnsmasq", "dnsmasq-base"),
    ("iptables-restore", "iptables"),
    ("ssh", "openssh-client"),
    ("debootstrap", "debootstrap"),
];

/// Fails (never skips) naming what is missing; `.ci/run` installs all of it.
pub fn require_prerequisites() {
    let missing = missing_root_and_tools("namespaces, mounts and systemd-nspawn need it", TOOLS);
    assert!(
        missing.is_empty(),
        "boot-mode tests need: {} (.ci/run installs them)",
        missing.join(", ")
    );
}

fn image_dir() -> PathBuf {
    std::env::var("HPCFORGE_TEST_IMAGE_DIR")
        .map_or_else(|_| PathBuf::from("/var/tmp/hpcforge-test-image"), PathBuf::from)
}

fn template() -> PathBuf {
    repo_root().join("image-builder/templates/debian-slurm.pkr.hcl")
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn newest_input() -> Option<SystemTime> {
    let mut inputs = vec![template(), hpc_image_bin(), hpc_node_bin()];
    let mut dirs = vec![repo_root().join("image-builder/components")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                inputs.push(path);
            }
        }
    }
    inputs.iter().filter_map(|p| modified(p)).max()
}

/// The test image's disk (Debian 12, Slurm 22.05), baked now if an input is newer than the
/// last bake.
pub fn test_disk() -> PathBuf {
    test_disk_of("bookworm")
}

/// The test image of a Debian `suite` (`bookworm`, `trixie` with Slurm 24.11, `forky` with
/// 26.05), baked now if an input is newer than its last bake. One bake per suite and process:
/// a caller waits for a bake already under way (see [`bake_in_background`]).
pub fn test_disk_of(suite: &str) -> PathBuf {
    bake_once(suite)
        .get_or_init(|| bake(suite))
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Starts baking the images of `suites` on other threads, so that a test reaching for one later
/// finds it done (or waits for the rest of its bake): the booted tests take turns, and most of a
/// turn is waiting for machines, not using the cores.
pub fn bake_in_background(suites: &[&'static str]) {
    for &suite in suites {
        std::thread::spawn(move || {
            bake_once(suite).get_or_init(|| bake(suite));
        });
    }
}

type Bake = std::sync::Arc<std::sync::OnceLock<Result<PathBuf, String>>>;

fn bake_once(suite: &str) -> Bake {
    static BAKES: std::sync::Mutex<std::collections::BTreeMap<String, Bake>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut bakes = BAKES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    bakes.entry(suite.to_string()).or_default().clone()
}

/// Bakes under `<out>.lock`, the lock `test_boot.py` and `scripts/demo.sh` take around the same
/// disk: booted tests run side by side, and a disk is looked at only when no bake is writing it.
fn bake(suite: &str) -> Result<PathBuf, String> {
    let out = image_dir().join(if suite == "bookworm" { "debian" } else { suite });
    std::fs::create_dir_all(image_dir()).map_err(|e| format!("creating {}: {e}", image_dir().display()))?;
    let lock_path = out.with_extension("lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    let disk = out.join("disk.raw");
    if let (Some(baked), Some(input)) = (modified(&disk), newest_input()) {
        if baked > input {
            return Ok(disk);
        }
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let cache = std::env::var("HPC_IMAGE_CACHE").unwrap_or_else(|_| "/var/tmp/hpc-image-cache".into());
    let mut build = hpc_image_command(&repo_root().join("image-builder"), None);
    build
        .arg("build")
        .arg(template())
        .args(["-var", "verify=false", "-var", &format!("suite={suite}")]);
    if suite == "forky" {
        // Debian's testing suite: a snapshot mirror, as this workplace's is, serves its Release
        // files past their Valid-Until date; and it has no libpam-duo.
        build.args(["-var", "check_valid_until=false", "-var", "duo=false"]);
    }
    let done = build
        .args(["--cache-dir", &cache, "--output"])
        .arg(&out)
        .output()
        .map_err(|e| format!("running hpc-image build ({suite}): {e}"))?;
    if !done.status.success() {
        return Err(format!("hpc-image build ({suite}) failed:\n{}", text(&done)));
    }
    Ok(disk)
}

/// Publishes the test disk to `emu` with `hpc-image publish`; returns the us-east-1 AMI.
pub fn publish_test_image(emu: &Emulator) -> String {
    publish_test_image_named(emu, "")
}

/// The test disk published again under another name (`name_suffix`): a second AMI, as a
/// patched rebuild of the head node's image would be.
pub fn publish_test_image_named(emu: &Emulator, name_suffix: &str) -> String {
    us_east_1(publish_test_image_to(emu, &["us-east-1"], name_suffix))
}

/// Publishes the test disk to `regions` (registered in the first, copied to the rest);
/// returns the AMI of each region, from the manifest.
pub fn publish_test_image_to(
    emu: &Emulator,
    regions: &[&str],
    name_suffix: &str,
) -> std::collections::BTreeMap<String, String> {
    publish_disk(emu, &test_disk(), "bookworm", regions, name_suffix)
}

/// Publishes the image of `suite` (its disk from [`test_disk_of`]) to us-east-1; returns its AMI.
pub fn publish_test_image_of(emu: &Emulator, suite: &str) -> String {
    us_east_1(publish_disk(emu, &test_disk_of(suite), suite, &["us-east-1"], ""))
}

fn us_east_1(images: std::collections::BTreeMap<String, String>) -> String {
    images
        .get("us-east-1")
        .cloned()
        .unwrap_or_else(|| panic!("no us-east-1 AMI in the manifest: {images:?}"))
}

fn publish_disk(
    emu: &Emulator,
    disk: &Path,
    suite: &str,
    regions: &[&str],
    name_suffix: &str,
) -> std::collections::BTreeMap<String, String> {
    let work = scratch_dir("publish");
    let manifest = work.join("manifest.json");
    let regions = serde_json::to_string(regions).expect("regions as JSON");
    let done = hpc_image_command(&repo_root().join("image-builder"), Some(emu))
        .arg("publish")
        .arg(template())
        .arg("--disk")
        .arg(disk)
        .arg("--manifest")
        .arg(&manifest)
        .args(["-var", &format!("regions={regions}")])
        .args(["-var", &format!("name_suffix={name_suffix}")])
        .args(["-var", &format!("suite={suite}")])
        .output()
        .expect("running hpc-image publish");
    assert!(done.status.success(), "hpc-image publish failed:\n{}", text(&done));
    let manifest = std::fs::read_to_string(&manifest).expect("publish manifest");
    let parsed: serde_json::Value = serde_json::from_str(&manifest).expect("manifest JSON");
    parsed["builds"][0]["images"]
        .as_object()
        .unwrap_or_else(|| panic!("no images in the manifest: {manifest}"))
        .iter()
        .map(|(region, ami)| (region.clone(), ami.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// A booting emulator: `budget` machines, its state under a scratch directory.
pub fn booting_emulator(budget: u32) -> Emulator {
    booting_emulator_with(budget, &[])
}

/// A booting emulator with more of its options (`--block-store-mib 2048` for two images of
/// different suites, whose blocks the default 1 GiB store cannot all keep).
pub fn booting_emulator_with(budget: u32, options: &[&str]) -> Emulator {
    let state = scratch_dir("boot-state");
    let budget = budget.to_string();
    let state = state.to_string_lossy().into_owned();
    let mut args = vec![
        "--boot-instances",
        "--machine-budget",
        &budget,
        "--boot-dir",
        &state,
        "--snapshot-delay",
        "0",
        "--image-delay",
        "0",
    ];
    args.extend_from_slice(options);
    Emulator::start_with(&args)
}

/// A key pair's private key file (a `Path` by deref), and the emulator whose instances it opens.
pub struct SshKey {
    path: PathBuf,
    emulator_port: u16,
}

impl std::ops::Deref for SshKey {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl SshKey {
    /// The private key at `path`, for the instances of the emulator on `emulator_port`.
    pub fn new(path: PathBuf, emulator_port: u16) -> SshKey {
        SshKey { path, emulator_port }
    }

    /// The VPC client namespace SSH to `address` must run in: the emulator routes a VPC from
    /// the host unless its CIDR overlaps a network the host uses (or `--no-host-routes`).
    fn client_namespace(&self, address: &str) -> Option<String> {
        let answer = crate::http(self.emulator_port, "GET", "/_emulator/instances", &[], "");
        let answer: serde_json::Value = serde_json::from_str(&answer.body).ok()?;
        answer["instances"]
            .as_array()?
            .iter()
            .filter(|m| m["PrivateIpAddress"] == address)
            .find_map(|m| m["ClientNamespace"].as_str().map(str::to_string))
    }

    /// `ssh`, inside the client namespace of `address`'s VPC when the host has no route to it.
    fn ssh_to(&self, address: &str) -> Command {
        match self.client_namespace(address) {
            Some(namespace) => {
                let mut ip = Command::new("ip");
                ip.args(["netns", "exec", &namespace, "ssh"]);
                ip
            }
            None => Command::new("ssh"),
        }
    }
}

/// An ed25519 key pair made through EC2; returns its name and the private key file.
pub fn key_pair(emu: &Emulator, name: &str) -> SshKey {
    let xml = emu.ec2(&format!("Action=CreateKeyPair&KeyName={name}&KeyType=ed25519"));
    let start = xml
        .find("<keyMaterial>")
        .map(|i| i + "<keyMaterial>".len())
        .expect("keyMaterial");
    let end = xml[start..].find("</keyMaterial>").expect("keyMaterial end") + start;
    let key = xml[start..end].replace("&#xA;", "\n").replace("&#10;", "\n");
    let path = scratch_dir("keys").join(name);
    std::fs::write(&path, format!("{}\n", key.trim_end())).expect("writing the key");
    Command::new("chmod").arg("600").arg(&path).status().expect("chmod");
    SshKey::new(path, emu.port)
}

pub fn ssh(key: &SshKey, address: &str, command: &str) -> Output {
    ssh_as(key, SSH_USER, address, command)
}

const SSH_OPTIONS: &[&str] = &[
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    // Not BatchMode, which turns keyboard-interactive off: a login node with the cluster's
    // second factor asks for it even of users who have not enrolled (and then asks nothing).
    // Every prompt goes to SSH_ASKPASS (see `ssh_command`), never to a terminal.
    "-o",
    "BatchMode=no",
    "-o",
    "PasswordAuthentication=no",
    "-o",
    "NumberOfPasswordPrompts=1",
    "-o",
    "ConnectTimeout=5",
    "-o",
    "LogLevel=ERROR",
];

/// ssh to `address` with `key` and the tests' options, whose prompts (a second factor's code)
/// `askpass` answers: a program printing the answer; `/bin/false` answers nothing.
fn ssh_command(key: &SshKey, address: &str, askpass: &Path) -> Command {
    let mut ssh = key.ssh_to(address);
    ssh.env("SSH_ASKPASS", askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .arg("-i")
        .arg(&key.path)
        .args(SSH_OPTIONS);
    ssh
}

/// `command` on `address` as `user`, by key, from the host.
pub fn ssh_as(key: &SshKey, user: &str, address: &str, command: &str) -> Output {
    ssh_command(key, address, Path::new("/bin/false"))
        .arg(format!("{user}@{address}"))
        .arg(command)
        .output()
        .expect("running ssh")
}

/// `command` on `address` as `user`, by key, answering the login's prompt with `code`.
pub fn ssh_with_code(key: &SshKey, user: &str, address: &str, command: &str, code: &str) -> Output {
    let askpass = crate::scratch_dir("askpass").join("code");
    std::fs::write(&askpass, format!("#!/bin/sh\nprintf '%s\\n' '{code}'\n")).expect("writing askpass");
    std::fs::set_permissions(&askpass, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod askpass");
    ssh_command(key, address, &askpass)
        .arg(format!("{user}@{address}"))
        .arg(command)
        .output()
        .expect("running ssh")
}

/// `command` on `address` as the image's user, through `jump` (an instance whose security
/// group admits the host, as a bastion: compute nodes admit only the cluster's members).
pub fn ssh_via(key: &SshKey, jump: &str, address: &str, command: &str) -> Output {
    ssh_via_as(key, SSH_USER, jump, address, command)
}

/// `command` on `address` as `user`, through `jump` as the same user (see [`ssh_via`]).
pub fn ssh_via_as(key: &SshKey, user: &str, jump: &str, address: &str, command: &str) -> Output {
    let proxy = format!(
        "ProxyCommand=ssh -i {} {} -W %h:%p {user}@{jump}",
        key.display(),
        SSH_OPTIONS.join(" ")
    );
    // The proxy's ssh runs where this one does: in the jump's client namespace, if any.
    ssh_command(key, jump, Path::new("/bin/false"))
        .args(["-o", &proxy])
        .arg(format!("{user}@{address}"))
        .arg(command)
        .output()
        .expect("running ssh")
}

/// Waits until SSH to `address` works (the instance booted and cloud-init installed the key).
pub fn wait_ssh(key: &SshKey, address: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let out = ssh(key, address, "cloud-init status --wait >/dev/null; true");
        if out.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no SSH to {address} within {timeout:?}: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The OpenSSH public key of a private key file.
pub fn public_key(key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-y")
        .arg("-f")
        .arg(key)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success(), "ssh-keygen -y: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// How many booted tests run at once: `HPCFORGE_BOOTED_AT_ONCE`, default 2. Most of a booted
/// test is waiting for machines, not using the cores; each test has its own emulator, whose VPCs
/// the host routes only where no other's already are (see the emulator's `vpcnet`).
pub fn booted_at_once() -> usize {
    match std::env::var("HPCFORGE_BOOTED_AT_ONCE") {
        Err(_) => 2,
        Ok(value) => value
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("HPCFORGE_BOOTED_AT_ONCE={value:?}: a whole number of at least 1")),
    }
}

/// A booted test's turn: at most [`booted_at_once`] are held at a time. Dropped, it tells how
/// long the test held it (on stderr, and as a line in the file `HPCFORGE_BOOTED_TIMES` names, which
/// `scripts/run-tests.sh` prints at the end of the run).
pub struct Turn {
    test: String,
    started: Instant,
}

struct Lanes {
    taken: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

static LANES: Lanes = Lanes {
    taken: std::sync::Mutex::new(0),
    freed: std::sync::Condvar::new(),
};

/// Waits for a free lane, then holds it until the returned turn is dropped.
pub fn booted_turn() -> Turn {
    let limit = booted_at_once();
    let mut taken = LANES.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    while *taken >= limit {
        taken = LANES
            .freed
            .wait(taken)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    *taken += 1;
    Turn {
        test: std::thread::current().name().unwrap_or("a booted test").to_string(),
        started: Instant::now(),
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let outcome = if std::thread::panicking() { "failed" } else { "passed" };
        let line = format!("{}: {outcome} in {} s", self.test, self.started.elapsed().as_secs());
        eprintln!("{line}");
        if let Ok(path) = std::env::var("HPCFORGE_BOOTED_TIMES") {
            use std::io::Write;
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut file| writeln!(file, "{line}"));
            if let Err(e) = written {
                eprintln!("writing {path}: {e}");
            }
        }
        let mut taken = LANES.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *taken -= 1;
        LANES.freed.notify_one();
    }
}
