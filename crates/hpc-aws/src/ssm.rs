//! SSM Parameter Store: where the provider publishes a cluster's desired state and where the
//! node agent reads it (and reports back what it applied). Every write makes a new parameter
//! version, so the desired state is versioned by SSM itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ssm::types::{ParameterTier, ParameterType, Tag};
use aws_sdk_ssm::Client;

use crate::error::{AwsError, Result};
use crate::view::Views;

/// Parameters hold at most 8 KiB (advanced tier); a desired-state document must fit.
pub const MAX_VALUE_BYTES: usize = 8192;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub value: String,
    pub version: i64,
}

#[derive(Clone, Debug)]
pub struct Ssm {
    client: Client,
    region: String,
    /// Every parameter under a path, by path, for plans and refreshes.
    views: Arc<Views<BTreeMap<String, Parameter>>>,
}

impl Ssm {
    pub fn new(client: Client, region: String) -> Self {
        Ssm {
            client,
            region,
            views: Arc::default(),
        }
    }

    /// Every parameter under `path` for a plan or refresh: read once (GetParametersByPath,
    /// paginated) and shared by concurrent and later readers of the same path (see
    /// [`crate::view`]). Changes and anything that waits on a parameter read directly
    /// ([`Ssm::get`], [`Ssm::list`]).
    pub async fn view(&self, path: &str) -> Result<Arc<BTreeMap<String, Parameter>>> {
        self.views
            .get(path, || async {
                Ok(self
                    .list(path)
                    .await?
                    .into_iter()
                    .map(|p| (p.name.clone(), p))
                    .collect())
            })
            .await
    }

    /// One parameter for a plan or refresh, through the view of `path` (which holds `name`).
    /// A parameter the view lacks is read directly before it is reported missing.
    pub async fn get_viewed(&self, path: &str, name: &str) -> Result<Option<Parameter>> {
        if let Some(p) = self.view(path).await?.get(name) {
            return Ok(Some(p.clone()));
        }
        self.get(name).await
    }

    fn ctx(&self, what: &str, name: &str) -> String {
        format!("{what} {name} ({})", self.region)
    }

    /// Writes the parameter (creating or overwriting) and returns its new version.
    pub async fn put(&self, name: &str, value: &str, tags: &[(String, String)]) -> Result<i64> {
        if value.len() > MAX_VALUE_BYTES {
            return Err(AwsError::new(
                self.ctx("publishing", name),
                Some("ParameterMaxLengthExceeded"),
                format!("{} bytes; the limit is {MAX_VALUE_BYTES}", value.len()),
            ));
        }
        let _changing = self.views.changing();
        let res = self
            .client
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::String)
            // Standard while the value fits 4 KB, Advanced past it; an Advanced parameter stays
            // Advanced when its value shrinks (AWS refuses `Standard` for it: a user shard that
            // shrank failed the apply).
            .tier(ParameterTier::IntelligentTiering)
            .overwrite(true)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx("publishing", name), &e))?;
        if !tags.is_empty() {
            let tags: Vec<Tag> = tags
                .iter()
                .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
                .collect();
            self.client
                .add_tags_to_resource()
                .resource_type(aws_sdk_ssm::types::ResourceTypeForTagging::Parameter)
                .resource_id(name)
                .set_tags(Some(tags))
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("tagging", name), &e))?;
        }
        Ok(res.version())
    }

    pub async fn get(&self, name: &str) -> Result<Option<Parameter>> {
        match self.client.get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter().map(|p| Parameter {
                name: p.name().unwrap_or(name).to_string(),
                value: p.value().unwrap_or_default().to_string(),
                version: p.version(),
            })),
            Err(e) => AwsError::from_sdk(self.ctx("reading", name), &e).or_ok_if(&["ParameterNotFound"], None),
        }
    }

    /// Every parameter under a path prefix (recursively), sorted by name.
    pub async fn list(&self, path: &str) -> Result<Vec<Parameter>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .get_parameters_by_path()
                .path(path)
                .recursive(true)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk(self.ctx("listing", path), &e))?;
            out.extend(page.parameters().iter().map(|p| Parameter {
                name: p.name().unwrap_or_default().to_string(),
                value: p.value().unwrap_or_default().to_string(),
                version: p.version(),
            }));
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes the parameter; a missing one counts as deleted.
    pub async fn delete(&self, name: &str) -> Result<()> {
        let _changing = self.views.changing();
        match self.client.delete_parameter().name(name).send().await {
            Ok(_) => Ok(()),
            Err(e) => AwsError::from_sdk(self.ctx("deleting", name), &e).or_ok_if(&["ParameterNotFound"], ()),
        }
    }
}
