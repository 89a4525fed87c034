//! The desired state the provider publishes for the node agent: one SSM parameter for the
//! cluster and one per partition, under `/hpcforge/clusters/<cluster>/`. SSM versions every
//! write, so each document has a version without any bookkeeping of ours.
//!
//! Partitions are separate documents so that adding, changing or removing one never
//! rewrites the cluster's document or another partition's. The cluster's users are published
//! in shards beside it (`users/0000`, ...; a parameter holds at most 8 KiB and a thousand users
//! with their keys take hundreds): the cluster document names how many and their digest, so a
//! reader knows whether it holds them already and never mixes two publications.

pub mod boot;
pub mod rules;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
pub use slurm_model::PartitionSettings;
use slurm_model::{
    Accounting, BackupController, Cluster, InstanceShape, NodeSet, Partition, PowerSave, SlurmVersion, Storage,
};

/// Slurm's power-saving and health programs as slurm.conf names them; hpc-image's hpc-node and
/// health-checks components install exactly these paths.
pub const RESUME_PROGRAM: &str = "/usr/local/sbin/hpc-node-resume";
pub const SUSPEND_PROGRAM: &str = "/usr/local/sbin/hpc-node-suspend";
pub const RESUME_FAIL_PROGRAM: &str = "/usr/local/sbin/hpc-node-resume-fail";
pub const HEALTH_CHECK_PROGRAM: &str = "/usr/local/sbin/hpc-node-health";
pub const SCHEMA: u32 = 1;
/// The account slurmctld runs as on every image (Debian's `slurm`); clients accept Slurm's
/// messages only from it.
pub const SLURM_USER: &str = "slurm";

/// Where every cluster of an account and region publishes (one folder per cluster).
pub const CLUSTERS_ROOT: &str = "/hpcforge/clusters";

pub fn cluster_prefix(cluster: &str) -> String {
    format!("{CLUSTERS_ROOT}/{cluster}")
}

/// The cluster and partition a parameter name is the document of (None for any other name).
pub fn partition_of_param(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(CLUSTERS_ROOT)?.strip_prefix('/')?;
    let (cluster, rest) = rest.split_once('/')?;
    let partition = rest.strip_prefix("partitions/")?;
    (!cluster.is_empty() && !partition.is_empty() && !partition.contains('/')).then_some((cluster, partition))
}

pub fn cluster_param(cluster: &str) -> String {
    format!("{}/cluster", cluster_prefix(cluster))
}

/// Written when a create of the cluster returns it to Terraform (it then belongs to a state) and
/// deleted last by its destroy: a second create of the same name is refused while it is there
/// and the cluster's document is published. A create killed before it returned leaves none, so
/// its rerun adopts what it had made.
pub fn owner_param(cluster: &str) -> String {
    format!("{OWNERS_ROOT}/clusters/{cluster}")
}

/// Where owners are recorded: outside [`CLUSTERS_ROOT`], so that the listings of clusters'
/// documents (plans, refreshes, the agent) never page through them.
pub const OWNERS_ROOT: &str = "/hpcforge/owners";

/// What [`owner_param`] holds: where the owned cluster lives, for a refused create to name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerDoc {
    pub vpc_id: String,
    pub subnet_id: String,
}

/// The creation token of the EFS file system the provider makes for a cluster's /home (one per
/// cluster name in an account and region; an interrupted create finds its file system by it).
pub fn home_efs_token(cluster: &str) -> String {
    format!("hpcforge-{cluster}-home")
}

/// Where the head node's agent reports each reconcile pass ([`StatusDoc`]).
pub fn status_param(cluster: &str) -> String {
    format!("{}/status", cluster_prefix(cluster))
}

/// The agent's report after each reconcile pass: the versions of the published documents it
/// worked from, and why it kept the running configuration when it refused them. Written by
/// hpc-node, read by the provider (which waits for its partition's version) and by tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDoc {
    /// The SSM version of the cluster document.
    pub cluster_version: i64,
    /// Partition name → the SSM version of its document.
    #[serde(default)]
    pub partition_versions: BTreeMap<String, i64>,
    /// Why the pass left Slurm's configuration as it was; None when it applied.
    #[serde(default)]
    pub error: Option<String>,
    /// When the pass ended (unix seconds).
    #[serde(default)]
    pub at: u64,
}

