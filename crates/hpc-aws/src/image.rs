//! EC2 machine images: find by name, register from a snapshot, copy to other regions, share
//! with accounts, snapshots and their waiters; and the temporary resources of an image
//! builder instance (key pair, security group, stop, CreateImage).
//!
//! Registration is idempotent by name (an image with the name is looked up first), so a
//! publish that is run again changes nothing.

use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_ec2::types::{
    ArchitectureValues, BlockDeviceMapping, BootModeValues, CreateVolumePermission,
    CreateVolumePermissionModifications, EbsBlockDevice, ImdsSupportValues, LaunchPermission,
    LaunchPermissionModifications, ResourceType, VolumeType,
};

use crate::ec2::{filter, sdk_tags, tag_specs, Ec2};
use crate::error::{AwsError, Result};
use crate::wait::{self, Backoff, Poll};

/// An image as the builder needs to know it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub name: String,
    /// pending, available, failed, ...
    pub state: String,
    pub snapshot_ids: Vec<String>,
    pub tags: Vec<(String, String)>,
    pub creation_date: String,
    pub boot_mode: Option<String>,
    pub ena_support: bool,
    /// `x86_64`, `arm64`, ...
    pub architecture: Option<String>,
    /// GiB of the root device's snapshot: the smallest root volume an instance of it can have.
    pub root_size_gib: Option<i32>,
}

/// What RegisterImage is given: one root snapshot, UEFI, ENA and SR-IOV, IMDSv2 required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterRequest {
    pub name: String,
    pub description: String,
    pub snapshot_id: String,
    pub root_device: String,
    pub root_volume_gib: i32,
    pub tags: Vec<(String, String)>,
}

/// A temporary instance to build an image on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuilderInstance {
    pub image_id: String,
    pub instance_type: String,
    pub key_name: String,
    pub security_group_id: String,
    pub subnet_id: Option<String>,
    pub instance_profile: Option<String>,
    pub root_volume_gib: i32,
    pub tags: Vec<(String, String)>,
    pub client_token: String,
}

/// Picks the newest of several images, like `most_recent = true` in Packer and Terraform.
pub fn most_recent(images: &[ImageInfo]) -> Option<&ImageInfo> {
    images.iter().max_by(|a, b| a.creation_date.cmp(&b.creation_date))
}

fn image_info(i: &aws_sdk_ec2::types::Image) -> ImageInfo {
    ImageInfo {
        id: i.image_id().unwrap_or_default().to_string(),
        name: i.name().unwrap_or_default().to_string(),
        state: i.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
        snapshot_ids: i
            .block_device_mappings()
            .iter()
            .filter_map(|m| m.ebs().and_then(|e| e.snapshot_id()))
            .map(str::to_string)
            .collect(),
        tags: i
            .tags()
            .iter()
            .map(|t| {
                (
                    t.key().unwrap_or_default().to_string(),
                    t.value().unwrap_or_default().to_string(),
                )
            })
            .collect(),
        creation_date: i.creation_date().unwrap_or_default().to_string(),
        boot_mode: i.boot_mode().map(|b| b.as_str().to_string()),
        ena_support: i.ena_support().unwrap_or(false),
        architecture: i.architecture().map(|a| a.as_str().to_string()),
        root_size_gib: i
            .block_device_mappings()
            .iter()
            .find(|m| m.device_name().is_some() && m.device_name() == i.root_device_name())
            .and_then(|m| m.ebs())
            .and_then(|e| e.volume_size()),
    }
}

impl Ec2 {
    /// This account's image with exactly this name in this region, if any.
    pub async fn find_own_image(&self, name: &str) -> Result<Option<ImageInfo>> {
        let out = self
            .client
            .describe_images()
            .owners("self")
            .filters(filter("name", &[name]))
            .send()
            .await
            .map_err(|e| self.err(&format!("looking up image {name:?}"), &e))?;
        Ok(out
            .images()
            .iter()
            .map(image_info)
            .find(|i| i.name == name && i.state != "deregistered"))
    }

