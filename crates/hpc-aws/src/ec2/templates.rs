//! Launch templates (one per name, a new default version when what they launch changes) and
//! placement groups.

use super::*;

impl Ec2 {
    fn template_data(&self, spec: &LaunchTemplateSpec, root_device: &str) -> RequestLaunchTemplateData {
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(&spec.image_id)
            .set_instance_type(spec.instance_type.as_deref().map(InstanceType::from))
            .set_key_name(spec.key_name.clone())
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                    .http_put_response_hop_limit(2)
                    .build(),
            )
            .set_user_data(
                spec.user_data
                    .as_ref()
                    .map(|u| base64::engine::general_purpose::STANDARD.encode(u)),
            )
            .set_iam_instance_profile(spec.instance_profile_arn.as_ref().map(|arn| {
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .arn(arn)
                    .build()
            }))
            .set_tag_specifications(tag_specifications(&spec.tags));
        if let Some(root) = &spec.root_volume {
            data = data.block_device_mappings(root_mapping(root, root_device));
        }
        if spec.efa_network_cards.is_empty() {
            data = data.set_security_group_ids(Some(spec.security_group_ids.clone()));
        } else {
            for (i, card) in spec.efa_network_cards.iter().enumerate() {
                data = data.network_interfaces(efa_interface(i, *card, &spec.security_group_ids));
            }
        }
        if let Some(pg) = &spec.placement_group {
            data = data.placement(LaunchTemplatePlacementRequest::builder().group_name(pg).build());
        }
        if let Some(target) = &spec.capacity_reservation {
            data = with_reservation(data, target);
        }
        data.build()
    }

    /// The AMI's root device name (where the root volume settings go).
    pub async fn image_root_device(&self, image_id: &str) -> Result<String> {
        let out = self
            .client
            .describe_images()
            .image_ids(image_id)
            .send()
            .await
            .map_err(|e| self.err(&format!("describing image {image_id}"), &e))?;
        out.images()
            .first()
            .map(|i| i.root_device_name().unwrap_or("/dev/xvda").to_string())
            .ok_or_else(|| {
                AwsError::new(
                    self.ctx("describing image"),
                    Some("InvalidAMIID.NotFound"),
                    format!("image {image_id} does not exist"),
                )
            })
    }

    /// Creates the launch template, or (same name exists) makes a new default version when
    /// the settings differ. Returns (id, default version).
    pub async fn ensure_launch_template(&self, spec: &LaunchTemplateSpec) -> Result<(String, i64)> {
        let root_device = if spec.root_volume.is_some() {
            self.image_root_device(&spec.image_id).await?
        } else {
            String::new()
        };
        let data = self.template_data(spec, &root_device);
        let existing = self.find_launch_template(&spec.name).await?;
        match existing {
            None => {
                let out = self
                    .client
                    .create_launch_template()
                    .launch_template_name(&spec.name)
                    .launch_template_data(data)
                    .set_tag_specifications(tag_specs(&[ResourceType::LaunchTemplate], &spec.tags))
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("creating launch template {}", spec.name), &e))?;
                let lt = out.launch_template();
                Ok((
                    lt.and_then(|l| l.launch_template_id()).unwrap_or_default().to_string(),
                    lt.and_then(|l| l.default_version_number()).unwrap_or(1),
                ))
            }
            Some(id) => {
                let out = self
                    .client
                    .create_launch_template_version()
                    .launch_template_id(&id)
                    .launch_template_data(data)
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("updating launch template {}", spec.name), &e))?;
                let version = out
                    .launch_template_version()
                    .and_then(|v| v.version_number())
                    .unwrap_or(1);
                self.client
                    .modify_launch_template()
                    .launch_template_id(&id)
                    .default_version(version.to_string())
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("setting default version of {}", spec.name), &e))?;
                Ok((id, version))
            }
        }
    }

    pub async fn find_launch_template(&self, name: &str) -> Result<Option<String>> {
        match self
            .client
            .describe_launch_templates()
            .launch_template_names(name)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .launch_templates()
                .first()
                .and_then(|l| l.launch_template_id())
                .map(str::to_string)),
            Err(e) => self.err("looking up launch template", &e).or_ok_if(
                &[
                    "InvalidLaunchTemplateName.NotFoundException",
                    "InvalidLaunchTemplateId.NotFound",
                ],
                None,
            ),
        }
    }

    pub async fn delete_launch_template(&self, name: &str) -> Result<()> {
        match self
            .client
            .delete_launch_template()
            .launch_template_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self.err(&format!("deleting launch template {name}"), &e).or_ok_if(
                &[
                    "InvalidLaunchTemplateName.NotFoundException",
                    "InvalidLaunchTemplateId.NotFound",
                ],
                (),
            ),
        }
    }

    /// Creates a cluster placement group unless one of that name exists.
    pub async fn ensure_placement_group(&self, name: &str, tags: &[(String, String)]) -> Result<()> {
        match self
            .client
            .create_placement_group()
            .group_name(name)
            .strategy(PlacementStrategy::Cluster)
            .set_tag_specifications(tag_specs(&[ResourceType::PlacementGroup], tags))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("creating placement group {name}"), &e)
                .or_ok_if(&["InvalidPlacementGroup.Duplicate"], ()),
        }
    }

    pub async fn delete_placement_group(&self, name: &str) -> Result<()> {
        match self.client.delete_placement_group().group_name(name).send().await {
            Ok(_) => Ok(()),
            Err(e) => self
                .err(&format!("deleting placement group {name}"), &e)
                .or_ok_if(&["InvalidPlacementGroup.Unknown"], ()),
        }
    }
}