impl StatusDoc {
    /// The version of `partition` the pass worked from (0 when it had none).
    pub fn partition_version(&self, partition: &str) -> i64 {
        self.partition_versions.get(partition).copied().unwrap_or(0)
    }
}

/// The prefix of the cluster's secrets in Secrets Manager (the node role may read below it).
pub fn secrets_prefix(cluster: &str) -> String {
    format!("hpcforge/{cluster}")
}

/// The secret holding the cluster's munge key (the provider makes it; every node reads it).
pub fn munge_key_secret(cluster: &str) -> String {
    format!("{}/munge-key", secrets_prefix(cluster))
}

/// The secret holding the password the provider generates for local accounting.
pub fn db_password_secret(cluster: &str) -> String {
    format!("{}/db-password", secrets_prefix(cluster))
}

/// The start of every name of the cluster's EC2 event routes (the head node's role may read
/// the queues named so). A digest of fixed length: SQS and EventBridge names are short, and
/// one cluster's prefix must not begin another cluster's names (`a-` would begin `a-b`'s).
pub fn events_route_prefix(cluster: &str) -> String {
    format!("hpcforge-{}-", short_digest(cluster))
}

/// The base name of a partition's EC2 event route, the same in each region of its pools: its
/// queue and rules are named from it (34 characters, whatever the names' lengths).
pub fn events_route(cluster: &str, partition: &str) -> String {
    format!("{}{}", events_route_prefix(cluster), short_digest(partition))
}

/// The first 12 hexadecimal digits of SHA-256 over `text`.
fn short_digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn partitions_path(cluster: &str) -> String {
    format!("{}/partitions", cluster_prefix(cluster))
}

pub fn partition_param(cluster: &str, partition: &str) -> String {
    format!("{}/{partition}", partitions_path(cluster))
}

/// A partition's [`owner_param`].
pub fn partition_owner_param(cluster: &str, partition: &str) -> String {
    format!("{OWNERS_ROOT}/partitions/{cluster}/{partition}")
}

/// The tag hpc-image puts on the images it publishes: the Slurm version they carry (Debian's
/// package version, e.g. `22.05.8-4+deb12u3`).
pub const SLURM_VERSION_TAG: &str = tag::SLURM_VERSION;

/// The tag keys the programs agree on: what the provider, hpc-node and hpc-image write on AWS
/// resources and find them by.
pub mod tag {
    /// Everything a cluster owns: the cluster's name.
    pub const CLUSTER: &str = "hpcforge:cluster";
    /// Compute instances, launch templates, placement groups: `<cluster>/<partition>`
    /// ([`partition_value`]).
    pub const PARTITION: &str = "hpcforge:partition";
    /// A compute instance: the Slurm node it carries.
    pub const NODE: &str = "hpcforge:node";
    /// Head and login instances: `head` or `login`.
    pub const ROLE: &str = "hpcforge:role";
    /// Login instances: a digest of the settings they were launched with (image, type, key,
    /// instance profile, root volume). One whose digest is not the plan's is replaced.
    pub const LAUNCH_SETTINGS: &str = "hpcforge:launch-settings";
    /// On a VPC peering connection hpcforge requested: `<vpc id> <peer vpc id>` (found again by
    /// it after an interrupted create; a connection without it is the user's own).
    pub const PEERING: &str = "hpcforge:peering";
    /// A Lustre file system's release policy, read by `hpc-node evict`.
    pub const RELEASE_UNACCESSED_DAYS: &str = "hpcforge:release-unaccessed-days";
    pub const RELEASE_USAGE_PERCENT: &str = "hpcforge:release-usage-percent";
    /// Images: the Slurm version they carry, who built them, and from what.
    pub const SLURM_VERSION: &str = "hpcforge:slurm-version";
    pub const BUILDER: &str = "hpcforge:builder";
    pub const SOURCE_AMI: &str = "hpcforge:source-ami";
    /// Every key above starts so; user tags may not.
    pub const PREFIX: &str = "hpcforge:";

