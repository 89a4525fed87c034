//! The orphan sweep: instances tagged for the cluster that Slurm has no use for are
//! terminated. An instance is an orphan when its node name is not in the desired state any
//! more (partition removed or shrunk), when it never got a node name (a resume that died
//! between launch and recording it in the node map) and is older than a grace period, or when
//! Slurm reports its node powered down.

use std::collections::{BTreeMap, BTreeSet};

use hpc_aws::ec2::InstanceInfo;
use hpc_desired_state::{tag, PartitionDoc};
use slurm_model::NodeSet;

/// Seconds an untagged instance may exist before it counts as an orphan.
pub const UNTAGGED_GRACE_S: i64 = 600;

/// The first `count(node set)` node names of each node set the desired state defines.
fn node_names<C: FromIterator<String>>(partitions: &[PartitionDoc], count: fn(&NodeSet) -> u32) -> C {
    partitions
        .iter()
        .flat_map(|p| p.to_model().node_sets)
        .flat_map(|s| (1..=count(&s)).map(move |n| slurm_model::node_name(&s.name, n)))
        .collect()
}

/// Every node name the desired state defines.
pub fn known_nodes(partitions: &[PartitionDoc]) -> BTreeSet<String> {
    node_names(partitions, |s| s.max_nodes)
}

/// The always-on nodes (`min_nodes`) the desired state defines.
pub fn static_nodes(partitions: &[PartitionDoc]) -> Vec<String> {
    node_names(partitions, |s| s.static_nodes.min(s.max_nodes))
}

/// The reason hpc-node gives Slurm for a node no pool could launch (resume sets it down).
pub const NO_CAPACITY: &str = "hpc-node: no capacity in any pool";

/// Of the nodes set down for lack of capacity (`downs`: node → Slurm state), those that may
/// serve again: still down, not being powered down, and none of the pools their type
/// launches from cooling down any more (`cooling(partition, pool, instance_type)`). Slurm never
/// brings a down node back by itself: without this a partition lost a node name for good at
/// every capacity shortage (ParallelCluster likewise returns such nodes after its
/// `insufficient_capacity_timeout`).
pub fn capacity_returned(
    docs: &[PartitionDoc],
    downs: &BTreeMap<String, String>,
    cooling: impl Fn(&str, usize, &str) -> bool,
) -> Vec<String> {
    let settled: Vec<String> = downs
        .iter()
        .filter(|(_, state)| {
            let flag = |f: &str| slurm_model::node_state_has(state, f);
            // A node resume set down stays POWERING_UP for Slurm (no instance will come).
            flag("DOWN") && !flag("POWERING_DOWN") && !flag("POWER_DOWN")
        })
        .map(|(node, _)| node.clone())
        .collect();
    let (groups, _unknown) = crate::resume::group_nodes(docs, &settled);
    groups
        .into_iter()
        .filter(|g| {
            docs.iter()
                .find(|d| d.name == g.partition)
                .is_some_and(|doc| !(0..doc.pools.len()).any(|pool| cooling(&doc.name, pool, &g.instance_type)))
        })
        .flat_map(|g| g.nodes)
        .collect()
}

/// What the sweep does for a static node: Slurm never powers one up by itself (it is excluded
/// from power saving), so the agent asks it to, which runs ResumeProgram like any launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticAction {
    /// Powered down (at slurmctld's start, or after a loss): power it up.
    PowerUp,
    /// Slurm counts it up but no instance carries it (ended out of band): power it down now,
    /// rather than after SlurmdTimeout, so that the next pass starts a new one.
    Replace,
}

/// `state` is Slurm's (`IDLE+CLOUD+POWERED_DOWN`, ...); `has_instance`: a pending or running
/// instance is tagged with the node.
pub fn static_action(state: &str, has_instance: bool) -> Option<StaticAction> {
    let flag = |f: &str| slurm_model::node_state_has(state, f);
    if flag("POWERING_UP") || flag("POWERING_DOWN") || flag("POWER_DOWN") {
        return None; // on its way: Slurm or the sweep's provision timeout deals with it
    }
    if flag("POWERED_DOWN") {
        return Some(StaticAction::PowerUp);
    }
    (!has_instance).then_some(StaticAction::Replace)
}

