//! Slurm's power-saving programs: resume (launch across pools, with failover), suspend and
//! resume-fail (end the nodes' instances), and the run-time cost guardrail they apply.

use std::collections::{BTreeMap, BTreeSet};

use hpc_aws::ec2::{Ec2, InstanceInfo};
use hpc_aws::Aws;
use hpc_desired_state::{tag, PartitionDoc};

use super::{scontrol, spot, Regions};
use crate::cli::{ClusterArgs, HostsArgs};
use crate::error::{Context as _, Result};
use crate::guardrail::Budget;
use crate::nodemap::{self, Carrier, Carriers, NodeMap, Origin};
use crate::published::{cluster_doc, partitions};
use crate::resume::{
    group_nodes, launch_group, launched_from, now_s, Attempt, Cooldowns, Group, Placement, PoolClients as _,
    ResumeJobs, Skip,
};

pub async fn resume(args: &HostsArgs, aws: &Aws) -> Result<()> {
    let nodes = slurm_model::expand_hostlist(&args.hosts)?;
    let docs = partitions(aws, &args.cluster.cluster).await?;
    let mut cooldowns = Cooldowns::load(&args.cluster.state_dir.join("cooldowns.json"));
    // Without the jobs (an unreadable file) every node launches alone, as under best effort.
    let jobs = ResumeJobs::from_env().unwrap_or_else(|e| {
        eprintln!("hpc-node: {e}; launching each node on its own");
        ResumeJobs::default()
    });
    if !jobs.jobs.is_empty() {
        let ids: Vec<String> = jobs.jobs.iter().map(|(id, _)| id.to_string()).collect();
        eprintln!("hpc-node: Slurm resumes for job(s) {}", ids.join(", "));
    }
    cool_interrupted_pools(&args.cluster, aws, &docs, &mut cooldowns).await?;
    // A suspend beside this one saves its cool-downs before it ends the interrupted instance
    // and forgets it: whatever the map and EC2 no longer showed above is on disk by now.
    cooldowns.refresh();
    resume_nodes(&args.cluster, aws, &docs, &nodes, &jobs, &mut cooldowns).await
}

/// Cools down the pools whose spot instances got EC2's interruption notice just now. The
/// node's `spot-watch` powers it down, and Slurm requeues its job at once: the resume for that
/// job may run before (or beside) the suspend that cools the pool down, and would launch into
/// the same pool again. Nodes whose reason names the notice and whose instance the node map
/// still records are found in one `scontrol` call; their instances only when there are any.
async fn cool_interrupted_pools(
    args: &ClusterArgs,
    aws: &Aws,
    docs: &[PartitionDoc],
    cooldowns: &mut Cooldowns,
) -> Result<()> {
    let interrupted = interrupted_nodes();
    if interrupted.is_empty() {
        return Ok(());
    }
    let carriers = NodeMap::at(&args.state_dir)
        .read()
        .context(|| format!("reading the agent's node map in {}", args.state_dir.display()))?;
    let now = now_s();
    let unrecorded = cool_recorded(docs, &carriers, &interrupted, cooldowns, now);
    if unrecorded.is_empty() {
        return Ok(());
    }
    let index = nodemap::by_instance(&carriers);
    for (region, ec2) in cluster_regions(aws, docs) {
        for instance in ec2.instances_tagged(tag::CLUSTER, &args.cluster).await? {
            if let Some(node) = nodemap::node_of(&index, &instance).filter(|n| unrecorded.contains(*n)) {
                cool_listed(docs, &region, node, &instance, cooldowns, now);
            }
        }
    }
    Ok(())
}

/// Cools down the spot pools the node map records for `interrupted` nodes; returns the nodes
/// it has no origin for (not in the map, or an older agent's record): only EC2 can say where
/// their instances came from.
fn cool_recorded<'n>(
    docs: &[PartitionDoc],
    carriers: &Carriers,
    interrupted: &'n BTreeSet<String>,
    cooldowns: &mut Cooldowns,
    now: u64,
) -> BTreeSet<&'n str> {
    let mut unrecorded = BTreeSet::new();
    for node in interrupted {
        match carriers.get(node) {
            Some(Carrier {
                instance_id,
                origin: Some(origin),
                ..
            }) => cool_pool(docs, node, instance_id, origin, cooldowns, now),
            _ => {
                unrecorded.insert(node.as_str());
            }
        }
    }
    unrecorded
}

/// The nodes Slurm records as interrupted (their reason names EC2's notice).
fn interrupted_nodes() -> BTreeSet<String> {
    super::nodes_with_reason(spot::REASON_PREFIX).into_keys().collect()
}

