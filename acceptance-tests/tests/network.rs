//! hpc_network and the hpc_instance_type data source, end to end.

use acceptance_tests::{Emulator, Workspace};

const NETWORK: &str = r#"
resource "hpc_network" "main" {
  name = "research"
  tags = { team = "hpc" }
}
"#;

fn count(xml: &str, needle: &str) -> usize {
    xml.matches(needle).count()
}

#[test]
fn network_is_created_with_subnets_gateways_and_a_closed_security_group_then_destroyed() {
    let emu = Emulator::start();
    let ws = Workspace::new("network", &emu);
    ws.write(NETWORK);
    let plan = ws.plan().text();
    assert!(
        plan.contains("\"us-east-1a\"") && plan.contains("\"us-east-1b\""),
        "default zones are shown in the plan:\n{plan}"
    );
    ws.apply();
    let net = ws.resource("hpc_network.main");
    let vpc = net["vpc_id"].as_str().expect("vpc").to_string();
    assert_eq!(net["id"], vpc.as_str());
    let public = net["public_subnet_ids"].as_object().expect("public subnets");
    let private = net["private_subnet_ids"].as_object().expect("private subnets");
    assert_eq!(public.keys().collect::<Vec<_>>(), vec!["us-east-1a", "us-east-1b"]);
    assert_eq!(private.len(), 2);
    assert!(
        net["nat_gateway_id"].as_str().is_some_and(|n| n.starts_with("nat-")),
        "{net}"
    );
    assert!(
        net["s3_endpoint_id"].as_str().is_some_and(|n| n.starts_with("vpce-")),
        "{net}"
    );
    assert_eq!(net["tags_all"]["project"], "acceptance");

    // What EC2 has: four subnets in the VPC with the planned ranges, routes, and a security group
    // that lets members talk to each other and admits nothing from the internet.
    let subnets = emu.ec2(&format!(
        "Action=DescribeSubnets&Filter.1.Name=vpc-id&Filter.1.Value.1={vpc}"
    ));
    assert_eq!(count(&subnets, "<subnetId>"), 4, "{subnets}");
    for cidr in ["10.0.0.0/19", "10.0.32.0/19", "10.0.224.0/22", "10.0.228.0/22"] {
        assert!(subnets.contains(cidr), "{cidr} missing: {subnets}");
    }
    let sg = net["security_group_id"].as_str().expect("sg");
    let groups = emu.ec2(&format!("Action=DescribeSecurityGroups&GroupId.1={sg}"));
    let start = groups.find("<ipPermissions>").expect("ingress rules");
    let end = groups[start..]
        .find("</ipPermissions>")
        .map(|e| start + e)
        .expect("end of ingress rules");
    let ingress = &groups[start..end];
    assert!(
        ingress.contains(&format!("<groupId>{sg}</groupId>")),
        "self-referencing rule: {groups}"
    );
    assert!(!ingress.contains("0.0.0.0/0"), "no ingress from the internet: {groups}");
    let routes = emu.ec2(&format!(
        "Action=DescribeRouteTables&Filter.1.Name=vpc-id&Filter.1.Value.1={vpc}"
    ));
    assert!(
        routes.contains(net["internet_gateway_id"].as_str().unwrap_or("?")),
        "{routes}"
    );
    assert!(
        routes.contains(net["nat_gateway_id"].as_str().unwrap_or("?")),
        "{routes}"
    );
    let vpcs = emu.ec2(&format!("Action=DescribeVpcs&VpcId.1={vpc}"));
    assert!(
        vpcs.contains("<key>team</key>") && vpcs.contains("<key>project</key>"),
        "{vpcs}"
    );

    ws.assert_no_changes();

    // Tags change in place, on the VPC and the rest.
    ws.write(&NETWORK.replace("team = \"hpc\"", "team = \"platform\""));
    let plan = ws.plan().text();
    assert!(
        plan.contains("update in-place") && !plan.contains("must be replaced"),
        "{plan}"
    );
    emu.reset_calls();
    ws.apply();
    assert_eq!(emu.mutating_calls().get("ec2:CreateVpc"), None);
    let vpcs = emu.ec2(&format!("Action=DescribeVpcs&VpcId.1={vpc}"));
    assert!(vpcs.contains("<value>platform</value>"), "{vpcs}");
    ws.assert_no_changes();

    ws.destroy();
    let left = emu.ec2(&format!(
        "Action=DescribeSubnets&Filter.1.Name=vpc-id&Filter.1.Value.1={vpc}"
    ));
    assert_eq!(count(&left, "<subnetId>"), 0, "{left}");
    let vpcs = emu.ec2("Action=DescribeVpcs");
    assert!(!vpcs.contains(&vpc), "the VPC is gone: {vpcs}");
    let nat = emu.ec2("Action=DescribeNatGateways");
    assert!(!nat.contains("<state>available</state>"), "{nat}");
}

