//! One module per resource type.

pub mod lustre_fs;
