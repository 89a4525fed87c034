//! `hpc-node events`: the head node's reader of EC2's instance events. Each partition has a
//! queue in each region of its pools that EventBridge fills with EC2's spot interruption
//! warnings and notices of instances stopping or ending (the provider makes them). For an
//! instance that carries a Slurm node, the agent powers the node down at once
//! (`POWER_DOWN_FORCE`; an instance stopping or ending is set `DOWN` first): Slurm requeues its
//! jobs now, rather than when slurmd stops answering, and the node name is free for the next
//! launch. A message whose action scontrol refused stays in the queue and comes back.
//!
//! A spot node's own watch (`spot-watch`) acts on the same warning from the instance metadata;
//! whichever comes first acts, the other finds the node powering down and leaves it. This one
//! also covers a node that cannot act for itself (hung, cut off) and instances that end with no
//! warning at all.

use std::collections::BTreeMap;
use std::time::Duration;

use hpc_aws::events::{self, Ec2Event, Events};
use hpc_aws::Aws;
use hpc_desired_state::{events_route, PartitionDoc};

use super::{reset_lost_node, set_node_state, slurm_state, spot};
use crate::cli::ClusterArgs;
use crate::error::{Context as _, Result};
use crate::host::log;
use crate::nodemap::{self, NodeMap};
use crate::published::partitions;

/// Seconds a receive waits for a first message (SQS's longest poll).
const WAIT_S: i32 = 20;
/// Seconds before trying again after a pass fails (AWS or the desired state unreachable).
const RETRY_S: u64 = 10;

/// A partition's queue in one region, once found.
struct Queue {
    events: Events,
    url: String,
}

/// Reads the queues for as long as it runs.
pub async fn run(args: &ClusterArgs, aws: &Aws) -> Result<()> {
    log(
        "events",
        &format!("reading EC2's instance events for cluster {}", args.cluster),
    );
    let mut found: BTreeMap<(String, String), Queue> = BTreeMap::new();
    loop {
        // The backup controller reads no message while the head is in charge (each is read once).
        if !crate::controller::in_charge() {
            tokio::time::sleep(Duration::from_secs(RETRY_S)).await;
            continue;
        }
        if let Err(e) = pass(args, aws, &mut found).await {
            log("events", &format!("{e}; trying again in {RETRY_S}s"));
            tokio::time::sleep(Duration::from_secs(RETRY_S)).await;
        }
    }
}

/// One pass: the queues of the partitions published now, each read once (long poll), each
/// event acted on, each message deleted.
async fn pass(args: &ClusterArgs, aws: &Aws, found: &mut BTreeMap<(String, String), Queue>) -> Result<()> {
    let docs = partitions(aws, &args.cluster).await?;
    let wanted = routes(&args.cluster, &docs);
    found.retain(|key, _| wanted.contains(key));
    for (region, base) in &wanted {
        let key = (region.clone(), base.clone());
        if found.contains_key(&key) {
            continue;
        }
        let events = aws.events_in(region);
        match events.queue_url(&events::queue_name(base)).await? {
            Some(url) => {
                log("events", &format!("reading queue {url}"));
                found.insert(key, Queue { events, url });
            }
            None => log(
                "events",
                &format!(
                    "no queue {} in {region} yet (apply the partition)",
                    events::queue_name(base)
                ),
            ),
        }
    }
    if found.is_empty() {
        tokio::time::sleep(Duration::from_secs(u64::from(WAIT_S.unsigned_abs()))).await;
        return Ok(());
    }
    let reads = found
        .iter()
        .map(|(key, q)| async move { (key.clone(), q, q.events.receive(&q.url, WAIT_S).await) });
    let mut lost = Vec::new();
    for (key, queue, read) in futures::future::join_all(reads).await {
        match read {
            Ok(messages) if !messages.is_empty() => {
                let done = handle(&args.state_dir, messages)?;
                queue.events.delete(&queue.url, &done).await?;
            }
            Ok(_) => {}
            // One queue gone (its region left the pools) must not hold up the others': it is
            // looked up again on the next pass, if a partition still names it.
            Err(e) => {
                log("events", &format!("{e}; looking the queue up again"));
                lost.push(key);
            }
        }
    }
    for key in lost {
        found.remove(&key);
    }
    Ok(())
}

/// Acts on the events of `messages` whose instance carries a node of the agent's map (those
/// of other clusters, and head or login nodes, carry none). Returns the messages done with:
/// all but those whose action Slurm refused (delivered again after the visibility timeout).
fn handle(state_dir: &std::path::Path, messages: Vec<events::Message>) -> Result<Vec<events::Message>> {
    let carriers = NodeMap::at(state_dir)
        .read()
        .context(|| format!("reading the agent's node map in {}", state_dir.display()))?;
    let index = nodemap::by_instance(&carriers);
    Ok(messages
        .into_iter()
        .filter(|m| {
            let Some(event) = Ec2Event::parse(&m.body) else {
                return true; // not an EC2 event: never will be
            };
            index.get(event.instance_id()).is_none_or(|node| act(node, &event))
        })
        .collect())
}

