//! hpc_cluster end to end: create, import, update in place and replacement, the head node
//! relaunched, /home on EFS, secrets, users, throttling, two accounts. The partitions' tests
//! are in `partition.rs`; both build on `acceptance_tests::fixtures`.

use acceptance_tests::fixtures::{
    apply_network_and_lustre, cluster, json_call, network, partition, refused, running_with_tag, secret_value,
    secret_value_b64, ssm_parameters, AMI,
};
use acceptance_tests::{xml_text, xml_values, Emulator, Workspace};
use serde_json::{json, Value};

#[test]
fn a_terminated_head_node_is_launched_again() {
    let emu = Emulator::start();
    let ws = Workspace::new("head-gone", &emu);
    ws.write(&format!("{}{}", network(), cluster("")));
    ws.apply();
    let head = ws.resource("hpc_cluster.main")["head_node_instance_id"]
        .as_str()
        .expect("head")
        .to_string();
    emu.ec2(&format!("Action=TerminateInstances&InstanceId.1={head}"));
    let plan = ws.plan();
    assert_eq!(plan.code, Some(2), "{}", plan.text());
    ws.apply();
    let new = ws.resource("hpc_cluster.main")["head_node_instance_id"]
        .as_str()
        .expect("head")
        .to_string();
    assert_ne!(new, head);
    ws.assert_no_changes();
    ws.destroy();
}