/// Launches instances for `nodes`: each group (partition and instance type) pool after pool,
/// skipping pools in `cooldowns`, all groups at once.
pub async fn resume_nodes(
    args: &ClusterArgs,
    aws: &Aws,
    docs: &[PartitionDoc],
    nodes: &[String],
    jobs: &ResumeJobs,
    cooldowns: &mut Cooldowns,
) -> Result<()> {
    let (groups, unknown) = group_nodes(docs, nodes);
    let now = now_s();
    let clients = Regions { aws: aws.clone() };
    let mut down: Vec<(String, String)> = unknown
        .into_iter()
        .map(|n| (n, "hpc-node: not a node of this cluster".into()))
        .collect();
    let admitted = admit(&mut budget(aws, &args.cluster, docs).await?, docs, groups, &mut down);
    let launches = admitted.iter().map(|(doc, group)| {
        let (clients, mut mine) = (&clients, cooldowns.clone());
        async move {
            let outcome = launch_group(clients, &args.cluster, doc, group, jobs, &mut mine, now).await;
            (outcome, mine)
        }
    });
    let results = futures::future::join_all(launches).await;
    let mut placed = Vec::new();
    let mut failure = None;
    for ((doc, group), (outcome, mine)) in admitted.iter().zip(results) {
        cooldowns.merge(mine);
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                failure.get_or_insert(e);
                continue;
            }
        };
        for a in &outcome.attempts {
            log_attempt(group, a);
        }
        placed.push((*doc, outcome.placed));
        down.extend(
            outcome
                .unplaced
                .into_iter()
                .map(|n| (n, crate::sweep::NO_CAPACITY.into())),
        );
    }
    record_and_address(&clients, &NodeMap::at(&args.state_dir), &placed).await?;
    set_down(down);
    cooldowns
        .save(now)
        .context(|| format!("saving cool-downs in {}", args.state_dir.display()))?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// The groups the run-time cost guardrail lets launch, cut to what fits; the rest go `down`.
fn admit<'d>(
    budget: &mut Budget,
    docs: &'d [PartitionDoc],
    groups: Vec<Group>,
    down: &mut Vec<(String, String)>,
) -> Vec<(&'d PartitionDoc, Group)> {
    let mut admitted = Vec::new();
    for mut group in groups {
        let Some(doc) = docs.iter().find(|d| d.name == group.partition) else {
            continue;
        };
        let Some(shape) = doc.shapes.iter().find(|s| s.instance_type == group.instance_type) else {
            continue;
        };
        let (fit, refused) = budget.admit(shape, group.nodes.len());
        if let Some(why) = refused {
            eprintln!(
                "hpc-node: guardrail: {} {}: {why}",
                group.partition, group.instance_type
            );
            for n in group.nodes.split_off(fit) {
                down.push((n, "hpc-node: cluster cost guardrail".into()));
            }
        }
        if !group.nodes.is_empty() {
            admitted.push((doc, group));
        }
    }
    admitted
}

/// Tells Slurm the nodes no instance was launched for, one update per reason.
fn set_down(down: Vec<(String, String)>) {
    let mut by_reason: BTreeMap<String, Vec<String>> = BTreeMap::new();
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
}

fn log_attempt(group: &Group, a: &Attempt) {
    let errors: Vec<String> = a.errors.iter().map(|e| format!("{}: {}", e.code, e.message)).collect();
    let skipped = match &a.skipped {
        None => String::new(),
        Some(Skip::Cooldown) => " (skipped: cooling down after no capacity)".into(),
        Some(Skip::Reservation(why)) => format!(" (skipped: {why})"),
    };
    let released = if a.released > 0 {
        format!(", released {} of a job it could not launch whole", a.released)
    } else {
        String::new()
    };
    eprintln!(
        "hpc-node: {} {} pool {}: asked {}, launched {}{released}{skipped}{}",
        group.partition,
        group.instance_type,
        a.pool,
        a.requested,
        a.launched,
        if errors.is_empty() {
            String::new()
        } else {
            format!(" ({})", errors.join("; "))
        }
    );
}

