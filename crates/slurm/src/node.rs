//! What a node set's hardware becomes in Slurm terms: memory, GPU type, features, GRES.
//! Validation and rendering both derive these values here, so they cannot disagree.

use crate::hostlist::hostlist;
use crate::model::{InstanceShape, NodeSet};

/// Fixed part of the memory kept back for the OS on every node, in MiB.
pub const OS_MEMORY_BASE_MIB: u64 = 512;

/// Proportional part of the memory kept back for the OS, in percent of the EC2 memory.
pub const OS_MEMORY_PERCENT: u64 = 5;

/// Memory kept back from Slurm on a node: `512 MiB + ceil(5 % of memory_mib)`.
///
/// EC2 advertises the nominal memory of a type, but the kernel sees less (firmware and
/// kernel reservations, page structures: roughly 2-4 % plus a few hundred MiB), and the
/// OS services a node runs (slurmd, munge, sshd, the Lustre client, GPU and EFA
/// daemons) need room too. A node whose slurmd reports less memory than `RealMemory=`
/// is marked invalid and drained, so the allowance errs on the generous side:
/// m5.large 8192 MiB -> 922 kept back, `RealMemory=7270`; p5.48xlarge 2097152 MiB ->
/// 105370 kept back, `RealMemory=1991782`.
pub fn os_memory_allowance_mib(memory_mib: u64) -> u64 {
    // ceil(memory_mib * 5 / 100) without overflowing for any u64.
    let percent = memory_mib / 100 * OS_MEMORY_PERCENT + (memory_mib % 100 * OS_MEMORY_PERCENT).div_ceil(100);
    OS_MEMORY_BASE_MIB.saturating_add(percent)
}

/// `RealMemory=` of a node: its EC2 memory minus [`os_memory_allowance_mib`]; 0 when the
/// instance type is too small to leave anything (validation rejects that).
pub fn real_memory_mib(shape: &InstanceShape) -> u64 {
    shape
        .memory_mib
        .saturating_sub(os_memory_allowance_mib(shape.memory_mib))
}

/// Whether a node state as `scontrol show node` prints it (`IDLE+CLOUD+POWERED_DOWN`) carries
/// `flag` (`POWERED_DOWN`), as its base state or one of its flags.
pub fn node_state_has(state: &str, flag: &str) -> bool {
    state.split('+').any(|f| f == flag)
}

/// The GRES type (and node feature) of an EC2 GPU model: lowercase, with every run of
/// characters other than ASCII letters and digits turned into one `-`.
///
/// `H100` -> `h100`, `A10G` -> `a10g`, `Radeon Pro V520` -> `radeon-pro-v520`.
/// Users then ask for `--gres=gpu:h100:8` or `--constraint=h100`.
pub fn gpu_type_name(model: &str) -> String {
    let mut out = String::with_capacity(model.len());
    for c in model.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

impl NodeSet {
    /// All nodes of the set: `<name>-[1-<max_nodes>]`.
    pub fn hostlist(&self) -> String {
        hostlist(&self.name, 1, self.max_nodes.max(1))
    }

    /// The always-on nodes, `<name>-[1-<static_nodes>]`, if there are any.
    pub fn static_hostlist(&self) -> Option<String> {
        (self.static_nodes > 0).then(|| hostlist(&self.name, 1, self.static_nodes.min(self.max_nodes.max(1))))
    }

    /// The nodes powered up on demand, if there are any.
    pub fn dynamic_hostlist(&self) -> Option<String> {
        (self.static_nodes < self.max_nodes).then(|| hostlist(&self.name, self.static_nodes + 1, self.max_nodes))
    }

    /// The GRES type of the set's GPUs, if it has GPUs and a model.
    pub fn gpu_type(&self) -> Option<String> {
        if self.shape.gpus == 0 {
            return None;
        }
        self.shape
            .gpu_model
            .as_deref()
            .map(gpu_type_name)
            .filter(|t| !t.is_empty())
    }

    /// `Gres=` of the set's nodes: `gpu:<type>:<count>`.
    pub fn gres(&self) -> Option<String> {
        self.gpu_type().map(|t| format!("gpu:{t}:{}", self.shape.gpus))
    }

    /// `Features=` of the set's nodes: the instance type, `efa` when the type has EFA,
    /// the GPU type when it has GPUs, then the extra features; duplicates dropped.
    pub fn node_features(&self) -> Vec<String> {
        let mut features: Vec<String> = Vec::with_capacity(self.features.len() + 3);
        let derived = [
            Some(self.shape.instance_type.clone()),
            self.shape.efa.then(|| "efa".to_string()),
            self.gpu_type(),
        ];
        for feature in derived.into_iter().flatten().chain(self.features.iter().cloned()) {
            if !feature.is_empty() && !features.contains(&feature) {
                features.push(feature);
            }
        }
        features
    }

    /// `RealMemory=` of the set's nodes.
    pub fn real_memory_mib(&self) -> u64 {
        real_memory_mib(&self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_state_flags_are_whole_words() {
        assert!(node_state_has("IDLE+CLOUD+POWERED_DOWN", "POWERED_DOWN"));
        assert!(node_state_has("DOWN+CLOUD", "DOWN"));
        assert!(!node_state_has("IDLE+CLOUD+POWER_DOWN", "DOWN"));
        assert!(!node_state_has("IDLE+CLOUD+POWERED_DOWN", "POWER_DOWN"));
    }

    #[test]
    fn memory_allowance_formula() {
        assert_eq!(os_memory_allowance_mib(8192), 512 + 410);
        assert_eq!(os_memory_allowance_mib(2_097_152), 512 + 104_858);
        assert_eq!(os_memory_allowance_mib(0), 512);
        assert_eq!(os_memory_allowance_mib(786_432), 512 + 39_322);
        assert_eq!(os_memory_allowance_mib(u64::MAX), 512 + u64::MAX / 20 + 1);
    }

    #[test]
    fn gpu_models_become_gres_types() {
        assert_eq!(gpu_type_name("H100"), "h100");
        assert_eq!(gpu_type_name("A10G"), "a10g");
        assert_eq!(gpu_type_name("Radeon Pro V520"), "radeon-pro-v520");
        assert_eq!(gpu_type_name("  L40S "), "l40s");
        assert_eq!(gpu_type_name("--"), "");
    }
}
