//! Resume: turn the node names Slurm wants powered up into EC2 instances, trying the
//! partition's capacity pools in order within one invocation. A pool that reports no
//! capacity is skipped by later resumes until its cool-down passes; nodes no pool can place
//! are returned so the caller can set them down (Slurm then requeues their jobs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use hpc_aws::ec2::{Ec2, FleetError, FleetInstance, FleetOverride, FleetRequest};
use hpc_aws::AwsError;
use hpc_desired_state::{PartitionDoc, PoolDoc};

/// Fleet error codes that mean "this pool has no capacity now" (as opposed to a mistake).
pub const CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
    "UnfulfillableCapacity",
    "InsufficientFreeAddressesInSubnet",
    "InsufficientCapacityOnHost",
];

/// Most nodes one instant-fleet call asks for; larger resumes are split.
pub const FLEET_BATCH: usize = 500;

/// Nodes of one partition and instance type: launched together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub partition: String,
    pub instance_type: String,
    pub nodes: Vec<String>,
}

/// Groups node names by partition and instance type, using the node set names of the one
/// Slurm model. Returns the groups and the names no partition knows.
pub fn group_nodes(partitions: &[PartitionDoc], nodes: &[String]) -> (Vec<Group>, Vec<String>) {
    let mut groups: Vec<Group> = Vec::new();
    let mut unknown = Vec::new();
    let sets: Vec<(String, String, String)> = partitions
        .iter()
        .flat_map(|p| {
            p.to_model()
                .node_sets
                .into_iter()
                .map(|s| (p.name.clone(), s.name.clone(), s.shape.instance_type.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    for node in nodes {
        let found = sets.iter().find(|(_, set, _)| {
            node.strip_prefix(set.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        });
        match found {
            Some((partition, _, itype)) => {
                match groups
                    .iter_mut()
                    .find(|g| &g.partition == partition && &g.instance_type == itype)
                {
                    Some(g) => g.nodes.push(node.clone()),
                    None => groups.push(Group {
                        partition: partition.clone(),
                        instance_type: itype.clone(),
                        nodes: vec![node.clone()],
                    }),
                }
            }
            None => unknown.push(node.clone()),
        }
    }
    (groups, unknown)
}

/// Pools that reported no capacity, and until when (unix seconds) they are skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cooldowns {
    until: BTreeMap<String, u64>,
    path: Option<PathBuf>,
}

pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Cooldowns {
    /// Loads the cool-downs kept in `path` (a missing or unreadable file means none).
    pub fn load(path: &Path) -> Self {
        let until = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| serde_json::from_str::<BTreeMap<String, u64>>(&s).ok())
            .unwrap_or_default();
        Cooldowns {
            until,
            path: Some(path.to_path_buf()),
        }
    }

    pub fn key(partition: &str, pool: usize, instance_type: &str) -> String {
        format!("{partition}/{pool}/{instance_type}")
    }

    pub fn active(&self, key: &str, now: u64) -> bool {
        self.until.get(key).is_some_and(|t| *t > now)
    }

    pub fn start(&mut self, key: String, now: u64, seconds: u64) {
        self.until.insert(key, now + seconds);
    }

    /// Writes the cool-downs back (atomically), dropping expired ones.
    pub fn save(&mut self, now: u64) -> std::io::Result<()> {
        self.until.retain(|_, t| *t > now);
        let Some(path) = &self.path else { return Ok(()) };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::Value::from(serde_json::Map::from_iter(
                self.until.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(*v))),
            ))
            .to_string(),
        )?;
        std::fs::rename(tmp, path)
    }
}

/// A node that got an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub pool: usize,
    pub instance: FleetInstance,
}

/// One fleet call: which pool, how many asked for and launched, what EC2 said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub pool: usize,
    pub requested: usize,
    pub launched: usize,
    pub errors: Vec<FleetError>,
    pub skipped_cooldown: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupOutcome {
    pub placed: Vec<Placement>,
    pub unplaced: Vec<String>,
    pub attempts: Vec<Attempt>,
}

/// Where a pool launches: its EC2 client (region) is chosen by the caller.
pub trait PoolClients {
    fn ec2_for(&self, pool: &PoolDoc) -> Ec2;
}

