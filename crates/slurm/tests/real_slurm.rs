//! Proof by real Slurm: configurations rendered by the model are started with the
//! Debian 12 slurmctld (22.05) on loopback, and `scontrol`/`sinfo` must show exactly
//! the partitions, nodes, features, GRES, memory and limits the model rendered.
//!
//! Needs root and the Debian packages `slurmctld slurmd slurm-client munge`, plus
//! `slurmdbd mariadb-server` for the accounting test; a missing program fails the test
//! with the `apt-get install` line to run. Each test runs its own munged (private socket
//! and key), slurmctld (free ports, own state directory) and, for accounting, MariaDB
//! and slurmdbd, so the tests run in parallel; guards stop every daemon a test started,
//! also when it fails. Set `KEEP_SLURM_TEST_DIRS=1` to keep the temporary directories
//! (they are also kept, and named on stderr, when a test fails).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hpc_test_daemons::{free_port, program, Daemon, MariaDb, Munge};

use slurm_model::{
    partition_lines, render, render_unvalidated, validate, Accounting, Cluster, InstanceShape, NodeSet, Partition,
    PartitionSettings, PowerSave, Rendered, SlurmVersion, Storage, TimeLimit,
};

const PACKAGES: &str = "slurmctld slurmd slurm-client munge";
const DB_PACKAGES: &str = "slurmdbd mariadb-server";

// ------------------------------------------------------------------ tools and processes

/// Absolute paths of the programs the tests run.
struct Tools {
    slurmctld: PathBuf,
    sinfo: PathBuf,
    scontrol: PathBuf,
    sbatch: PathBuf,
}

