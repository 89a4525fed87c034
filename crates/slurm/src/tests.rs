//! Tests over the public API: golden renders for each version, every validation rule
//! (accepted and rejected), and the rendering rules.
//!
//! Golden files live in `testdata/<version>/`; regenerate them with
//! `UPDATE_GOLDEN=1 cargo test -p slurm-model` and review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::*;

pub(crate) fn p5_48xlarge() -> InstanceShape {
    InstanceShape {
        instance_type: "p5.48xlarge".into(),
        vcpus: 192,
        sockets: 2,
        cores_per_socket: 48,
        threads_per_core: 2,
        memory_mib: 2_097_152,
        gpus: 8,
        gpu_model: Some("H100".into()),
        gpu_memory_mib: Some(81_920),
        efa: true,
    }
}

pub(crate) fn c6i_32xlarge() -> InstanceShape {
    InstanceShape {
        instance_type: "c6i.32xlarge".into(),
        vcpus: 128,
        sockets: 2,
        cores_per_socket: 32,
        threads_per_core: 2,
        memory_mib: 262_144,
        gpus: 0,
        gpu_model: None,
        gpu_memory_mib: None,
        efa: true,
    }
}

pub(crate) fn m5_large() -> InstanceShape {
    InstanceShape {
        instance_type: "m5.large".into(),
        vcpus: 2,
        sockets: 1,
        cores_per_socket: 1,
        threads_per_core: 2,
        memory_mib: 8192,
        gpus: 0,
        gpu_model: None,
        gpu_memory_mib: None,
        efa: false,
    }
}

pub(crate) fn hpc7a_96xlarge() -> InstanceShape {
    InstanceShape {
        instance_type: "hpc7a.96xlarge".into(),
        vcpus: 192,
        sockets: 2,
        cores_per_socket: 96,
        threads_per_core: 1,
        memory_mib: 786_432,
        gpus: 0,
        gpu_model: None,
        gpu_memory_mib: None,
        efa: true,
    }
}

fn node_set(name: &str, shape: InstanceShape, max_nodes: u32) -> NodeSet {
    NodeSet {
        name: name.into(),
        shape,
        max_nodes,
        static_nodes: 0,
        features: Vec::new(),
        weight: None,
    }
}

fn partition(name: &str, node_sets: Vec<NodeSet>) -> Partition {
    Partition {
        name: name.into(),
        node_sets,
        settings: PartitionSettings::default(),
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A cluster using every feature of the model: three partitions (several instance
/// types and pools, GPUs with static nodes, EFA with extras), slurmdbd accounting,
/// health check, cluster extras (pass-through and merged).
pub(crate) fn example(version: SlurmVersion) -> Cluster {
    let mut cpu_spot = node_set("cpu-p1-c632xl", c6i_32xlarge(), 64);
    cpu_spot.features = vec!["az-use1-az1".into(), "spot".into(), "pool-1".into()];
    cpu_spot.weight = Some(10);
    let mut cpu_small = node_set("cpu-p2-m5l", m5_large(), 16);
    cpu_small.static_nodes = 2;
    cpu_small.features = vec!["az-use1-az2".into(), "pool-2".into()];
    cpu_small.weight = Some(1);
    let mut cpu = partition("cpu", vec![cpu_spot, cpu_small]);
    cpu.settings.default = true;
    cpu.settings.max_time = Some("1-00:00:00".into());
    cpu.settings.default_time = Some("1:00:00".into());
    cpu.settings.max_nodes_per_job = Some(32);
    cpu.settings.min_nodes_per_job = Some(1);

    let mut gpu_nodes = node_set("gpu-p1-p548xl", p5_48xlarge(), 16);
    gpu_nodes.static_nodes = 2;
    gpu_nodes.features = vec!["az-use1-az1".into(), "capacity-block".into()];
    let mut gpu = partition("gpu", vec![gpu_nodes]);
    gpu.settings.exclusive = true;
    gpu.settings.allow_accounts = vec!["ml".into(), "research".into()];
    gpu.settings.priority_tier = Some(10);
    gpu.settings.max_time = Some("UNLIMITED".into());

    let mut hpc = partition("hpc", vec![node_set("hpc-p1-hpc7a96xl", hpc7a_96xlarge(), 128)]);
    hpc.settings.allow_groups = vec!["hpc".into()];
    hpc.settings.allow_qos = vec!["normal".into(), "high".into()];
    hpc.settings.oversubscribe = Some("no".into());
    hpc.settings.max_time = Some("2-12".into());
    hpc.settings.extra = map(&[
        ("ExclusiveUser", "YES"),
        ("gracetime", "120"),
        ("DenyAccounts", "guest"),
    ]);

    Cluster {
        name: "demo".into(),
        version,
        controller_host: "head".into(),
        controller_addr: Some("10.0.0.10".into()),
        backup_controller: None,
        slurm_user: "slurm".into(),
        state_dir: "/var/spool/slurmctld".into(),
        spool_dir: "/var/spool/slurmd".into(),
        log_dir: "/var/log/slurm".into(),
        run_dir: "/run/slurm/".into(),
        munge_socket: Some("/run/munge/munge.socket.2".into()),
        accounting: Accounting::Slurmdbd {
            host: "head".into(),
            port: 6819,
            storage: Storage::Local,
        },
        power_save: PowerSave {
            resume_program: "/usr/lib/hpc-node/resume".into(),
            suspend_program: "/usr/lib/hpc-node/suspend".into(),
            resume_fail_program: "/usr/lib/hpc-node/resume-fail".into(),
            resume_timeout_s: 1800,
            suspend_time_s: 600,
            suspend_timeout_s: 120,
            resume_rate: 0,
            suspend_rate: 0,
        },
        health_check_program: Some("/usr/lib/hpc-node/health-check".into()),
        extra: map(&[
            ("SchedulerParameters", "bf_continue,bf_max_job_test=1000"),
            ("slurmctldparameters", "enable_configless"),
            ("MpiDefault", "pmix"),
            ("InteractiveStepOptions", "--interactive --preserve-env --pty $SHELL"),
        ]),
        partitions: vec![cpu, gpu, hpc],
        ports: Some((6817, 6818)),
    }
}

fn golden(version: SlurmVersion, file: &str, actual: &str) {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "testdata", version.as_str(), file]
        .iter()
        .collect();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        }
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading {} (run with UPDATE_GOLDEN=1 to create it): {e}",
            path.display()
        )
    });
    if expected != actual {
        let first = expected.lines().zip(actual.lines()).position(|(a, b)| a != b);
        panic!(
            "{} differs from the golden file (first differing line: {:?}); rerun with UPDATE_GOLDEN=1 \
             if the change is intended.\n--- actual ---\n{actual}",
            path.display(),
            first.map(|i| i + 1)
        );
    }
}

