//! A real local bake: debootstrap Debian 12, install slurm, munge, efa (distro) and the
//! hpc-node agent in a chroot, write a bootable GPT disk, boot it under qemu and run every
//! component's checks inside (munge round trip, `srun hostname`, agent version, EFA
//! libraries); then a re-bake after changing only the last step reuses every earlier layer,
//! and the disk is published to the emulator.
//!
//! Needs root and debootstrap, fdisk, dosfstools, mtools, grub-efi-amd64-bin, zstd,
//! qemu-system-x86 and ovmf (`.ci/run` installs them) and access to a Debian mirror.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use acceptance_tests::{hpc_image_bin, hpc_image_command, missing_root_and_tools, output_text, repo_root, Emulator};
use serde_json::Value;

const TOOLS: &[(&str, &str)] = &[
    ("debootstrap", "debootstrap"),
    ("sfdisk", "fdisk"),
    ("mkfs.vfat", "dosfstools"),
    ("mcopy", "mtools"),
    ("grub-mkstandalone", "grub-efi-amd64-bin"),
    ("zstd", "zstd"),
    ("qemu-system-x86_64", "qemu-system-x86"),
];

/// Fails (never skips) with what is missing, so a run by hand says what to install.
fn require_bake_prerequisites() {
    let mut missing = missing_root_and_tools("debootstrap, chroot and mount need it", TOOLS);
    if !Path::new("/usr/share/OVMF/OVMF_CODE_4M.fd").is_file() {
        missing.push("/usr/share/OVMF/OVMF_CODE_4M.fd (apt-get install ovmf)".to_string());
    }
    assert!(
        missing.is_empty(),
        "the image bake test needs: {}\n(.ci/run installs all of these)",
        missing.join(", ")
    );
}

fn hpc_image(dir: &Path, emu: Option<&Emulator>, args: &[&str]) -> Output {
    hpc_image_command(dir, emu)
        .args(args)
        .output()
        .expect("running hpc-image")
}

fn text(o: &Output) -> String {
    output_text(o)
}

