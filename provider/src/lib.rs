//! terraform-provider-hpc: the `hpc` provider (registry address `hpcforge/hpc`).

pub mod convert;
pub mod desired_state;
pub mod pricing;
pub mod provider;
pub mod resources;

/// The provider's registry address, used in messages.
pub const ADDRESS: &str = "hpcforge/hpc";
