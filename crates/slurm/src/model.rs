//! The typed model of a Slurm cluster: what the provider fills in from Terraform and
//! EC2, and what hpc-node reads back from the published desired state.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::error::ModelError;

/// The Slurm release a configuration is rendered for.
///
/// Only the release series matters for the configuration files; maintenance releases
/// (`22.05.8`) render exactly like their series (`22.05`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SlurmVersion {
    /// Slurm 22.05 (Debian 12 ships 22.05.8).
    V22_05,
    /// Slurm 24.11 (Debian 13 ships 24.11).
    V24_11,
    /// Slurm 26.05 (Debian 14, forky, ships 26.05).
    V26_05,
}

impl SlurmVersion {
    /// Every supported version, oldest first.
    pub const ALL: [SlurmVersion; 3] = [SlurmVersion::V22_05, SlurmVersion::V24_11, SlurmVersion::V26_05];

    /// The release series as Slurm writes it: `"22.05"`, `"24.11"` or `"26.05"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SlurmVersion::V22_05 => "22.05",
            SlurmVersion::V24_11 => "24.11",
            SlurmVersion::V26_05 => "26.05",
        }
    }
}

impl fmt::Display for SlurmVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SlurmVersion {
    type Err = ModelError;

    /// Accepts `22.05`, `24.11`, `26.05` and maintenance releases such as `22.05.8` or `24.11.5`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        let mut parts = trimmed.split('.');
        let series = match (parts.next(), parts.next()) {
            (Some(major), Some(minor)) => format!("{major}.{minor}"),
            _ => String::new(),
        };
        let rest_ok = parts.all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        let version = match series.as_str() {
            "22.05" if rest_ok => Some(SlurmVersion::V22_05),
            "24.11" if rest_ok => Some(SlurmVersion::V24_11),
            "26.05" if rest_ok => Some(SlurmVersion::V26_05),
            _ => None,
        };
        version.ok_or_else(|| {
            ModelError::new(
                ["cluster", "version"],
                format!("unsupported Slurm version {trimmed:?}"),
                "Supported Slurm versions are 22.05, 24.11 and 26.05 (a maintenance release such as \
                 22.05.8 is accepted and renders like its series).",
            )
        })
    }
}

/// The hardware of one EC2 instance type, as the provider reads it from
/// `DescribeInstanceTypes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceShape {
    /// EC2 instance type, e.g. `p5.48xlarge`. Becomes the first node feature.
    pub instance_type: String,
    /// Logical CPUs (`CPUs=`); must equal `sockets * cores_per_socket * threads_per_core`.
    pub vcpus: u32,
    /// CPU sockets (`Sockets=`).
    pub sockets: u32,
    /// Cores per socket (`CoresPerSocket=`).
    pub cores_per_socket: u32,
    /// Hardware threads per core (`ThreadsPerCore=`).
    pub threads_per_core: u32,
    /// Memory EC2 advertises for the type, in MiB. `RealMemory=` is this minus the OS
    /// allowance (see [`os_memory_allowance_mib`](crate::os_memory_allowance_mib)).
    pub memory_mib: u64,
    /// GPUs per instance; 0 for none.
    pub gpus: u32,
    /// GPU model as EC2 names it (`H100`, `A10G`); required when `gpus > 0`. Slurm sees
    /// it as a GRES type normalised by [`gpu_type_name`](crate::gpu_type_name).
    pub gpu_model: Option<String>,
    /// Memory per GPU in MiB (informational; not rendered).
    pub gpu_memory_mib: Option<u64>,
    /// Whether the type supports Elastic Fabric Adapter; adds the `efa` feature.
    pub efa: bool,
}

/// One instance type in one capacity pool of a partition.
///
/// Its nodes are named `<name>-<n>` for `n` in `1..=max_nodes`; the first `static_nodes`
/// of them are always on, the rest are powered up on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSet {
    /// Node name prefix, e.g. `gpu-p1-p548xl`: a lowercase hostname label.
    pub name: String,
    /// The hardware of every node in the set.
    pub shape: InstanceShape,
    /// Number of nodes (static and on demand together); at least 1.
    pub max_nodes: u32,
    /// Always-on nodes, numbered first (`<name>-1` ..= `<name>-<static_nodes>`); 0 means
    /// every node is powered up on demand.
    pub static_nodes: u32,
    /// Extra node features, e.g. `az-use1-az1`, `spot`, `pool-1`.
    pub features: Vec<String>,
    /// Scheduling weight (`Weight=`): nodes with lower weight are used first.
    pub weight: Option<u32>,
}