    /// Images matching a name pattern (EC2 wildcards) owned by any of `owners`.
    pub async fn find_images(&self, name_pattern: &str, owners: &[String]) -> Result<Vec<ImageInfo>> {
        let out = self
            .client
            .describe_images()
            .set_owners((!owners.is_empty()).then(|| owners.to_vec()))
            .filters(filter("name", &[name_pattern]))
            .filters(filter("state", &["available"]))
            .send()
            .await
            .map_err(|e| self.err(&format!("looking up images named {name_pattern:?}"), &e))?;
        Ok(out.images().iter().map(image_info).collect())
    }

    pub async fn describe_image(&self, id: &str) -> Result<Option<ImageInfo>> {
        match self.client.describe_images().image_ids(id).send().await {
            Ok(out) => Ok(out.images().first().map(image_info)),
            Err(e) => self
                .err(&format!("describing image {id}"), &e)
                .or_ok_if(&["InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"], None),
        }
    }

    /// Registers an x86_64 UEFI image with ENA and SR-IOV from one root snapshot. Instances
    /// launched from it require IMDSv2 unless their launch says otherwise.
    pub async fn register_image(&self, req: &RegisterRequest) -> Result<String> {
        let root = BlockDeviceMapping::builder()
            .device_name(&req.root_device)
            .ebs(
                EbsBlockDevice::builder()
                    .snapshot_id(&req.snapshot_id)
                    .volume_size(req.root_volume_gib)
                    .volume_type(VolumeType::Gp3)
                    .delete_on_termination(true)
                    .build(),
            )
            .build();
        let out = self
            .client
            .register_image()
            .name(&req.name)
            .description(&req.description)
            .architecture(ArchitectureValues::X8664)
            .boot_mode(BootModeValues::Uefi)
            .ena_support(true)
            .sriov_net_support("simple")
            .imds_support(ImdsSupportValues::V20)
            .virtualization_type("hvm")
            .root_device_name(&req.root_device)
            .block_device_mappings(root)
            .set_tag_specifications(tag_specs(&[ResourceType::Image], &req.tags))
            .send()
            .await
            .map_err(|e| self.err(&format!("registering image {:?}", req.name), &e))?;
        out.image_id()
            .map(str::to_string)
            .ok_or_else(|| AwsError::new(self.ctx("registering image"), None, "no image id in the response"))
    }

    /// Copies an image from `source_region` into this client's region, with its tags.
    pub async fn copy_image(
        &self,
        source_region: &str,
        source_id: &str,
        name: &str,
        description: &str,
        client_token: &str,
    ) -> Result<String> {
        let out = self
            .client
            .copy_image()
            .source_region(source_region)
            .source_image_id(source_id)
            .name(name)
            .description(description)
            .copy_image_tags(true)
            .client_token(client_token)
            .send()
            .await
            .map_err(|e| self.err(&format!("copying image {source_id} from {source_region}"), &e))?;
        out.image_id()
            .map(str::to_string)
            .ok_or_else(|| AwsError::new(self.ctx("copying image"), None, "no image id in the response"))
    }

    /// Tags an image and its snapshots (a copy made without CopyImageTags, or a CreateImage).
    pub async fn tag_resources(&self, ids: &[String], tags: &[(String, String)]) -> Result<()> {
        if ids.is_empty() || tags.is_empty() {
            return Ok(());
        }
        self.client
            .create_tags()
            .set_resources(Some(ids.to_vec()))
            .set_tags(Some(sdk_tags(tags)))
            .send()
            .await
            .map_err(|e| self.err("tagging image", &e))?;
        Ok(())
    }