fn rendered(version: SlurmVersion) -> Rendered {
    match render(&example(version)) {
        Ok(r) => r,
        Err(errors) => panic!("example cluster for {version} is invalid: {errors:#?}"),
    }
}

// ---------------------------------------------------------------- golden renders

fn golden_render(version: SlurmVersion) {
    let r = rendered(version);
    golden(version, "slurm.conf", &r.slurm_conf);
    golden(version, "gres.conf", &r.gres_conf);
    golden(version, "cgroup.conf", &r.cgroup_conf);
    golden(version, "slurmdbd.conf", r.slurmdbd_conf.as_deref().unwrap_or("<none>"));
}

#[test]
fn golden_render_22_05() {
    golden_render(SlurmVersion::V22_05);
}

#[test]
fn golden_render_24_11() {
    golden_render(SlurmVersion::V24_11);
}

#[test]
fn golden_render_26_05() {
    golden_render(SlurmVersion::V26_05);
    // 26.05 keeps every key 24.11's rendering writes: the files differ in their headers only.
    let (old, new) = (rendered(SlurmVersion::V24_11), rendered(SlurmVersion::V26_05));
    let body = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(body(&old.slurm_conf), body(&new.slurm_conf));
    assert_eq!(body(&old.cgroup_conf), body(&new.cgroup_conf));
}

// ---------------------------------------------------------------- rendering rules

fn line_with<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting with {start:?} in:\n{text}"))
}

#[test]
fn cloud_node_line_has_every_attribute() {
    let r = rendered(SlurmVersion::V22_05);
    assert_eq!(
        line_with(&r.slurm_conf, "NodeName=gpu-p1-p548xl-"),
        "NodeName=gpu-p1-p548xl-[1-16] State=CLOUD CPUs=192 Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 \
         RealMemory=1991782 Gres=gpu:h100:8 Features=p5.48xlarge,efa,h100,az-use1-az1,capacity-block"
    );
    assert_eq!(
        line_with(&r.slurm_conf, "NodeName=cpu-p2-m5l-"),
        "NodeName=cpu-p2-m5l-[1-16] State=CLOUD CPUs=2 Sockets=1 CoresPerSocket=1 ThreadsPerCore=2 \
         RealMemory=7270 Features=m5.large,az-use1-az2,pool-2 Weight=1"
    );
}

#[test]
fn static_nodes_are_excluded_from_power_saving() {
    for version in SlurmVersion::ALL {
        let r = rendered(version);
        assert_eq!(
            line_with(&r.slurm_conf, "SuspendExcNodes="),
            "SuspendExcNodes=cpu-p2-m5l-[1-2],gpu-p1-p548xl-[1-2]"
        );
    }
    let mut c = example(SlurmVersion::V22_05);
    for p in &mut c.partitions {
        for ns in &mut p.node_sets {
            ns.static_nodes = 0;
        }
    }
    let r = render(&c).expect("valid");
    assert!(
        !r.slurm_conf.contains("SuspendExcNodes"),
        "no static nodes, no SuspendExcNodes"
    );
}

#[test]
fn partition_line_carries_limits_and_extras() {
    let r = rendered(SlurmVersion::V22_05);
    assert_eq!(
        line_with(&r.slurm_conf, "PartitionName=cpu "),
        "PartitionName=cpu Nodes=cpu-p1-c632xl-[1-64],cpu-p2-m5l-[1-16] Default=YES MaxTime=1-00:00:00 \
         DefaultTime=1:00:00 MaxNodes=32 MinNodes=1 DefMemPerCPU=1941 State=UP"
    );
    assert_eq!(
        line_with(&r.slurm_conf, "PartitionName=gpu "),
        "PartitionName=gpu Nodes=gpu-p1-p548xl-[1-16] MaxTime=UNLIMITED AllowAccounts=ml,research \
         PriorityTier=10 OverSubscribe=EXCLUSIVE DefMemPerCPU=10373 State=UP"
    );
    assert_eq!(
        line_with(&r.slurm_conf, "PartitionName=hpc "),
        "PartitionName=hpc Nodes=hpc-p1-hpc7a96xl-[1-128] MaxTime=2-12 AllowGroups=hpc AllowQos=normal,high \
         OverSubscribe=NO DefMemPerCPU=3888 DenyAccounts=guest ExclusiveUser=YES GraceTime=120 State=UP"
    );
}

#[test]
fn partition_lines_are_exactly_the_slurm_conf_lines() {
    for version in SlurmVersion::ALL {
        let c = example(version);
        let r = render(&c).expect("valid");
        for p in &c.partitions {
            let lines = partition_lines(&c, &p.name).expect("partition exists");
            assert!(
                r.slurm_conf.contains(&lines),
                "{} lines not verbatim in slurm.conf",
                p.name
            );
            assert_eq!(
                lines.lines().filter(|l| l.starts_with("NodeName=")).count(),
                p.node_sets.len()
            );
            assert_eq!(lines.lines().filter(|l| l.starts_with("PartitionName=")).count(), 1);
        }
        assert_eq!(partition_lines(&c, "nope"), None);
    }
}