#[test]
fn tags_changed_out_of_band_drift_back() {
    let emu = Emulator::start();
    let ws = Workspace::new("network-drift", &emu);
    ws.write(&NETWORK.replace(
        "name = \"research\"",
        "name = \"drift\"\n  nat_gateway = false\n  availability_zones = [\"us-east-1c\"]",
    ));
    ws.apply();
    let net = ws.resource("hpc_network.main");
    assert!(net["nat_gateway_id"].is_null());
    assert_eq!(net["private_subnet_ids"].as_object().map(|m| m.len()), Some(1));
    let vpc = net["vpc_id"].as_str().expect("vpc").to_string();
    emu.ec2(&format!(
        "Action=CreateTags&ResourceId.1={vpc}&Tag.1.Key=team&Tag.1.Value=rogue"
    ));
    let plan = ws.plan();
    assert_eq!(plan.code, Some(2), "{}", plan.text());
    assert!(plan.text().contains("\"rogue\" -> \"hpc\""), "{}", plan.text());
    ws.apply();
    ws.assert_no_changes();
    ws.destroy();
}

#[test]
fn bad_network_settings_are_rejected_at_plan() {
    let emu = Emulator::start();
    let ws = Workspace::new("network-bad", &emu);
    ws.write(
        r#"
resource "hpc_network" "bad" {
  name               = "Research Lab"
  cidr_block         = "10.0.0.0/8"
  availability_zones = ["us-east-1a", "us-east-1a"]
}
resource "hpc_network" "small" {
  name       = "small"
  cidr_block = "10.0.0.0/23"
  tags       = { "aws:team" = "hpc" }
}
"#,
    );
    emu.reset_calls();
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success);
    let text = out.text();
    for phrase in [
        "name \"Research Lab\" is not valid",
        "cidr_block \"10.0.0.0/8\" is not a usable IPv4 range",
        "availability_zones must list 1 to 6 different zones",
        "cidr_block \"10.0.0.0/23\" is not a usable IPv4 range",
        "the tag key \"aws:team\" is reserved",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?}:\n{text}");
    }
    // Zones are checked against the region when the plan is made (a read, no change).
    ws.write(
        "resource \"hpc_network\" \"wrong_zone\" {\n  name = \"ok\"\n  availability_zones = [\"eu-west-1a\"]\n}\n",
    );
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(
        !out.success
            && out
                .text()
                .contains("availability zone eu-west-1a is not in region us-east-1"),
        "{}",
        out.text()
    );
    assert!(emu.mutating_calls().is_empty(), "{:?}", emu.mutating_calls());
}

