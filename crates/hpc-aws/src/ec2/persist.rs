//! What outlives an instance: an EBS volume re-attached to its successor, and a network
//! interface (its address and name) the successor is launched on. Both are found again by
//! their tags, so an interrupted run adopts what it made instead of making another.

use std::time::Duration;

use aws_sdk_ec2::types::{
    Filter, InstanceNetworkInterfaceSpecification, LaunchTemplateSpecification, ResourceType, VolumeAttachmentState,
    VolumeState, VolumeType,
};

use super::{filter, tag_specs, Ec2};
use crate::error::{AwsError, Result};
use crate::wait::{self, Backoff, Poll};

/// A volume to make (or find by its tags) in one availability zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    pub zone: String,
    pub size_gib: i32,
    pub volume_type: String,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
    /// The snapshot it starts from (None: empty).
    pub snapshot_id: Option<String>,
    /// The tags it is made with; all of them find it again.
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    pub id: String,
    pub state: String,
    pub zone: String,
    pub size_gib: i32,
    /// The instance it is attached (or attaching) to.
    pub attached_to: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    pub id: String,
    pub private_ip: String,
    pub status: String,
}

fn tag_filters(tags: &[(String, String)]) -> Vec<Filter> {
    tags.iter().map(|(k, v)| filter(&format!("tag:{k}"), &[v])).collect()
}

impl Ec2 {
    /// The volume with these tags, made when there is none.
    pub async fn ensure_volume(&self, spec: &VolumeSpec) -> Result<VolumeInfo> {
        if let Some(found) = self.volume_tagged(&spec.tags).await? {
            return Ok(found);
        }
        let out = self
            .client
            .create_volume()
            .availability_zone(&spec.zone)
            .size(spec.size_gib)
            .volume_type(VolumeType::from(spec.volume_type.as_str()))
            .encrypted(spec.encrypted)
            .set_kms_key_id(spec.kms_key_id.clone())
            .set_snapshot_id(spec.snapshot_id.clone())
            .set_tag_specifications(tag_specs(&[ResourceType::Volume], &spec.tags))
            .send()
            .await
            .map_err(|e| self.err("creating a volume", &e))?;
        let id = out.volume_id().unwrap_or_default().to_string();
        self.wait_volume(&id, Duration::from_secs(300), |v| {
            v.state == VolumeState::Available.as_str()
        })
        .await
    }

    pub async fn volume_tagged(&self, tags: &[(String, String)]) -> Result<Option<VolumeInfo>> {
        let out = self
            .client
            .describe_volumes()
            .set_filters(Some(tag_filters(tags)))
            .send()
            .await
            .map_err(|e| self.err("describing volumes", &e))?;
        Ok(out
            .volumes()
            .iter()
            .map(volume_info)
            .find(|v| v.state != VolumeState::Deleting.as_str() && v.state != VolumeState::Deleted.as_str()))
    }

    pub async fn find_volume(&self, id: &str) -> Result<Option<VolumeInfo>> {
        match self.client.describe_volumes().volume_ids(id).send().await {
            Ok(out) => Ok(out.volumes().first().map(volume_info)),
            Err(e) => self
                .err("describing a volume", &e)
                .or_ok_if(&["InvalidVolume.NotFound"], None),
        }
    }

