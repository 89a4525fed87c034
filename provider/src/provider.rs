//! The `hpc` provider block: where and as whom to reach AWS, and tags for everything.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use hpc_aws::{AssumeRole, Aws, Settings};
use tfplugin::model::Model;
use tfplugin::{
    Attribute, AttributePath, Block, BlockNesting, ConfigureRequest, DataSource, Diagnostic, Diagnostics, NestedBlock,
    Provider, ProviderData, Resource, Schema, Type, ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::pricing::Limits;
use crate::resources::capacity::CapacityData;
use crate::resources::cluster::HpcCluster;
use crate::resources::instance_type::InstanceTypeData;
use crate::resources::lustre_fs::LustreFs;
use crate::resources::network::HpcNetwork;
use crate::resources::partition::HpcPartition;
use crate::resources::peering::HpcNetworkPeering;

pub struct HpcProvider;

const DEFAULT_MAX_RETRIES: i64 = 10;

tfplugin::model! {
    /// The provider block.
    #[derive(Debug, Clone)]
    struct ProviderConfig {
        region: Option<String>,
        profile: Option<String>,
        max_retries: Option<i64>,
        assume_role: Option<AssumeRoleConfig>,
        endpoints: Option<BTreeMap<String, Option<String>>>,
        default_tags: Option<DefaultTags>,
        guardrails: Option<Guardrails>,
    }
}

tfplugin::model! {
    #[derive(Debug, Clone)]
    struct AssumeRoleConfig {
        role_arn: String,
        session_name: Option<String>,
        external_id: Option<String>,
    }
}

tfplugin::model! {
    #[derive(Debug, Clone)]
    struct DefaultTags {
        tags: Option<BTreeMap<String, String>>,
    }
}

tfplugin::model! {
    /// Whole numbers stay signed so that validation, not the reader, words a negative one.
    #[derive(Debug, Clone)]
    struct Guardrails {
        allowed_instance_types: Option<Vec<String>>,
        max_nodes_per_partition: Option<i64>,
        max_vcpus_per_cluster: Option<i64>,
        max_gpus_per_cluster: Option<i64>,
        max_hourly_cost_per_cluster: Option<f64>,
        enforce_quotas: Option<bool>,
        prices: Option<BTreeMap<String, f64>>,
    }
}

impl ProviderConfig {
    fn of(config: &Value) -> Result<ProviderConfig, tfplugin::model::ModelError> {
        ProviderConfig::from_value(&HpcProvider.schema().block.with_defaults(config))
    }

    fn settings(&self) -> Settings {
        Settings {
            region: self.region.clone(),
            profile: self.profile.clone(),
            assume_role: self.assume_role.as_ref().map(|r| AssumeRole {
                role_arn: r.role_arn.clone(),
                session_name: r.session_name.clone(),
                external_id: r.external_id.clone(),
            }),
            endpoints: self
                .endpoints
                .iter()
                .flatten()
                .filter_map(|(service, url)| Some((service.clone(), url.clone()?)))
                .collect(),
            max_retries: u32::try_from(self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)).unwrap_or(0),
        }
    }

    fn limits(&self) -> Limits {
        let Some(g) = &self.guardrails else {
            return Limits::default();
        };
        let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok());
        Limits {
            allowed_instance_types: g.allowed_instance_types.clone().unwrap_or_default(),
            max_nodes_per_partition: count(g.max_nodes_per_partition),
            max_vcpus_per_cluster: count(g.max_vcpus_per_cluster),
            max_gpus_per_cluster: count(g.max_gpus_per_cluster),
            max_hourly_cost_per_cluster: g.max_hourly_cost_per_cluster,
            enforce_quotas: g.enforce_quotas.unwrap_or(false),
        }
    }
}

/// The provider block as configured: it must be known whole (it says where AWS is).
fn known_config(config: &Value) -> Result<ProviderConfig, Diagnostics> {
    if !config.is_wholly_known() {
        let mut diags = Diagnostics::new();
        diags.error(
            "Provider configuration depends on values not known yet",
            "The hpc provider block uses values that are only known after apply (for example another \
             resource's attribute). Use values known at plan time: literals, variables or data sources.",
        );
        return Err(diags);
    }
    ProviderConfig::of(config).map_err(|e| e.into_diagnostics("The provider configuration cannot be read"))
}

/// A region code's shape: `us-east-1`, `eu-west-2`, `us-gov-west-1`.
fn region_name(region: &str) -> bool {
    !region.is_empty()
        && region.split('-').count() >= 3
        && region
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
}

