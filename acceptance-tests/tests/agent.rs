//! hpc_partition waits for the cluster's node agent (the real hpc-node binary, reconciling
//! against the emulator and checking with a real slurmctld) to apply what it published.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use acceptance_tests::{Emulator, Munge, Workspace};
use serde_json::{json, Value};

const AMI: &str = "ami-03cf127a";

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status(emu: &Emulator) -> Option<Value> {
    let auth =
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=0";
    let r = acceptance_tests::http(
        emu.port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.1"),
            ("X-Amz-Target", "AmazonSSM.GetParameter"),
            ("Authorization", auth),
        ],
        &json!({"Name": hpc_desired_state::status_param("research")}).to_string(),
    );
    let v: Value = serde_json::from_str(&r.body).ok()?;
    serde_json::from_str(v["Parameter"]["Value"].as_str()?).ok()
}

fn config(partition_extra: &str) -> String {
    format!(
        r#"
resource "hpc_network" "net" {{
  name        = "research"
  nat_gateway = false
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
}}
resource "hpc_partition" "cpu" {{
  cluster_id     = hpc_cluster.main.id
  name           = "cpu"
  instance_types = ["c7i.2xlarge"]
  ami_id         = "{AMI}"
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1a"]]
  }}
{partition_extra}
}}
"#
    )
}

#[test]
fn partitions_wait_for_the_agent_and_fail_when_it_does_not_apply() {
    let slurmctld = ["/usr/sbin/slurmctld", "/usr/bin/slurmctld"]
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or_else(|| panic!("slurmctld is not installed: apt-get install slurmctld (.ci/run does it)"));
    let emu = Emulator::start();
    let ws = Workspace::new("agent", &emu);
    // Without an agent: published, with a warning, no wait.
    ws.write(&config("  max_nodes = 4"));
    let out = ws.apply();
    assert!(
        out.text().contains("not waiting for cluster research's node agent"),
        "{}",
        out.text()
    );

    let dir = ws.dir.join("head");
    let munge = Munge::start(&dir);
    let p = |s: &str| dir.join(s).display().to_string();
    for sub in ["etc", "state", "spool", "log", "run", "agent"] {
        std::fs::create_dir_all(dir.join(sub)).expect("dirs");
    }
    let layout = json!({
        "conf_dir": p("etc"), "controller_host": "localhost", "controller_addr": "127.0.0.1",
        "state_dir": p("state"), "spool_dir": p("spool"), "log_dir": p("log"), "run_dir": p("run"),
        "slurm_user": "root", "munge_socket": munge.socket.display().to_string(),
        "extra": {"ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none", "MailProg": "/bin/true"}
    });
    std::fs::write(dir.join("layout.json"), layout.to_string()).expect("layout");
    let agent = Agent(
        Command::new(acceptance_tests::hpc_node_bin())
            .args([
                "reconcile",
                "--cluster",
                "research",
                "--region",
                "us-east-1",
                "--interval",
                "1",
                "--layout",
            ])
            .arg(dir.join("layout.json"))
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_ENDPOINT_URL", emu.url())
            .env("HPC_NODE_SLURMCTLD", slurmctld)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start hpc-node reconcile"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&emu).is_none() {
        assert!(Instant::now() < deadline, "the agent never reported");
        std::thread::sleep(Duration::from_millis(200));
    }

    // With the agent: the apply returns once the agent reports the new version applied.
    ws.write(&config("  max_nodes = 8"));
    ws.apply();
    let version = ws.resource("hpc_partition.cpu")["desired_state_version"]
        .as_i64()
        .expect("version");
    let reported = status(&emu).expect("status");
    assert!(
        reported["partition_versions"]["cpu"]
            .as_i64()
            .is_some_and(|v| v >= version),
        "{reported}"
    );
    assert!(reported["error"].is_null(), "{reported}");
    let conf = std::fs::read_to_string(dir.join("etc/slurm.conf")).expect("the agent wrote slurm.conf");
    assert!(conf.contains("NodeName=cpu-c7i-2xl-[1-8]"), "{conf}");

    // A cluster document the provider did not write (here a mount on /etc, which plan refuses)
    // is refused by the agent too: the status names the rule and slurm.conf stays as it was;
    // once the document is the provider's again, the next change applies.
    let name = hpc_desired_state::cluster_param("research");
    let published = emu.json_call("ssm", "AmazonSSM.GetParameter", &json!({"Name": name}));
    let mut doc: Value =
        serde_json::from_str(published["Parameter"]["Value"].as_str().expect("the cluster document")).expect("JSON");
    doc["mounts"] = json!([{"mount_point": "/etc", "lustre_id": null, "dns_name": null, "mount_name": null}]);
    emu.json_call(
        "ssm",
        "AmazonSSM.PutParameter",
        &json!({"Name": name, "Value": doc.to_string(), "Type": "String", "Overwrite": true}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let s = status(&emu).expect("status");
        if s["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused the published desired state"))
        {
            break s;
        }
        assert!(Instant::now() < deadline, "the agent did not refuse the document: {s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        refused["error"].as_str().is_some_and(|e| e.contains("/etc")),
        "{refused}"
    );
    let kept = std::fs::read_to_string(dir.join("etc/slurm.conf")).expect("slurm.conf");
    assert_eq!(kept, conf, "slurm.conf changed under a refused document");
    // A partition change meanwhile fails its apply with the agent's reason.
    ws.write(&config("  max_nodes = 10"));
    let out = ws.tf(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    let said = out.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !out.success
            && said.contains("the node agent refused partition cpu")
            && said.contains("refused the published desired state of research"),
        "{said}"
    );
    let original = published["Parameter"]["Value"].as_str().expect("the cluster document");
    emu.json_call(
        "ssm",
        "AmazonSSM.PutParameter",
        &json!({"Name": name, "Value": original, "Type": "String", "Overwrite": true}),
    );
    ws.write(&config("  max_nodes = 11"));
    ws.apply();
    let applied = status(&emu).expect("status");
    assert!(applied["error"].is_null(), "{applied}");

    // The agent stops: a change waits out its timeout and fails, naming what it waited for.
    drop(agent);
    ws.write(&config("  max_nodes = 12\n  timeouts {\n    update = \"3s\"\n  }"));
    let out = ws.tf(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(!out.success);
    assert!(
        out.text().contains("node agent to apply partition cpu"),
        "{}",
        out.text()
    );
    ws.write(&config("  max_nodes = 12\n  wait_for_apply = false"));
    ws.apply();
    ws.destroy();
}
