//! Resume across capacity pools against the local emulator: an Availability Zone without
//! capacity is skipped within the same invocation, cooled down for the next ones, and nodes
//! no pool can place are reported; the hpc-node binary tags and terminates what it launched.

use std::collections::BTreeMap;
use std::process::Command;

use acceptance_tests::Emulator;
use hpc_aws::ec2::{Ec2, LaunchTemplateSpec};
use hpc_aws::{Aws, Settings};
use hpc_desired_state::{PartitionDoc, PoolDoc, ShapeDoc};
use hpc_node::resume::{group_nodes, launch_group, Cooldowns, PoolClients, ResumeJobs, Skip};
use serde_json::json;

mod support;

const AMI: &str = "ami-03cf127a";
const TYPE: &str = "p5.48xlarge";

struct One(Ec2);

impl PoolClients for One {
    fn ec2_for(&self, _pool: &PoolDoc) -> Ec2 {
        self.0.clone()
    }
}

/// (zone, subnet) of the default subnets, from DescribeSubnets XML.
fn subnets(emu: &Emulator) -> BTreeMap<String, String> {
    let xml = emu.ec2("Action=DescribeSubnets");
    let field = |item: &str, tag: &str| {
        let open = format!("<{tag}>");
        item.find(&open).map(|i| {
            item[i + open.len()..]
                .chars()
                .take_while(|c| *c != '<')
                .collect::<String>()
        })
    };
    xml.split("<item>")
        .filter_map(|item| Some((field(item, "availabilityZone")?, field(item, "subnetId")?)))
        .collect()
}

async fn connect(emu: &Emulator) -> Aws {
    std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    let endpoints = ["ec2", "ssm", "fsx"]
        .iter()
        .map(|s| (s.to_string(), emu.url()))
        .collect();
    Aws::connect(&Settings {
        region: Some("us-east-1".into()),
        endpoints,
        max_retries: 2,
        ..Settings::default()
    })
    .await
    .expect("connect to the emulator")
}

/// The hpc-node binary, with credentials and endpoint of the emulator.
fn hpc_node(emu: &Emulator) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hpc-node"));
    cmd.env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_ENDPOINT_URL", emu.url());
    cmd
}

/// A plain launch template for the test's instance type.
fn template(name: &str) -> LaunchTemplateSpec {
    LaunchTemplateSpec {
        name: name.into(),
        image_id: AMI.into(),
        instance_type: Some(TYPE.into()),
        key_name: None,
        security_group_ids: vec![],
        instance_profile_arn: None,
        user_data: None,
        root_volume: None,
        efa_network_cards: vec![],
        placement_group: None,
        capacity_reservation: None,
        tags: vec![],
    }
}

async fn partition(aws: &Aws, emu: &Emulator) -> PartitionDoc {
    let zones = subnets(emu);
    let template = template("hpc-c-gpu-p5");
    let (lt, _) = aws
        .ec2()
        .ensure_launch_template(&template)
        .await
        .expect("launch template");
    let pool = |zone: &str| PoolDoc {
        region: "us-east-1".into(),
        subnet_ids: vec![zones.get(zone).cloned().expect("default subnet in zone")],
        capacity_type: "on_demand".into(),
        capacity_reservation_id: None,
        launch_templates: BTreeMap::from([(TYPE.to_string(), lt.clone())]),
        placement_group: None,
    };
    let mut doc = support::partition(
        "c",
        "gpu",
        vec![ShapeDoc {
            gpus: 8,
            gpu_model: Some("H100".into()),
            gpu_memory_mib: Some(81920),
            ..support::shape(TYPE, 192, 96, 2, 2_097_152)
        }],
        16,
    );
    doc.ami_id = AMI.into();
    doc.pools = vec![pool("us-east-1a"), pool("us-east-1b")];
    doc
}

fn nodes(list: &str) -> Vec<String> {
    slurm_model::expand_hostlist(list).expect("host list")
}

/// Publishes a partition of cluster `c`, as the provider does.
async fn publish(aws: &Aws, doc: &PartitionDoc) {
    aws.ssm()
        .put(
            &hpc_desired_state::partition_param("c", &doc.name),
            &serde_json::to_string(doc).expect("json"),
            &[],
        )
        .await
        .expect("publish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_capacity_in_one_zone_fails_over_to_the_next_pool_and_cools_it_down() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let doc = partition(&aws, &emu).await;
    let zone_b_subnet = doc.pools[1].subnet_ids[0].clone();
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "match": {"AvailabilityZone": "us-east-1a"}}),
    );
    let clients = One(aws.ec2());
    let dir = std::env::temp_dir().join(format!("hpc-node-failover-{}", std::process::id()));
    let mut cooldowns = Cooldowns::load(&dir.join("cooldowns.json"));

    let (groups, unknown) = group_nodes(std::slice::from_ref(&doc), &nodes("gpu-p5-48xl-[1-3]"));
    assert!(unknown.is_empty());
    emu.reset_calls();
    let out = launch_at(
        &clients,
        &doc,
        &groups[0],
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await;
    assert_eq!(out.placed.len(), 3, "{out:?}");
    assert!(out.unplaced.is_empty());
    assert_eq!(out.attempts.len(), 2, "both pools tried in one invocation: {out:?}");
    assert_eq!(out.attempts[0].launched, 0);
    assert_eq!(out.attempts[0].errors[0].code, "InsufficientInstanceCapacity");
    assert!(
        out.placed
            .iter()
            .all(|p| p.pool == 1 && p.instance.subnet_id.as_deref() == Some(zone_b_subnet.as_str())),
        "{out:?}"
    );
    assert_eq!(emu.calls().get("ec2:CreateFleet"), Some(&2));
    assert!(cooldowns.active(&Cooldowns::key("gpu", 0, TYPE), 1_100));

    // The next resume skips the cooling pool: one fleet call.
    emu.reset_calls();
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-[4-5]",
        &ResumeJobs::default(),
        &mut cooldowns,
        1_100,
    )
    .await;
    assert_eq!(out.placed.len(), 2);
    assert_eq!(out.attempts[0].skipped, Some(Skip::Cooldown));
    assert_eq!(emu.calls().get("ec2:CreateFleet"), Some(&1));

    // No zone has capacity: nothing is placed and the nodes are reported.
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "match": {"AvailabilityZone": "us-east-1b"}}),
    );
    let mut fresh = Cooldowns::default();
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-[6-7]",
        &ResumeJobs::default(),
        &mut fresh,
        2_000,
    )
    .await;
    assert!(out.placed.is_empty());
    assert_eq!(out.unplaced, vec!["gpu-p5-48xl-6", "gpu-p5-48xl-7"]);
    let _ = std::fs::remove_dir_all(dir);
}