/// Records which instance carries each placed node (one write of the agent's node map), then
/// reads their addresses in a few calls and tells Slurm in one update: no call per node.
async fn record_and_address(
    clients: &Regions,
    map: &NodeMap,
    placed: &[(&PartitionDoc, Vec<Placement>)],
) -> Result<()> {
    if placed.iter().all(|(_, p)| p.is_empty()) {
        return Ok(());
    }
    // Recorded first: an instance the map does not name is an orphan to the sweep.
    let now = now_s();
    map.update(|m| {
        for (doc, p) in placed.iter().flat_map(|(doc, p)| p.iter().map(move |p| (doc, p))) {
            m.insert(
                p.node.clone(),
                Carrier {
                    instance_id: p.instance.id.clone(),
                    recorded_at: now,
                    origin: Some(Origin {
                        partition: doc.name.clone(),
                        pool: p.pool,
                        instance_type: p.instance.instance_type.clone(),
                    }),
                },
            );
        }
    })
    .context(|| "recording the launched nodes in the agent's node map".to_string())?;
    let mut addresses: Vec<(String, String)> = Vec::new();
    for (doc, placed) in placed {
        for (i, pool) in doc.pools.iter().enumerate() {
            let in_pool: Vec<&Placement> = placed.iter().filter(|p| p.pool == i).collect();
            if in_pool.is_empty() {
                continue;
            }
            let ids: Vec<String> = in_pool.iter().map(|p| p.instance.id.clone()).collect();
            let ips = clients.ec2_for(pool).private_ips(&ids).await?;
            addresses.extend(
                in_pool
                    .iter()
                    .filter_map(|p| ips.get(&p.instance.id).map(|ip| (p.node.clone(), ip.clone()))),
            );
        }
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
    Ok(())
}

/// EC2 in every region the cluster's pools use (and the agent's own).
pub fn cluster_regions(aws: &Aws, docs: &[PartitionDoc]) -> Vec<(String, Ec2)> {
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

/// What the cluster may still launch, from its published limits and the compute nodes running now.
async fn budget(aws: &Aws, cluster: &str, docs: &[PartitionDoc]) -> Result<Budget> {
    let doc = cluster_doc(aws, cluster).await?.unwrap_or_default();
    let shapes: BTreeMap<String, hpc_desired_state::ShapeDoc> = docs
        .iter()
        .flat_map(|d| d.shapes.iter().map(|s| (s.instance_type.clone(), s.clone())))
        .collect();
    let running = aws.ec2().instances_tagged(tag::CLUSTER, cluster).await?;
    let types: Vec<String> = running
        .into_iter()
        .filter(|i| i.tag(tag::PARTITION).is_some())
        .map(|i| i.instance_type)
        .collect();
    Ok(Budget::new(&doc, &types, &shapes))
}

/// The instances one suspend ends in one region, with the nodes they carry.
struct RegionEnding {
    ec2: Ec2,
    region: String,
    mine: Vec<(String, InstanceInfo)>,
}

pub async fn suspend(args: &HostsArgs, aws: &Aws) -> Result<()> {
    let nodes: BTreeSet<String> = slurm_model::expand_hostlist(&args.hosts)?.into_iter().collect();
    let docs = partitions(aws, &args.cluster.cluster).await?;
    let state = &args.cluster.state_dir;
    let mut cooldowns = Cooldowns::load(&state.join("cooldowns.json"));
    let map = NodeMap::at(state);
    let carriers = map
        .read()
        .context(|| format!("reading the agent's node map in {}", state.display()))?;
    let index = nodemap::by_instance(&carriers);
    // One call for every node's reason, not one per node ended.
    let interrupted: BTreeSet<String> = interrupted_nodes().intersection(&nodes).cloned().collect();
    let now = now_s();
    // From the map first: it still knows a pool whose instance EC2 no longer lists.
    let unrecorded = cool_recorded(&docs, &carriers, &interrupted, &mut cooldowns, now);
    let mut ending: Vec<RegionEnding> = Vec::new();
    for (region, ec2) in cluster_regions(aws, &docs) {
        let running = ec2.instances_tagged(tag::CLUSTER, &args.cluster.cluster).await?;
        let mine: Vec<(String, InstanceInfo)> = running
            .into_iter()
            .filter_map(|i| {
                let node = nodemap::node_of(&index, &i).filter(|n| nodes.contains(*n))?;
                Some((node.to_string(), i))
            })
            .collect();
        for (node, instance) in &mine {
            if unrecorded.contains(node.as_str()) {
                cool_listed(&docs, &region, node, instance, &mut cooldowns, now);
            }
        }
        ending.push(RegionEnding { ec2, region, mine });
    }
    // Cool-downs before any instance ends: a resume running beside this one finds the node's
    // instance in the map and in EC2 (and cools the pool itself), or the cool-down saved. A
    // failed save does not keep the instances running: it is reported once they are ended.
    let saved = cooldowns
        .save(now)
        .context(|| format!("saving cool-downs in {}", state.display()));
    let mut ended: Vec<(String, String)> = Vec::new();
    for RegionEnding { ec2, region, mine } in ending {
        let ids: Vec<String> = mine.iter().map(|(_, i)| i.id.clone()).collect();
        if !ids.is_empty() {
            eprintln!("hpc-node: terminating {} instance(s) in {region}", ids.len());
            ec2.request_termination(&ids).await?;
        }
        ended.extend(mine.into_iter().map(|(n, i)| (n, i.id)));
    }
    // The map forgets what was ended (a node relaunched meanwhile keeps its new record).
    map.update(|m| {
        for (node, id) in &ended {
            if m.get(node).is_some_and(|c| &c.instance_id == id) {
                m.remove(node);
            }
        }
    })
    .context(|| format!("updating the agent's node map in {}", state.display()))?;
    saved
}

/// Cools down the pool EC2 shows `instance` (carrying `node`, whose record has no origin) was
/// launched from: its region and subnet.
fn cool_listed(
    docs: &[PartitionDoc],
    region: &str,
    node: &str,
    instance: &InstanceInfo,
    cooldowns: &mut Cooldowns,
    now: u64,
) {
    let subnet = instance.subnet_id.as_deref().unwrap_or_default();
    if let Some((doc, pool)) = launched_from(docs, node, region, subnet) {
        let origin = Origin {
            partition: doc.name.clone(),
            pool,
            instance_type: instance.instance_type.clone(),
        };
        cool_pool(docs, node, &instance.id, &origin, cooldowns, now);
    }
}

/// Cools down the spot pool `origin` names (where the instance `instance_id` carrying `node`,
/// powered down on EC2's interruption notice, came from), as after no capacity, so the requeued
/// job launches from the next pool.
fn cool_pool(
    docs: &[PartitionDoc],
    node: &str,
    instance_id: &str,
    origin: &Origin,
    cooldowns: &mut Cooldowns,
    now: u64,
) {
    let Some(doc) = docs.iter().find(|d| d.name == origin.partition) else {
        return;
    };
    let pool = origin.pool;
    // Spot pools only: a node's reason lasts until it registers again, and by then the map may
    // record its successor, from an on-demand pool.
    if doc.pools.get(pool).is_none_or(|p| p.capacity_type != "spot") {
        return;
    }
    eprintln!(
        "hpc-node: {node} ({instance_id}) was interrupted: pool {pool} of {} cools down for {}s",
        doc.name, doc.ice_cooldown_s
    );
    cooldowns.start(
        Cooldowns::key(&doc.name, pool, &origin.instance_type),
        now,
        u64::from(doc.ice_cooldown_s),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(capacity_type: &str) -> hpc_desired_state::PoolDoc {
        hpc_desired_state::PoolDoc {
            region: "us-east-1".into(),
            subnet_ids: vec!["subnet-a".into()],
            capacity_type: capacity_type.into(),
            capacity_reservation_id: None,
            launch_templates: BTreeMap::new(),
            placement_group: None,
        }
    }

    fn carrier(instance_id: &str, origin: Option<(usize, &str)>) -> Carrier {
        Carrier {
            instance_id: instance_id.into(),
            recorded_at: 1,
            origin: origin.map(|(pool, instance_type)| Origin {
                partition: "burst".into(),
                pool,
                instance_type: instance_type.into(),
            }),
        }
    }

    #[test]
    fn an_interrupted_spot_pool_cools_down_from_the_node_map_without_ec2() {
        let docs = [PartitionDoc {
            name: "burst".into(),
            pools: vec![pool("spot"), pool("on-demand")],
            ice_cooldown_s: 600,
            ..PartitionDoc::default()
        }];
        let carriers: Carriers = [
            ("burst-c7i-l-1", carrier("i-1", Some((0, "c7i.large")))),
            ("burst-c7i-l-2", carrier("i-2", Some((1, "c7i.large")))),
            ("burst-c7i-l-3", carrier("i-3", None)),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
        let interrupted: BTreeSet<String> = ["burst-c7i-l-1", "burst-c7i-l-2", "burst-c7i-l-3", "burst-c7i-l-4"]
            .into_iter()
            .map(String::from)
            .collect();
        let mut cooldowns = Cooldowns::default();
        let unrecorded = cool_recorded(&docs, &carriers, &interrupted, &mut cooldowns, 100);
        // The spot pool cools; the on-demand one (a successor's, say) does not.
        assert!(cooldowns.active(&Cooldowns::key("burst", 0, "c7i.large"), 101));
        assert!(!cooldowns.active(&Cooldowns::key("burst", 1, "c7i.large"), 101));
        assert!(!cooldowns.active(&Cooldowns::key("burst", 0, "c7i.large"), 701));
        // An older agent's record and a node the map lost are left for EC2 to place.
        assert_eq!(
            unrecorded.into_iter().collect::<Vec<_>>(),
            ["burst-c7i-l-3", "burst-c7i-l-4"]
        );
    }
}