#[test]
fn instance_type_data_source_reports_gpus_efa_and_price() {
    let emu = Emulator::start();
    let ws = Workspace::new("instance-type", &emu);
    ws.write(
        r#"
data "hpc_instance_type" "p5" {
  instance_type = "p5.48xlarge"
}
data "hpc_instance_type" "c7i" {
  instance_type = "c7i.large"
}
output "p5" { value = data.hpc_instance_type.p5 }
output "c7i" { value = data.hpc_instance_type.c7i }
"#,
    );
    ws.apply();
    let out = ws.ok(&["output", "-json"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let p5 = &v["p5"]["value"];
    assert_eq!(p5["gpus"], 8, "{p5}");
    assert_eq!(p5["gpu_model"], "H100");
    assert_eq!(p5["efa_supported"], true);
    assert_eq!(p5["vcpus"], 192);
    assert!(p5["on_demand_hourly_price"].as_f64().is_some_and(|p| p > 10.0), "{p5}");
    let c7i = &v["c7i"]["value"];
    assert_eq!(c7i["gpus"], 0);
    assert!(c7i["gpu_model"].is_null());

    ws.write("data \"hpc_instance_type\" \"x\" {\n  instance_type = \"p9.mega\"\n}\n");
    let bad = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(
        !bad.success && bad.text().contains("\"p9.mega\" is not an EC2 instance type"),
        "{}",
        bad.text()
    );
}

#[test]
fn network_import_by_vpc_id_then_plan_shows_no_changes() {
    let emu = Emulator::start();
    let creator = Workspace::new("network-import-src", &emu);
    creator.write(NETWORK);
    creator.apply();
    let created = creator.resource("hpc_network.main");
    let vpc = created["vpc_id"].as_str().expect("vpc").to_string();

    let importer = Workspace::new("network-import", &emu);
    importer.write(&format!(
        "{NETWORK}\nimport {{\n  to = hpc_network.main\n  id = \"{vpc}\"\n}}\n"
    ));
    let out = importer.apply();
    assert!(
        out.stdout.contains("1 imported, 0 added, 0 changed, 0 destroyed"),
        "{}",
        out.text()
    );
    importer.assert_no_changes();
    let imported = importer.resource("hpc_network.main");
    for attr in [
        "public_subnet_ids",
        "private_subnet_ids",
        "security_group_id",
        "nat_gateway_id",
        "s3_endpoint_id",
        "public_route_table_id",
        "private_route_table_id",
        "internet_gateway_id",
        "tags",
        "tags_all",
        "availability_zones",
    ] {
        assert_eq!(imported[attr], created[attr], "{attr}");
    }
    let bad = Workspace::new("network-import-bad", &emu);
    bad.write(NETWORK);
    let out = bad.tf(&["import", "-no-color", "-input=false", "hpc_network.main", "subnet-123"]);
    assert!(
        !out.success && out.text().contains("import an hpc_network by its VPC id"),
        "{}",
        out.text()
    );
    creator.destroy();
}

/// How many of each thing the network named `research` owns in the emulator (by `Name` tag).
fn owned(emu: &Emulator) -> Vec<(&'static str, usize)> {
    let tagged = |action: &str, name: &str| {
        let xml = emu.ec2(&format!(
            "Action={action}&Filter.1.Name=tag:Name&Filter.1.Value.1={name}"
        ));
        count(&xml, "<key>Name</key>")
    };
    vec![
        ("vpc", tagged("DescribeVpcs", "research-vpc")),
        ("igw", tagged("DescribeInternetGateways", "research-igw")),
        ("nat address", tagged("DescribeAddresses", "research-nat")),
        ("security group", tagged("DescribeSecurityGroups", "research-cluster")),
    ]
}

#[test]
fn a_provider_killed_inside_the_network_create_leaves_one_network_on_rerun() {
    let emu = Emulator::start();
    let ws = Workspace::new("network-killed", &emu);
    ws.write(NETWORK);
    // Killed with half the subnets made, then again with the NAT gateway in flight.
    ws.apply_killed_after(&emu, "ec2:CreateSubnet");
    ws.apply_killed_after(&emu, "ec2:CreateNatGateway");
    ws.apply();
    let want = vec![("vpc", 1), ("igw", 1), ("nat address", 1), ("security group", 1)];
    assert_eq!(owned(&emu), want, "the reruns made a second of something");
    let vpc = ws.resource("hpc_network.main")["vpc_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let in_vpc = |action: &str, tag: &str| {
        count(
            &emu.ec2(&format!("Action={action}&Filter.1.Name=vpc-id&Filter.1.Value.1={vpc}")),
            tag,
        )
    };
    assert_eq!(in_vpc("DescribeSubnets", "<subnetId>"), 4, "two subnets per zone");
    // The two of the network and the VPC's main table.
    assert_eq!(in_vpc("DescribeRouteTables", "<ownerId>"), 3);
    let nats = emu.ec2("Action=DescribeNatGateways");
    assert_eq!(count(&nats, "<state>available</state>"), 1, "{nats}");
    let endpoints = emu.ec2("Action=DescribeVpcEndpoints");
    assert_eq!(count(&endpoints, "<vpcEndpointId>"), 1, "{endpoints}");
    ws.assert_no_changes();
    ws.destroy();
    assert!(
        owned(&emu).iter().all(|(_, n)| *n == 0),
        "destroy left {:?}",
        owned(&emu)
    );
}

#[test]
fn capacity_data_source_reports_quota_use_room_and_price_per_region() {
    let emu = Emulator::start();
    emu.set_quotas("us-east-1", serde_json::json!({"L-417A185B": 384}));
    // One p5 running in us-east-1 (192 of the 384 vCPUs) and a c7i, which counts elsewhere.
    for t in ["p5.48xlarge", "c7i.large"] {
        emu.ec2(&format!(
            "Action=RunInstances&ImageId=ami-03cf127a&InstanceType={t}&MinCount=1&MaxCount=1"
        ));
    }
    let ws = Workspace::new("capacity", &emu);
    ws.write(
        r#"
data "hpc_capacity" "gpus" {
  instance_types = ["p5.48xlarge", "trn1.32xlarge"]
  regions        = ["us-east-1", "us-west-2"]
}
output "capacity" { value = data.hpc_capacity.gpus }
"#,
    );
    ws.apply();
    let out = ws.ok(&["output", "-json"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let capacity = &v["capacity"]["value"];
    let pool = |region: &str, t: &str| {
        capacity["pools"]
            .as_array()
            .and_then(|p| p.iter().find(|e| e["region"] == region && e["instance_type"] == t))
            .cloned()
            .unwrap_or_else(|| panic!("no {region} {t} in {capacity}"))
    };
    let east = pool("us-east-1", "p5.48xlarge");
    assert_eq!(east["quota_code"], "L-417A185B", "{east}");
    assert_eq!(east["quota_vcpus"], 384);
    assert_eq!(east["used_vcpus"], 192);
    assert_eq!(east["free_instances"], 1);
    assert_eq!(east["free_gpus"], 8);
    assert!(east["hourly_price"].as_f64().is_some_and(|p| p > 10.0), "{east}");
    let west = pool("us-west-2", "p5.48xlarge");
    assert_eq!(west["quota_vcpus"], 1536, "{west}");
    assert_eq!(west["used_vcpus"], 0);
    assert_eq!(west["free_gpus"], 64);
    assert!(west["hourly_price"].is_null(), "other regions are unpriced: {west}");
    // Trainium has its own quota (512 vCPUs in the emulator's starting account): 4 of 128.
    let trn = pool("us-east-1", "trn1.32xlarge");
    assert_eq!(trn["quota_code"], "L-2C3B7624", "{trn}");
    assert_eq!(trn["quota_vcpus"], 512, "{trn}");
    assert_eq!(trn["free_instances"], 4, "{trn}");
    assert_eq!(capacity["total_free_gpus"], 72);
}

#[test]
fn peering_vpcs_whose_ranges_overlap_is_refused_at_plan_naming_both_ranges() {
    let emu = Emulator::start();
    let ws = Workspace::new("peering-overlap", &emu);
    let networks = r#"
resource "hpc_network" "a" {
  name        = "lab-a"
  nat_gateway = false
}
resource "hpc_network" "b" {
  name        = "lab-b"
  cidr_block  = "10.0.0.0/17"
  nat_gateway = false
}
"#;
    ws.write(networks);
    ws.apply();
    emu.reset_calls();
    ws.write(&format!(
        "{networks}{}",
        r#"
resource "hpc_network_peering" "ab" {
  vpc_id      = hpc_network.a.vpc_id
  peer_vpc_id = hpc_network.b.vpc_id
}
"#
    ));
    let out = ws.tf(&["plan", "-no-color", "-input=false"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        out.text()
            .contains("the VPCs' ranges overlap: 10.0.0.0/16 and 10.0.0.0/17"),
        "{}",
        out.text()
    );
    assert!(
        emu.mutating_calls().is_empty(),
        "a refused plan changed something: {:?}",
        emu.mutating_calls()
    );
}

/// Two networks in two regions, and the start of a peering between them (its block left open).
const TWO_REGIONS: &str = r#"
provider "hpc" {
  alias  = "west"
  region = "us-west-2"
}
resource "hpc_network" "a" {
  name        = "lab-a"
  nat_gateway = false
}
resource "hpc_network" "b" {
  provider    = hpc.west
  name        = "lab-b"
  cidr_block  = "10.1.0.0/16"
  nat_gateway = false
}
"#;
const PEERING: &str = r#"
resource "hpc_network_peering" "ab" {
  vpc_id                  = hpc_network.a.vpc_id
  peer_vpc_id             = hpc_network.b.vpc_id
  peer_region             = "us-west-2"
  security_group_ids      = [hpc_network.a.security_group_id]
  peer_security_group_ids = [hpc_network.b.security_group_id]
"#;

#[test]
fn a_provider_killed_inside_the_peering_create_leaves_one_connection_on_rerun() {
    let emu = Emulator::start();
    let ws = Workspace::new("peering-killed", &emu);
    let (networks, peering) = (TWO_REGIONS, format!("{PEERING}}}\n"));
    ws.write(networks);
    ws.apply();
    ws.write(&format!("{networks}{peering}"));
    // Killed once the connection is requested (before it is accepted), then with the routes
    // half made.
    ws.apply_killed_after(&emu, "ec2:CreateVpcPeeringConnection");
    ws.apply_killed_after(&emu, "ec2:CreateRoute");
    ws.apply();
    let live = |region: &str| {
        let xml = emu.ec2_in(region, "Action=DescribeVpcPeeringConnections");
        xml.matches("<code>").count() - xml.matches("<code>deleted</code>").count()
    };
    assert_eq!(
        (live("us-east-1"), live("us-west-2")),
        (1, 1),
        "the reruns made a second connection"
    );
    let state = ws.resource("hpc_network_peering.ab");
    let described = emu.ec2("Action=DescribeVpcPeeringConnections");
    assert!(described.contains("<code>active</code>"), "{described}");
    assert!(described.contains(state["id"].as_str().expect("id")), "{described}");
    ws.assert_no_changes();
    ws.destroy();
    assert_eq!(
        (live("us-east-1"), live("us-west-2")),
        (0, 0),
        "destroy left a connection"
    );
}

#[test]
fn peering_import_by_connection_id_then_plan_shows_no_changes() {
    let emu = Emulator::start();
    let ws = Workspace::new("peering-import", &emu);
    let config = format!("{TWO_REGIONS}{PEERING}  tags                    = {{ purpose = \"failover\" }}\n}}\n");
    ws.write(&config);
    ws.apply();
    let id = ws.resource("hpc_network_peering.ab")["id"]
        .as_str()
        .expect("id")
        .to_string();
    ws.ok(&["state", "rm", "hpc_network_peering.ab"]);
    ws.ok(&["import", "-input=false", "hpc_network_peering.ab", &id]);
    ws.assert_no_changes();
    ws.ok(&["state", "rm", "hpc_network_peering.ab"]);
    let bad = ws.tf(&[
        "import",
        "-input=false",
        "-no-color",
        "hpc_network_peering.ab",
        "vpc-123",
    ]);
    assert!(
        !bad.success && bad.text().contains("import an hpc_network_peering by the id (pcx-...)"),
        "{}",
        bad.text()
    );
}

#[test]
fn a_peering_deleted_or_a_rule_revoked_out_of_band_is_made_again_by_the_next_apply() {
    let emu = Emulator::start();
    let ws = Workspace::new("peering-drift", &emu);
    ws.write(&format!("{TWO_REGIONS}{PEERING}}}\n"));
    ws.apply();
    let state = ws.resource("hpc_network_peering.ab");
    let first = state["id"].as_str().expect("id").to_string();
    let group = state["security_group_ids"][0].as_str().expect("group").to_string();
    let rules = || emu.ec2(&format!("Action=DescribeSecurityGroups&GroupId.1={group}"));
    assert!(rules().contains("10.1.0.0/16"), "{}", rules());

    // A rule revoked outside Terraform: the plan adds it back, in place.
    emu.ec2(&format!(
        "Action=RevokeSecurityGroupIngress&GroupId={group}&IpPermissions.1.IpProtocol=-1&IpPermissions.1.IpRanges.1.CidrIp=10.1.0.0/16"
    ));
    assert!(!rules().contains("10.1.0.0/16"), "{}", rules());
    let plan = ws.plan().text();
    assert!(plan.contains("1 to change") && plan.contains("0 to destroy"), "{plan}");
    ws.apply();
    assert!(rules().contains("10.1.0.0/16"), "{}", rules());
    ws.assert_no_changes();

    // The connection deleted outside Terraform: its routes stay behind as blackholes (as EC2
    // keeps them); the next apply makes a new connection and routes through it.
    emu.ec2(&format!(
        "Action=DeleteVpcPeeringConnection&VpcPeeringConnectionId={first}"
    ));
    ws.apply();
    let second = ws.resource("hpc_network_peering.ab")["id"]
        .as_str()
        .expect("id")
        .to_string();
    assert_ne!(first, second);
    for (region, vpc) in [
        ("us-east-1", ws.resource("hpc_network.a")["vpc_id"].clone()),
        ("us-west-2", ws.resource("hpc_network.b")["vpc_id"].clone()),
    ] {
        let vpc = vpc.as_str().expect("vpc").to_string();
        let tables = emu.ec2_in(
            region,
            &format!("Action=DescribeRouteTables&Filter.1.Name=vpc-id&Filter.1.Value.1={vpc}"),
        );
        assert!(tables.contains(&second) && !tables.contains(&first), "{tables}");
        assert!(!tables.contains("blackhole"), "{tables}");
    }
    ws.assert_no_changes();
}
