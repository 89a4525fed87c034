//! AWS operations for hpcforge: connecting (region, profile, assume role, endpoints), and
//! per-service finders, waiters and mutations with errors that carry their context.
//!
//! This crate knows nothing of Terraform; the provider maps its values onto these models.

pub mod cidr;
pub mod config;
pub mod ebs;
pub mod ec2;
pub mod efs;
pub mod error;
pub mod events;
pub mod fsx;
pub mod image;
pub mod imds;
pub mod quotas;
pub mod secrets;
pub mod ssm;
pub mod view;
pub mod wait;

pub use config::{AssumeRole, Aws, Settings};
pub use error::{AwsError, Result};
