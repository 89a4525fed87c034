//! Installing the provider as users do: `terraform init` from the provider mirror that
//! `scripts/release.py` (what `make release` calls) writes, with the CLI configuration the
//! installing guide (`docs/guides/installing.md`) shows. The network mirror is served over HTTPS
//! on loopback; the filesystem mirror is the same folder. Two releases (0.1.0, then 0.2.0 added
//! to the mirror) for two platforms (linux_amd64, and linux_arm64 cross-built and run under
//! qemu-user), and a tampered package.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use acceptance_tests::{
    arm64_provider, missing_tools, output_text, package_release, provider_dir, repo_root, scratch_dir, Emulator,
    HttpsFiles, Workspace,
};
use serde_json::Value;

const ADDRESS: &str = "registry.terraform.io/hpcforge/hpc";
/// The guide that shows how to install the provider from a mirror.
const INSTALL_GUIDE: &str = "docs/guides/installing.md";
/// The placeholders in the guide's two CLI configuration blocks.
const GUIDE_MIRROR_URL: &str = "https://terraform-mirror.example.com/";
const GUIDE_MIRROR_PATH: &str = "/shared/terraform-mirror";
/// The platforms every release is packaged for.
const PLATFORMS: [&str; 2] = ["linux_amd64", "linux_arm64"];

