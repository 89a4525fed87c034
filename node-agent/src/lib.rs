//! hpc-node: the agent baked into every hpcforge image.
//!
//! - [`hostlist`]: Slurm host lists.
//! - [`resume`]: Slurm's ResumeProgram: launch instances for nodes across capacity pools, with
//!   failover within one invocation and a cool-down for pools without capacity.
//!
//! - [`reconcile`]: the head node's Slurm configuration from the published desired state.
//!
//! Still to come (issue 5): time-based failover, orphan sweep, health checks and Lustre eviction.

pub mod guardrail;
pub mod health;
pub mod hostlist;
pub mod reconcile;
pub mod resume;
pub mod sweep;
