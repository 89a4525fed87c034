//! `hpc-node sweep`: end the cluster's compute instances Slurm has no use for, replace nodes
//! that did not register within their partition's provision timeout from the next pool, and
//! keep the static nodes (`min_nodes`) up.

use std::collections::BTreeSet;

use hpc_aws::Aws;
use hpc_desired_state::{tag, PartitionDoc};

use super::power::{cluster_regions, resume_nodes};
use super::{reset_lost_node, scontrol, set_node_state, slurm_state};
use crate::cli::ClusterArgs;
use crate::error::{Context as _, Result};
use crate::nodemap::{self, Carriers, NodeMap};
use crate::published::partitions;
use crate::resume::{launched_from, now_s, Cooldowns};
use crate::sweep::StaticAction;

/// Whether Slurm has `node` powered down. A node only asked to power down (`POWER_DOWN`) is
/// not: SuspendProgram is coming for its instance, and cools its pool down when the node was
/// interrupted, which the sweep would not.
fn slurm_powered_down(node: &str) -> Option<bool> {
    slurm_state(node).map(|s| slurm_model::node_state_has(&s, "POWERED_DOWN"))
}

/// Terminates the cluster's compute instances Slurm has no use for.
pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    if crate::controller::standing_by("sweep") {
        return Ok(());
    }
    let docs = partitions(aws, &args.cluster).await?;
    let known = crate::sweep::known_nodes(&docs);
    let now = i64::try_from(now_s()).unwrap_or(i64::MAX);
    let mut cooldowns = Cooldowns::load(&args.state_dir.join("cooldowns.json"));
    let map = NodeMap::at(&args.state_dir);
    let carriers = map
        .read()
        .context(|| format!("reading the agent's node map in {}", args.state_dir.display()))?;
    let index = nodemap::by_instance(&carriers);
    let mut relaunch: Vec<String> = Vec::new();
    let mut carried: BTreeSet<String> = BTreeSet::new();
    let mut live: BTreeSet<String> = BTreeSet::new();
    let mut ended: BTreeSet<String> = BTreeSet::new();
    let listed_at = now_s();
    for (region, ec2) in cluster_regions(aws, &docs) {
        let instances = ec2.instances_tagged(tag::CLUSTER, &args.cluster).await?;
        let mut orphans = Vec::new();
        for i in &instances {
            let node = nodemap::node_of(&index, i);
            if matches!(i.state.as_str(), "pending" | "running") {
                carried.extend(node.map(str::to_string));
                live.insert(i.id.clone());
            }
            if let Some(why) = crate::sweep::orphan_reason(i, node, &known, now, slurm_powered_down) {
                eprintln!("hpc-node: orphan {} in {region}: {why}", i.id);
                orphans.push(i.id.clone());
            } else if let Some((node, pool, doc)) = late(i, node, &region, &docs, now) {
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
        ec2.request_termination(&orphans).await?;
        ended.extend(orphans);
    }
    forget_ended(&map, &live, &ended)
        .context(|| format!("updating the agent's node map in {}", args.state_dir.display()))?;
    if !relaunch.is_empty() {
        resume_nodes(
            args,
            aws,
            &docs,
            &relaunch,
            &crate::resume::ResumeJobs::default(),
            &mut cooldowns,
        )
        .await?;
    }
    // A resume beside this pass (a static node powered up by the last one) may have launched
    // and recorded an instance after the map was read and EC2 listed: the map, read again,
    // knows it, so a node that just registered is not taken for one whose instance is gone.
    let recorded = map
        .read()
        .context(|| format!("reading the agent's node map in {}", args.state_dir.display()))?;
    carried.extend(launched_since(&recorded, listed_at.saturating_sub(1), &ended));
    keep_static_nodes(&docs, &carried);
    return_capacity(&docs, &cooldowns);
    cooldowns
        .save(now_s())
        .context(|| format!("saving cool-downs in {}", args.state_dir.display()))
}

/// Drops from the node map the instances this pass ended, and those no region runs any more
/// (recorded long enough ago that EC2 would list them).
fn forget_ended(map: &NodeMap, live: &BTreeSet<String>, ended: &BTreeSet<String>) -> std::io::Result<()> {
    let now = now_s();
    let grace = u64::try_from(crate::sweep::UNTAGGED_GRACE_S).unwrap_or(600);
    map.update(|m| {
        m.retain(|_, c| {
            !ended.contains(&c.instance_id)
                && (live.contains(&c.instance_id) || now.saturating_sub(c.recorded_at) < grace)
        })
    })
}

/// The nodes whose instance the map records as launched at `since` or later, bar those this
/// pass ended.
fn launched_since(map: &Carriers, since: u64, ended: &BTreeSet<String>) -> Vec<String> {
    map.iter()
        .filter(|(_, c)| c.recorded_at >= since && !ended.contains(&c.instance_id))
        .map(|(node, _)| node.clone())
        .collect()
}

/// A compute node Slurm still sees powering up after its partition's provision_timeout:
/// (node, pool index it was launched in, partition).
fn late<'a>(
    i: &hpc_aws::ec2::InstanceInfo,
    node: Option<&str>,
    region: &str,
    docs: &'a [PartitionDoc],
    now: i64,
) -> Option<(String, usize, &'a PartitionDoc)> {
    let node = node?;
    let (doc, pool) = launched_from(docs, node, region, i.subnet_id.as_deref()?)?;
    if i.launched_at == 0 || now - i.launched_at < i64::from(doc.provision_timeout_s) {
        return None;
    }
    if !slurm_state(node)?.contains("POWERING_UP") {
        return None;
    }
    Some((node.to_string(), pool, doc))
}

