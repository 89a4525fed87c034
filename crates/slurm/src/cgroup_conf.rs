//! cgroup.conf: confine jobs to their cores, memory and GPUs.
//!
//! Both versions get the same settings; what differs is what must stay out:
//! - `CgroupAutomount` exists in 22.05 but was removed in 23.11 (24.11 logs an error for
//!   it). Debian 12 and current AMIs mount cgroup v2 through systemd, so it is not needed.
//! - `ConstrainKmemSpace`, `AllowedKmemSpace`, `MaxKmemPercent`, `MinKmemSpace` exist in
//!   22.05 (cgroup v1 only) and were removed in 23.11.
//! - `CgroupPlugin=autodetect` is the documented default of both and picks cgroup v2 on
//!   current kernels; it is written explicitly so the file says what runs. (24.11 also
//!   accepts `disabled`, which 22.05 does not know.)
//!
//! `ConstrainRAMSpace` only takes effect with a `CR_*_Memory` select type parameter,
//! which slurm.conf sets (`CR_Core_Memory`).

use crate::model::{Cluster, SlurmVersion};
use crate::slurm_conf::header;

/// Renders cgroup.conf without validating.
pub(crate) fn render_cgroup_conf(c: &Cluster) -> String {
    let mut out = header("cgroup.conf", c);
    out.push_str(match c.version {
        SlurmVersion::V22_05 => {
            "# CgroupAutomount and the Kmem options are left out: systemd mounts cgroup v2, and\n\
             # Slurm 23.11 removed those options.\n"
        }
        SlurmVersion::V24_11 | SlurmVersion::V26_05 => {
            "# CgroupAutomount and the Kmem options were removed in Slurm 23.11.\n"
        }
    });
    for (key, value) in [
        ("CgroupPlugin", "autodetect"),
        ("ConstrainCores", "yes"),
        ("ConstrainRAMSpace", "yes"),
        ("ConstrainDevices", "yes"),
    ] {
        out.push_str(key);
        out.push('=');
        out.push_str(value);
        out.push('\n');
    }
    out
}
