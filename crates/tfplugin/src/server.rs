//! The tfplugin6 Provider service: decodes Terraform's values with the schemas, calls the
//! provider's resources, encodes the answers.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::diag::{AttributePath, Diagnostic, Diagnostics};
use crate::plan::plan_resource;
use crate::proto::tfplugin6 as pb;
use crate::proto::tfplugin6::provider_server::Provider as ProviderRpc;
use crate::resource::{
    ConfigureRequest, CreateRequest, Ctx, DataSource, DeleteRequest, ImportRequest, PlanRequest, Provider,
    ProviderData, ReadRequest, Resource, UpdateRequest, UpgradeRequest, ValidateRequest,
};
use crate::schema::Schema;
use crate::value::{Type, Value};
use crate::{json, msgpack, timeouts};

struct Typed<T: ?Sized> {
    imp: Arc<T>,
    schema: Schema,
    ty: Type,
}

pub(crate) struct ProviderService {
    provider: Arc<dyn Provider>,
    provider_schema: Schema,
    resources: BTreeMap<String, Typed<dyn Resource>>,
    data_sources: BTreeMap<String, Typed<dyn DataSource>>,
    data: RwLock<Option<ProviderData>>,
    stop_tx: watch::Sender<bool>,
}

type RpcResult<T> = Result<Response<T>, Status>;

fn decode_dv(dv: Option<&pb::DynamicValue>, ty: &Type) -> Result<Value, Diagnostics> {
    let res = match dv {
        Some(d) if !d.msgpack.is_empty() => msgpack::decode(&d.msgpack, ty),
        Some(d) if !d.json.is_empty() => json::decode(&d.json, ty, false),
        _ => Ok(Value::Null),
    };
    res.map_err(|e| Diagnostic::error("Invalid value from Terraform", e.message).into())
}

fn encode_dv(v: &Value, ty: &Type) -> Result<pb::DynamicValue, Diagnostics> {
    msgpack::encode(v, ty)
        .map(|msgpack| pb::DynamicValue {
            msgpack,
            json: Vec::new(),
        })
        .map_err(|e| Diagnostic::error("Provider produced a value that does not match its schema", e.message).into())
}

/// Replaces unknowns left in a value after apply with null (Terraform forbids unknowns there).
fn scrub_unknowns(v: &mut Value) {
    match v {
        Value::Unknown => *v = Value::Null,
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => e.iter_mut().for_each(scrub_unknowns),
        Value::Map(m) | Value::Object(m) => m.values_mut().for_each(scrub_unknowns),
        Value::Dynamic(_, inner) => scrub_unknowns(inner),
        _ => {}
    }
}

fn null_write_only(schema: &Schema, v: &mut Value) {
    for a in schema.block.attributes.iter().filter(|a| a.write_only) {
        if let Some(slot) = v.attr_mut(&a.name) {
            *slot = Value::Null;
        }
    }
}

impl ProviderService {
    pub(crate) fn new(provider: Arc<dyn Provider>, stop_tx: watch::Sender<bool>) -> Self {
        let resources = provider
            .resources()
            .into_iter()
            .map(|r| {
                let schema = r.schema();
                let ty = schema.ty();
                (r.type_name().to_string(), Typed { imp: r, schema, ty })
            })
            .collect();
        let data_sources = provider
            .data_sources()
            .into_iter()
            .map(|d| {
                let schema = d.schema();
                let ty = schema.ty();
                (d.type_name().to_string(), Typed { imp: d, schema, ty })
            })
            .collect();
        ProviderService {
            provider_schema: provider.schema(),
            provider,
            resources,
            data_sources,
            data: RwLock::new(None),
            stop_tx,
        }
    }

    fn ctx(&self) -> Ctx {
        let data = self.data.read().ok().and_then(|d| d.clone());
        Ctx::new(data, self.stop_tx.subscribe())
    }

    fn resource(&self, name: &str) -> Result<&Typed<dyn Resource>, Diagnostics> {
        self.resources.get(name).ok_or_else(|| {
            Diagnostic::error(
                "Unknown resource type",
                format!("This provider has no resource {name:?}."),
            )
            .into()
        })
    }

