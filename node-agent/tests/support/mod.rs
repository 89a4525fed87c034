//! What the agent's suites share: a private Slurm's layout under a test directory, and
//! partition documents built from the contract's types (not written out field by field, so a
//! new field of the document costs the tests nothing).

// Each suite uses a part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use acceptance_tests::free_port;
use hpc_desired_state::{PartitionDoc, ShapeDoc, SCHEMA};
use hpc_node::reconcile::Layout;

/// slurm.conf settings that let slurmctld and slurmd run in a test's own directories without
/// systemd's cgroups and without mail.
pub const UNCONFINED: &[(&str, &str)] = &[
    ("ProctrackType", "proctrack/linuxproc"),
    ("TaskPlugin", "task/none"),
    ("MailProg", "/bin/true"),
];

/// The layout of a private Slurm in `dir` (`etc`, `state`, `spool`, `log`, `run` below it) on
/// free local ports, with `munge_socket` and the power programs (resume, suspend, resume-fail).
pub fn layout(dir: &Path, munge_socket: &Path, power: [String; 3], extra: &[(&str, &str)]) -> Layout {
    let p = |s: &str| Some(dir.join(s).display().to_string());
    let [resume, suspend, fail] = power;
    Layout {
        conf_dir: dir.join("etc"),
        controller_host: Some("localhost".into()),
        controller_addr: Some("127.0.0.1".into()),
        state_dir: p("state"),
        spool_dir: p("spool"),
        log_dir: p("log"),
        run_dir: p("run"),
        slurm_user: Some("root".into()),
        munge_socket: Some(munge_socket.display().to_string()),
        ports: Some((free_port(), free_port())),
        power_programs: Some((resume, suspend, fail)),
        extra: UNCONFINED
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Layout::default()
    }
}

/// Writes `layout` as `dir/layout.json`, the file `hpc-node reconcile --layout` reads.
pub fn write_layout(dir: &Path, layout: &Layout) -> PathBuf {
    let path = dir.join("layout.json");
    let json = serde_json::to_string(layout).expect("layout as JSON");
    std::fs::write(&path, json).expect("write layout.json");
    path
}

/// A node shape without GPUs.
pub fn shape(instance_type: &str, vcpus: u32, cores: u32, threads_per_core: u32, memory_mib: u64) -> ShapeDoc {
    ShapeDoc {
        instance_type: instance_type.into(),
        vcpus,
        cores,
        threads_per_core,
        memory_mib,
        ..ShapeDoc::default()
    }
}

/// Partition `name` of `cluster` as the provider publishes it: these shapes, up to `max_nodes`
/// nodes, no pools yet, Slurm's settings at their defaults.
pub fn partition(cluster: &str, name: &str, shapes: Vec<ShapeDoc>, max_nodes: u32) -> PartitionDoc {
    PartitionDoc {
        schema: SCHEMA,
        cluster: cluster.into(),
        name: name.into(),
        shapes,
        max_nodes,
        allocation_strategy: "prioritized".into(),
        provision_timeout_s: 600,
        ice_cooldown_s: 600,
        ami_id: "ami-1".into(),
        root_volume_size: 100,
        ..PartitionDoc::default()
    }
}