    /// The [`PARTITION`] tag's value.
    pub fn partition_value(cluster: &str, partition: &str) -> String {
        format!("{cluster}/{partition}")
    }
}

pub use slurm_model::release_series;

/// Where the cluster's user shards live.
pub fn users_path(cluster: &str) -> String {
    format!("{}/users", cluster_prefix(cluster))
}

pub fn user_shard_param(cluster: &str, index: usize) -> String {
    format!("{}/{index:04}", users_path(cluster))
}

/// A user shard's most bytes: an SSM parameter's (advanced tier).
pub const USER_SHARD_BYTES: usize = 8192;

/// The users in shards of at most [`USER_SHARD_BYTES`] of JSON each, in order. Fails naming a
/// user who alone does not fit (too many or too long keys).
pub fn user_shards(users: &[UserDoc]) -> Result<Vec<String>, String> {
    let mut shards = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut bytes = 2;
    for u in users {
        let one = serde_json::to_string(u).map_err(|e| format!("user {}: {e}", u.name))?;
        if one.len() + 2 > USER_SHARD_BYTES {
            return Err(format!(
                "user {:?} takes {} bytes with their keys; a user must fit in {} (fewer or shorter ssh_public_keys)",
                u.name,
                one.len(),
                USER_SHARD_BYTES - 2
            ));
        }
        if !current.is_empty() && bytes + 1 + one.len() > USER_SHARD_BYTES {
            shards.push(format!("[{}]", current.join(",")));
            current.clear();
            bytes = 2;
        }
        bytes += one.len() + usize::from(!current.is_empty());
        current.push(one);
    }
    if !current.is_empty() {
        shards.push(format!("[{}]", current.join(",")));
    }
    Ok(shards)
}