    fn data_source(&self, name: &str) -> Result<&Typed<dyn DataSource>, Diagnostics> {
        self.data_sources.get(name).ok_or_else(|| {
            Diagnostic::error(
                "Unknown data source",
                format!("This provider has no data source {name:?}."),
            )
            .into()
        })
    }

    async fn plan(
        &self,
        req: pb::plan_resource_change::Request,
    ) -> Result<pb::plan_resource_change::Response, Diagnostics> {
        let r = self.resource(&req.type_name)?;
        let prior = decode_dv(req.prior_state.as_ref(), &r.ty)?;
        let proposed = decode_dv(req.proposed_new_state.as_ref(), &r.ty)?;
        let config = decode_dv(req.config.as_ref(), &r.ty)?;
        if proposed.is_null() {
            let diagnostics = if prior.is_null() {
                Diagnostics::new()
            } else {
                r.imp.plan_destroy(self.ctx(), &prior).await
            };
            return Ok(pb::plan_resource_change::Response {
                planned_state: Some(encode_dv(&Value::Null, &r.ty)?),
                planned_private: req.prior_private,
                diagnostics: diagnostics.to_proto(),
                ..Default::default()
            });
        }
        let change = plan_resource(&r.schema, &prior, &proposed, &config);
        let mut plan = PlanRequest {
            ctx: self.ctx(),
            prior,
            config,
            planned: change.planned,
            requires_replace: change.requires_replace,
            diagnostics: Diagnostics::new(),
        };
        r.imp.modify_plan(&mut plan).await;
        null_write_only(&r.schema, &mut plan.planned);
        let mut replace: Vec<AttributePath> = Vec::new();
        for p in plan.requires_replace {
            if !replace.contains(&p) {
                replace.push(p);
            }
        }
        Ok(pb::plan_resource_change::Response {
            planned_state: Some(encode_dv(&plan.planned, &r.ty)?),
            requires_replace: replace.iter().map(AttributePath::to_proto).collect(),
            planned_private: req.prior_private,
            diagnostics: plan.diagnostics.to_proto(),
            ..Default::default()
        })
    }

    async fn apply(
        &self,
        req: pb::apply_resource_change::Request,
    ) -> Result<pb::apply_resource_change::Response, Diagnostics> {
        let r = self.resource(&req.type_name)?;
        let prior = decode_dv(req.prior_state.as_ref(), &r.ty)?;
        let planned = decode_dv(req.planned_state.as_ref(), &r.ty)?;
        let config = decode_dv(req.config.as_ref(), &r.ty)?;
        let ctx = self.ctx();
        let (mut state, diags) = if planned.is_null() {
            let diags = r
                .imp
                .delete(DeleteRequest {
                    ctx,
                    prior: prior.clone(),
                })
                .await;
            // A failed delete leaves the object in state.
            (if diags.has_errors() { prior } else { Value::Null }, diags)
        } else if prior.is_null() {
            let out = r.imp.create(CreateRequest { ctx, planned, config }).await;
            (out.state, out.diagnostics)
        } else {
            let out = r
                .imp
                .update(UpdateRequest {
                    ctx,
                    prior,
                    planned,
                    config,
                })
                .await;
            (out.state, out.diagnostics)
        };
        scrub_unknowns(&mut state);
        null_write_only(&r.schema, &mut state);
        Ok(pb::apply_resource_change::Response {
            new_state: Some(encode_dv(&state, &r.ty)?),
            private: req.planned_private,
            diagnostics: diags.to_proto(),
            legacy_type_system: false,
        })
    }
}

macro_rules! respond {
    ($result:expr, $resp:ty) => {
        match $result {
            Ok(r) => Ok(Response::new(r)),
            Err(d) => Ok(Response::new(<$resp>::from_diagnostics(d))),
        }
    };
}

trait FromDiagnostics {
    fn from_diagnostics(d: Diagnostics) -> Self;
}

