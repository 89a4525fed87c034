//! Clusters come alive on the local EC2 (boot mode) with the real provider and terraform: the
//! head node boots from the image hpc-image baked and published and `hpc-node head-init` brings
//! up slurmctld; a user SSHes to the login node and submits a job; slurmctld's ResumeProgram
//! (`hpc-node resume`, as SlurmUser with the node role from IMDS) finds no capacity in the first
//! pool and launches in the second; the compute node's `hpc-node node-init` joins it configless;
//! the job completes, its output is in the user's EFS /home as the login node sees it; after the
//! idle time the node is powered down and its instance ends; `terraform destroy` leaves no machine.
//! Needs root, systemd-container, dnsmasq-base, iptables, openssh-client and the bake's tools
//! (`.ci/run` installs them).

use std::time::{Duration, Instant};

use acceptance_tests::boot::{self, key_pair, public_key, ssh_as, text, SshKey};
use acceptance_tests::{Emulator, MariaDb, Workspace};
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

const USER: &str = "ada";

/// The node role gets exactly the policy the cluster's state says it needs (the local EC2
/// enforces it), as the module's aws_iam_role_policy would.
fn grant_node_policy(emu: &Emulator, ws: &Workspace) {
    grant_node_policy_to(emu, ws, "alive-node");
}

fn grant_node_policy_to(emu: &Emulator, ws: &Workspace, role: &str) {
    let policy = ws.resource("hpc_cluster.main")["instance_profile_policy"]
        .as_str()
        .expect("instance_profile_policy")
        .to_string();
    emu.query(
        "iam",
        "2010-05-08",
        &format!(
            "Action=PutRolePolicy&RoleName={role}&PolicyName=hpcforge&PolicyDocument={}",
            encode(&policy)
        ),
    );
}

/// The two applies a booted cluster takes while its nodes' role is made outside the cluster:
/// the cluster without waiting, its `instance_profile_policy` put on `role`, then everything,
/// waiting for the head. Returns the head's address once the cluster's user reaches it by SSH.
fn apply_in_two_steps(
    ws: &Workspace,
    emu: &Emulator,
    role: &str,
    key: &SshKey,
    config: impl Fn(bool) -> String,
) -> String {
    ws.write(&config(false));
    ws.ok(&["apply", "-auto-approve", "-target=hpc_cluster.main"]);
    grant_node_policy_to(emu, ws, role);
    ws.write(&config(true));
    ws.apply();
    let ip = ws.resource("hpc_cluster.main")["head_node_private_ip"]
        .as_str()
        .expect("head ip")
        .to_string();
    wait_ssh_as(key, &ip);
    ip
}

/// A booted test's turn ([`boot::booted_turn`]: two at a time by default). When the whole suite
/// runs, the first test to ask also starts baking the images only the upgrade test boots, so that
/// their bakes overlap the turns before it instead of lengthening its own. (A run of chosen tests
/// does not: a bake outliving the run would go on alone.)
fn turn() -> boot::Turn {
    static BAKES: std::sync::Once = std::sync::Once::new();
    if every_test_runs() {
        BAKES.call_once(|| boot::bake_in_background(&["trixie", "forky"]));
    }
    boot::booted_turn()
}

/// No test name filter on the command line (libtest's options that take a value skipped).
fn every_test_runs() -> bool {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--skip" | "--test-threads" | "--logfile" | "--format" | "--color" | "--shuffle-seed" | "-Z" => {
                args.next();
            }
            _ if !arg.starts_with('-') => return false,
            _ => {}
        }
    }
    true
}

/// A second user and a second partition, added to the running cluster.
fn live_changes(ami: &str, profile: &str) -> String {
    format!(
        r#"
resource "hpc_partition" "small" {{
  cluster_id     = hpc_cluster.main.id
  name           = "small"
  instance_types = ["c7i.large"]
  ami_id         = "{ami}"
  instance_profile_arn = "{profile}"
  max_nodes      = 1
  # Always on: started by the head's sweep without a job, never powered down.
  min_nodes      = 1
  provision_timeout = "90s"
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1b"]]
  }}
}}
resource "hpc_partition" "spot" {{
  cluster_id     = hpc_cluster.main.id
  name           = "spot"
  instance_types = ["c7i.large"]
  ami_id         = "{ami}"
  instance_profile_arn = "{profile}"
  max_nodes      = 2
  provision_timeout = "90s"
  ice_cooldown   = "5m"
  capacity_pool {{
    subnet_ids    = [hpc_network.net.private_subnet_ids["us-east-1b"]]
    capacity_type = "spot"
  }}
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1b"]]
  }}
}}
"#
    )
}

/// Users enough for several 8 KiB shards of the published users.
fn many_users() -> String {
    (0..MANY_USERS)
        .map(|i| {
            format!(
                "  user {{\n    name = \"u{i:04}\"\n    uid = {}\n    ssh_public_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{:0>43} u{i}\", \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{:0>43} u{i}-2\"]\n  }}\n",
                3000 + i,
                2 * i,
                2 * i + 1
            )
        })
        .collect()
}

const MANY_USERS: u32 = 100;