#[test]
fn version_specific_cloud_settings() {
    let old = rendered(SlurmVersion::V22_05).slurm_conf;
    let new = rendered(SlurmVersion::V24_11).slurm_conf;
    assert!(old.contains("\nSlurmctldParameters=cloud_reg_addrs,idle_on_node_suspend,enable_configless\n"));
    assert!(old.contains("\nPrivateData=cloud\n"));
    assert!(old.contains("\nCommunicationParameters=NoAddrCache\n"));
    assert!(old.contains("\nTreeWidth=65533\n"));
    assert!(new.contains("\nSlurmctldParameters=idle_on_node_suspend,enable_configless\n"));
    for gone in ["cloud_reg_addrs", "PrivateData", "NoAddrCache", "TreeWidth", "cons_res"] {
        assert!(!new.contains(gone), "24.11 slurm.conf must not contain {gone}");
    }
    let cgroup = rendered(SlurmVersion::V24_11).cgroup_conf;
    for gone in ["CgroupAutomount=", "Kmem"] {
        assert!(
            !cgroup.lines().any(|l| !l.starts_with('#') && l.contains(gone)),
            "24.11 cgroup.conf must not set {gone}"
        );
    }
}

/// Keys the 24.11 parser accepts on NodeName= lines (from its slurm.conf parser).
const NODE_KEYS_24_11: &[&str] = &[
    "BcastAddr",
    "Boards",
    "CoreSpecCount",
    "CoresPerSocket",
    "CPUs",
    "CPUSpecList",
    "CpuBind",
    "Feature",
    "Features",
    "Gres",
    "MemSpecLimit",
    "NodeAddr",
    "NodeHostname",
    "Port",
    "Procs",
    "RealMemory",
    "Reason",
    "RestrictedCoresPerGPU",
    "Sockets",
    "SocketsPerBoard",
    "State",
    "ThreadsPerCore",
    "TmpDisk",
    "TRESWeights",
    "Weight",
];

/// Every line of the 24.11 slurm.conf is `Key=Value` tokens with keys 24.11 knows: the
/// syntactic check we can make without a 24.11 binary (the real-Slurm tests also parse
/// it with the 22.05 parser).
#[test]
fn rendered_24_11_slurm_conf_uses_only_24_11_keys() {
    let version = SlurmVersion::V24_11;
    let r = rendered(version);
    let top: Vec<String> = cluster_extra_keys(version)
        .into_iter()
        .chain(keys::controlled_cluster_keys())
        .map(str::to_ascii_lowercase)
        .collect();
    let part: Vec<String> = partition_extra_keys(version)
        .into_iter()
        .chain(keys::controlled_partition_keys())
        .map(str::to_ascii_lowercase)
        .collect();
    for line in r.slurm_conf.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let tokens = tokens(line);
        let first = tokens.first().map(|(k, _)| k.to_ascii_lowercase()).unwrap_or_default();
        assert!(top.contains(&first), "unknown 24.11 key {first:?} in {line:?}");
        let allowed: Vec<String> = match first.as_str() {
            "nodename" => NODE_KEYS_24_11.iter().map(|k| k.to_ascii_lowercase()).collect(),
            "partitionname" => part.clone(),
            _ => {
                assert_eq!(tokens.len(), 1, "one Key=Value per line: {line:?}");
                continue;
            }
        };
        for (key, _) in &tokens[1..] {
            assert!(
                allowed.contains(&key.to_ascii_lowercase()),
                "unknown 24.11 key {key:?} in {line:?}"
            );
        }
    }
}

/// Splits `K=V K="v w"` into pairs.
fn tokens(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .unwrap_or_else(|| panic!("no '=' in {rest:?} of {line:?}"));
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted
                .find('"')
                .unwrap_or_else(|| panic!("unterminated quote in {line:?}"));
            (&quoted[..end], &quoted[end + 1..])
        } else {
            after.split_once(' ').unwrap_or((after, ""))
        };
        assert!(!key.contains(char::is_whitespace), "bad key {key:?} in {line:?}");
        out.push((key.to_string(), value.to_string()));
        rest = next.trim_start();
    }
    out
}

#[test]
fn values_with_spaces_are_quoted() {
    let r = rendered(SlurmVersion::V22_05);
    assert!(r
        .slurm_conf
        .contains("\nInteractiveStepOptions=\"--interactive --preserve-env --pty $SHELL\"\n"));
}

#[test]
fn extra_replaces_a_default_in_place() {
    let mut c = example(SlurmVersion::V22_05);
    c.extra.insert("ProctrackType".into(), "proctrack/linuxproc".into());
    c.extra.insert("taskplugin".into(), "task/none".into());
    c.extra.insert("TreeWidth".into(), "128".into());
    let conf = render(&c).expect("valid").slurm_conf;
    assert_eq!(conf.matches("ProctrackType=").count(), 1);
    assert!(conf.contains("\nProctrackType=proctrack/linuxproc\n"));
    // Contain needs proctrack/cgroup (slurmctld says so): not written beside another tracker.
    assert!(!conf.contains("PrologFlags="), "{conf}");
    assert!(
        conf.contains("\nTaskPlugin=task/none\n"),
        "canonical spelling, model's position"
    );
    assert!(conf.contains("\nTreeWidth=128\n") && !conf.contains("65533"));
}

#[test]
fn merged_keys_keep_the_model_entries() {
    let mut c = example(SlurmVersion::V22_05);
    c.extra.insert("PrivateData".into(), "jobs,cloud".into());
    c.extra.insert("SuspendExcNodes".into(), "cpu-p1-c632xl-[1-4]".into());
    let conf = render(&c).expect("valid").slurm_conf;
    assert!(conf.contains("\nPrivateData=cloud,jobs\n"));
    assert!(conf.contains("\nSuspendExcNodes=cpu-p2-m5l-[1-2],gpu-p1-p548xl-[1-2],cpu-p1-c632xl-[1-4]\n"));

    let mut c = example(SlurmVersion::V24_11);
    c.extra
        .insert("CommunicationParameters".into(), "block_null_hash".into());
    let conf = render(&c).expect("valid").slurm_conf;
    assert!(
        conf.contains("\nCommunicationParameters=block_null_hash\n"),
        "new merged key lands in the site section"
    );
}

