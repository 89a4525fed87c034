//! The local EC2 in boot mode with the real provider: `terraform apply` boots a head node
//! from the image hpc-image baked and published; `hpc-node resume` run on that head node, with
//! its instance role's credentials from IMDS, calls CreateFleet and the compute node's machine
//! boots and runs its user data; `hpc-node suspend` ends it; `terraform destroy` leaves no
//! machine. Needs root, systemd-container, dnsmasq-base, iptables, openssh-client and the bake's
//! tools (`.ci/run` installs them).

use std::time::{Duration, Instant};

use acceptance_tests::boot::{self, key_pair, ssh, text, wait_ssh};
use acceptance_tests::{Emulator, Workspace};
use serde_json::Value;

const TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A role and instance profile named `name`; returns the profile's ARN.
fn node_role(emu: &Emulator, name: &str) -> String {
    let iam = |q: &str| emu.query("iam", "2010-05-08", q);
    iam(&format!(
        "Action=CreateRole&RoleName={name}&AssumeRolePolicyDocument={}",
        encode(TRUST)
    ));
    let xml = iam(&format!("Action=CreateInstanceProfile&InstanceProfileName={name}"));
    iam(&format!(
        "Action=AddRoleToInstanceProfile&InstanceProfileName={name}&RoleName={name}"
    ));
    let start = xml.find("<Arn>").map(|i| i + 5).expect("profile ARN");
    xml[start..].chars().take_while(|c| *c != '<').collect()
}

fn config(ami: &str, profile: &str) -> String {
    format!(
        r#"
resource "hpc_network" "net" {{
  name        = "booted"
  nat_gateway = false
}}
resource "hpc_cluster" "main" {{
  name      = "booted"
  subnet_id = hpc_network.net.private_subnet_ids["us-east-1a"]
  head_node {{
    ami_id               = "{ami}"
    instance_type        = "c7i.large"
    key_name             = "booted"
    allowed_ssh_cidrs    = ["10.0.0.0/16"]
    instance_profile_arn = "{profile}"
  }}
  slurm {{
    version = "22.05"
  }}
}}
resource "hpc_partition" "cpu" {{
  cluster_id     = hpc_cluster.main.id
  name           = "cpu"
  instance_types = ["c7i.large"]
  ami_id         = "{ami}"
  max_nodes      = 2
  wait_for_apply = false
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1a"]]
  }}
}}
"#
    )
}

fn instances_tagged(emu: &Emulator, key: &str, value: &str) -> Vec<String> {
    let xml = emu.ec2(&format!(
        "Action=DescribeInstances&Filter.1.Name=tag:{key}&Filter.1.Value.1={value}&Filter.2.Name=instance-state-name&Filter.2.Value.1=running&Filter.2.Value.2=pending"
    ));
    xml.match_indices("<instanceId>")
        .map(|(i, _)| xml[i + 12..].chars().take_while(|c| *c != '<').collect())
        .collect()
}

fn machine_state(emu: &Emulator, id: &str) -> Option<String> {
    emu.machines()
        .iter()
        .find(|m| m["InstanceId"] == id)
        .and_then(|m| m["State"].as_str().map(str::to_string))
}

fn console(emu: &Emulator, id: &str) -> String {
    let xml = emu.ec2(&format!("Action=GetConsoleOutput&InstanceId={id}"));
    let start = xml.find("<output>").map(|i| i + 8).unwrap_or(0);
    let encoded: String = xml[start..].chars().take_while(|c| *c != '<').collect();
    decode_base64(&encoded)
}

fn decode_base64(s: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|c| *c != b'=' && !c.is_ascii_whitespace()) {
        let Some(v) = ALPHABET.iter().position(|a| *a == c) else {
            continue;
        };
        bits = (bits << 6) | u32::try_from(v).unwrap_or(0);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push(u8::try_from((bits >> n) & 0xff).unwrap_or(0));
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn hpc_node_resume_on_a_booted_head_node_launches_a_compute_machine_with_the_node_role() {
    boot::require_prerequisites();
    let emu = boot::booting_emulator(3);
    let ami = boot::publish_test_image(&emu);
    let key = key_pair(&emu, "booted");
    let profile = node_role(&emu, "booted-node");
    let ws = Workspace::new("boot", &emu);
    ws.write(&config(&ami, &profile));
    ws.apply();

    let cluster = ws.resource("hpc_cluster.main");
    let policy = cluster["instance_profile_policy"]
        .as_str()
        .expect("instance_profile_policy")
        .to_string();
    emu.query(
        "iam",
        "2010-05-08",
        &format!(
            "Action=PutRolePolicy&RoleName=booted-node&PolicyName=hpcforge&PolicyDocument={}",
            encode(&policy)
        ),
    );
    let head = cluster["head_node_instance_id"].as_str().expect("head id").to_string();
    let head_ip = cluster["head_node_private_ip"].as_str().expect("head ip").to_string();
    assert_eq!(
        machine_state(&emu, &head).as_deref(),
        Some("running"),
        "{:?}",
        emu.machines()
    );
    wait_ssh(&key, &head_ip, Duration::from_secs(120));

    emu.reset_calls();
    let resume = ssh(
        &key,
        &head_ip,
        "sudo hpc-node resume cpu-c7i-large-1 --cluster booted 2>&1",
    );
    let calls = emu.calls();
    assert_eq!(
        calls.get("ec2:CreateFleet"),
        Some(&1),
        "resume: {}\ncalls: {calls:?}",
        text(&resume)
    );
    let nodes = instances_tagged(&emu, "hpcforge:partition", "booted/cpu");
    assert_eq!(nodes.len(), 1, "resume: {}", text(&resume));
    let node = nodes[0].clone();

    // The compute node is a real machine: it boots and cloud-init runs the partition's user data.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = console(&emu, &node);
        if out.contains("Cloud-init v.") && out.contains("finished") {
            assert!(
                out.contains("hpc-node"),
                "the node's user data (hpc-node node-init) did not run:\n{out}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the compute node's console after 90 s:\n{out}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(machine_state(&emu, &node).as_deref(), Some("running"));

    let suspend = ssh(
        &key,
        &head_ip,
        "sudo hpc-node suspend cpu-c7i-large-1 --cluster booted 2>&1",
    );
    assert!(suspend.status.success(), "suspend: {}", text(&suspend));
    let deadline = Instant::now() + Duration::from_secs(60);
    while machine_state(&emu, &node).as_deref() != Some("terminated") {
        assert!(
            Instant::now() < deadline,
            "the node's machine did not end: {:?}",
            emu.machines()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    ws.destroy();
    let live: Vec<Value> = emu
        .machines()
        .into_iter()
        .filter(|m| m["State"] != "terminated")
        .collect();
    assert!(live.is_empty(), "machines left after destroy: {live:?}");
}
