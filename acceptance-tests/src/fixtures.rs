//! The API-mode cluster tests' configurations and readers (`tests/cluster.rs`,
//! `tests/partition.rs`): a network, a cluster with Lustre, partitions with two pools, and
//! what the tests read back from state and the emulator.

use serde_json::{json, Value};

use crate::{Emulator, Workspace};

pub const AMI: &str = "ami-03cf127a";

pub fn network() -> &'static str {
    r#"
resource "hpc_network" "net" {
  name = "research"
}
"#
}

pub fn cluster(extra: &str) -> String {
    format!(
        r#"
resource "hpc_lustre_fs" "scratch" {{
  storage_capacity = 1200
  deployment_type  = "SCRATCH_2"
  subnet_ids       = [hpc_network.net.private_subnet_ids["us-east-1a"]]
}}

resource "hpc_cluster" "main" {{
  name      = "research"
  subnet_id = hpc_network.net.private_subnet_ids["us-east-1a"]
  wait_for_ready = false
  head_node {{
    ami_id = "{AMI}"
  }}
  slurm {{
    version = "22.05"
  }}
  login_nodes {{
    count = 1
  }}
  user {{
    name = "alice"
    uid  = 2001
  }}
  storage {{
    lustre_id   = hpc_lustre_fs.scratch.id
    dns_name    = hpc_lustre_fs.scratch.dns_name
    mount_name  = hpc_lustre_fs.scratch.mount_name
    mount_point = "/scratch"
  }}
{extra}
}}
"#
    )
}

pub fn partition(name: &str, types: &str, max_nodes: u32, extra: &str) -> String {
    format!(
        r#"
resource "hpc_partition" "{name}" {{
  cluster_id     = hpc_cluster.main.id
  name           = "{name}"
  instance_types = [{types}]
  max_nodes      = {max_nodes}
  ami_id         = "{AMI}"
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1a"]]
  }}
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1b"]]
  }}
{extra}
}}
"#
    )
}

pub fn three_partitions() -> String {
    [
        partition(
            "cpu",
            "\"c7i.2xlarge\", \"c7i.4xlarge\"",
            16,
            "  default = true\n  max_time = \"1-00:00:00\"",
        ),
        partition(
            "gpu",
            "\"p5.48xlarge\"",
            4,
            "  efa_enabled = true\n  max_time = \"2-00:00:00\"",
        ),
        partition("spot", "\"c7a.8xlarge\"", 32, "  exclusive = true"),
    ]
    .join("\n")
}

pub fn versions(ws: &Workspace) -> Vec<(String, Value)> {
    let state = ws.state();
    let mut out: Vec<(String, Value)> = state["values"]["root_module"]["resources"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter(|r| r["type"] == "hpc_partition" || r["type"] == "hpc_cluster")
                .map(|r| {
                    (
                        r["address"].as_str().unwrap_or("").to_string(),
                        r["values"]["desired_state_version"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A JSON 1.1 call to the emulator (SSM, Secrets Manager) as `target` (e.g. AmazonSSM.GetParameter).
pub fn json_call(emu: &Emulator, service: &str, target: &str, body: &Value) -> crate::HttpResponse {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
    );
    crate::http(
        emu.port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.1"),
            ("X-Amz-Target", target),
            ("Authorization", &auth),
        ],
        &body.to_string(),
    )
}

/// Runs terraform `args` in `ws`, asserts they fail, and returns what terraform said on one line.
pub fn refused(ws: &Workspace, args: &[&str]) -> String {
    let out = ws.tf(args);
    assert!(!out.success, "terraform {} succeeded:\n{}", args.join(" "), out.text());
    out.text().split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn ssm_parameters(emu: &Emulator) -> Vec<String> {
    let r = json_call(
        emu,
        "ssm",
        "AmazonSSM.GetParametersByPath",
        &json!({"Path": "/hpcforge", "Recursive": true}),
    );
    let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
    let mut names: Vec<String> = v["Parameters"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["Name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// GetSecretValue's answer for a secret.
pub fn secret_value(emu: &Emulator, id: &str) -> Value {
    let r = json_call(
        emu,
        "secretsmanager",
        "secretsmanager.GetSecretValue",
        &json!({ "SecretId": id }),
    );
    serde_json::from_str(&r.body).unwrap_or_default()
}

pub fn secret_value_b64(emu: &Emulator, id: &str) -> String {
    secret_value(emu, id)["SecretBinary"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Applies only the network and the Lustre file system of `cluster()`'s configuration.
pub fn apply_network_and_lustre(ws: &Workspace) {
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "-target=hpc_network.net",
        "-target=hpc_lustre_fs.scratch",
    ]);
}

pub fn running_with_tag(emu: &Emulator, key: &str, value: &str) -> usize {
    let xml = emu.ec2(&format!(
        "Action=DescribeInstances&Filter.1.Name=tag:{key}&Filter.1.Value.1={value}&Filter.2.Name=instance-state-name&Filter.2.Value.1=running&Filter.2.Value.2=pending"
    ));
    xml.matches("<instanceId>").count()
}