/// The longest name the cluster takes (40 characters) launches its head and login nodes: EC2
/// refuses a client token over 64 characters, and the tokens once carried the name.
#[test]
fn a_cluster_with_a_forty_character_name_launches_its_nodes() {
    let emu = Emulator::start();
    let ws = Workspace::new("long-name", &emu);
    let name = "research-computing-division-of-physics-1";
    assert_eq!(name.len(), 40);
    let config = cluster("").replace(r#"name      = "research""#, &format!("name      = \"{name}\""));
    assert!(config.contains(name), "the fixture's name line moved:\n{config}");
    ws.write(&format!("{}{config}", network()));
    ws.apply();
    let state = ws.resource("hpc_cluster.main");
    assert!(
        state["head_node_instance_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("i-")),
        "{state}"
    );
    assert_eq!(
        running_with_tag(&emu, hpc_desired_state::tag::CLUSTER, name),
        2,
        "head and login node"
    );
    ws.destroy();
}

#[test]
fn a_provider_killed_during_cluster_create_leaves_no_duplicates_on_rerun() {
    let emu = Emulator::start();
    let ws = Workspace::new("killed", &emu);
    ws.write(&format!("{}{}", network(), cluster("")));
    apply_network_and_lustre(&ws);
    // The provider dies while the head node's launch is in flight; the launch lands anyway.
    ws.apply_killed_after(&emu, "ec2:RunInstances");

    ws.apply();
    assert_eq!(
        running_with_tag(&emu, "hpcforge:role", "head"),
        1,
        "the head node launched by the killed run is adopted"
    );
    let lts = emu.ec2("Action=DescribeLaunchTemplates");
    assert_eq!(
        lts.matches("<launchTemplateName>hpc-research-head</launchTemplateName>")
            .count(),
        1,
        "{lts}"
    );
    let groups = emu.ec2("Action=DescribeSecurityGroups");
    assert_eq!(
        groups.matches("<groupName>hpc-research-cluster</groupName>").count(),
        1,
        "{groups}"
    );
    ws.destroy();
}

/// The mount targets of an EFS file system: (subnet, security groups).
fn mount_targets(emu: &Emulator, fs: &str) -> Vec<(String, Vec<String>)> {
    let (_, listed) = emu.efs(
        "GET",
        &format!("/2015-02-01/mount-targets?FileSystemId={fs}"),
        &Value::Null,
    );
    listed["MountTargets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let id = m["MountTargetId"].as_str().unwrap_or_default();
            let (_, groups) = emu.efs(
                "GET",
                &format!("/2015-02-01/mount-targets/{id}/security-groups"),
                &Value::Null,
            );
            let groups = groups["SecurityGroups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.as_str().map(str::to_string))
                .collect();
            (m["SubnetId"].as_str().unwrap_or_default().to_string(), groups)
        })
        .collect()
}

/// The EFS file systems in the emulator's account and region: (id, number of mount targets).
fn file_systems(emu: &Emulator) -> Vec<(String, u64)> {
    let (_, listed) = emu.efs("GET", "/2015-02-01/file-systems", &Value::Null);
    listed["FileSystems"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let targets = f["NumberOfMountTargets"].as_u64().unwrap_or(0);
            (f["FileSystemId"].as_str().unwrap_or_default().to_string(), targets)
        })
        .collect()
}

/// The snapshots tagged as a state volume's final snapshot: (id, volume).
fn final_snapshots(emu: &Emulator) -> Vec<(String, String)> {
    let xml = emu.ec2("Action=DescribeSnapshots&Filter.1.Name=tag%3Ahpcforge%3Arole&Filter.1.Value.1=head-state-final");
    let ids = xml_values(&xml, "snapshotId");
    let volumes = xml_values(&xml, "volumeId");
    ids.into_iter().zip(volumes).collect()
}

/// The cluster's /home and state volume outlive it by default: the plan of a destroy says what
/// is kept, the destroy keeps /home without its mount targets and a final snapshot of the
/// state volume, and a cluster created again under the name mounts the same /home. With both
/// settings on `delete`, the next destroy deletes them, as its plan says.
#[test]
fn the_cluster_makes_its_home_on_efs_once_reaches_it_from_each_zone_and_keeps_it_when_destroyed() {
    let emu = Emulator::start();
    let ws = Workspace::new("home-efs", &emu);
    ws.write(&format!("{}{}", network(), cluster("")));
    apply_network_and_lustre(&ws);
    // The provider dies while the file system is being made: the rerun finds it by its token.
    ws.apply_killed_after(&emu, "elasticfilesystem:CreateFileSystem");
    ws.apply();
    let main = ws.resource("hpc_cluster.main");
    let fs = main["home_file_system_id"]
        .as_str()
        .expect("home_file_system_id")
        .to_string();
    let (_, listed) = emu.efs("GET", "/2015-02-01/file-systems", &Value::Null);
    let systems = listed["FileSystems"].as_array().cloned().unwrap_or_default();
    assert_eq!(systems.len(), 1, "{listed}");
    assert_eq!(systems[0]["FileSystemId"], fs.as_str());
    assert_eq!(systems[0]["Encrypted"], true, "{listed}");
    assert_eq!(systems[0]["CreationToken"], "hpcforge-research-home");
    let net = ws.resource("hpc_network.net");
    let subnet = |zone: &str| net["private_subnet_ids"][zone].as_str().unwrap_or_default().to_string();
    let cluster_group = main["security_group_ids"][0].as_str().unwrap_or_default().to_string();
    assert_eq!(
        mount_targets(&emu, &fs),
        vec![(subnet("us-east-1a"), vec![cluster_group.clone()])],
        "one mount target, in the head's zone, in the cluster group"
    );
    let doc = emu
        .parameter_json(&hpc_desired_state::cluster_param("research"))
        .expect("published cluster");
    assert_eq!(doc["home"], "efs", "{doc}");
    assert_eq!(doc["home_efs_id"], fs.as_str(), "{doc}");
    assert_eq!(doc["home_efs_managed"], true, "{doc}");

    // A partition with a pool in another zone reaches /home there too.
    ws.write(&format!(
        "{}{}{}",
        network(),
        cluster(""),
        partition("cpu", "\"c7i.2xlarge\"", 4, "")
    ));
    ws.apply();
    let mut targets = mount_targets(&emu, &fs);
    let mut expected = vec![
        (subnet("us-east-1a"), vec![cluster_group.clone()]),
        (subnet("us-east-1b"), vec![cluster_group]),
    ];
    targets.sort();
    expected.sort();
    assert_eq!(targets, expected);
    ws.assert_no_changes();
    let volume = ws.resource("hpc_cluster.main")["state_volume_id"]
        .as_str()
        .expect("state_volume_id")
        .to_string();
    let said = |out: &acceptance_tests::TfOutput| out.text().split_whitespace().collect::<Vec<_>>().join(" ");
    let planned = said(&ws.tf(&["plan", "-destroy", "-no-color", "-input=false"]));
    assert!(
        planned.contains("Destroying cluster research deletes its nodes and running jobs")
            && planned.contains(&format!("/home ({fs}) is kept with the users' files"))
            && planned.contains(&format!("the state volume ({volume}"))
            && planned.contains("kept as a final snapshot"),
        "{planned}"
    );
    let destroyed = said(&ws.destroy());
    assert!(
        destroyed.contains("what its users cannot remake is kept") && destroyed.contains(&fs),
        "{destroyed}"
    );
    assert_eq!(
        file_systems(&emu),
        vec![(fs.clone(), 0)],
        "/home kept, without mount targets"
    );
    let snapshots = final_snapshots(&emu);
    assert!(
        snapshots.len() == 1 && snapshots[0].1 == volume && destroyed.contains(&snapshots[0].0),
        "{snapshots:?}: {destroyed}"
    );

    // Created again under its name, the cluster mounts the same /home.
    ws.write(&format!("{}{}", network(), cluster("")));
    ws.apply();
    assert_eq!(ws.resource("hpc_cluster.main")["home_file_system_id"], fs.as_str());
    assert_eq!(file_systems(&emu), vec![(fs.clone(), 1)]);
    let deleting = "  home {\n    on_delete = \"delete\"\n  }\n";
    ws.write(&format!(
        "{}{}",
        network(),
        cluster(deleting).replace(
            &format!("ami_id = \"{AMI}\""),
            &format!("ami_id = \"{AMI}\"\n    state_volume_on_delete = \"delete\"")
        )
    ));
    let planned = said(&ws.plan());
    assert!(
        planned.contains("1 to change") && !planned.contains("must be replaced"),
        "the settings change in place: {planned}"
    );
    ws.apply();
    let planned = said(&ws.tf(&["plan", "-destroy", "-no-color", "-input=false"]));
    assert!(
        planned.contains(&format!("/home ({fs}) is deleted with every user's files"))
            && planned.contains("is deleted with slurmctld's saved state"),
        "{planned}"
    );
    ws.destroy();
    assert_eq!(file_systems(&emu), vec![], "destroy deletes /home when told to");
    assert_eq!(final_snapshots(&emu).len(), 1, "no second final snapshot");
}

#[test]
fn throttling_on_a_fifth_of_calls_still_builds_the_cluster() {
    let emu = Emulator::start();
    emu.seed(7);
    for service in ["ec2", "ssm", "secretsmanager"] {
        let code = if service == "ec2" {
            "RequestLimitExceeded"
        } else {
            "ThrottlingException"
        };
        emu.add_fault(json!({"service": service, "code": code, "ratio": 0.2}));
    }
    let ws = Workspace::new("cluster-throttle", &emu);
    ws.write(&format!(
        "{}{}{}",
        network(),
        cluster(""),
        partition("cpu", "\"c7i.2xlarge\"", 8, "")
    ));
    ws.apply();
    ws.assert_no_changes();
    ws.destroy();
    let fired = emu.faults_fired();
    // The test's own checks below do not retry: stop throttling first.
    emu.clear_faults();
    assert!(fired.iter().sum::<u64>() >= 5, "{fired:?}");
    assert_eq!(running_with_tag(&emu, "hpcforge:cluster", "research"), 0);
}

#[test]
fn cluster_import_by_name_then_plan_shows_no_changes_and_destroy_in_any_order() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-import-src", &emu);
    ws.write(&format!(
        "{}{}{}",
        network(),
        cluster("  tags = { owner = \"lab\" }"),
        partition("cpu", "\"c7i.2xlarge\"", 8, "")
    ));
    ws.apply();
    let created = ws.resource("hpc_cluster.main");

    // A second configuration takes over the same cluster by name.
    let importer = Workspace::new("cluster-import", &emu);
    let net = ws.resource("hpc_network.net");
    let subnet = net["private_subnet_ids"]["us-east-1a"]
        .as_str()
        .expect("subnet")
        .to_string();
    let fs = ws.resource("hpc_lustre_fs.scratch");
    let body = cluster("  tags = { owner = \"lab\" }")
        .replace(
            "hpc_network.net.private_subnet_ids[\"us-east-1a\"]",
            &format!("\"{subnet}\""),
        )
        .replace(
            "hpc_lustre_fs.scratch.id",
            &format!("\"{}\"", fs["id"].as_str().unwrap_or("")),
        )
        .replace(
            "hpc_lustre_fs.scratch.dns_name",
            &format!("\"{}\"", fs["dns_name"].as_str().unwrap_or("")),
        )
        .replace(
            "hpc_lustre_fs.scratch.mount_name",
            &format!("\"{}\"", fs["mount_name"].as_str().unwrap_or("")),
        );
    // An import reads wait_for_ready as its default (it lives in no AWS resource); the config
    // keeps the default so that the imported cluster plans no change.
    let body = body[body.find("resource \"hpc_cluster\"").unwrap_or(0)..].replace("  wait_for_ready = false\n", "");
    // Creating it instead, as a second team picking the same name would, is refused before
    // anything is made, naming the import; the first state's cluster is untouched.
    importer.write(&body);
    let said = refused(&importer, &["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(
        said.contains("A cluster named \"research\" already exists in us-east-1")
            && said.contains("terraform import <address of this hpc_cluster> research")
            && said.contains(subnet.as_str()),
        "{said}"
    );
    let recorded = importer.state()["values"]["root_module"]["resources"].clone();
    assert!(recorded.as_array().is_none_or(Vec::is_empty), "{recorded}");
    assert_eq!(running_with_tag(&emu, "hpcforge:role", "head"), 1);
    assert_eq!(
        ws.resource("hpc_cluster.main")["head_node_instance_id"],
        created["head_node_instance_id"]
    );
    ws.assert_no_changes();
    importer.write(&format!(
        "{body}\nimport {{\n  to = hpc_cluster.main\n  id = \"research\"\n}}\n"
    ));
    let out = importer.apply();
    assert!(
        out.stdout.contains("1 imported, 0 added, 0 changed, 0 destroyed"),
        "{}",
        out.text()
    );
    importer.assert_no_changes();
    let imported = importer.resource("hpc_cluster.main");
    for attr in [
        "head_node_instance_id",
        "head_node_private_ip",
        "login_node_ids",
        "security_group_ids",
        "munge_key_secret_arn",
        "slurm_conf",
        "tags_all",
        "vpc_id",
    ] {
        assert_eq!(imported[attr], created[attr], "{attr}");
    }
    std::fs::remove_file(importer.dir.join("terraform.tfstate")).expect("forget the imported copy");

    // Destroy out of dependency order: the cluster first (Terraform takes its partition along),
    // then the rest. Nothing is left behind.
    let out = ws.ok(&[
        "destroy",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "-target=hpc_cluster.main",
    ]);
    assert!(out.stdout.contains("2 destroyed"), "{}", out.text());
    assert_eq!(running_with_tag(&emu, "hpcforge:cluster", "research"), 0);
    assert!(ssm_parameters(&emu).is_empty(), "{:?}", ssm_parameters(&emu));
    ws.destroy();
    let vpcs = emu.ec2("Action=DescribeVpcs");
    assert!(!vpcs.contains(net["vpc_id"].as_str().unwrap_or("?")));
}

#[test]
fn two_provider_aliases_build_clusters_in_two_accounts() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-accounts", &emu);
    let block = |alias: &str, account: &str| {
        format!(
            r#"
provider "hpc" {{
  alias  = "{alias}"
  region = "us-east-1"
  assume_role {{
    role_arn = "arn:aws:iam::{account}:role/hpcforge"
  }}
}}
resource "hpc_network" "{alias}" {{
  provider    = hpc.{alias}
  name        = "{alias}"
  nat_gateway = false
}}
resource "hpc_cluster" "{alias}" {{
  provider  = hpc.{alias}
  name      = "{alias}"
  subnet_id = hpc_network.{alias}.private_subnet_ids["us-east-1a"]
  wait_for_ready = false
  head_node {{
    ami_id = "{AMI}"
  }}
}}
"#
        )
    };
    ws.write_raw(&format!(
        "terraform {{\n  required_providers {{\n    hpc = {{ source = \"hpcforge/hpc\" }}\n  }}\n}}\n{}{}",
        block("physics", "111111111111"),
        block("biology", "222222222222")
    ));
    ws.apply();
    let physics = ws.resource("hpc_cluster.physics");
    let biology = ws.resource("hpc_cluster.biology");
    assert!(
        physics["munge_key_secret_arn"]
            .as_str()
            .is_some_and(|a| a.contains(":111111111111:")),
        "{physics}"
    );
    assert!(
        biology["munge_key_secret_arn"]
            .as_str()
            .is_some_and(|a| a.contains(":222222222222:")),
        "{biology}"
    );
    assert_eq!(
        running_with_tag(&emu, "hpcforge:cluster", "physics"),
        0,
        "nothing in the caller's own account"
    );
    ws.assert_no_changes();
    ws.destroy();
}