/// The guardrails' numbers are limits and prices: none is negative.
fn guardrail_checks(g: &Guardrails, diags: &mut Diagnostics) {
    let at = || AttributePath::root("guardrails");
    let limits = [
        ("max_nodes_per_partition", g.max_nodes_per_partition.map(|n| n as f64)),
        ("max_vcpus_per_cluster", g.max_vcpus_per_cluster.map(|n| n as f64)),
        ("max_gpus_per_cluster", g.max_gpus_per_cluster.map(|n| n as f64)),
        ("max_hourly_cost_per_cluster", g.max_hourly_cost_per_cluster),
    ];
    for (name, n) in limits {
        if n.is_some_and(|n| n < 0.0) {
            diags.error_at(
                at().attr(name),
                format!("{name} cannot be negative"),
                "Use 0 or more; leave it unset for no limit.",
            );
        }
    }
    for (t, p) in g.prices.iter().flatten() {
        if *p < 0.0 {
            diags.error_at(
                at().attr("prices").key(t),
                format!("price of {t} cannot be negative"),
                "Give the on-demand USD per hour, e.g. 55.04.",
            );
        }
    }
    for (i, glob) in g.allowed_instance_types.iter().flatten().enumerate() {
        if glob.trim().is_empty() || glob.contains(char::is_whitespace) {
            diags.error_at(
                at().attr("allowed_instance_types").index(i),
                format!("{glob:?} is not an instance type pattern"),
                "Use an instance type or a glob such as p5.* or g6e.*xlarge.",
            );
        }
    }
}

#[async_trait]
impl Provider for HpcProvider {
    fn schema(&self) -> Schema {
        let endpoint_attrs = hpc_aws::config::SERVICES
            .iter()
            .map(|s| {
                Attribute::optional(s, Type::String)
                    .description(&format!("Endpoint URL for {s}, instead of the standard AWS one."))
            })
            .collect();
        Schema::new(
            0,
            Block::new(vec![
                Attribute::optional("region", Type::String).description(
                    "AWS region, e.g. `us-east-1`. Defaults to the SDK's region chain (`AWS_REGION`, the profile).",
                ),
                Attribute::optional("profile", Type::String)
                    .description("Named profile from the shared AWS config and credentials files."),
                Attribute::optional("max_retries", Type::Number).description(
                    "Retries for throttled or transient AWS errors, with exponential backoff. Default 10.",
                ),
            ])
            .with_blocks(vec![
                NestedBlock::new(
                    "assume_role",
                    BlockNesting::Single,
                    Block::new(vec![
                        Attribute::required("role_arn", Type::String).description("ARN of the IAM role to assume."),
                        Attribute::optional("session_name", Type::String)
                            .description("Session name for the assumed role. Default `hpcforge`."),
                        Attribute::optional("external_id", Type::String)
                            .description("External ID the role's trust policy requires."),
                    ]),
                ),
                NestedBlock::new("endpoints", BlockNesting::Single, Block::new(endpoint_attrs)),
                NestedBlock::new(
                    "default_tags",
                    BlockNesting::Single,
                    Block::new(vec![Attribute::optional("tags", Type::map(Type::String))
                        .description("Tags added to every resource this provider creates.")]),
                ),
                NestedBlock::new(
                    "guardrails",
                    BlockNesting::Single,
                    Block::new(vec![
                        Attribute::optional("allowed_instance_types", Type::list(Type::String)).description(
                            "Instance types partitions may use, as globs (`p5.*`, `c7i.*`). Empty or unset: any.",
                        ),
                        Attribute::optional("max_nodes_per_partition", Type::Number)
                            .description("Most nodes one partition may scale to."),
                        Attribute::optional("max_vcpus_per_cluster", Type::Number)
                            .description("Most vCPUs all partitions of a cluster may reach together."),
                        Attribute::optional("max_gpus_per_cluster", Type::Number)
                            .description("Most GPUs all partitions of a cluster may reach together."),
                        Attribute::optional("max_hourly_cost_per_cluster", Type::Number).description(
                            "Most on-demand USD/hour a cluster may reach at full scale (head and login nodes included).",
                        ),
                        Attribute::optional("enforce_quotas", Type::Bool).description(
                            "Refuse, rather than warn about, a partition whose max_nodes of each of its instance types, with the cluster's other published partitions, need more vCPUs than the account's EC2 quota for that class (Service Quotas) in a pool's region.",
                        ),
                        Attribute::optional("prices", Type::map(Type::Number)).description(
                            "On-demand USD/hour per instance type, replacing the built-in table (e.g. your negotiated rates).",
                        ),
                    ]),
                ),
            ])
            .description("The hpc provider: Slurm HPC clusters on AWS."),
        )
    }