/// What identifies one publication of the shards: SHA-256 over them, in order.
pub fn users_digest<S: AsRef<str>>(shards: &[S]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for s in shards {
        h.update(s.as_ref().as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The users of `doc` from the shards read under [`users_path`] (name → value). A document
/// without shards carries its users inline. Fails when the shards are not the ones the document
/// names (a publication in progress: read again).
pub fn users_from_shards(doc: &ClusterDoc, shards: &BTreeMap<String, String>) -> Result<Vec<UserDoc>, String> {
    let Some(digest) = &doc.users_digest else {
        return Ok(doc.users.clone());
    };
    let values: Vec<&str> = (0..doc.user_shards as usize)
        .map(|i| {
            let name = user_shard_param(&doc.name, i);
            shards
                .get(&name)
                .map(String::as_str)
                .ok_or_else(|| format!("{name} is missing (the users are being published)"))
        })
        .collect::<Result<_, _>>()?;
    if users_digest(&values) != *digest {
        return Err(format!(
            "the user shards under {} are not the ones the cluster document names (the users are being published)",
            users_path(&doc.name)
        ));
    }
    let mut users = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mut part: Vec<UserDoc> =
            serde_json::from_str(v).map_err(|e| format!("{}: {e}", user_shard_param(&doc.name, i)))?;
        users.append(&mut part);
    }
    Ok(users)
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountingDoc {
    /// `none`, `local` or `external`.
    pub mode: String,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub database: Option<String>,
    /// Where the head node reads the database password; never the password itself.
    pub password_secret_arn: Option<String>,
}

impl AccountingDoc {
    /// Whether the cluster keeps accounting at all (`mode` other than `none`).
    pub fn enabled(&self) -> bool {
        self.mode != "none"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserDoc {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub ssh_public_keys: Vec<String>,
    pub sudo: bool,
    /// Slurm accounts the user may charge, the first the default (none: no association).
    #[serde(default)]
    pub accounts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountDoc {
    pub lustre_id: Option<String>,
    pub dns_name: Option<String>,
    pub mount_name: Option<String>,
    pub mount_point: String,
}

/// How the head node is built (also what an import reads back).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadNodeDoc {
    pub ami_id: String,
    pub instance_type: String,
    pub root_volume_size: i64,
    pub root_volume_type: String,
    pub root_volume_encrypted: bool,
    pub key_name: Option<String>,
    pub allowed_ssh_cidrs: Vec<String>,
    pub instance_profile_arn: Option<String>,
    /// IAM roles the head node may pass to EC2 (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_role_arns: Vec<String>,
    /// GiB of the head's state volume (slurmctld's saved state, the local accounting
    /// database, the agent's own state): it outlives every head node of the cluster.
    #[serde(default)]
    pub state_volume_size: i64,
    /// The state volume (`vol-...`), attached to each head node as [`STATE_DEVICE`].
    #[serde(default)]
    pub state_volume_id: Option<String>,
    /// The second slurmctld (`head_node.backup_controller`); None: the head is the only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_controller: Option<BackupControllerDoc>,
}

/// The backup controller: an instance of the head's image and type named [`BACKUP_HOST`], on
/// an interface the cluster keeps, sharing slurmctld's saved state with the head on an EFS file
/// system both mount. Its address and the file system are unknown until the first apply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupControllerDoc {
    pub address: Option<String>,
    pub state_efs_id: Option<String>,
}

/// The backup controller's host name (the second `SlurmctldHost`). Compute node names always
/// end in a number, so no node can take it.
pub const BACKUP_HOST: &str = "slurmctld-backup";

/// The creation token of the EFS file system holding the controllers' shared state.
pub fn controller_state_efs_token(cluster: &str) -> String {
    format!("hpcforge-{cluster}-controller-state")
}

/// The device name the head's state volume is attached as (EC2 `AttachVolume`); Nitro
/// instances see it as the NVMe disk whose serial is the volume id.
pub const STATE_DEVICE: &str = "/dev/sdf";
/// Where a Nitro instance's udev names an EBS volume by its id (without the dash).
pub fn ebs_by_id(volume_id: &str) -> String {
    format!(
        "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{}",
        volume_id.replace('-', "")
    )
}

/// The cluster-wide document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterDoc {
    pub schema: u32,
    pub name: String,
    pub region: String,
    pub slurm_version: String,
    pub scaledown_idletime_s: u32,
    pub resume_timeout_s: u32,
    pub accounting: AccountingDoc,
    pub munge_key_secret_arn: String,
    /// The cluster group (members talk freely; compute nodes get only this one of these) and
    /// the head and login nodes' SSH group.
    pub security_group_ids: Vec<String>,
    /// Set when the cluster group was given (e.g. the network's), not created by the cluster.
    #[serde(default)]
    pub adopted_security_group: Option<String>,
    pub vpc_id: String,
    pub extra: BTreeMap<String, String>,
    /// Inline only in documents published before shards (and in the agent's filled-in copy);
    /// published documents carry [`ClusterDoc::user_shards`] and [`ClusterDoc::users_digest`].
    #[serde(default)]
    pub users: Vec<UserDoc>,
    /// How many user shards the cluster has under [`users_path`].
    #[serde(default)]
    pub user_shards: u32,
    /// [`users_digest`] of those shards; None: the users are inline.
    #[serde(default)]
    pub users_digest: Option<String>,
    pub mfa_pam_module: Option<String>,
    pub mfa_config: Option<String>,
    /// Where login nodes write the module's settings (e.g. `/etc/duo/pam_duo.conf`), root-only.
    #[serde(default)]
    pub mfa_settings_file: Option<String>,
    /// The secret whose text those settings are (a module's keys are never in this document).
    #[serde(default)]
    pub mfa_settings_secret_arn: Option<String>,
    pub mounts: Vec<MountDoc>,
    /// Where /home lives: `efs` (nodes mount `home_efs_id`); `head_node` in documents of
    /// earlier releases, which left each node its own /home.
    pub home: String,
    pub home_efs_id: Option<String>,
    /// The provider made `home_efs_id` for the cluster (and adds its mount targets as
    /// partitions add zones); false for the user's own file system.
    #[serde(default)]
    pub home_efs_managed: bool,
    pub subnet_id: String,
    pub head_node: HeadNodeDoc,
    pub login_count: u32,
    pub login_instance_type: String,
    pub tags: BTreeMap<String, String>,
    pub max_hourly_cost: Option<String>,
    pub max_gpus: Option<u64>,
    /// USD/hour of the head and login nodes, counted against `max_hourly_cost`.
    #[serde(default)]
    pub fixed_hourly_cost: Option<String>,
}

/// One capacity pool of a partition: where to launch, tried in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolDoc {
    pub region: String,
    pub subnet_ids: Vec<String>,
    pub capacity_type: String,
    pub capacity_reservation_id: Option<String>,
    /// instance type → launch template id in the pool's region.
    pub launch_templates: BTreeMap<String, String>,
    pub placement_group: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeDoc {
    pub instance_type: String,
    pub vcpus: u32,
    pub cores: u32,
    pub threads_per_core: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub gpu_memory_mib: Option<u64>,
    pub efa: bool,
    /// On-demand USD/hour the provider priced this type at (decimal text), for the agent's
    /// run-time cost guardrail; absent when unknown.
    #[serde(default)]
    pub hourly_price: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionDoc {
    pub schema: u32,
    pub cluster: String,
    pub name: String,
    pub shapes: Vec<ShapeDoc>,
    pub min_nodes: u32,
    pub max_nodes: u32,
    pub pools: Vec<PoolDoc>,
    pub allocation_strategy: String,
    pub provision_timeout_s: u32,
    pub ice_cooldown_s: u32,
    /// Whether a job's nodes launch together or not at all (absent in documents from before).
    #[serde(default)]
    pub scaling_strategy: ScalingStrategy,
    /// Slurm's settings of the partition, as their own fields of the document.
    #[serde(flatten)]
    pub slurm: PartitionSettings,
    /// What the nodes boot: AMI, root volume, instance profile, extra boot commands.
    pub ami_id: String,
    pub root_volume_size: i32,
    pub instance_profile_arn: Option<String>,
    pub user_data_extra: Option<String>,
    /// Tags of everything the partition launches.
    pub tags: BTreeMap<String, String>,
}

/// How resume places a job's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScalingStrategy {
    /// A job's nodes (of one instance type) come from one pool, all of them or none: a partial
    /// launch is terminated at once and the whole job tries the next pool.
    #[default]
    AllOrNothing,
    /// Every node that gets an instance keeps it.
    BestEffort,
}

impl ScalingStrategy {
    pub const ALL: [ScalingStrategy; 2] = [ScalingStrategy::AllOrNothing, ScalingStrategy::BestEffort];

    pub fn as_str(self) -> &'static str {
        match self {
            ScalingStrategy::AllOrNothing => "all-or-nothing",
            ScalingStrategy::BestEffort => "best-effort",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// A duration in the form users write (`10m`, `1h30m`, `45s`).
pub fn duration_text(secs: u32) -> String {
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Short, hostname-safe form of an instance type for node names: `p5.48xlarge` → `p5-48xl`.
pub fn type_tag(instance_type: &str) -> String {
    instance_type.replace("xlarge", "xl").replace(['.', '_'], "-")
}

impl ShapeDoc {
    fn to_model(&self) -> InstanceShape {
        InstanceShape {
            instance_type: self.instance_type.clone(),
            vcpus: self.vcpus,
            sockets: 1,
            cores_per_socket: self.cores.max(1),
            threads_per_core: self.threads_per_core.max(1),
            memory_mib: self.memory_mib,
            gpus: self.gpus,
            gpu_model: self.gpu_model.clone(),
            gpu_memory_mib: self.gpu_memory_mib,
            efa: self.efa,
        }
    }
}

impl PartitionDoc {
    /// The partition as Slurm sees it: one node set per instance type, named
    /// `<partition>-<type>-<n>`. Pools are not in node names: a node can be launched in any
    /// pool, which is what lets the agent fail over without renaming nodes.
    pub fn to_model(&self) -> Partition {
        let node_sets = self
            .shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                let mut features = vec![format!("partition-{}", self.name)];
                if self.pools.iter().any(|p| p.capacity_type == "spot") {
                    features.push("spot".to_string());
                }
                NodeSet {
                    name: format!("{}-{}", self.name, type_tag(&shape.instance_type)),
                    shape: shape.to_model(),
                    max_nodes: self.max_nodes,
                    static_nodes: if i == 0 { self.min_nodes } else { 0 },
                    features,
                    weight: Some(u32::try_from(i + 1).unwrap_or(u32::MAX)),
                }
            })
            .collect();
        Partition {
            name: self.name.clone(),
            node_sets,
            settings: self.slurm.clone(),
        }
    }
}

impl ClusterDoc {
    /// The cluster security group (all traffic between its members): every node of the home
    /// region is in it, and so are the /home mount targets.
    pub fn cluster_group(&self) -> Option<&String> {
        self.security_group_ids.first()
    }

    /// Where every node has a shared file system mounted: /home when it is on EFS, then each
    /// `storage` block's mount point.
    pub fn shared_mount_points(&self) -> Vec<String> {
        let home = (self.home == "efs").then(|| "/home".to_string());
        home.into_iter()
            .chain(self.mounts.iter().map(|m| m.mount_point.clone()))
            .collect()
    }

    /// A partition's failover timeout must leave Slurm's own room: slurmctld marks a node DOWN
    /// (and requeues its job) once `resume_timeout` passes, so a `provision_timeout` as long or
    /// longer never gets to replace the instance from the next pool.
    pub fn check_timeouts(&self, part: &PartitionDoc) -> Result<(), slurm_model::ModelError> {
        if part.provision_timeout_s < self.resume_timeout_s {
            return Ok(());
        }
        Err(slurm_model::ModelError::new(
            ["partition", part.name.as_str(), "provision_timeout"],
            format!(
                "provision_timeout ({}) must be shorter than cluster {}'s slurm.resume_timeout ({})",
                duration_text(part.provision_timeout_s),
                self.name,
                duration_text(self.resume_timeout_s)
            ),
            "Slurm marks a node DOWN and requeues its job when resume_timeout passes, so failover to the \
             next pool after provision_timeout would never happen. Lower provision_timeout, or raise the \
             cluster's slurm.resume_timeout so the next pool's node can still boot in time.",
        ))
    }

    /// The cluster as the head node runs it, with the given partitions.
    pub fn to_model(&self, partitions: &[PartitionDoc]) -> Result<Cluster, slurm_model::ModelError> {
        let version: SlurmVersion = self.slurm_version.parse()?;
        let accounting = match self.accounting.mode.as_str() {
            "none" => Accounting::None,
            "external" => Accounting::Slurmdbd {
                host: "localhost".into(),
                port: 6819,
                storage: Storage::External {
                    host: self.accounting.host.clone().unwrap_or_default(),
                    port: self.accounting.port.unwrap_or(3306),
                    user: self.accounting.user.clone().unwrap_or_else(|| "slurm".into()),
                    database: self
                        .accounting
                        .database
                        .clone()
                        .unwrap_or_else(|| "slurm_acct_db".into()),
                },
            },
            _ => Accounting::Slurmdbd {
                host: "localhost".into(),
                port: 6819,
                storage: Storage::Local,
            },
        };
        Ok(Cluster {
            name: self.name.clone(),
            version,
            controller_host: "head".into(),
            controller_addr: None,
            backup_controller: self.head_node.backup_controller.as_ref().map(|b| BackupController {
                host: BACKUP_HOST.into(),
                addr: b.address.clone(),
            }),
            slurm_user: SLURM_USER.into(),
            state_dir: "/var/spool/slurmctld".into(),
            spool_dir: "/var/spool/slurmd".into(),
            log_dir: "/var/log/slurm".into(),
            run_dir: "/run/slurm".into(),
            munge_socket: None,
            accounting,
            power_save: PowerSave {
                resume_program: RESUME_PROGRAM.into(),
                suspend_program: SUSPEND_PROGRAM.into(),
                resume_fail_program: RESUME_FAIL_PROGRAM.into(),
                resume_timeout_s: self.resume_timeout_s,
                suspend_time_s: self.scaledown_idletime_s,
                suspend_timeout_s: 120,
                resume_rate: 0,
                suspend_rate: 0,
            },
            health_check_program: Some(HEALTH_CHECK_PROGRAM.into()),
            extra: self.extra.clone(),
            partitions: partitions.iter().map(PartitionDoc::to_model).collect(),
            ports: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_documents_are_told_apart_by_name() {
        assert_eq!(partition_of_param(&partition_param("lab", "gpu")), Some(("lab", "gpu")));
        assert_eq!(partition_of_param(&cluster_param("lab")), None);
        assert_eq!(partition_of_param(&status_param("lab")), None);
        assert_eq!(partition_of_param("/hpcforge/clusters/lab/users/0001"), None);
        assert_eq!(partition_of_param("/other/clusters/lab/partitions/gpu"), None);
    }

    #[test]
    fn event_routes_are_short_and_one_clusters_prefix_begins_none_of_anothers() {
        let long = "c".repeat(40);
        let route = events_route(&long, &"p".repeat(63));
        assert_eq!(route.len(), 34, "{route}");
        assert!(route.starts_with(&events_route_prefix(&long)));
        // Queue names take 80 characters and rule names 64: with their suffixes they fit.
        assert!(route.len() + "-state".len() <= 64);
        assert!(!events_route("a-b", "c").starts_with(&events_route_prefix("a")));
        assert_ne!(events_route("lab", "gpu"), events_route("lab", "cpu"));
        assert!(route.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }

    /// A small partition for the tests.
    fn partition(name: &str) -> PartitionDoc {
        PartitionDoc {
            schema: SCHEMA,
            cluster: "c".into(),
            name: name.into(),
            max_nodes: 4,
            allocation_strategy: "prioritized".into(),
            provision_timeout_s: 600,
            ice_cooldown_s: 600,
            ami_id: "ami-1".into(),
            root_volume_size: 100,
            ..PartitionDoc::default()
        }
    }

    /// The document's JSON is the contract with agents already running: its fields' names and
    /// order are fixed here, Slurm's settings (`PartitionSettings`, another crate's type) among them.
    #[test]
    fn a_partition_document_is_written_and_read_as_agents_know_it() {
        let mut doc = partition("gpu");
        doc.slurm.max_time = Some("1-00:00:00".into());
        doc.slurm.max_nodes_per_job = Some(2);
        doc.slurm.allow_qos = vec!["high".into()];
        doc.slurm.extra = BTreeMap::from([("GraceTime".to_string(), "60".to_string())]);
        let json = concat!(
            r#"{"schema":1,"cluster":"c","name":"gpu","shapes":[],"min_nodes":0,"max_nodes":4,"pools":[],"#,
            r#""allocation_strategy":"prioritized","provision_timeout_s":600,"ice_cooldown_s":600,"#,
            r#""scaling_strategy":"all-or-nothing","max_time":"1-00:00:00","default_time":null,"#,
            r#""max_nodes_per_job":2,"min_nodes_per_job":null,"allow_accounts":[],"allow_groups":[],"#,
            r#""allow_qos":["high"],"priority_tier":null,"oversubscribe":null,"exclusive":false,"default":false,"#,
            r#""extra":{"GraceTime":"60"},"ami_id":"ami-1","root_volume_size":100,"instance_profile_arn":null,"#,
            r#""user_data_extra":null,"tags":{}}"#
        );
        assert_eq!(serde_json::to_string(&doc).expect("json"), json);
        assert_eq!(serde_json::from_str::<PartitionDoc>(json).expect("document"), doc);
        // A document from before scaling_strategy reads as all-or-nothing.
        let older = json.replace(r#""scaling_strategy":"all-or-nothing","#, "");
        assert_eq!(
            serde_json::from_str::<PartitionDoc>(&older).expect("older document"),
            doc
        );
    }

    #[test]
    fn a_provision_timeout_must_leave_room_before_slurms_resume_timeout() {
        let cluster = ClusterDoc {
            name: "c".into(),
            resume_timeout_s: 900,
            ..ClusterDoc::default()
        };
        let mut part = partition("gpu");
        part.provision_timeout_s = 600;
        assert_eq!(cluster.check_timeouts(&part), Ok(()));
        part.provision_timeout_s = 900;
        let e = cluster.check_timeouts(&part).expect_err("equal timeouts");
        assert_eq!(e.path, ["partition", "gpu", "provision_timeout"]);
        assert!(
            e.summary.contains("(15m)") && e.summary.contains("cluster c"),
            "{}",
            e.summary
        );
    }

    #[test]
    fn nodes_check_home_on_efs_and_each_lustre_mount() {
        let mut doc = ClusterDoc {
            home: "efs".into(),
            mounts: vec![MountDoc {
                lustre_id: None,
                dns_name: None,
                mount_name: None,
                mount_point: "/fsx".into(),
            }],
            ..ClusterDoc::default()
        };
        assert_eq!(doc.shared_mount_points(), ["/home", "/fsx"]);
        // Documents of earlier releases kept /home on each node: nothing shared to check there.
        doc.home = "head_node".into();
        assert_eq!(doc.shared_mount_points(), ["/fsx"]);
    }

    #[test]
    fn type_tags_are_hostname_safe() {
        assert_eq!(type_tag("p5.48xlarge"), "p5-48xl");
        assert_eq!(type_tag("c7i.large"), "c7i-large");
        assert_eq!(type_tag("p6-b200.48xlarge"), "p6-b200-48xl");
    }

    #[test]
    fn documents_round_trip_as_json() {
        let doc = partition("gpu");
        assert_eq!(duration_text(600), "10m");
        assert_eq!(duration_text(5400), "1h30m");
        assert_eq!(duration_text(45), "45s");
        let json = serde_json::to_string(&doc).expect("json");
        assert_eq!(serde_json::from_str::<PartitionDoc>(&json).expect("parse"), doc);
    }

    fn user(i: u32, keys: usize) -> UserDoc {
        UserDoc {
            name: format!("user{i}"),
            uid: 2000 + i,
            gid: 2000 + i,
            ssh_public_keys: (0..keys)
                .map(|k| {
                    format!(
                        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{:0>43} user{i}-{k}",
                        i * 10 + k as u32
                    )
                })
                .collect(),
            sudo: false,
            accounts: vec!["physics".into()],
        }
    }

    fn published(name: &str, users: &[UserDoc]) -> (ClusterDoc, BTreeMap<String, String>) {
        let shards = user_shards(users).expect("shards");
        let doc = ClusterDoc {
            name: name.into(),
            user_shards: u32::try_from(shards.len()).expect("count"),
            users_digest: Some(users_digest(&shards)),
            ..ClusterDoc::default()
        };
        let params = shards
            .into_iter()
            .enumerate()
            .map(|(i, v)| (user_shard_param(name, i), v))
            .collect();
        (doc, params)
    }

    #[test]
    fn a_thousand_users_with_two_keys_each_fit_in_shards_and_read_back_in_order() {
        let users: Vec<UserDoc> = (0..1000).map(|i| user(i, 2)).collect();
        let (doc, params) = published("big", &users);
        assert!(params.values().all(|v| v.len() <= USER_SHARD_BYTES));
        assert!(doc.user_shards > 1, "{} shard(s)", doc.user_shards);
        assert_eq!(users_from_shards(&doc, &params).expect("read"), users);
        // The document stays small whatever the number of users.
        assert!(serde_json::to_string(&doc).expect("json").len() < 1024);
    }

    #[test]
    fn shards_of_another_publication_are_refused_not_mixed() {
        let (doc, mut params) = published("c", &(0..100).map(|i| user(i, 2)).collect::<Vec<_>>());
        let (_, newer) = published("c", &(0..100).map(|i| user(i + 1, 2)).collect::<Vec<_>>());
        params.insert(user_shard_param("c", 0), newer[&user_shard_param("c", 0)].clone());
        let e = users_from_shards(&doc, &params).expect_err("mixed shards");
        assert!(e.contains("being published"), "{e}");
        params.remove(&user_shard_param("c", 1));
        let e = users_from_shards(&doc, &params).expect_err("missing shard");
        assert!(e.contains("/hpcforge/clusters/c/users/0001 is missing"), "{e}");
    }

    #[test]
    fn a_user_too_big_for_a_shard_is_named() {
        let e = user_shards(&[user(1, 1), user(7, 200)]).expect_err("too big");
        assert!(e.contains("\"user7\"") && e.contains("ssh_public_keys"), "{e}");
        // Documents from before shards keep their inline users.
        let inline = ClusterDoc {
            users: vec![user(1, 1)],
            ..ClusterDoc::default()
        };
        assert_eq!(
            users_from_shards(&inline, &BTreeMap::new()).expect("inline"),
            inline.users
        );
    }
}
