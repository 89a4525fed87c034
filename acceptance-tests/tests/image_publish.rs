//! hpc-image publish and the amazon-ebs builder against the emulator: the real binary uploads
//! a disk through the EBS direct APIs, registers, copies and shares the image; a re-run
//! changes nothing; failures leave nothing behind.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Output;

use acceptance_tests::{hpc_image_command, xml_values, Emulator};
use serde_json::{json, Value};

const BLOCK: u64 = 512 * 1024;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpc-image-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A sparse 2 GiB disk with data in `blocks` 512 KiB blocks; returns its path.
fn sparse_disk(dir: &Path, blocks: &[u64]) -> PathBuf {
    let path = dir.join("disk.raw");
    let mut f = std::fs::File::create(&path).expect("disk");
    f.set_len(2 << 30).expect("size");
    for (n, b) in blocks.iter().enumerate() {
        f.seek(SeekFrom::Start(b * BLOCK)).expect("seek");
        f.write_all(&vec![(n % 250 + 1) as u8; BLOCK as usize]).expect("write");
    }
    path
}

fn template(dir: &Path, publish: &str) -> PathBuf {
    let path = dir.join("image.pkr.hcl");
    std::fs::write(
        &path,
        format!(
            r#"source "local" "debian" {{}}

build {{
  sources = ["source.local.debian"]
  component "munge" {{}}
}}

publish {{
{publish}
}}
"#
        ),
    )
    .expect("template");
    path
}

