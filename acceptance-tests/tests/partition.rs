//! hpc_partition end to end: partitions come and go without touching the cluster or each
//! other, drift and disappearance, the cluster's instance profile, a provider killed mid-create,
//! EC2's instance events routed to the partition's queue.

use acceptance_tests::fixtures::{
    cluster, json_call, network, partition, refused, running_with_tag, secret_value_b64, ssm_parameters,
    three_partitions, versions, AMI,
};
use acceptance_tests::{xml_text, Emulator, Workspace};
use serde_json::{json, Value};

#[test]
fn partitions_come_and_go_without_touching_the_cluster_or_each_other() {
    let emu = Emulator::start();
    let ws = Workspace::new("cluster", &emu);
    ws.write(&format!("{}{}{}", network(), cluster(""), three_partitions()));
    ws.apply();

    let c = ws.resource("hpc_cluster.main");
    assert_eq!(c["id"], "research");
    assert!(
        c["head_node_instance_id"].as_str().is_some_and(|i| i.starts_with("i-")),
        "{c}"
    );
    assert!(
        c["head_node_private_ip"]
            .as_str()
            .is_some_and(|i| i.starts_with("10.0.")),
        "{c}"
    );
    assert_eq!(c["login_node_ids"].as_array().map(Vec::len), Some(1));
    assert!(
        c["slurm_conf"]
            .as_str()
            .is_some_and(|s| s.contains("ClusterName=research") && s.contains("ResumeProgram=")),
        "{c}"
    );
    assert_eq!(
        running_with_tag(&emu, "hpcforge:cluster", "research"),
        2,
        "head and one login node"
    );

    // The munge key is in Secrets Manager, and nowhere in state.
    let arn = c["munge_key_secret_arn"].as_str().expect("munge arn").to_string();
    let key = secret_value_b64(&emu, &arn);
    assert!(key.len() > 1000, "a 1024-byte key: {}", key.len());
    let raw = ws.raw_state();
    assert!(!raw.contains(&key[..64]), "the munge key must not be in state");

    let gpu = ws.resource("hpc_partition.gpu");
    let rendered = gpu["rendered_partition"].as_str().expect("rendered");
    assert!(
        rendered.contains("NodeName=gpu-p5-48xl-[1-4] State=CLOUD CPUs=192"),
        "{rendered}"
    );
    assert!(
        rendered.contains("Gres=gpu:h100:8") && rendered.contains("efa"),
        "{rendered}"
    );
    assert!(
        rendered.contains("PartitionName=gpu") && rendered.contains("MaxTime=2-00:00:00"),
        "{rendered}"
    );
    assert_eq!(gpu["max_gpus"], 32);
    assert_eq!(
        gpu["placement_group_names"].as_array().map(Vec::len),
        Some(2),
        "a placement group per pool with EFA"
    );
    assert_eq!(
        gpu["launch_template_ids"].as_object().map(|m| m.len()),
        Some(2),
        "one template per pool and type"
    );
    let cpu = ws.resource("hpc_partition.cpu");
    assert_eq!(cpu["node_names"], json!(["cpu-c7i-2xl-[1-16]", "cpu-c7i-4xl-[1-16]"]));
    // The published layout, spelled out here once: the wire format the agent reads, then the
    // owners the provider records (every other test names these paths through
    // hpc_desired_state).
    assert_eq!(
        ssm_parameters(&emu),
        vec![
            "/hpcforge/clusters/research/cluster",
            "/hpcforge/clusters/research/partitions/cpu",
            "/hpcforge/clusters/research/partitions/gpu",
            "/hpcforge/clusters/research/partitions/spot",
            "/hpcforge/clusters/research/users/0000",
            "/hpcforge/owners/clusters/research",
            "/hpcforge/owners/partitions/research/cpu",
            "/hpcforge/owners/partitions/research/gpu",
            "/hpcforge/owners/partitions/research/spot",
        ]
    );
    ws.assert_no_changes();
    let before = versions(&ws);

    // Add a fourth partition: only it is created.
    let extra = partition("himem", "\"r7i.8xlarge\"", 8, "");
    ws.write(&format!("{}{}{}{extra}", network(), cluster(""), three_partitions()));
    let plan = ws.plan();
    assert!(
        plan.stdout.contains("Plan: 1 to add, 0 to change, 0 to destroy."),
        "{}",
        plan.text()
    );
    emu.reset_calls();
    ws.apply();
    let calls = emu.mutating_calls();
    for forbidden in [
        "ec2:RunInstances",
        "ec2:TerminateInstances",
        "ec2:DeleteLaunchTemplate",
        "secretsmanager:CreateSecret",
    ] {
        assert_eq!(
            calls.get(forbidden),
            None,
            "{forbidden} while adding a partition: {calls:?}"
        );
    }
    assert_eq!(
        calls.get("ssm:PutParameter"),
        Some(&2),
        "only the new partition is published, and its owner recorded: {calls:?}"
    );
    assert_eq!(calls.get("ec2:CreateLaunchTemplate"), Some(&2), "{calls:?}");
    let after: Vec<_> = versions(&ws)
        .into_iter()
        .filter(|(a, _)| a != "hpc_partition.himem")
        .collect();
    assert_eq!(
        after, before,
        "the cluster's and other partitions' documents are unchanged"
    );

    // Change one partition: only it is updated.
    let changed = three_partitions().replace("max_nodes      = 32", "max_nodes      = 48");
    ws.write(&format!("{}{}{changed}{extra}", network(), cluster("")));
    let plan = ws.plan();
    assert!(
        plan.stdout.contains("Plan: 0 to add, 1 to change, 0 to destroy."),
        "{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("hpc_partition.spot will be updated in-place"),
        "{}",
        plan.text()
    );
    emu.reset_calls();
    ws.apply();
    assert_eq!(emu.mutating_calls().get("ec2:RunInstances"), None);
    let now = versions(&ws);
    for (addr, v) in &before {
        let new = now.iter().find(|(a, _)| a == addr).map(|(_, v)| v.clone());
        if addr == "hpc_partition.spot" {
            assert_ne!(new.as_ref(), Some(v), "spot was republished");
        } else {
            assert_eq!(new.as_ref(), Some(v), "{addr} untouched");
        }
    }

    // Remove one partition: only it is destroyed.
    ws.write(&format!("{}{}{}", network(), cluster(""), changed));
    let plan = ws.plan();
    assert!(
        plan.stdout.contains("Plan: 0 to add, 0 to change, 1 to destroy."),
        "{}",
        plan.text()
    );
    ws.apply();
    assert_eq!(
        ssm_parameters(&emu).len(),
        9,
        "the cluster, its users and three partitions, each of the four with its owner"
    );
    // The head's root volume as the schema's defaults say: 100 GiB of encrypted gp3.
    let head_lt =
        emu.ec2("Action=DescribeLaunchTemplateVersions&LaunchTemplateName=hpc-research-head&Version.1=$Latest");
    for want in [
        "<volumeSize>100</volumeSize>",
        "<volumeType>gp3</volumeType>",
        "<encrypted>true</encrypted>",
    ] {
        assert!(
            head_lt.contains(want),
            "no {want} in the head's launch template: {head_lt}"
        );
    }
    ws.assert_no_changes();

    ws.destroy();
    assert!(ssm_parameters(&emu).is_empty(), "{:?}", ssm_parameters(&emu));
    assert_eq!(running_with_tag(&emu, "hpcforge:cluster", "research"), 0);
    let lts = emu.ec2("Action=DescribeLaunchTemplates");
    assert!(!lts.contains("hpc-research"), "{lts}");
    let groups = emu.ec2("Action=DescribeSecurityGroups");
    assert!(!groups.contains("hpc-research-"), "{groups}");
    assert!(secret_value_b64(&emu, &arn).is_empty(), "the munge key secret is gone");
}

