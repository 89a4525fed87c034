//! The hpc-node command: `hpc-node resume|suspend <hostlist> --cluster NAME [--region R]`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use hpc_aws::ec2::Ec2;
use hpc_aws::{Aws, Settings};
use hpc_desired_state::{cluster_param, partitions_path, ClusterDoc, PartitionDoc, PoolDoc};
use hpc_node::guardrail::Budget;
use hpc_node::hostlist;
use hpc_node::reconcile::{reconcile_once, Layout, Outcome};
use hpc_node::resume::{group_nodes, launch_group, now_s, Cooldowns, PoolClients};

const USAGE: &str = "usage: hpc-node resume|suspend|resume-fail <hostlist> --cluster NAME [--region REGION] [--state-dir DIR]\n       hpc-node reconcile --cluster NAME [--region REGION] [--layout FILE] [--once] [--interval SECONDS]\n       hpc-node sweep --cluster NAME [--region REGION]\n       hpc-node health <node name> --cluster NAME [--region REGION]\n       hpc-node evict --cluster NAME [--region REGION]";

struct Args {
    command: String,
    hosts: String,
    cluster: String,
    region: Option<String>,
    state_dir: PathBuf,
    layout: Option<PathBuf>,
    once: bool,
    interval_s: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let command = it.next().ok_or(USAGE)?;
    let hosts = if ["reconcile", "sweep", "evict"].contains(&command.as_str()) {
        String::new()
    } else {
        it.next().ok_or(USAGE)?
    };
    let (mut cluster, mut region, mut state_dir) = (None, None, PathBuf::from("/var/lib/hpc-node"));
    let (mut layout, mut once, mut interval_s) = (None, false, 30);
    while let Some(flag) = it.next() {
        if flag == "--once" {
            once = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--cluster" => cluster = Some(value),
            "--region" => region = Some(value),
            "--state-dir" => state_dir = PathBuf::from(value),
            "--layout" => layout = Some(PathBuf::from(value)),
            "--interval" => {
                interval_s = value
                    .parse()
                    .map_err(|_| format!("--interval takes seconds, not {value:?}"))?
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    let cluster = cluster.ok_or_else(|| format!("--cluster is required\n{USAGE}"))?;
    Ok(Args {
        command,
        hosts,
        cluster,
        region,
        state_dir,
        layout,
        once,
        interval_s,
    })
}

struct Regions {
    aws: Aws,
}

impl PoolClients for Regions {
    fn ec2_for(&self, pool: &PoolDoc) -> Ec2 {
        if pool.region == self.aws.region {
            self.aws.ec2()
        } else {
            self.aws.ec2_in(&pool.region)
        }
    }
}

fn scontrol(args: &[String]) {
    match Command::new("scontrol").args(args).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("hpc-node: scontrol {} exited with {s}", args.join(" ")),
        Err(e) => eprintln!("hpc-node: cannot run scontrol: {e}"),
    }
}

async fn partitions(aws: &Aws, cluster: &str) -> Result<Vec<PartitionDoc>, String> {
    let params = aws
        .ssm()
        .list(&partitions_path(cluster))
        .await
        .map_err(|e| e.to_string())?;
    params
        .iter()
        .map(|p| serde_json::from_str(&p.value).map_err(|e| format!("{}: {e}", p.name)))
        .collect()
}

async fn resume(args: &Args, aws: &Aws) -> Result<(), String> {
    let nodes = hostlist::expand(&args.hosts)?;
    let docs = partitions(aws, &args.cluster).await?;
    let mut cooldowns = Cooldowns::load(&args.state_dir.join("cooldowns.json"));
    resume_nodes(args, aws, &docs, &nodes, &mut cooldowns).await
}

/// Launches instances for `nodes`, pool after pool, skipping pools in `cooldowns`.
async fn resume_nodes(
    args: &Args,
    aws: &Aws,
    docs: &[PartitionDoc],
    nodes: &[String],
    cooldowns: &mut Cooldowns,
) -> Result<(), String> {
    let (groups, unknown) = group_nodes(docs, nodes);
    let now = now_s();
    let clients = Regions { aws: aws.clone() };
    let mut down: Vec<(String, String)> = unknown
        .into_iter()
        .map(|n| (n, "hpc-node: not a node of this cluster".into()))
        .collect();
    let mut budget = budget(aws, &args.cluster, docs).await?;
    for group in &groups {
        let Some(doc) = docs.iter().find(|d| d.name == group.partition) else {
            continue;
        };
        let Some(shape) = doc.shapes.iter().find(|s| s.instance_type == group.instance_type) else {
            continue;
        };
        let (fit, refused) = budget.admit(shape, group.nodes.len());
        let mut group = group.clone();
        if let Some(why) = refused {
            eprintln!(
                "hpc-node: guardrail: {} {}: {why}",
                group.partition, group.instance_type
            );
            for n in group.nodes.split_off(fit) {
                down.push((n, "hpc-node: cluster cost guardrail".into()));
            }
        }
        if group.nodes.is_empty() {
            continue;
        }
        let group = &group;
        let outcome = launch_group(&clients, &args.cluster, doc, group, cooldowns, now)
            .await
            .map_err(|e| e.to_string())?;
        for a in &outcome.attempts {
            let errors: Vec<String> = a.errors.iter().map(|e| format!("{}: {}", e.code, e.message)).collect();
            eprintln!(
                "hpc-node: {} {} pool {}: asked {}, launched {}{}{}",
                group.partition,
                group.instance_type,
                a.pool,
                a.requested,
                a.launched,
                if a.skipped_cooldown {
                    " (skipped: cooling down after no capacity)"
                } else {
                    ""
                },
                if errors.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", errors.join("; "))
                }
            );
        }
        name_and_address(&clients, doc, &outcome.placed).await?;
        down.extend(
            outcome
                .unplaced
                .into_iter()
                .map(|n| (n, "hpc-node: no capacity in any pool".into())),
        );
    }
    let mut by_reason: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for (node, reason) in down {
        by_reason.entry(reason).or_default().push(node);
    }
    for (reason, nodes) in by_reason {
        eprintln!(
            "hpc-node: setting {} node(s) down ({reason}): {}",
            nodes.len(),
            nodes.join(",")
        );
        scontrol(&[
            "update".into(),
            format!("nodename={}", nodes.join(",")),
            "state=down".into(),
            format!("reason={reason}"),
        ]);
    }
    cooldowns
        .save(now)
        .map_err(|e| format!("saving cool-downs in {}: {e}", args.state_dir.display()))
}

async fn reconcile(args: &Args, aws: &Aws) -> Result<(), String> {
    let layout = match &args.layout {
        Some(path) => Layout::from_json(
            &std::fs::read_to_string(path).map_err(|e| format!("reading layout {}: {e}", path.display()))?,
        )?,
        None => Layout::default(),
    };
    let slurmctld = PathBuf::from(std::env::var("HPC_NODE_SLURMCTLD").unwrap_or_else(|_| "/usr/sbin/slurmctld".into()));
    loop {
        let result = reconcile_once(aws, &args.cluster, &layout, &slurmctld).await;
        match &result {
            Ok(Outcome::Unchanged) => {}
            Ok(Outcome::Applied {
                reconfigured,
                restarted,
            }) => eprintln!(
                "hpc-node: applied the desired state of {} (reconfigured: {reconfigured}, restarted: {restarted})",
                args.cluster
            ),
            Err(e) => eprintln!("hpc-node: kept the running configuration: {e}"),
        }
        if args.once {
            return result.map(|_| ());
        }
        tokio::time::sleep(std::time::Duration::from_secs(args.interval_s.max(1))).await;
    }
}

/// HealthCheckProgram: checks this node against its partition's shape and the cluster's
/// mounts; a failing node is drained with the problems as the reason.
async fn health(args: &Args, aws: &Aws) -> Result<(), String> {
    let node = args.hosts.clone();
    let docs = partitions(aws, &args.cluster).await?;
    let (groups, _) = group_nodes(&docs, std::slice::from_ref(&node));
    let group = groups
        .first()
        .ok_or_else(|| format!("{node} is not a node of cluster {}", args.cluster))?;
    let shape = docs
        .iter()
        .find(|d| d.name == group.partition)
        .and_then(|d| d.shapes.iter().find(|s| s.instance_type == group.instance_type))
        .ok_or_else(|| format!("no shape for {node}"))?;
    let mounts = match aws
        .ssm()
        .get(&cluster_param(&args.cluster))
        .await
        .map_err(|e| e.to_string())?
    {
        Some(p) => {
            serde_json::from_str::<ClusterDoc>(&p.value)
                .map_err(|e| format!("{}: {e}", p.name))?
                .mounts
        }
        None => Vec::new(),
    };
    let problems = hpc_node::health::check(shape, &mounts, &hpc_node::health::System);
    if problems.is_empty() {
        return Ok(());
    }
    let reason = format!("hpc-node health: {}", problems.join("; "));
    eprintln!("hpc-node: draining {node}: {reason}");
    scontrol(&[
        "update".into(),
        format!("nodename={node}"),
        "state=drain".into(),
        format!("reason={reason}"),
    ]);
    Err(reason)
}

/// How full the file system holding `path` is, in percent (from df).
fn usage_percent(path: &str) -> Result<i64, String> {
    let out = Command::new("df")
        .args(["--output=pcent", path])
        .output()
        .map_err(|e| format!("df: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().trim_end_matches('%').parse().ok())
        .ok_or_else(|| format!("df gave no usage for {path}"))
}

/// Lustre eviction: for each mounted file system with a release policy (tags set by
/// hpc_lustre_fs), when usage passes the threshold, start a task that releases files not
/// accessed for the policy's days from the file system (they stay in S3).
async fn evict(args: &Args, aws: &Aws) -> Result<(), String> {
    let Some(p) = aws
        .ssm()
        .get(&cluster_param(&args.cluster))
        .await
        .map_err(|e| e.to_string())?
    else {
        return Err(format!("cluster {} has no published desired state", args.cluster));
    };
    let doc: ClusterDoc = serde_json::from_str(&p.value).map_err(|e| format!("{}: {e}", p.name))?;
    let fsx = aws.fsx();
    for mount in doc.mounts.iter() {
        let Some(id) = &mount.lustre_id else { continue };
        let Some(fs) = fsx.find_lustre(id).await.map_err(|e| e.to_string())? else {
            eprintln!("hpc-node: {id} ({}) no longer exists", mount.mount_point);
            continue;
        };
        let tags = fs.spec.tags.clone().unwrap_or_default();
        let tag = |k: &str| {
            tags.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.parse::<i64>().ok())
        };
        let Some(days) = tag("hpcforge:release-unaccessed-days") else {
            continue;
        };
        let threshold = tag("hpcforge:release-usage-percent").unwrap_or(80);
        if !hpc_node::health::Probe::mounted(&hpc_node::health::System, &mount.mount_point) {
            eprintln!("hpc-node: {id} is not mounted at {}; not releasing", mount.mount_point);
            continue;
        }
        let used = usage_percent(&mount.mount_point)?;
        if used < threshold {
            eprintln!("hpc-node: {id} at {used}% (release above {threshold}%): nothing to do");
            continue;
        }
        let dras = fsx.list_data_repositories(id).await.map_err(|e| e.to_string())?;
        let mut paths: Vec<String> = dras.iter().filter_map(|d| d.spec.file_system_path.clone()).collect();
        if paths.is_empty() {
            paths.push("/".into());
        }
        let task = fsx
            .start_release_task(id, &paths, days)
            .await
            .map_err(|e| e.to_string())?;
        eprintln!(
            "hpc-node: {id} at {used}% (release above {threshold}%): task {task} releases files unused for {days} days under {}",
            paths.join(", ")
        );
    }
    Ok(())
}

/// Name tags in flight at once: enough to hide latency, within EC2's per-account request
/// bucket for CreateTags (the SDK retries what is throttled).
const TAGS_IN_FLIGHT: usize = 16;

/// Reads the placed instances' addresses in a few calls, tells Slurm in one update, then tags
/// each instance with its node name (EC2 takes one value per call).
async fn name_and_address(
    clients: &Regions,
    doc: &PartitionDoc,
    placed: &[hpc_node::resume::Placement],
) -> Result<(), String> {
    // Addresses first: Slurm can reach a node as soon as it knows its address, and the name
    // tags (one CreateTags per instance, as each value differs) are bookkeeping for suspend
    // and the sweep that need not hold Slurm up.
    let mut addresses: Vec<(String, String)> = Vec::new();
    for (i, pool) in doc.pools.iter().enumerate() {
        let in_pool: Vec<&hpc_node::resume::Placement> = placed.iter().filter(|p| p.pool == i).collect();
        if in_pool.is_empty() {
            continue;
        }
        let ids: Vec<String> = in_pool.iter().map(|p| p.instance.id.clone()).collect();
        let ips = clients
            .ec2_for(pool)
            .private_ips(&ids)
            .await
            .map_err(|e| e.to_string())?;
        addresses.extend(
            in_pool
                .iter()
                .filter_map(|p| ips.get(&p.instance.id).map(|ip| (p.node.clone(), ip.clone()))),
        );
    }
    if !addresses.is_empty() {
        let names: Vec<&str> = addresses.iter().map(|(n, _)| n.as_str()).collect();
        let ips: Vec<&str> = addresses.iter().map(|(_, ip)| ip.as_str()).collect();
        scontrol(&[
            "update".into(),
            format!("nodename={}", names.join(",")),
            format!("nodeaddr={}", ips.join(",")),
            format!("nodehostname={}", names.join(",")),
        ]);
    }
    let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(TAGS_IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    for p in placed {
        let ec2 = clients.ec2_for(&doc.pools[p.pool]);
        let (id, node) = (p.instance.id.clone(), p.node.clone());
        let permit = limit.clone().acquire_owned().await.map_err(|e| e.to_string())?;
        tasks.spawn(async move {
            let _permit = permit;
            ec2.retag(&[id], &[], &[("hpcforge:node".to_string(), node)]).await
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// EC2 in every region the cluster's pools use (and the agent's own).
fn cluster_regions(aws: &Aws, docs: &[PartitionDoc]) -> Vec<(String, Ec2)> {
    let mut regions: BTreeSet<String> = docs
        .iter()
        .flat_map(|d| d.pools.iter().map(|p| p.region.clone()))
        .collect();
    regions.insert(aws.region.clone());
    regions
        .into_iter()
        .map(|r| {
            let ec2 = if r == aws.region { aws.ec2() } else { aws.ec2_in(&r) };
            (r, ec2)
        })
        .collect()
}

/// Slurm's state of a node, e.g. `IDLE+CLOUD+POWERING_UP` (None when scontrol cannot say).
fn slurm_state(node: &str) -> Option<String> {
    let out = Command::new("scontrol")
        .args(["show", "node", node, "-o"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|f| f.strip_prefix("State="))
        .map(str::to_string)
}

fn slurm_powered_down(node: &str) -> Option<bool> {
    slurm_state(node).map(|s| s.contains("POWERED_DOWN") || s.contains("POWER_DOWN"))
}

/// Terminates the cluster's compute instances Slurm has no use for.
async fn sweep(args: &Args, aws: &Aws) -> Result<(), String> {
    let docs = partitions(aws, &args.cluster).await?;
    let known = hpc_node::sweep::known_nodes(&docs);
    let now = i64::try_from(now_s()).unwrap_or(i64::MAX);
    let mut cooldowns = Cooldowns::load(&args.state_dir.join("cooldowns.json"));
    let mut relaunch: Vec<String> = Vec::new();
    for (region, ec2) in cluster_regions(aws, &docs) {
        let instances = ec2
            .instances_tagged("hpcforge:cluster", &args.cluster)
            .await
            .map_err(|e| e.to_string())?;
        let mut orphans = Vec::new();
        for i in &instances {
            if let Some(why) = hpc_node::sweep::orphan_reason(i, &known, now, slurm_powered_down) {
                eprintln!("hpc-node: orphan {} in {region}: {why}", i.id);
                orphans.push(i.id.clone());
            } else if let Some((node, pool, doc)) = late(i, &docs, now) {
                // Launched but not registered in time: this pool does not deliver; try the next.
                eprintln!(
                    "hpc-node: {node} ({}) not registered {}s after launch; replacing it from the next pool",
                    i.id,
                    now - i.launched_at
                );
                orphans.push(i.id.clone());
                cooldowns.start(
                    Cooldowns::key(&doc.name, pool, &i.instance_type),
                    now_s(),
                    u64::from(doc.ice_cooldown_s),
                );
                relaunch.push(node);
            }
        }
        ec2.request_termination(&orphans).await.map_err(|e| e.to_string())?;
    }
    if !relaunch.is_empty() {
        resume_nodes(args, aws, &docs, &relaunch, &mut cooldowns).await?;
    }
    cooldowns
        .save(now_s())
        .map_err(|e| format!("saving cool-downs in {}: {e}", args.state_dir.display()))
}

/// A compute node Slurm still sees powering up after its partition's provision_timeout:
/// (node, pool index it was launched in, partition).
fn late<'a>(
    i: &hpc_aws::ec2::InstanceInfo,
    docs: &'a [PartitionDoc],
    now: i64,
) -> Option<(String, usize, &'a PartitionDoc)> {
    let node = i
        .tags
        .iter()
        .find(|(k, _)| k == "hpcforge:node")
        .map(|(_, v)| v.clone())?;
    let (groups, _) = group_nodes(docs, std::slice::from_ref(&node));
    let partition = groups.first()?.partition.clone();
    let doc = docs.iter().find(|d| d.name == partition)?;
    if i.launched_at == 0 || now - i.launched_at < i64::from(doc.provision_timeout_s) {
        return None;
    }
    if !slurm_state(&node)?.contains("POWERING_UP") {
        return None;
    }
    let subnet = i.subnet_id.as_deref()?;
    let pool = doc
        .pools
        .iter()
        .position(|p| p.subnet_ids.iter().any(|s| s == subnet))?;
    Some((node, pool, doc))
}

/// What the cluster may still launch, from its published limits and the compute nodes running now.
async fn budget(aws: &Aws, cluster: &str, docs: &[PartitionDoc]) -> Result<Budget, String> {
    let doc = match aws
        .ssm()
        .get(&cluster_param(cluster))
        .await
        .map_err(|e| e.to_string())?
    {
        Some(p) => serde_json::from_str::<ClusterDoc>(&p.value).map_err(|e| format!("{}: {e}", p.name))?,
        None => ClusterDoc::default(),
    };
    let shapes: std::collections::BTreeMap<String, hpc_desired_state::ShapeDoc> = docs
        .iter()
        .flat_map(|d| d.shapes.iter().map(|s| (s.instance_type.clone(), s.clone())))
        .collect();
    let running = aws
        .ec2()
        .instances_tagged("hpcforge:cluster", cluster)
        .await
        .map_err(|e| e.to_string())?;
    let types: Vec<String> = running
        .into_iter()
        .filter(|i| i.tags.iter().any(|(k, _)| k == "hpcforge:partition"))
        .map(|i| i.instance_type)
        .collect();
    Ok(Budget::new(&doc, &types, &shapes))
}

async fn suspend(args: &Args, aws: &Aws) -> Result<(), String> {
    let nodes: BTreeSet<String> = hostlist::expand(&args.hosts)?.into_iter().collect();
    let docs = partitions(aws, &args.cluster).await?;
    for (region, ec2) in cluster_regions(aws, &docs) {
        let running = ec2
            .instances_tagged("hpcforge:cluster", &args.cluster)
            .await
            .map_err(|e| e.to_string())?;
        let ids: Vec<String> = running
            .into_iter()
            .filter(|i| i.tags.iter().any(|(k, v)| k == "hpcforge:node" && nodes.contains(v)))
            .map(|i| i.id)
            .collect();
        if !ids.is_empty() {
            eprintln!("hpc-node: terminating {} instance(s) in {region}", ids.len());
            ec2.request_termination(&ids).await.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    if matches!(std::env::args().nth(1).as_deref(), Some("--version" | "version")) {
        println!("hpc-node {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hpc-node: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let aws = Aws::connect(&Settings {
            region: args.region.clone(),
            max_retries: 5,
            ..Settings::default()
        })
        .await
        .map_err(|e| e.to_string())?;
        match args.command.as_str() {
            "resume" => resume(&args, &aws).await,
            "suspend" => suspend(&args, &aws).await,
            // ResumeFailProgram: Slurm gave up on these nodes (ResumeTimeout); end their instances
            // so nothing keeps running, and Slurm has already requeued their jobs.
            "resume-fail" => suspend(&args, &aws).await,
            "reconcile" => reconcile(&args, &aws).await,
            "sweep" => sweep(&args, &aws).await,
            "health" => health(&args, &aws).await,
            "evict" => evict(&args, &aws).await,
            other => Err(format!("unknown command {other:?}\n{USAGE}")),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hpc-node: {e}");
            ExitCode::FAILURE
        }
    }
}