fn report(out_dir: &Path) -> Value {
    let bytes = std::fs::read(out_dir.join("build-report.json")).expect("build-report.json");
    serde_json::from_slice(&bytes).expect("report json")
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default().to_string(),
                s["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// How many mount points are at or under `dir`.
fn mounts_under(dir: &Path) -> usize {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = dir.to_string_lossy().into_owned();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .count()
}

struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[test]
fn bake_verify_rebake_and_publish_a_debian_slurm_image() {
    require_bake_prerequisites();
    let template = repo_root().join("image-builder/templates/debian-slurm.pkr.hcl");
    let base = PathBuf::from("/var/tmp").join(format!("hpc-image-bake-test-{}", std::process::id()));
    let cache = base.join("cache");
    let out = base.join("out");
    let _cleanup = Cleanup(vec![base.clone()]);
    std::fs::create_dir_all(&base).expect("scratch");
    let t = template.to_str().expect("utf-8");
    let (cache_s, out_s) = (cache.to_str().expect("utf-8"), out.to_str().expect("utf-8"));

    // 1. The full bake, verified by booting it.
    let first = hpc_image(
        &base,
        None,
        &[
            "build",
            t,
            "--output",
            out_s,
            "--cache-dir",
            cache_s,
            "-var",
            "motd=first bake",
        ],
    );
    assert!(first.status.success(), "the bake failed:\n{}", text(&first));
    let r1 = report(&out);
    let ids: Vec<String> = statuses(&r1).into_iter().map(|(id, _)| id).collect();
    assert_eq!(
        ids[..7],
        ["base", "munge", "slurm", "efa", "mfa", "hpc-node", "health-checks"],
        "{r1}"
    );
    assert!(ids[7].starts_with("shell@"), "{r1}");
    assert_eq!(ids[8..], ["finalize", "disk"], "{r1}");
    assert_eq!(r1["layers_reused"], 0, "a fresh cache reused layers: {r1}");
    assert_eq!(r1["layers_built"], 8, "{r1}");
    let checks = r1["verify"]["checks"].as_array().expect("verification ran");
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(
        names,
        ["base", "munge", "slurm", "efa", "mfa", "hpc-node", "health-checks"],
        "{r1}"
    );
    for c in checks {
        assert_eq!(c["ok"], true, "check {} failed:\n{}", c["name"], c["output"]);
    }
    let slurm = checks.iter().find(|c| c["name"] == "slurm").expect("slurm check");
    assert!(slurm["output"].as_str().is_some_and(|o| o.contains("srun")), "{slurm}");
    let disk = out.join("disk.raw");
    assert_eq!(std::fs::metadata(&disk).map(|m| m.len()).ok(), Some(4 << 30));

    // 2. Only the last step changed: every earlier layer comes from the cache.
    let second = hpc_image(
        &base,
        None,
        &[
            "build",
            t,
            "--output",
            out_s,
            "--cache-dir",
            cache_s,
            "-var",
            "motd=second bake",
            "-var",
            "verify=false",
        ],
    );
    assert!(second.status.success(), "the re-bake failed:\n{}", text(&second));
    let r2 = report(&out);
    let st = statuses(&r2);
    for (id, status) in &st[..7] {
        assert_eq!(status, "cached", "{id} was rebuilt: {r2}");
    }
    assert!(st[7].0.starts_with("shell@") && st[7].1 == "built", "{r2}");
    assert_eq!(
        (r2["layers_reused"].as_u64(), r2["layers_built"].as_u64()),
        (Some(7), Some(1)),
        "{r2}"
    );
    assert!(
        text(&second).contains("restoring cached layers up to component \"health-checks\""),
        "{}",
        text(&second)
    );

    // 3. Ctrl-C in the middle of a step: the step's processes stop, the chroot mounts are
    //    undone and the work directory is removed (the base layer comes from the cache).
    let slow = base.join("slow.pkr.hcl");
    std::fs::write(
        &slow,
        "source \"local\" \"debian\" {\n  verify = false\n}\nbuild {\n  sources = [\"source.local.debian\"]\n  provisioner \"shell\" {\n    inline = [\"sleep 600\"]\n  }\n}\n",
    )
    .expect("template");
    let out3 = base.join("out-interrupted");
    let child = Command::new(hpc_image_bin())
        .args([
            "build",
            slow.to_str().expect("utf-8"),
            "--output",
            out3.to_str().expect("utf-8"),
            "--cache-dir",
            cache_s,
        ])
        .current_dir(&base)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("hpc-image");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(out3.join("build.log"))
        .unwrap_or_default()
        .contains("provisioner \"shell\"")
    {
        assert!(started.elapsed().as_secs() < 180, "the slow step never started");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        mounts_under(&out3) > 0,
        "the step should be running in a mounted chroot"
    );
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    let interrupted = child.wait_with_output().expect("wait");
    let msg = String::from_utf8_lossy(&interrupted.stderr).into_owned();
    assert!(!interrupted.status.success(), "{msg}");
    assert!(msg.contains("interrupted"), "{msg}");
    assert_eq!(mounts_under(&out3), 0, "mounts were left under {}", out3.display());
    assert!(!out3.join("work").exists(), "the work directory was left behind");
    let sleeping = Command::new("pgrep")
        .args(["-f", "^sleep 600$"])
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    assert!(
        sleeping.is_empty(),
        "the interrupted step's processes were left running"
    );

    // 4. Publish the baked disk: only its data blocks travel.
    let emu = Emulator::start();
    let published = hpc_image(
        &base,
        Some(&emu),
        &[
            "publish",
            t,
            "--disk",
            disk.to_str().expect("utf-8"),
            "-var",
            "regions=[\"us-east-1\", \"us-west-2\"]",
        ],
    );
    assert!(published.status.success(), "publish failed:\n{}", text(&published));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest")).expect("json");
    let upload = &manifest["builds"][0]["upload"];
    let (sent, total) = (
        upload["blocks_uploaded"].as_u64().unwrap_or(0),
        upload["blocks_total"].as_u64().unwrap_or(0),
    );
    assert_eq!(total, 8192, "{manifest}");
    assert!(
        sent > 100 && sent < total / 2,
        "sent {sent} of {total} blocks: {manifest}"
    );
    assert_eq!(emu.calls().get("ebs:PutSnapshotBlock"), Some(&sent));
    for region in ["us-east-1", "us-west-2"] {
        assert!(
            manifest["builds"][0]["images"][region]
                .as_str()
                .is_some_and(|a| a.starts_with("ami-")),
            "{manifest}"
        );
    }
    let components: Vec<&str> = manifest["builds"][0]["components"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        components,
        ["munge", "slurm", "efa", "mfa", "hpc-node", "health-checks"]
    );
    eprintln!(
        "bake {:.0}s (verify {:.0}s), re-bake {:.0}s, upload {sent}/{total} blocks in {:.1}s",
        r1["seconds"].as_f64().unwrap_or(0.0),
        r1["verify"]["seconds"].as_f64().unwrap_or(0.0),
        r2["seconds"].as_f64().unwrap_or(0.0),
        upload["seconds"].as_f64().unwrap_or(0.0)
    );
}