#[test]
fn partition_drift_and_disappearance_are_detected() {
    let emu = Emulator::start();
    let ws = Workspace::new("partition-drift", &emu);
    ws.write(&format!(
        "{}{}{}",
        network(),
        cluster(""),
        partition("cpu", "\"c7i.2xlarge\"", 8, "")
    ));
    ws.apply();
    // Someone edits the published document by hand.
    let get = json_call(
        &emu,
        "ssm",
        "AmazonSSM.GetParameter",
        &json!({"Name": &hpc_desired_state::partition_param("research", "cpu")}),
    );
    let v: Value = serde_json::from_str(&get.body).expect("json");
    let mut doc: Value = serde_json::from_str(v["Parameter"]["Value"].as_str().expect("value")).expect("doc");
    doc["max_nodes"] = json!(99);
    let put = json_call(
        &emu,
        "ssm",
        "AmazonSSM.PutParameter",
        &json!({"Name": &hpc_desired_state::partition_param("research", "cpu"), "Value": doc.to_string(), "Type": "String", "Overwrite": true}),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let plan = ws.plan();
    assert_eq!(plan.code, Some(2), "{}", plan.text());
    assert!(plan.stdout.contains("99 -> 8"), "{}", plan.text());
    ws.apply();
    ws.assert_no_changes();

    // Deleted out of band: planned for creation again.
    let del = json_call(
        &emu,
        "ssm",
        "AmazonSSM.DeleteParameter",
        &json!({"Name": &hpc_desired_state::partition_param("research", "cpu")}),
    );
    assert_eq!(del.status, 200);
    let plan = ws.plan();
    assert!(
        plan.stdout.contains("1 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    ws.apply();

    // Import by <cluster>/<partition>, then nothing to change.
    let importer = Workspace::new("partition-import", &emu);
    let body = partition("cpu", "\"c7i.2xlarge\"", 8, "");
    let body = format!(
        "{}\nvariable \"subnet_a\" {{}}\nvariable \"subnet_b\" {{}}\n{}",
        acceptance_tests::PROVIDER,
        body.replace("hpc_cluster.main.id", "\"research\"")
            .replace("hpc_network.net.private_subnet_ids[\"us-east-1a\"]", "var.subnet_a")
            .replace("hpc_network.net.private_subnet_ids[\"us-east-1b\"]", "var.subnet_b"),
    );
    let net = ws.resource("hpc_network.net");
    let a = format!(
        "subnet_a={}",
        net["private_subnet_ids"]["us-east-1a"].as_str().unwrap_or("")
    );
    let b = format!(
        "subnet_b={}",
        net["private_subnet_ids"]["us-east-1b"].as_str().unwrap_or("")
    );
    let apply = [
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "-var",
        &a,
        "-var",
        &b,
    ];
    // Creating it instead is refused before anything is made, naming the import.
    importer.write_raw(&body);
    let published = || {
        let name = hpc_desired_state::partition_param("research", "cpu");
        let r = json_call(&emu, "ssm", "AmazonSSM.GetParameter", &json!({ "Name": name }));
        serde_json::from_str::<Value>(&r.body).unwrap_or_default()["Parameter"]["Version"].clone()
    };
    let before = published();
    assert!(before.is_i64(), "{before}");
    let said = refused(&importer, &apply);
    assert!(
        said.contains("A partition named \"cpu\" in cluster \"research\" already exists in us-east-1")
            && said.contains("terraform import <address of this hpc_partition> research/cpu"),
        "{said}"
    );
    assert_eq!(published(), before, "the refused create published the partition");
    importer.write_raw(&format!(
        "{body}\nimport {{\n  to = hpc_partition.cpu\n  id = \"research/cpu\"\n}}\n"
    ));
    let out = importer.ok(&apply);
    assert!(
        out.stdout.contains("1 imported, 0 added, 0 changed, 0 destroyed"),
        "{}",
        out.text()
    );
    let plan = importer.tf(&[
        "plan",
        "-no-color",
        "-input=false",
        "-detailed-exitcode",
        "-var",
        &a,
        "-var",
        &b,
    ]);
    assert_eq!(plan.code, Some(0), "{}", plan.text());
    ws.destroy();
}

#[test]
fn a_partition_without_an_instance_profile_launches_with_the_clusters() {
    let emu = Emulator::start();
    let created = emu.query(
        "iam",
        "2010-05-08",
        "Action=CreateInstanceProfile&InstanceProfileName=research-nodes",
    );
    let profile = acceptance_tests::xml_text(&created, "Arn");
    assert!(profile.contains(":instance-profile/research-nodes"), "{created}");
    let ws = Workspace::new("cluster-partition-profile", &emu);
    let with_profile = cluster("").replace(
        &format!("    ami_id = \"{AMI}\"\n"),
        &format!("    ami_id = \"{AMI}\"\n    instance_profile_arn = \"{profile}\"\n"),
    );
    ws.write(&format!(
        "{}{with_profile}{}",
        network(),
        partition("cpu", "\"c7i.2xlarge\"", 4, "")
    ));
    ws.apply();
    let lts = ws.resource("hpc_partition.cpu")["launch_template_ids"].clone();
    let ids: Vec<&str> = lts
        .as_object()
        .map(|m| m.values().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(ids.len(), 2, "one launch template per pool: {lts}");
    for id in ids {
        let xml = emu.ec2(&format!(
            "Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}&Version.1=$Latest"
        ));
        assert!(
            xml.contains(&profile),
            "launch template {id} has not the cluster's instance profile:\n{xml}"
        );
    }
    ws.assert_no_changes();
    ws.destroy();
}

#[test]
fn a_provider_killed_inside_a_partition_create_leaves_one_of_each_on_rerun() {
    let emu = Emulator::start();
    let ws = Workspace::new("partition-killed", &emu);
    ws.write(&format!("{}{}", network(), cluster("")));
    ws.apply();
    let part = partition("gpu", "\"g6e.12xlarge\", \"g6e.48xlarge\"", 4, "  efa_enabled = true");
    ws.write(&format!("{}{}{part}", network(), cluster("")));
    ws.apply_killed_after(&emu, "ec2:CreateLaunchTemplate");
    ws.apply();
    let templates = emu.ec2("Action=DescribeLaunchTemplates");
    let names: Vec<&str> = templates
        .split("<launchTemplateName>")
        .skip(1)
        .filter_map(|t| t.split("</launchTemplateName>").next())
        .filter(|n| n.contains("-gpu-"))
        .collect();
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(names.len(), 4, "two pools x two types: {names:?}");
    assert_eq!(unique.len(), names.len(), "a launch template twice: {names:?}");
    let groups = emu.ec2("Action=DescribePlacementGroups");
    assert_eq!(
        groups.matches("<groupName>").count(),
        2,
        "one placement group per pool: {groups}"
    );
    ws.assert_no_changes();
    ws.destroy();
}

/// Reads one message from `queue_url`, waiting up to a second.
fn received(emu: &Emulator, queue_url: &str) -> Vec<Value> {
    let out = emu.json_call(
        "sqs",
        "AmazonSQS.ReceiveMessage",
        &json!({"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}),
    );
    out["Messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m["Body"].as_str().and_then(|b| serde_json::from_str(b).ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// A partition routes EC2's spot interruption warnings and instance endings to an encrypted
/// queue that only its rules may send to (the head node's agent reads it): an instance ending
/// reaches the queue through the route, an instance starting does not, and removing the
/// partition takes the route away.
#[test]
fn a_partition_routes_ec2s_instance_events_to_its_queue_and_removing_it_takes_the_route_away() {
    let emu = Emulator::start();
    let ws = Workspace::new("partition-events", &emu);
    let part = partition("cpu", "\"c7i.2xlarge\"", 4, "");
    ws.write(&format!("{}{}{part}", network(), cluster("")));
    ws.apply();
    let base = hpc_desired_state::events_route("research", "cpu");
    let queue = emu.json_call(
        "sqs",
        "AmazonSQS.GetQueueUrl",
        &json!({"QueueName": format!("{base}-ec2")}),
    );
    let url = queue["QueueUrl"].as_str().expect("the partition's queue").to_string();
    let attrs = emu.json_call(
        "sqs",
        "AmazonSQS.GetQueueAttributes",
        &json!({"QueueUrl": url, "AttributeNames": ["All"]}),
    );
    assert_eq!(attrs["Attributes"]["SqsManagedSseEnabled"], "true", "{attrs}");
    let queue_arn = attrs["Attributes"]["QueueArn"].as_str().expect("arn").to_string();
    let rules = emu.json_call("events", "AWSEvents.ListRules", &json!({"NamePrefix": base}));
    let rules: Vec<Value> = rules["Rules"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = rules.iter().filter_map(|r| r["Name"].as_str()).collect();
    assert_eq!(
        names,
        vec![format!("{base}-spot"), format!("{base}-state")],
        "{rules:?}"
    );
    let policy = attrs["Attributes"]["Policy"].as_str().unwrap_or_default();
    for rule in &rules {
        let arn = rule["Arn"].as_str().expect("rule arn");
        assert!(policy.contains(arn), "only the route's rules may send: {policy}");
        let targets = emu.json_call("events", "AWSEvents.ListTargetsByRule", &json!({"Rule": rule["Name"]}));
        assert_eq!(targets["Targets"][0]["Arn"], queue_arn.as_str(), "{targets}");
    }

    // An instance starts (nothing the route carries), then ends (what it carries).
    let launched = emu.ec2(&format!(
        "Action=RunInstances&ImageId={AMI}&InstanceType=c7i.large&MinCount=1&MaxCount=1&SubnetId={}",
        emu.default_subnet()
    ));
    let instance = xml_text(&launched, "instanceId");
    assert!(received(&emu, &url).is_empty(), "a start is not routed");
    emu.ec2(&format!("Action=TerminateInstances&InstanceId.1={instance}"));
    let events = received(&emu, &url);
    assert!(
        events
            .iter()
            .any(|e| e["detail-type"] == "EC2 Instance State-change Notification"
                && e["detail"]["instance-id"] == instance.as_str()
                && e["detail"]["state"] == "shutting-down"),
        "{events:?}"
    );
    ws.assert_no_changes();

    ws.write(&format!("{}{}", network(), cluster("")));
    ws.apply();
    let gone = emu.json_call(
        "sqs",
        "AmazonSQS.GetQueueUrl",
        &json!({"QueueName": format!("{base}-ec2")}),
    );
    assert!(gone["QueueUrl"].is_null(), "the queue is gone: {gone}");
    let rules = emu.json_call("events", "AWSEvents.ListRules", &json!({"NamePrefix": base}));
    assert_eq!(rules["Rules"], json!([]), "{rules}");
    ws.destroy();
}
