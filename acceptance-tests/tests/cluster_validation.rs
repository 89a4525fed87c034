//! Bad hpc_cluster and hpc_partition configurations are rejected at plan time with the
//! attribute named and without a single mutating AWS call.

use acceptance_tests::{Emulator, Workspace};

const AMI: &str = "ami-03cf127a";

/// Asserts every (resource address, attribute, phrase) has its own diagnostic in `text`.
fn assert_diagnostics(text: &str, cases: &[(String, &str, &str)]) {
    let blocks: Vec<&str> = text.split("Error: ").skip(1).collect();
    for (address, attr, phrase) in cases {
        let mine: Vec<&&str> = blocks
            .iter()
            .filter(|b| b.contains(&format!("with {address},")))
            .collect();
        assert!(!mine.is_empty(), "no diagnostic for {address}:\n{text}");
        assert!(
            mine.iter().any(|b| b.contains(attr) && b.contains(phrase)),
            "{address}: no diagnostic mentions {attr} and {phrase:?}:\n{}",
            mine.iter().map(|b| b.to_string()).collect::<Vec<_>>().join("\n---\n")
        );
    }
}

/// A plan refused with every (resource address, attribute, phrase) diagnosed and not one
/// mutating AWS call; returns its output with whitespace folded (Terraform wraps details).
fn refused_plan(ws: &Workspace, emu: &Emulator, cases: &[(String, &str, &str)]) -> String {
    emu.reset_calls();
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success, "{}", out.text());
    assert_diagnostics(&out.text(), cases);
    assert!(emu.mutating_calls().is_empty(), "{:?}", emu.mutating_calls());
    out.text().split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cluster(name: &str, body: &str) -> String {
    format!(
        "resource \"hpc_cluster\" \"{name}\" {{\n  name = \"{}\"\n  subnet_id = \"subnet-0123456789abcdef0\"\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n{body}\n}}\n",
        name.replace('_', "-")
    )
}

fn partition(name: &str, body: &str) -> String {
    let has = |k: &str| body.contains(&format!("{k} "));
    let mut out = format!("resource \"hpc_partition\" \"{name}\" {{\n  cluster_id = \"research\"\n");
    if !has("name") {
        out.push_str(&format!("  name = \"{}\"\n", name.replace('_', "-")));
    }
    if !has("instance_types") {
        out.push_str("  instance_types = [\"c7i.2xlarge\"]\n");
    }
    if !has("max_nodes") {
        out.push_str("  max_nodes = 4\n");
    }
    if !has("ami_id") {
        out.push_str(&format!("  ami_id = \"{AMI}\"\n"));
    }
    if !body.contains("capacity_pool") {
        out.push_str("  capacity_pool {\n    subnet_ids = [\"subnet-0123456789abcdef0\"]\n  }\n");
    }
    out.push_str(body);
    out.push_str("\n}\n");
    out
}

