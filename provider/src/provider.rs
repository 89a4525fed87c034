//! The `hpc` provider block: where and as whom to reach AWS, and tags for everything.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use hpc_aws::{AssumeRole, Aws, Settings};
use tfplugin::{
    Attribute, AttributePath, Block, BlockNesting, ConfigureRequest, DataSource, Diagnostic, Diagnostics, NestedBlock,
    Provider, ProviderData, Resource, Schema, Type, ValidateRequest, Value,
};

use crate::convert;
use crate::pricing::Limits;
use crate::resources::capacity::CapacityData;
use crate::resources::cluster::HpcCluster;
use crate::resources::instance_type::InstanceTypeData;
use crate::resources::lustre_fs::LustreFs;
use crate::resources::network::HpcNetwork;
use crate::resources::partition::HpcPartition;

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

pub struct HpcProvider;

const DEFAULT_MAX_RETRIES: i64 = 10;

fn settings(config: &Value) -> Result<Settings, Diagnostics> {
    let mut diags = Diagnostics::new();
    if !config.is_wholly_known() {
        diags.error(
            "Provider configuration depends on values not known yet",
            "The hpc provider block uses values that are only known after apply (for example another \
             resource's attribute). Use values known at plan time: literals, variables or data sources.",
        );
        return Err(diags);
    }
    let role = config.attr("assume_role");
    let assume_role = (!role.is_null()).then(|| AssumeRole {
        role_arn: convert::string(role.attr("role_arn")).unwrap_or_default(),
        session_name: convert::string(role.attr("session_name")),
        external_id: convert::string(role.attr("external_id")),
    });
    let mut endpoints = BTreeMap::new();
    if let Some(entries) = config.attr("endpoints").entries() {
        for (service, url) in entries {
            if let Some(u) = url.as_str() {
                endpoints.insert(service.clone(), u.to_string());
            }
        }
    }
    let max_retries = convert::int(config.attr("max_retries")).unwrap_or(DEFAULT_MAX_RETRIES);
    Ok(Settings {
        region: convert::string(config.attr("region")),
        profile: convert::string(config.attr("profile")),
        assume_role,
        endpoints,
        max_retries: u32::try_from(max_retries).unwrap_or(0),
    })
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
        let mut diags = Diagnostics::new();
        let c = &req.config;
        if let Some(n) = c.attr("max_retries").as_i64() {
            if !(0..=100).contains(&n) {
                diags.error_at(
                    AttributePath::root("max_retries"),
                    "max_retries out of range",
                    "Use 0 to 100.",
                );
            }
        }
        if let Some(region) = c.attr("region").as_str() {
            let ok = !region.is_empty()
                && region.split('-').count() >= 3
                && region
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
            if !ok {
                diags.error_at(
                    AttributePath::root("region"),
                    format!("{region:?} is not an AWS region name"),
                    "Use a region code like us-east-1 or eu-west-2.",
                );
            }
        }
        if let Some(arn) = c.attr("assume_role").attr("role_arn").as_str() {
            if !(arn.starts_with("arn:aws") && arn.contains(":iam::") && arn.contains(":role/")) {
                diags.error_at(
                    AttributePath::root("assume_role").attr("role_arn"),
                    "role_arn is not an IAM role ARN",
                    "Use arn:aws:iam::<account-id>:role/<name>.",
                );
            }
        }
        let g = c.attr("guardrails");
        for name in [
            "max_nodes_per_partition",
            "max_vcpus_per_cluster",
            "max_gpus_per_cluster",
            "max_hourly_cost_per_cluster",
        ] {
            if let Value::Number(n) = g.attr(name) {
                if n.as_f64() < 0.0 {
                    diags.error_at(
                        AttributePath::root("guardrails").attr(name),
                        format!("{name} cannot be negative"),
                        "Use 0 or more; leave it unset for no limit.",
                    );
                }
            }
        }
        if let Some(prices) = g.attr("prices").entries() {
            for (t, p) in prices {
                if let Value::Number(n) = p {
                    if n.as_f64() < 0.0 {
                        diags.error_at(
                            AttributePath::root("guardrails").attr("prices").key(t),
                            format!("price of {t} cannot be negative"),
                            "Give the on-demand USD per hour, e.g. 55.04.",
                        );
                    }
                }
            }
        }
        for (i, glob) in convert::strings(g.attr("allowed_instance_types"))
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if glob.trim().is_empty() || glob.contains(char::is_whitespace) {
                diags.error_at(
                    AttributePath::root("guardrails")
                        .attr("allowed_instance_types")
                        .index(i),
                    format!("{glob:?} is not an instance type pattern"),
                    "Use an instance type or a glob such as p5.* or g6e.*xlarge.",
                );
            }
        }
        if let Some(entries) = c.attr("endpoints").entries() {
            for (service, url) in entries {
                if let Some(u) = url.as_str() {
                    if !(u.starts_with("http://") || u.starts_with("https://")) {
                        diags.error_at(
                            AttributePath::root("endpoints").attr(service),
                            format!("endpoint for {service} is not a URL"),
                            "Use http:// or https:// followed by a host (and port).",
                        );
                    }
                }
            }
        }
        diags
    }

    async fn configure(&self, req: ConfigureRequest) -> Result<ProviderData, Diagnostics> {
        let settings = settings(&req.config)?;
        let aws = Aws::connect(&settings)
            .await
            .map_err(|e| Diagnostics::from(Diagnostic::error("Cannot configure AWS", e.to_string())))?;
        let default_tags = convert::pairs(req.config.attr("default_tags").attr("tags"))
            .unwrap_or_default()
            .into_iter()
            .collect();
        let g = req.config.attr("guardrails");
        let limits = Limits {
            allowed_instance_types: convert::strings(g.attr("allowed_instance_types")).unwrap_or_default(),
            max_nodes_per_partition: convert::int(g.attr("max_nodes_per_partition"))
                .and_then(|n| u64::try_from(n).ok()),
            max_vcpus_per_cluster: convert::int(g.attr("max_vcpus_per_cluster")).and_then(|n| u64::try_from(n).ok()),
            max_gpus_per_cluster: convert::int(g.attr("max_gpus_per_cluster")).and_then(|n| u64::try_from(n).ok()),
            max_hourly_cost_per_cluster: match g.attr("max_hourly_cost_per_cluster") {
                Value::Number(n) => Some(n.as_f64()),
                _ => None,
            },
            enforce_quotas: convert::boolean(g.attr("enforce_quotas")).unwrap_or(false),
        };
        let price_overrides = g
            .attr("prices")
            .entries()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| match v {
                        Value::Number(n) => Some((k.clone(), n.as_f64())),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        tracing::debug!(region = %aws.region, "provider configured");
        Ok(Arc::new(Clients {
            fsx: aws.fsx(),
            ec2: aws.ec2(),
            ssm: aws.ssm(),
            secrets: aws.secrets(),
            efs: aws.efs(),
            aws,
            default_tags,
            limits,
            price_overrides,
        }))
    }

    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        vec![
            Arc::new(LustreFs),
            Arc::new(HpcNetwork),
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

    #[test]
    fn unknown_provider_config_is_refused() {
        let config = convert::object(vec![("region", Value::Unknown)]);
        let err = settings(&config).expect_err("unknown");
        assert!(err.0[0].summary.contains("not known yet"));
    }
}