    /// Attaches the volume to the instance as `device` and waits until it is attached. A volume
    /// still held by an instance that is going away is waited for first.
    pub async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
        timeout: Duration,
    ) -> Result<()> {
        let current = self
            .wait_volume(volume_id, timeout, |v| {
                v.attached_to.as_deref() == Some(instance_id) || v.state == VolumeState::Available.as_str()
            })
            .await?;
        if current.attached_to.as_deref() != Some(instance_id) {
            self.client
                .attach_volume()
                .volume_id(volume_id)
                .instance_id(instance_id)
                .device(device)
                .send()
                .await
                .map_err(|e| self.err(&format!("attaching {volume_id} to {instance_id}"), &e))?;
        }
        self.wait_volume(volume_id, timeout, |v| {
            v.attached_to.as_deref() == Some(instance_id) && v.state == VolumeState::InUse.as_str()
        })
        .await
        .map(|_| ())
    }

    /// A completed snapshot of `volume_id` with all of `tags`: the one already made (a delete
    /// run again after an interruption finds it), or one made now. Returns its id.
    pub async fn ensure_snapshot(
        &self,
        volume_id: &str,
        description: &str,
        tags: &[(String, String)],
        timeout: Duration,
    ) -> Result<String> {
        let mut filters = tag_filters(tags);
        filters.push(filter("volume-id", &[volume_id]));
        let found = self
            .client
            .describe_snapshots()
            .set_filters(Some(filters))
            .send()
            .await
            .map_err(|e| self.err(&format!("looking for a snapshot of {volume_id}"), &e))?;
        let id = match found.snapshots().iter().find_map(|s| s.snapshot_id()) {
            Some(id) => id.to_string(),
            None => self
                .client
                .create_snapshot()
                .volume_id(volume_id)
                .description(description)
                .set_tag_specifications(tag_specs(&[ResourceType::Snapshot], tags))
                .send()
                .await
                .map_err(|e| self.err(&format!("snapshotting {volume_id}"), &e))?
                .snapshot_id()
                .unwrap_or_default()
                .to_string(),
        };
        self.wait_snapshot_completed(&id, 1, timeout).await?;
        Ok(id)
    }

    /// Deletes the volume once no instance holds it; a missing volume counts as deleted.
    pub async fn delete_volume(&self, volume_id: &str, timeout: Duration) -> Result<()> {
        match self
            .wait_volume(volume_id, timeout, |v| v.state == VolumeState::Available.as_str())
            .await
        {
            Ok(_) => {}
            Err(e) if e.code_is(&["InvalidVolume.NotFound"]) => return Ok(()),
            Err(e) => return Err(e),
        }
        match self.client.delete_volume().volume_id(volume_id).send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("deleting {volume_id}"), &e)
                .or_ok_if(&["InvalidVolume.NotFound"], ()),
        }
    }

    /// Grows the volume to `size_gib` (EBS volumes only grow) and waits until the new size is
    /// usable (the modification is optimizing or completed); nothing when it is that large.
    /// The instance it is attached to grows its file system into the room.
    pub async fn grow_volume(&self, volume_id: &str, size_gib: i32, timeout: Duration) -> Result<()> {
        match self.find_volume(volume_id).await? {
            Some(v) if v.size_gib >= size_gib => return Ok(()),
            Some(_) => {}
            None => {
                return Err(AwsError::new(
                    self.ctx("growing a volume"),
                    Some("InvalidVolume.NotFound"),
                    format!("volume {volume_id} does not exist"),
                ))
            }
        }
        self.client
            .modify_volume()
            .volume_id(volume_id)
            .size(size_gib)
            .send()
            .await
            .map_err(|e| self.err(&format!("growing {volume_id} to {size_gib} GiB"), &e))?;
        wait::until(
            &format!("volume {volume_id} at {size_gib} GiB"),
            timeout,
            Backoff::default(),
            || async {
                let out = self
                    .client
                    .describe_volumes_modifications()
                    .volume_ids(volume_id)
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("describing {volume_id}'s modifications"), &e))?;
                // This modification's (an earlier one may still be listed).
                let latest = out
                    .volumes_modifications()
                    .iter()
                    .filter(|m| m.target_size() == Some(size_gib))
                    .max_by_key(|m| m.start_time().map(|t| t.secs()));
                let state = latest
                    .and_then(|m| m.modification_state())
                    .map(|s| s.as_str().to_string());
                match state.as_deref() {
                    Some("optimizing" | "completed") => Ok(Poll::Done(())),
                    Some("failed") => Err(AwsError::new(
                        self.ctx("growing a volume"),
                        Some("VolumeModificationFailed"),
                        format!(
                            "{volume_id}: {}",
                            latest
                                .and_then(|m| m.status_message())
                                .unwrap_or("the modification failed")
                        ),
                    )),
                    other => Ok(Poll::Pending(other.unwrap_or("modifying").to_string())),
                }
            },
        )
        .await
    }

    async fn wait_volume(
        &self,
        volume_id: &str,
        timeout: Duration,
        done: impl Fn(&VolumeInfo) -> bool,
    ) -> Result<VolumeInfo> {
        wait::until(&format!("volume {volume_id}"), timeout, Backoff::default(), || async {
            match self.find_volume(volume_id).await? {
                Some(v) if done(&v) => Ok(Poll::Done(v)),
                Some(v) => Ok(Poll::Pending(match &v.attached_to {
                    Some(i) => format!("{} (attached to {i})", v.state),
                    None => v.state,
                })),
                None => Err(AwsError::new(
                    self.ctx("waiting for a volume"),
                    Some("InvalidVolume.NotFound"),
                    format!("volume {volume_id} does not exist"),
                )),
            }
        })
        .await
    }

    /// The network interface with these tags in the subnet, made (with `groups`) when there is none.
    pub async fn ensure_network_interface(
        &self,
        subnet_id: &str,
        groups: &[String],
        description: &str,
        tags: &[(String, String)],
    ) -> Result<InterfaceInfo> {
        if let Some(found) = self.network_interface_tagged(tags).await? {
            return Ok(found);
        }
        let out = self
            .client
            .create_network_interface()
            .subnet_id(subnet_id)
            .set_groups(Some(groups.to_vec()))
            .description(description)
            .set_tag_specifications(tag_specs(&[ResourceType::NetworkInterface], tags))
            .send()
            .await
            .map_err(|e| self.err("creating a network interface", &e))?;
        out.network_interface().map(interface_info).ok_or_else(|| {
            AwsError::new(
                self.ctx("creating a network interface"),
                None,
                "no interface in the response",
            )
        })
    }

    pub async fn network_interface_tagged(&self, tags: &[(String, String)]) -> Result<Option<InterfaceInfo>> {
        let out = self
            .client
            .describe_network_interfaces()
            .set_filters(Some(tag_filters(tags)))
            .send()
            .await
            .map_err(|e| self.err("describing network interfaces", &e))?;
        Ok(out.network_interfaces().first().map(interface_info))
    }

    /// Deletes the interface once no instance holds it; a missing one counts as deleted.
    pub async fn delete_network_interface(&self, id: &str, timeout: Duration) -> Result<()> {
        wait::until(
            &format!("network interface {id}"),
            timeout,
            Backoff::default(),
            || async {
                match self
                    .client
                    .delete_network_interface()
                    .network_interface_id(id)
                    .send()
                    .await
                {
                    Ok(_) => Ok(Poll::Done(())),
                    Err(e) => {
                        let e = self.err(&format!("deleting network interface {id}"), &e);
                        if e.code_is(&["InvalidNetworkInterfaceID.NotFound"]) {
                            Ok(Poll::Done(()))
                        } else if e.code_is(&["InvalidNetworkInterface.InUse"]) {
                            Ok(Poll::Pending("in use".into()))
                        } else {
                            Err(e)
                        }
                    }
                }
            },
        )
        .await
    }

    /// Launches one instance from the template on an existing network interface (which carries
    /// the subnet, address and security groups). An interface still held by an instance that
    /// is going away is waited for.
    pub async fn run_instance_on(
        &self,
        template_id: &str,
        interface_id: &str,
        client_token: &str,
        tags: &[(String, String)],
        timeout: Duration,
    ) -> Result<String> {
        let _changing = self.tagged.changing();
        wait::until(
            &format!("network interface {interface_id} to be free"),
            timeout,
            Backoff::default(),
            || async {
                let out = self
                    .client
                    .describe_network_interfaces()
                    .network_interface_ids(interface_id)
                    .send()
                    .await
                    .map_err(|e| self.err("describing a network interface", &e))?;
                let attached = out
                    .network_interfaces()
                    .first()
                    .and_then(|n| n.attachment())
                    .and_then(|a| a.instance_id().map(str::to_string));
                Ok(match attached {
                    None => Poll::Done(()),
                    Some(i) => match self.find_instance(&i).await? {
                        None => Poll::Done(()),
                        Some(_) => Poll::Pending(format!("attached to {i}")),
                    },
                })
            },
        )
        .await?;
        let out = self
            .client
            .run_instances()
            .set_tag_specifications(tag_specs(&[ResourceType::Instance, ResourceType::Volume], tags))
            .launch_template(
                LaunchTemplateSpecification::builder()
                    .launch_template_id(template_id)
                    .version("$Default")
                    .build(),
            )
            .network_interfaces(
                InstanceNetworkInterfaceSpecification::builder()
                    .device_index(0)
                    .network_interface_id(interface_id)
                    .build(),
            )
            .min_count(1)
            .max_count(1)
            .client_token(client_token)
            .send()
            .await
            .map_err(|e| self.err("launching instance", &e))?;
        self.launched_instance(&out)
    }
}

fn interface_info(n: &aws_sdk_ec2::types::NetworkInterface) -> InterfaceInfo {
    InterfaceInfo {
        id: n.network_interface_id().unwrap_or_default().to_string(),
        private_ip: n.private_ip_address().unwrap_or_default().to_string(),
        status: n.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
    }
}

fn volume_info(v: &aws_sdk_ec2::types::Volume) -> VolumeInfo {
    let attached_to = v
        .attachments()
        .iter()
        .find(|a| {
            matches!(
                a.state(),
                Some(VolumeAttachmentState::Attached | VolumeAttachmentState::Attaching)
            )
        })
        .and_then(|a| a.instance_id().map(str::to_string));
    VolumeInfo {
        id: v.volume_id().unwrap_or_default().to_string(),
        state: v.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
        zone: v.availability_zone().unwrap_or_default().to_string(),
        size_gib: v.size().unwrap_or_default(),
        attached_to,
    }
}