/// EC2 launched the fleet but its answer was lost (a timeout, a reset connection): the SDK's
/// retry carries the same client token, so EC2 answers with the first launch instead of
/// launching the nodes a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_whose_answer_is_lost_is_retried_and_launches_each_node_once() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let doc = partition(&aws, &emu).await;
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InternalError",
                         "count": 1, "lost_answer": true}),
    );
    let clients = One(aws.ec2());
    let mut cooldowns = Cooldowns::default();
    emu.reset_calls();
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-[1-2]",
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await;
    assert_eq!(out.placed.len(), 2, "{out:?}");
    assert_eq!(
        emu.calls().get("ec2:CreateFleet"),
        Some(&2),
        "the lost answer was retried"
    );
    let tagged = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("instances");
    assert_eq!(tagged.len(), 2, "{tagged:?}");
    let placed: std::collections::BTreeSet<_> = out.placed.iter().map(|p| p.instance.id.clone()).collect();
    assert_eq!(placed, tagged.iter().map(|i| i.id.clone()).collect(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_resumes_and_suspends_nodes_from_the_published_partition() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let doc = partition(&aws, &emu).await;
    publish(&aws, &doc).await;
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "match": {"AvailabilityZone": "us-east-1a"}}),
    );
    let state = std::env::temp_dir().join(format!("hpc-node-bin-{}", std::process::id()));
    let run = |args: &[&str]| {
        hpc_node(&emu)
            .args(args)
            .args(["--cluster", "c", "--region", "us-east-1", "--state-dir"])
            .arg(&state)
            .output()
            .expect("run hpc-node")
    };
    emu.reset_calls();
    let out = run(&["resume", "gpu-p5-48xl-[1-2],nope-1"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("pool 0: asked 2, launched 0 (InsufficientInstanceCapacity"),
        "{log}"
    );
    assert!(log.contains("pool 1: asked 2, launched 2"), "{log}");
    assert!(
        log.contains("setting 1 node(s) down (hpc-node: not a node of this cluster): nope-1"),
        "{log}"
    );
    // The agent's node map says which instance carries each node; no call per node made it.
    let tagged = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("instances");
    let map = carriers(&state);
    assert_eq!(
        map.keys().collect::<Vec<_>>(),
        ["gpu-p5-48xl-1", "gpu-p5-48xl-2"],
        "{map:?}"
    );
    assert!(
        map.values().all(|c| tagged.iter().any(|i| i.id == c.instance_id)),
        "{map:?} {tagged:?}"
    );
    assert_eq!(emu.calls().get("ec2:CreateTags"), None);
    assert!(
        state.join("cooldowns.json").exists(),
        "the cool-down is kept for the next resume"
    );

    let out = run(&["suspend", "gpu-p5-48xl-[1-2]"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(carriers(&state).is_empty(), "suspend forgets the ended instances");
    let left = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("instances");
    assert!(
        left.iter()
            .all(|i| i.state == "shutting-down" || i.state == "terminated"),
        "{left:?}"
    );
    // ResumeFailProgram: Slurm gave up on a node; its instance is ended.
    assert!(run(&["resume", "gpu-p5-48xl-3"]).status.success());
    let out = run(&["resume-fail", "gpu-p5-48xl-3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let left = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("instances");
    assert!(
        left.iter()
            .filter(|i| i.state == "running" || i.state == "pending")
            .count()
            == 0,
        "resume-fail ended the node's instance: {left:?}"
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_hpc-node"))
        .args(["resume", "x-1"])
        .output()
        .expect("run");
    let why = String::from_utf8_lossy(&bad.stderr);
    assert!(
        bad.status.code() == Some(2) && why.contains("required") && why.contains("--cluster <CLUSTER>"),
        "{why}"
    );
    let _ = std::fs::remove_dir_all(state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_past_the_gpu_guardrail_launches_what_fits_and_refuses_the_rest() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let doc = partition(&aws, &emu).await;
    publish(&aws, &doc).await;
    let ssm = aws.ssm();
    let cluster = hpc_desired_state::ClusterDoc {
        name: "c".into(),
        max_gpus: Some(16),
        ..Default::default()
    };
    ssm.put(
        &hpc_desired_state::cluster_param("c"),
        &serde_json::to_string(&cluster).expect("json"),
        &[],
    )
    .await
    .expect("publish");
    let state = std::env::temp_dir().join(format!("hpc-node-guard-{}", std::process::id()));
    let run = |hosts: &str| {
        hpc_node(&emu)
            .args([
                "resume",
                hosts,
                "--cluster",
                "c",
                "--region",
                "us-east-1",
                "--state-dir",
            ])
            .arg(&state)
            .output()
            .expect("run hpc-node")
    };
    // 16 GPUs allowed: one 8-GPU node runs, a resume of three more fits only one.
    let out = run("gpu-p5-48xl-1");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run("gpu-p5-48xl-[2-4]");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("2 of 3 node(s) refused: max_gpus_per_cluster 16: 8 GPU(s) left, 8 per p5.48xlarge node"),
        "{log}"
    );
    assert!(
        log.contains("setting 2 node(s) down (hpc-node: cluster cost guardrail): gpu-p5-48xl-3,gpu-p5-48xl-4"),
        "{log}"
    );
    let running = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("instances");
    assert_eq!(running.len(), 2, "{running:?}");
    let _ = std::fs::remove_dir_all(state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_terminates_instances_of_nodes_the_desired_state_dropped() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    let ssm = aws.ssm();
    let param = &hpc_desired_state::partition_param("c", "gpu");
    ssm.put(param, &serde_json::to_string(&doc).expect("json"), &[])
        .await
        .expect("publish");
    let state = std::env::temp_dir().join(format!("hpc-node-sweep-{}", std::process::id()));
    let run = |args: &[&str]| {
        hpc_node(&emu)
            .args(args)
            .args(["--cluster", "c", "--region", "us-east-1", "--state-dir"])
            .arg(&state)
            .output()
            .expect("run hpc-node")
    };
    assert!(run(&["resume", "gpu-p5-48xl-[1-2]"]).status.success());
    // The partition shrinks to one node: gpu-p5-48xl-2 has no place in Slurm any more.
    doc.max_nodes = 1;
    ssm.put(param, &serde_json::to_string(&doc).expect("json"), &[])
        .await
        .expect("publish");
    let out = run(&["sweep"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("node gpu-p5-48xl-2 is not in the desired state"), "{log}");
    let left = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("instances");
    let alive: Vec<&str> = left
        .iter()
        .filter(|i| i.state == "running" || i.state == "pending")
        .map(|i| i.id.as_str())
        .collect();
    let map = carriers(&state);
    assert_eq!(
        map.keys().collect::<Vec<_>>(),
        ["gpu-p5-48xl-1"],
        "the sweep forgets what it ended"
    );
    assert_eq!(alive, vec![map["gpu-p5-48xl-1"].instance_id.as_str()], "{left:?}");
    let _ = std::fs::remove_dir_all(state);
}

/// Real Slurm asks for a node for a job (ResumeProgram = hpc-node resume); the instance never
/// registers; after the partition's provision_timeout the sweep replaces it from the next pool,
/// whose node does register, and the job completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_does_not_register_in_time_is_replaced_from_the_next_pool() {
    use std::os::unix::fs::PermissionsExt as _;
    let slurmctld = ["/usr/sbin/slurmctld", "/usr/bin/slurmctld"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("slurmctld is not installed: apt-get install slurmctld slurm-client munge (.ci/run does it)")
        });
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    doc.provision_timeout_s = 3;
    // A shape this machine can register as (the instance type only picks the launch template).
    doc.shapes[0].vcpus = 1;
    doc.shapes[0].cores = 1;
    doc.shapes[0].threads_per_core = 1;
    doc.shapes[0].memory_mib = 1024;
    doc.shapes[0].gpus = 0;
    doc.shapes[0].gpu_model = None;
    let (zone_a, zone_b) = (doc.pools[0].subnet_ids[0].clone(), doc.pools[1].subnet_ids[0].clone());
    publish(&aws, &doc).await;
    let ssm = aws.ssm();
    let cluster = hpc_desired_state::ClusterDoc {
        name: "c".into(),
        slurm_version: "22.05".into(),
        scaledown_idletime_s: 600,
        resume_timeout_s: 600,
        accounting: hpc_desired_state::AccountingDoc {
            mode: "none".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    ssm.put(
        &hpc_desired_state::cluster_param("c"),
        &serde_json::to_string(&cluster).expect("json"),
        &[],
    )
    .await
    .expect("publish");

    let dir = std::env::temp_dir().join(format!("hpc-node-late-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["etc", "state", "spool", "log", "run", "agent"] {
        std::fs::create_dir_all(dir.join(sub)).expect("dirs");
    }
    let munge = acceptance_tests::Munge::start(&dir);
    let p = |s: &str| dir.join(s).display().to_string();
    let node_bin = env!("CARGO_BIN_EXE_hpc-node");
    let script = |name: &str, verb: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nexport AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_ENDPOINT_URL={}\nexec {node_bin} {verb} \"$1\" --cluster c --region us-east-1 --state-dir {} >> {} 2>&1\n",
                emu.url(),
                p("agent"),
                p(&format!("log/{verb}.log"))
            ),
        )
        .expect("script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path.display().to_string()
    };
    let layout = support::layout(
        &dir,
        &munge.socket,
        [
            script("resume", "resume"),
            script("suspend", "suspend"),
            "/bin/true".into(),
        ],
        &[],
    );
    let layout = support::write_layout(&dir, &layout).display().to_string();
    let conf = dir.join("etc/slurm.conf");
    let agent = |args: &[&str]| {
        Command::new(node_bin)
            .args(args)
            .args(["--cluster", "c", "--region", "us-east-1", "--state-dir"])
            .arg(dir.join("agent"))
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_ENDPOINT_URL", emu.url())
            .env("HPC_NODE_SLURMCTLD", &slurmctld)
            .env("SLURM_CONF", &conf)
            .output()
            .expect("run hpc-node")
    };
    let out = agent(&["reconcile", "--once", "--layout", &layout]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let started = Command::new(&slurmctld)
        .args(["-i", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf)
        .status();
    assert!(started.is_ok_and(|s| s.success()), "slurmctld started");
    struct Stop(std::path::PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            if let Ok(pid) = std::fs::read_to_string(&self.0) {
                let _ = Command::new("kill").arg(pid.trim()).status();
            }
        }
    }
    let _stop = Stop(dir.join("run/slurmctld.pid"));
    let scontrol = |args: &[&str]| {
        Command::new("scontrol")
            .args(args)
            .env("SLURM_CONF", &conf)
            .output()
            .expect("scontrol")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !String::from_utf8_lossy(&scontrol(&["ping"]).stdout).contains("is UP") {
        assert!(std::time::Instant::now() < deadline, "slurmctld did not come up");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // A job needs the node: Slurm's ResumeProgram (hpc-node resume) launches in the first pool.
    std::fs::create_dir_all(dir.join("work")).expect("work dir");
    let submitted = Command::new("sbatch")
        .args(["-p", "gpu", "-N", "1", "--wrap", "hostname"])
        .env("SLURM_CONF", &conf)
        .current_dir(dir.join("work"))
        .output()
        .expect("sbatch");
    let submitted = String::from_utf8_lossy(&submitted.stdout).to_string();
    assert!(submitted.contains("Submitted batch job"), "{submitted}");
    let job = submitted.split_whitespace().last().unwrap_or_default().to_string();
    // The instances that carried gpu-p5-48xl-1 (per the agent's node map, as they were recorded).
    let carried = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let node_instances = || async {
        if let Some(c) = carriers(&dir.join("agent")).get("gpu-p5-48xl-1") {
            carried.lock().expect("lock").insert(c.instance_id.clone());
        }
        let ids = carried.lock().expect("lock").clone();
        aws.ec2()
            .instances_tagged("hpcforge:cluster", "c")
            .await
            .expect("instances")
            .into_iter()
            .filter(|i| ids.contains(&i.id))
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let first = loop {
        if let Some(i) = node_instances().await.into_iter().next() {
            break i;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Slurm never called hpc-node resume: {}",
            std::fs::read_to_string(dir.join("log/resume.log")).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(first.subnet_id.as_deref(), Some(zone_a.as_str()));

    // No slurmd ever registers. Past provision_timeout, the sweep replaces it from pool 2.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let out = agent(&["sweep"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("gpu-p5-48xl-1")
            && log.contains("not registered")
            && log.contains("replacing it from the next pool"),
        "{log}"
    );
    let all = node_instances().await;
    let alive: Vec<_> = all
        .iter()
        .filter(|i| i.state == "running" || i.state == "pending")
        .collect();
    assert_eq!(alive.len(), 1, "{all:?}");
    assert_eq!(
        alive[0].subnet_id.as_deref(),
        Some(zone_b.as_str()),
        "relaunched in the next pool"
    );
    assert_ne!(alive[0].id, first.id);

    // The replacement boots (an impersonated slurmd stands in for the image) and the job runs.
    let slurmd = ["/usr/sbin/slurmd", "/usr/bin/slurmd"]
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("slurmd installed");
    struct StopSlurmd(String);
    impl Drop for StopSlurmd {
        fn drop(&mut self) {
            let _ = Command::new("pkill").args(["-f", &self.0]).status();
        }
    }
    let _slurmd = StopSlurmd(format!("slurmd -b -N gpu-p5-48xl-1 -f {}", conf.display()));
    let started = Command::new("perl")
        .args([
            "-MPOSIX",
            "-e",
            "sigprocmask(SIG_SETMASK, POSIX::SigSet->new); exec @ARGV",
        ])
        .args([*slurmd, "-b", "-N", "gpu-p5-48xl-1", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf)
        .status();
    assert!(started.is_ok_and(|s| s.success()), "slurmd started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(150);
    loop {
        let state = String::from_utf8_lossy(&scontrol(&["show", "job", &job]).stdout).to_string();
        if state.contains("JobState=COMPLETED") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job did not complete: {state}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    drop(_slurmd);
    drop(_stop);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_check_drains_a_node_missing_its_gpus_or_mounts_and_passes_a_healthy_one() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let gpu = partition(&aws, &emu).await;
    let mut cpu = gpu.clone();
    cpu.name = "cpu".into();
    cpu.shapes[0].instance_type = "c7i.2xlarge".into();
    cpu.shapes[0].gpus = 0;
    let ssm = aws.ssm();
    for d in [&gpu, &cpu] {
        publish(&aws, d).await;
    }
    let mut cluster = hpc_desired_state::ClusterDoc {
        name: "c".into(),
        ..Default::default()
    };
    let run = |node: &str| {
        hpc_node(&emu)
            .args(["health", node, "--cluster", "c", "--region", "us-east-1"])
            .output()
            .expect("run hpc-node health")
    };
    ssm.put(
        &hpc_desired_state::cluster_param("c"),
        &serde_json::to_string(&cluster).expect("json"),
        &[],
    )
    .await
    .expect("publish");
    let out = run("cpu-c7i-2xl-1");
    assert!(
        out.status.success(),
        "a CPU node with no mounts is healthy: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    cluster.mounts = vec![hpc_desired_state::MountDoc {
        lustre_id: Some("fs-0123456789abcdef0".into()),
        dns_name: None,
        mount_name: None,
        mount_point: "/hpcforge-test-not-mounted".into(),
    }];
    ssm.put(
        &hpc_desired_state::cluster_param("c"),
        &serde_json::to_string(&cluster).expect("json"),
        &[],
    )
    .await
    .expect("publish");
    let out = run("gpu-p5-48xl-1");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("draining gpu-p5-48xl-1"), "{log}");
    assert!(
        log.contains("GPU") || log.contains("nvidia-smi"),
        "the GPU check reports: {log}"
    );
    assert!(log.contains("/hpcforge-test-not-mounted is not mounted"), "{log}");
    let unknown = run("nope-1");
    assert!(!unknown.status.success() && String::from_utf8_lossy(&unknown.stderr).contains("not a node of cluster c"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_starts_a_release_task_when_a_file_system_passes_its_threshold() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let fsx = aws.fsx();
    let spec = hpc_aws::fsx::LustreSpec {
        storage_capacity: Some(1200),
        deployment_type: Some("PERSISTENT_2".into()),
        per_unit_storage_throughput: Some(125),
        subnet_ids: Some(vec![emu.default_subnet()]),
        tags: Some(vec![
            ("hpcforge:release-unaccessed-days".into(), "30".into()),
            ("hpcforge:release-usage-percent".into(), "0".into()),
        ]),
        ..Default::default()
    };
    let fs = fsx.create_lustre(&spec, "evict-test").await.expect("create");
    fsx.wait_lustre_available(&fs.id, std::time::Duration::from_secs(30))
        .await
        .expect("available");
    let repo = hpc_aws::fsx::DataRepositorySpec {
        file_system_path: Some("/datasets".into()),
        data_repository_path: Some("s3://bucket/datasets".into()),
        ..Default::default()
    };
    let dra = fsx
        .create_data_repository(&fs.id, &repo, "dra-token", &[])
        .await
        .expect("dra");
    fsx.wait_data_repository(&dra.id, false, std::time::Duration::from_secs(30))
        .await
        .expect("dra available");
    // "/" is always mounted here; the threshold 0% makes any usage pass it.
    let cluster = hpc_desired_state::ClusterDoc {
        name: "c".into(),
        mounts: vec![hpc_desired_state::MountDoc {
            lustre_id: Some(fs.id.clone()),
            dns_name: None,
            mount_name: None,
            mount_point: "/".into(),
        }],
        ..Default::default()
    };
    aws.ssm()
        .put(
            &hpc_desired_state::cluster_param("c"),
            &serde_json::to_string(&cluster).expect("json"),
            &[],
        )
        .await
        .expect("publish");
    let out = hpc_node(&emu)
        .args(["evict", "--cluster", "c", "--region", "us-east-1"])
        .output()
        .expect("run hpc-node evict");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("releases files unused for 30 days under /datasets"),
        "{log}"
    );
    let (status, tasks) = emu.fsx("DescribeDataRepositoryTasks", json!({}));
    assert_eq!(status, 200, "{tasks}");
    let task = &tasks["DataRepositoryTasks"][0];
    assert_eq!(task["Type"], "RELEASE_DATA_FROM_FILESYSTEM", "{tasks}");
    assert_eq!(task["FileSystemId"], fs.id.as_str());
    assert_eq!(
        task["ReleaseConfiguration"]["DurationSinceLastAccess"]["Value"], 30,
        "{task}"
    );
    assert_eq!(task["Paths"], json!(["/datasets"]));
}

struct ByRegion(Aws);

impl PoolClients for ByRegion {
    fn ec2_for(&self, pool: &PoolDoc) -> Ec2 {
        self.0.ec2_in(&pool.region)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_in_another_region_takes_over_with_its_own_launch_template() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    // The second region: its own subnet and launch template (AMI ids are regional).
    let auth =
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-west-2/ec2/aws4_request, SignedHeaders=host, Signature=0";
    let xml = acceptance_tests::http(
        emu.port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", auth),
        ],
        "Action=DescribeSubnets&Version=2016-11-15",
    )
    .body;
    let west_subnet = xml
        .split("<subnetId>")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .expect("us-west-2 subnet")
        .to_string();
    let west = aws.ec2_in("us-west-2");
    let template = template("hpc-c-gpu-west");
    let (west_lt, _) = west
        .ensure_launch_template(&template)
        .await
        .expect("west launch template");
    doc.pools.truncate(1);
    doc.pools.push(PoolDoc {
        region: "us-west-2".into(),
        subnet_ids: vec![west_subnet.clone()],
        capacity_type: "on_demand".into(),
        capacity_reservation_id: None,
        launch_templates: BTreeMap::from([(TYPE.to_string(), west_lt)]),
        placement_group: None,
    });
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "match": {"AvailabilityZone": "us-east-1a"}}),
    );
    let (groups, _) = group_nodes(std::slice::from_ref(&doc), &nodes("gpu-p5-48xl-[1-2]"));
    let mut cooldowns = Cooldowns::default();
    let out = launch_group(
        &ByRegion(aws.clone()),
        "c",
        &doc,
        &groups[0],
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await
    .expect("resume");
    assert_eq!(out.placed.len(), 2, "{out:?}");
    assert!(out
        .placed
        .iter()
        .all(|p| p.pool == 1 && p.instance.subnet_id.as_deref() == Some(west_subnet.as_str())));
    let in_west = west
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("west instances");
    assert_eq!(in_west.len(), 2, "launched in us-west-2: {in_west:?}");
    assert!(aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("east")
        .is_empty());
}

/// The agent's node map in `state` (none yet: empty).
fn carriers(state: &std::path::Path) -> hpc_node::nodemap::Carriers {
    hpc_node::nodemap::NodeMap::at(state).read().expect("node map")
}

/// Resumes `hosts` (one partition and type) of `doc` for cluster `c` at time `now`.
async fn resume(
    clients: &One,
    doc: &PartitionDoc,
    hosts: &str,
    jobs: &ResumeJobs,
    cooldowns: &mut Cooldowns,
    now: u64,
) -> hpc_node::resume::GroupOutcome {
    let (groups, unknown) = group_nodes(std::slice::from_ref(doc), &nodes(hosts));
    assert!(
        unknown.is_empty() && groups.len() == 1,
        "{hosts}: {groups:?} {unknown:?}"
    );
    launch_at(clients, doc, &groups[0], jobs, cooldowns, now).await
}

/// Resumes `group` of `doc` for cluster `c` at time `now`.
async fn launch_at(
    clients: &One,
    doc: &PartitionDoc,
    group: &hpc_node::resume::Group,
    jobs: &ResumeJobs,
    cooldowns: &mut Cooldowns,
    now: u64,
) -> hpc_node::resume::GroupOutcome {
    launch_group(clients, "c", doc, group, jobs, cooldowns, now)
        .await
        .expect("resume")
}

/// A launch template for the test's type that launches into `reservation`.
async fn reserved_template(aws: &Aws, name: &str, reservation: &str, capacity_block: bool) -> String {
    let mut spec = template(name);
    spec.capacity_reservation = Some(hpc_aws::ec2::ReservationTarget {
        id: reservation.into(),
        capacity_block,
    });
    aws.ec2()
        .ensure_launch_template(&spec)
        .await
        .expect("launch template")
        .0
}

/// One instance straight from a launch template, as any caller of EC2 could ask.
async fn one_instance(
    aws: &Aws,
    template: String,
    subnet: String,
    market: hpc_aws::ec2::Market,
) -> hpc_aws::ec2::FleetOutcome {
    let request = hpc_aws::ec2::FleetRequest {
        overrides: vec![hpc_aws::ec2::FleetOverride {
            launch_template_id: template,
            instance_type: TYPE.into(),
            subnet_id: subnet,
            priority: 0.0,
        }],
        count: 1,
        market,
        allocation_strategy: "prioritized".into(),
        tags: vec![],
    };
    aws.ec2().launch_fleet(&request).await.expect("fleet answer")
}

fn available_in(emu: &Emulator, reservation: &str) -> (String, u32) {
    let xml = emu.ec2(&format!(
        "Action=DescribeCapacityReservations&CapacityReservationId.1={reservation}"
    ));
    (
        acceptance_tests::xml_text(&xml, "state"),
        acceptance_tests::xml_text(&xml, "availableInstanceCount")
            .parse()
            .expect("count"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_pool_launches_into_its_reservation_and_a_job_it_cannot_hold_goes_whole_to_the_next_pool() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    let reservation = emu.capacity_reservation(TYPE, "us-east-1a", 2);
    doc.pools[0].capacity_reservation_id = Some(reservation.clone());
    doc.pools[0].launch_templates = BTreeMap::from([(
        TYPE.to_string(),
        reserved_template(&aws, "hpc-c-gpu-0-p5", &reservation, false).await,
    )]);
    let zone_b_subnet = doc.pools[1].subnet_ids[0].clone();
    let clients = One(aws.ec2());
    let mut cooldowns = Cooldowns::default();

    // A three-node job does not fit the two reserved instances: it goes whole to the next pool,
    // without a launch against the reservation.
    let jobs = ResumeJobs::parse(
        r#"{"all_nodes_resume":"gpu-p5-48xl-[1-3]",
        "jobs":[{"job_id":7,"nodes_alloc":"gpu-p5-48xl-[1-3]","nodes_resume":"gpu-p5-48xl-[1-3]","partition":"gpu"}]}"#,
    )
    .expect("resume file");
    let (groups, _) = group_nodes(std::slice::from_ref(&doc), &nodes("gpu-p5-48xl-[1-3]"));
    emu.reset_calls();
    let out = launch_group(&clients, "c", &doc, &groups[0], &jobs, &mut cooldowns, 1_000)
        .await
        .expect("resume");
    assert_eq!(out.placed.len(), 3, "{out:?}");
    assert!(out.placed.iter().all(|p| p.pool == 1), "{out:?}");
    assert!(
        matches!(&out.attempts[0].skipped, Some(Skip::Reservation(why)) if why.contains("a job needs 3")),
        "{out:?}"
    );
    assert_eq!(emu.calls().get("ec2:CreateFleet"), Some(&1));
    assert_eq!(available_in(&emu, &reservation), ("active".to_string(), 2));

    // Two single nodes fill the reservation; the third goes to the next pool, and the pool is
    // not cooled down (the reservation frees up as its instances end).
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-[4-6]",
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await;
    let in_reservation: Vec<&str> = out
        .placed
        .iter()
        .filter(|p| p.pool == 0)
        .map(|p| p.node.as_str())
        .collect();
    let reserved: Vec<String> = out
        .placed
        .iter()
        .filter(|p| p.pool == 0)
        .map(|p| p.instance.id.clone())
        .collect();
    assert_eq!(in_reservation, vec!["gpu-p5-48xl-4", "gpu-p5-48xl-5"], "{out:?}");
    assert_eq!(
        out.placed[2].instance.subnet_id.as_deref(),
        Some(zone_b_subnet.as_str())
    );
    assert_eq!(available_in(&emu, &reservation), ("active".to_string(), 0));
    assert!(!cooldowns.active(&Cooldowns::key("gpu", 0, TYPE), 1_001));

    // Full: the next resume passes the reservation by without a call, and EC2 itself refuses a
    // launch past it.
    emu.reset_calls();
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-7",
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await;
    assert!(
        matches!(&out.attempts[0].skipped, Some(Skip::Reservation(why)) if why.contains("in use")),
        "{out:?}"
    );
    assert_eq!(emu.calls().get("ec2:CreateFleet"), Some(&1));
    let direct = one_instance(
        &aws,
        doc.pools[0].launch_templates[TYPE].clone(),
        doc.pools[0].subnet_ids[0].clone(),
        hpc_aws::ec2::Market::OnDemand,
    )
    .await;
    assert!(direct.instances.is_empty());
    assert_eq!(direct.errors[0].code, "ReservationCapacityExceeded", "{direct:?}");

    // Ending a reserved instance gives its place back.
    aws.ec2()
        .request_termination(std::slice::from_ref(&reserved[0]))
        .await
        .expect("terminate");
    assert_eq!(available_in(&emu, &reservation), ("active".to_string(), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_block_pool_launches_only_inside_the_block_and_with_its_market() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    let buy = |start: &str| emu.capacity_block(TYPE, 2, start);
    let later = buy("2099-01-01T11:30:00Z");
    let now = buy("2000-01-01T00:00:00Z");
    assert_eq!(available_in(&emu, &later), ("scheduled".to_string(), 0));
    assert_eq!(available_in(&emu, &now), ("active".to_string(), 2));
    let clients = One(aws.ec2());
    let mut cooldowns = Cooldowns::default();

    // Only the block that has not started: no launch at all, the nodes are reported.
    doc.pools.truncate(1);
    doc.pools[0].capacity_type = "capacity_block".into();
    doc.pools[0].capacity_reservation_id = Some(later.clone());
    doc.pools[0].launch_templates = BTreeMap::from([(
        TYPE.to_string(),
        reserved_template(&aws, "hpc-c-gpu-later", &later, true).await,
    )]);
    emu.reset_calls();
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-[1-2]",
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await;
    assert!(out.placed.is_empty(), "{out:?}");
    assert_eq!(out.unplaced.len(), 2);
    assert!(
        matches!(&out.attempts[0].skipped, Some(Skip::Reservation(why)) if why.contains("is scheduled")),
        "{out:?}"
    );
    assert_eq!(emu.calls().get("ec2:CreateFleet"), None);
    // EC2 refuses a launch into a block before its start, whoever asks.
    let early = one_instance(
        &aws,
        doc.pools[0].launch_templates[TYPE].clone(),
        doc.pools[0].subnet_ids[0].clone(),
        hpc_aws::ec2::Market::CapacityBlock,
    )
    .await;
    assert!(early.instances.is_empty());
    assert_eq!(early.errors[0].code, "InsufficientInstanceCapacity", "{early:?}");

    // The active block launches both nodes into it, with the capacity-block market (an
    // on-demand fleet into a block is refused).
    doc.pools[0].capacity_reservation_id = Some(now.clone());
    let now_template = reserved_template(&aws, "hpc-c-gpu-now", &now, true).await;
    doc.pools[0].launch_templates = BTreeMap::from([(TYPE.to_string(), now_template.clone())]);
    let on_demand = one_instance(
        &aws,
        now_template,
        doc.pools[0].subnet_ids[0].clone(),
        hpc_aws::ec2::Market::OnDemand,
    )
    .await;
    assert_eq!(on_demand.errors[0].code, "InvalidParameterCombination", "{on_demand:?}");
    let out = resume(
        &clients,
        &doc,
        "gpu-p5-48xl-[1-2]",
        &ResumeJobs::default(),
        &mut cooldowns,
        1_000,
    )
    .await;
    assert_eq!(out.placed.len(), 2, "{out:?}");
    assert_eq!(available_in(&emu, &now), ("active".to_string(), 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_one_pool_can_only_partly_launch_gets_all_its_nodes_from_the_next_pool() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let doc = partition(&aws, &emu).await;
    let zone_b_subnet = doc.pools[1].subnet_ids[0].clone();
    // Zone a has room for three instances.
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "capacity": 3, "match": {"AvailabilityZone": "us-east-1a"}}),
    );
    let clients = One(aws.ec2());
    let jobs = ResumeJobs::parse(r#"{"all_nodes_resume":"gpu-p5-48xl-[1-4]",
        "jobs":[{"job_id":11,"nodes_alloc":"gpu-p5-48xl-[1-4]","nodes_resume":"gpu-p5-48xl-[1-4]","partition":"gpu"}]}"#)
    .expect("resume file");
    let (groups, _) = group_nodes(std::slice::from_ref(&doc), &nodes("gpu-p5-48xl-[1-4]"));
    let out = launch_group(&clients, "c", &doc, &groups[0], &jobs, &mut Cooldowns::default(), 1_000)
        .await
        .expect("resume");
    assert_eq!(out.placed.len(), 4, "{out:?}");
    assert!(
        out.placed
            .iter()
            .all(|p| p.pool == 1 && p.instance.subnet_id.as_deref() == Some(zone_b_subnet.as_str())),
        "all four from the second pool: {out:?}"
    );
    assert_eq!((out.attempts[0].launched, out.attempts[0].released), (3, 3), "{out:?}");
    // The three partial instances are already on their way out.
    let running = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "c")
        .await
        .expect("describe");
    let live: Vec<_> = running
        .iter()
        .filter(|i| i.state == "pending" || i.state == "running")
        .collect();
    assert_eq!(live.len(), 4, "{running:?}");

    // Best effort keeps what one pool could launch and takes the rest from the next.
    emu.clear_faults();
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "capacity": 3, "match": {"AvailabilityZone": "us-east-1a"}}),
    );
    let mut best = doc.clone();
    best.scaling_strategy = hpc_desired_state::ScalingStrategy::BestEffort;
    let (groups, _) = group_nodes(std::slice::from_ref(&best), &nodes("gpu-p5-48xl-[5-8]"));
    let out = launch_group(
        &clients,
        "c",
        &best,
        &groups[0],
        &jobs,
        &mut Cooldowns::default(),
        1_000,
    )
    .await
    .expect("resume");
    let per_pool: Vec<usize> = out.placed.iter().map(|p| p.pool).collect();
    assert_eq!(per_pool, vec![0, 0, 0, 1], "{out:?}");
    assert_eq!(out.attempts[0].released, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_resume_sends_its_fleet_batches_at_once_across_chunks_and_instance_types() {
    let emu = Emulator::start();
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    doc.pools.truncate(1);
    doc.max_nodes = 700;
    doc.scaling_strategy = hpc_desired_state::ScalingStrategy::BestEffort;
    let mut small = doc.shapes[0].clone();
    small.instance_type = "c7i.2xlarge".into();
    let (lt, _) = aws
        .ec2()
        .ensure_launch_template(&template("hpc-c-gpu-c7i"))
        .await
        .expect("launch template");
    doc.pools[0].launch_templates.insert(small.instance_type.clone(), lt);
    doc.shapes.push(small);
    publish(&aws, &doc).await;
    // Every fleet call takes a second and a half: calls sent one after another never overlap.
    emu.add_fault(json!({"service": "ec2", "action": "CreateFleet", "latency_ms": 1500}));
    let state = std::env::temp_dir().join(format!("hpc-node-batches-{}", std::process::id()));
    emu.reset_calls();
    let out = hpc_node(&emu)
        .args(["resume", "gpu-p5-48xl-[1-600],gpu-c7i-2xl-[1-2]"])
        .args(["--cluster", "c", "--region", "us-east-1", "--state-dir"])
        .arg(&state)
        .output()
        .expect("run hpc-node");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    // 600 nodes of one type are two batches (500 and 100); the other type is a third call.
    assert_eq!(emu.calls().get("ec2:CreateFleet"), Some(&3), "{log}");
    assert_eq!(
        emu.peak_in_flight("ec2:CreateFleet"),
        3,
        "the batches went one by one: {log}"
    );
    let map = carriers(&state);
    assert_eq!(map.len(), 602, "{log}");
    assert!(
        map.contains_key("gpu-c7i-2xl-2") && map.contains_key("gpu-p5-48xl-600"),
        "{map:?}"
    );
    let _ = std::fs::remove_dir_all(state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_past_ec2s_launch_rate_waits_for_it_and_launches_every_node() {
    let emu = Emulator::start();
    // A launch bucket of 3 instances, refilled at one a second.
    emu.configure(json!({"launch_bucket_size": 3, "launch_refill_per_s": 1}));
    let aws = connect(&emu).await;
    let mut doc = partition(&aws, &emu).await;
    doc.pools.truncate(1);
    doc.scaling_strategy = hpc_desired_state::ScalingStrategy::BestEffort;
    let (groups, _) = group_nodes(std::slice::from_ref(&doc), &nodes("gpu-p5-48xl-[1-8]"));
    let out = launch_group(
        &One(aws.ec2()),
        "c",
        &doc,
        &groups[0],
        &ResumeJobs::default(),
        &mut Cooldowns::default(),
        1_000,
    )
    .await
    .expect("a resume throttled by EC2 still succeeds");
    assert_eq!(out.placed.len(), 8, "{out:?}");
    assert!(out.unplaced.is_empty());
    let throttled = out
        .attempts
        .iter()
        .filter(|a| a.errors.iter().any(|e| e.code == "RequestLimitExceeded"))
        .count();
    assert!(throttled >= 1, "the launch rate was never reached: {out:?}");
    // No batch asked for more than the bucket could ever hold once it had been refused.
    let after_first_refusal = out.attempts.iter().skip_while(|a| a.errors.is_empty()).skip(1);
    assert!(after_first_refusal.clone().all(|a| a.requested <= 4), "{out:?}");
}
