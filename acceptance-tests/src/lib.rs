//! Test harness: see src/harness.rs
