//! The instance's own identity from the instance metadata service (IMDSv2, through the SDK's
//! client: tokens, retries and the `AWS_EC2_METADATA_*` settings as every AWS tool has them).

use aws_config::imds::client::Client;
use aws_config::provider_config::ProviderConfig;

use crate::error::{AwsError, Result};
use crate::Aws;

/// Who this instance is, as EC2 says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub instance_id: String,
    pub private_ip: String,
    /// The region from the instance's placement.
    pub region: String,
}

async fn get(client: &Client, path: &str) -> Result<String> {
    client
        .get(format!("/latest/meta-data/{path}"))
        .await
        .map(|v| v.as_ref().trim().to_string())
        .map_err(|e| {
            AwsError::new(
                format!("reading {path} from the instance metadata service"),
                None,
                e.to_string(),
            )
        })
}

fn client(aws: &Aws) -> Client {
    let mut config = ProviderConfig::default();
    if let Some(http) = aws.sdk.http_client() {
        config = config.with_http_client(http);
    }
    Client::builder().configure(&config).build()
}

/// `spot` or `on-demand` (EC2's `instance-life-cycle`; capacity-block instances say `on-demand`).
pub async fn life_cycle(aws: &Aws) -> Result<String> {
    get(&client(aws), "instance-life-cycle").await
}

/// A spot interruption notice (`spot/instance-action`: the action and its time, JSON), or
/// `None` while EC2 has none for this instance (IMDS answers 404).
pub async fn spot_notice(aws: &Aws) -> Result<Option<String>> {
    use aws_config::imds::client::error::ImdsError;
    match client(aws).get("/latest/meta-data/spot/instance-action").await {
        Ok(v) => Ok(Some(v.as_ref().trim().to_string())),
        Err(ImdsError::ErrorResponse(r)) if r.response().status().as_u16() == 404 => Ok(None),
        Err(e) => Err(AwsError::new(
            "reading spot/instance-action from the instance metadata service",
            None,
            e.to_string(),
        )),
    }
}

/// Reads this instance's id, primary private address and region, over the connection's HTTP
/// client.
pub async fn identity(aws: &Aws) -> Result<Identity> {
    let client = client(aws);
    Ok(Identity {
        instance_id: get(&client, "instance-id").await?,
        private_ip: get(&client, "local-ipv4").await?,
        region: get(&client, "placement/region").await?,
    })
}
