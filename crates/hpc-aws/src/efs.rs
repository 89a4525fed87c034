//! EFS: the file system a cluster keeps /home on when the user brings none. Created with a
//! creation token derived from the cluster (a create interrupted at any point is found again by
//! its token, never doubled), encrypted, with one mount target per availability zone its nodes
//! run in.

use std::time::Duration;

use aws_sdk_efs::types::{LifeCycleState, Tag, ThroughputMode};
use aws_sdk_efs::Client;

use crate::error::{AwsError, Result};
use crate::wait::{self, Backoff, Poll};

#[derive(Clone, Debug)]
pub struct Efs {
    client: Client,
    region: String,
}

/// A mount target: where nodes of one zone reach the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountTarget {
    pub id: String,
    pub subnet_id: String,
    pub zone: Option<String>,
    pub state: String,
    /// Its IPv4 address in the subnet (what a client mounts when the DNS name does not
    /// resolve, e.g. from a peered VPC of another region).
    pub ip_address: Option<String>,
}

/// The DNS name nodes mount an EFS file system by (`<id>.efs.<region>.amazonaws.com`).
pub fn dns_name(file_system_id: &str, region: &str) -> String {
    format!("{file_system_id}.efs.{region}.amazonaws.com")
}

impl Efs {
    pub fn new(client: Client, region: String) -> Self {
        Efs { client, region }
    }

    fn err<E>(&self, what: &str, e: &E) -> AwsError
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
    {
        AwsError::from_sdk(format!("{what} ({})", self.region), e)
    }

    /// The file system made with `token`, made now (encrypted, elastic throughput, tagged) if
    /// there is none, once it is available.
    pub async fn ensure_file_system(
        &self,
        token: &str,
        tags: &[(String, String)],
        timeout: Duration,
    ) -> Result<String> {
        let id = match self.by_token(token).await? {
            Some(id) => id,
            None => {
                let tags: Vec<Tag> = tags
                    .iter()
                    .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
                    .collect();
                let made = self
                    .client
                    .create_file_system()
                    .creation_token(token)
                    .encrypted(true)
                    .throughput_mode(ThroughputMode::Elastic)
                    .set_tags(Some(tags))
                    .send()
                    .await;
                match made {
                    Ok(out) => out.file_system_id().to_string(),
                    // Another run made it between the look and the create.
                    Err(e) => {
                        let e = self.err(&format!("creating the file system {token}"), &e);
                        if !e.code_is(&["FileSystemAlreadyExists"]) {
                            return Err(e);
                        }
                        self.by_token(token).await?.ok_or(e)?
                    }
                }
            }
        };
        self.wait_file_system(&id, timeout).await?;
        Ok(id)
    }

    async fn by_token(&self, token: &str) -> Result<Option<String>> {
        let out = self
            .client
            .describe_file_systems()
            .creation_token(token)
            .send()
            .await
            .map_err(|e| self.err(&format!("looking up the file system {token}"), &e))?;
        Ok(out.file_systems().first().map(|f| f.file_system_id().to_string()))
    }

    /// The file system's life cycle state; None when it does not exist.
    pub async fn state(&self, id: &str) -> Result<Option<String>> {
        match self.client.describe_file_systems().file_system_id(id).send().await {
            Ok(out) => Ok(out
                .file_systems()
                .first()
                .map(|f| f.life_cycle_state().as_str().to_string())),
            Err(e) => self
                .err(&format!("describing the file system {id}"), &e)
                .or_ok_if(&["FileSystemNotFound"], None),
        }
    }

    async fn wait_file_system(&self, id: &str, timeout: Duration) -> Result<()> {
        wait::until(
            &format!("file system {id} to be available"),
            timeout,
            Backoff::default(),
            || async {
                match self.state(id).await?.as_deref() {
                    Some("available") => Ok(Poll::Done(())),
                    Some(s) if s == LifeCycleState::Creating.as_str() => Ok(Poll::Pending(s.to_string())),
                    other => Err(AwsError::new(
                        format!("creating the file system {id} ({})", self.region),
                        None,
                        format!("it is {}", other.unwrap_or("gone")),
                    )),
                }
            },
        )
        .await
    }