#[test]
fn cluster_settings_update_in_place_and_renames_replace() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-lifecycle", &emu);
    // Durations read back as written (90s, not 1m30s): the plans below are empty.
    let part = partition("cpu", "\"c7i.2xlarge\"", 8, "  provision_timeout = \"90s\"");
    ws.write(&format!("{}{}{part}", network(), cluster("")));
    ws.apply();
    let before = ws.resource("hpc_cluster.main");
    let part_version = ws.resource("hpc_partition.cpu")["desired_state_version"].clone();

    // More login nodes, another user, home on EFS: an in-place update of the cluster only.
    let changed = cluster("  home {\n    storage = \"efs\"\n    efs_id  = \"fs-0123456789abcdef0\"\n  }\n  user {\n    name = \"bob\"\n    uid  = 2002\n  }")
        .replace("count = 1", "count = 2");
    ws.write(&format!("{}{changed}{part}", network()));
    let plan = ws.plan();
    assert!(
        plan.stdout.contains("Plan: 0 to add, 1 to change, 0 to destroy."),
        "{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("hpc_cluster.main will be updated in-place"),
        "{}",
        plan.text()
    );
    emu.reset_calls();
    ws.apply();
    let after = ws.resource("hpc_cluster.main");
    assert_eq!(
        after["head_node_instance_id"], before["head_node_instance_id"],
        "the head node stays"
    );
    assert_eq!(after["login_node_ids"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        emu.mutating_calls().get("ec2:RunInstances"),
        Some(&1),
        "one new login node: {:?}",
        emu.mutating_calls()
    );
    assert_ne!(after["desired_state_version"], before["desired_state_version"]);
    assert_eq!(
        ws.resource("hpc_partition.cpu")["desired_state_version"],
        part_version,
        "the partition is untouched"
    );
    ws.assert_no_changes();

    // A new head image is an update in place: a new head on the same interface and address,
    // the state volume moved to it, the old head gone, the munge key kept; the login nodes,
    // launched from the same image, roll to it.
    let other_ami = emu.image_other_than(AMI);
    let new_image = changed.replace(&format!("ami_id = \"{AMI}\""), &format!("ami_id = \"{other_ami}\""));
    ws.write(&format!("{}{new_image}{part}", network()));
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main will be updated in-place"), "{plan}");
    assert!(!plan.contains("must be replaced"), "{plan}");
    ws.apply();
    let moved = ws.resource("hpc_cluster.main");
    let old_head = after["head_node_instance_id"].as_str().unwrap_or_default().to_string();
    let new_head = moved["head_node_instance_id"].as_str().unwrap_or_default().to_string();
    assert_ne!(new_head, old_head, "a new head node");
    for kept in [
        "head_node_private_ip",
        "head_node_network_interface_id",
        "state_volume_id",
        "munge_key_secret_arn",
    ] {
        assert_eq!(moved[kept], after[kept], "{kept} is kept");
    }
    let old = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={old_head}"));
    assert!(old.contains("<name>terminated</name>"), "{old}");
    let ids = |v: &Value| -> Vec<String> {
        v["login_node_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let (old_logins, new_logins) = (ids(&after), ids(&moved));
    assert_eq!(new_logins.len(), 2, "{new_logins:?}");
    for id in &old_logins {
        assert!(!new_logins.contains(id), "login node {id} rolls: {new_logins:?}");
        let old = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={id}"));
        assert!(old.contains("<name>terminated</name>"), "{old}");
    }
    for id in &new_logins {
        let new = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={id}"));
        assert!(new.contains(&format!("<imageId>{other_ami}</imageId>")), "{new}");
    }
    let volume = moved["state_volume_id"].as_str().unwrap_or_default();
    let described = emu.ec2(&format!("Action=DescribeVolumes&VolumeId.1={volume}"));
    assert!(
        described.contains(&format!("<instanceId>{new_head}</instanceId>")),
        "{described}"
    );
    assert!(described.contains("<encrypted>true</encrypted>"), "{described}");
    ws.assert_no_changes();
    let changed = new_image;

    // The state volume grows in place (the head grows its file system: the booted test shows
    // it); it cannot shrink.
    let grown = changed.replace(
        &format!("ami_id = \"{other_ami}\""),
        &format!("ami_id = \"{other_ami}\"\n    state_volume_size = 30"),
    );
    assert_ne!(grown, changed);
    ws.write(&format!("{}{grown}{part}", network()));
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main will be updated in-place"), "{plan}");
    assert!(!plan.contains("must be replaced"), "{plan}");
    ws.apply();
    let described = emu.ec2(&format!("Action=DescribeVolumes&VolumeId.1={volume}"));
    assert!(described.contains("<size>30</size>"), "{described}");
    let resized = ws.resource("hpc_cluster.main");
    for kept in ["head_node_instance_id", "state_volume_id", "login_node_ids"] {
        assert_eq!(resized[kept], moved[kept], "{kept} is kept when the volume grows");
    }
    ws.assert_no_changes();

    // A login node terminated outside Terraform: the refresh drops it, the next apply replaces
    // it and keeps the other.
    let lost = new_logins[0].clone();
    emu.ec2(&format!("Action=TerminateInstances&InstanceId.1={lost}"));
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main will be updated in-place"), "{plan}");
    ws.apply();
    let relaunched = ids(&ws.resource("hpc_cluster.main"));
    assert_eq!(relaunched.len(), 2, "{relaunched:?}");
    assert!(!relaunched.contains(&lost), "{relaunched:?}");
    assert!(
        relaunched.contains(&new_logins[1]),
        "the other login node stays: {relaunched:?}"
    );
    ws.assert_no_changes();
    ws.write(&format!(
        "{}{}{part}",
        network(),
        grown.replace("state_volume_size = 30", "state_volume_size = 25")
    ));
    let refused = ws.tf(&["plan", "-no-color", "-input=false"]);
    let said = refused.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !refused.success && said.contains("the state volume cannot shrink") && said.contains("is 30 GiB"),
        "{said}"
    );
    let changed = grown;

    // Renaming a partition, the cluster or the network's range plans a replacement.
    ws.write(&format!(
        "{}{changed}{}",
        network(),
        part.replace("name           = \"cpu\"", "name           = \"compute\"")
    ));
    let plan = ws.plan().text();
    assert!(
        plan.contains("hpc_partition.cpu must be replaced") && plan.contains("# forces replacement"),
        "{plan}"
    );
    ws.write(&format!(
        "{}{}{part}",
        network(),
        changed.replace("name      = \"research\"", "name      = \"physics\"")
    ));
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main must be replaced"), "{plan}");
    // The plan says what the replacement keeps and what the new cluster starts without.
    let said = plan.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        said.contains("Replacing cluster research deletes its nodes and running jobs")
            && said.contains("kept as a final snapshot")
            && said.contains("unless head_node.state_snapshot_id names the final snapshot"),
        "{said}"
    );
    ws.write(&format!(
        "{}{changed}{part}",
        network().replace(
            "name = \"research\"",
            "name = \"research\"\n  cidr_block = \"10.1.0.0/16\""
        )
    ));
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_network.net must be replaced"), "{plan}");
    ws.write(&format!("{}{changed}{part}", network()));
    ws.destroy();
    // The state volume and the head's interface go with the cluster.
    let left = emu.ec2("Action=DescribeVolumes&Filter.1.Name=tag%3Ahpcforge%3Arole&Filter.1.Value.1=head-state");
    assert!(!left.contains("<volumeId>"), "{left}");
    let left =
        emu.ec2("Action=DescribeNetworkInterfaces&Filter.1.Name=tag%3Ahpcforge%3Arole&Filter.1.Value.1=head-interface");
    assert!(!left.contains("<networkInterfaceId>"), "{left}");
}