fn require_tools() {
    let missing = missing_tools(&[
        ("gpg", "gnupg"),
        ("openssl", "openssl"),
        ("python3", "python3"),
        ("qemu-aarch64", "qemu-user"),
    ]);
    assert!(missing.is_empty(), "the install test needs: {}", missing.join(", "));
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed:\n{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A throwaway RSA signing key in its own keyring; returns (GNUPGHOME, fingerprint).
fn signing_key(dir: &Path) -> (PathBuf, String) {
    let home = dir.join("gnupg");
    std::fs::create_dir_all(&home).expect("gnupg home");
    run(Command::new("chmod").arg("700").arg(&home));
    let gpg = |args: &[&str]| {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", &home)
            .args(["--batch", "--passphrase", ""])
            .args(args);
        c
    };
    run(&mut gpg(&[
        "--quick-gen-key",
        "hpcforge release test <release@hpcforge.invalid>",
        "rsa3072",
        "sign",
        "never",
    ]));
    let listing = run(&mut gpg(&["--list-secret-keys", "--with-colons"]));
    let fpr = listing
        .lines()
        .find_map(|l| l.strip_prefix("fpr:").map(|r| r.trim_matches(':').to_string()))
        .expect("the new key's fingerprint");
    (home, fpr)
}

/// The release folder carries what the registry needs, signed, and the sums match the files.
fn assert_release_layout(dist: &Path, version: &str, gnupg: &Path) {
    let rel = dist.join("release").join(version);
    let name = |suffix: &str| format!("terraform-provider-hpc_{version}_{suffix}");
    let zips = PLATFORMS.map(|p| name(&format!("{p}.zip")));
    for f in zips
        .iter()
        .cloned()
        .chain([name("manifest.json"), name("SHA256SUMS"), name("SHA256SUMS.sig")])
    {
        assert!(rel.join(&f).is_file(), "{f} is missing from {}", rel.display());
    }
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(rel.join(name("manifest.json"))).expect("manifest"))
            .expect("manifest is JSON");
    assert_eq!(
        manifest["metadata"]["protocol_versions"],
        serde_json::json!(["6.0"]),
        "{manifest}"
    );
    let sums = std::fs::read_to_string(rel.join(name("SHA256SUMS"))).expect("sums");
    assert!(
        zips.iter().all(|z| sums.contains(z)) && sums.contains(&name("manifest.json")),
        "{sums}"
    );
    run(Command::new("sha256sum")
        .arg("--check")
        .arg("--strict")
        .arg(name("SHA256SUMS"))
        .current_dir(&rel));
    run(Command::new("gpg")
        .env("GNUPGHOME", gnupg)
        .args(["--batch", "--verify"])
        .arg(rel.join(name("SHA256SUMS.sig")))
        .arg(rel.join(name("SHA256SUMS"))));
}

/// The installing guide's fenced hcl block holding `marker`.
fn guide_block(marker: &str) -> String {
    let guide = std::fs::read_to_string(repo_root().join(INSTALL_GUIDE)).expect(INSTALL_GUIDE);
    guide
        .split("```hcl\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("{INSTALL_GUIDE} has no hcl block with {marker}"))
        .to_string()
}

/// The quickstart in a workspace whose CLI configuration is `cli` (no dev_overrides).
fn quickstart(name: &str, emu: &Emulator, cli: &str, mirror_cert: &Path) -> Workspace {
    let ws = Workspace::new(name, emu).env("SSL_CERT_FILE", &mirror_cert.display().to_string());
    ws.cli_config(cli);
    for f in ["main.tf", "variables.tf", "outputs.tf"] {
        std::fs::copy(repo_root().join("examples/quickstart").join(f), ws.dir.join(f)).expect("copying the quickstart");
    }
    ws
}

fn locked_version(ws: &Workspace) -> (String, Vec<String>) {
    let lock = std::fs::read_to_string(ws.dir.join(".terraform.lock.hcl")).expect("init wrote no lock file");
    let block = lock
        .split(&format!("provider \"{ADDRESS}\""))
        .nth(1)
        .unwrap_or_else(|| panic!("the lock file does not pin {ADDRESS}:\n{lock}"));
    let version = block
        .lines()
        .find_map(|l| l.trim().strip_prefix("version")?.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no version in the lock file:\n{lock}"));
    let hashes = block
        .lines()
        .map(|l| l.trim().trim_end_matches(',').trim_matches('"'))
        .take_while(|l| *l != "}")
        .filter(|l| l.starts_with("h1:") || l.starts_with("zh:"))
        .map(str::to_string)
        .collect();
    (version, hashes)
}

/// The h1 hash the mirror publishes for `version` on `platform`.
fn mirror_hash(mirror: &Path, version: &str, platform: &str) -> String {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(mirror.join(format!("{version}.json"))).expect("version index"))
            .expect("the version index is JSON");
    doc["archives"][platform]["hashes"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no hash in {doc}"))
        .to_string()
}

/// The installing guide's one-line shell command starting with `prefix`.
fn guide_command(prefix: &str) -> String {
    let guide = std::fs::read_to_string(repo_root().join(INSTALL_GUIDE)).expect(INSTALL_GUIDE);
    guide
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("{INSTALL_GUIDE} shows no command starting with {prefix:?}"))
        .to_string()
}

/// The installed provider plans the quickstart against the emulator (an AMI it knows).
fn plan_quickstart(ws: &Workspace) {
    let out = ws.ok(&[
        "plan",
        "-input=false",
        "-no-color",
        "-var=ami_id=ami-03cf127a",
        "-var=wait_for_ready=false",
    ]);
    assert!(
        out.stdout.contains("hpc_cluster.this will be created"),
        "{}",
        out.text()
    );
}

/// Packages release `version` for every platform: the host's build and the linux_arm64 one.
fn package_both(dist: &Path, version: &str, signing: (&Path, &str)) {
    let (amd64, arm64) = (provider_dir().join("terraform-provider-hpc"), arm64_provider());
    package_release(
        dist,
        version,
        &[("linux_amd64", &amd64), ("linux_arm64", &arm64)],
        Some(signing),
    );
    assert_release_layout(dist, version, signing.0);
}

/// The linux_arm64 package's provider, unzipped from the mirror and started under qemu-user as
/// Terraform starts a plugin, answers the handshake for protocol 6 and listens where it says.
fn assert_arm64_package_serves(mirror: &Path, version: &str, dir: &Path) {
    let zip = mirror.join(format!("terraform-provider-hpc_{version}_linux_arm64.zip"));
    let out = dir.join(format!("arm64-{version}"));
    run(Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&zip)
        .arg(&out));
    let binary = out.join(format!("terraform-provider-hpc_v{version}"));
    // A zip keeps no file modes: Terraform makes what it unpacks executable, and so does this.
    run(Command::new("chmod").arg("755").arg(&binary));
    let head = std::fs::read(&binary).unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    assert_eq!(
        head.get(18..20),
        Some(&[0xB7, 0][..]),
        "the linux_arm64 package is not an aarch64 binary"
    );
    let mut child = Command::new("qemu-aarch64")
        .args(["-L", "/usr/aarch64-linux-gnu"])
        .arg(&binary)
        .env(tfplugin::serve::MAGIC_COOKIE_KEY, tfplugin::serve::MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "6")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the linux_arm64 provider under qemu-aarch64");
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = BufReader::new(stdout).read_line(&mut line);
    }
    let listening = line
        .strip_prefix("1|6|tcp|")
        .and_then(|rest| rest.split('|').next())
        .map(|addr| TcpStream::connect(addr).is_ok());
    let _ = child.kill();
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
    }
    let _ = child.wait();
    assert_eq!(
        listening,
        Some(true),
        "the linux_arm64 provider under qemu did not answer Terraform's handshake: {line:?}\n{stderr}"
    );
}

/// A binary of another architecture is refused under a platform's name, and nothing is written.
fn assert_wrong_architecture_refused(dir: &Path) {
    let dist = dir.join("wrong-arch");
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/release.py"))
        .args(["--version", "0.3.0", "--unsigned", "--out"])
        .arg(&dist)
        .arg("--binary")
        .arg(format!(
            "linux_arm64={}",
            provider_dir().join("terraform-provider-hpc").display()
        ))
        .output()
        .expect("running scripts/release.py");
    let text = output_text(&out);
    assert!(
        !out.status.success(),
        "an x86_64 binary was packaged as linux_arm64:\n{text}"
    );
    assert!(text.contains("built for linux_amd64, not linux_arm64"), "{text}");
    assert!(!dist.exists(), "a refused release wrote {}", dist.display());
}

