//! The elastic path end to end with real Slurm: a job is submitted to an empty cloud
//! partition; slurmctld calls `hpc-node resume`; the first pool has no capacity, so the
//! instance comes from the second; an impersonated slurmd (standing in for the booted image)
//! registers; the job completes; after SuspendTime slurmctld calls `hpc-node suspend` and the
//! instance is terminated. Accounting runs through slurmdbd and a private MariaDB: sacct shows
//! the job.
//!
//! Needs root and Debian's slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server
//! (.ci/run installs them).

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

use acceptance_tests::{Daemon, Emulator, MariaDb, Munge};
use hpc_aws::ec2::LaunchTemplateSpec;
use hpc_aws::{Aws, Settings};
use hpc_desired_state::{AccountingDoc, ClusterDoc, PoolDoc};
use serde_json::json;

mod support;

fn program(name: &str) -> String {
    acceptance_tests::program(name, "slurmctld slurmd slurm-client slurmdbd munge")
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_an_empty_cloud_partition_runs_after_failover_and_the_node_is_suspended() {
    let (slurmctld, slurmd) = (program("slurmctld"), program("slurmd"));
    let emu = Emulator::start();
    std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    let endpoints = ["ec2", "ssm"].iter().map(|s| (s.to_string(), emu.url())).collect();
    let aws = Aws::connect(&Settings {
        region: Some("us-east-1".into()),
        endpoints,
        ..Settings::default()
    })
    .await
    .expect("connect");

    // Two pools in two zones; the first has no capacity.
    let xml = emu.ec2("Action=DescribeSubnets");
    let subnet_in = |zone: &str| {
        xml.split("<item>")
            .find(|i| i.contains(&format!("<availabilityZone>{zone}</availabilityZone>")))
            .and_then(|i| i.split("<subnetId>").nth(1))
            .and_then(|s| s.split('<').next())
            .map(str::to_string)
            .expect("default subnet")
    };
    let (zone_a, zone_b) = (subnet_in("us-east-1a"), subnet_in("us-east-1b"));
    let lt = LaunchTemplateSpec {
        name: "hpc-lab-cpu".into(),
        image_id: "ami-03cf127a".into(),
        instance_type: Some("c7i.2xlarge".into()),
        key_name: None,
        security_group_ids: vec![],
        instance_profile_arn: None,
        user_data: None,
        root_volume: None,
        efa_network_cards: vec![],
        placement_group: None,
        capacity_reservation: None,
        tags: vec![],
    };
    let (lt_id, _) = aws.ec2().ensure_launch_template(&lt).await.expect("launch template");
    let big = LaunchTemplateSpec {
        name: "hpc-lab-cpu-4xl".into(),
        instance_type: Some("c7i.4xlarge".into()),
        ..lt.clone()
    };
    let (big_id, _) = aws.ec2().ensure_launch_template(&big).await.expect("launch template");
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "match": {"AvailabilityZone": "us-east-1a"}}),
    );
    let pool = |subnet: &str| PoolDoc {
        region: "us-east-1".into(),
        subnet_ids: vec![subnet.to_string()],
        capacity_type: "on_demand".into(),
        capacity_reservation_id: None,
        launch_templates: [
            ("c7i.2xlarge".to_string(), lt_id.clone()),
            ("c7i.4xlarge".to_string(), big_id.clone()),
        ]
        .into_iter()
        .collect(),
        placement_group: None,
    };
    let mut part = support::partition(
        "lab",
        "cpu",
        vec![
            support::shape("c7i.2xlarge", 1, 1, 1, 1024),
            support::shape("c7i.4xlarge", 1, 1, 1, 1024),
        ],
        2,
    );
    part.slurm.default = true;
    part.ami_id = "ami-03cf127a".into();
    part.pools = vec![pool(&zone_a), pool(&zone_b)];
    let cluster = ClusterDoc {
        name: "lab".into(),
        slurm_version: "22.05".into(),
        scaledown_idletime_s: 10,
        resume_timeout_s: 300,
        accounting: AccountingDoc {
            mode: "local".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let ssm = aws.ssm();
    ssm.put(
        &hpc_desired_state::cluster_param("lab"),
        &serde_json::to_string(&cluster).expect("json"),
        &[],
    )
    .await
    .expect("publish");
    ssm.put(
        &hpc_desired_state::partition_param("lab", "cpu"),
        &serde_json::to_string(&part).expect("json"),
        &[],
    )
    .await
    .expect("publish");

    let dir = std::env::temp_dir().join(format!("hpc-node-elastic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["etc", "state", "spool", "log", "run", "agent", "work"] {
        std::fs::create_dir_all(dir.join(sub)).expect("dirs");
    }
    let munge = Munge::start(&dir);
    let p = |s: &str| dir.join(s).display().to_string();
    let conf = dir.join("etc/slurm.conf");
    let node_bin = env!("CARGO_BIN_EXE_hpc-node");
    let env = format!(
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_ENDPOINT_URL={} SLURM_CONF={}",
        emu.url(),
        conf.display()
    );
    // ResumeProgram: hpc-node launches the instance; then, standing in for the image booting, a
    // slurmd for each node starts (signal mask cleared: slurmctld's children inherit blocked signals).
    // A machine takes seconds to boot, and this stand-in must too: `slurmd -b` reports its start as
    // the node's boot time in whole seconds, and slurmctld ignores a boot not later than its
    // power-up request (a resume done within the second once left a node waiting for
    // ResumeTimeout).
    let resume = format!(
        "#!/bin/sh\n{env}\n{node_bin} resume \"$1\" --cluster lab --region us-east-1 --state-dir {agent} >> {log}/resume.log 2>&1\n\
         sleep 2\n\
         for n in $(scontrol show hostnames \"$1\"); do\n  \
         scontrol show node $n -o | grep -q 'Reason=hpc-node' && continue\n  \
         perl -MPOSIX -e 'sigprocmask(SIG_SETMASK, POSIX::SigSet->new); exec @ARGV' {slurmd} -b -N $n -f {conf} >> {log}/slurmd.out 2>&1\n\
         done\n",
        agent = p("agent"),
        log = p("log"),
        conf = conf.display()
    );
    let suspend = format!(
        "#!/bin/sh\n{env}\n{node_bin} suspend \"$1\" --cluster lab --region us-east-1 --state-dir {agent} >> {log}/suspend.log 2>&1\n\
         for n in $(scontrol show hostnames \"$1\"); do\n  pkill -f \"slurmd -b -N $n \" || true\ndone\n",
        agent = p("agent"),
        log = p("log")
    );
    for (name, body) in [("resume", &resume), ("suspend", &suspend)] {
        std::fs::write(dir.join(name), body).expect("script");
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let layout = support::layout(
        &dir,
        &munge.socket,
        [p("resume"), p("suspend"), p("suspend")],
        &[("JobAcctGatherType", "jobacct_gather/linux")],
    );
    let layout = support::write_layout(&dir, &layout).display().to_string();
    let out = Command::new(node_bin)
        .args([
            "reconcile",
            "--once",
            "--cluster",
            "lab",
            "--region",
            "us-east-1",
            "--layout",
            &layout,
        ])
        .env("AWS_ENDPOINT_URL", emu.url())
        .env("HPC_NODE_SLURMCTLD", &slurmctld)
        .output()
        .expect("reconcile");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Accounting: a private MariaDB (socket only) and slurmdbd with the slurmdbd.conf hpc-node wrote.
    let mariadb = MariaDb::start(&dir.join("mariadb"), None);
    let db_socket = mariadb.socket.clone();
    assert!(std::fs::read_to_string(dir.join("etc/slurmdbd.conf"))
        .is_ok_and(|c| c.contains("StorageType=accounting_storage/mysql")));
    let _slurmdbd = Daemon::spawn(
        "slurmdbd",
        Command::new(program("slurmdbd"))
            .arg("-D")
            .env("SLURM_CONF", &conf)
            .env("MYSQL_UNIX_PORT", &db_socket),
        &dir.join("slurmdbd.out"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", 6819)).is_err() {
        assert!(Instant::now() < deadline, "slurmdbd did not listen on 6819");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(Command::new(&slurmctld)
        .args(["-i", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf)
        .status()
        .is_ok_and(|s| s.success()));
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("pkill")
                .args(["-f", &format!("slurmd -b -N cpu-c7i-.* -f {}", self.0.display())])
                .status();
            if let Ok(pid) = std::fs::read_to_string(
                self.0
                    .parent()
                    .and_then(|d| d.parent())
                    .map(|d| d.join("run/slurmctld.pid"))
                    .unwrap_or_default(),
            ) {
                let _ = Command::new("kill").arg(pid.trim()).status();
            }
        }
    }
    let _cleanup = Cleanup(conf.clone());
    let slurm = |prog: &str, args: &[&str]| {
        let o = Command::new(prog)
            .args(args)
            .env("SLURM_CONF", &conf)
            .current_dir(dir.join("work"))
            .output()
            .expect("slurm client");
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let wait = |what: &str, secs: u64, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !f() {
            assert!(
                Instant::now() < deadline,
                "{what} did not happen within {secs}s; logs:\n{}\n{}\n{}",
                std::fs::read_to_string(dir.join("log/resume.log")).unwrap_or_default(),
                std::fs::read_to_string(dir.join("log/slurmd.out")).unwrap_or_default(),
                std::fs::read_to_string(dir.join("log/slurmctld.log"))
                    .unwrap_or_default()
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait("slurmctld up", 20, &|| slurm("scontrol", &["ping"]).contains("is UP"));

    let submitted = slurm("sbatch", &["-p", "cpu", "-N", "1", "--wrap", "hostname"]);
    let job = submitted.split_whitespace().last().unwrap_or_default().to_string();
    assert!(submitted.contains("Submitted batch job"), "{submitted}");
    let started = Instant::now();
    wait("the job to complete", 150, &|| {
        slurm("scontrol", &["show", "job", &job]).contains("JobState=COMPLETED")
    });
    eprintln!("job completed {:?} after submission", started.elapsed());
    let log = std::fs::read_to_string(dir.join("log/resume.log")).unwrap_or_default();
    assert!(
        log.contains("pool 0: asked 1, launched 0 (InsufficientInstanceCapacity"),
        "{log}"
    );
    assert!(log.contains("pool 1: asked 1, launched 1"), "{log}");
    // slurmctld told the program which job it resumes for (what all-or-nothing launches by).
    assert!(log.contains(&format!("Slurm resumes for job(s) {job}")), "{log}");
    let instances = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", "lab")
        .await
        .expect("instances");
    assert_eq!(instances.len(), 1, "{instances:?}");
    assert_eq!(
        instances[0].subnet_id.as_deref(),
        Some(zone_b.as_str()),
        "launched in the second pool"
    );

    // Idle for SuspendTime: Slurm calls hpc-node suspend and the instance goes away.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let alive = aws
            .ec2()
            .instances_tagged("hpcforge:cluster", "lab")
            .await
            .expect("instances");
        if alive.iter().all(|i| i.state != "running" && i.state != "pending") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the node was not suspended: {}",
            std::fs::read_to_string(dir.join("log/suspend.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The job went through slurmdbd into MariaDB.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let acct = slurm("sacct", &["-j", &job, "-n", "-P", "-X", "-o", "JobID,State"]);
        if acct.lines().any(|l| l.trim() == format!("{job}|COMPLETED")) {
            break;
        }
        assert!(Instant::now() < deadline, "sacct does not show the job: {acct}");
        std::thread::sleep(Duration::from_millis(500));
    }

    // Type fallback: c7i.2xlarge has no capacity in any pool. A job Slurm gives the preferred
    // c7i.2xlarge node (the second: the first is still powering down) is requeued when resume
    // sets that node down, and runs on a c7i.4xlarge node instead.
    emu.add_fault(
        json!({"service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                         "match": {"InstanceType": "c7i.2xlarge"}}),
    );
    let started = Instant::now();
    let submitted = slurm("sbatch", &["-p", "cpu", "-N", "1", "--wrap", "hostname"]);
    let second = submitted.split_whitespace().last().unwrap_or_default().to_string();
    assert!(submitted.contains("Submitted batch job"), "{submitted}");
    // Slurm holds a job requeued for a node failure about two minutes before it may start
    // again; then a node of the other type launches and registers (169 s in all, measured
    // alone; CI runs the booted suites beside this one).
    wait("the job to complete on the other type", 480, &|| {
        slurm("scontrol", &["show", "job", &second]).contains("JobState=COMPLETED")
    });
    eprintln!("the second job completed {:?} after submission", started.elapsed());
    let shown = slurm("scontrol", &["show", "job", &second, "-o"]);
    assert!(shown.contains(" NodeList=cpu-c7i-4xl-"), "{shown}");
    let log = std::fs::read_to_string(dir.join("log/resume.log")).unwrap_or_default();
    let down = "setting 1 node(s) down (hpc-node: no capacity in any pool): ";
    let node = log
        .lines()
        .find_map(|l| l.split(down).nth(1))
        .unwrap_or_else(|| panic!("no c7i.2xlarge node set down: {log}"))
        .to_string();
    assert!(node.starts_with("cpu-c7i-2xl-"), "{log}");
    let shown = slurm("scontrol", &["show", "node", &node, "-o"]);
    assert!(shown.contains("Reason=hpc-node: no capacity in any pool"), "{shown}");

    // Capacity that recovers: the sweep leaves the node down while its pools cool down, and
    // returns it once the cool-downs are over, so the partition keeps every node name.
    let sweep = || {
        let out = Command::new(node_bin)
            .args([
                "sweep",
                "--cluster",
                "lab",
                "--region",
                "us-east-1",
                "--state-dir",
                &p("agent"),
            ])
            .env("AWS_ENDPOINT_URL", emu.url())
            .env("SLURM_CONF", &conf)
            .output()
            .expect("hpc-node sweep");
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{said}");
        said
    };
    let said = sweep();
    let shown = slurm("scontrol", &["show", "node", &node, "-o"]);
    assert!(
        shown.contains("Reason=hpc-node: no capacity in any pool"),
        "during the cool-down: {shown}\n{said}"
    );
    // The cool-downs end (their record moved to the past, as ice_cooldown's 600 s would) and the
    // type has capacity again.
    let cooldowns_file = dir.join("agent/cooldowns.json");
    let mut until: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&cooldowns_file).expect("cool-downs")).expect("json");
    assert!(until.keys().any(|k| k.ends_with("/c7i.2xlarge")), "{until:?}");
    for value in until.values_mut() {
        *value = json!(1);
    }
    std::fs::write(&cooldowns_file, serde_json::Value::Object(until).to_string()).expect("cool-downs");
    emu.clear_faults();
    let said = sweep();
    assert!(
        said.contains(&format!("return, their pools' cool-downs over: {node}")),
        "{said}\n{}",
        slurm("scontrol", &["show", "node", &node, "-o"])
    );
    wait("the node to return to service", 30, &|| {
        let shown = slurm("scontrol", &["show", "node", &node, "-o"]);
        !shown.contains("State=DOWN") && !shown.contains("Reason=hpc-node: no capacity")
    });
    // And it serves: a job asking for it by name runs there.
    let submitted = slurm("sbatch", &["-p", "cpu", "-w", &node, "--wrap", "hostname"]);
    let third = submitted.split_whitespace().last().unwrap_or_default().to_string();
    assert!(submitted.contains("Submitted batch job"), "{submitted}");
    wait("the job on the returned node to complete", 180, &|| {
        slurm("scontrol", &["show", "job", &third]).contains("JobState=COMPLETED")
    });
    drop(_cleanup);
    drop(_slurmdbd);
    drop(mariadb);
    drop(munge);
    let _ = std::fs::remove_dir_all(&dir);
}