/// The launch template's security groups, from DescribeLaunchTemplateVersions.
fn launch_template_groups(emu: &Emulator, region: &str, lt_id: &str) -> Vec<String> {
    let xml = emu.ec2_in(
        region,
        &format!("Action=DescribeLaunchTemplateVersions&LaunchTemplateId={lt_id}&Version.1=$Latest"),
    );
    let mut groups: Vec<String> = xml
        .split("sg-")
        .skip(1)
        .map(|s| {
            format!(
                "sg-{}",
                s.chars().take_while(|c| c.is_ascii_alphanumeric()).collect::<String>()
            )
        })
        .collect();
    groups.sort();
    groups.dedup();
    groups
}

/// The VPC of the emulator's default subnet in `region` and that VPC's route tables.
fn default_vpc_in(emu: &Emulator, region: &str) -> String {
    let subnet = emu.default_subnet_in(region);
    let xml = emu.ec2_in(region, &format!("Action=DescribeSubnets&SubnetId.1={subnet}"));
    xml_text(&xml, "vpcId")
}

/// Route tables of `vpc` in `region` (DescribeRouteTables' XML).
fn route_tables(emu: &Emulator, region: &str, vpc: &str) -> String {
    emu.ec2_in(
        region,
        &format!("Action=DescribeRouteTables&Filter.1.Name=vpc-id&Filter.1.Value.1={vpc}"),
    )
}

