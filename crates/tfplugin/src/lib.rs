//! tfplugin: a Terraform plugin protocol 6 server for providers written in Rust.
//!
//! - [`serve`]: the go-plugin handshake, AutoMTLS, and the gRPC services Terraform calls.
//! - [`value`], [`msgpack`], [`json`]: Terraform values and their wire encodings.
//! - [`schema`], [`plan`]: schemas with plan behaviour (defaults, replace rules, unknowns).
//! - [`resource`]: the traits a provider implements.
//! - [`diag`]: diagnostics with attribute paths.
//! - [`model`]: typed models of values ([`model!`]), defaults taken from the schema.
//!
//! This crate knows nothing of AWS or of any particular provider.

pub mod diag;
pub mod json;
pub mod logging;
pub mod model;
pub mod msgpack;
pub mod plan;
pub mod resource;
pub mod schema;
pub mod serve;
mod server;
pub mod timeouts;
pub mod tls;
pub mod value;

/// Generated protocol types. Not part of the stable API.
pub mod proto {
    #![allow(clippy::all, missing_docs)]
    pub mod tfplugin6 {
        tonic::include_proto!("tfplugin6");
    }
    pub mod plugin {
        tonic::include_proto!("plugin");
    }
    pub mod health {
        tonic::include_proto!("grpc.health.v1");
    }
}

pub use diag::{AttributePath, Diagnostic, Diagnostics};
pub use resource::{
    ApplyOutcome, ConfigureRequest, CreateRequest, Ctx, DataSource, DeleteRequest, ImportRequest, PlanRequest,
    Provider, ProviderData, ReadRequest, Resource, UpdateRequest, UpgradeRequest, ValidateRequest,
};
pub use schema::{Attribute, Block, BlockNesting, NestedBlock, Nesting, Schema};
pub use value::{Number, Type, Value};
