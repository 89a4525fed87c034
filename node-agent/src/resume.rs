//! Resume: turn the node names Slurm wants powered up into EC2 instances, trying the
//! partition's capacity pools in order within one invocation. A pool that reports no
//! capacity is skipped by later resumes until its cool-down passes; nodes no pool can place
//! are returned so the caller can set them down (Slurm then requeues their jobs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::statefile;

use hpc_aws::ec2::{Ec2, FleetError, FleetInstance, FleetOverride, FleetRequest, Market};
use hpc_aws::AwsError;
use hpc_desired_state::{tag, PartitionDoc, PoolDoc, ScalingStrategy};

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

/// Most fleet calls one pool has in flight at once (four batches are twice EC2's launch burst).
pub const PARALLEL_CALLS: usize = 4;

/// EC2's answer when its launch rate is spent (a bucket of about 1,000 instances per account
/// and region, refilled at about 2 a second): the call launched nothing and may be made again.
pub const RATE_CODES: &[&str] = &["RequestLimitExceeded"];

/// How long one resume waits, in all, for EC2's launch rate before it leaves the nodes it could
/// not launch to Slurm (set down, their jobs requeued): well inside a provision timeout.
pub const RATE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

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

/// Where the instance carrying `node` was launched: the node's partition and the index of its
/// pool that holds `subnet` in `region`.
pub fn launched_from<'a>(
    docs: &'a [PartitionDoc],
    node: &str,
    region: &str,
    subnet: &str,
) -> Option<(&'a PartitionDoc, usize)> {
    let (groups, _) = group_nodes(docs, &[node.to_string()]);
    let partition = &groups.first()?.partition;
    let doc = docs.iter().find(|d| &d.name == partition)?;
    let pool = doc
        .pools
        .iter()
        .position(|p| p.region == region && p.subnet_ids.iter().any(|s| s == subnet))?;
    Some((doc, pool))
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

    /// Takes in the cool-downs another copy started (a cool-down only starts or lengthens).
    pub fn merge(&mut self, other: Cooldowns) {
        for (key, until) in other.until {
            let mine = self.until.entry(key).or_insert(until);
            *mine = (*mine).max(until);
        }
    }

    /// Takes in what other programs saved since this one loaded the file.
    pub fn refresh(&mut self) {
        if let Some(path) = self.path.clone() {
            self.merge(Cooldowns::load(&path));
        }
    }

    /// Writes the cool-downs back, dropping expired ones. Under the state directory's lock it
    /// merges with what other programs wrote since this one loaded the file (a cool-down only
    /// ever starts or lengthens, so the later end wins), then replaces the file atomically.
    pub fn save(&mut self, now: u64) -> std::io::Result<()> {
        let Some(path) = self.path.clone() else {
            self.until.retain(|_, t| *t > now);
            return Ok(());
        };
        let _lock = statefile::lock_dir(path.parent().unwrap_or(Path::new(".")))?;
        self.merge(Cooldowns::load(&path));
        self.until.retain(|_, t| *t > now);
        let doc = serde_json::Value::from(serde_json::Map::from_iter(
            self.until.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(*v))),
        ));
        statefile::write_atomic(&path, doc.to_string().as_bytes())
    }
}

/// A node that got an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub pool: usize,
    pub instance: FleetInstance,
}

/// Why a pool was passed over without a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// It reported no capacity recently.
    Cooldown,
    /// Its reservation or Capacity Block cannot take the group now (the reason).
    Reservation(String),
}

/// One fleet call: which pool, how many asked for and launched, what EC2 said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub pool: usize,
    pub requested: usize,
    pub launched: usize,
    /// Instances of a partly launched job, terminated at once (all-or-nothing).
    pub released: usize,
    pub errors: Vec<FleetError>,
    pub skipped: Option<Skip>,
}

impl Attempt {
    fn skipped(pool: usize, why: Skip) -> Self {
        Attempt {
            pool,
            requested: 0,
            launched: 0,
            released: 0,
            errors: vec![],
            skipped: Some(why),
        }
    }
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

/// The jobs Slurm is resuming nodes for, from the file named by `SLURM_RESUME_FILE`
/// (Slurm 22.05 and later): which nodes each job needs powered up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeJobs {
    /// (job id, nodes of the job being resumed), in Slurm's order.
    pub jobs: Vec<(u64, Vec<String>)>,
}