    pub async fn mount_targets(&self, id: &str) -> Result<Vec<MountTarget>> {
        let out = self
            .client
            .describe_mount_targets()
            .file_system_id(id)
            .send()
            .await
            .map_err(|e| self.err(&format!("listing the mount targets of {id}"), &e))?;
        Ok(out
            .mount_targets()
            .iter()
            .map(|m| MountTarget {
                id: m.mount_target_id().to_string(),
                subnet_id: m.subnet_id().to_string(),
                zone: m.availability_zone_name().map(str::to_string),
                state: m.life_cycle_state().as_str().to_string(),
                ip_address: m.ip_address().map(str::to_string),
            })
            .collect())
    }

    /// A mount target in the zone of each of `subnets` (`(subnet, zone)`), in the first subnet
    /// named for a zone, with `security_groups`; zones that have one already are left as they
    /// are (EFS allows one per zone). Waits until all are available.
    pub async fn ensure_mount_targets(
        &self,
        id: &str,
        subnets: &[(String, String)],
        security_groups: &[String],
        timeout: Duration,
    ) -> Result<()> {
        let existing = self.mount_targets(id).await?;
        let mut covered: Vec<String> = existing.iter().filter_map(|m| m.zone.clone()).collect();
        for (subnet, zone) in subnets {
            if covered.contains(zone) {
                continue;
            }
            let made = self
                .client
                .create_mount_target()
                .file_system_id(id)
                .subnet_id(subnet)
                .set_security_groups(Some(security_groups.to_vec()))
                .send()
                .await;
            if let Err(e) = made {
                self.err(&format!("adding a mount target for {id} in {subnet}"), &e)
                    .or_ok_if(&["MountTargetConflict"], ())?;
            }
            covered.push(zone.clone());
        }
        wait::until(
            &format!("mount targets of {id} to be available"),
            timeout,
            Backoff::default(),
            || async {
                let pending: Vec<String> = self
                    .mount_targets(id)
                    .await?
                    .into_iter()
                    .filter(|m| m.state != "available")
                    .map(|m| format!("{} {}", m.id, m.state))
                    .collect();
                Ok(if pending.is_empty() {
                    Poll::Done(())
                } else {
                    Poll::Pending(pending.join(", "))
                })
            },
        )
        .await
    }

    /// Deletes the file system and its mount targets (the files on it are gone); a file system
    /// that does not exist is deleted already.
    pub async fn delete(&self, id: &str, timeout: Duration) -> Result<()> {
        if self.state(id).await?.is_none() {
            return Ok(());
        }
        self.delete_mount_targets(id, timeout).await?;
        match self.client.delete_file_system().file_system_id(id).send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("deleting the file system {id}"), &e)
                .or_ok_if(&["FileSystemNotFound"], ()),
        }
    }

    /// Deletes the file system's mount targets and waits until they are gone (a file system
    /// kept without them holds its files, reachable again once it has a mount target).
    pub async fn delete_mount_targets(&self, id: &str, timeout: Duration) -> Result<()> {
        for m in self.mount_targets(id).await? {
            if let Err(e) = self.client.delete_mount_target().mount_target_id(&m.id).send().await {
                self.err(&format!("deleting the mount target {}", m.id), &e)
                    .or_ok_if(&["MountTargetNotFound"], ())?;
            }
        }
        wait::until(
            &format!("mount targets of {id} to go"),
            timeout,
            Backoff::default(),
            || async {
                let left = self.mount_targets(id).await?.len();
                Ok(if left == 0 {
                    Poll::Done(())
                } else {
                    Poll::Pending(format!("{left} left"))
                })
            },
        )
        .await
    }
}
