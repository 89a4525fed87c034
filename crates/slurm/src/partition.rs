//! How a partition becomes slurm.conf lines. This is the only code that knows it: the
//! provider shows these lines in plans (through [`partition_lines`](crate::partition_lines))
//! and slurm.conf embeds the very same text.
//!
//! Every node is `State=CLOUD`, static nodes included. Static nodes differ only in
//! being listed in `SuspendExcNodes` (so Slurm never powers them down) and in being
//! launched by hpc-node without waiting for a job. A non-CLOUD node needs a name that
//! resolves when slurmctld starts: measured with 22.05.8, slurmctld spends about 6 s
//! per unresolvable node name at startup, and EC2 instances get new addresses whenever
//! they are replaced. CLOUD nodes get their address when their slurmd registers.

use crate::keys::{classify_partition_key, KeyClass, PARTITION_DEF_MEM};
use crate::model::{Cluster, NodeSet, Partition};
use crate::text::push_kv;
use crate::time::TimeLimit;

/// The lines of one partition, each ending in a newline: a comment per node set, its
/// `NodeName=` line, then the `PartitionName=` line.
pub(crate) fn partition_block(cluster: &Cluster, partition: &Partition) -> String {
    let mut out = String::new();
    for node_set in &partition.node_sets {
        out.push_str(&node_set_comment(node_set));
        out.push('\n');
        out.push_str(&node_line(node_set));
        out.push('\n');
    }
    out.push_str(&partition_line(cluster, partition));
    out.push('\n');
    out
}

fn node_set_comment(ns: &NodeSet) -> String {
    let mut c = format!("# {}: {} x {}", ns.name, ns.max_nodes, ns.shape.instance_type);
    match ns.static_hostlist() {
        Some(list) if ns.static_nodes >= ns.max_nodes => c.push_str(&format!(", all always on ({list})")),
        Some(list) => c.push_str(&format!(", {} always on ({list})", ns.static_nodes)),
        None => c.push_str(", all powered up on demand"),
    }
    c
}

/// The `NodeName=` line of a node set.
pub(crate) fn node_line(ns: &NodeSet) -> String {
    let shape = &ns.shape;
    let mut line = String::new();
    push_kv(&mut line, "NodeName", &ns.hostlist());
    push_kv(&mut line, "State", "CLOUD");
    push_kv(&mut line, "CPUs", &shape.vcpus.to_string());
    push_kv(&mut line, "Sockets", &shape.sockets.to_string());
    push_kv(&mut line, "CoresPerSocket", &shape.cores_per_socket.to_string());
    push_kv(&mut line, "ThreadsPerCore", &shape.threads_per_core.to_string());
    push_kv(&mut line, "RealMemory", &ns.real_memory_mib().to_string());
    if let Some(gres) = ns.gres() {
        push_kv(&mut line, "Gres", &gres);
    }
    let features = ns.node_features();
    if !features.is_empty() {
        push_kv(&mut line, "Features", &features.join(","));
    }
    if let Some(weight) = ns.weight {
        push_kv(&mut line, "Weight", &weight.to_string());
    }
    line
}

/// `DefMemPerCPU=` derived for a partition: the smallest `RealMemory / CPUs` of its node
/// sets, so a job that does not ask for memory gets a share proportional to its CPUs
/// on every instance type of the partition (with `CR_Core_Memory` a job without a
/// memory request would otherwise hold a whole node's memory).
pub fn default_mem_per_cpu_mib(partition: &Partition) -> Option<u64> {
    partition
        .node_sets
        .iter()
        .filter(|ns| ns.shape.vcpus > 0)
        .map(|ns| ns.real_memory_mib() / u64::from(ns.shape.vcpus))
        .min()
        .filter(|m| *m > 0)
}

fn time_value(text: &str) -> String {
    match TimeLimit::parse(text) {
        Ok(TimeLimit::Unlimited) => "UNLIMITED".to_string(),
        _ => text.trim().to_string(),
    }
}

/// The `PartitionName=` line.
fn partition_line(cluster: &Cluster, p: &Partition) -> String {
    let mut line = String::new();
    push_kv(&mut line, "PartitionName", &p.name);
    let nodes: Vec<String> = p.node_sets.iter().map(NodeSet::hostlist).collect();
    push_kv(&mut line, "Nodes", &nodes.join(","));
    let s = &p.settings;
    if s.default {
        push_kv(&mut line, "Default", "YES");
    }
    if let Some(t) = &s.max_time {
        push_kv(&mut line, "MaxTime", &time_value(t));
    }
    if let Some(t) = &s.default_time {
        push_kv(&mut line, "DefaultTime", &time_value(t));
    }
    if let Some(n) = s.max_nodes_per_job {
        push_kv(&mut line, "MaxNodes", &n.to_string());
    }
    if let Some(n) = s.min_nodes_per_job {
        push_kv(&mut line, "MinNodes", &n.to_string());
    }
    for (key, list) in [
        ("AllowAccounts", &s.allow_accounts),
        ("AllowGroups", &s.allow_groups),
        ("AllowQos", &s.allow_qos),
    ] {
        if !list.is_empty() {
            let items: Vec<&str> = list.iter().map(|item| item.trim()).collect();
            push_kv(&mut line, key, &items.join(","));
        }
    }
    if let Some(tier) = s.priority_tier {
        push_kv(&mut line, "PriorityTier", &tier.to_string());
    }
    if s.exclusive {
        push_kv(&mut line, "OverSubscribe", "EXCLUSIVE");
    } else if let Some(o) = &s.oversubscribe {
        push_kv(&mut line, "OverSubscribe", &o.trim().to_ascii_uppercase());
    }
    // An explicit DefMem* (on the partition or the whole cluster) wins over the derived one.
    let explicit_def_mem = s
        .extra
        .keys()
        .chain(cluster.extra.keys())
        .any(|k| PARTITION_DEF_MEM.iter().any(|d| d.eq_ignore_ascii_case(k.trim())));
    if !explicit_def_mem {
        if let Some(mem) = default_mem_per_cpu_mib(p) {
            push_kv(&mut line, "DefMemPerCPU", &mem.to_string());
        }
    }
    for (key, value) in &s.extra {
        let key = match classify_partition_key(cluster.version, key) {
            KeyClass::Allowed(k) | KeyClass::Merged(k) => k,
            // Only reachable without validation (render_unvalidated): written as given.
            KeyClass::Controlled { .. } | KeyClass::OtherVersion { .. } | KeyClass::Unknown => key.trim(),
        };
        push_kv(&mut line, key, value);
    }
    push_kv(&mut line, "State", "UP");
    line
}
