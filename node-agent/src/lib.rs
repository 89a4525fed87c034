//! hpc-node: the agent baked into every hpcforge image.
//!
//! - [`hostlist`]: Slurm host lists.
//! - [`resume`]: Slurm's ResumeProgram: launch instances for nodes across capacity pools, with
//!   failover within one invocation and a cool-down for pools without capacity.
//!
//! Still to come (issue 5): reconcile of the head node's Slurm configuration, time-based
//! failover, health checks and Lustre eviction.

pub mod hostlist;
pub mod resume;