    /// Lets the given accounts launch the image and create volumes from its snapshots.
    pub async fn share_image(&self, image: &ImageInfo, accounts: &[String]) -> Result<()> {
        if accounts.is_empty() {
            return Ok(());
        }
        let launch = LaunchPermissionModifications::builder()
            .set_add(Some(
                accounts
                    .iter()
                    .map(|a| LaunchPermission::builder().user_id(a).build())
                    .collect(),
            ))
            .build();
        self.client
            .modify_image_attribute()
            .image_id(&image.id)
            .launch_permission(launch)
            .send()
            .await
            .map_err(|e| self.err(&format!("sharing image {}", image.id), &e))?;
        for snap in &image.snapshot_ids {
            let volume = CreateVolumePermissionModifications::builder()
                .set_add(Some(
                    accounts
                        .iter()
                        .map(|a| CreateVolumePermission::builder().user_id(a).build())
                        .collect(),
                ))
                .build();
            self.client
                .modify_snapshot_attribute()
                .snapshot_id(snap)
                .create_volume_permission(volume)
                .send()
                .await
                .map_err(|e| self.err(&format!("sharing snapshot {snap}"), &e))?;
        }
        Ok(())
    }

    /// Accounts the image is shared with.
    pub async fn image_launch_accounts(&self, image_id: &str) -> Result<Vec<String>> {
        let out = self
            .client
            .describe_image_attribute()
            .image_id(image_id)
            .attribute(aws_sdk_ec2::types::ImageAttributeName::LaunchPermission)
            .send()
            .await
            .map_err(|e| self.err(&format!("reading launch permissions of {image_id}"), &e))?;
        Ok(out
            .launch_permissions()
            .iter()
            .filter_map(|p| p.user_id())
            .map(str::to_string)
            .collect())
    }

    pub async fn wait_image_available(&self, id: &str, timeout: Duration) -> Result<ImageInfo> {
        wait::until(&format!("image {id}"), timeout, Backoff::default(), || async {
            match self.describe_image(id).await? {
                Some(i) if i.state == "available" => Ok(Poll::Done(i)),
                Some(i) if i.state == "pending" => Ok(Poll::Pending(i.state)),
                Some(i) => Err(AwsError::new(
                    self.ctx("waiting for image"),
                    Some(&i.state),
                    format!("image {id} is {}", i.state),
                )),
                None => Ok(Poll::Pending("not visible yet".into())),
            }
        })
        .await
    }

    /// A snapshot's state (`pending`, `completed`, `error`), None when it does not exist.
    pub async fn snapshot_state(&self, id: &str) -> Result<Option<String>> {
        match self.client.describe_snapshots().snapshot_ids(id).send().await {
            Ok(out) => Ok(out
                .snapshots()
                .first()
                .map(|s| s.state().map(|st| st.as_str().to_string()).unwrap_or_default())),
            Err(e) => self
                .err(&format!("describing snapshot {id}"), &e)
                .or_ok_if(&["InvalidSnapshot.NotFound"], None),
        }
    }

    /// A snapshot's state and size in GiB, None when it does not exist.
    pub async fn snapshot_size(&self, id: &str) -> Result<Option<(String, i32)>> {
        match self.client.describe_snapshots().snapshot_ids(id).send().await {
            Ok(out) => Ok(out.snapshots().first().map(|s| {
                let state = s.state().map(|st| st.as_str().to_string()).unwrap_or_default();
                (state, s.volume_size().unwrap_or(0))
            })),
            Err(e) => self
                .err(&format!("describing snapshot {id}"), &e)
                .or_ok_if(&["InvalidSnapshot.NotFound"], None),
        }
    }