fn hpc_image(emu: &Emulator, dir: &Path, args: &[&str]) -> Output {
    hpc_image_command(dir, Some(emu))
        .args(args)
        .output()
        .expect("running hpc-image")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn images_named(emu: &Emulator, region: &str, name: &str) -> Vec<String> {
    let xml = emu.ec2_in(
        region,
        &format!("Action=DescribeImages&Owner.1=self&Filter.1.Name=name&Filter.1.Value.1={name}"),
    );
    xml_values(&xml, "imageId")
}

fn own_snapshots(emu: &Emulator) -> Vec<String> {
    xml_values(&emu.ec2("Action=DescribeSnapshots&Owner.1=self"), "snapshotId")
}

const PUBLISH: &str = r#"  ami_name            = "hpcforge-test-image"
  description         = "hpcforge test image"
  regions             = ["us-east-1", "us-west-2", "eu-west-1"]
  share_with_accounts = ["111122223333"]
  kms_key_id          = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
  tags                = { team = "research" }
  upload_concurrency  = 4"#;

#[test]
fn publish_uploads_only_data_blocks_registers_copies_shares_and_reruns_change_nothing() {
    let emu = Emulator::start();
    let dir = scratch("publish");
    let data_blocks = [0, 1, 2, 100, 2047, 4095];
    let disk = sparse_disk(&dir, &data_blocks);
    let t = template(&dir, PUBLISH);
    let manifest = dir.join("manifest.json");
    let args = [
        "publish",
        t.to_str().expect("utf-8"),
        "--disk",
        "disk.raw",
        "--manifest",
        "manifest.json",
    ];
    let out = hpc_image(&emu, &dir, &args);
    assert!(out.status.success(), "publish failed:\n{}", text(&out));
    assert!(disk.is_file());

    // Only the blocks with data were sent: 6 of 4096.
    let calls = emu.calls();
    assert_eq!(calls.get("ebs:StartSnapshot"), Some(&1), "{calls:?}");
    assert_eq!(
        calls.get("ebs:PutSnapshotBlock"),
        Some(&(data_blocks.len() as u64)),
        "{calls:?}"
    );
    assert_eq!(calls.get("ebs:CompleteSnapshot"), Some(&1), "{calls:?}");
    assert!(text(&out).contains("6 of 4096 blocks sent"), "{}", text(&out));

    // Found by name in every region, tagged, shared.
    let m: Value = serde_json::from_slice(&std::fs::read(&manifest).expect("manifest")).expect("json");
    let build = &m["builds"][0];
    for region in ["us-east-1", "us-west-2", "eu-west-1"] {
        let found = images_named(&emu, region, "hpcforge-test-image");
        assert_eq!(found.len(), 1, "{region}: {found:?}");
        assert_eq!(
            build["images"][region],
            json!(found[0]),
            "manifest for {region}: {build}"
        );
        let xml = emu.ec2_in(region, &format!("Action=DescribeImages&ImageId.1={}", found[0]));
        assert!(
            xml.contains("<key>team</key>") && xml.contains("<value>research</value>"),
            "{region}: {xml}"
        );
        assert!(xml.contains("<bootMode>uefi</bootMode>"), "{region}: {xml}");
        let perms = emu.ec2_in(
            region,
            &format!(
                "Action=DescribeImageAttribute&ImageId={}&Attribute=launchPermission",
                found[0]
            ),
        );
        assert!(perms.contains("111122223333"), "{region}: {perms}");
    }
    assert_eq!(build["builder_type"], json!("local"));
    assert_eq!(build["components"][0]["name"], json!("munge"));
    assert_eq!(build["upload"]["blocks_uploaded"], json!(6));
    assert_eq!(build["upload"]["blocks_total"], json!(4096));
    assert!(
        build["artifact_id"]
            .as_str()
            .is_some_and(|a| a.contains("us-west-2:ami-")),
        "{build}"
    );
    assert_eq!(build["template_sha256"].as_str().map(str::len), Some(64));

    // The uploaded blocks read back as written (checksums verified by the emulator on the way in).
    let snapshot = build["upload"]["snapshot_id"]
        .as_str()
        .expect("snapshot id")
        .to_string();
    let snap_xml = emu.ec2(&format!("Action=DescribeSnapshots&SnapshotId.1={snapshot}"));
    assert!(snap_xml.contains("<status>completed</status>"), "{snap_xml}");
    assert!(snap_xml.contains("<encrypted>true</encrypted>"), "{snap_xml}");

    // Again: nothing is uploaded, registered or copied.
    emu.reset_calls();
    let again = hpc_image(&emu, &dir, &args);
    assert!(again.status.success(), "second publish failed:\n{}", text(&again));
    let mutating = emu.mutating_calls();
    for call in [
        "ebs:StartSnapshot",
        "ebs:PutSnapshotBlock",
        "ec2:RegisterImage",
        "ec2:CopyImage",
    ] {
        assert_eq!(mutating.get(call), None, "a re-run made {call}: {mutating:?}");
    }
    for region in ["us-east-1", "us-west-2", "eu-west-1"] {
        assert_eq!(images_named(&emu, region, "hpcforge-test-image").len(), 1, "{region}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_registration_leaves_no_snapshot_behind() {
    let emu = Emulator::start();
    let dir = scratch("register-fails");
    sparse_disk(&dir, &[0, 7]);
    let t = template(&dir, "  ami_name = \"hpcforge-broken\"\n  regions  = [\"us-east-1\"]");
    emu.add_fault(
        json!({"service": "ec2", "action": "RegisterImage", "code": "InvalidParameterValue",
                         "message": "injected: registration refused", "count": 1}),
    );
    let out = hpc_image(
        &emu,
        &dir,
        &["publish", t.to_str().expect("utf-8"), "--disk", "disk.raw"],
    );
    assert!(!out.status.success(), "publish should fail:\n{}", text(&out));
    let msg = text(&out);
    assert!(
        msg.contains("registering the image") && msg.contains("injected: registration refused"),
        "{msg}"
    );
    assert!(msg.contains("deleted"), "{msg}");
    assert_eq!(emu.faults_fired(), vec![1]);
    emu.clear_faults();
    assert_eq!(own_snapshots(&emu), Vec::<String>::new(), "a snapshot was left behind");
    assert!(images_named(&emu, "us-east-1", "hpcforge-broken").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn throttled_block_uploads_are_retried_until_the_image_is_published() {
    let emu = Emulator::start();
    let dir = scratch("throttled");
    let blocks: Vec<u64> = (0..40).map(|i| i * 3).collect();
    sparse_disk(&dir, &blocks);
    let t = template(
        &dir,
        "  ami_name = \"hpcforge-throttled\"\n  regions  = [\"us-east-1\"]",
    );
    emu.seed(7);
    emu.add_fault(
        json!({"service": "ebs", "action": "PutSnapshotBlock", "code": "ThrottlingException",
                         "http_status": 429, "ratio": 0.25}),
    );
    let out = hpc_image(
        &emu,
        &dir,
        &["publish", t.to_str().expect("utf-8"), "--disk", "disk.raw"],
    );
    let fired = emu.faults_fired();
    emu.clear_faults();
    assert!(out.status.success(), "publish failed:\n{}", text(&out));
    assert!(fired[0] > 0, "no throttling was injected: {fired:?}");
    assert_eq!(images_named(&emu, "us-east-1", "hpcforge-throttled").len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn amazon_ebs_build_removes_its_instance_key_and_security_group_when_ssh_never_answers() {
    let emu = Emulator::start();
    let dir = scratch("ebs-builder");
    let path = dir.join("ebs.pkr.hcl");
    std::fs::write(
        &path,
        r#"source "amazon-ebs" "gpu" {
  region        = "us-east-1"
  instance_type = "c6i.large"
  source_ami    = "ami-03cf127a"
  ssh_cidrs     = ["192.0.2.10/32"]
  ssh_timeout   = "2s"
}

build {
  sources = ["source.amazon-ebs.gpu"]
  component "munge" {}
}

publish {
  ami_name = "hpcforge-ebs-test"
  regions  = ["us-east-1"]
}
"#,
    )
    .expect("template");
    let out = hpc_image(&emu, &dir, &["build", path.to_str().expect("utf-8"), "--output", "out"]);
    let msg = text(&out);
    assert!(!out.status.success(), "the build should fail without SSH:\n{msg}");
    assert!(msg.contains("could not connect over SSH"), "{msg}");
    assert!(
        msg.contains("builder instance, key pair and security group removed"),
        "{msg}"
    );

    // What it made, it removed: the instance is terminated, no key pair or group remains.
    let calls = emu.calls();
    assert_eq!(calls.get("ec2:RunInstances"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("ec2:CreateKeyPair"), Some(&1), "{calls:?}");
    let instances = emu.ec2("Action=DescribeInstances&Filter.1.Name=tag:hpcforge:builder&Filter.1.Value.1=hpc-image");
    let states = xml_values(&instances, "name");
    assert!(!states.is_empty(), "the builder instance is not visible: {instances}");
    assert!(states.iter().any(|s| s == "terminated"), "{states:?}");
    assert!(
        !states
            .iter()
            .any(|s| s == "running" || s == "pending" || s == "stopped"),
        "{states:?}"
    );
    let keys = emu.ec2("Action=DescribeKeyPairs");
    assert!(!keys.contains("hpc-image-"), "a key pair was left: {keys}");
    let groups = emu.ec2("Action=DescribeSecurityGroups");
    assert!(
        !groups.contains("<groupName>hpc-image-"),
        "a security group was left: {groups}"
    );
    assert!(images_named(&emu, "us-east-1", "hpcforge-ebs-test").is_empty());
    assert!(
        !dir.join("out/work/builder-key").exists(),
        "the private key file was left on disk"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