#[test]
fn explicit_default_memory_replaces_the_derived_one() {
    let mut c = example(SlurmVersion::V22_05);
    c.partitions[1]
        .settings
        .extra
        .insert("DefMemPerGPU".into(), "65536".into());
    let lines = partition_lines(&render_ok(&c), "gpu").expect("gpu");
    assert!(lines.contains("DefMemPerGPU=65536") && !lines.contains("DefMemPerCPU"));
}

fn render_ok(c: &Cluster) -> Cluster {
    if let Err(errors) = render(c) {
        panic!("expected a valid cluster: {errors:#?}");
    }
    c.clone()
}

#[test]
fn cluster_wide_default_memory_replaces_the_derived_one() {
    let mut c = example(SlurmVersion::V24_11);
    c.extra.insert("DefMemPerNode".into(), "4096".into());
    let conf = render(&c).expect("valid").slurm_conf;
    assert!(conf.contains("\nDefMemPerNode=4096\n") && !conf.contains("DefMemPerCPU"));
}

#[test]
fn slurm_22_05_is_limited_to_its_tree_width() {
    let big = |version, n: u32| {
        errors_after(version, |c| {
            let ns = &mut c.partitions[2].node_sets[0];
            ns.name = "h".into();
            ns.max_nodes = n;
        })
    };
    let total_other = 64 + 16 + 16;
    let limit = 65533 - total_other;
    assert!(big(SlurmVersion::V22_05, limit).is_empty());
    let errors = big(SlurmVersion::V22_05, limit + 1);
    assert!(
        errors
            .iter()
            .any(|e| e.path == ["cluster", "partitions"] && e.summary.contains("too many nodes")),
        "{errors:#?}"
    );
    assert!(big(SlurmVersion::V24_11, limit + 1).is_empty());
}

#[test]
fn gres_conf_has_explicit_device_lines() {
    let r = rendered(SlurmVersion::V22_05);
    let lines: Vec<&str> = r.gres_conf.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        ["NodeName=gpu-p1-p548xl-[1-16] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]
    );
    assert!(!r.gres_conf.contains("AutoDetect="));

    let mut c = example(SlurmVersion::V22_05);
    c.partitions.retain(|p| p.name != "gpu");
    let r = render(&c).expect("valid");
    assert!(r.gres_conf.contains("# No node set has GPUs."));
    assert!(!r.slurm_conf.contains("GresTypes") && !r.slurm_conf.contains("gres/gpu"));
}

#[test]
fn accounting_lines() {
    let conf = rendered(SlurmVersion::V22_05).slurm_conf;
    for line in [
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=head",
        "AccountingStoragePort=6819",
        "AccountingStoragePass=socket=/run/munge/munge.socket.2",
        "AccountingStorageTRES=gres/gpu",
        "JobAcctGatherType=jobacct_gather/cgroup",
    ] {
        assert!(conf.contains(&format!("\n{line}\n")), "missing {line}");
    }
    let mut c = example(SlurmVersion::V22_05);
    c.accounting = Accounting::None;
    let r = render(&c).expect("valid");
    assert!(r
        .slurm_conf
        .contains("\nAccountingStorageType=accounting_storage/none\n"));
    assert!(!r.slurm_conf.contains("JobAcctGatherType"));
    assert_eq!(r.slurmdbd_conf, None);
    assert_eq!(r.files().len(), 3);
}

#[test]
fn paths_use_node_name_substitution() {
    let conf = rendered(SlurmVersion::V24_11).slurm_conf;
    for line in [
        "SlurmdSpoolDir=/var/spool/slurmd/%n",
        "SlurmdPidFile=/run/slurm/slurmd-%n.pid",
        "SlurmdLogFile=/var/log/slurm/slurmd-%n.log",
        "SlurmctldPidFile=/run/slurm/slurmctld.pid",
        "SlurmctldHost=head(10.0.0.10)",
        "AuthInfo=socket=/run/munge/munge.socket.2",
    ] {
        assert!(conf.contains(&format!("\n{line}\n")), "missing {line}");
    }
}

#[test]
fn a_backup_controller_is_the_second_slurmctld_host() {
    let mut c = example(SlurmVersion::V24_11);
    c.backup_controller = Some(BackupController {
        host: "slurmctld-backup".into(),
        addr: Some("10.0.0.11".into()),
    });
    let conf = render(&c).expect("valid").slurm_conf;
    assert!(
        conf.contains("\nSlurmctldHost=head(10.0.0.10)\nSlurmctldHost=slurmctld-backup(10.0.0.11)\n"),
        "{conf}"
    );
    for (host, addr, field) in [
        ("head", "10.0.0.11", "host"),
        ("bad_name", "10.0.0.11", "host"),
        ("b", "a b", "addr"),
    ] {
        c.backup_controller = Some(BackupController {
            host: host.into(),
            addr: Some(addr.into()),
        });
        let errors = render(&c).expect_err("refused");
        assert!(
            errors.iter().any(|e| e.path.last().map(String::as_str) == Some(field)),
            "{host} {addr}: {errors:?}"
        );
    }
}

#[test]
fn render_output_never_holds_the_password() {
    let secret = "s3cr3t-Pa55.word";
    let c = example(SlurmVersion::V22_05);
    let r = render(&c).expect("valid");
    for file in r.files() {
        assert!(!file.contents.contains(secret));
        assert!(
            !file.contents.lines().any(|l| l.starts_with("StoragePass=")),
            "{} has a StoragePass line",
            file.name
        );
    }
    let dbd = r.slurmdbd_conf.as_deref().expect("slurmdbd.conf");
    assert!(dbd.contains("# StoragePass is filled in by hpc-node"));
    let with_pass = slurmdbd_conf(&c, Some(secret)).expect("slurmdbd.conf");
    assert!(with_pass.contains(&format!("\nStoragePass={secret}\n")));
    assert!(!with_pass.contains("filled in by hpc-node"));
    assert_eq!(
        r.files().last().map(|f| (f.name, f.mode)),
        Some(("slurmdbd.conf", 0o600))
    );
}