#[test]
fn bad_clusters_and_partitions_are_rejected_when_validated() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-validation", &emu);
    let pool =
        |extra: &str| format!("  capacity_pool {{\n    subnet_ids = [\"subnet-0123456789abcdef0\"]\n{extra}\n  }}");
    let resources: Vec<(String, String, &str, &str)> = vec![
        (cluster("bad_name", "").replace("name = \"bad-name\"", "name = \"Research_1\""), "hpc_cluster.bad_name".into(), "name", "is not valid"),
        (cluster("bad_subnet", "").replace("subnet-0123456789abcdef0", "net-1"), "hpc_cluster.bad_subnet".into(), "subnet_id", "is not a subnet id"),
        (cluster("bad_ami", "").replace(AMI, "img-1"), "hpc_cluster.bad_ami".into(), "ami_id", "is not an AMI id"),
        (
            cluster("tiny_state", "").replace("    ami_id", "    state_volume_size = 0\n    ami_id"),
            "hpc_cluster.tiny_state".into(),
            "state_volume_size",
            "a state volume of 0 GiB is not possible",
        ),
        (
            cluster("open_ssh", "").replace("    ami_id", "    allowed_ssh_cidrs = [\"0.0.0.0/0\"]\n    ami_id"),
            "hpc_cluster.open_ssh".into(),
            "allowed_ssh_cidrs",
            "SSH from the whole internet is not allowed",
        ),
        (
            cluster("bad_cidr", "").replace("    ami_id", "    allowed_ssh_cidrs = [\"10.0.0/8\"]\n    ami_id"),
            "hpc_cluster.bad_cidr".into(),
            "allowed_ssh_cidrs",
            "is not a CIDR block",
        ),
        (cluster("bad_idle", "  slurm {\n    scaledown_idletime = \"soon\"\n  }"), "hpc_cluster.bad_idle".into(), "scaledown_idletime", "is not a duration"),
        (cluster("bad_mode", "  accounting {\n    mode = \"cloud\"\n  }"), "hpc_cluster.bad_mode".into(), "mode", "unknown accounting mode"),
        (
            cluster("no_password", "  accounting {\n    mode = \"external\"\n    host = \"db.example\"\n  }"),
            "hpc_cluster.no_password".into(),
            "password_secret_arn",
            "external accounting needs a password",
        ),
        (cluster("low_uid", "  user {\n    name = \"alice\"\n    uid = 500\n  }"), "hpc_cluster.low_uid".into(), "uid", "outside 1001-60000"),
        (
            cluster("dup_user", "  user {\n    name = \"alice\"\n    uid = 2001\n  }\n  user {\n    name = \"alice\"\n    uid = 2002\n  }"),
            "hpc_cluster.dup_user".into(),
            "name",
            "listed twice",
        ),
        (
            cluster("bad_mount", "  storage {\n    lustre_id = \"fs-0123456789abcdef0\"\n    mount_point = \"/etc\"\n  }"),
            "hpc_cluster.bad_mount".into(),
            "mount_point",
            "cannot be a mount point",
        ),
                (cluster("bad_extra", "  slurm {\n    extra = { FooBar = \"1\" }\n  }"), "hpc_cluster.bad_extra".into(), "extra", "FooBar"),
        (cluster("home_on_head", "  home {\n    storage = \"head_node\"\n  }"), "hpc_cluster.home_on_head".into(), "storage", "/home on the head node is not available"),
        (
            cluster("mfa_path", "  mfa {\n    pam_module = \"/tmp/pam_evil.so\"\n  }"),
            "hpc_cluster.mfa_path".into(),
            "pam_module",
            "is not a PAM module's file name",
        ),
        (
            cluster("mfa_permit", "  mfa {\n    pam_module = \"pam_permit.so\"\n  }"),
            "hpc_cluster.mfa_permit".into(),
            "pam_module",
            "pam_permit.so is no second factor",
        ),
        (
            cluster("mfa_half", "  mfa {\n    pam_module = \"pam_duo.so\"\n    settings_file = \"/etc/duo/pam_duo.conf\"\n  }"),
            "hpc_cluster.mfa_half".into(),
            "settings_file",
            "settings_file needs settings_secret_arn",
        ),
        (
            cluster(
                "mfa_sshd",
                "  mfa {\n    pam_module = \"pam_duo.so\"\n    settings_file = \"/etc/ssh/sshd_config\"\n    settings_secret_arn = \"arn:aws:secretsmanager:us-east-1:123456789012:secret:duo-AbCdEf\"\n  }",
            ),
            "hpc_cluster.mfa_sshd".into(),
            "settings_file",
            "cannot hold the module's settings",
        ),
        (
            cluster("mfa_lines", "  mfa {\n    pam_module = \"pam_duo.so\"\n    config = \"nullok\\nauth sufficient pam_permit.so\"\n  }"),
            "hpc_cluster.mfa_lines".into(),
            "config",
            "must stay on one PAM line",
        ),
        // Values that would become more than one line or token in a node's files (issue 42).
        (
            cluster("key_lines", "  user {\n    name = \"alice\"\n    uid = 2001\n    ssh_public_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly a\\nssh-rsa AAAAB3NzaC1yc2EAAAADAQAB evil\"]\n  }"),
            "hpc_cluster.key_lines".into(),
            "ssh_public_keys",
            "holds a line break",
        ),
        (
            cluster("key_options", "  user {\n    name = \"alice\"\n    uid = 2001\n    ssh_public_keys = [\"command=\\\"/bin/sh\\\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly a\"]\n  }"),
            "hpc_cluster.key_options".into(),
            "ssh_public_keys",
            "is not an SSH public key",
        ),
        (
            cluster("gid_of_uid", "  user {\n    name = \"alice\"\n    uid = 2001\n    gid = 2002\n  }\n  user {\n    name = \"bob\"\n    uid = 2002\n  }"),
            "hpc_cluster.gid_of_uid".into(),
            "uid",
            "gid 2002 is also alice's",
        ),
        (
            cluster("spaced_mount", "  storage {\n    lustre_id = \"fs-0123456789abcdef0\"\n    dns_name = \"fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com\"\n    mount_name = \"abcdefgh\"\n    mount_point = \"/fsx data\"\n  }"),
            "hpc_cluster.spaced_mount".into(),
            "mount_point",
            "cannot be a mount point",
        ),
        (
            cluster("bad_dns", "  storage {\n    lustre_id = \"fs-0123456789abcdef0\"\n    dns_name = \"fs-1.fsx.us-east-1.amazonaws.com /etc\"\n    mount_name = \"abcdefgh\"\n    mount_point = \"/fsx\"\n  }"),
            "hpc_cluster.bad_dns".into(),
            "dns_name",
            "is not a DNS name",
        ),
        (
            cluster("role_wildcard", "").replace("    ami_id", "    node_role_arns = [\"arn:aws:iam::123456789012:role/hpc-*\"]\n    ami_id"),
            "hpc_cluster.role_wildcard".into(),
            "node_role_arns",
            "is a wildcard where an IAM role is meant",
        ),
        (
            cluster(
                "mfa_wildcard",
                "  mfa {\n    pam_module = \"pam_duo.so\"\n    settings_file = \"/etc/security/pam_duo.conf\"\n    settings_secret_arn = \"arn:aws:secretsmanager:us-east-1:123456789012:secret:*\"\n  }",
            ),
            "hpc_cluster.mfa_wildcard".into(),
            "settings_secret_arn",
            "is a wildcard where a Secrets Manager secret is meant",
        ),
        (partition("bad_pname", "  name = \"GPU!\""), "hpc_partition.bad_pname".into(), "name", "is not valid"),
        (partition("min_over_max", "  min_nodes = 8\n  max_nodes = 2"), "hpc_partition.min_over_max".into(), "min_nodes", "is more than max_nodes"),
        (
            partition("dup_type", "  instance_types = [\"c7i.2xlarge\", \"c7i.2xlarge\"]"),
            "hpc_partition.dup_type".into(),
            "instance_types",
            "listed twice",
        ),
        (partition("bad_strategy", "  allocation_strategy = \"cheapest\""), "hpc_partition.bad_strategy".into(), "allocation_strategy", "unknown allocation_strategy"),
        (partition("bad_capacity", &pool("    capacity_type = \"reserved\"")), "hpc_partition.bad_capacity".into(), "capacity_type", "unknown capacity_type"),
        (
            partition("block_without_id", &pool("    capacity_type = \"capacity_block\"")),
            "hpc_partition.block_without_id".into(),
            "capacity_reservation_id",
            "needs capacity_reservation_id",
        ),
        (partition("bad_time", "  max_time = \"forever\""), "hpc_partition.bad_time".into(), "max_time", "forever"),
        (partition("bad_pextra", "  slurm_extra = { Bogus = \"1\" }"), "hpc_partition.bad_pextra".into(), "slurm_extra", "Bogus"),
        (partition("remote_no_ami", &pool("    region = \"us-west-2\"")), "hpc_partition.remote_no_ami".into(), "ami_id", "needs its own ami_id"),
        (partition("bad_timeout", "  provision_timeout = \"a while\""), "hpc_partition.bad_timeout".into(), "provision_timeout", "is not a duration"),
        (partition("bad_pool_subnet", "  capacity_pool {\n    subnet_ids = [\"sn-1\"]\n  }"), "hpc_partition.bad_pool_subnet".into(), "subnet_ids", "is not a subnet id"),
        (partition("bad_scaling", "  scaling_strategy = \"some-or-all\""), "hpc_partition.bad_scaling".into(), "scaling_strategy", "all-or-nothing or best-effort"),
        (
            partition("spot_reserved", &pool("    capacity_type = \"spot\"\n    capacity_reservation_id = \"cr-0123456789abcdef0\"")),
            "hpc_partition.spot_reserved".into(),
            "capacity_reservation_id",
            "a spot pool cannot launch into a capacity reservation",
        ),
        // Values AWS, the image or Slurm would refuse after the plan.
        (cluster("uid_1000", "  user {\n    name = \"alice\"\n    uid = 1000\n  }"), "hpc_cluster.uid_1000".into(), "uid", "outside 1001-60000"),
        (cluster("root_user", "  user {\n    name = \"slurm\"\n    uid = 2001\n  }"), "hpc_cluster.root_user".into(), "name", "is a system account's name"),
        (
            cluster("same_uid", "  user {\n    name = \"alice\"\n    uid = 2001\n  }\n  user {\n    name = \"bob\"\n    uid = 2001\n  }"),
            "hpc_cluster.same_uid".into(),
            "uid",
            "is also alice's",
        ),
        (cluster("low_gid", "  user {\n    name = \"alice\"\n    uid = 2001\n    gid = 0\n  }"), "hpc_cluster.low_gid".into(), "gid", "outside 1001-60000"),
        (
            cluster("wide_ssh", "").replace("    ami_id", "    allowed_ssh_cidrs = [\"0.0.0.0/1\"]\n    ami_id"),
            "hpc_cluster.wide_ssh".into(),
            "allowed_ssh_cidrs",
            "SSH from the whole internet is not allowed",
        ),
        (
            cluster("host_bits", "").replace("    ami_id", "    allowed_ssh_cidrs = [\"10.1.2.3/16\"]\n    ami_id"),
            "hpc_cluster.host_bits".into(),
            "allowed_ssh_cidrs",
            "10.1.0.0/16",
        ),
        (
            cluster("tiny_root", "").replace("    ami_id", "    root_volume_size = 4\n    ami_id"),
            "hpc_cluster.tiny_root".into(),
            "root_volume_size",
            "a root volume of 4 GiB is not possible",
        ),
        (
            cluster("io2_root", "").replace("    ami_id", "    root_volume_type = \"io2\"\n    ami_id"),
            "hpc_cluster.io2_root".into(),
            "root_volume_type",
            "Use gp3 (the default) or gp2",
        ),
        (
            cluster("role_not_profile", "").replace("    ami_id", "    instance_profile_arn = \"arn:aws:iam::111122223333:role/nodes\"\n    ami_id"),
            "hpc_cluster.role_not_profile".into(),
            "instance_profile_arn",
            "This is a role's ARN",
        ),
        (cluster("aws_tag", "  tags = { \"aws:owner\" = \"me\" }"), "hpc_cluster.aws_tag".into(), "tags", "is reserved"),
        (cluster("fast_idle", "  slurm {\n    scaledown_idletime = \"5s\"\n  }"), "hpc_cluster.fast_idle".into(), "scaledown_idletime", "Use at least 60s"),
        (cluster("fast_resume", "  slurm {\n    resume_timeout = \"30s\"\n  }"), "hpc_cluster.fast_resume".into(), "resume_timeout", "Use at least 120s"),
        (
            cluster("bad_port", "  accounting {\n    mode = \"external\"\n    host = \"db.example\"\n    port = 70000\n    password_secret_arn = \"arn:aws:secretsmanager:us-east-1:111122223333:secret:db\"\n  }"),
            "hpc_cluster.bad_port".into(),
            "port",
            "is not a TCP port",
        ),
        (cluster("minus_login", "  login_nodes {\n    count = -1\n  }"), "hpc_cluster.minus_login".into(), "count", "is negative"),
        (
            cluster("home_mount", "  storage {\n    lustre_id = \"fs-0123456789abcdef0\"\n    dns_name = \"fs.example\"\n    mount_name = \"abc\"\n    mount_point = \"/home\"\n  }"),
            "hpc_cluster.home_mount".into(),
            "mount_point",
            "cannot be a mount point",
        ),
        (partition("tiny_proot", "  root_volume_size = 0"), "hpc_partition.tiny_proot".into(), "root_volume_size", "a root volume of 0 GiB"),
        (partition("hpc_tag", "  tags = { \"hpcforge:partition\" = \"x\" }"), "hpc_partition.hpc_tag".into(), "tags", "is reserved"),
        (partition("fast_provision", "  provision_timeout = \"10s\""), "hpc_partition.fast_provision".into(), "provision_timeout", "Use at least 60s"),
        (partition("minus_tier", "  priority_tier = -2"), "hpc_partition.minus_tier".into(), "priority_tier", "is negative"),
        (
            partition("big_user_data", &format!("  user_data_extra = \"{}\"", "x".repeat(13 * 1024))),
            "hpc_partition.big_user_data".into(),
            "user_data_extra",
            "user_data_extra has 13312 bytes",
        ),
        (
            partition("bad_pool_sg", &pool("    security_group_ids = [\"default\"]")),
            "hpc_partition.bad_pool_sg".into(),
            "security_group_ids",
            "is not a security group id",
        ),
        (
            partition("spot_strategy", "  allocation_strategy = \"price-capacity-optimized\""),
            "hpc_partition.spot_strategy".into(),
            "allocation_strategy",
            "is for spot pools, and this partition has none",
        ),
        (
            cluster(
                "secret_by_name",
                "  accounting {\n    mode = \"external\"\n    host = \"db.example.org\"\n    password_secret_arn = \"slurmdbd\"\n  }",
            ),
            "hpc_cluster.secret_by_name".into(),
            "password_secret_arn",
            "\"slurmdbd\" is not a Secrets Manager secret ARN",
        ),
    ];
    assert!(resources.len() >= 45);
    ws.write(
        &resources
            .iter()
            .map(|(r, _, _, _)| r.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    emu.reset_calls();
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success);
    let cases: Vec<(String, &str, &str)> = resources
        .iter()
        .map(|(_, a, attr, phrase)| (a.clone(), *attr, *phrase))
        .collect();
    assert_diagnostics(&out.text(), &cases);
    assert!(emu.mutating_calls().is_empty(), "{:?}", emu.mutating_calls());
}