/// Launches a group, pool after pool, until every node has an instance or no pool is left.
pub async fn launch_group(
    clients: &dyn PoolClients,
    cluster: &str,
    partition: &PartitionDoc,
    group: &Group,
    cooldowns: &mut Cooldowns,
    now: u64,
) -> Result<GroupOutcome, AwsError> {
    let mut outcome = GroupOutcome::default();
    let mut waiting: Vec<String> = group.nodes.clone();
    for (i, pool) in partition.pools.iter().enumerate() {
        if waiting.is_empty() {
            break;
        }
        let key = Cooldowns::key(&partition.name, i, &group.instance_type);
        if cooldowns.active(&key, now) {
            outcome.attempts.push(Attempt {
                pool: i,
                requested: 0,
                launched: 0,
                errors: vec![],
                skipped_cooldown: true,
            });
            continue;
        }
        let Some(template) = pool.launch_templates.get(&group.instance_type) else {
            continue;
        };
        let overrides: Vec<FleetOverride> = pool
            .subnet_ids
            .iter()
            .enumerate()
            .map(|(p, subnet)| FleetOverride {
                launch_template_id: template.clone(),
                instance_type: group.instance_type.clone(),
                subnet_id: subnet.clone(),
                priority: p as f64,
            })
            .collect();
        // Instant fleets are asked for at most FLEET_BATCH nodes at a time.
        loop {
            let batch = waiting.len().min(FLEET_BATCH);
            let request = FleetRequest {
                overrides: overrides.clone(),
                count: i32::try_from(batch).unwrap_or(i32::MAX),
                spot: pool.capacity_type == "spot",
                allocation_strategy: partition.allocation_strategy.clone(),
                tags: vec![
                    ("hpcforge:cluster".into(), cluster.to_string()),
                    ("hpcforge:partition".into(), format!("{cluster}/{}", partition.name)),
                ],
            };
            let fleet = match clients.ec2_for(pool).launch_fleet(&request).await {
                Ok(f) => f,
                // A whole-call capacity error (RunInstances-style) fails the pool like fleet errors do.
                Err(e) if e.code_is(CAPACITY_CODES) => hpc_aws::ec2::FleetOutcome {
                    instances: vec![],
                    errors: vec![FleetError {
                        code: e.code.clone().unwrap_or_default(),
                        message: e.message.clone(),
                        instance_type: Some(group.instance_type.clone()),
                        subnet_id: None,
                    }],
                },
                Err(e) => return Err(e),
            };
            let launched = fleet.instances.len().min(batch);
            let rest = waiting.split_off(launched);
            for (node, instance) in waiting.into_iter().zip(fleet.instances.iter().cloned()) {
                outcome.placed.push(Placement {
                    node,
                    pool: i,
                    instance,
                });
            }
            waiting = rest;
            let no_capacity = fleet.errors.iter().any(|e| CAPACITY_CODES.contains(&e.code.as_str()));
            if no_capacity {
                cooldowns.start(key.clone(), now, u64::from(partition.ice_cooldown_s));
            }
            outcome.attempts.push(Attempt {
                pool: i,
                requested: batch,
                launched,
                errors: fleet.errors,
                skipped_cooldown: false,
            });
            if no_capacity || launched < batch || waiting.is_empty() {
                break;
            }
        }
    }
    outcome.unplaced = waiting;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, types: &[&str]) -> PartitionDoc {
        let json = serde_json::json!({
            "schema": 1, "cluster": "c", "name": name,
            "shapes": types.iter().map(|t| serde_json::json!({
                "instance_type": t, "vcpus": 8, "cores": 4, "threads_per_core": 2, "memory_mib": 16384,
                "gpus": 0, "gpu_model": null, "gpu_memory_mib": null, "efa": false
            })).collect::<Vec<_>>(),
            "min_nodes": 0, "max_nodes": 4, "pools": [], "allocation_strategy": "prioritized",
            "provision_timeout_s": 600, "ice_cooldown_s": 600, "max_time": null, "default_time": null,
            "max_nodes_per_job": null, "min_nodes_per_job": null, "allow_accounts": [], "allow_groups": [],
            "allow_qos": [], "priority_tier": null, "oversubscribe": null, "exclusive": false, "default": false,
            "extra": {}, "ami_id": "ami-1", "root_volume_size": 100, "instance_profile_arn": null,
            "user_data_extra": null, "tags": {}
        });
        serde_json::from_value(json).expect("doc")
    }

    #[test]
    fn nodes_are_grouped_by_partition_and_type() {
        let parts = [
            doc("cpu", &["c7i.2xlarge", "c7i.4xlarge"]),
            doc("cpu2", &["c7i.2xlarge"]),
        ];
        let nodes: Vec<String> = [
            "cpu-c7i-2xl-1",
            "cpu-c7i-4xl-2",
            "cpu-c7i-2xl-3",
            "cpu2-c7i-2xl-1",
            "gpu-p5-48xl-1",
            "cpu-c7i-2xl-",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (groups, unknown) = group_nodes(&parts, &nodes);
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0].nodes, vec!["cpu-c7i-2xl-1", "cpu-c7i-2xl-3"]);
        assert_eq!(groups[1].instance_type, "c7i.4xlarge");
        assert_eq!(groups[2].partition, "cpu2");
        assert_eq!(unknown, vec!["gpu-p5-48xl-1", "cpu-c7i-2xl-"]);
    }

    #[test]
    fn cooldowns_expire_and_persist() {
        let dir = std::env::temp_dir().join(format!("hpc-node-cooldown-{}", std::process::id()));
        let path = dir.join("cooldowns.json");
        let mut c = Cooldowns::load(&path);
        c.start(Cooldowns::key("gpu", 0, "p5.48xlarge"), 1000, 600);
        assert!(c.active("gpu/0/p5.48xlarge", 1599));
        assert!(!c.active("gpu/0/p5.48xlarge", 1600));
        c.save(1000).expect("save");
        assert!(Cooldowns::load(&path).active("gpu/0/p5.48xlarge", 1200));
        let _ = std::fs::remove_dir_all(dir);
    }
}