#[test]
fn unwritable_passwords_are_refused() {
    let c = example(SlurmVersion::V22_05);
    for bad in ["", "has#hash", "two words", "quote\"d", "back\\slash", "line\nbreak"] {
        let err = try_slurmdbd_conf(&c, Some(bad)).expect_err(bad);
        assert_eq!(err.path, ["accounting", "storage", "password"]);
        assert_eq!(slurmdbd_conf(&c, Some(bad)), None);
    }
}

#[test]
fn external_storage_lines() {
    let mut c = example(SlurmVersion::V24_11);
    c.accounting = Accounting::Slurmdbd {
        host: "head".into(),
        port: 6819,
        storage: Storage::External {
            host: "db.example.internal".into(),
            port: 3306,
            user: "slurm_acct".into(),
            database: "acct".into(),
        },
    };
    let dbd = slurmdbd_conf(&c, None).expect("slurmdbd.conf");
    for line in [
        "StorageHost=db.example.internal",
        "StoragePort=3306",
        "StorageUser=slurm_acct",
        "StorageLoc=acct",
        "DbdPort=6819",
    ] {
        assert!(dbd.contains(&format!("\n{line}\n")), "missing {line} in\n{dbd}");
    }
}

#[test]
fn version_parsing() {
    assert_eq!("22.05".parse::<SlurmVersion>(), Ok(SlurmVersion::V22_05));
    assert_eq!("22.05.8".parse::<SlurmVersion>(), Ok(SlurmVersion::V22_05));
    assert_eq!(" 24.11.5 ".parse::<SlurmVersion>(), Ok(SlurmVersion::V24_11));
    for bad in ["", "22", "23.02", "22.05.", "22.05.x", "24.11-1", "v24.11"] {
        let err = bad.parse::<SlurmVersion>().expect_err(bad);
        assert_eq!(err.path, ["cluster", "version"]);
    }
    assert_eq!(SlurmVersion::V24_11.to_string(), "24.11");
}

#[test]
fn nodes_are_located_by_name() {
    let c = example(SlurmVersion::V22_05);
    let loc = c.locate_node("gpu-p1-p548xl-2").expect("found");
    assert_eq!(
        (
            loc.partition.name.as_str(),
            loc.node_set.name.as_str(),
            loc.index,
            loc.is_static
        ),
        ("gpu", "gpu-p1-p548xl", 2, true)
    );
    assert!(!c.locate_node("gpu-p1-p548xl-3").expect("found").is_static);
    for missing in [
        "gpu-p1-p548xl-17",
        "gpu-p1-p548xl-0",
        "gpu-p1-p548xl-01",
        "gpu-p1-p548xl",
        "nope-1",
        "gpu-p1-p548xl-x",
    ] {
        assert!(c.locate_node(missing).is_none(), "{missing}");
    }
}

#[test]
fn render_refuses_an_invalid_cluster() {
    let mut c = example(SlurmVersion::V22_05);
    c.partitions[0].settings.max_time = Some("soon".into());
    let errors = render(&c).expect_err("invalid");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, ["partition", "cpu", "max_time"]);
    assert!(errors[0]
        .to_string()
        .starts_with("partition.cpu.max_time: invalid max_time: "));
}

// ---------------------------------------------------------------- validation rules

/// The errors of the example cluster after `change`.
fn errors_after(version: SlurmVersion, change: impl FnOnce(&mut Cluster)) -> Vec<ModelError> {
    let mut c = example(version);
    change(&mut c);
    validate(&c)
}

#[track_caller]
fn accepted(change: impl FnOnce(&mut Cluster)) {
    accepted_for(SlurmVersion::V22_05, change)
}

#[track_caller]
fn accepted_for(version: SlurmVersion, change: impl FnOnce(&mut Cluster)) {
    let errors = errors_after(version, change);
    assert!(errors.is_empty(), "expected no errors, got {errors:#?}");
}

#[track_caller]
fn rejected(path: &[&str], summary: &str, change: impl FnOnce(&mut Cluster)) {
    rejected_for(SlurmVersion::V22_05, path, summary, change)
}

#[track_caller]
fn rejected_for(version: SlurmVersion, path: &[&str], summary: &str, change: impl FnOnce(&mut Cluster)) {
    let errors = errors_after(version, change);
    assert!(
        errors
            .iter()
            .any(|e| e.path == path && e.summary.contains(summary) && !e.detail.is_empty()),
        "expected an error at {path:?} containing {summary:?}, got {errors:#?}"
    );
}

#[test]
fn example_clusters_are_valid() {
    for version in SlurmVersion::ALL {
        accepted_for(version, |_| {});
    }
}

#[test]
fn cluster_name_rules() {
    rejected(&["cluster", "name"], "empty", |c| c.name.clear());
    rejected(&["cluster", "name"], "too long", |c| c.name = "a".repeat(41));
    rejected(&["cluster", "name"], "invalid cluster name", |c| c.name = "Demo".into());
    rejected(&["cluster", "name"], "invalid cluster name", |c| {
        c.name = "1demo".into()
    });
    rejected(&["cluster", "name"], "invalid cluster name", |c| {
        c.name = "de mo".into()
    });
    accepted(|c| c.name = "a".repeat(40));
    accepted(|c| c.name = "hpc-prod_2".into());
}

#[test]
fn controller_and_user_rules() {
    rejected(&["cluster", "controller_host"], "invalid controller host", |c| {
        c.controller_host = "head_node".into()
    });
    rejected(&["cluster", "controller_addr"], "invalid controller address", |c| {
        c.controller_addr = Some("10.0.0.1 x".into())
    });
    accepted(|c| c.controller_addr = Some("fd00::10".into()));
    accepted(|c| c.controller_addr = None);
    rejected(&["cluster", "slurm_user"], "invalid Slurm user", |c| {
        c.slurm_user = "Slurm".into()
    });
    accepted(|c| c.slurm_user = "root".into());
}