impl ResumeJobs {
    /// Parses Slurm's resume file (JSON with `jobs[].job_id` and the job's nodes to resume).
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("the resume file is not JSON: {e}"))?;
        let mut jobs = Vec::new();
        for job in value.get("jobs").and_then(|j| j.as_array()).into_iter().flatten() {
            let id = job.get("job_id").and_then(|v| v.as_u64()).unwrap_or(0);
            // Slurm 23.02 and later say `nodes_resume` (and `nodes_alloc`); 22.05 says `nodes`.
            let resumed = job.get("nodes_resume").or_else(|| job.get("nodes"));
            let Some(nodes) = resumed.and_then(|v| v.as_str()) else {
                continue;
            };
            let nodes = slurm_model::expand_hostlist(nodes).map_err(|e| format!("job {id}'s nodes_resume: {e}"))?;
            jobs.push((id, nodes));
        }
        Ok(ResumeJobs { jobs })
    }

    /// Reads the file `SLURM_RESUME_FILE` names; none when the variable is unset (a resume
    /// by hand, or an older Slurm).
    pub fn from_env() -> Result<Self, String> {
        match std::env::var_os("SLURM_RESUME_FILE") {
            None => Ok(ResumeJobs::default()),
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("reading SLURM_RESUME_FILE {}: {e}", Path::new(&path).display()))?;
                Self::parse(&text)
            }
        }
    }

    /// The group's nodes cut into what launches together: under all-or-nothing each job's
    /// nodes of the group (a node two jobs wait for goes with the first), then every other
    /// node alone; under best effort every node alone.
    pub fn units(&self, group: &Group, strategy: ScalingStrategy) -> Vec<Vec<String>> {
        if strategy == ScalingStrategy::BestEffort {
            return group.nodes.iter().map(|n| vec![n.clone()]).collect();
        }
        let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
        let mut units: Vec<Vec<String>> = Vec::new();
        for (_, nodes) in &self.jobs {
            let mut unit = Vec::new();
            for n in nodes {
                if group.nodes.contains(n) && !taken.contains_key(n.as_str()) {
                    taken.insert(n, units.len());
                    unit.push(n.clone());
                }
            }
            if !unit.is_empty() {
                units.push(unit);
            }
        }
        for n in &group.nodes {
            if !taken.contains_key(n.as_str()) {
                units.push(vec![n.clone()]);
            }
        }
        units
    }
}

/// What a pool's reservation lets the group launch: none (with why) or up to a count.
async fn reservation_room(ec2: &Ec2, pool: &PoolDoc, instance_type: &str) -> Result<Option<usize>, Skip> {
    let Some(id) = &pool.capacity_reservation_id else {
        return Ok(None);
    };
    let found = ec2
        .capacity_reservations(std::slice::from_ref(id))
        .await
        .map_err(|e| Skip::Reservation(format!("{id}: {e}")))?;
    let Some(r) = found.into_iter().next() else {
        return Err(Skip::Reservation(format!("{id} does not exist")));
    };
    let kind = if r.capacity_block {
        "Capacity Block"
    } else {
        "capacity reservation"
    };
    if r.instance_type != instance_type {
        return Err(Skip::Reservation(format!("{kind} {id} is for {}", r.instance_type)));
    }
    if r.state != "active" {
        let when = match (r.state.as_str(), r.start_s) {
            ("scheduled", Some(t)) => format!(" (starts at unix time {t})"),
            _ => String::new(),
        };
        return Err(Skip::Reservation(format!("{kind} {id} is {}{when}", r.state)));
    }
    if r.available <= 0 {
        return Err(Skip::Reservation(format!(
            "{kind} {id} has all {} instances in use",
            r.total
        )));
    }
    Ok(Some(usize::try_from(r.available).unwrap_or(0)))
}

fn market_of(pool: &PoolDoc) -> Market {
    match pool.capacity_type.as_str() {
        "spot" => Market::Spot,
        "capacity_block" => Market::CapacityBlock,
        _ => Market::OnDemand,
    }
}