/// (region, route base name) of every partition's queue: one per region of its pools.
fn routes(cluster: &str, docs: &[PartitionDoc]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = docs
        .iter()
        .flat_map(|d| {
            d.pools
                .iter()
                .map(move |p| (p.region.clone(), events_route(cluster, &d.name)))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Powers `node` down for `event` when Slurm has it in service; false when scontrol refused.
fn act(node: &str, event: &Ec2Event) -> bool {
    let state = slurm_state(node);
    let Some(reason) = reason(event, state.as_deref()) else {
        log(
            "events",
            &format!(
                "{node} ({}): {event:?}; Slurm has it {}: nothing to do",
                event.instance_id(),
                state.as_deref().unwrap_or("unknown")
            ),
        );
        return true;
    };
    log(
        "events",
        &format!("{node}: {reason}: requeueing its jobs and powering it down"),
    );
    let done = match event {
        // The instance still runs for EC2's two minutes: its slurmd ends the jobs' steps.
        Ec2Event::SpotInterruption { .. } => set_node_state(node, "power_down_force", &reason),
        Ec2Event::StateChange { .. } => reset_lost_node(node, &reason),
    };
    if !done {
        log(
            "events",
            &format!("{node}: Slurm refused; the event stays queued for another try"),
        );
    }
    done
}

/// Why the node must be powered down now, or None when there is nothing to do: Slurm cannot
/// say (it is not running: the node is restored with slurmctld's state and the sweep deals
/// with it), or the node is already powering down or powered down (the spot watch, suspend or
/// the sweep got there first), or powering up (a launch not yet registered: the sweep replaces
/// it after the provision timeout, cooling its pool down). A node only asked to power down
/// (`POWER_DOWN`, its jobs maybe still completing) is settled for a warning, but an instance
/// that ended under it is set down unless that was done already.
pub fn reason(event: &Ec2Event, slurm_state: Option<&str>) -> Option<String> {
    let state = slurm_state?;
    let flag = |f: &str| slurm_model::node_state_has(state, f);
    let on_its_way = flag("POWERING_UP") || flag("POWERING_DOWN") || flag("POWERED_DOWN");
    let asked = flag("POWER_DOWN");
    let settled = match event {
        Ec2Event::SpotInterruption { .. } => on_its_way || asked,
        Ec2Event::StateChange { .. } => on_its_way || (asked && flag("DOWN")),
    };
    if settled {
        return None;
    }
    Some(match event {
        // The spot watch's prefix: suspend cools the spot pool down on it.
        Ec2Event::SpotInterruption {
            action,
            instance_id,
            time,
        } => format!(
            "{}: {action} (EC2 event at {time} for {instance_id})",
            spot::REASON_PREFIX
        ),
        Ec2Event::StateChange {
            instance_id,
            state,
            time,
        } => format!("instance {instance_id} {state} (EC2 event at {time})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spot() -> Ec2Event {
        Ec2Event::SpotInterruption {
            instance_id: "i-1".into(),
            action: "terminate".into(),
            time: "2026-12-06T10:00:00Z".into(),
        }
    }

    #[test]
    fn a_node_in_service_is_powered_down_with_the_events_reason() {
        let reason = reason(&spot(), Some("ALLOCATED+CLOUD")).expect("acted on");
        assert!(reason.starts_with(spot::REASON_PREFIX), "{reason}");
        assert!(reason.contains("i-1"), "{reason}");
        let ended = Ec2Event::StateChange {
            instance_id: "i-2".into(),
            state: "shutting-down".into(),
            time: "t".into(),
        };
        assert_eq!(
            super::reason(&ended, Some("IDLE+CLOUD")).as_deref(),
            Some("instance i-2 shutting-down (EC2 event at t)")
        );
    }

    #[test]
    fn a_node_already_on_its_way_or_unknown_to_slurm_is_left_alone() {
        for state in [
            "IDLE+CLOUD+POWERING_DOWN",
            "IDLE+CLOUD+POWERED_DOWN",
            "ALLOCATED+CLOUD+POWER_DOWN",
            "IDLE+CLOUD+POWERING_UP",
        ] {
            assert_eq!(reason(&spot(), Some(state)), None, "{state}");
        }
        assert_eq!(reason(&spot(), None), None);
    }

    #[test]
    fn an_instance_ended_under_a_node_asked_to_power_down_is_set_down_once() {
        let ended = Ec2Event::StateChange {
            instance_id: "i-2".into(),
            state: "terminated".into(),
            time: "t".into(),
        };
        // Its job may still be completing on the lost instance: set down.
        assert!(reason(&ended, Some("ALLOCATED+CLOUD+POWER_DOWN")).is_some());
        // Already set down (the shutting-down event before it): nothing more.
        assert_eq!(reason(&ended, Some("DOWN+CLOUD+POWER_DOWN")), None);
        assert_eq!(reason(&ended, Some("DOWN+CLOUD+POWERING_DOWN")), None);
        assert_eq!(reason(&ended, Some("IDLE+CLOUD+POWERING_UP")), None);
    }

    #[test]
    fn each_partition_has_one_queue_per_region_of_its_pools() {
        let mut doc = PartitionDoc {
            name: "gpu".into(),
            ..PartitionDoc::default()
        };
        for region in ["us-east-1", "us-east-1", "us-west-2"] {
            doc.pools.push(hpc_desired_state::PoolDoc {
                region: region.into(),
                subnet_ids: vec![],
                capacity_type: "on-demand".into(),
                capacity_reservation_id: None,
                launch_templates: BTreeMap::new(),
                placement_group: None,
            });
        }
        let got = routes("lab", &[doc]);
        let base = events_route("lab", "gpu");
        assert_eq!(
            got,
            vec![("us-east-1".to_string(), base.clone()), ("us-west-2".to_string(), base)]
        );
    }
}
