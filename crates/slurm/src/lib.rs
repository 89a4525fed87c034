//! The Slurm configuration of an hpcforge cluster: one typed model and one renderer.
//!
//! The provider fills a [`Cluster`] from Terraform and EC2 `DescribeInstanceTypes`,
//! calls [`validate`] for plan-time diagnostics and shows [`partition_lines`] or the
//! whole [`render`] output in the plan. hpc-node renders the same model on the head node
//! and writes the files; only it passes the database password to [`slurmdbd_conf`].
//! Nothing here knows about AWS or Terraform.
//!
//! # Rendering decisions
//!
//! - **Node names**: a node set named `gpu-p1-p548xl` with `max_nodes = 16` has nodes
//!   `gpu-p1-p548xl-1` ..= `gpu-p1-p548xl-16`, written `gpu-p1-p548xl-[1-16]` (see
//!   [`hostlist`]). Numbers are never zero-padded, so growing a node set never renames
//!   existing nodes.
//! - **Every node is `State=CLOUD`**, static ones too: static nodes are listed in
//!   `SuspendExcNodes` so they are never powered down, and hpc-node brings them up with
//!   `scontrol update nodename=<static host list> state=power_up`, which runs
//!   ResumeProgram like any other power-up. Non-CLOUD nodes must resolve by name when
//!   slurmctld starts (about 6 s lost per unresolvable name, measured on 22.05.8) and
//!   keep that address; CLOUD nodes get their address when their slurmd registers.
//! - **Memory**: `RealMemory = memory_mib - (512 MiB + 5 %)`, see
//!   [`os_memory_allowance_mib`]; partitions get `DefMemPerCPU` from the smallest
//!   memory-per-CPU of their node sets ([`default_mem_per_cpu_mib`]).
//! - **GPUs**: `Gres=gpu:<type>:<n>` with the type from [`gpu_type_name`] and explicit
//!   `File=/dev/nvidia[0-<n-1>]` lines in gres.conf, because GRES `AutoDetect` cannot be
//!   used with cloud nodes.
//! - **Features**: instance type, `efa`, GPU type, then the node set's own features.
//! - **Extras**: `extra` maps are checked against the parameters each version documents
//!   ([`cluster_extra_keys`], [`partition_extra_keys`]); keys the model controls are
//!   rejected with the field to use instead; a known key the model also writes (e.g.
//!   `ProctrackType`) replaces the model's value; `SlurmctldParameters`, `PrivateData`,
//!   `CommunicationParameters` and `SuspendExcNodes` are merged with the model's items.
//!
//! # What differs between 22.05 and 24.11
//!
//! | 22.05 | 24.11 | why |
//! |---|---|---|
//! | `SlurmctldParameters=cloud_reg_addrs,idle_on_node_suspend` | `SlurmctldParameters=idle_on_node_suspend` | 23.11 made `cloud_reg_addrs` the default; 24.11 logs an error for it |
//! | `PrivateData=cloud` | (none) | 23.02 shows cloud nodes by default; 24.11 ignores the flag. Without it 22.05 hides powered-down cloud nodes, even from root |
//! | `CommunicationParameters=NoAddrCache` | (none) | removed in 23.11, which manages cloud node addresses itself |
//! | `TreeWidth=65533` | (default, 16) | 23.11 fans out through unaddressable cloud nodes; 22.05 must reach each cloud node directly, so a 22.05 cluster is limited to 65533 nodes |
//! | cgroup.conf may hold `CgroupAutomount`, `*Kmem*` | those are gone (23.11) | neither version's rendering uses them |
//! | `extra` keys such as `SlurmctldPlugstack`, `CoreSpecPlugin`, `PowerPlugin` | `SuspendExcStates`, `MaxBatchRequeue`, `PreemptParameters`, partition `PowerDownOnIdle`, `ExclusiveTopo` | removed / added between the two; validation says which |
//!
//! 26.05 renders exactly as 24.11 (the man pages of Debian's 24.11.5 and 26.05.5 keep every
//! key the model writes); `extra` keys differ: 26.05 drops `GetEnvTimeout` and
//! `JobContainerType` (now `NamespaceType`) and adds `PrologTimeout`, `EpilogTimeout`, the TLS
//! and certificate keys among others.
//!
//! All use `select/cons_tres` (23.11 removed `select/cons_res`), `task/cgroup,task/affinity`
//! and `proctrack/cgroup`.