/// The first units that fit `limit` nodes (at least the first unit when it fits `room`).
fn take_units(waiting: &mut Vec<Vec<String>>, limit: usize, room: Option<usize>) -> Vec<Vec<String>> {
    let cap = room.map_or(limit, |r| r.min(limit));
    let mut size = 0;
    let mut n = 0;
    for unit in waiting.iter() {
        // A job larger than one batch goes alone (an instant fleet takes it in one call).
        let fits = size + unit.len() <= cap || (n == 0 && room.is_none_or(|r| unit.len() <= r));
        if !fits {
            break;
        }
        size += unit.len();
        n += 1;
    }
    waiting.drain(..n).collect()
}

/// Waits between launches refused for EC2's launch rate: 1 s, doubling to 16 s, back to 1 s
/// after a launch goes through, until `patience` is spent.
struct Pacing {
    next: std::time::Duration,
    left: std::time::Duration,
}

impl Pacing {
    fn new(patience: std::time::Duration) -> Self {
        Pacing {
            next: std::time::Duration::from_secs(1),
            left: patience,
        }
    }

    fn launched(&mut self) {
        self.next = std::time::Duration::from_secs(1);
    }

    /// Sleeps before the next try; false (at once) when the patience is spent.
    async fn wait(&mut self) -> bool {
        if self.left.is_zero() {
            return false;
        }
        let pause = self.next.min(self.left);
        tokio::time::sleep(pause).await;
        self.left -= pause;
        self.next = (self.next * 2).min(std::time::Duration::from_secs(16));
        true
    }
}

/// Launches a group, pool after pool, until every node has an instance or no pool is left.
/// Nodes launch in the units [`ResumeJobs::units`] cuts for the partition's scaling strategy:
/// a unit gets all its instances from one pool or none (a partial one is terminated at once).
pub async fn launch_group(
    clients: &dyn PoolClients,
    cluster: &str,
    partition: &PartitionDoc,
    group: &Group,
    jobs: &ResumeJobs,
    cooldowns: &mut Cooldowns,
    now: u64,
) -> Result<GroupOutcome, AwsError> {
    let mut outcome = GroupOutcome::default();
    let mut waiting = jobs.units(group, partition.scaling_strategy);
    let mut pacing = Pacing::new(RATE_PATIENCE);
    for (i, pool) in partition.pools.iter().enumerate() {
        if waiting.is_empty() {
            break;
        }
        let key = Cooldowns::key(&partition.name, i, &group.instance_type);
        if cooldowns.active(&key, now) {
            outcome.attempts.push(Attempt::skipped(i, Skip::Cooldown));
            continue;
        }
        let Some(template) = pool.launch_templates.get(&group.instance_type) else {
            continue;
        };
        let ec2 = clients.ec2_for(pool);
        let room = match reservation_room(&ec2, pool, &group.instance_type).await {
            Ok(room) => room,
            Err(why) => {
                outcome.attempts.push(Attempt::skipped(i, why));
                continue;
            }
        };
        let request = FleetRequest {
            overrides: pool
                .subnet_ids
                .iter()
                .enumerate()
                .map(|(p, subnet)| FleetOverride {
                    launch_template_id: template.clone(),
                    instance_type: group.instance_type.clone(),
                    subnet_id: subnet.clone(),
                    priority: p as f64,
                })
                .collect(),
            count: 0,
            market: market_of(pool),
            allocation_strategy: partition.allocation_strategy.clone(),
            tags: vec![
                (tag::CLUSTER.into(), cluster.to_string()),
                (tag::PARTITION.into(), tag::partition_value(cluster, &partition.name)),
            ],
        };
        let launch = PoolLaunch {
            ec2: &ec2,
            pool: i,
            request,
            room,
        };
        if launch.run(&mut waiting, &mut outcome, &mut pacing).await? {
            cooldowns.start(key, now, u64::from(partition.ice_cooldown_s));
        }
    }
    outcome.unplaced = waiting.into_iter().flatten().collect();
    Ok(outcome)
}

/// Launches from one pool: its fleet request (without a count) and what its reservation holds.
struct PoolLaunch<'a> {
    ec2: &'a Ec2,
    pool: usize,
    request: FleetRequest,
    room: Option<usize>,
}

