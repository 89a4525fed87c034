//! The traits a provider implements: [`Provider`], [`Resource`], [`DataSource`].
//!
//! Every call takes a request struct and returns a response struct or diagnostics.
//! Optional capabilities (config validation, plan modification, import, state upgrade)
//! have defaults, so a resource implements only what it supports.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::Schema;
use crate::value::Value;

/// What the provider's `configure` produced (clients, settings), shared with every call.
pub type ProviderData = Arc<dyn Any + Send + Sync>;

/// Context for every resource call: the configured provider and the stop signal.
#[derive(Clone)]
pub struct Ctx {
    data: Option<ProviderData>,
    stop: watch::Receiver<bool>,
}

impl Ctx {
    pub fn new(data: Option<ProviderData>, stop: watch::Receiver<bool>) -> Self {
        Ctx { data, stop }
    }

    /// The configured provider data, or a diagnostic if the provider is not configured.
    pub fn provider<T: Any + Send + Sync>(&self) -> Result<&T, Diagnostic> {
        self.data.as_ref().and_then(|d| d.downcast_ref::<T>()).ok_or_else(|| {
            Diagnostic::error(
                "Provider not configured",
                "The provider was used before ConfigureProvider succeeded. Check the provider block for errors.",
            )
        })
    }

    /// True once Terraform asked the provider to stop (Ctrl-C); long waits should give up.
    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves when Terraform asks the provider to stop.
    pub async fn stopped(&self) {
        let mut rx = self.stop.clone();
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                // The sender is gone: nobody can ask us to stop any more.
                std::future::pending::<()>().await;
            }
        }
    }
}

pub struct ConfigureRequest {
    pub terraform_version: String,
    pub config: Value,
}

pub struct ValidateRequest {
    pub config: Value,
}

/// A plan in progress: the schema-driven plan is done; a resource may adjust it.
pub struct PlanRequest {
    pub ctx: Ctx,
    pub prior: Value,
    pub config: Value,
    pub planned: Value,
    pub requires_replace: Vec<crate::diag::AttributePath>,
    pub diagnostics: Diagnostics,
}

pub struct CreateRequest {
    pub ctx: Ctx,
    pub planned: Value,
    pub config: Value,
}

pub struct ReadRequest {
    pub ctx: Ctx,
    pub state: Value,
}

pub struct UpdateRequest {
    pub ctx: Ctx,
    pub prior: Value,
    pub planned: Value,
    pub config: Value,
}

pub struct DeleteRequest {
    pub ctx: Ctx,
    pub prior: Value,
}

pub struct ImportRequest {
    pub ctx: Ctx,
    pub id: String,
}

pub struct UpgradeRequest {
    /// The schema version the stored state was written with.
    pub version: i64,
    /// The stored state as JSON.
    pub json: Vec<u8>,
}

/// The result of create or update. `state` is what exists now; on failure after something
/// was created, it still holds that something so Terraform records it (as tainted) rather
/// than leaking it.
pub struct ApplyOutcome {
    pub state: Value,
    pub diagnostics: Diagnostics,
}

impl ApplyOutcome {
    pub fn ok(state: Value) -> Self {
        ApplyOutcome {
            state,
            diagnostics: Diagnostics::new(),
        }
    }

    /// Done, with warnings for the user.
    pub fn ok_with(state: Value, warnings: Diagnostics) -> Self {
        ApplyOutcome {
            state,
            diagnostics: warnings,
        }
    }

    pub fn failed(state: Value, diagnostics: impl Into<Diagnostics>) -> Self {
        ApplyOutcome {
            state,
            diagnostics: diagnostics.into(),
        }
    }
}

#[async_trait]
pub trait Resource: Send + Sync + 'static {
    /// The full type name, e.g. `hpc_lustre_fs`.
    fn type_name(&self) -> &'static str;

    fn schema(&self) -> Schema;

    /// Checks the configuration without calling any API. Values may be unknown.
    async fn validate(&self, _req: ValidateRequest) -> Diagnostics {
        Diagnostics::new()
    }

    /// Adjusts the plan after defaults, unknowns and replace rules are applied.
    async fn modify_plan(&self, _req: &mut PlanRequest) {}

    /// What the plan of a destroy says about `prior` (Terraform shows these diagnostics with
    /// the plan; an error stops it). Default: nothing.
    async fn plan_destroy(&self, _ctx: Ctx, _prior: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome;

    /// The current state, or `None` when the object no longer exists.
    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics>;

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome;

    async fn delete(&self, req: DeleteRequest) -> Diagnostics;

    /// The state to import for an id; the framework then reads it.
    async fn import(&self, _req: ImportRequest) -> Result<Value, Diagnostics> {
        Err(Diagnostic::error(
            format!("{} does not support import", self.type_name()),
            "Create it with Terraform instead.",
        )
        .into())
    }

    /// Upgrades stored state of an older schema version to the current one. The default
    /// decodes state of the current version, with the defaults of attributes added since it was
    /// written ([`crate::plan::fill_defaults`]).
    async fn upgrade_state(&self, req: UpgradeRequest) -> Result<Value, Diagnostics> {
        let schema = self.schema();
        if req.version != schema.version {
            return Err(Diagnostic::error(
                "Unsupported state version",
                format!(
                    "{} state has schema version {}, this provider knows version {}. Use a newer provider.",
                    self.type_name(),
                    req.version,
                    schema.version
                ),
            )
            .into());
        }
        let mut state = crate::json::decode(&req.json, &schema.ty(), true)
            .map_err(|e| Diagnostic::error("Stored state cannot be read", e.message))?;
        crate::plan::fill_defaults(&schema.block, &mut state);
        Ok(state)
    }
}

#[async_trait]
pub trait DataSource: Send + Sync + 'static {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    async fn validate(&self, _req: ValidateRequest) -> Diagnostics {
        Diagnostics::new()
    }
    async fn read(&self, ctx: Ctx, config: Value) -> Result<Value, Diagnostics>;
}

#[async_trait]
pub trait Provider: Send + Sync + 'static {
    fn schema(&self) -> Schema;
    async fn validate(&self, _req: ValidateRequest) -> Diagnostics {
        Diagnostics::new()
    }
    async fn configure(&self, req: ConfigureRequest) -> Result<ProviderData, Diagnostics>;
    fn resources(&self) -> Vec<Arc<dyn Resource>>;
    fn data_sources(&self) -> Vec<Arc<dyn DataSource>>;
}
