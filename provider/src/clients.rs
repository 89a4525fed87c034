//! What every resource gets once the provider is configured: the AWS clients, the default
//! tags and the guardrails. Below the resources (which read it) and the provider block
//! (which makes it), so neither imports the other for it.

use std::collections::BTreeMap;

use hpc_aws::Aws;
use tfplugin::model::{Field, Model};
use tfplugin::{Ctx, Diagnostic, Type, Value};

use crate::pricing::Limits;

tfplugin::model! {
    /// A taggable resource's own tags.
    struct Tags {
        tags: Field<BTreeMap<String, String>>,
    }
}

tfplugin::model! {
    /// Its tags merged over the provider's default tags.
    struct TagsAll {
        tags_all: Field<BTreeMap<String, String>>,
    }
}

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
    /// A value that is not a taggable object (a destroy's null plan) has none to plan.
    pub fn plan_tags_all(&self, planned: &mut Value) {
        let Ok(Tags { tags }) = Tags::from_value(planned) else {
            return;
        };
        let all = match tags {
            Field::Known(t) => Field::Known(self.merged(t)),
            Field::Unset => Field::Known(self.merged(BTreeMap::new())),
            Field::Unknown => Field::Unknown,
        };
        let ty = Type::Object([("tags_all".to_string(), Type::map(Type::String))].into());
        // Only an object reads as `Tags`: the write cannot fail.
        let _ = tfplugin::model::change(planned, &ty, |t: &mut TagsAll| t.tags_all = all);
    }

    /// One EC2 client per region: the provider's, and each of `regions` (None: the provider's).
    pub fn ec2_by_region<'a>(
        &self,
        regions: impl IntoIterator<Item = Option<&'a str>>,
    ) -> BTreeMap<String, hpc_aws::ec2::Ec2> {
        let mut out = BTreeMap::new();
        out.insert(self.aws.region.clone(), self.ec2.clone());
        for r in regions.into_iter().flatten() {
            out.entry(r.to_string()).or_insert_with(|| self.aws.ec2_in(r));
        }
        out
    }

    /// `tags` merged over the provider's default tags, sorted by key.
    pub fn tags_all(&self, tags: &[(String, String)]) -> Vec<(String, String)> {
        self.merged(tags.iter().cloned().collect()).into_iter().collect()
    }

    /// `tags` over the provider's default tags.
    fn merged(&self, tags: BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut all = self.default_tags.clone();
        all.extend(tags);
        all
    }
}

impl Clients {
    /// The configured provider's clients, or the diagnostic that it is not configured.
    pub fn of(ctx: &Ctx) -> Result<&Clients, Diagnostic> {
        ctx.provider::<Clients>()
    }
}