impl PoolLaunch<'_> {
    /// Takes whole units from `waiting` into fleet calls of at most FLEET_BATCH nodes (halved
    /// while EC2's launch rate is spent), up to PARALLEL_CALLS of them sent at once, until they
    /// are launched or the pool fails; units it could not launch go back to `waiting`. True
    /// when the pool reported no capacity.
    async fn run(
        mut self,
        waiting: &mut Vec<Vec<String>>,
        outcome: &mut GroupOutcome,
        pacing: &mut Pacing,
    ) -> Result<bool, AwsError> {
        let (mut limit, mut parallel) = (FLEET_BATCH, PARALLEL_CALLS);
        loop {
            let batches = self.take_batches(waiting, limit, parallel);
            if batches.is_empty() {
                if let Some(r) = self.room {
                    let need = waiting.first().map_or(0, Vec::len);
                    let why = format!("{r} instance(s) left in the reservation, a job needs {need}");
                    outcome
                        .attempts
                        .push(Attempt::skipped(self.pool, Skip::Reservation(why)));
                }
                return Ok(false);
            }
            let ec2 = self.ec2;
            let calls = batches.iter().map(|batch| {
                let mut request = self.request.clone();
                request.count = i32::try_from(units_size(batch)).unwrap_or(i32::MAX);
                async move { ec2.launch_fleet(&request).await }
            });
            let answers = futures::future::join_all(calls).await;
            let round = self.settle(batches, answers, outcome).await?;
            requeue(waiting, round.back);
            if round.launched > 0 {
                pacing.launched();
            }
            if round.no_capacity || round.short || waiting.is_empty() {
                return Ok(round.no_capacity);
            }
            if round.throttled > 0 {
                if !pacing.wait().await {
                    // The launch rate outlasted the resume's patience: the next pool may be in
                    // another region, with its own rate.
                    return Ok(false);
                }
                // Smaller and one at a time until the bucket refills.
                limit = (limit.min(round.throttled) / 2).max(1);
                parallel = 1;
            }
        }
    }

    /// Up to `parallel` batches of whole units, each within `limit` and all within the
    /// reservation's room.
    fn take_batches(&self, waiting: &mut Vec<Vec<String>>, limit: usize, parallel: usize) -> Vec<Vec<Vec<String>>> {
        let mut room = self.room;
        let mut batches = Vec::new();
        while batches.len() < parallel {
            let batch = take_units(waiting, limit, room);
            if batch.is_empty() {
                break;
            }
            if let Some(r) = room.as_mut() {
                *r = r.saturating_sub(units_size(&batch));
            }
            batches.push(batch);
        }
        batches
    }

    /// Places what a round of calls launched, releases partial units and says what is left.
    /// Any error but capacity and the launch rate fails the resume (after the round is placed
    /// and released, so nothing launched is left unaccounted for).
    async fn settle(
        &mut self,
        batches: Vec<Vec<Vec<String>>>,
        answers: Vec<Result<hpc_aws::ec2::FleetOutcome, AwsError>>,
        outcome: &mut GroupOutcome,
    ) -> Result<Round, AwsError> {
        let mut round = Round::default();
        let mut extra = Vec::new();
        let mut failure = None;
        for (batch, answer) in batches.into_iter().zip(answers) {
            let requested = units_size(&batch);
            let fleet = match answer {
                Ok(fleet) => fleet,
                Err(e) if e.code_is(RATE_CODES) => {
                    outcome
                        .attempts
                        .push(self.attempt(requested, 0, 0, vec![self.fleet_error(&e)]));
                    round.throttled += requested;
                    round.back.extend(batch);
                    continue;
                }
                // A whole-call capacity error (RunInstances-style) fails the pool as fleet errors do.
                Err(e) if e.code_is(CAPACITY_CODES) => hpc_aws::ec2::FleetOutcome {
                    instances: vec![],
                    errors: vec![self.fleet_error(&e)],
                },
                Err(e) => {
                    failure.get_or_insert(e);
                    round.back.extend(batch);
                    continue;
                }
            };
            let launched = fleet.instances.len();
            let (short, released) = self.place(batch, fleet.instances, outcome);
            round.launched += launched;
            round.short |= launched < requested;
            round.no_capacity |= fleet.errors.iter().any(|e| CAPACITY_CODES.contains(&e.code.as_str()));
            if let Some(r) = self.room.as_mut() {
                *r = r.saturating_sub(launched);
            }
            outcome
                .attempts
                .push(self.attempt(requested, launched, released.len(), fleet.errors));
            round.back.extend(short);
            extra.extend(released);
        }
        // What could not complete a unit is released now, not left to the sweep.
        if !extra.is_empty() {
            self.ec2.request_termination(&extra).await?;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(round),
        }
    }

    /// Gives whole units their instances; returns the units left short and the instances left over.
    fn place(
        &self,
        batch: Vec<Vec<String>>,
        instances: Vec<FleetInstance>,
        outcome: &mut GroupOutcome,
    ) -> (Vec<Vec<String>>, Vec<String>) {
        let mut left = instances.len();
        let mut instances = instances.into_iter();
        let mut short = Vec::new();
        for unit in batch {
            if unit.len() > left {
                short.push(unit);
                continue;
            }
            left -= unit.len();
            for (node, instance) in unit.into_iter().zip(instances.by_ref()) {
                outcome.placed.push(Placement {
                    node,
                    pool: self.pool,
                    instance,
                });
            }
        }
        (short, instances.map(|f| f.id).collect())
    }

    fn attempt(&self, requested: usize, launched: usize, released: usize, errors: Vec<FleetError>) -> Attempt {
        Attempt {
            pool: self.pool,
            requested,
            launched,
            released,
            errors,
            skipped: None,
        }
    }

    fn fleet_error(&self, e: &AwsError) -> FleetError {
        FleetError {
            code: e.code.clone().unwrap_or_default(),
            message: e.message.clone(),
            instance_type: self.request.overrides.first().map(|o| o.instance_type.clone()),
            subnet_id: None,
        }
    }
}