/// A Slurm partition (queue) and the node sets that feed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// Partition name as users pass it to `-p`.
    pub name: String,
    /// The node sets of this partition; at least one. Node set names are unique across
    /// the whole cluster, so a node belongs to exactly one partition.
    pub node_sets: Vec<NodeSet>,
    /// What its `PartitionName=` line says besides the name and the nodes.
    pub settings: PartitionSettings,
}

/// A partition's Slurm settings: its `PartitionName=` line besides the name and the nodes.
/// The published partition document carries these fields as they are, so the agent renders
/// exactly what the provider checked; a new setting is a field here and a line in its renderer.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionSettings {
    /// `MaxTime=` in a Slurm time format (`minutes`, `MM:SS`, `HH:MM:SS`, `D-HH`,
    /// `D-HH:MM`, `D-HH:MM:SS`, `UNLIMITED`, `INFINITE`).
    pub max_time: Option<String>,
    /// `DefaultTime=`, same format; must not exceed `max_time`.
    pub default_time: Option<String>,
    /// `MaxNodes=`: the most nodes one job may use; at least 1.
    pub max_nodes_per_job: Option<u32>,
    /// `MinNodes=`: the fewest nodes one job may ask for; at most `max_nodes_per_job` and the
    /// partition's node count.
    pub min_nodes_per_job: Option<u32>,
    /// `AllowAccounts=`; empty means all accounts.
    pub allow_accounts: Vec<String>,
    /// `AllowGroups=`; empty means all groups.
    pub allow_groups: Vec<String>,
    /// `AllowQos=`; empty means all QOS.
    pub allow_qos: Vec<String>,
    /// `PriorityTier=`.
    pub priority_tier: Option<u32>,
    /// `OverSubscribe=`: `NO`, `YES[:n]`, `FORCE[:n]` or `EXCLUSIVE`.
    pub oversubscribe: Option<String>,
    /// Whole nodes per job (`OverSubscribe=EXCLUSIVE`); conflicts with `oversubscribe`.
    pub exclusive: bool,
    /// The default partition (`Default=YES`); at most one per cluster.
    pub default: bool,
    /// Further partition parameters, checked against the known keys of the version.
    pub extra: BTreeMap<String, String>,
}

/// Where slurmdbd keeps its MySQL/MariaDB database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// MariaDB on the head node, reached through its unix socket (`StorageHost=localhost`),
    /// database `slurm_acct_db`, user = the Slurm user.
    Local,
    /// An external MySQL-compatible server (e.g. RDS / Aurora).
    External {
        /// Database server host name or address.
        host: String,
        /// Database server port.
        port: u16,
        /// Database user.
        user: String,
        /// Database (schema) name.
        database: String,
    },
}

/// Job accounting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accounting {
    /// No accounting storage (`accounting_storage/none`).
    None,
    /// Accounting through slurmdbd.
    Slurmdbd {
        /// Host slurmdbd runs on (`AccountingStorageHost=`, `DbdHost=`).
        host: String,
        /// slurmdbd port (`AccountingStoragePort=`, `DbdPort=`); Slurm's default is 6819.
        port: u16,
        /// The database behind slurmdbd.
        storage: Storage,
    },
}

/// Slurm power saving: how nodes are powered up (EC2 launch) and down (terminate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerSave {
    /// `ResumeProgram=`: absolute path, called with a host list to power up.
    pub resume_program: String,
    /// `SuspendProgram=`: absolute path, called with a host list to power down.
    pub suspend_program: String,
    /// `ResumeFailProgram=`: absolute path, called with nodes that missed `ResumeTimeout`.
    pub resume_fail_program: String,
    /// `ResumeTimeout=` seconds (1..=65535): boot to slurmd registration.
    pub resume_timeout_s: u32,
    /// `SuspendTime=` seconds (>= 1): idle time before a node is powered down.
    pub suspend_time_s: u32,
    /// `SuspendTimeout=` seconds (1..=65535): time a power down may take.
    pub suspend_timeout_s: u32,
    /// `ResumeRate=` nodes per minute (0 = unlimited, at most 65535).
    pub resume_rate: u32,
    /// `SuspendRate=` nodes per minute (0 = unlimited, at most 65535).
    pub suspend_rate: u32,
}

