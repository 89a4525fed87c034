//! What every resource gets once the provider is configured: the AWS clients, the default
//! tags and the guardrails. Below the resources (which read it) and the provider block
//! (which makes it), so neither imports the other for it.

use std::collections::BTreeMap;

use hpc_aws::Aws;
use tfplugin::{Ctx, Diagnostic, Value};

use crate::convert;
use crate::pricing::Limits;

/// What every resource gets once the provider is configured.
pub struct Clients {
    pub aws: Aws,
    pub fsx: hpc_aws::fsx::Fsx,
    pub ec2: hpc_aws::ec2::Ec2,
    pub ssm: hpc_aws::ssm::Ssm,
    pub secrets: hpc_aws::secrets::Secrets,
    pub efs: hpc_aws::efs::Efs,
    /// Tags added to every taggable resource (a resource's own tags win).
    pub default_tags: BTreeMap<String, String>,
    /// Cost guardrails checked at plan time.
    pub limits: Limits,
    /// On-demand prices (USD/hour) that replace the built-in table.
    pub price_overrides: Vec<(String, f64)>,
}

impl Clients {
    /// Plans `tags_all` from a planned value's `tags`: merged over the default tags, unknown
    /// while `tags` is.
    pub fn plan_tags_all(&self, planned: &mut Value) {
        let tags = planned.attr("tags").clone();
        let all = match convert::pairs(&tags) {
            Some(t) => convert::of_map(&self.tags_all(&t)),
            None if tags.is_null() => convert::of_map(&self.tags_all(&[])),
            None => Value::Unknown,
        };
        planned.set_attr("tags_all", all);
    }

    /// `tags` merged over the provider's default tags, sorted by key.
    pub fn tags_all(&self, tags: &[(String, String)]) -> Vec<(String, String)> {
        let mut all = self.default_tags.clone();
        all.extend(tags.iter().cloned());
        all.into_iter().collect()
    }
}

impl Clients {
    /// The configured provider's clients, or the diagnostic that it is not configured.
    pub fn of(ctx: &Ctx) -> Result<&Clients, Diagnostic> {
        ctx.provider::<Clients>()
    }
}
