//! terraform-provider-hpc: the `hpc` provider (registry address `hpcforge/hpc`).

pub mod clients;
pub mod convert;
pub use hpc_desired_state as desired_state;
pub mod pricing;
pub mod provider;
pub mod resources;

/// The provider's registry address, used in messages.
pub const ADDRESS: &str = "hpcforge/hpc";