    /// Waits until the snapshot is completed, requiring `streak` completed answers in a row
    /// (a freshly completed snapshot can flicker between answers of different endpoints).
    pub async fn wait_snapshot_completed(&self, id: &str, streak: u32, timeout: Duration) -> Result<()> {
        let seen = std::sync::atomic::AtomicU32::new(0);
        wait::until(
            &format!("snapshot {id}"),
            timeout,
            Backoff {
                first: Duration::from_millis(200),
                max: Duration::from_secs(10),
            },
            || {
                let state = self.snapshot_state(id);
                let seen = &seen;
                async move {
                    match state.await?.as_deref() {
                        Some("completed") => {
                            seen.fetch_add(1, Ordering::Relaxed);
                            Ok(if seen.load(Ordering::Relaxed) >= streak {
                                Poll::Done(())
                            } else {
                                Poll::Pending(format!(
                                    "completed ({} of {streak} checks)",
                                    seen.load(Ordering::Relaxed)
                                ))
                            })
                        }
                        Some("error") => Err(AwsError::new(
                            self.ctx("waiting for snapshot"),
                            Some("error"),
                            format!("snapshot {id} failed"),
                        )),
                        Some(other) => {
                            seen.store(0, Ordering::Relaxed);
                            Ok(Poll::Pending(other.to_string()))
                        }
                        None => {
                            seen.store(0, Ordering::Relaxed);
                            Ok(Poll::Pending("not visible yet".into()))
                        }
                    }
                }
            },
        )
        .await
    }

    /// Deletes a snapshot; a missing one counts as deleted.
    pub async fn delete_snapshot(&self, id: &str) -> Result<()> {
        match self.client.delete_snapshot().snapshot_id(id).send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("deleting snapshot {id}"), &e)
                .or_ok_if(&["InvalidSnapshot.NotFound"], ()),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Builder instances (amazon-ebs)
    // -----------------------------------------------------------------------------------------

    /// Creates a key pair and returns its private key (PEM). The key never leaves memory
    /// except into a 0600 file the caller owns.
    pub async fn create_key_pair(&self, name: &str, tags: &[(String, String)]) -> Result<String> {
        let out = self
            .client
            .create_key_pair()
            .key_name(name)
            .key_type(aws_sdk_ec2::types::KeyType::Ed25519)
            .set_tag_specifications(tag_specs(&[ResourceType::KeyPair], tags))
            .send()
            .await
            .map_err(|e| self.err(&format!("creating key pair {name}"), &e))?;
        out.key_material()
            .map(str::to_string)
            .ok_or_else(|| AwsError::new(self.ctx("creating key pair"), None, "no key material in the response"))
    }