/// The backup controller: `SlurmctldHost=<host>(<addr>)`, the second such line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupController {
    /// Its short host name (what `hostname -s` prints on it).
    pub host: String,
    /// Its address; `None` leaves the name to be resolved.
    pub addr: Option<String>,
}

/// A whole Slurm cluster: controller, daemons, accounting, power saving, partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// `ClusterName=`: lowercase, at most 40 characters (MySQL table name limit).
    pub name: String,
    /// The Slurm release to render for.
    pub version: SlurmVersion,
    /// Short host name of the controller (`SlurmctldHost=<host>`).
    pub controller_host: String,
    /// Optional controller address (`SlurmctldHost=<host>(<addr>)`).
    pub controller_addr: Option<String>,
    /// A second `SlurmctldHost`, after the controller's: it stands by on the same
    /// `StateSaveLocation` (shared storage) and takes over when the first stops answering.
    pub backup_controller: Option<BackupController>,
    /// `SlurmUser=` (also slurmdbd's user and, for local storage, the database user).
    pub slurm_user: String,
    /// `StateSaveLocation=`.
    pub state_dir: String,
    /// Base of `SlurmdSpoolDir=<spool_dir>/%n`.
    pub spool_dir: String,
    /// Directory of `slurmctld.log`, `slurmd-%n.log`, `slurmdbd.log`.
    pub log_dir: String,
    /// Directory of `slurmctld.pid`, `slurmd-%n.pid`, `slurmdbd.pid`.
    pub run_dir: String,
    /// MUNGE socket (`AuthInfo=socket=<path>`); `None` uses MUNGE's default socket.
    pub munge_socket: Option<String>,
    /// Job accounting.
    pub accounting: Accounting,
    /// Power saving (cloud node launch and termination).
    pub power_save: PowerSave,
    /// `HealthCheckProgram=` (absolute path), run every `HealthCheckInterval` (300 s by
    /// default, overridable through `extra`).
    pub health_check_program: Option<String>,
    /// Further slurm.conf parameters, checked against the known keys of the version.
    pub extra: BTreeMap<String, String>,
    /// The partitions; at least one.
    pub partitions: Vec<Partition>,
    /// `(SlurmctldPort, SlurmdPort)`; `None` keeps Slurm's defaults (6817, 6818).
    pub ports: Option<(u16, u16)>,
}

/// Where a node lives in the model: see [`Cluster::locate_node`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLocation<'a> {
    /// The partition holding the node.
    pub partition: &'a Partition,
    /// The node set holding the node.
    pub node_set: &'a NodeSet,
    /// The node's number within its set (1-based).
    pub index: u32,
    /// Whether the node is one of the set's always-on nodes.
    pub is_static: bool,
}

impl Cluster {
    /// The partition with this exact name.
    pub fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// Every node set of every partition, in configuration order.
    pub fn node_sets(&self) -> impl Iterator<Item = (&Partition, &NodeSet)> {
        self.partitions
            .iter()
            .flat_map(|p| p.node_sets.iter().map(move |ns| (p, ns)))
    }

    /// Finds the partition and node set of a node name such as `gpu-p1-p548xl-3`
    /// (what ResumeProgram receives, one name at a time).
    pub fn locate_node(&self, node: &str) -> Option<NodeLocation<'_>> {
        let (prefix, number) = node.rsplit_once('-')?;
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) || number.starts_with('0') {
            return None;
        }
        let index: u32 = number.parse().ok()?;
        self.node_sets().find_map(|(partition, node_set)| {
            (node_set.name == prefix && index >= 1 && index <= node_set.max_nodes).then_some(NodeLocation {
                partition,
                node_set,
                index,
                is_static: index <= node_set.static_nodes,
            })
        })
    }
}