const PEERING: &str = r#"
resource "hpc_network_peering" "west" {
  vpc_id                  = hpc_network.net.vpc_id
  peer_vpc_id             = "WEST_VPC"
  peer_region             = "us-west-2"
  security_group_ids      = [hpc_network.net.security_group_id]
  peer_security_group_ids = ["WEST_GROUP"]
}
"#;

#[test]
fn a_cluster_in_the_network_group_reaches_lustre_and_remote_pools_bring_their_own_groups_and_path() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-network-group", &emu);
    let body = cluster("  security_group_id = hpc_network.net.security_group_id")
        .replace(
            "  subnet_ids       = [hpc_network.net.private_subnet_ids[\"us-east-1a\"]]\n}",
            "  subnet_ids         = [hpc_network.net.private_subnet_ids[\"us-east-1a\"]]\n  security_group_ids = [hpc_network.net.security_group_id]\n}",
        );
    let west_subnet = emu.default_subnet_in("us-west-2");
    let west_vpc = default_vpc_in(&emu, "us-west-2");
    let west_vpc_group = emu.default_security_group_in("us-west-2");
    // A remote pool without its own groups, or without a network path, is refused before
    // anything is made.
    let remote_pool = |groups: &str, max_nodes: u32| {
        partition(
            "gpu",
            "\"g6e.12xlarge\"",
            max_nodes,
            &format!(
                "  capacity_pool {{\n    region     = \"us-west-2\"\n    subnet_ids = [\"{west_subnet}\"]\n    ami_id     = \"{AMI}\"\n{groups}  }}\n"
            ),
        )
    };
    ws.write(&format!("{}{body}{}", network(), remote_pool("", 2)));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        out.text()
            .contains("a pool in another region needs its own security_group_ids"),
        "{}",
        out.text()
    );
    let own_group = format!("    security_group_ids = [\"{west_vpc_group}\"]\n");
    ws.write(&format!("{}{body}{}", network(), remote_pool(&own_group, 2)));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        out.text()
            .contains("a pool in us-west-2 needs a network path to the cluster in us-east-1"),
        "{}",
        out.text()
    );

    // With the peering, made in the same apply (so the pool's path is checked at apply).
    let peering = PEERING
        .replace("WEST_VPC", &west_vpc)
        .replace("WEST_GROUP", &west_vpc_group);
    let pool_groups = format!(
        "    security_group_ids    = [\"{west_vpc_group}\"]\n    peering_connection_id = hpc_network_peering.west.id\n"
    );
    let config = |max_nodes: u32| format!("{}{body}{peering}{}", network(), remote_pool(&pool_groups, max_nodes));
    ws.write(&config(2));
    ws.apply();
    ws.assert_no_changes();
    // EC2's instance events of the remote pool's region have a queue there too.
    let queue = format!("{}-ec2", hpc_desired_state::events_route("research", "gpu"));
    for region in ["us-east-1", "us-west-2"] {
        let found = emu.json_call_in(region, "sqs", "AmazonSQS.GetQueueUrl", &json!({"QueueName": queue}));
        assert!(found["QueueUrl"].is_string(), "{region}: {found}");
    }
    let net = ws.resource("hpc_network.net");
    let net_group = net["security_group_id"].as_str().expect("network group").to_string();
    let home_vpc = net["vpc_id"].as_str().expect("vpc").to_string();
    let c = ws.resource("hpc_cluster.main");
    let groups = c["security_group_ids"].as_array().expect("groups");
    assert_eq!(
        groups[0],
        json!(net_group),
        "the cluster adopts the network's group: {c}"
    );
    let lustre = ws.resource("hpc_lustre_fs.scratch");
    assert_eq!(lustre["security_group_ids"], json!([net_group]));
    // No group of the cluster's own beside the SSH group.
    let sgs = emu.ec2("Action=DescribeSecurityGroups");
    assert!(
        !sgs.contains("hpc-research-cluster"),
        "a cluster group was created anyway"
    );

    // The path: an active connection, the other range routed through it in every route table
    // of both VPCs, each side's group admitting the other's range.
    let pcx_state = ws.resource("hpc_network_peering.west");
    let pcx = pcx_state["id"].as_str().expect("pcx").to_string();
    assert_eq!(pcx_state["cidr_block"], "10.0.0.0/16");
    let west_cidr = pcx_state["peer_cidr_block"].as_str().expect("peer cidr").to_string();
    let described = emu.ec2(&format!(
        "Action=DescribeVpcPeeringConnections&VpcPeeringConnectionId.1={pcx}"
    ));
    assert!(described.contains("<code>active</code>"), "{described}");
    for (region, vpc, dest, key) in [
        ("us-east-1", &home_vpc, west_cidr.as_str(), "route_table_ids"),
        ("us-west-2", &west_vpc, "10.0.0.0/16", "peer_route_table_ids"),
    ] {
        // Every route table of the VPC, and each sends the other range through the connection.
        let tables = route_tables(&emu, region, vpc);
        let recorded = pcx_state[key].as_array().expect("tables");
        let all: Vec<&str> = tables
            .split("<routeTableId>")
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .collect();
        assert!(!recorded.is_empty(), "{pcx_state}");
        for table in &all {
            assert!(
                recorded.contains(&json!(table)),
                "{table} of {vpc} has no route: {pcx_state}"
            );
        }
        for table in recorded {
            let table = table.as_str().expect("table id");
            let one = emu.ec2_in(region, &format!("Action=DescribeRouteTables&RouteTableId.1={table}"));
            assert!(
                one.contains(&format!("<destinationCidrBlock>{dest}</destinationCidrBlock>")) && one.contains(&pcx),
                "{table} in {region} does not route {dest} through {pcx}:\n{one}"
            );
        }
    }
    let home_rules = emu.ec2(&format!("Action=DescribeSecurityGroups&GroupId.1={net_group}"));
    assert!(home_rules.contains(&west_cidr), "{home_rules}");
    let west_rules = emu.ec2_in(
        "us-west-2",
        &format!("Action=DescribeSecurityGroups&GroupId.1={west_vpc_group}"),
    );
    assert!(west_rules.contains("10.0.0.0/16"), "{west_rules}");

    // Compute nodes: the cluster group (not the SSH group); the remote pool: only its own group.
    let p = ws.resource("hpc_partition.gpu");
    let lts = p["launch_template_ids"].as_object().expect("launch templates");
    for (key, id) in lts {
        let id = id.as_str().unwrap_or_default();
        let region = if key.starts_with("2/") {
            "us-west-2"
        } else {
            "us-east-1"
        };
        let got = launch_template_groups(&emu, region, id);
        let want = if region == "us-west-2" {
            vec![west_vpc_group.clone()]
        } else {
            vec![net_group.clone()]
        };
        assert_eq!(got, want, "launch template {key} ({region})");
    }

    // A route taken away out of band: the next change of the pools is refused at plan, naming
    // the subnet, the range and the table.
    let west_table = pcx_state["peer_route_table_ids"][0]
        .as_str()
        .expect("table")
        .to_string();
    emu.ec2_in(
        "us-west-2",
        &format!("Action=DeleteRoute&RouteTableId={west_table}&DestinationCidrBlock=10.0.0.0/16"),
    );
    ws.write(&config(3));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success, "{}", out.text());
    let text = out.text();
    assert!(
        text.contains(&format!("subnet {west_subnet} sends 10.0.0.0/16")) && text.contains(&west_table),
        "{text}"
    );
    // And the cluster's Lustre, whose name resolves only in us-east-1, is out of the pool's reach.
    assert!(
        text.contains("nodes of capacity_pool 2 in us-west-2 cannot mount /scratch"),
        "{text}"
    );
    emu.ec2_in(
        "us-west-2",
        &format!(
            "Action=CreateRoute&RouteTableId={west_table}&DestinationCidrBlock=10.0.0.0/16&VpcPeeringConnectionId={pcx}"
        ),
    );

    // Destroying takes the path down with the rest: rules, routes, connection; the cluster
    // leaves the network's group to the network, which removes it.
    ws.destroy();
    let sgs = emu.ec2("Action=DescribeSecurityGroups");
    assert!(!sgs.contains(&net_group), "the network's group outlived the network");
    let west_rules = emu.ec2_in(
        "us-west-2",
        &format!("Action=DescribeSecurityGroups&GroupId.1={west_vpc_group}"),
    );
    assert!(!west_rules.contains("10.0.0.0/16"), "{west_rules}");
    let tables = route_tables(&emu, "us-west-2", &west_vpc);
    assert!(!tables.contains(&pcx), "{tables}");
    let described = emu.ec2(&format!(
        "Action=DescribeVpcPeeringConnections&VpcPeeringConnectionId.1={pcx}"
    ));
    assert!(described.contains("<code>deleted</code>"), "{described}");
}

