//! Bad hpc_lustre_fs configurations are rejected at plan time, each with a diagnostic that
//! names the resource and the attribute, and without a single mutating AWS call.

use acceptance_tests::{Emulator, Workspace};

/// (resource name, its body, a word of the attribute the error must point at, a phrase of the message)
fn cases(subnet: &str) -> Vec<(&'static str, String, &'static str, &'static str)> {
    let p2 = |extra: &str| {
        format!(
            "storage_capacity = 1200\n  deployment_type = \"PERSISTENT_2\"\n  per_unit_storage_throughput = 125\n  subnet_ids = [\"{subnet}\"]\n{extra}"
        )
    };
    let s2 = |extra: &str| {
        format!("storage_capacity = 1200\n  deployment_type = \"SCRATCH_2\"\n  subnet_ids = [\"{subnet}\"]\n{extra}")
    };
    vec![
        (
            "bad_capacity",
            format!("storage_capacity = 1000\n  deployment_type = \"PERSISTENT_2\"\n  per_unit_storage_throughput = 125\n  subnet_ids = [\"{subnet}\"]"),
            "storage_capacity",
            "1000",
        ),
        ("bad_deployment", format!("storage_capacity = 1200\n  deployment_type = \"PERSISTENT_3\"\n  subnet_ids = [\"{subnet}\"]"), "deployment_type", "PERSISTENT_3"),
        (
            "bad_throughput",
            format!("storage_capacity = 1200\n  deployment_type = \"PERSISTENT_2\"\n  per_unit_storage_throughput = 200\n  subnet_ids = [\"{subnet}\"]"),
            "per_unit_storage_throughput",
            "200",
        ),
        ("scratch_throughput", s2("  per_unit_storage_throughput = 125"), "per_unit_storage_throughput", "SCRATCH_2"),
        ("hdd_on_persistent2", p2("  storage_type = \"HDD\""), "storage_type", "HDD"),
        (
            "hdd_without_cache",
            format!("storage_capacity = 6000\n  deployment_type = \"PERSISTENT_1\"\n  storage_type = \"HDD\"\n  per_unit_storage_throughput = 12\n  subnet_ids = [\"{subnet}\"]"),
            "drive_cache_type",
            "drive_cache_type",
        ),
        ("metadata_on_scratch", s2("  metadata_configuration = { mode = \"AUTOMATIC\" }"), "metadata_configuration", "PERSISTENT_2"),
        ("bad_metadata_iops", p2("  metadata_configuration = { mode = \"USER_PROVISIONED\", iops = 2000 }"), "iops", "2000"),
        (
            "two_subnets",
            format!("storage_capacity = 1200\n  deployment_type = \"SCRATCH_2\"\n  subnet_ids = [\"{subnet}\", \"subnet-0123456789abcdef0\"]"),
            "subnet_ids",
            "subnet",
        ),
        ("bad_maintenance", s2("  weekly_maintenance_start_time = \"8:25:00\""), "weekly_maintenance_start_time", "8:25:00"),
        ("backups_on_scratch", s2("  automatic_backup_retention_days = 7"), "automatic_backup_retention_days", "SCRATCH"),
        ("bad_import_path", s2("  import_path = \"https://research-data\""), "import_path", "s3://"),
        ("export_without_import", s2("  export_path = \"s3://research-data/out\""), "export_path", "import_path"),
        (
            "repo_on_scratch1",
            format!("storage_capacity = 1200\n  subnet_ids = [\"{subnet}\"]\n  data_repository {{\n    file_system_path = \"/ns1\"\n    data_repository_path = \"s3://research-data/ns1\"\n  }}"),
            "data_repository",
            "SCRATCH_1",
        ),
        (
            "bad_log_destination",
            p2("  log_configuration = { level = \"WARN_ONLY\", destination = \"arn:aws:logs:us-east-1:123456789012:log-group:mylogs\" }"),
            "destination",
            "/aws/fsx",
        ),
        ("bad_root_squash", p2("  root_squash_configuration = { root_squash = \"root\" }"), "root_squash", "UID:GID"),
        ("reserved_tag", s2("  tags = { \"aws:owner\" = \"me\" }"), "tags", "aws:"),
        ("bad_timeout", s2("  timeouts {\n    create = \"forever\"\n  }"), "create", "not a duration"),
        ("efa_on_scratch", s2("  efa_enabled = true"), "efa_enabled", "PERSISTENT_2"),
        (
            "overlapping_repos",
            p2("  data_repository {\n    file_system_path = \"/a\"\n    data_repository_path = \"s3://research-data/a\"\n  }\n  data_repository {\n    file_system_path = \"/a/b\"\n    data_repository_path = \"s3://research-data/b\"\n  }"),
            "file_system_path",
            "/a",
        ),
    ]
}

#[test]
fn twenty_bad_configurations_are_rejected_at_plan_with_attribute_paths_and_no_aws_mutations() {
    let emu = Emulator::start();
    let subnet = emu.default_subnet();
    let ws = Workspace::new("validation", &emu);
    let cases = cases(&subnet);
    assert!(cases.len() >= 20);
    let body: String = cases
        .iter()
        .map(|(name, body, _, _)| format!("resource \"hpc_lustre_fs\" \"{name}\" {{\n  {body}\n}}\n\n"))
        .collect();
    ws.write(&body);
    emu.reset_calls();

    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success, "plan must fail:\n{}", out.text());
    let text = out.text();
    let blocks: Vec<&str> = text.split("Error: ").skip(1).collect();
    for (name, _, attr, phrase) in &cases {
        let hit = blocks
            .iter()
            .find(|b| b.contains(&format!("with hpc_lustre_fs.{name},")));
        let Some(block) = hit else {
            panic!("no diagnostic for hpc_lustre_fs.{name}:\n{text}")
        };
        assert!(
            block.contains(attr),
            "hpc_lustre_fs.{name}: diagnostic does not point at {attr}:\n{block}"
        );
        assert!(
            block.contains(phrase),
            "hpc_lustre_fs.{name}: diagnostic does not mention {phrase:?}:\n{block}"
        );
    }
    let mutating = emu.mutating_calls();
    assert!(
        mutating.is_empty(),
        "rejected plans must not change anything in AWS: {mutating:?}"
    );
    assert!(emu.file_systems().is_empty());
}

#[test]
fn bad_provider_settings_are_rejected_naming_the_setting() {
    let emu = Emulator::start();
    let ws = Workspace::new("provider-validation", &emu);
    ws.write_raw(
        r#"
terraform {
  required_providers {
    hpc = { source = "hpcforge/hpc" }
  }
}
provider "hpc" {
  region      = "Mars"
  max_retries = 1000
  assume_role {
    role_arn = "hpcforge"
  }
  endpoints {
    fsx = "localhost:4566"
  }
}
resource "hpc_lustre_fs" "x" {
  storage_capacity = 1200
  subnet_ids       = ["subnet-0123456789abcdef0"]
}
"#,
    );
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success);
    let text = out.text();
    for phrase in [
        "\"Mars\" is not an AWS region name",
        "max_retries out of range",
        "role_arn is not an IAM role ARN",
        "endpoint for fsx is not a URL",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?} in:\n{text}");
    }
    assert!(emu.mutating_calls().is_empty());
}

#[test]
fn running_the_provider_binary_by_hand_explains_itself() {
    let bin = acceptance_tests::provider_dir().join("terraform-provider-hpc");
    let out = std::process::Command::new(bin)
        .env_remove("TF_PLUGIN_MAGIC_COOKIE")
        .output()
        .expect("run provider");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not meant to be run directly") && err.contains("terraform init"),
        "{err}"
    );
}