#[test]
fn instance_types_efa_and_guardrails_are_checked_against_ec2_at_plan() {
    let emu = Emulator::start();
    let ws = Workspace::new("guardrails", &emu);
    let provider = r#"
terraform {
  required_providers {
    hpc = { source = "hpcforge/hpc" }
  }
}
provider "hpc" {
  region = "us-east-1"
  guardrails {
    allowed_instance_types      = ["c7i.*", "p5.*", "c5.*"]
    max_nodes_per_partition     = 100
    max_gpus_per_cluster        = 16
    max_hourly_cost_per_cluster = 150
  }
}
"#;
    let subnet = emu.default_subnet();
    // A cluster to check cluster-wide limits against.
    ws.write_raw(&format!(
        "{provider}\nresource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n}}\n"
    ));
    ws.apply();
    let cluster = format!(
        "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n}}\n"
    );
    let parts = [
        partition("unknown_type", "  instance_types = [\"p9.mega\"]"),
        partition("no_efa", "  instance_types = [\"c5.large\"]\n  efa_enabled = true"),
        partition("not_allowed", "  instance_types = [\"m5.large\"]"),
        partition("too_many_nodes", "  max_nodes = 500"),
        partition("too_many_gpus", "  instance_types = [\"p5.48xlarge\"]\n  max_nodes = 4"),
    ]
    .join("\n")
    .replace("subnet-0123456789abcdef0", &subnet);
    ws.write_raw(&format!("{provider}\n{cluster}\n{parts}"));
    emu.reset_calls();
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success);
    let text = out.text();
    assert_diagnostics(
        &text,
        &[
            (
                "hpc_partition.unknown_type".into(),
                "instance_types",
                "\"p9.mega\" is not an EC2 instance type",
            ),
            (
                "hpc_partition.no_efa".into(),
                "efa_enabled",
                "c5.large does not support EFA",
            ),
            ("hpc_partition.not_allowed".into(), "instance_types", "m5.large"),
            ("hpc_partition.too_many_nodes".into(), "max_nodes", "500"),
            ("hpc_partition.too_many_gpus".into(), "max_nodes", "32"),
        ],
    );
    let mutating = emu.mutating_calls();
    assert!(
        mutating.is_empty(),
        "plans must not change anything in AWS: {mutating:?}"
    );
    ws.write_raw(&format!("{provider}\n{cluster}"));
    ws.destroy();
}