#[test]
fn refreshing_many_clusters_and_partitions_takes_a_few_calls_not_several_each() {
    let emu = Emulator::start();
    let ws = Workspace::new("many-clusters", &emu);
    let subnet = emu.default_subnet();
    ws.write(&format!(
        r#"
resource "hpc_cluster" "c" {{
  count     = 3
  name      = "many-${{count.index}}"
  subnet_id = "{subnet}"
  wait_for_ready = false
  head_node {{
    ami_id = "{AMI}"
  }}
}}

resource "hpc_partition" "p" {{
  count          = 12
  cluster_id     = hpc_cluster.c[floor(count.index / 4)].id
  name           = "p${{count.index % 4}}"
  instance_types = ["c7i.2xlarge"]
  max_nodes      = 4
  ami_id         = "{AMI}"
  wait_for_apply = false
  capacity_pool {{
    subnet_ids = ["{subnet}"]
  }}
}}
"#
    ));
    ws.apply();
    for parallelism in ["-parallelism=1", "-parallelism=10"] {
        emu.reset_calls();
        let out = ws.ok(&["plan", "-no-color", "-input=false", "-detailed-exitcode", parallelism]);
        assert!(out.stdout.contains("No changes"), "{}", out.text());
        let calls = emu.calls();
        let ssm: u64 = calls
            .iter()
            .filter(|(k, _)| k.starts_with("ssm:"))
            .map(|(_, n)| n)
            .sum();
        // One listing of each cluster's parameters (cluster + 4 partitions fit a page of 10),
        // instead of a GetParameter per resource and a listing per partition.
        assert!(
            ssm <= 3,
            "{parallelism}: {ssm} SSM calls for 3 clusters and 12 partitions: {calls:?}"
        );
        // The three head nodes come from one view of the region's head and login nodes.
        let describes = calls.get("ec2:DescribeInstances").copied().unwrap_or(0);
        assert!(
            describes <= 1,
            "{parallelism}: {describes} DescribeInstances: {calls:?}"
        );
        let total: u64 = calls.values().sum();
        assert!(total <= 6, "{parallelism}: {total} calls for 15 resources: {calls:?}");
    }
    // Out-of-band changes still show: a partition's document deleted, a head node terminated.
    let del = json_call(
        &emu,
        "ssm",
        "AmazonSSM.DeleteParameter",
        &json!({"Name": &hpc_desired_state::partition_param("many-1", "p2")}),
    );
    assert_eq!(del.status, 200, "{}", del.body);
    let head = ws.resource("hpc_cluster.c[2]")["head_node_instance_id"]
        .as_str()
        .expect("head node id")
        .to_string();
    emu.ec2(&format!(
        "Action=TerminateInstances&Version=2016-11-15&InstanceId.1={head}"
    ));
    let plan = ws.plan();
    assert!(
        plan.stdout.contains("hpc_partition.p[6] will be created"),
        "{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("hpc_cluster.c[2] will be updated in-place"),
        "{}",
        plan.text()
    );
    ws.destroy();
}

