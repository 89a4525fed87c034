//! Slurm's HealthCheckProgram on a compute node: what the node should have (from its
//! partition's desired state) against what it has: GPU count (nvidia-smi), EFA devices
//! (fi_info -p efa) and the cluster's shared file system mounts. A failing node is drained
//! with the reason, so Slurm schedules no more jobs on it.

use std::process::Command;

#[cfg(doc)]
use hpc_desired_state::ClusterDoc;
use hpc_desired_state::ShapeDoc;

/// What the checks observed, each as a result (Err = the problem, for the drain reason).
pub trait Probe {
    fn gpu_count(&self) -> Result<u32, String>;
    fn efa_present(&self) -> Result<bool, String>;
    fn mounted(&self, mount_point: &str) -> bool;
}

/// The real node: nvidia-smi, fi_info and /proc/mounts.
pub struct System;

impl Probe for System {
    fn gpu_count(&self) -> Result<u32, String> {
        let out = Command::new("nvidia-smi")
            .args(["--query-gpu=name", "--format=csv,noheader"])
            .output()
            .map_err(|e| format!("nvidia-smi cannot run ({e}): is the NVIDIA driver installed?"))?;
        if !out.status.success() {
            return Err(format!(
                "nvidia-smi failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("no output")
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count() as u32)
    }

    fn efa_present(&self) -> Result<bool, String> {
        let out = Command::new("fi_info")
            .args(["-p", "efa", "-t", "FI_EP_RDM"])
            .output()
            .map_err(|e| format!("fi_info cannot run ({e}): is libfabric installed?"))?;
        Ok(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("provider: efa"))
    }

    fn mounted(&self, mount_point: &str) -> bool {
        std::fs::read_to_string("/proc/mounts")
            .map(|m| m.lines().any(|l| l.split_whitespace().nth(1) == Some(mount_point)))
            .unwrap_or(false)
    }
}

/// The problems of this node (empty: healthy).
/// `mount_points` are the cluster's shared file systems ([`ClusterDoc::shared_mount_points`]).
pub fn check(shape: &ShapeDoc, mount_points: &[String], probe: &dyn Probe) -> Vec<String> {
    let mut problems = Vec::new();
    if shape.gpus > 0 {
        match probe.gpu_count() {
            Ok(n) if n == shape.gpus => {}
            Ok(n) => problems.push(format!("{n} of {} GPUs visible", shape.gpus)),
            Err(e) => problems.push(e),
        }
    }
    if shape.efa {
        match probe.efa_present() {
            Ok(true) => {}
            Ok(false) => problems.push("no EFA device (fi_info -p efa found none)".into()),
            Err(e) => problems.push(e),
        }
    }
    for point in mount_points {
        if !probe.mounted(point) {
            problems.push(format!("{point} is not mounted"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        gpus: Result<u32, String>,
        efa: bool,
        mounts: Vec<&'static str>,
    }

    impl Probe for Fake {
        fn gpu_count(&self) -> Result<u32, String> {
            self.gpus.clone()
        }
        fn efa_present(&self) -> Result<bool, String> {
            Ok(self.efa)
        }
        fn mounted(&self, mount_point: &str) -> bool {
            self.mounts.contains(&mount_point)
        }
    }

    fn shape(gpus: u32, efa: bool) -> ShapeDoc {
        ShapeDoc {
            instance_type: "p5.48xlarge".into(),
            vcpus: 192,
            cores: 96,
            threads_per_core: 2,
            memory_mib: 2_097_152,
            gpus,
            gpu_model: None,
            gpu_memory_mib: None,
            efa,
            hourly_price: None,
        }
    }

    fn points(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn healthy_nodes_pass_and_each_fault_is_named() {
        let ok = Fake {
            gpus: Ok(8),
            efa: true,
            mounts: vec!["/fsx"],
        };
        assert!(check(&shape(8, true), &points(&["/fsx"]), &ok).is_empty());
        let bad = Fake {
            gpus: Ok(7),
            efa: false,
            mounts: vec![],
        };
        assert_eq!(
            check(&shape(8, true), &points(&["/home", "/fsx"]), &bad),
            vec![
                "7 of 8 GPUs visible",
                "no EFA device (fi_info -p efa found none)",
                "/home is not mounted",
                "/fsx is not mounted"
            ]
        );
        let no_driver = Fake {
            gpus: Err("nvidia-smi cannot run".into()),
            efa: true,
            mounts: vec![],
        };
        assert_eq!(check(&shape(8, false), &[], &no_driver), vec!["nvidia-smi cannot run"]);
        assert!(
            check(&shape(0, false), &[], &bad).is_empty(),
            "a CPU node needs no GPUs or EFA"
        );
    }
}
