//! Connecting to AWS: region, profile, assume role, endpoint overrides, retries.
//!
//! Credentials come from the SDK's default chain (environment, shared files, SSO, IMDS).
//! The SDK's standard AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE> variables work too.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_types::region::Region;

use crate::error::{AwsError, Result};

/// Services whose endpoint can be overridden.
pub const SERVICES: &[&str] = &[
    "ec2",
    "events",
    "fsx",
    "s3",
    "secretsmanager",
    "servicequotas",
    "sqs",
    "ssm",
    "sts",
];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssumeRole {
    pub role_arn: String,
    pub session_name: Option<String>,
    pub external_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub region: Option<String>,
    pub profile: Option<String>,
    pub assume_role: Option<AssumeRole>,
    /// Service name (see [`SERVICES`]) → endpoint URL.
    pub endpoints: BTreeMap<String, String>,
    /// Attempts after the first for throttling and transient errors.
    pub max_retries: u32,
}

/// A connection to one account and region.
#[derive(Clone, Debug)]
pub struct Aws {
    pub sdk: SdkConfig,
    pub region: String,
    pub endpoints: BTreeMap<String, String>,
}

impl Aws {
    pub async fn connect(settings: &Settings) -> Result<Aws> {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let retry = RetryConfig::standard()
            .with_max_attempts(settings.max_retries.saturating_add(1))
            .with_initial_backoff(Duration::from_millis(200))
            .with_max_backoff(Duration::from_secs(20));
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .retry_config(retry);
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(profile) = &settings.profile {
            loader = loader.profile_name(profile);
        }
        let mut sdk = loader.load().await;
        let region = sdk.region().map(|r| r.to_string()).ok_or_else(|| {
            AwsError::new(
                "configuring AWS",
                None,
                "no region: set `region` in the provider block, or AWS_REGION in the environment",
            )
        })?;
        if let Some(role) = &settings.assume_role {
            let mut sts_conf = sdk.to_builder();
            if let Some(url) = settings.endpoints.get("sts") {
                sts_conf = sts_conf.endpoint_url(url);
            }
            let mut builder = AssumeRoleProvider::builder(role.role_arn.clone())
                .session_name(role.session_name.clone().unwrap_or_else(|| "hpcforge".to_string()))
                .configure(&sts_conf.build());
            if let Some(id) = &role.external_id {
                builder = builder.external_id(id);
            }
            let provider = builder.build().await;
            sdk = sdk
                .to_builder()
                .credentials_provider(SharedCredentialsProvider::new(provider))
                .build();
        }
        Ok(Aws {
            sdk,
            region,
            endpoints: settings.endpoints.clone(),
        })
    }

    pub fn endpoint(&self, service: &str) -> Option<&str> {
        self.endpoints.get(service).map(String::as_str)
    }

    pub fn fsx(&self) -> crate::fsx::Fsx {
        let mut conf = aws_sdk_fsx::config::Builder::from(&self.sdk);
        if let Some(url) = self.endpoint("fsx") {
            conf = conf.endpoint_url(url);
        }
        crate::fsx::Fsx::new(aws_sdk_fsx::Client::from_conf(conf.build()), self.region.clone())
    }

    pub fn ec2(&self) -> crate::ec2::Ec2 {
        let mut conf = aws_sdk_ec2::config::Builder::from(&self.sdk);
        if let Some(url) = self.endpoint("ec2") {
            conf = conf.endpoint_url(url);
        }
        crate::ec2::Ec2::new(aws_sdk_ec2::Client::from_conf(conf.build()), self.region.clone())
    }

    /// EC2 in another region, same credentials (capacity pools in other regions).
    pub fn ec2_in(&self, region: &str) -> crate::ec2::Ec2 {
        let conf =
            aws_sdk_ec2::config::Builder::from(&self.sdk).region(aws_types::region::Region::new(region.to_string()));
        let conf = match self.endpoint("ec2") {
            Some(url) => conf.endpoint_url(url),
            None => conf,
        };
        crate::ec2::Ec2::new(aws_sdk_ec2::Client::from_conf(conf.build()), region.to_string())
    }

    /// Service Quotas in `region` (quotas are regional).
    pub fn quotas_in(&self, region: &str) -> crate::quotas::Quotas {
        let conf = aws_sdk_servicequotas::config::Builder::from(&self.sdk).region(Region::new(region.to_string()));
        let conf = match self.endpoint("servicequotas") {
            Some(url) => conf.endpoint_url(url),
            None => conf,
        };
        crate::quotas::Quotas::new(
            aws_sdk_servicequotas::Client::from_conf(conf.build()),
            region.to_string(),
        )
    }

    /// EBS direct APIs (snapshot uploads) in `region`.
    pub fn ebs_in(&self, region: &str) -> crate::ebs::Ebs {
        let conf = aws_sdk_ebs::config::Builder::from(&self.sdk).region(Region::new(region.to_string()));
        let conf = match self.endpoint("ebs") {
            Some(url) => conf.endpoint_url(url),
            None => conf,
        };
        crate::ebs::Ebs::new(aws_sdk_ebs::Client::from_conf(conf.build()), region.to_string())
    }

    /// EC2's event routes (EventBridge and SQS) in `region`.
    pub fn events_in(&self, region: &str) -> crate::events::Events {
        let region_of = Region::new(region.to_string());
        let sqs = aws_sdk_sqs::config::Builder::from(&self.sdk).region(region_of.clone());
        let sqs = match self.endpoint("sqs") {
            Some(url) => sqs.endpoint_url(url),
            None => sqs,
        };
        let bridge = aws_sdk_eventbridge::config::Builder::from(&self.sdk).region(region_of);
        let bridge = match self.endpoint("events") {
            Some(url) => bridge.endpoint_url(url),
            None => bridge,
        };
        crate::events::Events::new(
            aws_sdk_sqs::Client::from_conf(sqs.build()),
            aws_sdk_eventbridge::Client::from_conf(bridge.build()),
            region.to_string(),
        )
    }

    pub fn efs(&self) -> crate::efs::Efs {
        let mut conf = aws_sdk_efs::config::Builder::from(&self.sdk);
        if let Some(url) = self.endpoint("elasticfilesystem") {
            conf = conf.endpoint_url(url);
        }
        crate::efs::Efs::new(aws_sdk_efs::Client::from_conf(conf.build()), self.region.clone())
    }

    pub fn ssm(&self) -> crate::ssm::Ssm {
        let mut conf = aws_sdk_ssm::config::Builder::from(&self.sdk);
        if let Some(url) = self.endpoint("ssm") {
            conf = conf.endpoint_url(url);
        }
        crate::ssm::Ssm::new(aws_sdk_ssm::Client::from_conf(conf.build()), self.region.clone())
    }

    pub fn secrets(&self) -> crate::secrets::Secrets {
        let mut conf = aws_sdk_secretsmanager::config::Builder::from(&self.sdk);
        if let Some(url) = self.endpoint("secretsmanager") {
            conf = conf.endpoint_url(url);
        }
        crate::secrets::Secrets::new(
            aws_sdk_secretsmanager::Client::from_conf(conf.build()),
            self.region.clone(),
        )
    }
}
