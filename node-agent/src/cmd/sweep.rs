//! `hpc-node sweep`: end the cluster's compute instances Slurm has no use for, replace nodes
//! that did not register within their partition's provision timeout from the next pool, and
//! keep the static nodes (`min_nodes`) up.

use std::collections::BTreeSet;

use hpc_aws::Aws;
use hpc_desired_state::{tag, PartitionDoc};

use super::power::{cluster_regions, resume_nodes};
use super::{partitions, scontrol, slurm_state};
use crate::cli::ClusterArgs;
use crate::error::{Context as _, Result};
use crate::resume::{group_nodes, now_s, Cooldowns};
use crate::sweep::StaticAction;

fn slurm_powered_down(node: &str) -> Option<bool> {
    slurm_state(node).map(|s| s.contains("POWERED_DOWN") || s.contains("POWER_DOWN"))
}

/// Terminates the cluster's compute instances Slurm has no use for.
pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    let docs = partitions(aws, &args.cluster).await?;
    let known = crate::sweep::known_nodes(&docs);
    let now = i64::try_from(now_s()).unwrap_or(i64::MAX);
    let mut cooldowns = Cooldowns::load(&args.state_dir.join("cooldowns.json"));
    let mut relaunch: Vec<String> = Vec::new();
    let mut carried: BTreeSet<String> = BTreeSet::new();
    for (region, ec2) in cluster_regions(aws, &docs) {
        let instances = ec2.instances_tagged(tag::CLUSTER, &args.cluster).await?;
        let mut orphans = Vec::new();
        for i in &instances {
            if matches!(i.state.as_str(), "pending" | "running") {
                carried.extend(i.tag(tag::NODE).map(str::to_string));
            }
            if let Some(why) = crate::sweep::orphan_reason(i, &known, now, slurm_powered_down) {
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
        ec2.request_termination(&orphans).await?;
    }
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
    keep_static_nodes(&docs, &carried);
    cooldowns
        .save(now_s())
        .context(|| format!("saving cool-downs in {}", args.state_dir.display()))
}

/// A compute node Slurm still sees powering up after its partition's provision_timeout:
/// (node, pool index it was launched in, partition).
fn late<'a>(
    i: &hpc_aws::ec2::InstanceInfo,
    docs: &'a [PartitionDoc],
    now: i64,
) -> Option<(String, usize, &'a PartitionDoc)> {
    let node = i.tag(tag::NODE)?.to_string();
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

/// Static nodes (`min_nodes`): powered up when Slurm has them powered down, powered down at
/// once when their instance is gone (the next pass powers them up again).
fn keep_static_nodes(docs: &[PartitionDoc], carried: &BTreeSet<String>) {
    for node in crate::sweep::static_nodes(docs) {
        let Some(state) = slurm_state(&node) else {
            continue;
        };
        let update = match crate::sweep::static_action(&state, carried.contains(&node)) {
            Some(StaticAction::PowerUp) => {
                eprintln!("hpc-node: static node {node} is {state}: powering it up");
                "state=power_up".to_string()
            }
            Some(StaticAction::Replace) => {
                eprintln!("hpc-node: static node {node} ({state}) has no instance: powering it down to replace it");
                "state=power_down_force".to_string()
            }
            None => continue,
        };
        scontrol(&["update".to_string(), format!("nodename={node}"), update]);
    }
}