    pub async fn delete_key_pair(&self, name: &str) -> Result<()> {
        match self.client.delete_key_pair().key_name(name).send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("deleting key pair {name}"), &e)
                .or_ok_if(&["InvalidKeyPair.NotFound"], ()),
        }
    }

    pub async fn key_pair_exists(&self, name: &str) -> Result<bool> {
        match self.client.describe_key_pairs().key_names(name).send().await {
            Ok(out) => Ok(!out.key_pairs().is_empty()),
            Err(e) => self
                .err(&format!("looking up key pair {name}"), &e)
                .or_ok_if(&["InvalidKeyPair.NotFound"], false),
        }
    }

    /// The region's default VPC, if it has one.
    pub async fn default_vpc(&self) -> Result<Option<String>> {
        let out = self
            .client
            .describe_vpcs()
            .filters(filter("is-default", &["true"]))
            .send()
            .await
            .map_err(|e| self.err("looking up the default VPC", &e))?;
        Ok(out.vpcs().first().and_then(|v| v.vpc_id()).map(str::to_string))
    }

    /// Launches a builder instance: IMDSv2 required, encrypted gp3 root volume, tagged at
    /// launch (so an interrupted build's instance can be found by its tags).
    pub async fn run_builder_instance(&self, req: &BuilderInstance) -> Result<String> {
        let root_device = self.image_root_device(&req.image_id).await?;
        let mut run = self
            .client
            .run_instances()
            .image_id(&req.image_id)
            .instance_type(aws_sdk_ec2::types::InstanceType::from(req.instance_type.as_str()))
            .key_name(&req.key_name)
            .security_group_ids(&req.security_group_id)
            .set_subnet_id(req.subnet_id.clone())
            .min_count(1)
            .max_count(1)
            .client_token(&req.client_token)
            .metadata_options(
                aws_sdk_ec2::types::InstanceMetadataOptionsRequest::builder()
                    .http_tokens(aws_sdk_ec2::types::HttpTokensState::Required)
                    .http_endpoint(aws_sdk_ec2::types::InstanceMetadataEndpointState::Enabled)
                    .build(),
            )
            .block_device_mappings(
                BlockDeviceMapping::builder()
                    .device_name(root_device)
                    .ebs(
                        EbsBlockDevice::builder()
                            .volume_size(req.root_volume_gib)
                            .volume_type(VolumeType::Gp3)
                            .encrypted(true)
                            .delete_on_termination(true)
                            .build(),
                    )
                    .build(),
            )
            .set_tag_specifications(tag_specs(&[ResourceType::Instance, ResourceType::Volume], &req.tags));
        if let Some(profile) = &req.instance_profile {
            let spec = aws_sdk_ec2::types::IamInstanceProfileSpecification::builder();
            let spec = if profile.starts_with("arn:") {
                spec.arn(profile)
            } else {
                spec.name(profile)
            };
            run = run.iam_instance_profile(spec.build());
        }
        let out = run
            .send()
            .await
            .map_err(|e| self.err(&format!("launching a builder instance from {}", req.image_id), &e))?;
        out.instances()
            .first()
            .and_then(|i| i.instance_id())
            .map(str::to_string)
            .ok_or_else(|| {
                AwsError::new(
                    self.ctx("launching builder instance"),
                    None,
                    "no instance in the response",
                )
            })
    }

    /// Stops an instance and waits until it is stopped.
    pub async fn stop_instance(&self, id: &str, timeout: Duration) -> Result<()> {
        self.client
            .stop_instances()
            .instance_ids(id)
            .send()
            .await
            .map_err(|e| self.err(&format!("stopping instance {id}"), &e))?;
        wait::until(
            &format!("instance {id} to stop"),
            timeout,
            Backoff::default(),
            || async {
                match self.find_instance(id).await? {
                    Some(i) if i.state == "stopped" => Ok(Poll::Done(())),
                    Some(i) => Ok(Poll::Pending(i.state)),
                    None => Err(AwsError::new(
                        self.ctx("stopping instance"),
                        None,
                        format!("instance {id} disappeared while stopping"),
                    )),
                }
            },
        )
        .await
    }

    /// CreateImage from a stopped instance; returns the new image id.
    pub async fn create_image(
        &self,
        instance_id: &str,
        name: &str,
        description: &str,
        tags: &[(String, String)],
    ) -> Result<String> {
        let out = self
            .client
            .create_image()
            .instance_id(instance_id)
            .name(name)
            .description(description)
            .set_tag_specifications(tag_specs(&[ResourceType::Image, ResourceType::Snapshot], tags))
            .send()
            .await
            .map_err(|e| self.err(&format!("creating image {name:?} from {instance_id}"), &e))?;
        out.image_id()
            .map(str::to_string)
            .ok_or_else(|| AwsError::new(self.ctx("creating image"), None, "no image id in the response"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(id: &str, date: &str) -> ImageInfo {
        ImageInfo {
            id: id.into(),
            name: "debian-12".into(),
            state: "available".into(),
            snapshot_ids: vec![],
            tags: vec![],
            creation_date: date.into(),
            boot_mode: None,
            ena_support: true,
            architecture: None,
            root_size_gib: None,
        }
    }

    #[test]
    fn most_recent_picks_the_newest_creation_date() {
        let images = [
            img("ami-1", "2026-01-02T00:00:00.000Z"),
            img("ami-2", "2026-03-01T00:00:00.000Z"),
            img("ami-3", "2025-12-31T00:00:00.000Z"),
        ];
        assert_eq!(most_recent(&images).map(|i| i.id.as_str()), Some("ami-2"));
        assert_eq!(most_recent(&[]).map(|i| i.id.as_str()), None);
    }
}