#[test]
fn path_rules() {
    rejected(&["cluster", "state_dir"], "invalid path", |c| {
        c.state_dir = "var/spool".into()
    });
    rejected(&["cluster", "log_dir"], "invalid path", |c| {
        c.log_dir = "/var/log/my logs".into()
    });
    rejected(&["cluster", "spool_dir"], "invalid path", |c| {
        c.spool_dir = "/var/spool/%n".into()
    });
    rejected(&["cluster", "run_dir"], "invalid path", |c| {
        c.run_dir = "/run/#x".into()
    });
    rejected(&["cluster", "munge_socket"], "invalid path", |c| {
        c.munge_socket = Some("munge.sock".into())
    });
    rejected(&["cluster", "health_check_program"], "invalid path", |c| {
        c.health_check_program = Some("nhc".into())
    });
    accepted(|c| c.munge_socket = None);
}

#[test]
fn port_rules() {
    rejected(&["cluster", "ports"], "port 0", |c| c.ports = Some((0, 6818)));
    rejected(&["cluster", "ports"], "the same", |c| c.ports = Some((7000, 7000)));
    rejected(&["accounting", "port"], "clashes", |c| c.ports = Some((6819, 6818)));
    rejected(&["accounting", "port"], "clashes", |c| {
        c.ports = None;
        c.accounting = Accounting::Slurmdbd {
            host: "head".into(),
            port: 6817,
            storage: Storage::Local,
        };
    });
    accepted(|c| c.ports = None);
}

#[test]
fn accounting_rules() {
    let external = |host: &str, port: u16, user: &str, database: &str| Accounting::Slurmdbd {
        host: "head".into(),
        port: 6819,
        storage: Storage::External {
            host: host.into(),
            port,
            user: user.into(),
            database: database.into(),
        },
    };
    rejected(&["accounting", "host"], "invalid slurmdbd host", |c| {
        c.accounting = Accounting::Slurmdbd {
            host: "".into(),
            port: 6819,
            storage: Storage::Local,
        }
    });
    rejected(&["accounting", "port"], "invalid slurmdbd port", |c| {
        c.accounting = Accounting::Slurmdbd {
            host: "dbd".into(),
            port: 0,
            storage: Storage::Local,
        }
    });
    rejected(&["accounting", "storage", "host"], "invalid database host", |c| {
        c.accounting = external("db host", 3306, "u", "d")
    });
    rejected(&["accounting", "storage", "port"], "invalid database port", |c| {
        c.accounting = external("db", 0, "u", "d")
    });
    rejected(&["accounting", "storage", "user"], "invalid database user", |c| {
        c.accounting = external("db", 3306, "u#1", "d")
    });
    rejected(&["accounting", "storage", "database"], "invalid database name", |c| {
        c.accounting = external("db", 3306, "u", "acct-db")
    });
    accepted(|c| c.accounting = external("db.internal", 3306, "slurm", "slurm_acct_db"));
    accepted(|c| c.accounting = Accounting::None);
}

#[test]
fn power_save_rules() {
    rejected(&["power_save", "resume_program"], "invalid path", |c| {
        c.power_save.resume_program = "resume".into()
    });
    rejected(&["power_save", "suspend_program"], "invalid path", |c| {
        c.power_save.suspend_program = "/bin/x y".into()
    });
    rejected(&["power_save", "resume_fail_program"], "invalid path", |c| {
        c.power_save.resume_fail_program = String::new()
    });
    rejected(&["power_save", "resume_timeout_s"], "out of range", |c| {
        c.power_save.resume_timeout_s = 0
    });
    rejected(&["power_save", "suspend_timeout_s"], "out of range", |c| {
        c.power_save.suspend_timeout_s = 70_000
    });
    rejected(&["power_save", "suspend_time_s"], "positive", |c| {
        c.power_save.suspend_time_s = 0
    });
    rejected(&["power_save", "resume_rate"], "out of range", |c| {
        c.power_save.resume_rate = 65_536
    });
    rejected(&["power_save", "suspend_rate"], "out of range", |c| {
        c.power_save.suspend_rate = 65_536
    });
    accepted(|c| {
        c.power_save.resume_timeout_s = 65_535;
        c.power_save.resume_rate = 65_535;
    });
}

#[test]
fn cluster_extra_rules() {
    let set = |k: &'static str, v: &'static str| {
        move |c: &mut Cluster| {
            c.extra.insert(k.into(), v.into());
        }
    };
    rejected(
        &["cluster", "extra", "NoSuchKey"],
        "unknown slurm.conf parameter",
        set("NoSuchKey", "1"),
    );
    rejected(
        &["cluster", "extra", "MaxTime"],
        "unknown slurm.conf parameter",
        set("MaxTime", "60"),
    );
    rejected(
        &["cluster", "extra", "ResumeProgram"],
        "set by the model",
        set("ResumeProgram", "/bin/true"),
    );
    rejected(
        &["cluster", "extra", "selecttype"],
        "SelectType is set by the model",
        set("selecttype", "select/linear"),
    );
    rejected(
        &["cluster", "extra", "SuspendExcStates"],
        "not a Slurm 22.05 parameter",
        set("SuspendExcStates", "DOWN"),
    );
    accepted_for(SlurmVersion::V24_11, set("SuspendExcStates", "DOWN"));
    rejected_for(
        SlurmVersion::V24_11,
        &["cluster", "extra", "SlurmctldPlugstack"],
        "not a Slurm 24.11 parameter",
        set("SlurmctldPlugstack", "x"),
    );
    accepted(set("SlurmctldPlugstack", "x"));
    rejected_for(
        SlurmVersion::V24_11,
        &["cluster", "extra", "SlurmctldParameters"],
        "not valid for Slurm 24.11",
        set("SlurmctldParameters", "enable_configless,cloud_reg_addrs"),
    );
    rejected_for(
        SlurmVersion::V24_11,
        &["cluster", "extra", "PrivateData"],
        "not valid for Slurm 24.11",
        set("PrivateData", "cloud"),
    );
    accepted(set("PrivateData", "cloud,jobs"));
    rejected(
        &["cluster", "extra", "MailProg"],
        "invalid value",
        set("MailProg", "/bin/mail # x"),
    );
    rejected(&["cluster", "extra", "MailProg"], "invalid value", set("MailProg", ""));
    rejected(
        &["cluster", "extra", "mpidefault"],
        "given twice",
        set("mpidefault", "none"),
    );
    accepted(set("ProctrackType", "proctrack/linuxproc"));
}

