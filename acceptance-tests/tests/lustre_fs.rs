//! hpc_lustre_fs end to end: real terraform, real provider binary, local AWS emulator.

use acceptance_tests::{Emulator, Workspace};
use serde_json::json;

fn persistent(subnet: &str, capacity: u32, extra: &str) -> String {
    format!(
        r#"
resource "hpc_lustre_fs" "main" {{
  storage_capacity            = {capacity}
  deployment_type             = "PERSISTENT_2"
  per_unit_storage_throughput = 125
  subnet_ids                  = ["{subnet}"]
  tags                        = {{ Name = "research-scratch" }}
{extra}
}}

output "mount_command" {{
  value = hpc_lustre_fs.main.mount_command
}}
"#
    )
}

const REPO_NS1: &str = r#"
  data_repository {
    file_system_path     = "/ns1"
    data_repository_path = "s3://research-data/ns1"
    auto_import_events   = ["NEW", "CHANGED"]
  }
"#;

#[test]
fn basic_create_reads_back_everything_and_plans_clean() {
    let emu = Emulator::start();
    let ws = Workspace::new("basic", &emu);
    ws.write(&persistent(&emu.default_subnet(), 1200, REPO_NS1));
    ws.apply();

    let fs = ws.resource("hpc_lustre_fs.main");
    let id = fs["id"].as_str().expect("id").to_string();
    assert!(id.starts_with("fs-"), "{fs}");
    assert_eq!(fs["storage_capacity"], 1200);
    assert_eq!(fs["deployment_type"], "PERSISTENT_2");
    assert_eq!(fs["owner_id"], "123456789012");
    assert!(fs["vpc_id"].as_str().is_some_and(|v| v.starts_with("vpc-")), "{fs}");
    assert!(!fs["network_interface_ids"].as_array().expect("enis").is_empty());
    let mount = fs["mount_name"].as_str().expect("mount name");
    assert_eq!(mount.len(), 8, "PERSISTENT_2 mount names are 8 characters: {mount}");
    assert_eq!(
        fs["mount_command"],
        format!("sudo mkdir -p /fsx && sudo mount -t lustre -o relatime,flock {id}.fsx.us-east-1.amazonaws.com@tcp:/{mount} /fsx")
    );
    assert_eq!(
        fs["tags_all"],
        json!({"Name": "research-scratch", "project": "acceptance"})
    );
    assert_eq!(
        fs["skip_final_backup"], true,
        "FSx cannot back up a file system linked to S3"
    );
    let repo = &fs["data_repository"][0];
    assert!(
        repo["association_id"].as_str().is_some_and(|a| a.starts_with("dra-")),
        "{repo}"
    );
    assert_eq!(repo["imported_file_chunk_size"], 1024);

    // What AWS has matches: tags include the provider's default tags, the association exists.
    let remote = &emu.file_systems()[0];
    assert_eq!(remote["FileSystemId"], id.as_str());
    assert_eq!(remote["Lifecycle"], "AVAILABLE");
    let tags: Vec<String> = remote["Tags"]
        .as_array()
        .expect("tags")
        .iter()
        .map(|t| {
            format!(
                "{}={}",
                t["Key"].as_str().unwrap_or(""),
                t["Value"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(tags.contains(&"project=acceptance".to_string()), "{tags:?}");
    let (_, dras) = emu.fsx("DescribeDataRepositoryAssociations", json!({}));
    assert_eq!(dras["Associations"].as_array().map(Vec::len), Some(1), "{dras}");

    ws.assert_no_changes();
    ws.destroy();
    assert!(emu.file_systems().is_empty(), "destroy leaves no file system");
}

#[test]
fn growing_storage_and_changing_settings_update_in_place() {
    let emu = Emulator::start();
    let ws = Workspace::new("update", &emu);
    let subnet = emu.default_subnet();
    ws.write(&persistent(&subnet, 1200, ""));
    ws.apply();
    let before = ws.resource("hpc_lustre_fs.main");

    ws.write(&persistent(
        &subnet,
        2400,
        &format!("  weekly_maintenance_start_time = \"3:04:30\"\n  data_compression_type = \"LZ4\"\n{REPO_NS1}"),
    ));
    let plan = ws.plan();
    let text = plan.text();
    assert!(
        text.contains("update in-place") && !text.contains("must be replaced"),
        "{text}"
    );
    assert!(text.contains("1200 -> 2400"), "{text}");
    emu.reset_calls();
    ws.apply();

    let after = ws.resource("hpc_lustre_fs.main");
    assert_eq!(after["id"], before["id"], "same file system");
    assert_eq!(after["storage_capacity"], 2400);
    assert_eq!(after["weekly_maintenance_start_time"], "3:04:30");
    assert_eq!(after["data_compression_type"], "LZ4");
    assert_eq!(after["data_repository"].as_array().map(Vec::len), Some(1));
    let calls = emu.mutating_calls();
    assert_eq!(calls.get("fsx:CreateFileSystem"), None, "no new file system: {calls:?}");
    assert_eq!(calls.get("fsx:DeleteFileSystem"), None, "{calls:?}");
    assert_eq!(
        calls.get("fsx:UpdateFileSystem"),
        Some(&2),
        "settings and capacity are separate updates: {calls:?}"
    );
    assert_eq!(calls.get("fsx:CreateDataRepositoryAssociation"), Some(&1), "{calls:?}");
    assert_eq!(emu.file_systems()[0]["StorageCapacity"], 2400);
    ws.assert_no_changes();

    // Removing the data repository deletes only the association.
    ws.write(&persistent(
        &subnet,
        2400,
        "  weekly_maintenance_start_time = \"3:04:30\"\n  data_compression_type = \"LZ4\"\n",
    ));
    emu.reset_calls();
    ws.apply();
    let calls = emu.mutating_calls();
    assert_eq!(calls.get("fsx:DeleteDataRepositoryAssociation"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("fsx:DeleteFileSystem"), None, "{calls:?}");
    ws.assert_no_changes();
    ws.destroy();
}

#[test]
fn shrinking_or_changing_deployment_type_forces_replacement() {
    let emu = Emulator::start();
    let ws = Workspace::new("replace", &emu);
    let subnet = emu.default_subnet();
    ws.write(&persistent(&subnet, 2400, ""));
    ws.apply();
    let old_id = ws.resource("hpc_lustre_fs.main")["id"].clone();

    ws.write(&persistent(&subnet, 1200, ""));
    let text = ws.plan().text();
    assert!(text.contains("must be replaced"), "{text}");
    assert!(
        text.contains("storage_capacity") && text.contains("# forces replacement"),
        "{text}"
    );

    let scratch = format!(
        "resource \"hpc_lustre_fs\" \"main\" {{\n  storage_capacity = 2400\n  deployment_type = \"SCRATCH_2\"\n  subnet_ids = [\"{subnet}\"]\n  tags = {{ Name = \"research-scratch\" }}\n}}\n"
    );
    ws.write(&scratch);
    let text = ws.plan().text();
    assert!(
        text.contains("deployment_type") && text.contains("# forces replacement"),
        "{text}"
    );
    ws.apply();
    let new = ws.resource("hpc_lustre_fs.main");
    assert_ne!(new["id"], old_id);
    assert_eq!(new["deployment_type"], "SCRATCH_2");
    let remaining = emu.file_systems();
    assert_eq!(remaining.len(), 1, "the old file system was deleted: {remaining:?}");
    assert_eq!(remaining[0]["FileSystemId"], new["id"]);
    ws.destroy();
}

#[test]
fn import_by_id_then_plan_shows_no_changes() {
    let emu = Emulator::start();
    let subnet = emu.default_subnet();
    let body = persistent(&subnet, 1200, REPO_NS1);
    let creator = Workspace::new("import-src", &emu);
    creator.write(&body);
    creator.apply();
    let id = creator.resource("hpc_lustre_fs.main")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let original = creator.resource("hpc_lustre_fs.main");

    // An import block (Terraform 1.5+).
    let importer = Workspace::new("import-block", &emu);
    importer.write(&format!(
        "{body}\nimport {{\n  to = hpc_lustre_fs.main\n  id = \"{id}\"\n}}\n"
    ));
    let plan = importer.tf(&["plan", "-no-color", "-input=false"]);
    assert!(plan.success, "{}", plan.text());
    assert!(
        plan.stdout.contains("1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    importer.apply();
    importer.assert_no_changes();
    let imported = importer.resource("hpc_lustre_fs.main");
    for attr in [
        "id",
        "arn",
        "dns_name",
        "mount_name",
        "storage_capacity",
        "per_unit_storage_throughput",
        "kms_key_id",
        "tags",
        "tags_all",
        "data_repository",
        "skip_final_backup",
    ] {
        assert_eq!(
            imported[attr], original[attr],
            "imported {attr} matches the created one"
        );
    }

    // The import command.
    let cmd = Workspace::new("import-cmd", &emu);
    cmd.write(&body);
    cmd.ok(&["import", "-no-color", "-input=false", "hpc_lustre_fs.main", &id]);
    cmd.assert_no_changes();

    let bad = cmd.tf(&[
        "import",
        "-no-color",
        "-input=false",
        "hpc_lustre_fs.other",
        "not-an-id",
    ]);
    assert!(!bad.success);
    let bad2 = Workspace::new("import-bad", &emu);
    bad2.write(&body);
    let out = bad2.tf(&["import", "-no-color", "-input=false", "hpc_lustre_fs.main", "nope"]);
    assert!(
        !out.success && out.text().contains("is not an FSx file system id"),
        "{}",
        out.text()
    );
    creator.destroy();
}

#[test]
fn drift_out_of_band_shows_a_diff_and_is_corrected() {
    let emu = Emulator::start();
    let ws = Workspace::new("drift", &emu);
    ws.write(&persistent(&emu.default_subnet(), 1200, ""));
    ws.apply();
    let id = ws.resource("hpc_lustre_fs.main")["id"]
        .as_str()
        .expect("id")
        .to_string();

    let (status, body) = emu.fsx(
        "UpdateFileSystem",
        json!({"FileSystemId": id, "LustreConfiguration": {"WeeklyMaintenanceStartTime": "7:23:00"}}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = emu.fsx(
        "TagResource",
        json!({"ResourceARN": ws.resource("hpc_lustre_fs.main")["arn"], "Tags": [{"Key": "Name", "Value": "renamed"}]}),
    );
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(std::time::Duration::from_millis(700));

    // The weekly window is optional+computed: unset in config, so the new value is accepted;
    // the tag is configured, so it drifts back.
    let plan = ws.plan();
    let text = plan.text();
    assert_eq!(plan.code, Some(2), "{text}");
    assert!(text.contains("\"renamed\" -> \"research-scratch\""), "{text}");
    ws.apply();
    ws.assert_no_changes();
    let remote = &emu.file_systems()[0];
    assert!(remote["Tags"].to_string().contains("research-scratch"), "{remote}");
    ws.destroy();
}

#[test]
fn deleted_out_of_band_is_recreated() {
    let emu = Emulator::start();
    let ws = Workspace::new("disappears", &emu);
    ws.write(&persistent(&emu.default_subnet(), 1200, ""));
    ws.apply();
    let id = ws.resource("hpc_lustre_fs.main")["id"]
        .as_str()
        .expect("id")
        .to_string();

    let (status, body) = emu.fsx(
        "DeleteFileSystem",
        json!({"FileSystemId": id, "LustreConfiguration": {"SkipFinalBackup": true}}),
    );
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(std::time::Duration::from_millis(1500));

    let plan = ws.plan();
    assert_eq!(plan.code, Some(2), "{}", plan.text());
    assert!(
        plan.stdout.contains("1 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    ws.apply();
    let new_id = ws.resource("hpc_lustre_fs.main")["id"].clone();
    assert_ne!(new_id, json!(id));
    ws.destroy();
    assert!(emu.file_systems().is_empty());
}

#[test]
fn destroy_takes_a_final_backup_of_persistent_file_systems() {
    let emu = Emulator::start();
    let ws = Workspace::new("final-backup", &emu);
    ws.write(&persistent(
        &emu.default_subnet(),
        1200,
        "  final_backup_tags = { reason = \"teardown\" }\n",
    ));
    ws.apply();
    emu.reset_calls();
    ws.destroy();
    assert!(emu.file_systems().is_empty());
    let (_, backups) = emu.fsx("DescribeBackups", json!({}));
    let backups = backups["Backups"].as_array().cloned().unwrap_or_default();
    assert_eq!(backups.len(), 1, "one final backup: {backups:?}");
    assert!(backups[0]["Tags"].to_string().contains("teardown"), "{:?}", backups[0]);
}

#[test]
fn two_provider_aliases_act_in_two_accounts() {
    let emu = Emulator::start();
    let ws = Workspace::new("multi-account", &emu);
    // Each account has its own VPC and subnets.
    let research_subnet = emu.default_subnet_as(&emu.assume_role("arn:aws:iam::111111111111:role/hpcforge"));
    let teaching_subnet = emu.default_subnet_as(&emu.assume_role("arn:aws:iam::222222222222:role/hpcforge"));
    assert_ne!(research_subnet, teaching_subnet);
    emu.reset_calls();
    ws.write_raw(&format!(
        r#"
terraform {{
  required_providers {{
    hpc = {{ source = "hpcforge/hpc" }}
  }}
}}

provider "hpc" {{
  alias  = "research"
  region = "us-east-1"
  assume_role {{
    role_arn     = "arn:aws:iam::111111111111:role/hpcforge"
    session_name = "acceptance"
  }}
}}

provider "hpc" {{
  alias  = "teaching"
  region = "us-east-1"
  assume_role {{
    role_arn    = "arn:aws:iam::222222222222:role/hpcforge"
    external_id = "course-42"
  }}
}}

resource "hpc_lustre_fs" "research" {{
  provider         = hpc.research
  storage_capacity = 1200
  deployment_type  = "SCRATCH_2"
  subnet_ids       = ["{research_subnet}"]
}}

resource "hpc_lustre_fs" "teaching" {{
  provider         = hpc.teaching
  storage_capacity = 1200
  deployment_type  = "SCRATCH_2"
  subnet_ids       = ["{teaching_subnet}"]
}}
"#
    ));
    let out = ws.tf(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(out.success, "{}", out.text());
    let research = ws.resource("hpc_lustre_fs.research");
    let teaching = ws.resource("hpc_lustre_fs.teaching");
    assert_eq!(research["owner_id"], "111111111111");
    assert_eq!(teaching["owner_id"], "222222222222");
    assert!(research["arn"].as_str().is_some_and(|a| a.contains(":111111111111:")));
    assert!(
        emu.file_systems().is_empty(),
        "nothing was created in the caller's own account"
    );
    let assumed = emu.calls().get("sts:AssumeRole").copied().unwrap_or(0);
    assert!(assumed >= 2, "each alias assumed its role: {:?}", emu.calls());
    ws.assert_no_changes();
    ws.destroy();
}

#[test]
fn throttling_on_a_fifth_of_calls_still_converges() {
    let emu = Emulator::start();
    emu.seed(42);
    emu.add_fault(json!({"service": "fsx", "code": "ThrottlingException", "message": "Rate exceeded", "http_status": 400, "ratio": 0.2}));
    let ws = Workspace::new("throttle", &emu);
    let subnet = emu.default_subnet();
    ws.write(&persistent(&subnet, 1200, REPO_NS1));
    ws.apply();
    ws.assert_no_changes();
    ws.write(&persistent(&subnet, 2400, REPO_NS1));
    ws.apply();
    ws.destroy();
    let fired = emu.faults_fired();
    emu.clear_faults();
    assert!(emu.file_systems().is_empty());
    let calls = emu.calls();
    let fsx_calls: u64 = calls
        .iter()
        .filter(|(k, _)| k.starts_with("fsx:"))
        .map(|(_, n)| n)
        .sum();
    assert!(fsx_calls > 20, "enough calls for the faults to matter: {calls:?}");
    assert!(
        fired[0] * 10 >= fsx_calls,
        "about a fifth of {fsx_calls} calls were throttled, got {fired:?}"
    );
    assert!(fired[0] >= 3, "throttling really happened: {fired:?}");
}

#[test]
fn a_failed_file_system_fails_the_apply_with_fsx_details_and_is_tainted() {
    let emu = Emulator::start();
    let ws = Workspace::new("failed", &emu);
    ws.write(&persistent(&emu.default_subnet(), 1200, ""));
    // While the provider waits for AVAILABLE, FSx reports the file system FAILED.
    let port = emu.port;
    let saboteur = std::thread::spawn(move || {
        for _ in 0..200 {
            let probe = acceptance_tests::http(
                port,
                "POST",
                "/",
                &[
                    ("Content-Type", "application/x-amz-json-1.1"),
                    ("X-Amz-Target", "AWSSimbaAPIService_v20180301.DescribeFileSystems"),
                    ("Authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/fsx/aws4_request, SignedHeaders=host, Signature=0"),
                ],
                "{}",
            );
            let v: serde_json::Value = serde_json::from_str(&probe.body).unwrap_or_default();
            if let Some(id) = v["FileSystems"][0]["FileSystemId"].as_str() {
                let body = json!({"Lifecycle": "FAILED", "FailureDetails": {"Message": "The subnet has no free IP addresses"}});
                let r = acceptance_tests::http(
                    port,
                    "POST",
                    &format!("/_emulator/fsx/{id}/lifecycle"),
                    &[("Content-Type", "application/json")],
                    &body.to_string(),
                );
                return r.status;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        0
    });
    let out = ws.tf(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert_eq!(saboteur.join().ok(), Some(200), "the file system was forced to FAILED");
    assert!(!out.success);
    let text = out.text();
    assert!(
        text.contains("did not become available") && text.contains("no free IP addresses"),
        "{text}"
    );
    // Recorded (tainted), not leaked: the next plan replaces it.
    let plan = ws.plan().text();
    assert!(plan.contains("is tainted, so must be replaced"), "{plan}");
}

#[test]
fn release_policy_is_kept_on_the_file_system_for_the_node_agent() {
    let emu = Emulator::start();
    let ws = Workspace::new("release-policy", &emu);
    let subnet = emu.default_subnet();
    let policy = "  release_policy {\n    unaccessed_days = 30\n    usage_percent   = 85\n  }\n";
    ws.write(&persistent(&subnet, 1200, &format!("{REPO_NS1}{policy}")));
    ws.apply();
    let fs = ws.resource("hpc_lustre_fs.main");
    assert_eq!(
        fs["release_policy"],
        json!({"unaccessed_days": 30, "usage_percent": 85})
    );
    assert!(
        !fs["tags_all"].to_string().contains("hpcforge:"),
        "policy tags stay out of tags_all: {fs}"
    );
    let remote = emu.file_systems()[0]["Tags"].to_string();
    assert!(
        remote.contains("hpcforge:release-unaccessed-days") && remote.contains("\"85\""),
        "{remote}"
    );
    ws.assert_no_changes();
    ws.write(&persistent(
        &subnet,
        1200,
        &format!("{REPO_NS1}{}", policy.replace("30", "7")),
    ));
    ws.apply();
    assert!(emu.file_systems()[0]["Tags"].to_string().contains("\"7\""));
    ws.assert_no_changes();
    // Releasing needs somewhere for the data to stay.
    ws.write(&persistent(&subnet, 1200, policy));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(
        !out.success && out.text().contains("release_policy needs an S3 data repository"),
        "{}",
        out.text()
    );
    ws.write(&persistent(&subnet, 1200, REPO_NS1));
    ws.apply();
    assert!(
        !emu.file_systems()[0]["Tags"].to_string().contains("hpcforge:release"),
        "policy removed"
    );
    ws.destroy();
}

#[test]
fn empty_event_lists_read_back_as_written() {
    let emu = Emulator::start();
    let ws = Workspace::new("empty-events", &emu);
    ws.write(&persistent(
        &emu.default_subnet(),
        1200,
        r#"
  data_repository {
    file_system_path     = "/ns1"
    data_repository_path = "s3://research-data/ns1"
    auto_import_events   = ["NEW"]
    auto_export_events   = []
  }
"#,
    ));
    ws.apply();
    let fs = ws.resource("hpc_lustre_fs.main");
    assert_eq!(fs["data_repository"][0]["auto_export_events"], json!([]), "{fs}");
    assert_eq!(fs["data_repository"][0]["auto_import_events"], json!(["NEW"]), "{fs}");
    ws.assert_no_changes();
    ws.destroy();
}

#[test]
fn refreshing_many_file_systems_takes_a_few_calls_not_two_each() {
    let emu = Emulator::start();
    let ws = Workspace::new("many", &emu);
    ws.write(&format!(
        r#"
resource "hpc_lustre_fs" "many" {{
  count                    = 20
  storage_capacity         = 1200
  deployment_type          = "SCRATCH_2"
  file_system_type_version = "2.15"
  subnet_ids               = ["{}"]
  data_repository {{
    file_system_path     = "/data"
    data_repository_path = "s3://research-data/fs-${{count.index}}"
  }}
}}
"#,
        emu.default_subnet()
    ));
    ws.apply();
    for parallelism in ["-parallelism=1", "-parallelism=10"] {
        emu.reset_calls();
        let out = ws.ok(&["plan", "-no-color", "-input=false", "-detailed-exitcode", parallelism]);
        assert!(out.stdout.contains("No changes"), "{}", out.text());
        let calls = emu.calls();
        let fsx: u64 = calls
            .iter()
            .filter(|(k, _)| k.starts_with("fsx:"))
            .map(|(_, n)| n)
            .sum();
        // One view of the region (file systems + associations, 25 a page) instead of 2 calls each.
        assert!(
            fsx <= 4,
            "{parallelism}: {fsx} FSx calls for 20 file systems: {calls:?}"
        );
    }
    // A file system deleted behind Terraform's back is still noticed.
    let victim = ws.resource("hpc_lustre_fs.many[3]")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (status, _) = emu.fsx("DeleteFileSystem", json!({"FileSystemId": victim}));
    assert_eq!(status, 200);
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(
        out.stdout.contains("hpc_lustre_fs.many[3] will be created"),
        "{}",
        out.text()
    );
    ws.destroy();
}

/// The file systems and associations in the emulator.
fn fsx_counts(emu: &Emulator) -> (usize, usize) {
    let (_, dras) = emu.fsx("DescribeDataRepositoryAssociations", json!({}));
    let live = |v: &serde_json::Value| v["Lifecycle"] != "DELETING";
    (
        emu.file_systems().iter().filter(|f| live(f)).count(),
        dras["Associations"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|d| live(d)).count()),
    )
}

#[test]
fn a_provider_killed_inside_a_create_leaves_one_file_system_on_rerun() {
    // Slow enough that the kills land while the provider waits.
    let emu = Emulator::start_with(&["--fsx-create-delay", "3", "--fsx-update-delay", "3"]);
    let ws = Workspace::new("lustre-killed", &emu);
    ws.write(&persistent(&emu.default_subnet(), 1200, REPO_NS1));

    // Killed while the file system is being created, then while its association is.
    ws.apply_killed_after(&emu, "fsx:CreateFileSystem");
    assert_eq!(fsx_counts(&emu), (1, 0));
    ws.apply_killed_after(&emu, "fsx:CreateDataRepositoryAssociation");
    assert_eq!(fsx_counts(&emu), (1, 1), "the rerun made a second file system");

    ws.apply();
    assert_eq!(
        fsx_counts(&emu),
        (1, 1),
        "the rerun made a second file system or association"
    );
    let id = ws.resource("hpc_lustre_fs.main")["id"].clone();
    assert_eq!(
        emu.file_systems()[0]["FileSystemId"],
        id,
        "state holds the one file system"
    );
    ws.assert_no_changes();

    // Destroyed and made again with the same settings: a new file system, not the old one.
    ws.destroy();
    ws.apply();
    let again = ws.resource("hpc_lustre_fs.main")["id"].clone();
    assert_ne!(again, id, "the destroyed file system came back");
    assert_eq!(fsx_counts(&emu), (1, 1));
    ws.destroy();
}