/// The instance and volume tag specifications of `tags` (none without tags).
fn tag_specifications(tags: &[(String, String)]) -> Option<Vec<LaunchTemplateTagSpecificationRequest>> {
    (!tags.is_empty()).then(|| {
        [ResourceType::Instance, ResourceType::Volume]
            .into_iter()
            .map(|k| {
                LaunchTemplateTagSpecificationRequest::builder()
                    .resource_type(k)
                    .set_tags(Some(sdk_tags(tags)))
                    .build()
            })
            .collect()
    })
}

/// The root volume's settings on the image's root device.
fn root_mapping(root: &RootVolume, device: &str) -> LaunchTemplateBlockDeviceMappingRequest {
    LaunchTemplateBlockDeviceMappingRequest::builder()
        .device_name(device)
        .ebs(
            LaunchTemplateEbsBlockDeviceRequest::builder()
                .volume_size(root.size_gib)
                .volume_type(VolumeType::from(root.volume_type.as_str()))
                .encrypted(root.encrypted)
                .set_kms_key_id(root.kms_key_id.clone())
                .delete_on_termination(true)
                .build(),
        )
        .build()
}

/// The `i`th EFA interface, on network card `card`, with the template's groups.
fn efa_interface(i: usize, card: i32, groups: &[String]) -> LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
        .device_index(if i == 0 { 0 } else { 1 })
        .network_card_index(card)
        .interface_type("efa")
        .set_groups(Some(groups.to_vec()))
        .delete_on_termination(true)
        .build()
}

/// Launches into the reservation (and, for a Capacity Block, its market).
fn with_reservation(
    data: aws_sdk_ec2::types::builders::RequestLaunchTemplateDataBuilder,
    target: &ReservationTarget,
) -> aws_sdk_ec2::types::builders::RequestLaunchTemplateDataBuilder {
    use aws_sdk_ec2::types::{
        CapacityReservationTarget, LaunchTemplateCapacityReservationSpecificationRequest,
        LaunchTemplateInstanceMarketOptionsRequest, MarketType,
    };
    let data = data.capacity_reservation_specification(
        LaunchTemplateCapacityReservationSpecificationRequest::builder()
            .capacity_reservation_target(
                CapacityReservationTarget::builder()
                    .capacity_reservation_id(&target.id)
                    .build(),
            )
            .build(),
    );
    if !target.capacity_block {
        return data;
    }
    data.instance_market_options(
        LaunchTemplateInstanceMarketOptionsRequest::builder()
            .market_type(MarketType::CapacityBlock)
            .build(),
    )
}