    async fn validate(&self, req: ValidateRequest) -> Diagnostics {
        let c = match ProviderConfig::of(&req.config) {
            Ok(c) => c,
            // Checked again when it is known.
            Err(e) if e.unknown => return Diagnostics::new(),
            Err(e) => return e.into_diagnostics("The provider configuration cannot be read"),
        };
        let mut diags = Diagnostics::new();
        if c.max_retries.is_some_and(|n| !(0..=100).contains(&n)) {
            diags.error_at(
                AttributePath::root("max_retries"),
                "max_retries out of range",
                "Use 0 to 100.",
            );
        }
        if let Some(region) = c.region.as_deref().filter(|r| !region_name(r)) {
            diags.error_at(
                AttributePath::root("region"),
                format!("{region:?} is not an AWS region name"),
                "Use a region code like us-east-1 or eu-west-2.",
            );
        }
        if let Some(role) = &c.assume_role {
            let arn = &role.role_arn;
            if !(arn.starts_with("arn:aws") && arn.contains(":iam::") && arn.contains(":role/")) {
                diags.error_at(
                    AttributePath::root("assume_role").attr("role_arn"),
                    "role_arn is not an IAM role ARN",
                    "Use arn:aws:iam::<account-id>:role/<name>.",
                );
            }
        }
        if let Some(g) = &c.guardrails {
            guardrail_checks(g, &mut diags);
        }
        for (service, url) in c.endpoints.iter().flatten() {
            let Some(u) = url else { continue };
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                diags.error_at(
                    AttributePath::root("endpoints").attr(service),
                    format!("endpoint for {service} is not a URL"),
                    "Use http:// or https:// followed by a host (and port).",
                );
            }
        }
        diags
    }

    async fn configure(&self, req: ConfigureRequest) -> Result<ProviderData, Diagnostics> {
        let config = known_config(&req.config)?;
        let settings = config.settings();
        let aws = Aws::connect(&settings)
            .await
            .map_err(|e| Diagnostics::from(Diagnostic::error("Cannot configure AWS", e.to_string())))?;
        tracing::debug!(region = %aws.region, "provider configured");
        Ok(Arc::new(Clients {
            fsx: aws.fsx(),
            ec2: aws.ec2(),
            ssm: aws.ssm(),
            secrets: aws.secrets(),
            efs: aws.efs(),
            aws,
            default_tags: config
                .default_tags
                .as_ref()
                .and_then(|d| d.tags.clone())
                .unwrap_or_default(),
            limits: config.limits(),
            price_overrides: config
                .guardrails
                .as_ref()
                .and_then(|g| g.prices.clone())
                .unwrap_or_default()
                .into_iter()
                .collect(),
        }))
    }

    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        vec![
            Arc::new(LustreFs),
            Arc::new(HpcNetwork),
            Arc::new(HpcNetworkPeering),
            Arc::new(HpcCluster),
            Arc::new(HpcPartition),
        ]
    }

    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        vec![Arc::new(InstanceTypeData), Arc::new(CapacityData)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert;

    #[test]
    fn schema_is_well_formed() {
        HpcProvider.schema().check().expect("provider schema");
    }

    #[tokio::test]
    async fn bad_provider_settings_name_the_attribute() {
        let config = convert::object(vec![
            ("region", Value::string("Mars")),
            ("max_retries", Value::int(500)),
            ("profile", Value::Null),
            (
                "assume_role",
                convert::object(vec![
                    ("role_arn", Value::string("nope")),
                    ("session_name", Value::Null),
                    ("external_id", Value::Null),
                ]),
            ),
            ("endpoints", Value::Null),
            ("default_tags", Value::Null),
            ("guardrails", Value::Null),
        ]);
        let diags = HpcProvider.validate(ValidateRequest { config }).await;
        let paths: Vec<String> = diags
            .0
            .iter()
            .filter_map(|d| d.path.as_ref().map(ToString::to_string))
            .collect();
        assert_eq!(paths, vec!["max_retries", "region", "assume_role.role_arn"]);
    }

    #[tokio::test]
    async fn a_fractional_guardrail_is_refused_not_ignored() {
        let config = convert::object(vec![(
            "guardrails",
            convert::object(vec![(
                "max_nodes_per_partition",
                Value::Number(tfplugin::Number::parse("1.5").expect("number")),
            )]),
        )]);
        let diags = HpcProvider.validate(ValidateRequest { config }).await;
        let d = diags.0.first().expect("an error");
        assert_eq!(
            d.path.as_ref().map(ToString::to_string).as_deref(),
            Some("guardrails.max_nodes_per_partition")
        );
        assert!(d.detail.contains("is 1.5: give a whole number"), "{}", d.detail);
        // Not known yet (a variable of another module): checked again when it is.
        let unknown = convert::object(vec![("guardrails", Value::Unknown)]);
        assert!(HpcProvider
            .validate(ValidateRequest { config: unknown })
            .await
            .0
            .is_empty());
    }

    #[test]
    fn unknown_provider_config_is_refused() {
        let config = convert::object(vec![("region", Value::Unknown)]);
        let err = known_config(&config).expect_err("unknown");
        assert!(err.0[0].summary.contains("not known yet"));
    }
}