/// Nodes resume set down for lack of capacity, back in service once their pools' cool-downs
/// have ended (the next job that needs one tries the pools again): powered down and idle, as
/// Slurm keeps a cloud node it may start.
fn return_capacity(docs: &[PartitionDoc], cooldowns: &Cooldowns) {
    let downs = super::nodes_with_reason(crate::sweep::NO_CAPACITY);
    let now = now_s();
    let cooling = |partition: &str, pool: usize, instance_type: &str| {
        cooldowns.active(&Cooldowns::key(partition, pool, instance_type), now)
    };
    let back = crate::sweep::capacity_returned(docs, &downs, cooling);
    if back.is_empty() {
        return;
    }
    eprintln!(
        "hpc-node: {} node(s) set down for lack of capacity return, their pools' cool-downs over: {}",
        back.len(),
        back.join(",")
    );
    // A node Slurm has powered down only needs its down state cleared (`resume`, which takes no
    // reason); one it still counts as powering up (resume set it down mid-launch) is powered
    // down, which ends Slurm's wait for it, runs SuspendProgram (no instance to end) and clears
    // the down state. One update for each, whatever the number of nodes.
    let (resumed, powering_up): (Vec<String>, Vec<String>) = back.into_iter().partition(|node| {
        downs
            .get(node)
            .is_some_and(|s| slurm_model::node_state_has(s, "POWERED_DOWN"))
    });
    if !resumed.is_empty() {
        scontrol(&[
            "update".to_string(),
            format!("nodename={}", resumed.join(",")),
            "state=resume".to_string(),
        ]);
    }
    if !powering_up.is_empty() {
        set_node_state(
            &powering_up.join(","),
            "power_down_force",
            "hpc-node: capacity may be back",
        );
    }
}

/// Static nodes (`min_nodes`): powered up when Slurm has them powered down, powered down at
/// once when their instance is gone (the next pass powers them up again).
fn keep_static_nodes(docs: &[PartitionDoc], carried: &BTreeSet<String>) {
    for node in crate::sweep::static_nodes(docs) {
        let Some(state) = slurm_state(&node) else {
            continue;
        };
        match crate::sweep::static_action(&state, carried.contains(&node)) {
            Some(StaticAction::PowerUp) => {
                eprintln!("hpc-node: static node {node} is {state}: powering it up");
                scontrol(&[
                    "update".to_string(),
                    format!("nodename={node}"),
                    "state=power_up".to_string(),
                ]);
            }
            Some(StaticAction::Replace) => {
                eprintln!("hpc-node: static node {node} ({state}) has no instance: powering it down to replace it");
                reset_lost_node(&node, "hpc-node sweep: its instance is gone");
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodemap::Carrier;

    #[test]
    fn a_launch_recorded_after_the_listing_counts_as_carried() {
        let carrier = |id: &str, at: u64| Carrier {
            instance_id: id.into(),
            recorded_at: at,
            origin: None,
        };
        let map: Carriers = [
            ("small-1".to_string(), carrier("i-new", 100)),
            ("small-2".to_string(), carrier("i-old", 50)),
            ("small-3".to_string(), carrier("i-ended", 120)),
        ]
        .into_iter()
        .collect();
        let ended: BTreeSet<String> = ["i-ended".to_string()].into_iter().collect();
        assert_eq!(launched_since(&map, 99, &ended), ["small-1"]);
    }
}