#[test]
fn a_provision_timeout_that_cannot_fail_over_before_slurms_resume_timeout_is_refused() {
    let emu = Emulator::start();
    let ws = Workspace::new("timeouts", &emu);
    let subnet = emu.default_subnet();
    let cluster = format!(
        "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n  slurm {{\n    resume_timeout = \"5m\"\n  }}\n}}\n"
    );
    let part = |timeout: &str| {
        partition("gpu", &format!("  provision_timeout = \"{timeout}\""))
            .replace("cluster_id = \"research\"", "cluster_id = hpc_cluster.main.id")
            .replace("subnet-0123456789abcdef0", &subnet)
    };
    let expected = [(
        "hpc_partition.gpu".to_string(),
        "provision_timeout",
        "provision_timeout (5m) must be shorter than cluster research's slurm.resume_timeout (5m)",
    )];
    // Made in the same apply, the cluster is known only when the partition is created: refused
    // then, before a launch template exists or the partition is published.
    ws.write(&format!("{cluster}\n{}", part("5m")));
    let out = ws.tf(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(!out.success, "{}", out.text());
    assert_diagnostics(&out.text(), &expected);
    let templates = emu.ec2("Action=DescribeLaunchTemplates");
    assert!(
        templates.contains("hpc-research-head") && !templates.contains("-gpu-"),
        "only the head node's template may exist: {templates}"
    );
    assert!(emu
        .parameter_json(&hpc_desired_state::partition_param("research", "gpu"))
        .is_none());
    // With the cluster in place, the plan itself refuses it, changing nothing.
    refused_plan(&ws, &emu, &expected);
    // Room to fail over: accepted.
    ws.write(&format!("{cluster}\n{}", part("4m")));
    ws.apply();
    // The cluster's timeout cannot shrink under the published partition's either.
    ws.write(&format!("{}\n{}", cluster.replace("\"5m\"", "\"3m\""), part("4m")));
    refused_plan(
        &ws,
        &emu,
        &[(
            "hpc_cluster.main".to_string(),
            "resume_timeout",
            "provision_timeout (4m) must be shorter than cluster research's slurm.resume_timeout (3m)",
        )],
    );
    // Terraform's destroy plans the configuration first: it is put back as applied.
    ws.write(&format!("{cluster}\n{}", part("4m")));
    ws.destroy();
}

/// An image hpc-image published records its Slurm in a tag; a cluster or partition on another
/// slurm.version is refused at plan with both releases named, changing nothing.
#[test]
fn an_image_with_another_slurm_release_than_slurm_version_is_refused_at_plan() {
    let emu = Emulator::start();
    let ws = Workspace::new("image-release", &emu);
    let subnet = emu.default_subnet();
    emu.ec2(&format!(
        "Action=CreateTags&ResourceId.1={AMI}&Tag.1.Key=hpcforge%3Aslurm-version&Tag.1.Value=22.05.8-4%2Bdeb12u3"
    ));
    let cluster = |version: &str| {
        format!(
            "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n  slurm {{\n    version = \"{version}\"\n  }}\n}}\n"
        )
    };
    // The provider's default release (24.11) is not the image's.
    ws.write(&cluster("24.11"));
    let said = refused_plan(
        &ws,
        &emu,
        &[(
            "hpc_cluster.main".to_string(),
            "ami_id",
            &format!("{AMI} carries Slurm 22.05 (22.05.8-4+deb12u3), but slurm.version is 24.11"),
        )],
    );
    assert!(said.contains("Set slurm { version = \"22.05\" }"), "{said}");
    // On the image's release, the cluster and a partition of the same image are accepted.
    let part = partition("cpu", "")
        .replace("cluster_id = \"research\"", "cluster_id = hpc_cluster.main.id")
        .replace("subnet-0123456789abcdef0", &subnet);
    ws.write(&format!("{}\n{part}", cluster("22.05")));
    ws.apply();
    // A partition on an image of another release, on the running cluster.
    let other_ami = emu.image_other_than(AMI);
    emu.ec2(&format!(
        "Action=CreateTags&ResourceId.1={other_ami}&Tag.1.Key=hpcforge%3Aslurm-version&Tag.1.Value=24.11.1"
    ));
    ws.write(&format!("{}\n{}", cluster("22.05"), part.replace(AMI, &other_ami)));
    refused_plan(
        &ws,
        &emu,
        &[(
            "hpc_partition.cpu".to_string(),
            "ami_id",
            &format!("{other_ami} carries Slurm 24.11 (24.11.1), but slurm.version is 22.05"),
        )],
    );
    // The cluster to 24.11 on an image of 24.11: four major releases, more than Slurm reads.
    ws.write(&format!("{}\n{part}", cluster("24.11").replace(AMI, &other_ami)));
    let said = refused_plan(
        &ws,
        &emu,
        &[(
            "hpc_cluster.main".to_string(),
            "version",
            "Slurm 22.05 cannot be upgraded to 24.11 in one step",
        )],
    );
    assert!(said.contains("23.02, 23.11, 24.05 come between"), "{said}");
    assert!(said.contains("22.05 → 23.11 → 24.11"), "{said}");
    // A setting 22.05 does not have, on the 22.05 cluster: validation alone (which knows no
    // cluster) lets it through; the plan, which reads the cluster's release, does not.
    let newer = part.replace(
        "  max_nodes = 4\n",
        "  max_nodes = 4\n  slurm_extra = { PowerDownOnIdle = \"YES\" }\n",
    );
    assert_ne!(newer, part, "the partition got the setting");
    ws.write(&format!("{}\n{newer}", cluster("22.05")));
    refused_plan(
        &ws,
        &emu,
        &[(
            "hpc_partition.cpu".to_string(),
            "slurm_extra",
            "PowerDownOnIdle was added after Slurm 22.05",
        )],
    );
    ws.write(&format!("{}\n{part}", cluster("22.05")));
    ws.destroy();
}

/// A partition's image of a newer release than its cluster's (26.05 on a 24.11 cluster, within
/// Slurm's window): the plan warns that it waits for the cluster's upgrade; without one in the
/// same apply, the partition's apply refuses it and the partition keeps its image. Nodes of an
/// older release than the cluster's (24.11 on 26.05) are accepted: an image not upgraded yet.
#[test]
fn a_partition_image_newer_than_its_cluster_waits_for_the_clusters_upgrade() {
    let emu = Emulator::start();
    let ws = Workspace::new("image-newer", &emu);
    let subnet = emu.default_subnet();
    let newer_ami = emu.image_other_than(AMI);
    for (ami, release) in [(AMI, "24.11.5"), (newer_ami.as_str(), "26.05.5")] {
        emu.ec2(&format!(
            "Action=CreateTags&ResourceId.1={ami}&Tag.1.Key=hpcforge%3Aslurm-version&Tag.1.Value={release}"
        ));
    }
    let cluster = |version: &str, ami: &str| {
        format!(
            "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{ami}\"\n  }}\n  slurm {{\n    version = \"{version}\"\n  }}\n}}\n"
        )
    };
    let part = partition("cpu", "")
        .replace("cluster_id = \"research\"", "cluster_id = hpc_cluster.main.id")
        .replace("subnet-0123456789abcdef0", &subnet);
    ws.write(&format!("{}\n{part}", cluster("24.11", AMI)));
    ws.apply();
    let newer_part = part.replace(AMI, &newer_ami);
    ws.write(&format!("{}\n{newer_part}", cluster("24.11", AMI)));
    let planned = ws.tf(&["plan", "-input=false", "-no-color"]);
    let said = planned.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(planned.success, "a warning, not an error: {said}");
    assert!(
        said.contains(&format!(
            "{newer_ami} carries Slurm 26.05; the cluster runs 24.11 until it is upgraded"
        )),
        "{said}"
    );
    let applied = ws.tf(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = applied.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!applied.success, "{said}");
    assert!(
        said.contains(&format!(
            "{newer_ami} carries Slurm 26.05, newer than the cluster's slurm.version 24.11"
        )) && said.contains("Upgrade the cluster first"),
        "{said}"
    );
    assert_eq!(
        ws.resource("hpc_partition.cpu")["ami_id"],
        AMI,
        "the partition keeps its image"
    );
    // The cluster upgraded in the same apply (its head on the newer image): both go through,
    // the cluster first; the partition on the older image would have been accepted too.
    ws.write(&format!("{}\n{newer_part}", cluster("26.05", &newer_ami)));
    ws.apply();
    assert_eq!(ws.resource("hpc_partition.cpu")["ami_id"], newer_ami.as_str());
    ws.write(&format!("{}\n{part}", cluster("26.05", &newer_ami)));
    ws.apply();
    ws.assert_no_changes();
    ws.destroy();
}

/// The default subnet of a zone, from DescribeSubnets.
fn subnet_in(emu: &Emulator, zone: &str) -> String {
    let xml = emu.ec2(&format!(
        "Action=DescribeSubnets&Filter.1.Name=availability-zone&Filter.1.Value.1={zone}"
    ));
    acceptance_tests::xml_text(&xml, "subnetId")
}

#[test]
fn capacity_reservations_and_blocks_are_checked_at_plan_and_targeted_by_the_launch_templates() {
    let emu = Emulator::start();
    let ws = Workspace::new("reservations", &emu);
    let (zone_a, zone_b) = (subnet_in(&emu, "us-east-1a"), subnet_in(&emu, "us-east-1b"));
    let odcr = emu.capacity_reservation("c7i.2xlarge", "us-east-1a", 4);
    let block = emu.capacity_block("c7i.2xlarge", 2, "2000-01-01T00:00:00Z");
    let main = format!(
        "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{zone_a}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n}}\n"
    );
    ws.write(&main);
    ws.apply();
    let pool =
        |subnet: &str, extra: &str| format!("  capacity_pool {{\n    subnet_ids = [\"{subnet}\"]\n{extra}\n  }}\n");
    let reserved = |id: &str| format!("    capacity_reservation_id = \"{id}\"");
    let wrong = [
        partition("missing", &pool(&zone_a, &reserved("cr-0123456789abcdef0"))),
        partition(
            "other_type",
            &format!(
                "  instance_types = [\"c7i.4xlarge\"]\n{}",
                pool(&zone_a, &reserved(&odcr))
            ),
        ),
        partition(
            "not_a_block",
            &pool(
                &zone_a,
                &format!("    capacity_type = \"capacity_block\"\n{}", reserved(&odcr)),
            ),
        ),
        partition("a_block", &pool(&zone_a, &reserved(&block))),
        partition("other_zone", &pool(&zone_b, &reserved(&odcr))),
    ]
    .join("\n");
    ws.write(&format!("{main}\n{wrong}"));
    let text = refused_plan(
        &ws,
        &emu,
        &[
            (
                "hpc_partition.missing".into(),
                "capacity_reservation_id",
                "does not exist in us-east-1",
            ),
            (
                "hpc_partition.other_type".into(),
                "capacity_reservation_id",
                "reserves c7i.2xlarge",
            ),
            (
                "hpc_partition.not_a_block".into(),
                "capacity_type",
                "is an On-Demand Capacity Reservation",
            ),
            ("hpc_partition.a_block".into(), "capacity_type", "is a Capacity Block"),
            ("hpc_partition.other_zone".into(), "subnet_ids", "is in us-east-1a"),
        ],
    );
    assert!(text.contains("Give the pool only subnets in us-east-1a"), "{text}");

    // Right: the reservation first, then the block, then on-demand in another zone.
    let good = partition(
        "gpu",
        &format!(
            "{}{}{}",
            pool(&zone_a, &reserved(&odcr)),
            pool(
                &zone_a,
                &format!("    capacity_type = \"capacity_block\"\n{}", reserved(&block))
            ),
            pool(&zone_b, "")
        ),
    );
    ws.write(&format!("{main}\n{good}"));
    ws.apply();
    ws.assert_no_changes();
    let doc = emu
        .parameter_json(&hpc_desired_state::partition_param("research", "gpu"))
        .expect("published partition");
    assert_eq!(doc["scaling_strategy"], "all-or-nothing", "{doc}");
    let template = |pool: usize| {
        let id = doc["pools"][pool]["launch_templates"]["c7i.2xlarge"]
            .as_str()
            .expect("template id")
            .to_string();
        emu.ec2(&format!(
            "Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}&LaunchTemplateVersion.1=$Default"
        ))
    };
    let (first, second, third) = (template(0), template(1), template(2));
    assert!(first.contains(&odcr) && !first.contains("capacity-block"), "{first}");
    assert!(
        second.contains(&block) && second.contains("<marketType>capacity-block</marketType>"),
        "{second}"
    );
    assert!(!third.contains("cr-"), "{third}");
    ws.write(&main);
    ws.destroy();
}

#[test]
fn pools_key_pairs_secrets_and_a_second_default_are_checked_against_aws_at_plan() {
    let emu = Emulator::start();
    let ws = Workspace::new("aws-checks", &emu);
    let subnet = emu.default_subnet();
    let (zone_a, zone_e) = (subnet_in(&emu, "us-east-1a"), subnet_in(&emu, "us-east-1e"));
    let head = |extra: &str| {
        format!(
            "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n{extra}  }}\n}}\n"
        )
    };
    let pool = |subnets: &[&str]| {
        let quoted: Vec<String> = subnets.iter().map(|s| format!("\"{s}\"")).collect();
        format!("  capacity_pool {{\n    subnet_ids = [{}]\n  }}", quoted.join(", "))
    };
    let first = partition("first", &format!("  default = true\n{}", pool(&[&zone_a])));
    ws.write(&head(""));
    ws.apply();
    ws.write(&format!("{}{first}", head("")));
    ws.apply();

    // EC2 (moto's offerings) has trn1.32xlarge in us-east-1b, c and f only, and c7i.2xlarge
    // everywhere but us-east-1e.
    let parts = [
        partition(
            "not_offered",
            &format!("  instance_types = [\"trn1.32xlarge\"]\n{}", pool(&[&zone_a])),
        ),
        partition("no_subnet", &pool(&["subnet-0123456789abcdef0"])),
        partition("second", &format!("  default = true\n{}", pool(&[&zone_a, &zone_e]))),
    ]
    .join("\n");
    let secret = "arn:aws:secretsmanager:us-west-2:123456789012:secret:slurmdbd-AbCdEf";
    let cluster = head("    key_name = \"nobodys-key\"\n").replace(
        "  head_node {",
        &format!("  accounting {{\n    mode = \"external\"\n    host = \"db.example.org\"\n    password_secret_arn = \"{secret}\"\n  }}\n  head_node {{"),
    );
    ws.write(&format!("{cluster}{first}{parts}"));
    let text = refused_plan(
        &ws,
        &emu,
        &[
            (
                "hpc_partition.not_offered".into(),
                "subnet_ids",
                "trn1.32xlarge is not offered in any zone of capacity_pool 0",
            ),
            (
                "hpc_partition.no_subnet".into(),
                "subnet_ids",
                "a subnet of the pool does not exist in us-east-1",
            ),
            (
                "hpc_cluster.main".into(),
                "key_name",
                "there is no key pair \"nobodys-key\" in us-east-1",
            ),
            (
                "hpc_cluster.main".into(),
                "password_secret_arn",
                "the password's secret is in us-west-2, the cluster in us-east-1",
            ),
        ],
    );
    for phrase in [
        "trn1.32xlarge is offered in us-east-1b, us-east-1c, us-east-1f",
        &format!("c7i.2xlarge is not offered in {zone_e} (us-east-1e) of capacity_pool 0"),
        "partition first is the cluster's default partition now",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?}:\n{text}");
    }
    // The partial zone and the second default are warnings: with the errors fixed, the plan goes.
    let fixed = parts
        .replace("trn1.32xlarge", "c7i.2xlarge")
        .replace("subnet-0123456789abcdef0", &zone_a);
    ws.write(&format!("{}{first}{fixed}", head("")));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(out.success, "{}", out.text());
    ws.write(&head(""));
    ws.destroy();
}