macro_rules! from_diags {
    ($($t:ty),*) => {
                $(#[allow(clippy::needless_update)]
        impl FromDiagnostics for $t {
            fn from_diagnostics(d: Diagnostics) -> Self {
                Self { diagnostics: d.to_proto(), ..Default::default() }
            }
        })*
    };
}

from_diags!(
    pb::validate_provider_config::Response,
    pb::validate_resource_config::Response,
    pb::validate_data_resource_config::Response,
    pb::upgrade_resource_state::Response,
    pb::configure_provider::Response,
    pb::read_resource::Response,
    pb::plan_resource_change::Response,
    pb::apply_resource_change::Response,
    pb::import_resource_state::Response,
    pb::read_data_source::Response
);

#[tonic::async_trait]
impl ProviderRpc for ProviderService {
    async fn get_metadata(&self, _: Request<pb::get_metadata::Request>) -> RpcResult<pb::get_metadata::Response> {
        Ok(Response::new(pb::get_metadata::Response {
            server_capabilities: Some(capabilities()),
            diagnostics: Vec::new(),
            data_sources: self
                .data_sources
                .keys()
                .map(|k| pb::get_metadata::DataSourceMetadata { type_name: k.clone() })
                .collect(),
            resources: self
                .resources
                .keys()
                .map(|k| pb::get_metadata::ResourceMetadata { type_name: k.clone() })
                .collect(),
        }))
    }

    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> RpcResult<pb::get_provider_schema::Response> {
        Ok(Response::new(pb::get_provider_schema::Response {
            provider: Some(self.provider_schema.to_proto()),
            resource_schemas: self
                .resources
                .iter()
                .map(|(k, r)| (k.clone(), r.schema.to_proto()))
                .collect(),
            data_source_schemas: self
                .data_sources
                .iter()
                .map(|(k, d)| (k.clone(), d.schema.to_proto()))
                .collect(),
            server_capabilities: Some(capabilities()),
            ..Default::default()
        }))
    }

