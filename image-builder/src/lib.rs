//! hpc-image: bakes, verifies and publishes HPC machine images from HCL2 templates.
//!
//! template → plan (components ordered, checked, keyed) → local build (debootstrap + chroot,
//! layer cache, raw GPT disk) → verify (qemu boot running every component's checks) →
//! publish (EBS direct upload, RegisterImage, CopyImage, sharing, manifest). The amazon-ebs
//! builder runs the same component scripts on an EC2 instance instead.

pub mod catalog;
pub mod cli;
pub mod cmd;
pub mod disk;
pub mod ebs_builder;
pub mod host;
pub mod local;
pub mod plan;
pub mod progress;
pub mod publish;
pub mod template;
pub mod verify;