/// Every parameter under `path` with its value, through every page.
fn parameters_under(emu: &Emulator, path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut token = Value::Null;
    loop {
        let mut body = json!({"Path": path, "Recursive": true, "MaxResults": 10});
        if !token.is_null() {
            body["NextToken"] = token.clone();
        }
        let r = json_call(emu, "ssm", "AmazonSSM.GetParametersByPath", &body);
        let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
        for p in v["Parameters"].as_array().into_iter().flatten() {
            out.push((
                p["Name"].as_str().unwrap_or_default().to_string(),
                p["Value"].as_str().unwrap_or_default().to_string(),
            ));
        }
        token = v["NextToken"].clone();
        if token.is_null() {
            break;
        }
    }
    out.sort();
    out
}

fn many_users(n: u32) -> String {
    (0..n)
        .map(|i| {
            let key = |k: u32| {
                format!(
                    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{:0>43} u{i:04}-{k}@laptop",
                    i * 2 + k
                )
            };
            format!(
                "  user {{\n    name = \"u{i:04}\"\n    uid = {}\n    ssh_public_keys = [\"{}\", \"{}\"]\n  }}\n",
                3000 + i,
                key(0),
                key(1)
            )
        })
        .collect()
}

/// A thousand users with two keys each publish in 8 KiB shards beside a small cluster document;
/// a plan afterwards is empty; fewer users leave no stale shard; destroy leaves nothing.
#[test]
fn a_thousand_users_with_two_keys_each_publish_in_shards() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-users", &emu);
    ws.write(&format!("{}{}", network(), cluster(&many_users(1000))));
    ws.apply();
    let shards = || parameters_under(&emu, &hpc_desired_state::users_path("research"));
    let published = shards();
    assert!(published.len() > 1, "{} shard(s)", published.len());
    let mut names = Vec::new();
    for (name, value) in &published {
        assert!(value.len() <= 8192, "{name}: {} bytes", value.len());
        let users: Vec<Value> = serde_json::from_str(value).expect("a shard is a JSON list of users");
        names.extend(users.iter().filter_map(|u| u["name"].as_str().map(str::to_string)));
    }
    assert_eq!(names.len(), 1001, "alice and the thousand");
    assert_eq!(names[0], "alice");
    let doc: Value = emu
        .parameter_json(&hpc_desired_state::cluster_param("research"))
        .expect("cluster document");
    assert_eq!(doc["user_shards"].as_u64(), Some(published.len() as u64));
    assert_eq!(doc["users"], json!([]));
    ws.assert_no_changes();

    ws.write(&format!("{}{}", network(), cluster(&many_users(3))));
    ws.apply();
    assert_eq!(
        shards().iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["/hpcforge/clusters/research/users/0000"]
    );
    // The shard that held 8 KiB was an Advanced parameter, which AWS never lets go back to
    // Standard: written again with four users, it stays Advanced.
    let described = json_call(
        &emu,
        "ssm",
        "AmazonSSM.DescribeParameters",
        &json!({"ParameterFilters": [{"Key": "Name", "Values": ["/hpcforge/clusters/research/users/0000"]}]}),
    );
    let described: Value = serde_json::from_str(&described.body).unwrap_or_default();
    assert_eq!(described["Parameters"][0]["Tier"], "Advanced", "{described}");
    ws.destroy();
    assert!(ssm_parameters(&emu).is_empty(), "{:?}", ssm_parameters(&emu));
}

