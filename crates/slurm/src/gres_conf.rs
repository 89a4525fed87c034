//! gres.conf: one explicit line per GPU node set.
//!
//! `AutoDetect` is not used: the gres.conf man pages of 22.05, 24.11 and 26.05 state that
//! it "cannot be used with cloud nodes" (slurmctld must know every cloud node's GPUs
//! before the node exists), and Debian's Slurm packages are built without the NVML
//! plugin anyway. Explicit lines work identically on the controller (which reads them
//! for nodes that are powered down) and on the nodes, and they can be shown in a plan.
//! EC2 GPU instances expose their GPUs as `/dev/nvidia0` .. `/dev/nvidia<N-1>`.

use crate::model::{Cluster, NodeSet};
use crate::slurm_conf::header;
use crate::text::push_kv;

/// The device files of a node set's GPUs: `/dev/nvidia0` or `/dev/nvidia[0-7]`.
fn gpu_files(count: u32) -> String {
    if count <= 1 {
        "/dev/nvidia0".to_string()
    } else {
        format!("/dev/nvidia[0-{}]", count - 1)
    }
}

/// The gres.conf line of a node set with GPUs.
pub(crate) fn gres_line(ns: &NodeSet) -> Option<String> {
    let gpu_type = ns.gpu_type()?;
    let mut line = String::new();
    push_kv(&mut line, "NodeName", &ns.hostlist());
    push_kv(&mut line, "Name", "gpu");
    push_kv(&mut line, "Type", &gpu_type);
    push_kv(&mut line, "File", &gpu_files(ns.shape.gpus));
    Some(line)
}

/// Renders gres.conf without validating. The same file goes to the controller and every
/// node (24.11's gres.conf(5): cloud nodes need a gres.conf listing all cloud nodes).
pub(crate) fn render_gres_conf(c: &Cluster) -> String {
    let mut out = header("gres.conf", c);
    out.push_str(
        "# Explicit GPU lines: AutoDetect cannot be used with cloud nodes. The same file goes\n\
         # on the controller and on every node.\n",
    );
    let lines: Vec<String> = c.node_sets().filter_map(|(_, ns)| gres_line(ns)).collect();
    if lines.is_empty() {
        out.push_str("# No node set has GPUs.\n");
    }
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_file_ranges() {
        assert_eq!(gpu_files(1), "/dev/nvidia0");
        assert_eq!(gpu_files(8), "/dev/nvidia[0-7]");
    }
}