#![warn(missing_docs)]

mod cgroup_conf;
mod error;
mod gres_conf;
mod hostlist;
mod keys;
mod model;
mod node;
mod partition;
mod slurm_conf;
mod slurmdbd_conf;
mod text;
mod time;
mod upgrade;
mod validate;

#[cfg(test)]
mod tests;

pub use error::ModelError;
pub use hostlist::{expand_hostlist, hostlist, node_name};
pub use keys::{cluster_extra_keys, partition_extra_keys};
pub use model::{
    Accounting, BackupController, Cluster, InstanceShape, NodeLocation, NodeSet, Partition, PartitionSettings,
    PowerSave, SlurmVersion, Storage,
};
pub use node::{
    gpu_type_name, node_state_has, os_memory_allowance_mib, real_memory_mib, OS_MEMORY_BASE_MIB, OS_MEMORY_PERCENT,
};
pub use partition::default_mem_per_cpu_mib;
pub use slurm_conf::DEFAULT_HEALTH_CHECK_INTERVAL_S;
pub use slurmdbd_conf::{check_storage_password, slurmdbd_conf, try_slurmdbd_conf, LOCAL_DATABASE};
pub use time::TimeLimit;
pub use upgrade::{check_upgrade, node_release, release_series, NodeRelease, MAJOR_RELEASES};
pub use validate::validate;

/// The rendered configuration files of a cluster. Holds no secret: slurmdbd.conf has a
/// placeholder comment where hpc-node writes the database password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// slurm.conf (mode 644, on the controller and every node).
    pub slurm_conf: String,
    /// gres.conf (mode 644, on the controller and every node).
    pub gres_conf: String,
    /// cgroup.conf (mode 644, on every node).
    pub cgroup_conf: String,
    /// slurmdbd.conf without the password, when accounting uses slurmdbd (mode 600,
    /// owned by SlurmUser, on the slurmdbd host only).
    pub slurmdbd_conf: Option<String>,
}

/// One file to write, as hpc-node writes it: see [`Rendered::files`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigFile<'a> {
    /// File name inside the Slurm configuration directory (beside slurm.conf).
    pub name: &'static str,
    /// File contents.
    pub contents: &'a str,
    /// Unix permission bits the file needs.
    pub mode: u32,
}

impl Rendered {
    /// The files in the order to write them, with their names and modes.
    pub fn files(&self) -> Vec<ConfigFile<'_>> {
        let mut files = vec![
            ConfigFile {
                name: "slurm.conf",
                contents: &self.slurm_conf,
                mode: 0o644,
            },
            ConfigFile {
                name: "gres.conf",
                contents: &self.gres_conf,
                mode: 0o644,
            },
            ConfigFile {
                name: "cgroup.conf",
                contents: &self.cgroup_conf,
                mode: 0o644,
            },
        ];
        if let Some(dbd) = &self.slurmdbd_conf {
            files.push(ConfigFile {
                name: "slurmdbd.conf",
                contents: dbd,
                mode: 0o600,
            });
        }
        files
    }
}

/// Validates the cluster and renders its configuration files for `cluster.version`.
pub fn render(cluster: &Cluster) -> Result<Rendered, Vec<ModelError>> {
    let errors = validate(cluster);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(render_unvalidated(cluster))
}

/// Renders without validating.
///
/// Only for checking that Slurm itself rejects what [`validate`] rejects (the real-Slurm
/// tests use it); never write its output to a live cluster. Invalid extras are written
/// as given.
pub fn render_unvalidated(cluster: &Cluster) -> Rendered {
    Rendered {
        slurm_conf: slurm_conf::render_slurm_conf(cluster),
        gres_conf: gres_conf::render_gres_conf(cluster),
        cgroup_conf: cgroup_conf::render_cgroup_conf(cluster),
        slurmdbd_conf: slurmdbd_conf(cluster, None),
    }
}

/// The lines of one partition exactly as they appear in slurm.conf: a comment and a
/// `NodeName=` line per node set, then the `PartitionName=` line. `None` if the cluster
/// has no partition of that name.
pub fn partition_lines(cluster: &Cluster, partition: &str) -> Option<String> {
    cluster
        .partition(partition)
        .map(|p| partition::partition_block(cluster, p))
}
