//! hpc-node: the agent baked into every hpcforge image.
//!
//! - [`cli`] and [`cmd`]: the command line and one module per command; `main.rs` only dispatches.
//! - [`boot`]: what each role does at boot (`head-init`, `login-init`, `node-init`).
//! - [`reconcile`]: the head node's Slurm configuration from the published desired state;
//!   [`associations`]: the accounts, QOS and user associations in Slurm's database.
//! - [`resume`]: Slurm's ResumeProgram: launch instances for nodes across capacity pools, with
//!   failover within one invocation and a cool-down for pools without capacity.
//! - [`sweep`], [`health`], [`guardrail`]: orphans and late nodes, node health, the run-time
//!   cost guardrail.
//! - [`published`]: reading the published desired state; [`controller`]: which of two
//!   controllers is in charge.
//! - [`host`]: files, accounts and systemd on this machine; [`userdir`]: directories users
//!   control (their home), changed by root without following their links.

pub mod associations;
pub mod blocks;
pub mod boot;
pub mod cli;
pub mod cmd;
pub mod controller;
pub mod error;
pub mod guardrail;
pub mod health;
pub mod host;
pub mod nodemap;
pub mod published;
pub mod reconcile;
pub mod resume;
pub mod statefile;
pub mod sweep;
pub mod userdir;