#[test]
fn a_partition_past_the_accounts_vcpu_quota_warns_with_numbers_or_fails_under_the_guardrail() {
    let emu = Emulator::start();
    emu.set_quotas("us-east-1", serde_json::json!({"L-417A185B": 192, "L-1945791B": 128}));
    let ws = Workspace::new("quotas", &emu);
    let subnet = emu.default_subnet();
    let provider = |enforce: bool| {
        format!(
            "terraform {{\n  required_providers {{\n    hpc = {{ source = \"hpcforge/hpc\" }}\n  }}\n}}\nprovider \"hpc\" {{\n  region = \"us-east-1\"\n  guardrails {{\n    enforce_quotas = {enforce}\n  }}\n}}\n"
        )
    };
    let cluster = format!(
        "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n  }}\n}}\n"
    );
    ws.write_raw(&format!("{}{cluster}", provider(false)));
    ws.apply();
    // 2 x p5.48xlarge = 384 vCPUs of the P quota, which is 192 here; 64 x inf2.xlarge = 256 of
    // the Inf quota, which is 128; the CPU partition fits.
    let parts = format!(
        "{}\n{}\n{}",
        partition("gpu", "  instance_types = [\"p5.48xlarge\"]\n  max_nodes = 2"),
        partition("cpu", "  instance_types = [\"c7i.2xlarge\"]\n  max_nodes = 8"),
        partition("infer", "  instance_types = [\"inf2.xlarge\"]\n  max_nodes = 64")
    )
    .replace("subnet-0123456789abcdef0", &subnet);
    ws.write_raw(&format!("{}{cluster}{parts}", provider(false)));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(out.success, "a quota is a warning by default:\n{}", out.text());
    let text = out.text().split_whitespace().collect::<Vec<_>>().join(" ");
    for phrase in [
        "partition gpu may need 384 vCPUs of the quota \"Running On-Demand P instances\" in us-east-1, which is 192 vCPUs",
        "L-417A185B allows 1 of them",
        "partition infer may need 256 vCPUs of the quota \"Running On-Demand Inf instances\" in us-east-1, which is 128 vCPUs",
        "L-1945791B allows 32 of them",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?}:\n{text}");
    }
    assert!(!text.contains("partition cpu may need"), "{text}");

    // Under the guardrail the plan fails, naming max_nodes, and changes nothing.
    ws.write_raw(&format!("{}{cluster}{parts}", provider(true)));
    refused_plan(&ws, &emu, &[("hpc_partition.gpu".into(), "max_nodes", "384 vCPUs")]);

    // Partitions share the account's quota, the cluster's and other clusters': with 400 vCPUs,
    // gpu (384) fits alone, another cluster's P partition of 192 is applied with a warning, and
    // a second P partition of research that would fit alone is counted with both.
    emu.set_quotas("us-east-1", serde_json::json!({"L-417A185B": 400}));
    let lab = format!(
        "{}{}",
        cluster
            .replace("\"main\"", "\"lab\"")
            .replace("\"research\"", "\"lab\""),
        partition("lab_gpu", "  instance_types = [\"p5.48xlarge\"]\n  max_nodes = 1")
            .replace("cluster_id = \"research\"", "cluster_id = hpc_cluster.lab.id")
            .replace("subnet-0123456789abcdef0", &subnet)
    );
    ws.write_raw(&format!("{}{cluster}{parts}{lab}", provider(false)));
    ws.apply();
    let more = partition("gpu_more", "  instance_types = [\"p5.48xlarge\"]\n  max_nodes = 1")
        .replace("subnet-0123456789abcdef0", &subnet);
    ws.write_raw(&format!("{}{cluster}{parts}{lab}{more}", provider(true)));
    let text = refused_plan(
        &ws,
        &emu,
        &[("hpc_partition.gpu_more".into(), "max_nodes", "768 vCPUs")],
    );
    for phrase in [
        "partition gpu-more may need 768 vCPUs of the quota \"Running On-Demand P instances\" in us-east-1, which is 400 vCPUs",
        "the other published partitions may hold 576 (gpu 384, lab/lab-gpu 192) of the same quota",
        "allows 0 of them",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?}:\n{text}");
    }
    ws.write_raw(&format!("{}{cluster}", provider(false)));
    ws.destroy();
}

