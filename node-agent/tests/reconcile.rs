//! Reconcile against real Slurm: the desired state in the emulator becomes a running
//! slurmctld's configuration; a partition added there shows up in sinfo; a broken desired
//! state is reported and leaves the running configuration alone.
//!
//! Needs root and Debian's slurmctld, slurm-client and munge (.ci/run installs them).

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use acceptance_tests::{Emulator, Munge};
use hpc_aws::{Aws, Settings};
use serde_json::json;

mod support;

fn program(name: &str) -> PathBuf {
    acceptance_tests::program(name, "slurmctld slurm-client munge")
}

/// slurmctld (a daemon found by its pid file, stopped on drop) and the munged it uses.
struct Daemons {
    _munge: Munge,
    slurmctld_pid_file: PathBuf,
}

impl Drop for Daemons {
    fn drop(&mut self) {
        if let Ok(pid) = fs::read_to_string(&self.slurmctld_pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn partition(name: &str, max_time: &str) -> hpc_desired_state::PartitionDoc {
    let mut doc = support::partition("lab", name, vec![support::shape("c7i.2xlarge", 8, 4, 2, 16384)], 4);
    doc.slurm.max_time = Some(max_time.into());
    doc
}

fn partition_doc(name: &str, max_time: &str) -> String {
    serde_json::to_string(&partition(name, max_time)).expect("partition as JSON")
}

fn cluster_doc() -> String {
    json!({
        "schema": 1, "name": "lab", "region": "us-east-1", "slurm_version": "22.05",
        "scaledown_idletime_s": 600, "resume_timeout_s": 600,
        "accounting": {"mode": "none", "host": null, "port": null, "user": null, "database": null, "password_secret_arn": null},
        "munge_key_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hpcforge/lab/munge-key",
        "security_group_ids": [], "vpc_id": "vpc-1", "extra": {}, "users": [], "mfa_pam_module": null,
        "mfa_config": null, "mounts": [], "home": "head_node", "home_efs_id": null, "subnet_id": "subnet-1",
        "head_node": {"ami_id": "ami-1", "instance_type": "c7i.2xlarge", "root_volume_size": 100,
                      "root_volume_type": "gp3", "root_volume_encrypted": true, "key_name": null,
                      "allowed_ssh_cidrs": [], "instance_profile_arn": null},
        "login_count": 0, "login_instance_type": "c7i.xlarge", "tags": {},
        "max_hourly_cost": null, "max_gpus": null
    })
    .to_string()
}

fn sinfo_partitions(conf: &Path) -> String {
    let out = Command::new(program("sinfo"))
        .args(["-h", "-o", "%R"])
        .env("SLURM_CONF", conf)
        .output()
        .expect("sinfo");
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names.join(",")
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {}s",
            timeout.as_secs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desired_state_becomes_the_running_slurm_config_and_bad_state_is_refused() {
    let (slurmctld, scontrol) = (program("slurmctld"), program("scontrol"));
    let emu = Emulator::start();
    std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    let endpoints = [("ssm".to_string(), emu.url())].into_iter().collect();
    // (hpc-node reaches EC2 there too, through AWS_ENDPOINT_URL.)
    let aws = Aws::connect(&Settings {
        region: Some("us-east-1".into()),
        endpoints,
        ..Settings::default()
    })
    .await
    .expect("connect");

    let dir = std::env::temp_dir().join(format!("hpc-node-reconcile-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for sub in ["state", "spool", "log", "run", "etc"] {
        fs::create_dir_all(dir.join(sub)).expect("dirs");
    }
    let munge = Munge::start(&dir);
    let socket = munge.socket.clone();
    let daemons = Daemons {
        slurmctld_pid_file: dir.join("run/slurmctld.pid"),
        _munge: munge,
    };

    let p = |s: &str| dir.join(s).display().to_string();
    let mut layout = support::layout(
        &dir,
        &socket,
        ["/bin/true".into(), "/bin/true".into(), "/bin/true".into()],
        &[],
    );
    layout.restart_command = vec![p("restart-slurmctld")];
    // What systemctl restart does on a head node: stop the daemon, start it with its state.
    let conf = dir.join("etc/slurm.conf");
    fs::write(
        dir.join("restart-slurmctld"),
        format!(
            "#!/bin/sh\npid=$(cat {run}/slurmctld.pid)\nkill $pid\nwhile kill -0 $pid 2>/dev/null; do sleep 0.1; done\nSLURM_CONF={conf} exec {ctld} -f {conf}\n",
            run = p("run"),
            conf = conf.display(),
            ctld = slurmctld.display()
        ),
    )
    .expect("restart script");
    fs::set_permissions(dir.join("restart-slurmctld"), fs::Permissions::from_mode(0o755)).expect("chmod script");
    support::write_layout(&dir, &layout);
    let ssm = aws.ssm();
    ssm.put("/hpcforge/clusters/lab/cluster", &cluster_doc(), &[])
        .await
        .expect("publish cluster");
    ssm.put(
        "/hpcforge/clusters/lab/partitions/cpu",
        &partition_doc("cpu", "1-00:00:00"),
        &[],
    )
    .await
    .expect("publish cpu");

    let reconcile = || {
        Command::new(env!("CARGO_BIN_EXE_hpc-node"))
            .args([
                "reconcile",
                "--once",
                "--cluster",
                "lab",
                "--region",
                "us-east-1",
                "--layout",
            ])
            .arg(dir.join("layout.json"))
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_ENDPOINT_URL", emu.url())
            .env("HPC_NODE_SLURMCTLD", &slurmctld)
            .output()
            .expect("run hpc-node reconcile")
    };
    let out = reconcile();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        fs::read_to_string(&conf).is_ok_and(|c| c.contains("PartitionName=cpu")),
        "slurm.conf installed"
    );
    let started = Command::new(&slurmctld)
        .args(["-i", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf)
        .status();
    assert!(started.is_ok_and(|s| s.success()), "slurmctld daemonized");
    wait_for("slurmctld", Duration::from_secs(20), || {
        Command::new(&scontrol)
            .arg("ping")
            .env("SLURM_CONF", &conf)
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("is UP"))
    });
    assert_eq!(sinfo_partitions(&conf), "cpu");

    // A partition added to the desired state is reconciled into the live controller.
    ssm.put(
        "/hpcforge/clusters/lab/partitions/gpu",
        &partition_doc("gpu", "2-00:00:00"),
        &[],
    )
    .await
    .expect("publish gpu");
    let started = Instant::now();
    let out = reconcile();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success() && log.contains("restarted: true"),
        "new nodes need a restart in 22.05: {log}"
    );
    wait_for("gpu in sinfo", Duration::from_secs(10), || {
        sinfo_partitions(&conf) == "cpu,gpu"
    });
    eprintln!("partition visible in sinfo {:?} after publishing", started.elapsed());
    let status = ssm
        .get(&hpc_desired_state::status_param("lab"))
        .await
        .expect("status")
        .expect("status written");
    let report: hpc_desired_state::StatusDoc = serde_json::from_str(&status.value).expect("status document");
    assert!(
        report.error.is_none() && report.partition_version("gpu") == 1,
        "{}",
        status.value
    );

    // A partition that launches only into Capacity Blocks: while none is active its nodes are
    // held in a maintenance reservation; when one starts, the hold goes.
    let buy = |start: &str| emu.capacity_block("c7i.2xlarge", 4, start);
    let blocked = |block: &str| {
        let mut doc = partition("blk", "1-00:00:00");
        doc.pools = vec![hpc_desired_state::PoolDoc {
            region: "us-east-1".into(),
            subnet_ids: vec!["subnet-1".into()],
            capacity_type: "capacity_block".into(),
            capacity_reservation_id: Some(block.into()),
            launch_templates: Default::default(),
            placement_group: None,
        }];
        serde_json::to_string(&doc).expect("partition as JSON")
    };
    let hold = || {
        Command::new(&scontrol)
            .args(["show", "reservationname=hpcforge-block-blk", "-o"])
            .env("SLURM_CONF", &conf)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default()
    };
    ssm.put(
        "/hpcforge/clusters/lab/partitions/blk",
        &blocked(&buy("2099-01-01T11:30:00Z")),
        &[],
    )
    .await
    .expect("publish blk");
    wait_for("the scheduled block's hold", Duration::from_secs(60), || {
        reconcile();
        hold().contains("ReservationName=hpcforge-block-blk")
    });
    let held = hold();
    assert!(
        held.contains("Nodes=blk-c7i-2xl-[1-4]") && held.contains("MAINT"),
        "{held}"
    );
    ssm.put(
        "/hpcforge/clusters/lab/partitions/blk",
        &blocked(&buy("2000-01-01T00:00:00Z")),
        &[],
    )
    .await
    .expect("publish blk");
    let out = reconcile();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        log.contains("a Capacity Block of blk is active: released its nodes"),
        "{log}"
    );
    assert!(
        hold().contains("hpcforge-block-blk not found"),
        "the hold is gone: {}",
        hold()
    );
    ssm.delete("/hpcforge/clusters/lab/partitions/blk")
        .await
        .expect("delete blk");
    assert!(reconcile().status.success());

    // A broken desired state is refused: reported, and the running configuration kept.
    let before = fs::read_to_string(&conf).expect("conf");
    ssm.put(
        "/hpcforge/clusters/lab/partitions/bad",
        &partition_doc("bad", "forever"),
        &[],
    )
    .await
    .expect("publish bad");
    let out = reconcile();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && log.contains("kept the running configuration"),
        "{log}"
    );
    assert_eq!(fs::read_to_string(&conf).expect("conf"), before, "slurm.conf untouched");
    let status = ssm
        .get(&hpc_desired_state::status_param("lab"))
        .await
        .expect("status")
        .expect("status");
    assert!(
        status.value.contains("forever"),
        "the error names the bad value: {}",
        status.value
    );
    assert_eq!(
        sinfo_partitions(&conf),
        "cpu,gpu",
        "slurmctld still serves the old configuration"
    );

    drop(daemons);
    let _ = fs::remove_dir_all(&dir);
}