/// The CIDRs the group's ingress rules admit, from DescribeSecurityGroups.
fn ssh_cidrs(emu: &Emulator, group_name: &str) -> Vec<String> {
    let xml = emu.ec2(&format!(
        "Action=DescribeSecurityGroups&Filter.1.Name=group-name&Filter.1.Value.1={group_name}"
    ));
    let ingress = xml
        .split("<ipPermissions>")
        .nth(1)
        .and_then(|rest| rest.split("</ipPermissions>").next())
        .unwrap_or_default();
    let mut cidrs: Vec<String> = ingress
        .split("<cidrIp>")
        .skip(1)
        .filter_map(|rest| rest.split("</cidrIp>").next())
        .map(str::to_string)
        .collect();
    cidrs.sort();
    cidrs
}

#[test]
fn a_cidr_removed_from_allowed_ssh_cidrs_is_revoked() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-ssh-revoke", &emu);
    let with_cidrs = |cidrs: &str| {
        cluster("").replace(
            &format!("    ami_id = \"{AMI}\"\n"),
            &format!("    ami_id = \"{AMI}\"\n    allowed_ssh_cidrs = [{cidrs}]\n"),
        )
    };
    ws.write(&format!(
        "{}{}",
        network(),
        with_cidrs("\"10.20.0.0/16\", \"192.168.7.0/24\"")
    ));
    ws.apply();
    assert_eq!(ssh_cidrs(&emu, "hpc-research-ssh"), ["10.20.0.0/16", "192.168.7.0/24"]);

    ws.write(&format!(
        "{}{}",
        network(),
        with_cidrs("\"10.20.0.0/16\", \"172.16.0.0/12\"")
    ));
    ws.apply();
    assert_eq!(
        ssh_cidrs(&emu, "hpc-research-ssh"),
        ["10.20.0.0/16", "172.16.0.0/12"],
        "the removed CIDR is still admitted"
    );
    ws.assert_no_changes();

    ws.write(&format!("{}{}", network(), with_cidrs("")));
    ws.apply();
    assert!(ssh_cidrs(&emu, "hpc-research-ssh").is_empty(), "SSH is still open");
    ws.destroy();
}

fn describe_secret(emu: &Emulator, id: &str) -> Value {
    let r = json_call(
        emu,
        "secretsmanager",
        "secretsmanager.DescribeSecret",
        &json!({ "SecretId": id }),
    );
    serde_json::from_str(&r.body).unwrap_or_default()
}

fn secret_text(emu: &Emulator, id: &str) -> String {
    secret_value(emu, id)["SecretString"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn secrets_get_new_versions_and_a_cluster_made_again_restores_its_names() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster-secrets", &emu);
    let external = |password: &str, version: u32| {
        cluster(&format!(
            "  accounting {{\n    mode = \"external\"\n    host = \"db.example\"\n    password = \"{password}\"\n    password_version = {version}\n  }}"
        ))
    };
    let munge = "hpcforge/research/munge-key";
    let db = "hpcforge/research/db-password";

    // The external database password changes: a new version of the same secret.
    ws.write(&format!("{}{}", network(), external("first-password-1", 1)));
    ws.apply();
    let arn = describe_secret(&emu, db)["ARN"].clone();
    ws.write(&format!("{}{}", network(), external("second-password-2", 2)));
    ws.apply();
    assert_eq!(secret_text(&emu, db), "second-password-2");
    assert_eq!(
        describe_secret(&emu, db)["ARN"],
        arn,
        "the secret was replaced, not versioned"
    );

    // Destroyed: both secrets are scheduled for deletion (recoverable), not gone.
    let key_before = secret_value_b64(&emu, munge);
    ws.destroy();
    for id in [munge, db] {
        let d = describe_secret(&emu, id);
        assert!(d["DeletedDate"].is_number(), "{id} is not scheduled for deletion: {d}");
    }

    // The same cluster made again: the names are restored (AWS would refuse a new secret
    // under a name in its recovery window), with a new munge key.
    ws.apply();
    for id in [munge, db] {
        let d = describe_secret(&emu, id);
        assert!(d["DeletedDate"].is_null(), "{id} is still scheduled for deletion: {d}");
    }
    let key_after = secret_value_b64(&emu, munge);
    assert!(
        !key_after.is_empty() && key_after != key_before,
        "the munge key was not renewed"
    );
    assert_eq!(secret_text(&emu, db), "second-password-2");
    ws.assert_no_changes();
    ws.destroy();
}