    async fn validate_provider_config(
        &self,
        req: Request<pb::validate_provider_config::Request>,
    ) -> RpcResult<pb::validate_provider_config::Response> {
        let req = req.into_inner();
        let result = async {
            let config = decode_dv(req.config.as_ref(), &self.provider_schema.ty())?;
            let diags = self.provider.validate(ValidateRequest { config }).await;
            Ok(pb::validate_provider_config::Response {
                diagnostics: diags.to_proto(),
            })
        }
        .await;
        respond!(result, pb::validate_provider_config::Response)
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> RpcResult<pb::validate_resource_config::Response> {
        let req = req.into_inner();
        let result = async {
            let r = self.resource(&req.type_name)?;
            let config = decode_dv(req.config.as_ref(), &r.ty)?;
            let mut diags = timeouts::validate(&config);
            diags.extend(r.imp.validate(ValidateRequest { config }).await);
            Ok(pb::validate_resource_config::Response {
                diagnostics: diags.to_proto(),
            })
        }
        .await;
        respond!(result, pb::validate_resource_config::Response)
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<pb::validate_data_resource_config::Request>,
    ) -> RpcResult<pb::validate_data_resource_config::Response> {
        let req = req.into_inner();
        let result = async {
            let d = self.data_source(&req.type_name)?;
            let config = decode_dv(req.config.as_ref(), &d.ty)?;
            let diags = d.imp.validate(ValidateRequest { config }).await;
            Ok(pb::validate_data_resource_config::Response {
                diagnostics: diags.to_proto(),
            })
        }
        .await;
        respond!(result, pb::validate_data_resource_config::Response)
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> RpcResult<pb::upgrade_resource_state::Response> {
        let req = req.into_inner();
        let result = async {
            let r = self.resource(&req.type_name)?;
            let json = req.raw_state.map(|s| s.json).unwrap_or_default();
            if json.is_empty() {
                return Err(Diagnostic::error(
                    "Unsupported state format",
                    "The stored state is in the legacy flatmap format, which this provider never wrote.",
                )
                .into());
            }
            let state = r
                .imp
                .upgrade_state(UpgradeRequest {
                    version: req.version,
                    json,
                })
                .await?;
            Ok(pb::upgrade_resource_state::Response {
                upgraded_state: Some(encode_dv(&state, &r.ty)?),
                diagnostics: Vec::new(),
            })
        }
        .await;
        respond!(result, pb::upgrade_resource_state::Response)
    }

    async fn configure_provider(
        &self,
        req: Request<pb::configure_provider::Request>,
    ) -> RpcResult<pb::configure_provider::Response> {
        let req = req.into_inner();
        let result = async {
            let config = decode_dv(req.config.as_ref(), &self.provider_schema.ty())?;
            let data = self
                .provider
                .configure(ConfigureRequest {
                    terraform_version: req.terraform_version,
                    config,
                })
                .await?;
            if let Ok(mut slot) = self.data.write() {
                *slot = Some(data);
            }
            Ok(pb::configure_provider::Response {
                diagnostics: Vec::new(),
            })
        }
        .await;
        respond!(result, pb::configure_provider::Response)
    }

    async fn read_resource(&self, req: Request<pb::read_resource::Request>) -> RpcResult<pb::read_resource::Response> {
        let req = req.into_inner();
        let result = async {
            let r = self.resource(&req.type_name)?;
            let state = decode_dv(req.current_state.as_ref(), &r.ty)?;
            let new_state = if state.is_null() {
                Value::Null
            } else {
                let mut v = r
                    .imp
                    .read(ReadRequest { ctx: self.ctx(), state })
                    .await?
                    .unwrap_or(Value::Null);
                scrub_unknowns(&mut v);
                v
            };
            Ok(pb::read_resource::Response {
                new_state: Some(encode_dv(&new_state, &r.ty)?),
                private: req.private,
                ..Default::default()
            })
        }
        .await;
        respond!(result, pb::read_resource::Response)
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> RpcResult<pb::plan_resource_change::Response> {
        respond!(self.plan(req.into_inner()).await, pb::plan_resource_change::Response)
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> RpcResult<pb::apply_resource_change::Response> {
        respond!(self.apply(req.into_inner()).await, pb::apply_resource_change::Response)
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> RpcResult<pb::import_resource_state::Response> {
        let req = req.into_inner();
        let result = async {
            let r = self.resource(&req.type_name)?;
            let state = r
                .imp
                .import(ImportRequest {
                    ctx: self.ctx(),
                    id: req.id,
                })
                .await?;
            Ok(pb::import_resource_state::Response {
                imported_resources: vec![pb::import_resource_state::ImportedResource {
                    type_name: req.type_name.clone(),
                    state: Some(encode_dv(&state, &r.ty)?),
                    private: Vec::new(),
                }],
                ..Default::default()
            })
        }
        .await;
        respond!(result, pb::import_resource_state::Response)
    }

    async fn read_data_source(
        &self,
        req: Request<pb::read_data_source::Request>,
    ) -> RpcResult<pb::read_data_source::Response> {
        let req = req.into_inner();
        let result = async {
            let d = self.data_source(&req.type_name)?;
            let config = decode_dv(req.config.as_ref(), &d.ty)?;
            let state = d.imp.read(self.ctx(), config).await?;
            Ok(pb::read_data_source::Response {
                state: Some(encode_dv(&state, &d.ty)?),
                ..Default::default()
            })
        }
        .await;
        respond!(result, pb::read_data_source::Response)
    }

    async fn get_functions(&self, _: Request<pb::get_functions::Request>) -> RpcResult<pb::get_functions::Response> {
        Ok(Response::new(pb::get_functions::Response::default()))
    }

    async fn stop_provider(&self, _: Request<pb::stop_provider::Request>) -> RpcResult<pb::stop_provider::Response> {
        tracing::info!("Terraform asked the provider to stop: cancelling waits in progress");
        let _ = self.stop_tx.send(true);
        Ok(Response::new(pb::stop_provider::Response { error: String::new() }))
    }
}

/// What this server tells Terraform it does beyond the protocol's minimum: it plans destroys
/// (Terraform then calls PlanResourceChange for a resource to be destroyed, and shows what
/// [`crate::Resource::plan_destroy`] says).
fn capabilities() -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        plan_destroy: true,
        ..Default::default()
    }
}