fn tools() -> Tools {
    let find = |name: &str| program(name, PACKAGES);
    let tools = Tools {
        slurmctld: find("slurmctld"),
        sinfo: find("sinfo"),
        scontrol: find("scontrol"),
        sbatch: find("sbatch"),
    };
    // The daemons run as root: SlurmUser=root, munged and MariaDB started by root.
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    assert_eq!(
        uid.as_deref().unwrap_or("?"),
        "0",
        "the real-Slurm tests must run as root (they start slurmctld and munged)"
    );
    tools
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A temporary directory with a running munged; slurmctld is started per config.
struct Env {
    tools: Tools,
    dir: PathBuf,
    ports: (u16, u16),
    // Field order matters: slurmctld stops first, munged last.
    slurmctld: Option<Daemon>,
    slurmdbd: Option<Daemon>,
    mariadb: Option<MariaDb>,
    _munge: Munge,
    conf: PathBuf,
}

impl Env {
    fn new(case: &str) -> Env {
        let tools = tools();
        let dir = std::env::temp_dir().join(format!(
            "slurm-model-{case}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&dir);
        for sub in ["", "state", "spool", "log", "run", "etc"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
            fs::set_permissions(&d, fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("chmod {}: {e}", d.display()));
        }
        let munge = Munge::start(&dir);
        let mut env = Env {
            tools,
            ports: (free_port(), free_port()),
            slurmctld: None,
            slurmdbd: None,
            mariadb: None,
            _munge: munge,
            conf: dir.join("etc/slurm.conf"),
            dir,
        };
        if env.ports.0 == env.ports.1 {
            env.ports.1 = free_port();
        }
        env
    }

    fn path(&self, rel: &str) -> String {
        self.dir.join(rel).display().to_string()
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.dir.join(rel)).unwrap_or_default()
    }

    /// A power-saving program that appends its arguments to `log/<name>.calls`.
    fn script(&self, name: &str) -> String {
        let path = self.dir.join(name);
        let body = format!(
            "#!/bin/sh\necho \"$@\" >> {}\n",
            self.path(&format!("log/{name}.calls"))
        );
        fs::write(&path, body).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("chmod script: {e}"));
        path.display().to_string()
    }

    /// The base cluster of a test: loopback controller, test paths and ports, no
    /// cgroups (proctrack/linuxproc, task/none through extra), no accounting.
    fn cluster(&self, version: SlurmVersion, partitions: Vec<Partition>) -> Cluster {
        let extra = [
            ("ProctrackType", "proctrack/linuxproc"),
            ("TaskPlugin", "task/none"),
            ("MailProg", "/bin/true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Cluster {
            name: "t".into(),
            version,
            controller_host: "localhost".into(),
            controller_addr: Some("127.0.0.1".into()),
            backup_controller: None,
            slurm_user: "root".into(),
            state_dir: self.path("state"),
            spool_dir: self.path("spool"),
            log_dir: self.path("log"),
            run_dir: self.path("run"),
            munge_socket: Some(self.path("munge.sock")),
            accounting: Accounting::None,
            power_save: PowerSave {
                resume_program: self.script("resume"),
                suspend_program: self.script("suspend"),
                resume_fail_program: self.script("resume-fail"),
                resume_timeout_s: 600,
                suspend_time_s: 300,
                suspend_timeout_s: 120,
                resume_rate: 0,
                suspend_rate: 0,
            },
            health_check_program: None,
            extra,
            partitions,
            ports: Some(self.ports),
        }
    }

    fn write_config(&self, rendered: &Rendered) {
        for file in rendered.files() {
            let path = self.dir.join("etc").join(file.name);
            fs::write(&path, file.contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            fs::set_permissions(&path, fs::Permissions::from_mode(file.mode))
                .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
        }
    }

    /// Stops slurmctld and empties its state directory.
    fn reset_state(&mut self) {
        self.slurmctld = None;
        let state = self.dir.join("state");
        let _ = fs::remove_dir_all(&state);
        fs::create_dir_all(&state).unwrap_or_else(|e| panic!("creating {}: {e}", state.display()));
    }

    fn spawn_slurmctld(&mut self) -> &mut Daemon {
        self.slurmctld = None;
        let daemon = Daemon::spawn(
            "slurmctld",
            Command::new(&self.tools.slurmctld)
                .args(["-D", "-i", "-f"])
                .arg(&self.conf)
                .env("SLURM_CONF", &self.conf),
            &self.dir.join("log/slurmctld.out"),
        );
        self.slurmctld.insert(daemon)
    }

    /// Writes the files, starts slurmctld and waits until `scontrol ping` sees it up.
    fn start(&mut self, rendered: &Rendered) {
        self.write_config(rendered);
        self.spawn_slurmctld();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = Command::new(&self.tools.scontrol)
                .arg("ping")
                .env("SLURM_CONF", &self.conf)
                .output();
            if matches!(&out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("is UP")) {
                return;
            }
            if let Some(Some(status)) = self.slurmctld.as_mut().map(Daemon::exited) {
                panic!(
                    "slurmctld exited ({status}) with the rendered config:\n{}\n--- output ---\n{}",
                    rendered.slurm_conf,
                    self.read("log/slurmctld.out")
                );
            }
            assert!(
                Instant::now() < deadline,
                "slurmctld did not answer ping within 20 s:\n{}",
                self.read("log/slurmctld.out")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs a Slurm client against this cluster; panics with its stderr on failure.
    fn client(&self, program: &Path, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{} {args:?} failed ({}): {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn scontrol(&self, args: &[&str]) -> String {
        self.client(&self.tools.scontrol, args)
    }

    fn sinfo(&self, args: &[&str]) -> String {
        self.client(&self.tools.sinfo, args)
    }

    /// `scontrol show -o partition <name>` as a map.
    fn partition(&self, name: &str) -> BTreeMap<String, String> {
        let out = self.scontrol(&["show", "-o", "partition", name]);
        record(out.lines().next().unwrap_or_default())
    }

    /// `scontrol show -o node` for every node, keyed by node name.
    fn nodes(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.scontrol(&["show", "-o", "node"])
            .lines()
            .filter(|l| l.starts_with("NodeName="))
            .map(record)
            .map(|r| (r.get("NodeName").cloned().unwrap_or_default(), r))
            .collect()
    }

    /// `scontrol show config` as a map.
    fn config(&self) -> BTreeMap<String, String> {
        self.scontrol(&["show", "config"])
            .lines()
            .filter_map(|l| l.split_once(" = "))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect()
    }
}

impl Env {
    /// Starts a private MariaDB (own data directory and socket, no TCP) and returns its
    /// socket. root connects through the socket without a password (unix_socket).
    /// A private MariaDB (socket only); returns its socket.
    fn start_mariadb(&mut self) -> PathBuf {
        let db = MariaDb::start(&self.dir.join("mariadb"), None);
        let socket = db.socket.clone();
        self.mariadb = Some(db);
        socket
    }

    /// Runs SQL as the database's root user; returns the unformatted output.
    fn sql(&self, statement: &str) -> String {
        self.mariadb
            .as_ref()
            .map(|db| db.sql(statement))
            .unwrap_or_else(|| panic!("no MariaDB started for {statement}"))
    }

    /// Starts slurmdbd with the slurmdbd.conf beside slurm.conf; the MySQL client library
    /// finds the private MariaDB through MYSQL_UNIX_PORT.
    fn start_slurmdbd(&mut self, db: &DbTools, socket: &Path, port: u16) {
        self.slurmdbd = None;
        self.slurmdbd = Some(Daemon::spawn(
            "slurmdbd",
            Command::new(&db.slurmdbd)
                .arg("-D")
                .env("SLURM_CONF", &self.conf)
                .env("MYSQL_UNIX_PORT", socket),
            &self.dir.join("log/slurmdbd.out"),
        ));
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(Some(status)) = self.slurmdbd.as_mut().map(Daemon::exited) {
                panic!("slurmdbd exited ({status}):\n{}", self.read("log/slurmdbd.out"));
            }
            assert!(
                Instant::now() < deadline,
                "slurmdbd did not listen within 20 s:\n{}",
                self.read("log/slurmdbd.out")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until slurmctld has registered the cluster with slurmdbd; returns
    /// `sacctmgr show cluster` output.
    fn wait_cluster_registered(&self, db: &DbTools, cluster: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = self.client(
                &db.sacctmgr,
                &["-n", "-P", "show", "cluster", "format=cluster,controlport"],
            );
            if out
                .lines()
                .any(|l| l.starts_with(&format!("{cluster}|")) && !l.ends_with("|0"))
            {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "cluster {cluster} not registered in slurmdbd within 20 s: {out:?}\n{}",
                self.read("log/slurmctld.out")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Programs the accounting test needs beyond [`Tools`].
struct DbTools {
    slurmdbd: PathBuf,
    sacctmgr: PathBuf,
}

fn db_tools() -> DbTools {
    DbTools {
        slurmdbd: program("slurmdbd", DB_PACKAGES),
        sacctmgr: program("sacctmgr", DB_PACKAGES),
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.slurmctld = None;
        self.slurmdbd = None;
        self.mariadb = None;
        if std::env::var_os("KEEP_SLURM_TEST_DIRS").is_none() && !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("kept {}", self.dir.display());
        }
    }
}

/// Parses one `scontrol -o` record (`Key=Value Key=Value ...`; values may contain spaces).
fn record(line: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut last: Option<String> = None;
    for token in line.split(' ').filter(|t| !t.is_empty()) {
        match token.split_once('=') {
            Some((k, v)) if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                map.insert(k.to_string(), v.to_string());
                last = Some(k.to_string());
            }
            _ => {
                if let Some(value) = last.as_ref().and_then(|k| map.get_mut(k)) {
                    value.push(' ');
                    value.push_str(token);
                }
            }
        }
    }
    map
}

#[track_caller]
fn expect(map: &BTreeMap<String, String>, key: &str, want: &str) {
    assert_eq!(map.get(key).map(String::as_str), Some(want), "{key} in {map:#?}");
}

// ------------------------------------------------------------------ model fixtures

fn shape(instance_type: &str, (sockets, cores, threads): (u32, u32, u32), memory_mib: u64) -> InstanceShape {
    InstanceShape {
        instance_type: instance_type.into(),
        vcpus: sockets * cores * threads,
        sockets,
        cores_per_socket: cores,
        threads_per_core: threads,
        memory_mib,
        gpus: 0,
        gpu_model: None,
        gpu_memory_mib: None,
        efa: false,
    }
}

fn p5_48xlarge() -> InstanceShape {
    InstanceShape {
        gpus: 8,
        gpu_model: Some("H100".into()),
        gpu_memory_mib: Some(81_920),
        efa: true,
        ..shape("p5.48xlarge", (2, 48, 2), 2_097_152)
    }
}

fn node_set(name: &str, shape: InstanceShape, max_nodes: u32, features: &[&str]) -> NodeSet {
    NodeSet {
        name: name.into(),
        shape,
        max_nodes,
        static_nodes: 0,
        features: features.iter().map(|f| f.to_string()).collect(),
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

fn rendered(cluster: &Cluster) -> Rendered {
    render(cluster).unwrap_or_else(|errors| panic!("the test cluster is invalid: {errors:#?}"))
}

/// Every node of every node set is known to slurmctld with exactly the rendered
/// hardware, features and GRES, as a powered-down cloud node of its partition.
fn check_nodes(env: &Env, cluster: &Cluster) {
    let nodes = env.nodes();
    let expected: u32 = cluster
        .partitions
        .iter()
        .flat_map(|p| &p.node_sets)
        .map(|ns| ns.max_nodes)
        .sum();
    assert_eq!(nodes.len(), expected as usize, "slurmctld knows {} nodes", nodes.len());
    for (p, ns) in cluster.node_sets() {
        for n in 1..=ns.max_nodes {
            let name = format!("{}-{n}", ns.name);
            let node = nodes.get(&name).unwrap_or_else(|| panic!("node {name} missing"));
            expect(node, "CPUTot", &ns.shape.vcpus.to_string());
            expect(node, "Sockets", &ns.shape.sockets.to_string());
            expect(node, "CoresPerSocket", &ns.shape.cores_per_socket.to_string());
            expect(node, "ThreadsPerCore", &ns.shape.threads_per_core.to_string());
            expect(node, "RealMemory", &ns.real_memory_mib().to_string());
            expect(node, "AvailableFeatures", &ns.node_features().join(","));
            expect(node, "Gres", ns.gres().as_deref().unwrap_or("(null)"));
            expect(node, "Weight", &ns.weight.unwrap_or(1).to_string());
            expect(node, "Partitions", &p.name);
            let state = node.get("State").cloned().unwrap_or_default();
            assert!(
                state.contains("CLOUD") && state.contains("POWERED_DOWN"),
                "{name} state {state}"
            );
        }
    }
}

/// Each partition has exactly its rendered nodes and limits.
fn check_partition(env: &Env, cluster: &Cluster, p: &Partition) {
    let got = env.partition(&p.name);
    let total: u32 = p.node_sets.iter().map(|ns| ns.max_nodes).sum();
    expect(&got, "TotalNodes", &total.to_string());
    expect(&got, "State", "UP");
    expect(&got, "Default", if p.settings.default { "YES" } else { "NO" });
    let limit = |t: &Option<String>| match t {
        Some(t) => TimeLimit::parse(t)
            .map(|l| l.to_string())
            .unwrap_or_else(|e| panic!("{t}: {e}")),
        None => "UNLIMITED".to_string(),
    };
    expect(&got, "MaxTime", &limit(&p.settings.max_time));
    if p.settings.default_time.is_some() {
        expect(&got, "DefaultTime", &limit(&p.settings.default_time));
    }
    expect(
        &got,
        "MaxNodes",
        &p.settings
            .max_nodes_per_job
            .map_or("UNLIMITED".into(), |n| n.to_string()),
    );
    expect(&got, "MinNodes", &p.settings.min_nodes_per_job.unwrap_or(0).to_string());
    let list = |l: &Vec<String>| {
        if l.is_empty() {
            "ALL".to_string()
        } else {
            l.join(",")
        }
    };
    if !p.settings.extra.contains_key("DenyAccounts") {
        expect(&got, "AllowAccounts", &list(&p.settings.allow_accounts));
    }
    expect(&got, "AllowGroups", &list(&p.settings.allow_groups));
    expect(&got, "AllowQos", &list(&p.settings.allow_qos));
    expect(&got, "PriorityTier", &p.settings.priority_tier.unwrap_or(1).to_string());
    let oversubscribe = match (
        p.settings.exclusive,
        p.settings.oversubscribe.as_deref().map(str::to_ascii_uppercase),
    ) {
        (true, _) => "EXCLUSIVE".to_string(),
        (false, None) => "NO".to_string(),
        (false, Some(o)) if o == "YES" || o == "FORCE" => format!("{o}:4"),
        (false, Some(o)) => o,
    };
    expect(&got, "OverSubscribe", &oversubscribe);
    if let Some(mem) = slurm_model::default_mem_per_cpu_mib(p) {
        expect(&got, "DefMemPerCPU", &mem.to_string());
    }
    // The partition's lines as the provider shows them are the ones slurmctld runs with.
    let lines = partition_lines(cluster, &p.name).unwrap_or_else(|| panic!("no lines for {}", p.name));
    assert!(fs::read_to_string(&env.conf).unwrap_or_default().contains(&lines));
}

fn check_cloud_config(env: &Env, cluster: &Cluster) {
    let config = env.config();
    let ps = &cluster.power_save;
    expect(&config, "ResumeProgram", &ps.resume_program);
    expect(&config, "SuspendProgram", &ps.suspend_program);
    expect(&config, "ResumeFailProgram", &ps.resume_fail_program);
    expect(&config, "ResumeTimeout", &format!("{} sec", ps.resume_timeout_s));
    expect(&config, "SuspendTime", &format!("{} sec", ps.suspend_time_s));
    expect(&config, "SuspendTimeout", &format!("{} sec", ps.suspend_timeout_s));
    expect(&config, "ResumeRate", &format!("{} nodes/min", ps.resume_rate));
    expect(&config, "SuspendRate", &format!("{} nodes/min", ps.suspend_rate));
    expect(
        &config,
        "SlurmctldParameters",
        "cloud_reg_addrs,idle_on_node_suspend,enable_configless",
    );
    expect(&config, "PrivateData", "cloud");
    expect(&config, "TreeWidth", "65533");
    expect(&config, "ReturnToService", "2");
    expect(&config, "SelectType", "select/cons_tres");
    expect(&config, "ProctrackType", "proctrack/linuxproc");
    expect(&config, "TaskPlugin", "task/none");
    expect(&config, "ClusterName", &cluster.name);
}

// ------------------------------------------------------------------ the matrix

#[test]
fn cpu_only_partition_with_limits() {
    let mut env = Env::new("cpu");
    let mut p = partition(
        "batch",
        vec![node_set(
            "cpu-p1-c6i4xl",
            shape("c6i.4xlarge", (1, 8, 2), 32_768),
            20,
            &["az-use1-az1"],
        )],
    );
    p.settings.default = true;
    p.settings.max_time = Some("2-12:30".into());
    p.settings.default_time = Some("45".into());
    p.settings.max_nodes_per_job = Some(8);
    p.settings.min_nodes_per_job = Some(2);
    p.settings.allow_accounts = vec!["physics".into(), "chem".into()];
    p.settings.allow_groups = vec!["hpcusers".into()];
    p.settings.allow_qos = vec!["normal".into(), "long".into()];
    p.settings.priority_tier = Some(7);
    p.settings.oversubscribe = Some("force:2".into());
    let cluster = env.cluster(SlurmVersion::V22_05, vec![p]);
    env.start(&rendered(&cluster));

    check_nodes(&env, &cluster);
    check_partition(&env, &cluster, &cluster.partitions[0]);
    check_cloud_config(&env, &cluster);
    let got = env.partition("batch");
    expect(&got, "MaxTime", "2-12:30:00");
    expect(&got, "DefaultTime", "00:45:00");
    expect(&got, "OverSubscribe", "FORCE:2");
    expect(&got, "Nodes", "cpu-p1-c6i4xl-[1-20]");
    // sinfo agrees: 20 nodes, 16 CPUs and 32768 - (512 + 1639) MiB each.
    expect_lines(
        &env.sinfo(&["-h", "-o", "%R|%D|%c|%m|%f|%z"]),
        &["batch|20|16|30617|c6i.4xlarge,az-use1-az1|1:8:2"],
    );
}

#[test]
fn gpu_partition_like_p5_48xlarge() {
    let mut env = Env::new("gpu");
    let mut ns = node_set("gpu-p1-p548xl", p5_48xlarge(), 8, &["az-use1-az2", "capacity-block"]);
    ns.static_nodes = 2;
    let mut p = partition("gpu", vec![ns]);
    p.settings.exclusive = true;
    p.settings.max_time = Some("UNLIMITED".into());
    let cluster = env.cluster(SlurmVersion::V22_05, vec![p]);
    let r = rendered(&cluster);
    assert!(r
        .gres_conf
        .contains("NodeName=gpu-p1-p548xl-[1-8] Name=gpu Type=h100 File=/dev/nvidia[0-7]"));
    env.start(&r);

    check_nodes(&env, &cluster);
    check_partition(&env, &cluster, &cluster.partitions[0]);
    let node = env.nodes().remove("gpu-p1-p548xl-5").unwrap_or_default();
    expect(&node, "Gres", "gpu:h100:8");
    expect(&node, "RealMemory", "1991782");
    expect(&node, "CPUTot", "192");
    expect(
        &node,
        "AvailableFeatures",
        "p5.48xlarge,efa,h100,az-use1-az2,capacity-block",
    );
    let config = env.config();
    expect(&config, "GresTypes", "gpu");
    expect(&config, "SuspendExcNodes", "gpu-p1-p548xl-[1-2]");
    expect(&env.partition("gpu"), "OverSubscribe", "EXCLUSIVE");
    expect_lines(&env.sinfo(&["-h", "-o", "%R|%D|%G"]), &["gpu|8|gpu:h100:8"]);
    // Users can ask for the GPU type and the derived features; other GPU types do not exist.
    let sbatch = |args: &[&str]| {
        let out = Command::new(&env.tools.sbatch)
            .args(["--test-only", "--partition=gpu", "--wrap=true"])
            .args(args)
            .env("SLURM_CONF", &env.conf)
            .output()
            .unwrap_or_else(|e| panic!("running sbatch: {e}"));
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, msg) = sbatch(&["--gres=gpu:h100:8", "--constraint=h100&efa&capacity-block", "--nodes=2"]);
    assert!(ok && msg.contains("in partition gpu"), "{msg}");
    let (ok, msg) = sbatch(&["--gres=gpu:a100:1"]);
    assert!(!ok && msg.contains("not available"), "{msg}");
    let (ok, msg) = sbatch(&["--gres=gpu:h100:9"]);
    assert!(!ok, "9 GPUs on an 8-GPU node: {msg}");
}

#[test]
fn efa_spot_and_several_instance_types_in_one_partition() {
    let mut env = Env::new("mixed");
    let mut hpc = node_set(
        "hpc-p1-hpc7a96xl",
        InstanceShape {
            efa: true,
            ..shape("hpc7a.96xlarge", (2, 96, 1), 786_432)
        },
        4,
        &["az-use1-az1"],
    );
    hpc.weight = Some(1);
    let mut spot = node_set(
        "hpc-p2-c6in32xl",
        InstanceShape {
            efa: true,
            ..shape("c6in.32xlarge", (2, 32, 2), 262_144)
        },
        6,
        &["az-use1-az2", "spot", "pool-2"],
    );
    spot.weight = Some(5);
    let mut small = node_set("hpc-p3-m5l", shape("m5.large", (1, 1, 2), 8192), 3, &["spot", "pool-3"]);
    small.weight = Some(9);
    small.static_nodes = 1;
    let p = partition("mixed", vec![hpc, spot, small]);
    let cluster = env.cluster(SlurmVersion::V22_05, vec![p]);
    env.start(&rendered(&cluster));

    check_nodes(&env, &cluster);
    check_partition(&env, &cluster, &cluster.partitions[0]);
    expect(
        &env.partition("mixed"),
        "Nodes",
        "hpc-p1-hpc7a96xl-[1-4],hpc-p2-c6in32xl-[1-6],hpc-p3-m5l-[1-3]",
    );
    // The derived DefMemPerCPU fits the smallest memory per CPU (m5.large: 7270 / 2).
    expect(&env.partition("mixed"), "DefMemPerCPU", "1941");
    let mut lines: Vec<String> = env
        .sinfo(&["-h", "-o", "%D|%f|%w"])
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "3|m5.large,spot,pool-3|9",
            "4|hpc7a.96xlarge,efa,az-use1-az1|1",
            "6|c6in.32xlarge,efa,az-use1-az2,spot,pool-2|5",
        ]
    );
    expect(&env.config(), "SuspendExcNodes", "hpc-p3-m5l-1");
}

#[test]
fn several_partitions_extras_and_thousands_of_nodes() {
    let mut env = Env::new("many");
    let mut big = partition(
        "big",
        vec![node_set(
            "big-p1-c7i48xl",
            shape("c7i.48xlarge", (2, 48, 2), 393_216),
            2048,
            &["spot"],
        )],
    );
    big.settings.default = true;
    big.settings.extra = [
        ("ExclusiveUser", "YES"),
        ("GraceTime", "120"),
        ("DenyAccounts", "guest"),
        ("maxcpuspernode", "96"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut debug = partition(
        "debug",
        vec![node_set("dbg-p1-t3m", shape("t3.medium", (1, 1, 2), 4096), 2, &[])],
    );
    debug.settings.max_time = Some("30:00".into());
    debug.settings.oversubscribe = Some("YES".into());
    debug.settings.priority_tier = Some(100);
    let mut cluster = env.cluster(SlurmVersion::V22_05, vec![big, debug]);
    cluster
        .extra
        .insert("SchedulerParameters".into(), "bf_continue,bf_interval=60".into());
    cluster
        .extra
        .insert("SlurmctldParameters".into(), "power_save_interval=5".into());
    let started = Instant::now();
    env.start(&rendered(&cluster));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "2050 cloud nodes took {:?} to start",
        started.elapsed()
    );

    check_nodes(&env, &cluster);
    for p in &cluster.partitions {
        check_partition(&env, &cluster, p);
    }
    let big = env.partition("big");
    expect(&big, "ExclusiveUser", "YES");
    expect(&big, "GraceTime", "120");
    expect(&big, "DenyAccounts", "guest");
    expect(&big, "MaxCPUsPerNode", "96");
    expect(&big, "Nodes", "big-p1-c7i48xl-[1-2048]");
    expect(&env.partition("debug"), "OverSubscribe", "YES:4");
    let config = env.config();
    expect(&config, "SchedulerParameters", "bf_continue,bf_interval=60");
    expect(
        &config,
        "SlurmctldParameters",
        "cloud_reg_addrs,idle_on_node_suspend,enable_configless,power_save_interval=5",
    );
    assert!(!config.contains_key("SuspendExcNodes") || config["SuspendExcNodes"] == "(null)");
}

/// Static nodes are CLOUD nodes kept out of power saving: hpc-node brings them up by
/// asking Slurm to power them up, which runs ResumeProgram with their host list.
#[test]
fn static_nodes_power_up_through_resume_program() {
    let mut env = Env::new("static");
    let mut ns = node_set("st-p1-c6i2xl", shape("c6i.2xlarge", (1, 4, 2), 16_384), 5, &[]);
    ns.static_nodes = 3;
    let mut cluster = env.cluster(SlurmVersion::V22_05, vec![partition("q", vec![ns])]);
    cluster
        .extra
        .insert("SlurmctldParameters".into(), "power_save_interval=1".into());
    env.start(&rendered(&cluster));
    expect(&env.config(), "SuspendExcNodes", "st-p1-c6i2xl-[1-3]");

    env.scontrol(&["update", "nodename=st-p1-c6i2xl-[1-3]", "state=power_up"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let calls = loop {
        let calls = env.read("log/resume.calls");
        if !calls.is_empty() {
            break calls;
        }
        assert!(
            Instant::now() < deadline,
            "ResumeProgram was not called within 20 s:\n{}",
            env.read("log/slurmctld.log")
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(calls.trim(), "st-p1-c6i2xl-[1-3]");
    let nodes = env.nodes();
    let state = |n: &str| nodes.get(n).and_then(|r| r.get("State")).cloned().unwrap_or_default();
    assert!(
        state("st-p1-c6i2xl-1").contains("POWERING_UP"),
        "{}",
        state("st-p1-c6i2xl-1")
    );
    assert!(
        state("st-p1-c6i2xl-4").contains("POWERED_DOWN"),
        "{}",
        state("st-p1-c6i2xl-4")
    );
}

/// How slurmctld 22.05 reacts to a config our validation rejects.
enum Slurm {
    /// slurmctld exits non-zero, logging this.
    Exits(&'static str),
    /// slurmctld keeps running but logs this error: validation is stricter than Slurm,
    /// because Slurm would silently run something other than what the model says.
    Logs(&'static str),
}

/// What validation rejects, slurmctld rejects too (render_unvalidated writes it anyway),
/// or, where validation is stricter, slurmctld logs that it changed the config.
#[test]
fn configs_rejected_by_validation_are_rejected_by_slurmctld() {
    let mut env = Env::new("reject");
    let base = |env: &Env| {
        let p = partition(
            "a",
            vec![node_set("a-p1-m5l", shape("m5.large", (1, 1, 2), 8192), 4, &[])],
        );
        env.cluster(SlurmVersion::V22_05, vec![p])
    };
    type Change = Box<dyn Fn(&mut Cluster)>;
    let cases: Vec<(&str, &str, Slurm, Change)> = vec![
        (
            "same node set in two partitions",
            "duplicate node set name",
            Slurm::Exits("Duplicated NodeName a-p1-m5l-1"),
            Box::new(|c: &mut Cluster| {
                let mut b = c.partitions[0].clone();
                b.name = "b".into();
                c.partitions.push(b);
            }),
        ),
        (
            "bad MaxTime",
            "invalid max_time",
            Slurm::Exits("Bad value \"1:2:3:4\" for MaxTime"),
            Box::new(|c: &mut Cluster| c.partitions[0].settings.max_time = Some("1:2:3:4".into())),
        ),
        (
            "bad OverSubscribe",
            "invalid oversubscribe",
            Slurm::Exits("Bad value \"MAYBE\" for OverSubscribe"),
            Box::new(|c: &mut Cluster| c.partitions[0].settings.oversubscribe = Some("MAYBE".into())),
        ),
        (
            "unknown slurm.conf key",
            "unknown slurm.conf parameter",
            Slurm::Exits("unrecognized key: NoSuchParameter"),
            Box::new(|c: &mut Cluster| {
                c.extra.insert("NoSuchParameter".into(), "1".into());
            }),
        ),
        (
            "unknown partition key",
            "unknown partition parameter",
            Slurm::Exits("unrecognized key: Bogus"),
            Box::new(|c: &mut Cluster| {
                c.partitions[0].settings.extra.insert("Bogus".into(), "1".into());
            }),
        ),
        (
            "partition without nodes",
            "no node sets",
            Slurm::Exits("no nodes configured"),
            Box::new(|c: &mut Cluster| c.partitions[0].node_sets.clear()),
        ),
        (
            "CPU topology that does not add up",
            "does not add up",
            Slurm::Logs("match no Sockets"),
            Box::new(|c: &mut Cluster| {
                c.partitions[0].node_sets[0].shape.vcpus = 3;
            }),
        ),
        (
            "two default partitions",
            "two default partitions",
            Slurm::Logs("changing default partition from a to b"),
            Box::new(|c: &mut Cluster| {
                c.partitions[0].settings.default = true;
                let mut b = c.partitions[0].clone();
                b.name = "b".into();
                b.node_sets[0].name = "b-p1-m5l".into();
                c.partitions.push(b);
            }),
        ),
        (
            "DefaultTime above MaxTime",
            "default_time exceeds max_time",
            Slurm::Logs("partition a DefaultTime exceeds MaxTime (120 > 60)"),
            Box::new(|c: &mut Cluster| {
                c.partitions[0].settings.max_time = Some("60".into());
                c.partitions[0].settings.default_time = Some("120".into());
            }),
        ),
    ];
    for (i, (what, summary, slurm, change)) in cases.into_iter().enumerate() {
        env.reset_state();
        let mut cluster = base(&env);
        change(&mut cluster);
        let errors = validate(&cluster);
        assert!(
            errors.iter().any(|e| e.summary.contains(summary)),
            "{what}: validation did not reject it: {errors:#?}"
        );
        env.write_config(&render_unvalidated(&cluster));
        let status = env.spawn_slurmctld().wait_exit(Duration::from_secs(match slurm {
            Slurm::Exits(_) => 15,
            Slurm::Logs(_) => 3,
        }));
        let output = env.read("log/slurmctld.out");
        let _ = fs::write(env.dir.join(format!("log/reject-{i}.out")), &output);
        match (slurm, status) {
            (Slurm::Exits(message), Some(status)) => {
                assert!(!status.success(), "{what}: slurmctld exited successfully:\n{output}");
                assert!(
                    output.contains("fatal") && output.contains(message),
                    "{what}: no {message:?}:\n{output}"
                );
            }
            (Slurm::Exits(_), None) => {
                panic!("{what}: slurmctld accepted the config and kept running:\n{output}")
            }
            (Slurm::Logs(message), None) => {
                assert!(
                    output.contains(message),
                    "{what}: slurmctld ran without logging {message:?}:\n{output}"
                )
            }
            (Slurm::Logs(_), Some(status)) => {
                panic!("{what}: expected slurmctld to keep running, it exited ({status}):\n{output}")
            }
        }
    }
}

/// A 24.11 render cannot run here, but the 22.05 parser must read it (24.11 output only
/// uses keys both versions know) and it lacks exactly the 22.05 cloud workarounds:
/// without PrivateData=cloud, 22.05 hides powered-down cloud nodes from sinfo.
#[test]
fn config_for_24_11_parses_and_shows_why_22_05_needs_its_own() {
    let mut env = Env::new("v2411");
    let mut p = partition("gpu", vec![node_set("gpu-p1-p548xl", p5_48xlarge(), 4, &["spot"])]);
    p.settings.default = true;
    let cluster = env.cluster(SlurmVersion::V24_11, vec![p]);
    let r = rendered(&cluster);
    for gone in ["cloud_reg_addrs", "PrivateData", "NoAddrCache", "TreeWidth"] {
        assert!(!r.slurm_conf.contains(gone), "24.11 config contains {gone}");
    }
    env.start(&r);
    let config = env.config();
    expect(&config, "SlurmctldParameters", "idle_on_node_suspend,enable_configless");
    expect(&env.partition("gpu"), "TotalNodes", "4");
    assert_eq!(
        env.sinfo(&["-h", "-N", "-o", "%N"]).trim(),
        "",
        "22.05 hides cloud nodes without PrivateData=cloud"
    );
    assert_eq!(
        env.scontrol(&["show", "-o", "node"])
            .lines()
            .filter(|l| l.starts_with("NodeName="))
            .count(),
        0
    );

    // The same cluster rendered for 22.05 shows them.
    let mut env = Env::new("v2205");
    let mut cluster = cluster;
    let v22 = env.cluster(SlurmVersion::V22_05, Vec::new());
    cluster.version = SlurmVersion::V22_05;
    cluster.ports = v22.ports;
    cluster.state_dir = v22.state_dir;
    cluster.log_dir = v22.log_dir;
    cluster.run_dir = v22.run_dir;
    cluster.spool_dir = v22.spool_dir;
    cluster.munge_socket = v22.munge_socket;
    cluster.power_save = v22.power_save;
    env.start(&rendered(&cluster));
    assert_eq!(env.sinfo(&["-h", "-N", "-o", "%N"]).lines().count(), 4);
}

/// Accounting through slurmdbd and MariaDB: the local database (unix socket, no
/// password) and an external one with the password hpc-node writes into slurmdbd.conf.
#[test]
fn accounting_with_slurmdbd_and_mariadb() {
    let db = db_tools();
    let mut env = Env::new("acct");
    let socket = env.start_mariadb();
    let dbd_port = free_port();
    let p = partition(
        "q",
        vec![node_set("q-p1-m5l", shape("m5.large", (1, 1, 2), 8192), 2, &[])],
    );
    let mut cluster = env.cluster(SlurmVersion::V22_05, vec![p]);
    cluster.accounting = Accounting::Slurmdbd {
        host: "localhost".into(),
        port: dbd_port,
        storage: Storage::Local,
    };
    let r = rendered(&cluster);
    let dbd = r.slurmdbd_conf.clone().unwrap_or_default();
    assert!(
        dbd.contains("\nStorageHost=localhost\n") && !dbd.contains("\nStoragePass="),
        "{dbd}"
    );
    env.write_config(&r);
    env.start_slurmdbd(&db, &socket, dbd_port);
    env.start(&r);
    let registered = env.wait_cluster_registered(&db, "t");
    assert!(registered.contains(&format!("t|{}", env.ports.0)), "{registered}");
    let config = env.config();
    expect(&config, "AccountingStorageType", "accounting_storage/slurmdbd");
    expect(&config, "AccountingStorageHost", "localhost");
    expect(&config, "AccountingStoragePort", &dbd_port.to_string());
    expect(&config, "JobAcctGatherType", "jobacct_gather/cgroup");
    assert_eq!(
        env.sql("SHOW TABLES FROM slurm_acct_db LIKE 't_job_table'").trim(),
        "t_job_table"
    );

    // External storage with a password: only slurmdbd_conf(.., Some(password)) holds it.
    let password = "Xk4-p9_q.Z7+w";
    env.sql(&format!(
        "CREATE USER 'acct'@'localhost' IDENTIFIED BY '{password}'; GRANT ALL ON acct_db.* TO 'acct'@'localhost';"
    ));
    cluster.accounting = Accounting::Slurmdbd {
        host: "localhost".into(),
        port: dbd_port,
        storage: Storage::External {
            host: "localhost".into(),
            port: 3306,
            user: "acct".into(),
            database: "acct_db".into(),
        },
    };
    let r = rendered(&cluster);
    assert!(r.files().iter().all(|f| !f.contents.contains(password)));
    env.slurmctld = None;
    env.write_config(&r);
    let with_password = slurm_model::slurmdbd_conf(&cluster, Some(password)).unwrap_or_default();
    let path = env.dir.join("etc/slurmdbd.conf");
    fs::write(&path, &with_password).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    env.start_slurmdbd(&db, &socket, dbd_port);
    env.reset_state();
    env.start(&r);
    env.wait_cluster_registered(&db, "t");
    assert_eq!(
        env.sql("SHOW TABLES FROM acct_db LIKE 't_job_table'").trim(),
        "t_job_table",
        "slurmdbd logged in as acct with the password and created the cluster's tables"
    );
}

#[track_caller]
fn expect_lines(output: &str, want: &[&str]) {
    let got: Vec<&str> = output.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect();
    assert_eq!(got, want, "output:\n{output}");
}