fn config(ami: &str, profile: &str, key: &str, wait: bool) -> String {
    let many = many_users();
    // node_role() names the role as its instance profile.
    let role = profile.replace(":instance-profile/", ":role/");
    format!(
        r#"
resource "hpc_network" "net" {{
  name        = "alive"
  nat_gateway = false
}}
resource "hpc_lustre_fs" "scratch" {{
  storage_capacity = 1200
  deployment_type  = "SCRATCH_2"
  subnet_ids       = [hpc_network.net.private_subnet_ids["us-east-1a"]]
}}
resource "hpc_cluster" "main" {{
  name           = "alive"
  subnet_id      = hpc_network.net.private_subnet_ids["us-east-1a"]
  wait_for_ready = {wait}
  head_node {{
    ami_id               = "{ami}"
    instance_type        = "c7i.large"
    key_name             = "alive"
    allowed_ssh_cidrs    = ["10.0.0.0/16"]
    instance_profile_arn = "{profile}"
    node_role_arns       = ["{role}"]
  }}
  login_nodes {{
    count         = 1
    instance_type = "c7i.large"
  }}
  slurm {{
    version            = "22.05"
    scaledown_idletime = "60s"
    resume_timeout     = "5m"
    # The health check every 15 s (Slurm's default is 5 minutes).
    extra = {{
      HealthCheckInterval = "15"
    }}
  }}
  storage {{
    lustre_id   = hpc_lustre_fs.scratch.id
    dns_name    = hpc_lustre_fs.scratch.dns_name
    mount_name  = hpc_lustre_fs.scratch.mount_name
    mount_point = "/scratch"
  }}
  accounting {{
    mode = "local"
  }}
  user {{
    name            = "{USER}"
    uid             = 2001
    ssh_public_keys = ["{key}"]
    accounts        = ["physics"]
  }}
{many}
}}
resource "hpc_partition" "cpu" {{
  cluster_id        = hpc_cluster.main.id
  name              = "cpu"
  instance_types    = ["c7i.large"]
  ami_id               = "{ami}"
  instance_profile_arn = "{profile}"
  max_nodes            = 2
  default           = true
  allow_accounts    = ["physics"]
  provision_timeout = "90s"
  ice_cooldown      = "30s"
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1a"]]
  }}
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1b"]]
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

/// The pending or running instance carrying Slurm `node`, per the head's node map.
fn carrying(emu: &Emulator, key: &SshKey, head_ip: &str, node: &str) -> Vec<String> {
    let read = boot::ssh(key, head_ip, "sudo cat /var/lib/hpc-node/nodes.json");
    let map: Value = serde_json::from_slice(&read.stdout).unwrap_or(Value::Null);
    map[node]["instance_id"]
        .as_str()
        .filter(|id| {
            let described = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={id}"));
            described.contains("<name>running</name>") || described.contains("<name>pending</name>")
        })
        .map(str::to_string)
        .into_iter()
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

/// `terraform destroy`, then no machine of the emulator is left running.
fn destroy_leaving_no_machine(ws: &Workspace, emu: &Emulator) {
    ws.destroy();
    let live: Vec<Value> = emu
        .machines()
        .into_iter()
        .filter(|m| m["State"] != "terminated")
        .collect();
    assert!(live.is_empty(), "machines left after destroy: {live:?}");
}

/// Waits for `what` to hold, showing `context()` when it never does.
fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}\n{}", context());
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_cluster_applied_by_terraform_boots_and_runs_a_users_job_on_a_node_from_the_second_pool() {
    boot::require_prerequisites();
    let _turn = turn();
    // Head, login, the first job's node, a static node and its replacement, two that never
    // arrive beside their replacements, and a spot node and its successor.
    let emu = boot::booting_emulator(11);
    let ami = boot::publish_test_image(&emu);
    let key = key_pair(&emu, "alive");
    let profile = node_role(&emu, "alive-node");
    let ws = Workspace::booting("boot", &emu);
    let user_key = public_key(&key);
    // The node role gets exactly the policy the cluster says it needs (the local EC2 enforces
    // it), known once the cluster exists: a first apply without waiting for the head node.
    ws.write(&config(&ami, &profile, &user_key, false));
    ws.ok(&["apply", "-auto-approve", "-target=hpc_cluster.main"]);
    grant_node_policy(&emu, &ws);
    // The first pool's zone has no capacity.
    emu.add_fault(serde_json::json!({
        "service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
        "match": {"AvailabilityZone": "us-east-1a"},
    }));
    // Now the apply waits until the head node reports slurmctld running (an update, in place).
    ws.write(&config(&ami, &profile, &user_key, true));
    let applied = ws.apply();
    assert!(applied.text().contains("0 destroyed"), "{}", applied.text());
    let cluster = ws.resource("hpc_cluster.main");
    let head = cluster["head_node_instance_id"].as_str().expect("head id").to_string();
    let login_ip = cluster["login_node_private_ips"][0]
        .as_str()
        .expect("login ip")
        .to_string();

    let report = || {
        emu.parameter_json(&hpc_desired_state::boot::head_param("alive"))
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        report()["phase"],
        "ready",
        "the apply returned before the head was ready"
    );
    assert_eq!(report()["instance_id"], head.as_str());
    // And until the login node reports it serves.
    let login = cluster["login_node_ids"][0].as_str().expect("login id");
    let login_report = emu
        .parameter_json(&hpc_desired_state::boot::login_param("alive", login))
        .unwrap_or(Value::Null);
    assert_eq!(
        login_report["phase"], "ready",
        "the login node's report: {login_report}"
    );
    wait_ssh_as(&key, &login_ip);
    // The image's default user keeps the key pair's key under the shared /home.
    let head_ip = cluster["head_node_private_ip"].as_str().expect("head ip").to_string();
    boot::wait_ssh(&key, &head_ip, Duration::from_secs(30));
    // The partition's apply waited for the head's agent to apply it; slurmctld took it.
    let sinfo = || text(&ssh_as(&key, USER, &login_ip, "sinfo -h -o '%P %D %t'"));
    eventually(
        "sinfo on the login node shows the partition",
        Duration::from_secs(60),
        || sinfo().starts_with("cpu* 2 idle~"),
        sinfo,
    );

    // The users came from several shards of the published users.
    let last = format!("u{:04}", MANY_USERS - 1);
    let shards = emu
        .parameter_json(&hpc_desired_state::cluster_param("alive"))
        .unwrap_or(Value::Null)["user_shards"]
        .clone();
    assert!(shards.as_u64() > Some(1), "user shards: {shards}");
    let getent = ssh_as(&key, USER, &login_ip, &format!("getent passwd {last} | cut -d: -f3"));
    assert_eq!(
        text(&getent).trim(),
        (3000 + MANY_USERS - 1).to_string(),
        "{}",
        text(&getent)
    );

    // Lustre is mounted at boot on every node: what the head writes there, the job reads.
    let wrote = boot::ssh(&key, &head_ip, "echo shared | sudo tee /scratch/hello >/dev/null");
    assert!(
        wrote.status.success(),
        "writing to /scratch on the head: {}",
        text(&wrote)
    );
    // The user submits from the login node; the job's output lands in their EFS home.
    let job = job_completes(
        &key,
        &login_ip,
        "-N1 -o job.out --wrap 'hostname; id -un; cat /scratch/hello'",
        Duration::from_secs(300),
        || {
            let nodes = instances_tagged(&emu, "hpcforge:partition", "alive/cpu");
            let consoles: Vec<String> = nodes.iter().map(|n| console(&emu, n)).collect();
            format!("nodes: {nodes:?}\n{}", consoles.join("\n----\n"))
        },
    );
    let out = ssh_as(&key, USER, &login_ip, "cat job.out");
    assert_eq!(
        text(&out).trim(),
        format!("cpu-c7i-large-1\n{USER}\nshared"),
        "{}",
        text(&out)
    );
    // That /home is the EFS the cluster made (no home block): mounted on the login node by its
    // DNS name, with the file the compute node wrote.
    let fs = ws.resource("hpc_cluster.main")["home_file_system_id"]
        .as_str()
        .expect("home_file_system_id")
        .to_string();
    let (_, made) = emu.efs(
        "GET",
        &format!("/2015-02-01/file-systems?FileSystemId={fs}"),
        &serde_json::Value::Null,
    );
    assert_eq!(made["FileSystems"][0]["CreationToken"], "hpcforge-alive-home", "{made}");
    let fstab = text(&ssh_as(&key, USER, &login_ip, "grep ' /home ' /etc/fstab"));
    assert!(
        fstab.contains(&format!("{fs}.efs.us-east-1.amazonaws.com:/")),
        "{fstab}"
    );
    // Local accounting: slurmdbd on the head recorded the job; the login node's sacct reads it.
    let sacct = || {
        text(&ssh_as(
            &key,
            USER,
            &login_ip,
            &format!("sacct -n -X -P -j {job} -o JobID,User,Account,State,NodeList"),
        ))
    };
    // The partition admits only the account `physics`; the user's association made it theirs.
    eventually(
        "sacct on the login node shows the completed job",
        Duration::from_secs(60),
        || sacct().trim() == format!("{job}|{USER}|physics|COMPLETED|cpu-c7i-large-1"),
        sacct,
    );

    // The node came from the second pool.
    let nodes = instances_tagged(&emu, "hpcforge:partition", "alive/cpu");
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let subnet_b = ws.resource("hpc_network.net")["private_subnet_ids"]["us-east-1b"]
        .as_str()
        .expect("subnet")
        .to_string();
    let described = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={}", nodes[0]));
    assert!(
        described.contains(&subnet_b),
        "not in the second pool's subnet: {described}"
    );

    // Idle past scaledown_idletime: Slurm powers the node down and its instance ends.
    let node = nodes[0].clone();
    eventually(
        "the idle node's instance is terminated",
        Duration::from_secs(240),
        || machine_state(&emu, &node).as_deref() == Some("terminated"),
        || format!("{:?}", emu.machines()),
    );
    let sinfo = ssh_as(&key, USER, &login_ip, "scontrol show node cpu-c7i-large-1 -o");
    assert!(text(&sinfo).contains("POWER"), "{}", text(&sinfo));

    // Live changes: a second user and a second partition reach the running cluster.
    let grace = format!(
        "  user {{\n    name            = \"grace\"\n    uid             = 2002\n    ssh_public_keys = [\"{user_key}\"]\n  }}\n"
    );
    let changed = config(&ami, &profile, &user_key, true)
        .replacen("  user {", &format!("{grace}  user {{"), 1)
        .replacen("  accounting {", &format!("{MFA}  accounting {{"), 1)
        + &live_changes(&ami, &profile);
    ws.write(&changed);
    ws.apply();
    eventually(
        "the new user logs in to the login node",
        Duration::from_secs(60),
        || ssh_as(&key, "grace", &login_ip, "true").status.success(),
        || text(&ssh_as(&key, "grace", &login_ip, "true")),
    );
    let partitions = text(&ssh_as(&key, "grace", &login_ip, "sinfo -h -o %P"));
    assert!(partitions.contains("small"), "{partitions}");
    second_factor(&key, &login_ip);
    module_settings(&emu, &ws, &key, &login_ip, &changed);
    // The new partition's static node starts without a job and stays up.
    let small = || text(&ssh_as(&key, USER, &login_ip, "sinfo -h -p small -o '%t %N'"));
    eventually(
        "the static node is started without a job",
        Duration::from_secs(240),
        || small().trim() == "idle small-c7i-large-1",
        || {
            let ids = instances_tagged(&emu, "hpcforge:partition", "alive/small");
            let consoles: Vec<String> = ids.iter().map(|n| console(&emu, n)).collect();
            format!("{}\n{ids:?}\n{}", small(), consoles.join("\n----\n"))
        },
    );
    spot_interruption(&emu, &key, &head_ip, &login_ip);
    instance_ends_out_of_band(&emu, &key, &head_ip, &login_ip);

    // Its instance ends out of band: the sweep powers the node down at once, then up again.
    let static_instance = carrying(&emu, &key, &head_ip, "small-c7i-large-1");
    assert_eq!(static_instance.len(), 1, "{static_instance:?}");
    emu.ec2(&format!(
        "Action=TerminateInstances&InstanceId.1={}",
        static_instance[0]
    ));

    // Time-based failover and one step across two booted nodes: the first pool has capacity
    // again (its cool-down is over) but its machines never boot; after provision_timeout the
    // head's sweep replaces both from the second pool, within Slurm's resume_timeout.
    emu.clear_faults();
    emu.add_fault(serde_json::json!({
        "service": "ec2", "action": "CreateFleet", "boot": "never-arrives",
        "match": {"AvailabilityZone": "us-east-1a"},
    }));
    // Slurm first finishes powering the first job's node down (SuspendTimeout, 2 minutes), then
    // the launch, provision_timeout, up to the sweep's minute, and the boot.
    let srun = ssh_as(&key, USER, &login_ip, "timeout 600 srun -N2 -p cpu hostname | sort");
    assert_eq!(
        String::from_utf8_lossy(&srun.stdout).trim(),
        "cpu-c7i-large-1\ncpu-c7i-large-2",
        "srun -N2: {}",
        text(&srun)
    );
    assert!(
        emu.faults_fired().iter().sum::<u64>() >= 1,
        "the first pool was not tried"
    );
    let subnet_a = ws.resource("hpc_network.net")["private_subnet_ids"]["us-east-1a"]
        .as_str()
        .expect("subnet")
        .to_string();
    let pool_of = |id: &str| {
        let described = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={id}"));
        if described.contains(&subnet_a) {
            "a"
        } else if described.contains(&subnet_b) {
            "b"
        } else {
            "?"
        }
    };
    let running = instances_tagged(&emu, "hpcforge:partition", "alive/cpu");
    let pools: Vec<&str> = running.iter().map(|id| pool_of(id)).collect();
    assert_eq!(pools, ["b", "b"], "the step ran on {running:?}");
    let never_arrived: Vec<Value> = emu
        .machines()
        .into_iter()
        .filter(|m| m["State"] == "terminated")
        .filter(|m| m["InstanceId"].as_str().is_some_and(|id| pool_of(id) == "a"))
        .collect();
    assert_eq!(
        never_arrived.len(),
        2,
        "the first pool's machines were not ended: {never_arrived:?}"
    );

    // A node that lost its Lustre mount (sync stopped, so nothing mounts it again) is drained
    // by Slurm's HealthCheckProgram with the mount named.
    let show_node = || text(&ssh_as(&key, USER, &login_ip, "scontrol show node cpu-c7i-large-2 -o"));
    let shown = show_node();
    let node_ip: String = shown
        .split_whitespace()
        .find_map(|w| w.strip_prefix("NodeAddr="))
        .unwrap_or_else(|| panic!("no NodeAddr: {shown}"))
        .to_string();
    let lost = boot::ssh_via(
        &key,
        &head_ip,
        &node_ip,
        "sudo systemctl stop hpc-node-sync.timer && sudo umount /scratch",
    );
    assert!(lost.status.success(), "unmounting /scratch: {}", text(&lost));
    eventually(
        "the health check drains the node without /scratch",
        Duration::from_secs(60),
        || {
            let s = show_node();
            s.contains("DRAIN") && s.contains("/scratch is not mounted")
        },
        show_node,
    );

    // Meanwhile the static node came back on a new instance.
    eventually(
        "the static node is replaced",
        Duration::from_secs(300),
        || {
            let now = carrying(&emu, &key, &head_ip, "small-c7i-large-1");
            small().trim() == "idle small-c7i-large-1" && now.len() == 1 && now != static_instance
        },
        || format!("{} {:?}", small(), carrying(&emu, &key, &head_ip, "small-c7i-large-1")),
    );

    // The head node changes and fails without losing the queue, the accounting or the nodes.
    head_survives(&emu, &ws, &key, &login_ip, &job, &changed, &ami);

    destroy_leaving_no_machine(&ws, &emu);
}

/// A spot node gets EC2's interruption notice while it runs a job: the node requeues the job
/// and powers itself down (its instance ends before EC2's time), the spot pool cools down, and
/// the job runs again, to its end, on an on-demand instance from the next pool.
fn spot_interruption(emu: &Emulator, key: &SshKey, head_ip: &str, login_ip: &str) {
    let job = submitted(key, login_ip, "-p spot -N1 -o spot.out --wrap 'sleep 25; hostname'");
    let job_state = || text(&ssh_as(key, USER, login_ip, &format!("scontrol show job {job} -o")));
    let live_spot = || -> Vec<String> {
        instances_tagged(emu, "hpcforge:partition", "alive/spot")
            .into_iter()
            .filter(|id| machine_state(emu, id).as_deref() == Some("running"))
            .collect()
    };
    eventually(
        "the spot job runs",
        Duration::from_secs(240),
        || job_state().contains("JobState=RUNNING") && live_spot().len() == 1,
        || {
            format!(
                "{}
{:?}",
                job_state(),
                live_spot()
            )
        },
    );
    let first = live_spot().remove(0);
    let lifecycle = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={first}"));
    assert!(
        lifecycle.contains("<instanceLifecycle>spot</instanceLifecycle>"),
        "{lifecycle}"
    );
    emu.interrupt(&first, 110);
    eventually(
        "the interrupted node's job is requeued and completes on another instance",
        Duration::from_secs(420),
        || {
            let state = job_state();
            state.contains("JobState=COMPLETED") && state.contains("Restarts=1")
        },
        || {
            format!(
                "{}
{}",
                job_state(),
                console(emu, &first)
            )
        },
    );
    // The instance ended on the notice, before EC2's time: powered down by the node's own watch
    // (instance metadata) or by the head's events service (EC2's event), whichever saw it first.
    assert_eq!(machine_state(emu, &first).as_deref(), Some("terminated"));
    let watch = console(emu, &first);
    let events = events_log(key, head_ip);
    let by_head = events
        .lines()
        .any(|l| l.contains("spot interruption: terminate (EC2 event") && l.contains(&first));
    assert!(
        watch.contains("spot interruption: terminate at") || by_head,
        "neither the node's watch nor the head acted:\n{watch}\n----\n{events}"
    );
    // The spot pool cooled down; the job ran again on an on-demand instance of the next pool.
    let ran_on: Vec<String> = instances_tagged(emu, "hpcforge:partition", "alive/spot")
        .into_iter()
        .filter(|id| *id != first)
        .collect();
    assert_eq!(ran_on.len(), 1, "{ran_on:?}");
    let second = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={}", ran_on[0]));
    assert!(!second.contains("<instanceLifecycle>spot"), "{second}");
    let cooldowns = text(&boot::ssh(key, head_ip, "sudo cat /var/lib/hpc-node/cooldowns.json"));
    assert!(cooldowns.contains("spot/0/c7i.large"), "{cooldowns}");
    // EC2's warning reached the head node's agent either way, through the partition's queue (it
    // acts when it comes first, else finds the node already powering down).
    assert!(events.contains(&first), "{events}");
}

/// What the head node's reader of EC2's instance events said.
fn events_log(key: &SshKey, head_ip: &str) -> String {
    text(&boot::ssh(
        key,
        head_ip,
        "sudo journalctl -u hpc-node-events.service --no-pager -o cat",
    ))
}

/// A node's instance ends with no warning while it runs a job (the host under it fails, so
/// nothing on it reports the job's end): EC2's event reaches the head node's agent through the
/// partition's queue, the agent sets the node down and powers it down at once, and Slurm
/// requeues the job then, and lets it go of the lost node, not when slurmd has not answered
/// for SlurmdTimeout (300 s).
fn instance_ends_out_of_band(emu: &Emulator, key: &SshKey, head_ip: &str, login_ip: &str) {
    let job = submitted(key, login_ip, "-p spot -N1 -o ended.out --wrap 'sleep 20; hostname'");
    let job_state = || text(&ssh_as(key, USER, login_ip, &format!("scontrol show job {job} -o")));
    eventually(
        "the job runs",
        Duration::from_secs(240),
        || job_state().contains("JobState=RUNNING"),
        job_state,
    );
    let shown = job_state();
    let node = shown
        .split_whitespace()
        .find_map(|w| w.strip_prefix("NodeList="))
        .unwrap_or_else(|| panic!("no NodeList: {shown}"))
        .to_string();
    let instance = carrying(emu, key, head_ip, &node);
    assert_eq!(instance.len(), 1, "{node}: {instance:?}");
    // The host under it fails: no slurmd on it says anything more, so only EC2's event tells.
    emu.fail(&instance[0]);
    eventually(
        "the job is requeued well before SlurmdTimeout",
        Duration::from_secs(150),
        || job_state().contains("Restarts=1"),
        || format!("{}\n{}", job_state(), events_log(key, head_ip)),
    );
    let events = events_log(key, head_ip);
    assert!(
        events.contains(&format!("{node}: instance {} shutting-down", instance[0])),
        "{events}"
    );
    // The node was set down as well as powered down: Slurm stops waiting for the ended
    // instance's epilog, so the requeued job does not stay completing on it until slurmd has
    // not answered for SlurmdTimeout.
    eventually(
        "the requeued job leaves the ended node",
        Duration::from_secs(60),
        || !job_state().contains("JobState=COMPLETING"),
        || {
            let nodes = ssh_as(key, USER, login_ip, &format!("scontrol show node {node} -o"));
            format!("{}\n{}", job_state(), text(&nodes))
        },
    );
    // That a requeued job runs to its end on a new instance is the spot step's; this one's job
    // goes, so that its relaunch takes no machine from the steps after.
    let cancel = ssh_as(key, USER, login_ip, &format!("scancel {job}"));
    assert!(cancel.status.success(), "scancel: {}", text(&cancel));
    // Set down to let go of the lost instance, the node is not left down: powered down, it is
    // back among the nodes Slurm may power up for the next job.
    let node_state = || text(&ssh_as(key, USER, login_ip, &format!("scontrol show node {node} -o")));
    eventually(
        "the node is back in the power-saving pool",
        Duration::from_secs(300),
        || {
            let shown = node_state();
            let state = shown
                .split_whitespace()
                .find_map(|w| w.strip_prefix("State="))
                .unwrap_or_default()
                .to_string();
            state.split('+').any(|f| f == "POWERED_DOWN") && !state.split('+').any(|f| f == "DOWN" || f == "DRAIN")
        },
        node_state,
    );
}

/// A new head image (planned as an update in place) and then an out-of-band termination of the
/// head, and a reboot of it: each time a head starts on the same address with the same state volume, and the
/// completed job's accounting row, a held job, a job running on a compute node, the user's
/// file in /home, the munge key and the static node all survive; the plan is empty after.
fn head_survives(emu: &Emulator, ws: &Workspace, key: &SshKey, login_ip: &str, job: &str, config: &str, ami: &str) {
    let on = |ip: &str, command: &str| text(&ssh_as(key, USER, ip, command));
    let held = on(login_ip, "sbatch --parsable --hold -p cpu -o held.out --wrap hostname")
        .trim()
        .to_string();
    assert!(held.parse::<u64>().is_ok(), "sbatch --hold: {held}");
    // On the static node: running while the head is replaced.
    let running = on(
        login_ip,
        "sbatch --parsable -p small -o running.out --wrap 'sleep 45; echo finished'",
    )
    .trim()
    .to_string();
    eventually(
        "the job on the static node runs",
        Duration::from_secs(60),
        || on(login_ip, &format!("squeue -h -j {running} -o %T")).trim() == "RUNNING",
        || on(login_ip, "squeue; sinfo"),
    );
    let before = ws.resource("hpc_cluster.main");
    let head_ip = before["head_node_private_ip"].as_str().expect("head ip").to_string();
    let static_node = carrying(emu, key, &head_ip, "small-c7i-large-1");
    // Through the cluster's login node as it is now.
    let survived = |what: &str| {
        let now = ws.resource("hpc_cluster.main");
        let login = now["login_node_private_ips"][0].as_str().expect("login ip").to_string();
        let as_user = |command: &str| on(&login, command);
        let sacct = || as_user(&format!("sacct -n -X -P -j {job} -o JobID,State"));
        eventually(
            &format!("{what}: the cluster schedules again with its accounting"),
            Duration::from_secs(120),
            || sacct().trim() == format!("{job}|COMPLETED"),
            || format!("{}\n{}", sacct(), as_user("squeue; sinfo")),
        );
        let queued = as_user(&format!("squeue -h -j {held} -o '%T %r'"));
        assert_eq!(queued.trim(), "PENDING JobHeldUser", "{what}: the held job: {queued}");
        assert_eq!(as_user("head -c 16 job.out").trim(), "cpu-c7i-large-1", "{what}: /home");
        for kept in ["head_node_private_ip", "state_volume_id", "munge_key_secret_arn"] {
            assert_eq!(now[kept], before[kept], "{what}: {kept}");
        }
        assert_eq!(
            carrying(emu, key, &head_ip, "small-c7i-large-1"),
            static_node,
            "{what}: the static node stays"
        );
        ws.assert_no_changes();
        now
    };
    let id = |v: &Value, at: &str| v[at].as_str().unwrap_or_default().to_string();
    let login_id = |v: &Value| v["login_node_ids"][0].as_str().unwrap_or_default().to_string();

    // (a) A patched image of the head node: an update in place; the login node, launched from
    // the same image, rolls to it.
    let patched = boot::publish_test_image_named(emu, "-patched");
    assert_ne!(patched, ami);
    let new_image = config.replacen(
        &format!("    ami_id               = \"{ami}\""),
        &format!("    ami_id               = \"{patched}\""),
        1,
    );
    assert_ne!(new_image, config);
    ws.write(&new_image);
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main will be updated in-place"), "{plan}");
    assert!(!plan.contains("must be replaced"), "{plan}");
    assert!(
        plan.contains("login_node_ids"),
        "the plan shows the login node rolling: {plan}"
    );
    ws.apply();
    let first = id(&before, "head_node_instance_id");
    let now = survived("a new head image");
    let second = id(&now, "head_node_instance_id");
    assert_ne!(second, first, "a new head node");
    assert_eq!(machine_state(emu, &first).as_deref(), Some("terminated"));
    let (old_login, new_login) = (login_id(&before), login_id(&now));
    assert_ne!(new_login, old_login, "a new login node");
    assert_eq!(machine_state(emu, &old_login).as_deref(), Some("terminated"));
    let described = emu.ec2(&format!("Action=DescribeInstances&InstanceId.1={new_login}"));
    assert!(
        described.contains(&format!("<imageId>{patched}</imageId>")),
        "the login node runs the patched image: {described}"
    );
    // The job that ran across the replacement finished on its node and was accounted.
    let login_ip = now["login_node_private_ips"][0].as_str().expect("login ip").to_string();
    let finished = || on(&login_ip, &format!("sacct -n -X -P -j {running} -o State"));
    eventually(
        "the job running during the replacement completes",
        Duration::from_secs(120),
        || finished().trim() == "COMPLETED",
        || format!("{}\n{}", finished(), on(&login_ip, "squeue")),
    );
    assert_eq!(on(&login_ip, "cat running.out").trim(), "finished");

    // (b) A larger state volume grows in place: the head stays.
    let patched_line = format!("    ami_id               = \"{patched}\"");
    let grown = new_image.replacen(
        &patched_line,
        &format!("{patched_line}\n    state_volume_size    = 30"),
        1,
    );
    assert_ne!(grown, new_image);
    ws.write(&grown);
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main will be updated in-place"), "{plan}");
    ws.apply();
    let volume = id(&now, "state_volume_id");
    let described = emu.ec2(&format!("Action=DescribeVolumes&VolumeId.1={volume}"));
    assert!(described.contains("<size>30</size>"), "{described}");
    assert_eq!(
        id(&ws.resource("hpc_cluster.main"), "head_node_instance_id"),
        second,
        "the head stays"
    );
    ws.assert_no_changes();

    // (c) The head terminated outside Terraform: the next apply starts its successor, which
    // grows the state file system into the volume before it mounts it (this host's kernel
    // refuses ext4's online growth: see the emulator's README); the login node stays.
    emu.ec2(&format!("Action=TerminateInstances&InstanceId.1={second}"));
    eventually(
        "the head node is gone",
        Duration::from_secs(60),
        || machine_state(emu, &second).as_deref() == Some("terminated"),
        || format!("{:?}", emu.machines()),
    );
    let plan = ws.plan().text();
    assert!(plan.contains("hpc_cluster.main will be updated in-place"), "{plan}");
    ws.apply();
    let after = survived("an out-of-band termination");
    assert_ne!(id(&after, "head_node_instance_id"), second, "a successor");
    assert_eq!(after["login_node_ids"], now["login_node_ids"], "the login node stays");
    let df = boot::ssh(key, &head_ip, "df --output=size -BG /var/lib/hpcforge-state | tail -1");
    let size = String::from_utf8_lossy(&df.stdout).to_string();
    let gib = size.trim().trim_end_matches('G').parse::<u64>().unwrap_or(0);
    assert!(gib >= 29, "the state file system fills the 30 GiB volume: {size}");

    // (d) A login node that dies at boot: a roll to a larger login type fails with the
    // successor's reason and console; the successor is terminated, the old login node stays and
    // serves, and with the type put back the plan is empty. It dies 5 s into its boot: after
    // the provider saw it running (its polls at 0.5, 1.5, 3.5 s), before it could report ready
    // (a login node here reports within about 15 s).
    emu.add_fault(serde_json::json!({
        "service": "ec2", "action": "RunInstances", "boot": "dies-at-boot", "delay_s": 5, "count": 1,
        "match": {"InstanceType": "c7i.xlarge"},
    }));
    let login_type = "  login_nodes {\n    count         = 1\n    instance_type = \"c7i.large\"";
    let larger = grown.replacen(login_type, &login_type.replace("c7i.large", "c7i.xlarge"), 1);
    assert_ne!(larger, grown);
    ws.write(&larger);
    let failed = ws.tf(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = failed.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!failed.success, "{said}");
    for phrase in [
        "did not become ready; it is terminated",
        "The console's last lines",
        "The login nodes it was to replace are kept",
    ] {
        assert!(said.contains(phrase), "the apply's error lacks {phrase:?}: {said}");
    }
    // The successor's own reason: it ended before it reported, or (when its boot outran the
    // fault and a service it was starting died with it) the step it reported failing at.
    let reasons = ["before it reported", "It failed at login-init"];
    assert!(
        reasons.iter().any(|r| said.contains(r)),
        "the apply's error gives none of {reasons:?}: {said}"
    );
    let kept = ws.resource("hpc_cluster.main");
    assert_eq!(
        kept["login_node_ids"], after["login_node_ids"],
        "the old login node stays"
    );
    let live_logins = instances_tagged(emu, hpc_desired_state::tag::ROLE, "login");
    assert_eq!(live_logins, vec![login_id(&kept)], "only the old login node runs");
    let login_ip = kept["login_node_private_ips"][0]
        .as_str()
        .expect("login ip")
        .to_string();
    let queued = on(&login_ip, &format!("squeue -h -j {held} -o %T"));
    assert_eq!(queued.trim(), "PENDING", "the old login node serves: {queued}");
    ws.write(&grown);
    ws.assert_no_changes();

    // (e) The head reboots (its OS, not EC2): at boot the state volume is mounted before
    // slurmctld, MariaDB and the agent, which require it, and the same instance schedules again
    // with everything kept. (/run is new at each boot: the marker says the reboot happened.)
    let head = id(&kept, "head_node_instance_id");
    let marker = "/run/hpcforge-test-before-reboot";
    boot::ssh(
        key,
        &head_ip,
        &format!("sudo touch {marker} && (sleep 1; sudo systemctl reboot) >/dev/null 2>&1 &"),
    );
    let back = || {
        let out = boot::ssh(
            key,
            &head_ip,
            &format!(
                "test ! -e {marker} && systemctl is-active hpcforge-state.service slurmctld mariadb \
                 && findmnt -n -o SOURCE /var/spool/slurmctld"
            ),
        );
        out.status.success() && text(&out).contains("/dev/nvme")
    };
    eventually(
        "the head is back from its reboot, its daemons on the state volume",
        Duration::from_secs(300),
        back,
        || {
            text(&boot::ssh(
                key,
                &head_ip,
                "systemctl --failed --no-pager; findmnt; sudo journalctl -b -u hpcforge-state --no-pager | tail -20",
            ))
        },
    );
    let rebooted = survived("a reboot of the head");
    assert_eq!(id(&rebooted, "head_node_instance_id"), head, "the same head node");
}

/// The second factor, added to the running cluster: TOTP codes, users not enrolled yet let in
/// by their key alone (to enrol).
const MFA: &str = "  mfa {\n    pam_module = \"pam_google_authenticator.so\"\n    config     = \"nullok\"\n  }\n";

/// python3 (the host's standard library) prints what `program` computes from `arg`.
fn python(program: &str, arg: &str) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", program, arg])
        .output()
        .expect("running python3");
    assert!(out.status.success(), "python3: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The current TOTP code of a base32 `secret` (RFC 6238: HMAC-SHA1, 30 s steps, 6 digits), as
/// an authenticator app shows it.
fn totp(secret: &str) -> String {
    python(
        "import base64,hashlib,hmac,struct,sys,time\n\
         d = hmac.new(base64.b32decode(sys.argv[1]), struct.pack('>Q', int(time.time()) // 30), hashlib.sha1).digest()\n\
         o = d[-1] & 15\n\
         print('%06d' % ((struct.unpack('>I', d[o:o + 4])[0] & 0x7fffffff) % 1000000))",
        secret,
    )
}

/// Once the cluster's `mfa` is on the node users log in to (a login node, or the head of a
/// cluster without login nodes), the user enrols (a TOTP secret in ~/.google_authenticator, as
/// `google-authenticator` writes it); from then on the key alone or a wrong code is refused and
/// the key with the current code logs in. Unenrolled again, the key alone works, as it does for
/// the cluster's other users throughout.
fn second_factor(key: &SshKey, login_ip: &str) {
    let settings = || {
        text(&ssh_as(
            key,
            USER,
            login_ip,
            "cat /etc/ssh/sshd_config.d/10-hpcforge-mfa.conf /etc/pam.d/hpcforge-mfa",
        ))
    };
    eventually(
        "the node's sshd asks for the cluster's second factor",
        Duration::from_secs(90),
        || {
            let s = settings();
            s.contains("AuthenticationMethods publickey,keyboard-interactive")
                && s.contains("pam_google_authenticator.so nullok")
        },
        settings,
    );
    let secret = python("import base64,os; print(base64.b32encode(os.urandom(10)).decode())", "");
    let enrol = ssh_as(
        key,
        USER,
        login_ip,
        &format!("umask 077 && printf '%s\\n' {secret} '\" TOTP_AUTH' > ~/.google_authenticator"),
    );
    assert!(
        enrol.status.success(),
        "enrolling by key alone (nullok): {}",
        text(&enrol)
    );
    let key_alone = ssh_as(key, USER, login_ip, "true");
    assert!(!key_alone.status.success(), "an enrolled user got in by key alone");
    assert!(text(&key_alone).contains("Permission denied"), "{}", text(&key_alone));
    let right = totp(&secret);
    let wrong = format!("{:06}", (right.parse::<u32>().expect("code") + 500_000) % 1_000_000);
    let refused = boot::ssh_with_code(key, USER, login_ip, "true", &wrong);
    assert!(!refused.status.success(), "a wrong code was let in");
    let login = boot::ssh_with_code(
        key,
        USER,
        login_ip,
        "id -un && rm ~/.google_authenticator",
        &totp(&secret),
    );
    assert!(login.status.success(), "key and code: {}", text(&login));
    assert_eq!(String::from_utf8_lossy(&login.stdout).trim(), USER);
    assert!(
        ssh_as(key, USER, login_ip, "true").status.success(),
        "unenrolled again, by key"
    );
}

/// pam_duo's settings: `[duo]` with keys of Duo's shape and an API host that refuses, so the
/// module's `failmode` decides every login.
fn duo_settings(failmode: &str) -> String {
    format!(
        "[duo]\nikey = DIWJ8X6AEYOR5OMC6TQ1\nskey = Zh5eGmUq9zpfQnyUIu5OL9iWoMMv5ZNmk3zLJ4Ep\nhost = localhost\nfailmode = {failmode}\n"
    )
}

/// A module whose settings hold keys (Duo): the login node writes them root-only from the
/// secret, follows the secret's new version, and removes them with the `mfa` block. The API
/// host refuses, so `failmode = secure` refuses the user's key alone and `safe` lets it in.
fn module_settings(emu: &Emulator, ws: &Workspace, key: &SshKey, login_ip: &str, config: &str) {
    let made = emu.json_call(
        "secretsmanager",
        "secretsmanager.CreateSecret",
        &serde_json::json!({"Name": "alive-duo", "SecretString": duo_settings("secure")}),
    );
    let arn = made["ARN"].as_str().expect("the secret's ARN").to_string();
    let duo = format!(
        "  mfa {{\n    pam_module          = \"pam_duo.so\"\n    settings_file       = \"/etc/security/pam_duo.conf\"\n    \
         settings_secret_arn = \"{arn}\"\n  }}\n"
    );
    ws.write(&config.replacen(MFA, &duo, 1));
    ws.apply();
    // The policy now grants reading the settings' secret too.
    grant_node_policy(emu, ws);
    let key_alone = || ssh_as(key, USER, login_ip, "true");
    let node_side = || {
        text(&boot::ssh(
            key,
            login_ip,
            "sudo ls -l /etc/security/pam_duo.conf; sudo cat /etc/pam.d/hpcforge-mfa; sudo journalctl --no-pager -n 40 -u hpc-node-sync -u ssh",
        ))
    };
    eventually(
        "Duo (unreachable, failmode secure) refuses the key alone",
        Duration::from_secs(90),
        || text(&key_alone()).contains("Permission denied"),
        || format!("{}\n{}", text(&key_alone()), node_side()),
    );
    emu.json_call(
        "secretsmanager",
        "secretsmanager.PutSecretValue",
        &serde_json::json!({"SecretId": arn, "SecretString": duo_settings("safe")}),
    );
    eventually(
        "the secret's new version (failmode safe) lets the key alone in",
        Duration::from_secs(90),
        || key_alone().status.success(),
        || text(&key_alone()),
    );
    let settings = text(&boot::ssh(
        key,
        login_ip,
        "sudo stat -c '%a %U' /etc/security/pam_duo.conf",
    ));
    assert_eq!(settings.trim(), "600 root", "{settings}");
    ws.write(&config.replacen(MFA, "", 1));
    ws.apply();
    let gone = || {
        text(&boot::ssh(
            key,
            login_ip,
            "sudo ls /etc/security/pam_duo.conf /etc/ssh/sshd_config.d/10-hpcforge-mfa.conf 2>&1; grep -c common-auth /etc/pam.d/sshd",
        ))
    };
    eventually(
        "without mfa the settings and sshd's second factor are gone",
        Duration::from_secs(90),
        || {
            let g = gone();
            g.matches("No such file").count() == 2 && g.trim_end().ends_with('1')
        },
        gone,
    );
}

/// Submits a batch job (`sbatch_args`) as the cluster's user on `host`; returns its id.
fn submitted(key: &SshKey, host: &str, sbatch_args: &str) -> String {
    let submit = ssh_as(key, USER, host, &format!("sbatch --parsable {sbatch_args}"));
    assert!(submit.status.success(), "sbatch: {}", text(&submit));
    String::from_utf8_lossy(&submit.stdout).trim().to_string()
}

/// Submits a batch job (`sbatch_args`) as the cluster's user on `host` and waits until it
/// completes; `context` adds what to show when it does not. Returns the job id.
fn job_completes(key: &SshKey, host: &str, sbatch_args: &str, limit: Duration, context: impl Fn() -> String) -> String {
    let job = submitted(key, host, sbatch_args);
    let job_state = || text(&ssh_as(key, USER, host, &format!("scontrol show job {job} -o")));
    eventually(
        "the job completes",
        limit,
        || {
            let state = job_state();
            // A job that failed (its program's exit code) never completes.
            assert!(
                !state.contains("JobState=FAILED"),
                "the job failed: {state}\n{}",
                context()
            );
            state.contains("JobState=COMPLETED")
        },
        || format!("job: {}\n{}", job_state(), context()),
    );
    job
}

fn wait_ssh_as(key: &SshKey, address: &str) {
    eventually(
        "SSH to the login node as the cluster's user",
        Duration::from_secs(120),
        || ssh_as(key, USER, address, "true").status.success(),
        || text(&ssh_as(key, USER, address, "true")),
    );
}

/// A head node that cannot start fails `terraform apply` with its own reason: first the image's
/// Slurm (Debian 12's 22.05) is not the cluster's 24.11, both named (refused at plan while the
/// image carries hpc-image's tag, at the head's boot without it); then, the release fixed, the
/// node role may no longer read the cluster's secrets, so the munge key cannot be had. Allowed
/// again, the head starts with `external` accounting: slurmdbd logs in to the team's own
/// database with the password their secret holds, and the cluster and the user's association
/// are recorded there.
#[test]
fn a_head_node_that_cannot_start_fails_the_apply_with_its_own_reason_then_starts_on_an_external_database() {
    boot::require_prerequisites();
    let _turn = turn();
    let emu = boot::booting_emulator(2);
    let ami = boot::publish_test_image(&emu);
    let profile = node_role(&emu, "release-node");
    // Enough to read the desired state and write the boot report (the exact policy is the
    // other test's business).
    let allow = |actions: &str| {
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":[{actions}],"Resource":"*"}}]}}"#
        );
        emu.query(
            "iam",
            "2010-05-08",
            &format!(
                "Action=PutRolePolicy&RoleName=release-node&PolicyName=test&PolicyDocument={}",
                encode(&policy)
            ),
        );
    };
    allow(r#""ssm:*","secretsmanager:GetSecretValue""#);
    let ws = Workspace::booting("boot-release", &emu);
    let config = |version: &str, accounting: &str| {
        format!(
            r#"
resource "hpc_network" "net" {{
  name        = "release"
  cidr_block  = "10.9.0.0/16"
  nat_gateway = false
}}
resource "hpc_cluster" "main" {{
  name      = "release"
  subnet_id = hpc_network.net.private_subnet_ids["us-east-1a"]
  head_node {{
    ami_id               = "{ami}"
    instance_type        = "c7i.large"
    instance_profile_arn = "{profile}"
  }}
  slurm {{
    version = "{version}"
  }}
  accounting {{
{accounting}
  }}
  user {{
    name     = "{USER}"
    uid      = 2001
    accounts = ["physics"]
  }}
}}
"#
        )
    };
    let no_accounting = "    mode = \"none\"";
    let failed_apply = |phrases: &[&str]| {
        let out = ws.tf(&["apply", "-auto-approve", "-input=false", "-no-color"]);
        assert!(!out.success, "the apply must fail: {}", out.text());
        let said = out.text().split_whitespace().collect::<Vec<_>>().join(" ");
        for phrase in phrases {
            assert!(said.contains(phrase), "the apply's error lacks {phrase:?}: {said}");
        }
        assert_eq!(
            emu.parameter_json(&hpc_desired_state::boot::head_param("release"))
                .unwrap_or(Value::Null)["phase"],
            "failed"
        );
    };
    ws.write(&config("24.11", no_accounting));
    // hpc-image publish recorded the image's Slurm in a tag: the plan refuses it, both named.
    let planned = ws.tf(&["plan", "-no-color", "-input=false"]);
    let said = planned.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !planned.success && said.contains("carries Slurm 22.05") && said.contains("slurm.version is 24.11"),
        "the plan must refuse the image's release: {said}"
    );
    assert!(emu.machines().is_empty(), "nothing may boot");
    // An image without the tag (not published by hpc-image) is caught by the head at boot.
    emu.ec2(&format!(
        "Action=DeleteTags&ResourceId.1={ami}&Tag.1.Key=hpcforge%3Aslurm-version"
    ));
    failed_apply(&[
        "failed at slurm release",
        "this image has Slurm slurm-wlm 22.05",
        "slurm.version = \"24.11\"",
        "slurm { version = \"22.05\" }",
    ]);
    // The failed head is tainted: this apply replaces it with one on the right release.
    allow(r#""ssm:*""#);
    ws.write(&config("22.05", no_accounting));
    failed_apply(&["failed at munge key", "the munge key", "AccessDenied"]);

    // The team's own database, outside the cluster: on the VPC's client side (as one reached
    // over a VPN would be; `vpcnet` gives the host the VPC's last address but one).
    let port = acceptance_tests::free_port();
    let db = MariaDb::start(&acceptance_tests::scratch_dir("external-db"), Some(port));
    let password = python("import secrets; print(secrets.token_hex(16))", "");
    db.sql(&format!(
        "CREATE USER 'slurm_acct'@'%' IDENTIFIED BY '{password}'; GRANT ALL ON hpc_acct.* TO 'slurm_acct'@'%';"
    ));
    let secret = emu.json_call(
        "secretsmanager",
        "secretsmanager.CreateSecret",
        &serde_json::json!({"Name": "release-accounting-db", "SecretString": password}),
    );
    let arn = secret["ARN"].as_str().expect("the secret's ARN");
    let external = format!(
        "    mode                = \"external\"\n    host                = \"10.9.255.254\"\n    port                = {port}\n    \
         user                = \"slurm_acct\"\n    database            = \"hpc_acct\"\n    password_secret_arn = \"{arn}\""
    );
    allow(r#""ssm:*","secretsmanager:GetSecretValue""#);
    // A partition (slurmctld starts with the first one; no node is launched without a job).
    let partition = format!(
        r#"
resource "hpc_partition" "cpu" {{
  cluster_id           = hpc_cluster.main.id
  name                 = "cpu"
  instance_types       = ["c7i.large"]
  ami_id               = "{ami}"
  instance_profile_arn = "{profile}"
  max_nodes            = 1
  allow_accounts       = ["physics"]
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1a"]]
  }}
}}
"#
    );
    ws.write(&(config("22.05", &external) + &partition));
    // The failed head is replaced again; the apply waits until the new one is ready and has
    // taken the partition.
    let applied = ws.tf(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(applied.success, "{}\n{}", applied.text(), db.log());
    // slurmdbd made its tables at start; slurmctld registers the cluster when it connects.
    let clusters = || db.sql("SELECT name FROM hpc_acct.cluster_table WHERE deleted = 0");
    eventually(
        "the cluster is registered in the external database",
        Duration::from_secs(90),
        || clusters().lines().any(|c| c == "release"),
        || {
            let head = ws.resource("hpc_cluster.main")["head_node_instance_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let tables = db.sql("SHOW TABLES FROM hpc_acct");
            format!(
                "clusters: {:?}\ntables: {tables}\n{}\n{}",
                clusters(),
                db.log(),
                console(&emu, &head)
            )
        },
    );
    let association = || {
        db.sql(&format!(
            "SELECT acct, user FROM hpc_acct.release_assoc_table WHERE deleted = 0 AND user = '{USER}'"
        ))
    };
    eventually(
        "the user's association is in the external database",
        Duration::from_secs(90),
        || association().trim() == format!("physics\t{USER}"),
        association,
    );
    assert!(
        !ws.raw_state().contains(&password),
        "the database password is in the state"
    );
    ws.destroy();
    let live = emu
        .machines()
        .into_iter()
        .filter(|m| m["State"] != "terminated")
        .count();
    assert_eq!(live, 0, "machines left after destroy");
}

/// `make demo` as root: the quickstart boots on the local EC2, the demo user's job runs and is in
/// sacct, the cluster stays up for SSH, and `make demo-destroy` ends every machine.
#[test]
fn make_demo_boots_the_quickstart_and_runs_the_demo_users_job() {
    boot::require_prerequisites();
    let _turn = turn();
    let dir = acceptance_tests::scratch_dir("demo");
    let demo = |action: &str| {
        std::process::Command::new("bash")
            .arg(acceptance_tests::repo_root().join("scripts/demo.sh"))
            .arg(action)
            .arg(acceptance_tests::provider_dir())
            .env("HPCFORGE_DEMO_DIR", &dir)
            .output()
            .expect("running scripts/demo.sh")
    };
    let up = demo("up");
    let said = text(&up);
    assert!(up.status.success(), "make demo failed:\n{said}");
    assert!(said.contains("hello from cpu-c7i-large-1"), "no job output:\n{said}");
    let sacct = said
        .lines()
        .find(|l| l.trim_start().starts_with("1 ") && l.contains("COMPLETED"))
        .unwrap_or_else(|| panic!("no completed sacct line:\n{said}"));
    assert!(sacct.contains("demo") && sacct.contains("cpu-c7i-large-1"), "{sacct}");
    // The cluster is left running, reachable the way the demo says.
    let login = said
        .split_whitespace()
        .find_map(|w| w.strip_prefix("demo@"))
        .map(|w| w.trim_end_matches(':').to_string())
        .unwrap_or_else(|| panic!("no login address:\n{said}"));
    let port = std::fs::read_to_string(dir.join("emulator.port")).expect("the demo's emulator port");
    let key = SshKey::new(dir.join("demo-key"), port.trim().parse().expect("a port number"));
    let whoami = ssh_as(&key, "demo", &login, "id -un; sinfo -h -o %P");
    assert_eq!(text(&whoami).trim(), "demo\ncpu*\ngpu", "{}", text(&whoami));
    a_researcher_reaches_neither_the_nodes_role_nor_root(&key, &login);
    let pid: u32 = std::fs::read_to_string(dir.join("emulator.pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("the demo's emulator pid");

    let down = demo("down");
    assert!(down.status.success(), "make demo-destroy failed:\n{}", text(&down));
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the demo's emulator outlived make demo-destroy"
    );
    // Its machines' namespaces went with it.
    let namespaces = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns");
    let prefix = format!("hpcemu-{pid}-");
    assert!(
        !text(&namespaces).contains(&prefix),
        "machines of the demo outlived it: {}",
        text(&namespaces)
    );
}

/// Whether a TCP connection to IMDS opens (`reached`) or not (`refused`), as its caller's user.
const IMDS_PROBE: &str =
    "timeout 5 bash -c 'exec 3<>/dev/tcp/169.254.169.254/80' 2>/dev/null && echo reached || echo refused";

/// The demo user, a researcher nobody trusts, attacks the quickstart from the login node and
/// from a job on a compute node: IMDS (the role's credentials), a setuid file on /home, and a
/// link in their home for root's sync to follow. Each attempt fails, is visible to an
/// administrator, and leaves the cluster as it was.
fn a_researcher_reaches_neither_the_nodes_role_nor_root(key: &SshKey, login: &str) {
    let user = |command: &str| ssh_as(key, "demo", login, command);
    let admin = |command: &str| boot::ssh(key, login, command);
    // IMDS: refused to the user on the login node and in their job; root still reaches it.
    let probe =
        format!("printf '%s\\n' \"{IMDS_PROBE}\" > ~/imds-probe && bash ~/imds-probe && srun -N1 bash ~/imds-probe");
    let tried = user(&probe);
    assert_eq!(
        String::from_utf8_lossy(&tried.stdout).trim(),
        "refused\nrefused",
        "a user reached IMDS (login, then a job on a compute node):\n{}",
        text(&tried)
    );
    let root = admin(&format!(
        "sudo bash -c \"{IMDS_PROBE}\"; sudo nft list table inet hpcforge_imds"
    ));
    let said = text(&root);
    assert!(said.starts_with("reached"), "root lost IMDS on the login node:\n{said}");
    let refusals: u64 = said
        .lines()
        .filter(|l| l.contains("ip daddr 169.254.169.254") && l.contains("reject"))
        .filter_map(|l| {
            l.split("counter packets ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert!(refusals > 0, "the user's attempt was not counted:\n{said}");

    // /home is nosuid: a setuid-root file there (as one written through a spoofed uid) runs as
    // the user who runs it.
    let planted =
        admin("sudo install -m 4755 -o root -g root /usr/bin/id /home/demo/rootid && findmnt -no OPTIONS /home");
    assert!(planted.status.success(), "{}", text(&planted));
    let ran = user("/home/demo/rootid -u; id -u");
    let ids: Vec<String> = String::from_utf8_lossy(&ran.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert!(
        ids.len() == 2 && ids[0] == ids[1] && ids[0] != "0",
        "a setuid file on /home ran as root:\n{}\n{}",
        text(&planted),
        text(&ran)
    );

    // ~/.ssh as a link to /etc: root's sync of the user's keys refuses it, says so, and /etc
    // stays root's; the user's own keys are theirs to put back.
    let linked = user("mv ~/.ssh ~/.ssh.mine && ln -s /etc ~/.ssh && echo linked");
    assert_eq!(text(&linked).trim(), "linked", "{}", text(&linked));
    let synced = admin(
        "sudo systemctl start hpc-node-sync.service; stat -c '%U %a' /etc; \
         sudo journalctl -u hpc-node-sync.service --no-pager -o cat | grep -F 'demo:' | tail -n 1",
    );
    let said = text(&synced);
    assert!(
        said.starts_with("root 755\n"),
        "root's sync followed the user's link to /etc:\n{said}"
    );
    assert!(
        said.contains("/home/demo/.ssh is a symbolic link (not followed)"),
        "the refusal is not in the sync's log:\n{said}"
    );
    let restored = admin("sudo rm /home/demo/.ssh /home/demo/rootid && sudo mv /home/demo/.ssh.mine /home/demo/.ssh");
    assert!(restored.status.success(), "{}", text(&restored));
    let back = user("id -un");
    assert_eq!(text(&back).trim(), "demo", "{}", text(&back));

    // The head admits administrators only (the cluster has login nodes): the user's key is
    // refused there, and the refusal is in its log; its default user still logs in.
    let conf = text(&user("grep -m1 '^SlurmctldHost=' /etc/slurm/slurm.conf"));
    let head = conf
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(ip, _)| ip.to_string())
        .unwrap_or_else(|| panic!("no controller address on the login node: {conf}"));
    let tried = ssh_as(key, "demo", &head, "id -un");
    assert!(
        !tried.status.success(),
        "the demo user logged in to the head node: {}",
        text(&tried)
    );
    let denied = boot::ssh(
        key,
        &head,
        "sudo journalctl --no-pager -o cat | grep -c 'access denied for user .demo.'",
    );
    let count: u32 = text(&denied).trim().parse().unwrap_or(0);
    assert!(
        count > 0,
        "the head's log has no refusal of the demo user:\n{}",
        text(&denied)
    );

    // A compute node admits the user while a job of theirs runs there, and not after it; its
    // administrator whatever runs. Through the login node: compute nodes admit only members.
    let job = text(&user("sbatch --parsable -N1 -o /dev/null --wrap 'sleep 600'"))
        .trim()
        .to_string();
    let state = || text(&user(&format!("squeue -h -j {job} -o '%T %N'")));
    eventually(
        "the demo user's job runs",
        Duration::from_secs(300),
        || state().starts_with("RUNNING "),
        state,
    );
    let node = state().split_whitespace().nth(1).unwrap_or_default().to_string();
    let shown = text(&user(&format!("scontrol show node {node} -o")));
    let node_ip = shown
        .split_whitespace()
        .find_map(|w| w.strip_prefix("NodeAddr="))
        .unwrap_or_else(|| panic!("no NodeAddr: {shown}"))
        .to_string();
    let into_node = |who: &str| boot::ssh_via_as(key, who, login, &node_ip, "id -un");
    let with_job = into_node("demo");
    assert_eq!(
        text(&with_job).trim(),
        "demo",
        "refused on {node} with a job there: {}",
        text(&with_job)
    );
    user(&format!("scancel {job}"));
    eventually(
        "the user is refused on the node once their job ended",
        Duration::from_secs(90),
        || !into_node("demo").status.success(),
        || text(&into_node("demo")),
    );
    let admin_in = into_node(boot::SSH_USER);
    assert_eq!(
        text(&admin_in).trim(),
        boot::SSH_USER,
        "the administrator was refused on {node}: {}",
        text(&admin_in)
    );
    let logged = boot::ssh_via(
        key,
        login,
        &node_ip,
        "sudo journalctl --no-pager -o cat | grep -c 'no active jobs'",
    );
    assert!(
        text(&logged).trim().parse::<u32>().is_ok_and(|n| n > 0),
        "{node}'s log has no refusal by pam_slurm_adopt:\n{}",
        text(&logged)
    );
}

/// A cluster in us-east-1 whose partition fails over to a pool in us-west-2, joined by an
/// hpc_network_peering.
fn far_config(amis: &std::collections::BTreeMap<String, String>, profile: &str, key: &str, wait: bool) -> String {
    let (east, west) = (&amis["us-east-1"], &amis["us-west-2"]);
    let west_parts = r#"
provider "hpc" {
  alias  = "west"
  region = "us-west-2"
}
resource "hpc_network" "west" {
  provider           = hpc.west
  name               = "far-west"
  cidr_block         = "10.1.0.0/16"
  availability_zones = ["us-west-2a"]
  nat_gateway        = false
}
resource "hpc_network_peering" "west" {
  vpc_id                  = hpc_network.net.vpc_id
  peer_vpc_id             = hpc_network.west.vpc_id
  peer_region             = "us-west-2"
  security_group_ids      = [hpc_network.net.security_group_id]
  peer_security_group_ids = [hpc_network.west.security_group_id]
}"#;
    let west_pool = format!(
        r#"
  capacity_pool {{
    region                = "us-west-2"
    subnet_ids            = [hpc_network.west.private_subnet_ids["us-west-2a"]]
    ami_id                = "{west}"
    security_group_ids    = [hpc_network.west.security_group_id]
    peering_connection_id = hpc_network_peering.west.id
  }}"#
    );
    one_partition_cluster(&OnePartition {
        name: "far",
        cidr: "10.0.0.0/16",
        version: "22.05",
        accounting: "none",
        head_ami: east,
        node_ami: east,
        profile,
        key,
        wait,
        others: west_parts,
        cluster_lines: "\n  security_group_id = hpc_network.net.security_group_id",
        more_pools: &west_pool,
    })
}

/// A booted test's cluster: a network of its own, the cluster (its head node, a user with an SSH
/// key) and one default partition `cpu` of one c7i.large node with a pool in us-east-1a, plus
/// what a test adds.
struct OnePartition<'a> {
    name: &'a str,
    cidr: &'a str,
    version: &'a str,
    /// `accounting.mode`.
    accounting: &'a str,
    head_ami: &'a str,
    node_ami: &'a str,
    profile: &'a str,
    key: &'a str,
    wait: bool,
    /// More resources (and providers).
    others: &'a str,
    /// More lines of the cluster block, after `subnet_id`.
    cluster_lines: &'a str,
    /// More `capacity_pool` blocks, after the first.
    more_pools: &'a str,
}

fn one_partition_cluster(c: &OnePartition<'_>) -> String {
    // node_role() names the role as its instance profile.
    let role = c.profile.replace(":instance-profile/", ":role/");
    let OnePartition {
        name,
        cidr,
        version,
        accounting,
        head_ami,
        node_ami,
        profile,
        key,
        wait,
        others,
        cluster_lines,
        more_pools,
    } = c;
    format!(
        r#"
resource "hpc_network" "net" {{
  name        = "{name}"
  cidr_block  = "{cidr}"
  nat_gateway = false
}}{others}
resource "hpc_cluster" "main" {{
  name           = "{name}"
  subnet_id      = hpc_network.net.private_subnet_ids["us-east-1a"]{cluster_lines}
  wait_for_ready = {wait}
  head_node {{
    ami_id               = "{head_ami}"
    instance_type        = "c7i.large"
    key_name             = "{name}"
    allowed_ssh_cidrs    = ["{cidr}"]
    instance_profile_arn = "{profile}"
    node_role_arns       = ["{role}"]
  }}
  slurm {{
    version            = "{version}"
    scaledown_idletime = "60s"
    resume_timeout     = "5m"
  }}
  accounting {{
    mode = "{accounting}"
  }}
  user {{
    name            = "{USER}"
    uid             = 2001
    ssh_public_keys = ["{key}"]
  }}
}}
resource "hpc_partition" "cpu" {{
  cluster_id           = hpc_cluster.main.id
  name                 = "cpu"
  instance_types       = ["c7i.large"]
  ami_id               = "{node_ami}"
  instance_profile_arn = "{profile}"
  max_nodes            = 1
  default              = true
  provision_timeout    = "90s"
  capacity_pool {{
    subnet_ids = [hpc_network.net.private_subnet_ids["us-east-1a"]]
  }}{more_pools}
}}
"#
    )
}

#[test]
fn a_job_fails_over_to_a_pool_in_another_region_and_runs_there_through_the_peering() {
    boot::require_prerequisites();
    let _turn = turn();
    // The head node and the node in us-west-2. No VPC routed from the host, as on a host whose
    // own network overlaps 10.0.0.0/16: SSH goes through the VPC's client namespace.
    let emu = boot::booting_emulator_with(3, &["--no-host-routes"]);
    let amis = boot::publish_test_image_to(&emu, &["us-east-1", "us-west-2"], "");
    let key = key_pair(&emu, "far");
    let profile = node_role(&emu, "far-node");
    let ws = Workspace::booting("boot-far", &emu);
    let user_key = public_key(&key);
    ws.write(&far_config(&amis, &profile, &user_key, false));
    ws.ok(&["apply", "-auto-approve", "-target=hpc_cluster.main"]);
    grant_node_policy_to(&emu, &ws, "far-node");
    // No capacity in the home region's pool.
    emu.add_fault(serde_json::json!({
        "service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
        "match": {"AvailabilityZone": "us-east-1a"},
    }));
    ws.write(&far_config(&amis, &profile, &user_key, true));
    let applied = ws.apply();
    assert!(applied.text().contains("0 destroyed"), "{}", applied.text());
    let cluster = ws.resource("hpc_cluster.main");
    let head_ip = cluster["head_node_private_ip"].as_str().expect("head ip").to_string();
    wait_ssh_as(&key, &head_ip);
    let head = emu
        .machines()
        .into_iter()
        .find(|m| m["PrivateIpAddress"] == head_ip.as_str());
    let reached = head.as_ref().map(|m| (&m["RoutedFromHost"], &m["ClientNamespace"]));
    assert!(
        matches!(reached, Some((Value::Bool(false), Value::String(_)))),
        "the head was not reached through its VPC's client namespace: {head:?}"
    );

    job_completes(
        &key,
        &head_ip,
        "-N1 -o far.out --wrap 'hostname; cat /etc/hpcemu/region; grep \" /home \" /etc/fstab'",
        Duration::from_secs(420),
        || {
            let consoles: Vec<String> = emu
                .machines()
                .iter()
                .filter_map(|m| m["InstanceId"].as_str().map(str::to_string))
                .map(|id| {
                    let xml = emu.ec2_in("us-west-2", &format!("Action=GetConsoleOutput&InstanceId={id}"));
                    let start = xml.find("<output>").map(|i| i + 8).unwrap_or(0);
                    let encoded: String = xml[start..].chars().take_while(|c| *c != '<').collect();
                    format!("{id}:\n{}", decode_base64(&encoded))
                })
                .collect();
            format!("machines: {:?}\n{}", emu.machines(), consoles.join("\n----\n"))
        },
    );
    // The node ran in us-west-2 and wrote into the home region's EFS /home, which it mounted by
    // a mount target's address across the peering (the name resolves only in us-east-1).
    let out = text(&ssh_as(&key, USER, &head_ip, "cat far.out"));
    let lines: Vec<&str> = out.trim().lines().collect();
    assert_eq!(lines.first().copied(), Some("cpu-c7i-large-1"), "{out}");
    assert_eq!(lines.get(1).copied(), Some("us-west-2"), "{out}");
    let fstab = lines.get(2).copied().unwrap_or_default();
    assert!(
        fstab.starts_with("10.0.") && fstab.contains(":/ /home nfs4 "),
        "/home on the remote node is not mounted by a home-region address: {out}"
    );
    let west_nodes = emu.ec2_in(
        "us-west-2",
        "Action=DescribeInstances&Filter.1.Name=tag:hpcforge:partition&Filter.1.Value.1=far/cpu",
    );
    assert!(
        west_nodes.contains("<instanceId>"),
        "no node in us-west-2: {west_nodes}"
    );
    ws.assert_no_changes();

    destroy_leaving_no_machine(&ws, &emu);
}

fn upgrade_config(version: &str, head_ami: &str, node_ami: &str, profile: &str, key: &str, wait: bool) -> String {
    // Without login nodes users log in on the head, so the second factor guards it.
    let mfa = format!("\n{}", MFA.trim_end());
    one_partition_cluster(&OnePartition {
        name: "upgrade",
        cidr: "10.7.0.0/16",
        version,
        accounting: "local",
        head_ami,
        node_ami,
        profile,
        key,
        wait,
        others: "",
        cluster_lines: &mfa,
        more_pools: "",
    })
}

/// Slurm's supported upgrade of a running cluster, in Slurm's order: Debian 13's Slurm 24.11 to
/// Debian 14's 26.05 (26.05 reads the state of the three releases before it). The apply of
/// `slurm.version` and the head node's image updates the cluster in place: the new head's
/// slurmdbd converts the local accounting database, then its slurmctld reads the saved state. A
/// completed job's accounting row and a held job survive; a job running on a 24.11 compute node
/// goes on under the 26.05 controller to its end; idle, that node is powered down, and the next
/// job gets a new node of the 24.11 image, which joins the 26.05 controller (a node may lag its
/// controller). Going back is refused at plan. The partition keeps its 24.11 image: a Debian 14
/// compute node did not join on this host, whose cgroup controllers are bound to v1 (see the
/// emulator's README); the partition's move to a newer image is checked against the API
/// (cluster_validation.rs). Users log in on the head of this cluster without login nodes: its
/// sshd asks for the cluster's second factor.
#[test]
fn a_running_cluster_upgrades_slurm_from_24_11_to_26_05_in_slurms_order_keeping_its_jobs() {
    boot::require_prerequisites();
    let _turn = turn();
    // The head, its successor and a compute node from each image (each old one ends first).
    let emu = boot::booting_emulator_with(4, &["--block-store-mib", "2048"]);
    let old = boot::publish_test_image_of(&emu, "trixie");
    let new = boot::publish_test_image_of(&emu, "forky");
    let key = key_pair(&emu, "upgrade");
    let profile = node_role(&emu, "upgrade-node");
    let ws = Workspace::booting("boot-upgrade", &emu);
    let user_key = public_key(&key);
    let head_ip = apply_in_two_steps(&ws, &emu, "upgrade-node", &key, |wait| {
        upgrade_config("24.11", &old, &old, &profile, &user_key, wait)
    });
    second_factor(&key, &head_ip);
    let on = |command: &str| text(&ssh_as(&key, USER, &head_ip, command));
    // The machines, and the last lines of each one's console (a node that never joined says why).
    let machines = || {
        let listed = emu.machines();
        let consoles: Vec<String> = listed
            .iter()
            .filter_map(|m| m["InstanceId"].as_str())
            .map(|id| {
                let text = console(&emu, id);
                let lines: Vec<&str> = text.lines().collect();
                format!("{id}:\n{}", lines[lines.len().saturating_sub(25)..].join("\n"))
            })
            .collect();
        format!("machines: {listed:?}\n{}", consoles.join("\n"))
    };
    // `slurm-wlm 24.11.5`: Debian's packaging names itself.
    let release = |command: &str| {
        let line = on(command);
        line.split_whitespace()
            .nth(1)
            .and_then(hpc_desired_state::release_series)
            .unwrap_or_else(|| format!("no release in {line:?}"))
    };
    assert_eq!(release("sinfo --version"), "24.11");

    // Before: a completed job, one running on the 24.11 node, one held.
    let done = job_completes(
        &key,
        &head_ip,
        "-o before.out --wrap '/usr/sbin/slurmd -V'",
        Duration::from_secs(300),
        machines,
    );
    assert_eq!(release("head -n1 before.out"), "24.11");
    // It runs until the test says go (at most 15 minutes), so it spans the whole upgrade.
    let across = on(
        "sbatch --parsable -o across.out --wrap '/usr/sbin/slurmd -V; for i in $(seq 450); do [ -e go ] && break; sleep 2; done; echo finished'",
    )
        .trim()
        .to_string();
    eventually(
        "the job across the upgrade runs",
        Duration::from_secs(60),
        || on(&format!("squeue -h -j {across} -o %T")).trim() == "RUNNING",
        || on("squeue; sinfo"),
    );
    let held = on("sbatch --parsable --hold -o after.out --wrap '/usr/sbin/slurmd -V'")
        .trim()
        .to_string();
    let old_node = carrying(&emu, &key, &head_ip, "cpu-c7i-large-1");
    assert_eq!(old_node.len(), 1, "the 24.11 compute node: {old_node:?}");
    let before = ws.resource("hpc_cluster.main");

    // The upgrade of the controller (slurmdbd, then slurmctld): an update in place. The
    // partition keeps its 24.11 image (see the test's comment).
    ws.write(&upgrade_config("26.05", &new, &old, &profile, &user_key, true));
    let planned = ws.tf(&["plan", "-input=false", "-no-color"]);
    let said = planned.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(planned.success, "{said}");
    assert!(said.contains("hpc_cluster.main will be updated in-place"), "{said}");
    assert!(said.contains("0 to add, 1 to change, 0 to destroy"), "{said}");
    ws.apply();
    let after = ws.resource("hpc_cluster.main");
    assert_ne!(after["head_node_instance_id"], before["head_node_instance_id"]);
    for kept in ["head_node_private_ip", "state_volume_id", "munge_key_secret_arn"] {
        assert_eq!(after[kept], before[kept], "{kept}");
    }
    assert_eq!(release("sinfo --version"), "26.05");
    // slurmdbd 26.05 converted the database: the completed job is still accounted.
    let sacct = || on(&format!("sacct -n -X -P -j {done} -o JobID,State"));
    eventually(
        "the upgraded cluster's accounting",
        Duration::from_secs(120),
        || sacct().trim() == format!("{done}|COMPLETED"),
        || format!("{}\n{}", sacct(), on("squeue; sinfo")),
    );
    let queued = on(&format!("squeue -h -j {held} -o '%T %r'"));
    assert_eq!(queued.trim(), "PENDING JobHeldUser", "the held job: {queued}");
    // The 24.11 node kept its job under the 26.05 controller, to its end.
    let across_state = || on(&format!("sacct -n -X -P -j {across} -o State"));
    let across_queued = on(&format!("squeue -h -j {across} -o %T"));
    assert_eq!(across_queued.trim(), "RUNNING", "the job across the upgrade still runs");
    assert_eq!(
        carrying(&emu, &key, &head_ip, "cpu-c7i-large-1"),
        old_node,
        "on the same node"
    );
    on("touch go");
    eventually(
        "the job across the upgrade completes",
        Duration::from_secs(240),
        || across_state().trim() == "COMPLETED",
        || format!("{}\n{}\n{}", across_state(), on("squeue; sinfo"), machines()),
    );
    assert_eq!(release("head -n1 across.out"), "24.11");
    assert!(on("cat across.out").contains("finished"), "{}", on("cat across.out"));
    // Idle, the old node is powered down; the next job gets a new node, of the 24.11 image,
    // which joins the 26.05 controller.
    eventually(
        "the 24.11 node is powered down",
        Duration::from_secs(240),
        || machine_state(&emu, &old_node[0]).as_deref() == Some("terminated"),
        || format!("{}\n{}", on("sinfo -N"), machines()),
    );
    on(&format!("scontrol release {held}"));
    let held_state = || on(&format!("sacct -n -X -P -j {held} -o State"));
    eventually(
        "the released job completes on a new 24.11 node",
        Duration::from_secs(300),
        || held_state().trim() == "COMPLETED",
        || format!("{}\n{}\n{}", held_state(), on("squeue; sinfo; sinfo -R"), machines()),
    );
    assert_eq!(release("head -n1 after.out"), "24.11");
    let new_node = carrying(&emu, &key, &head_ip, "cpu-c7i-large-1");
    assert!(
        new_node.len() == 1 && new_node != old_node,
        "a new instance: {new_node:?}"
    );
    ws.assert_no_changes();

    // Back to 24.11: refused at plan, nothing touched.
    ws.write(&upgrade_config("24.11", &old, &old, &profile, &user_key, true));
    let back = ws.tf(&["plan", "-input=false", "-no-color"]);
    let said = back.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !back.success && said.contains("Slurm cannot go back from 26.05 to 24.11"),
        "{said}"
    );

    ws.write(&upgrade_config("26.05", &new, &old, &profile, &user_key, true));
    destroy_leaving_no_machine(&ws, &emu);
}

/// The backup controller's cluster: one partition on Debian 13 (Slurm 24.11; 22.05 is refused),
/// `head_node.backup_controller = true`.
fn backup_config(ami: &str, profile: &str, key: &str, wait: bool) -> String {
    one_partition_cluster(&OnePartition {
        name: "backup",
        cidr: "10.6.0.0/16",
        version: "24.11",
        accounting: "local",
        head_ami: ami,
        node_ami: ami,
        profile,
        key,
        wait,
        others: "",
        cluster_lines: "",
        more_pools: "",
    })
    .replacen("  head_node {\n", "  head_node {\n    backup_controller    = true\n", 1)
    // The backup takes over after 30 s without the head, not Slurm's default 120 s.
    .replacen(
        "    resume_timeout     = \"5m\"\n",
        "    resume_timeout     = \"5m\"\n    extra              = { SlurmctldTimeout = \"30\" }\n",
        1,
    )
    // A node is given up after this long; the backup's first launch may be slower than the
    // head's on a busy host.
    .replacen("provision_timeout    = \"90s\"", "provision_timeout    = \"4m\"", 1)
}

/// What a controller shows when the backup test fails there.
const BACKUP_LOGS: &str = "scontrol ping; squeue; sinfo -N; sudo ls -la /var/spool/slurmctld; \
     sudo grep -m2 'started on cluster' /var/log/slurm/slurmctld.log; \
     sudo tail -n 60 /var/log/slurm/slurmctld.log; \
     sudo journalctl -b --no-pager -n 40 -u slurmctld -u hpc-node-sweep -u hpcforge-state";

/// `head_node.backup_controller`: a second slurmctld on shared state keeps scheduling when the
/// head node fails. The cluster comes up with both controllers, the head in charge. The head's
/// host fails (no shutdown runs on it): the backup takes over, keeps the held job, and a job
/// submitted to it runs on a compute node it launches (ResumeProgram runs where slurmctld
/// does). The next apply relaunches the head on its kept interface and volume; it takes over
/// again on the shared state, and accounting has every job (the backup's records reached
/// slurmdbd when the head was back). Then the plan is empty, and destroy leaves nothing.
#[test]
fn a_backup_controller_keeps_scheduling_when_the_head_node_fails() {
    boot::require_prerequisites();
    let _turn = turn();
    // The head, the backup, a compute node, its successor and the head's successor.
    let emu = boot::booting_emulator(5);
    let ami = boot::publish_test_image_of(&emu, "trixie");
    let key = key_pair(&emu, "backup");
    let profile = node_role(&emu, "backup-node");
    let ws = Workspace::booting("boot-backup", &emu);
    let user_key = public_key(&key);
    let head_ip = apply_in_two_steps(&ws, &emu, "backup-node", &key, |wait| {
        backup_config(&ami, &profile, &user_key, wait)
    });
    let before = ws.resource("hpc_cluster.main");
    let field = |v: &Value, name: &str| v[name].as_str().unwrap_or_default().to_string();
    let backup_ip = field(&before, "backup_controller_private_ip");
    assert!(
        field(&before, "controller_state_file_system_id").starts_with("fs-"),
        "{before}"
    );
    assert!(!backup_ip.is_empty() && backup_ip != head_ip, "{before}");
    wait_ssh_as(&key, &backup_ip);
    let on = |host: &str, command: &str| text(&ssh_as(&key, USER, host, command));
    let machines = || format!("machines: {:?}", emu.machines());
    let ping = |host: &str| on(host, "scontrol ping");
    // As the image's user, who may sudo.
    let admin = |host: &str, command: &str| text(&boot::ssh(&key, host, command));
    eventually(
        "both controllers answer, the head first",
        Duration::from_secs(120),
        || {
            let p = ping(&head_ip);
            p.contains("Slurmctld(primary) at ") && p.matches(" is UP").count() == 2
        },
        || ping(&head_ip),
    );
    assert!(
        ping(&head_ip).contains("at slurmctld-backup is UP"),
        "{}",
        ping(&head_ip)
    );
    let done = job_completes(
        &key,
        &head_ip,
        "-o before.out --wrap hostname",
        Duration::from_secs(300),
        machines,
    );
    let held = submitted(&key, &head_ip, "--hold -o held.out --wrap hostname");
    // The head fails with nothing in flight: slurmctld saves its state a few seconds after each
    // change, and what changed in those seconds (a job just submitted, a node just started) is
    // not in the state the backup takes over (see docs/guides/operations.md). The idle node powers down.
    eventually(
        "the idle node powers down and the head has saved the held job",
        Duration::from_secs(300),
        || {
            on(&head_ip, "sinfo -h -N -o '%N %t'").trim() == "cpu-c7i-large-1 idle~"
                && admin(
                    &head_ip,
                    "sudo grep -q held.out /var/spool/slurmctld/job_state && echo saved",
                )
                .contains("saved")
        },
        || format!("{}\n{}", on(&head_ip, "sinfo -N"), machines()),
    );

    // What a backup needs to take over with slurmdbd away: the head saves it soon after it
    // starts, not minutes later (the reconcile unit asks for it).
    eventually(
        "the head saves its TRES for the backup",
        Duration::from_secs(120),
        || admin(&head_ip, "sudo test -e /var/spool/slurmctld/last_tres && echo saved").contains("saved"),
        || admin(&head_ip, BACKUP_LOGS),
    );
    // The head's host fails.
    let head_id = field(&before, "head_node_instance_id");
    emu.fail(&head_id);
    eventually(
        "the head is down and the backup answers",
        Duration::from_secs(120),
        || {
            let p = ping(&backup_ip);
            p.contains(" is DOWN") && p.contains("at slurmctld-backup is UP")
        },
        || ping(&backup_ip),
    );
    // It takes over once the head has not answered for SlurmctldTimeout (30 s here); until then
    // the commands find no controller in charge.
    eventually(
        "the backup controller takes over",
        Duration::from_secs(300),
        || ssh_as(&key, USER, &backup_ip, "sinfo -h").status.success(),
        || admin(&backup_ip, BACKUP_LOGS),
    );
    let during = job_completes(
        &key,
        &backup_ip,
        "-o during.out --wrap hostname",
        Duration::from_secs(600),
        || {
            format!(
                "{}\n{}\n{}",
                on(&backup_ip, "scontrol ping; squeue; sinfo -N"),
                admin(&backup_ip, BACKUP_LOGS),
                machines()
            )
        },
    );
    let queued = on(&backup_ip, &format!("squeue -h -j {held} -o '%T %r'"));
    assert_eq!(
        queued.trim(),
        "PENDING JobHeldUser",
        "the held job on the backup: {queued}"
    );

    // The next apply relaunches the head, which takes over again on the shared state.
    ws.apply();
    let after = ws.resource("hpc_cluster.main");
    assert_ne!(after["head_node_instance_id"], before["head_node_instance_id"]);
    for kept in [
        "head_node_private_ip",
        "state_volume_id",
        "backup_controller_instance_id",
        "controller_state_file_system_id",
        "munge_key_secret_arn",
    ] {
        assert_eq!(after[kept], before[kept], "{kept}");
    }
    wait_ssh_as(&key, &head_ip);
    eventually(
        "the head is in charge again",
        Duration::from_secs(300),
        || ping(&head_ip).matches(" is UP").count() == 2,
        || ping(&head_ip),
    );
    let sacct = || {
        on(
            &head_ip,
            &format!("sacct -n -X -P -j {done},{during},{held} -o JobID,State"),
        )
    };
    eventually(
        "every job is accounted",
        Duration::from_secs(300),
        || {
            let rows = sacct();
            rows.contains(&format!("{done}|COMPLETED"))
                && rows.contains(&format!("{during}|COMPLETED"))
                && rows.contains(&format!("{held}|PENDING"))
        },
        || format!("{}\n{}", sacct(), admin(&head_ip, BACKUP_LOGS)),
    );
    ws.assert_no_changes();

    destroy_leaving_no_machine(&ws, &emu);
}

/// The restore test's cluster: one partition on Debian 13 (Slurm 24.11), local accounting,
/// its state volume made from `snapshot` when given.
fn restore_config(ami: &str, profile: &str, key: &str, snapshot: Option<&str>, wait: bool) -> String {
    let config = one_partition_cluster(&OnePartition {
        name: "restore",
        cidr: "10.5.0.0/16",
        version: "24.11",
        accounting: "local",
        head_ami: ami,
        node_ami: ami,
        profile,
        key,
        wait,
        others: "",
        cluster_lines: "",
        more_pools: "",
    });
    match snapshot {
        Some(id) => config.replacen(
            "  head_node {\n",
            &format!("  head_node {{\n    state_snapshot_id    = \"{id}\"\n"),
            1,
        ),
        None => config,
    }
}

/// A destroyed cluster comes back from what it kept. The cluster runs a job, holds another,
/// and its user writes a file in /home; the destroy keeps /home and a final snapshot of the
/// state volume. A cluster created again under the name from that snapshot
/// (`head_node.state_snapshot_id`) has the user's file, the finished job in sacct and the held
/// job in its queue; released, that job runs on a new node.
#[test]
fn a_destroyed_cluster_comes_back_from_its_kept_home_and_final_state_snapshot() {
    boot::require_prerequisites();
    let _turn = turn();
    // The head and a compute node, then the restored head and a new compute node.
    let emu = boot::booting_emulator(3);
    let ami = boot::publish_test_image_of(&emu, "trixie");
    let key = key_pair(&emu, "restore");
    let profile = node_role(&emu, "restore-node");
    let ws = Workspace::booting("boot-restore", &emu);
    let user_key = public_key(&key);
    let up = |snapshot: Option<&str>| {
        apply_in_two_steps(&ws, &emu, "restore-node", &key, |wait| {
            restore_config(&ami, &profile, &user_key, snapshot, wait)
        })
    };
    let head_ip = up(None);
    let on = |host: &str, command: &str| text(&ssh_as(&key, USER, host, command));
    let admin = |host: &str, command: &str| text(&boot::ssh(&key, host, command));
    let machines = || format!("machines: {:?}", emu.machines());
    let done = job_completes(
        &key,
        &head_ip,
        "-o before.out --wrap hostname",
        Duration::from_secs(300),
        machines,
    );
    let held = submitted(&key, &head_ip, "--hold -o held.out --wrap hostname");
    on(&head_ip, "echo kept-in-home > ~/notes");
    // The idle node powers down, slurmctld has saved the held job and slurmdbd the finished one.
    eventually(
        "the cluster is idle with its jobs saved",
        Duration::from_secs(300),
        || {
            on(&head_ip, "sinfo -h -N -o '%N %t'").trim() == "cpu-c7i-large-1 idle~"
                && admin(
                    &head_ip,
                    "sudo grep -q held.out /var/spool/slurmctld/job_state && echo saved",
                )
                .contains("saved")
                && on(&head_ip, &format!("sacct -n -X -P -j {done} -o State")).trim() == "COMPLETED"
        },
        || format!("{}\n{}", on(&head_ip, "sinfo -N; sacct -X"), machines()),
    );
    let home = ws.resource("hpc_cluster.main")["home_file_system_id"]
        .as_str()
        .expect("home_file_system_id")
        .to_string();
    let destroyed = ws.destroy().text().split_whitespace().collect::<Vec<_>>().join(" ");
    let snapshot = destroyed
        .split_whitespace()
        .find(|w| w.starts_with("snap-"))
        .unwrap_or_else(|| panic!("the destroy names no final snapshot: {destroyed}"))
        .to_string();

    // Created again from what was kept.
    let head_ip = up(Some(&snapshot));
    assert_eq!(ws.resource("hpc_cluster.main")["home_file_system_id"], home.as_str());
    assert_eq!(on(&head_ip, "cat ~/notes").trim(), "kept-in-home");
    let sacct = || on(&head_ip, &format!("sacct -n -X -P -j {done},{held} -o JobID,State"));
    eventually(
        "the restored cluster's accounting has its jobs",
        Duration::from_secs(120),
        || {
            let rows = sacct();
            rows.contains(&format!("{done}|COMPLETED")) && rows.contains(&format!("{held}|PENDING"))
        },
        || {
            format!(
                "{}\n{}",
                sacct(),
                admin(&head_ip, "sudo tail -n 30 /var/log/slurm/slurmctld.log")
            )
        },
    );
    let queued = on(&head_ip, &format!("squeue -h -j {held} -o '%T %r'"));
    assert_eq!(queued.trim(), "PENDING JobHeldUser", "the held job came back: {queued}");
    on(&head_ip, &format!("scontrol release {held}"));
    let state = || on(&head_ip, &format!("sacct -n -X -P -j {held} -o State"));
    eventually(
        "the released job runs on a new node",
        Duration::from_secs(300),
        || state().trim() == "COMPLETED",
        || {
            format!(
                "{}\n{}\n{}",
                state(),
                on(&head_ip, "squeue; sinfo -N; sinfo -R"),
                machines()
            )
        },
    );
    ws.assert_no_changes();
    destroy_leaving_no_machine(&ws, &emu);
}