/// Why `instance` (carrying `node`, per the agent's node map) is an orphan, or None.
/// `powered_down` says whether Slurm reports a node powered down (None when Slurm could not
/// be asked).
pub fn orphan_reason(
    instance: &InstanceInfo,
    node: Option<&str>,
    known: &BTreeSet<String>,
    now: i64,
    powered_down: impl Fn(&str) -> Option<bool>,
) -> Option<String> {
    // Head and login nodes (no partition tag) are the cluster's, not the agent's.
    instance.tag(tag::PARTITION)?;
    match node {
        None if instance.launched_at > 0 && now - instance.launched_at > UNTAGGED_GRACE_S => {
            Some(format!("never got a node name in {}s", now - instance.launched_at))
        }
        None => None,
        Some(n) if !known.contains(n) => Some(format!("node {n} is not in the desired state")),
        Some(n) if powered_down(n) == Some(true) => Some(format!("Slurm has node {n} powered down")),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(tags: &[(&str, &str)], launched_at: i64) -> InstanceInfo {
        InstanceInfo {
            id: "i-1".into(),
            state: "running".into(),
            instance_type: "c7i.2xlarge".into(),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            launched_at,
            ..InstanceInfo::default()
        }
    }

    #[test]
    fn static_nodes_are_powered_up_when_down_and_replaced_when_their_instance_is_gone() {
        assert_eq!(
            static_action("IDLE+CLOUD+POWERED_DOWN", false),
            Some(StaticAction::PowerUp)
        );
        assert_eq!(static_action("IDLE+CLOUD+POWERING_UP", true), None);
        assert_eq!(static_action("IDLE+CLOUD+POWERING_UP", false), None);
        assert_eq!(static_action("DOWN+CLOUD+POWERING_DOWN", false), None);
        assert_eq!(static_action("IDLE+CLOUD", true), None);
        assert_eq!(static_action("MIXED+CLOUD", true), None);
        assert_eq!(static_action("IDLE+CLOUD", false), Some(StaticAction::Replace));
        assert_eq!(
            static_action("DOWN+CLOUD+NOT_RESPONDING", false),
            Some(StaticAction::Replace)
        );
    }

    #[test]
    fn orphans_are_recognised() {
        let known: BTreeSet<String> = ["cpu-c7i-2xl-1".to_string()].into_iter().collect();
        let compute = instance(&[(tag::PARTITION, "c/cpu")], 1000);
        let up = |_: &str| Some(false);
        assert_eq!(orphan_reason(&compute, Some("cpu-c7i-2xl-1"), &known, 2000, up), None);
        assert!(orphan_reason(&compute, Some("cpu-c7i-2xl-9"), &known, 2000, up)
            .is_some_and(|r| r.contains("not in the desired state")));
        assert!(
            orphan_reason(&compute, Some("cpu-c7i-2xl-1"), &known, 2000, |_| Some(true))
                .is_some_and(|r| r.contains("powered down"))
        );
        assert_eq!(
            orphan_reason(&compute, None, &known, 1500, up),
            None,
            "within the grace period"
        );
        assert!(orphan_reason(&compute, None, &known, 1000 + UNTAGGED_GRACE_S + 1, up).is_some());
        let head = instance(&[(tag::ROLE, "head")], 1);
        assert_eq!(orphan_reason(&head, None, &known, 1_000_000, up), None);
    }

    #[test]
    fn a_node_down_for_lack_of_capacity_returns_once_none_of_its_pools_cools() {
        let pool = hpc_desired_state::PoolDoc {
            region: "us-east-1".into(),
            subnet_ids: vec!["subnet-1".into()],
            capacity_type: "on_demand".into(),
            capacity_reservation_id: None,
            launch_templates: BTreeMap::new(),
            placement_group: None,
        };
        let shape = |t: &str| hpc_desired_state::ShapeDoc {
            instance_type: t.into(),
            vcpus: 8,
            cores: 4,
            threads_per_core: 2,
            memory_mib: 16384,
            ..Default::default()
        };
        let docs = [PartitionDoc {
            cluster: "c".into(),
            name: "cpu".into(),
            shapes: vec![shape("c7i.2xlarge"), shape("c7i.4xlarge")],
            max_nodes: 4,
            pools: vec![pool.clone(), pool],
            ..Default::default()
        }];
        let downs: BTreeMap<String, String> = [
            ("cpu-c7i-2xl-1", "DOWN+CLOUD+POWERED_DOWN"),
            ("cpu-c7i-2xl-2", "DOWN+CLOUD+NOT_RESPONDING+POWERING_UP"),
            ("cpu-c7i-2xl-3", "DOWN+CLOUD+POWERING_DOWN"),
            ("cpu-c7i-4xl-1", "DOWN+CLOUD+POWERED_DOWN"),
            ("cpu-c7i-4xl-2", "IDLE+CLOUD+POWERED_DOWN"),
            ("gone-c7i-2xl-1", "DOWN+CLOUD+POWERED_DOWN"),
        ]
        .into_iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
        // The 2xlarge's second pool still cools: only the 4xlarge node returns.
        let cooling = |partition: &str, pool: usize, t: &str| partition == "cpu" && pool == 1 && t == "c7i.2xlarge";
        assert_eq!(capacity_returned(&docs, &downs, cooling), ["cpu-c7i-4xl-1"]);
        assert_eq!(
            capacity_returned(&docs, &downs, |_, _, _| false),
            ["cpu-c7i-2xl-1", "cpu-c7i-2xl-2", "cpu-c7i-4xl-1"]
        );
    }
}