#[test]
fn the_provider_installs_from_its_release_mirror_upgrades_and_refuses_a_tampered_package() {
    require_tools();
    let emu = Emulator::start();
    let dir = scratch_dir("install");
    let dist = dir.join("dist");
    let (gnupg, key) = signing_key(&dir);
    assert_wrong_architecture_refused(&dir);
    package_both(&dist, "0.1.0", (&gnupg, &key));
    let mirror_root = dist.join("mirror");
    let mirror = mirror_root.join(ADDRESS);
    assert_arm64_package_serves(&mirror, "0.1.0", &dir);
    let https = HttpsFiles::serve(&mirror_root, &dir);

    // Installed from the network mirror with the guide's configuration, pinned in the lock file.
    let network_cli = guide_block("network_mirror").replace(GUIDE_MIRROR_URL, &https.url);
    let ws = quickstart("install-network", &emu, &network_cli, &https.cert);
    ws.ok(&["init", "-input=false", "-no-color"]);
    let (version, hashes) = locked_version(&ws);
    assert_eq!(version, "0.1.0");
    assert!(
        hashes.contains(&mirror_hash(&mirror, "0.1.0", "linux_amd64")),
        "lock hashes {hashes:?}"
    );
    let installed = ws
        .dir
        .join(".terraform/providers")
        .join(ADDRESS)
        .join("0.1.0/linux_amd64/terraform-provider-hpc_v0.1.0");
    assert!(installed.is_file(), "{} is not installed", installed.display());
    plan_quickstart(&ws);

    // A team working on both platforms locks both from the mirror, as the guide shows.
    let lock = guide_command("terraform providers lock").replace(GUIDE_MIRROR_URL, &https.url);
    let args: Vec<&str> = lock.split_whitespace().skip(1).collect();
    ws.ok(&args);
    let (version, hashes) = locked_version(&ws);
    assert_eq!(version, "0.1.0");
    for platform in PLATFORMS {
        assert!(
            hashes.contains(&mirror_hash(&mirror, "0.1.0", platform)),
            "the lock file lacks {platform}'s hash: {hashes:?}"
        );
    }

    // A second release lands in the mirror: init keeps the locked one, init -upgrade takes it.
    package_both(&dist, "0.2.0", (&gnupg, &key));
    ws.ok(&["init", "-input=false", "-no-color"]);
    assert_eq!(
        locked_version(&ws).0,
        "0.1.0",
        "init without -upgrade moved off the locked version"
    );
    ws.ok(&["init", "-upgrade", "-input=false", "-no-color"]);
    let (version, hashes) = locked_version(&ws);
    assert_eq!(version, "0.2.0");
    assert!(
        hashes.contains(&mirror_hash(&mirror, "0.2.0", "linux_amd64")),
        "lock hashes {hashes:?}"
    );
    plan_quickstart(&ws);

    // The same folder as a filesystem mirror, with the guide's other block.
    let fs_cli = guide_block("filesystem_mirror").replace(GUIDE_MIRROR_PATH, &mirror_root.display().to_string());
    let local = quickstart("install-filesystem", &emu, &fs_cli, &https.cert);
    local.ok(&["init", "-input=false", "-no-color"]);
    assert_eq!(locked_version(&local).0, "0.2.0");

    // Someone replaces 0.2.0 in the mirror with another, self-consistent package: a checkout that
    // carries the lock file refuses it.
    let other = provider_dir().join("hpc-node");
    package_release(&dist, "0.2.0", &[("linux_amd64", &other)], None);
    assert_ne!(
        mirror_hash(&mirror, "0.2.0", "linux_amd64"),
        hashes[0],
        "the tampered package has the same hash"
    );
    let checkout = quickstart("install-tampered", &emu, &network_cli, &https.cert);
    std::fs::copy(
        ws.dir.join(".terraform.lock.hcl"),
        checkout.dir.join(".terraform.lock.hcl"),
    )
    .expect("copying the lock");
    let refused = checkout.tf(&["init", "-input=false", "-no-color"]);
    assert!(
        !refused.success,
        "a package that does not match the lock file was installed:\n{}",
        refused.text()
    );
    assert!(
        refused.text().contains("checksum") || refused.text().contains("does not match"),
        "the refusal does not say why:\n{}",
        refused.text()
    );
    assert!(
        !checkout
            .dir
            .join(".terraform/providers")
            .join(ADDRESS)
            .join("0.2.0")
            .exists(),
        "the refused package was left installed"
    );
}