#[test]
fn an_image_that_does_not_fit_the_instance_type_or_the_root_volume_is_refused_at_plan() {
    let emu = Emulator::start();
    let ws = Workspace::new("image-fit", &emu);
    let subnet = emu.default_subnet();
    // An image whose root snapshot is 30 GiB.
    let zone = "us-east-1a";
    let volume = acceptance_tests::xml_text(
        &emu.ec2(&format!("Action=CreateVolume&Size=30&AvailabilityZone={zone}")),
        "volumeId",
    );
    let snapshot = acceptance_tests::xml_text(
        &emu.ec2(&format!("Action=CreateSnapshot&VolumeId={volume}")),
        "snapshotId",
    );
    let registered = emu.ec2(&format!(
        "Action=RegisterImage&Name=thirty&Architecture=x86_64&RootDeviceName=/dev/xvda&BlockDeviceMapping.1.DeviceName=/dev/xvda&BlockDeviceMapping.1.Ebs.SnapshotId={snapshot}&BlockDeviceMapping.1.Ebs.VolumeSize=30"
    ));
    let big = acceptance_tests::xml_text(&registered, "imageId");
    assert!(big.starts_with("ami-"), "{registered}");
    let cluster = |head: &str| {
        format!(
            "resource \"hpc_cluster\" \"main\" {{\n  name = \"research\"\n  subnet_id = \"{subnet}\"\n  wait_for_ready = false\n  head_node {{\n    ami_id = \"{AMI}\"\n{head}  }}\n}}\n"
        )
    };
    ws.write(&cluster(""));
    ws.apply();
    let parts = [
        partition("small_root", &format!("  ami_id = \"{big}\"\n  root_volume_size = 20")),
        partition("arm_nodes", "  instance_types = [\"c7g.large\"]"),
    ]
    .join("\n")
    .replace("subnet-0123456789abcdef0", &subnet);
    ws.write(&format!("{}{parts}", cluster("    instance_type = \"c7g.large\"\n")));
    refused_plan(
        &ws,
        &emu,
        &[
            ("hpc_cluster.main".into(), "instance_type", "c7g.large runs arm64, but"),
            ("hpc_partition.small_root".into(), "root_volume_size", "smaller than"),
            ("hpc_partition.arm_nodes".into(), "instance_types", "is an x86_64 image"),
        ],
    );
}