#[test]
fn partition_set_rules() {
    rejected(&["cluster", "partitions"], "no partitions", |c| c.partitions.clear());
    rejected(&["partition", "CPU", "name"], "duplicate partition name", |c| {
        let mut p = c.partitions[2].clone();
        p.name = "CPU".into();
        p.node_sets[0].name = "other".into();
        c.partitions.push(p);
    });
    rejected(&["partition", "gpu", "default"], "two default partitions", |c| {
        c.partitions[1].settings.default = true
    });
    accepted(|c| c.partitions[0].settings.default = false);
    rejected(
        &["partition", "gpu", "node_set", "cpu-p2-m5l", "name"],
        "duplicate node set name",
        |c| {
            let ns = c.partitions[0].node_sets[1].clone();
            c.partitions[1].node_sets.push(ns);
        },
    );
}

#[test]
fn partition_name_rules() {
    rejected(&["partition", "#0", "name"], "empty", |c| c.partitions[0].name.clear());
    rejected(&["partition", "default", "name"], "reserved", |c| {
        c.partitions[0].name = "default".into()
    });
    rejected(&["partition", "a,b", "name"], "invalid partition name", |c| {
        c.partitions[0].name = "a,b".into()
    });
    rejected(&["partition", "-x", "name"], "invalid partition name", |c| {
        c.partitions[0].name = "-x".into()
    });
    accepted(|c| c.partitions[0].name = "Batch_2.long-x".into());
}

#[test]
fn empty_partitions_are_rejected() {
    rejected(&["partition", "gpu", "node_sets"], "no node sets", |c| {
        c.partitions[1].node_sets.clear()
    });
}

#[test]
fn time_rules() {
    rejected(&["partition", "cpu", "max_time"], "invalid max_time", |c| {
        c.partitions[0].settings.max_time = Some("1:2:3:4".into())
    });
    rejected(&["partition", "cpu", "default_time"], "invalid default_time", |c| {
        c.partitions[0].settings.default_time = Some("1h".into())
    });
    rejected(&["partition", "cpu", "default_time"], "exceeds max_time", |c| {
        c.partitions[0].settings.default_time = Some("1-00:01".into())
    });
    accepted(|c| c.partitions[0].settings.default_time = Some("1-00:00:00".into()));
    rejected(&["partition", "gpu", "default_time"], "exceeds max_time", |c| {
        c.partitions[1].settings.max_time = Some("60".into());
        c.partitions[1].settings.default_time = Some("INFINITE".into());
    });
    for ok in [
        "90",
        "90:30",
        "12:00:00",
        "2-12",
        "2-12:30",
        "2-12:30:15",
        "UNLIMITED",
        "infinite",
    ] {
        accepted(|c| {
            c.partitions[0].settings.max_time = Some(ok.into());
            c.partitions[0].settings.default_time = Some("30".into());
        });
    }
}

#[test]
fn node_count_limit_rules() {
    rejected(
        &["partition", "cpu", "max_nodes_per_job"],
        "max_nodes_per_job is 0",
        |c| c.partitions[0].settings.max_nodes_per_job = Some(0),
    );
    rejected(
        &["partition", "cpu", "min_nodes_per_job"],
        "exceeds max_nodes_per_job",
        |c| c.partitions[0].settings.min_nodes_per_job = Some(33),
    );
    rejected(
        &["partition", "gpu", "min_nodes_per_job"],
        "exceeds the partition's size",
        |c| c.partitions[1].settings.min_nodes_per_job = Some(17),
    );
    accepted(|c| c.partitions[1].settings.min_nodes_per_job = Some(16));
    accepted(|c| c.partitions[0].settings.min_nodes_per_job = Some(0));
}

#[test]
fn oversubscribe_rules() {
    rejected(&["partition", "hpc", "oversubscribe"], "invalid oversubscribe", |c| {
        c.partitions[2].settings.oversubscribe = Some("MAYBE".into())
    });
    rejected(&["partition", "hpc", "oversubscribe"], "invalid oversubscribe", |c| {
        c.partitions[2].settings.oversubscribe = Some("YES:1".into())
    });
    rejected(
        &["partition", "gpu", "oversubscribe"],
        "conflicts with exclusive",
        |c| c.partitions[1].settings.oversubscribe = Some("NO".into()),
    );
    for ok in ["NO", "YES", "YES:4", "FORCE", "force:1", "EXCLUSIVE"] {
        accepted(|c| c.partitions[2].settings.oversubscribe = Some(ok.into()));
    }
}

#[test]
fn access_list_and_tier_rules() {
    rejected(&["partition", "gpu", "allow_accounts"], "invalid entry", |c| {
        c.partitions[1].settings.allow_accounts.push("a,b".into())
    });
    rejected(&["partition", "hpc", "allow_groups"], "invalid entry", |c| {
        c.partitions[2].settings.allow_groups.push("my group".into())
    });
    rejected(&["partition", "hpc", "allow_qos"], "invalid entry", |c| {
        c.partitions[2].settings.allow_qos.push(String::new())
    });
    rejected(&["partition", "gpu", "priority_tier"], "out of range", |c| {
        c.partitions[1].settings.priority_tier = Some(65_534)
    });
    accepted(|c| c.partitions[1].settings.priority_tier = Some(65_533));
}