/// What one round of concurrent fleet calls left.
#[derive(Default)]
struct Round {
    /// Units to launch again (short, throttled or failed), in their order.
    back: Vec<Vec<String>>,
    launched: usize,
    /// Nodes asked for in calls refused for the launch rate.
    throttled: usize,
    /// A call launched fewer than it asked for.
    short: bool,
    no_capacity: bool,
}

fn units_size(units: &[Vec<String>]) -> usize {
    units.iter().map(Vec::len).sum()
}

/// Puts `units` back at the front of `waiting`, in order.
fn requeue(waiting: &mut Vec<Vec<String>>, mut units: Vec<Vec<String>>) {
    units.append(waiting);
    *waiting = units;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, types: &[&str]) -> PartitionDoc {
        let shape = |t: &&str| hpc_desired_state::ShapeDoc {
            instance_type: t.to_string(),
            vcpus: 8,
            cores: 4,
            threads_per_core: 2,
            memory_mib: 16384,
            ..Default::default()
        };
        PartitionDoc {
            cluster: "c".into(),
            name: name.into(),
            shapes: types.iter().map(shape).collect(),
            max_nodes: 4,
            ..Default::default()
        }
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
    fn slurms_resume_file_cuts_a_group_into_jobs_under_all_or_nothing_only() {
        let jobs = ResumeJobs::parse(
            r#"{"all_nodes_resume":"cpu-c7i-2xl-[1-6]","jobs":[
                {"job_id":1,"nodes_alloc":"cpu-c7i-2xl-[1-3]","nodes_resume":"cpu-c7i-2xl-[1-3]"},
                {"job_id":2,"nodes_alloc":"cpu-c7i-2xl-[3-4]","nodes_resume":"cpu-c7i-2xl-[3-4]"},
                {"job_id":3,"nodes_alloc":"gpu-p5-48xl-1","nodes_resume":"gpu-p5-48xl-1"}]}"#,
        )
        .expect("parse");
        assert_eq!(jobs.jobs.len(), 3);
        let group = Group {
            partition: "cpu".into(),
            instance_type: "c7i.2xlarge".into(),
            nodes: (1..=6).map(|i| format!("cpu-c7i-2xl-{i}")).collect(),
        };
        let units = jobs.units(&group, ScalingStrategy::AllOrNothing);
        let sizes: Vec<usize> = units.iter().map(Vec::len).collect();
        // Job 1 whole, job 2 without the node job 1 took, then nodes 5 and 6 alone.
        assert_eq!(sizes, vec![3, 1, 1, 1], "{units:?}");
        assert_eq!(units[1], vec!["cpu-c7i-2xl-4"]);
        assert!(jobs
            .units(&group, ScalingStrategy::BestEffort)
            .iter()
            .all(|u| u.len() == 1));
        let old =
            ResumeJobs::parse(r#"{"jobs":[{"job_id":1,"nodes":"cpu-c7i-2xl-[1-2]"}],"all_nodes":"cpu-c7i-2xl-[1-2]"}"#)
                .expect("Slurm 22.05's form");
        assert_eq!(
            old.jobs,
            vec![(1, vec!["cpu-c7i-2xl-1".to_string(), "cpu-c7i-2xl-2".to_string()])]
        );
        assert!(ResumeJobs::parse("not json").is_err());
        assert!(ResumeJobs::parse(r#"{"jobs":[{"job_id":1,"nodes_resume":"cpu-[1-"}]}"#).is_err());
    }

    #[test]
    fn batches_take_whole_units_within_the_batch_and_the_reservation() {
        let unit = |n: usize| (0..n).map(|i| format!("n{i}")).collect::<Vec<_>>();
        let mut waiting = vec![unit(3), unit(2), unit(4)];
        assert_eq!(take_units(&mut waiting, 5, None).len(), 2);
        assert_eq!(waiting.len(), 1);
        // A job larger than a batch goes alone; one larger than the reservation not at all.
        let mut waiting = vec![unit(7), unit(1)];
        assert_eq!(take_units(&mut waiting, 5, None), vec![unit(7)]);
        assert!(take_units(&mut waiting.clone(), 5, Some(0)).is_empty());
        let mut big = vec![unit(3)];
        assert!(take_units(&mut big, 5, Some(2)).is_empty());
        assert_eq!(big.len(), 1);
    }

    #[test]
    fn a_node_and_its_instances_subnet_lead_to_the_pool_it_was_launched_from() {
        let pool = |region: &str, subnet: &str| PoolDoc {
            region: region.into(),
            subnet_ids: vec![subnet.into()],
            capacity_type: "spot".into(),
            capacity_reservation_id: None,
            launch_templates: BTreeMap::new(),
            placement_group: None,
        };
        let mut cpu = doc("cpu", &["c7i.2xlarge"]);
        cpu.pools = vec![pool("us-east-1", "subnet-a"), pool("us-west-2", "subnet-b")];
        let docs = [cpu];
        let found = launched_from(&docs, "cpu-c7i-2xl-1", "us-west-2", "subnet-b");
        assert_eq!(found.map(|(d, p)| (d.name.as_str(), p)), Some(("cpu", 1)));
        assert!(launched_from(&docs, "cpu-c7i-2xl-1", "us-east-1", "subnet-b").is_none());
        assert!(launched_from(&docs, "gpu-p5-48xl-1", "us-east-1", "subnet-a").is_none());
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

        // Two programs loaded the file before either saved: neither loses the other's.
        let mut resume = Cooldowns::load(&path);
        let mut suspend = Cooldowns::load(&path);
        resume.start(Cooldowns::key("gpu", 1, "p5.48xlarge"), 1000, 300);
        suspend.start(Cooldowns::key("cpu", 0, "c7i.large"), 1000, 900);
        suspend.start(Cooldowns::key("gpu", 0, "p5.48xlarge"), 1000, 60);
        resume.save(1000).expect("save");
        suspend.save(1000).expect("save");
        let both = Cooldowns::load(&path);
        assert!(both.active("gpu/1/p5.48xlarge", 1200), "resume's cool-down was lost");
        assert!(both.active("cpu/0/c7i.large", 1800));
        assert!(
            both.active("gpu/0/p5.48xlarge", 1500),
            "a shorter cool-down cut a longer one"
        );

        // A resume that loaded the file before a suspend saved sees it once it refreshes.
        let mut late = Cooldowns::load(&path);
        let mut early = Cooldowns::load(&path);
        late.start(Cooldowns::key("spot", 0, "c7i.large"), 1000, 300);
        late.save(1000).expect("save");
        assert!(!early.active("spot/0/c7i.large", 1100));
        early.refresh();
        assert!(early.active("spot/0/c7i.large", 1100));
        let _ = std::fs::remove_dir_all(dir);
    }
}