#[test]
fn partition_extra_rules() {
    let set = |i: usize, k: &'static str, v: &'static str| {
        move |c: &mut Cluster| {
            c.partitions[i].settings.extra.insert(k.into(), v.into());
        }
    };
    rejected(
        &["partition", "cpu", "extra", "Bogus"],
        "unknown partition parameter",
        set(0, "Bogus", "1"),
    );
    rejected(
        &["partition", "cpu", "extra", "MaxTime"],
        "set by the model",
        set(0, "MaxTime", "60"),
    );
    rejected(
        &["partition", "cpu", "extra", "Shared"],
        "set by the model",
        set(0, "Shared", "YES"),
    );
    rejected(
        &["partition", "cpu", "extra", "State"],
        "set by the model",
        set(0, "State", "DOWN"),
    );
    rejected(
        &["partition", "cpu", "extra", "PowerDownOnIdle"],
        "not a Slurm 22.05 partition parameter",
        set(0, "PowerDownOnIdle", "YES"),
    );
    accepted_for(SlurmVersion::V24_11, set(0, "PowerDownOnIdle", "YES"));
    rejected(
        &["partition", "gpu", "extra", "DenyAccounts"],
        "conflicts with allow_accounts",
        set(1, "DenyAccounts", "x"),
    );
    rejected(
        &["partition", "hpc", "extra", "DenyQos"],
        "conflicts with allow_qos",
        set(2, "DenyQos", "x"),
    );
    rejected(&["partition", "cpu", "extra"], "conflicting default memory", |c| {
        c.partitions[0]
            .settings
            .extra
            .insert("DefMemPerCPU".into(), "1000".into());
        c.partitions[0]
            .settings
            .extra
            .insert("DefMemPerNode".into(), "1000".into());
    });
    rejected(
        &["partition", "cpu", "extra", "QOS"],
        "invalid value",
        set(0, "QOS", "a\nb"),
    );
    rejected(
        &["partition", "hpc", "extra", "exclusiveuser"],
        "given twice",
        set(2, "exclusiveuser", "NO"),
    );
    accepted(set(0, "TRESBillingWeights", "CPU=1.0,Mem=0.25G"));
}

#[test]
fn node_set_rules() {
    fn ns(c: &mut Cluster) -> &mut NodeSet {
        &mut c.partitions[1].node_sets[0]
    }
    let base = ["partition", "gpu", "node_set", "gpu-p1-p548xl"];
    let at = |field: &'static str| [base[0], base[1], base[2], base[3], field];
    rejected(
        &["partition", "gpu", "node_set", "Gpu", "name"],
        "invalid node set name",
        |c| ns(c).name = "Gpu".into(),
    );
    rejected(
        &["partition", "gpu", "node_set", "gpu-", "name"],
        "invalid node set name",
        |c| ns(c).name = "gpu-".into(),
    );
    rejected(
        &["partition", "gpu", "node_set", "1gpu", "name"],
        "invalid node set name",
        |c| ns(c).name = "1gpu".into(),
    );
    rejected(
        &["partition", "gpu", "node_set", "g_pu", "name"],
        "invalid node set name",
        |c| ns(c).name = "g_pu".into(),
    );
    // 16 nodes: the longest name is <name>-16, so 60 characters of prefix make 63.
    let long = "g".repeat(61);
    rejected(
        &["partition", "gpu", "node_set", long.as_str(), "name"],
        "too long",
        |c| ns(c).name = "g".repeat(61),
    );
    accepted(|c| ns(c).name = "g".repeat(60));
    rejected(&at("max_nodes"), "max_nodes is 0", |c| {
        ns(c).max_nodes = 0;
        ns(c).static_nodes = 0;
    });
    rejected(&at("static_nodes"), "exceeds max_nodes", |c| ns(c).static_nodes = 17);
    accepted(|c| ns(c).static_nodes = 16);
    rejected(&at("features"), "invalid node feature", |c| {
        ns(c).features.push("a|b".into())
    });
    rejected(&at("features"), "invalid node feature", |c| {
        ns(c).features.push(String::new())
    });
    rejected(
        &["partition", "cpu", "node_set", "cpu-p2-m5l", "features"],
        "without EFA",
        |c| c.partitions[0].node_sets[1].features.push("efa".into()),
    );
    accepted(|c| ns(c).features.push("efa".into()));
    rejected(&at("weight"), "out of range", |c| ns(c).weight = Some(u32::MAX));
    accepted(|c| {
        ns(c).max_nodes = 4096;
        ns(c).weight = Some(0);
    });
}

#[test]
fn instance_shape_rules() {
    fn shape(c: &mut Cluster) -> &mut InstanceShape {
        &mut c.partitions[1].node_sets[0].shape
    }
    let at = |field: &'static str| ["partition", "gpu", "node_set", "gpu-p1-p548xl", "shape", field];
    rejected(&at("instance_type"), "invalid instance type", |c| {
        shape(c).instance_type = "p5 48xlarge".into()
    });
    rejected(&at("sockets"), "sockets is 0", |c| shape(c).sockets = 0);
    rejected(&at("vcpus"), "vcpus is 0", |c| shape(c).vcpus = 0);
    rejected(&at("vcpus"), "does not add up", |c| shape(c).vcpus = 191);
    rejected(&at("memory_mib"), "too small", |c| shape(c).memory_mib = 512);
    accepted(|c| shape(c).memory_mib = 1024);
    rejected(&at("gpu_model"), "GPUs without a model", |c| shape(c).gpu_model = None);
    rejected(&at("gpu_model"), "gpu_model without GPUs", |c| shape(c).gpus = 0);
    rejected(&at("gpu_model"), "invalid GPU model", |c| {
        shape(c).gpu_model = Some("??".into())
    });
    rejected(&at("gpus"), "too many GPUs", |c| shape(c).gpus = 1025);
    accepted(|c| {
        shape(c).gpus = 0;
        shape(c).gpu_model = None;
    });
}

#[test]
fn every_error_names_a_path_and_an_action() {
    let mut c = example(SlurmVersion::V22_05);
    c.name = "Bad Name".into();
    c.partitions[0].settings.max_time = Some("x".into());
    c.partitions[1].node_sets[0].shape.gpu_model = None;
    c.extra.insert("Bogus".into(), "1".into());
    let errors = validate(&c);
    assert_eq!(errors.len(), 4, "{errors:#?}");
    for e in errors {
        assert!(
            !e.path.is_empty() && !e.summary.is_empty() && e.detail.len() > 20,
            "{e:?}"
        );
    }
}
