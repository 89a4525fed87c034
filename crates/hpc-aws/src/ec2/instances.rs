//! Instances: single launches, instant fleets, capacity reservations, addresses, lookups by
//! tag and termination.

use super::*;

impl Ec2 {
    /// Launches one instance from a launch template, tagged at launch (so an interrupted run
    /// can find it by its tags). The client token makes the SDK's own retries idempotent.
    pub async fn run_instance(
        &self,
        template_id: &str,
        subnet_id: &str,
        client_token: &str,
        tags: &[(String, String)],
    ) -> Result<String> {
        let _changing = self.tagged.changing();
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
            .subnet_id(subnet_id)
            .min_count(1)
            .max_count(1)
            .client_token(client_token)
            .send()
            .await
            .map_err(|e| self.err("launching instance", &e))?;
        self.launched_instance(&out)
    }

    /// An instance for a refresh, through a view of every live instance carrying `tag_key`
    /// (one paginated DescribeInstances serves the head nodes of every cluster a plan reads).
    /// An instance the view lacks is looked up directly before it is reported gone.
    pub async fn find_instance_viewed(&self, tag_key: &str, id: &str) -> Result<Option<InstanceInfo>> {
        if let Some(i) = self.tag_view(tag_key).await?.get(id) {
            return Ok(Some(i.clone()));
        }
        self.find_instance(id).await
    }

    /// Every instance carrying `tag_key`, for a refresh, through the same view.
    pub async fn instances_viewed(&self, tag_key: &str) -> Result<Vec<InstanceInfo>> {
        Ok(self.tag_view(tag_key).await?.values().cloned().collect())
    }

    async fn tag_view(&self, tag_key: &str) -> Result<std::sync::Arc<std::collections::HashMap<String, InstanceInfo>>> {
        self.tagged
            .get(tag_key, || async {
                let found = self.instances_filtered(filter("tag-key", &[tag_key])).await?;
                Ok(found.into_iter().map(|i| (i.id.clone(), i)).collect())
            })
            .await
    }

    /// The instance's console output (decoded; empty while EC2 has none yet).
    pub async fn console_output(&self, id: &str) -> Result<String> {
        use base64::Engine as _;
        let out = self
            .client
            .get_console_output()
            .instance_id(id)
            .latest(true)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx(&format!("reading the console output of {id}")), &e))?;
        let encoded = out.output().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| {
                AwsError::new(
                    self.ctx(&format!("decoding the console output of {id}")),
                    None,
                    e.to_string(),
                )
            })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub async fn find_instance(&self, id: &str) -> Result<Option<InstanceInfo>> {
        match self.client.describe_instances().instance_ids(id).send().await {
            Ok(out) => Ok(out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .find(|i| i.instance_id() == Some(id))
                .map(instance_info)
                .filter(|i| i.state != InstanceStateName::Terminated.as_str())),
            Err(e) => self
                .err("describing instance", &e)
                .or_ok_if(&["InvalidInstanceID.NotFound"], None),
        }
    }

    pub async fn wait_instance_running(&self, id: &str, timeout: Duration) -> Result<InstanceInfo> {
        wait::until(&format!("instance {id}"), timeout, Backoff::default(), || async {
            match self.find_instance(id).await? {
                Some(i) if i.state == "running" => Ok(Poll::Done(i)),
                Some(i) if i.state == "pending" => Ok(Poll::Pending(i.state)),
                Some(i) => Err(AwsError::new(
                    self.ctx("waiting for instance"),
                    Some(&i.state),
                    format!("instance {id} is {}", i.state),
                )),
                None => Ok(Poll::Pending("not visible yet".into())),
            }
        })
        .await
    }

    /// Asks EC2 to terminate instances without waiting; missing ones count as terminated.
    pub async fn request_termination(&self, ids: &[String]) -> Result<()> {
        let _changing = self.tagged.changing();
        if ids.is_empty() {
            return Ok(());
        }
        match self
            .client
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("terminating instances", &e)
                .or_ok_if(&["InvalidInstanceID.NotFound"], ()),
        }
    }

    /// Terminates instances and waits until they are gone; missing ones count as gone.
    pub async fn terminate(&self, ids: &[String], timeout: Duration) -> Result<()> {
        self.request_termination(ids).await?;
        for id in ids {
            wait::until(&format!("termination of {id}"), timeout, Backoff::default(), || async {
                Ok(match self.find_instance(id).await? {
                    None => Poll::Done(()),
                    Some(i) => Poll::Pending(i.state),
                })
            })
            .await?;
        }
        Ok(())
    }

    /// Launches up to `count` instances with an instant fleet. EC2 answers capacity problems
    /// per override inside a successful response; they come back in `errors`.
    pub async fn launch_fleet(&self, req: &FleetRequest) -> Result<FleetOutcome> {
        let _changing = self.tagged.changing();
        use aws_sdk_ec2::types::{DefaultTargetCapacityType, FleetType, TargetCapacitySpecificationRequest};
        let capacity = TargetCapacitySpecificationRequest::builder()
            .total_target_capacity(req.count)
            .default_target_capacity_type(match req.market {
                Market::Spot => DefaultTargetCapacityType::Spot,
                Market::OnDemand => DefaultTargetCapacityType::OnDemand,
                Market::CapacityBlock => DefaultTargetCapacityType::CapacityBlock,
            })
            .build();
        let call = self
            .client
            .create_fleet()
            .r#type(FleetType::Instant)
            .set_launch_template_configs(Some(fleet_templates(req)))
            .target_capacity_specification(capacity)
            .set_tag_specifications(tag_specs(&[ResourceType::Instance], &req.tags));
        let out = with_allocation_strategy(call, req)
            .send()
            .await
            .map_err(|e| self.err("launching an instant fleet", &e))?;
        Ok(FleetOutcome {
            instances: fleet_instances(&out),
            errors: fleet_errors(&out),
        })
    }

    /// Describes capacity reservations (and Capacity Blocks) by id, in one call.
    pub async fn capacity_reservations(&self, ids: &[String]) -> Result<Vec<CapacityReservationInfo>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .client
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(Some(ids.to_vec()))
            .send()
            .await
            .map_err(|e| self.err(&format!("describing capacity reservations {}", ids.join(", ")), &e))?;
        Ok(out
            .capacity_reservations()
            .iter()
            .map(|r| CapacityReservationInfo {
                id: r.capacity_reservation_id().unwrap_or_default().to_string(),
                instance_type: r.instance_type().unwrap_or_default().to_string(),
                availability_zone: r.availability_zone().unwrap_or_default().to_string(),
                state: r.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                total: r.total_instance_count().unwrap_or(0),
                available: r.available_instance_count().unwrap_or(0),
                capacity_block: r.reservation_type().is_some_and(|t| t.as_str() == "capacity-block"),
                start_s: r.start_date().map(|d| d.secs()),
                end_s: r.end_date().map(|d| d.secs()),
            })
            .collect())
    }

    /// Private addresses of instances (id → IP), a few describe calls for many instances.
    pub async fn private_ips(&self, ids: &[String]) -> Result<std::collections::BTreeMap<String, String>> {
        let mut out = std::collections::BTreeMap::new();
        for chunk in ids.chunks(500) {
            let mut token = None;
            loop {
                let page = self
                    .client
                    .describe_instances()
                    .set_instance_ids(Some(chunk.to_vec()))
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| self.err("describing instances", &e))?;
                for i in page.reservations().iter().flat_map(|r| r.instances()) {
                    if let (Some(id), Some(ip)) = (i.instance_id(), i.private_ip_address()) {
                        out.insert(id.to_string(), ip.to_string());
                    }
                }
                token = page.next_token().map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Instances (not terminated) carrying a tag.
    pub async fn instances_tagged(&self, key: &str, value: &str) -> Result<Vec<InstanceInfo>> {
        self.instances_filtered(filter(&format!("tag:{key}"), &[value])).await
    }

    /// Every pending or running instance in the region as (instance type, spot?): what counts
    /// against the account's vCPU quotas.
    pub async fn running_instance_types(&self) -> Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_instances()
                .filters(filter("instance-state-name", &["pending", "running"]))
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| self.err("listing running instances", &e))?;
            out.extend(page.reservations().iter().flat_map(|r| r.instances()).map(|i| {
                let spot = i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot");
                (
                    i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    spot,
                )
            }));
            token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Every instance matching `by` that is not terminated, all pages.
    async fn instances_filtered(&self, by: Filter) -> Result<Vec<InstanceInfo>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_instances()
                .filters(by.clone())
                .filters(filter(
                    "instance-state-name",
                    &["pending", "running", "stopping", "stopped", "shutting-down"],
                ))
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| self.err("listing instances", &e))?;
            out.extend(
                page.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .map(instance_info),
            );
            token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }
}

fn instance_info(i: &aws_sdk_ec2::types::Instance) -> InstanceInfo {
    InstanceInfo {
        id: i.instance_id().unwrap_or_default().to_string(),
        state: i
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_string())
            .unwrap_or_default(),
        image_id: i.image_id().unwrap_or_default().to_string(),
        private_ip: i.private_ip_address().map(str::to_string),
        public_ip: i.public_ip_address().map(str::to_string),
        subnet_id: i.subnet_id().map(str::to_string),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        tags: instance_tags(i),
        launched_at: i.launch_time().map(|t| t.secs()).unwrap_or(0),
    }
}

fn instance_tags(i: &aws_sdk_ec2::types::Instance) -> Vec<(String, String)> {
    i.tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

impl Ec2 {
    /// The id of the one instance a RunInstances call launched.
    pub(super) fn launched_instance(
        &self,
        out: &aws_sdk_ec2::operation::run_instances::RunInstancesOutput,
    ) -> Result<String> {
        out.instances()
            .first()
            .and_then(|i| i.instance_id())
            .map(str::to_string)
            .ok_or_else(|| AwsError::new(self.ctx("launching instance"), None, "no instance in the response"))
    }
}

/// One launch template configuration per template of the request, its overrides in order.
fn fleet_templates(req: &FleetRequest) -> Vec<aws_sdk_ec2::types::FleetLaunchTemplateConfigRequest> {
    use aws_sdk_ec2::types::{
        FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    };
    let mut templates: Vec<(String, Vec<&FleetOverride>)> = Vec::new();
    for o in &req.overrides {
        match templates.iter_mut().find(|(id, _)| *id == o.launch_template_id) {
            Some((_, list)) => list.push(o),
            None => templates.push((o.launch_template_id.clone(), vec![o])),
        }
    }
    templates
        .iter()
        .map(|(id, list)| {
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_id(id)
                        .version("$Default")
                        .build(),
                )
                .set_overrides(Some(
                    list.iter()
                        .map(|o| {
                            FleetLaunchTemplateOverridesRequest::builder()
                                .instance_type(InstanceType::from(o.instance_type.as_str()))
                                .subnet_id(&o.subnet_id)
                                .priority(o.priority)
                                .build()
                        })
                        .collect(),
                ))
                .build()
        })
        .collect()
}

/// The fleet call with the request's allocation strategy, as spot or on-demand options.
fn with_allocation_strategy(
    call: aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder,
    req: &FleetRequest,
) -> aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder {
    use aws_sdk_ec2::types::{
        FleetOnDemandAllocationStrategy, OnDemandOptionsRequest, SpotAllocationStrategy, SpotOptionsRequest,
    };
    if req.market == Market::Spot {
        let strategy = match req.allocation_strategy.as_str() {
            "lowest-price" => SpotAllocationStrategy::LowestPrice,
            "capacity-optimized" => SpotAllocationStrategy::CapacityOptimized,
            "prioritized" => SpotAllocationStrategy::CapacityOptimizedPrioritized,
            _ => SpotAllocationStrategy::PriceCapacityOptimized,
        };
        call.spot_options(SpotOptionsRequest::builder().allocation_strategy(strategy).build())
    } else {
        let strategy = if req.allocation_strategy == "lowest-price" {
            FleetOnDemandAllocationStrategy::LowestPrice
        } else {
            FleetOnDemandAllocationStrategy::Prioritized
        };
        call.on_demand_options(OnDemandOptionsRequest::builder().allocation_strategy(strategy).build())
    }
}

/// The instances a fleet launched, with the type and subnet of the override that got them.
fn fleet_instances(out: &aws_sdk_ec2::operation::create_fleet::CreateFleetOutput) -> Vec<FleetInstance> {
    out.instances()
        .iter()
        .flat_map(|group| {
            let subnet = group
                .launch_template_and_overrides()
                .and_then(|l| l.overrides())
                .and_then(|o| o.subnet_id())
                .map(str::to_string);
            let itype = group
                .instance_type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default();
            group.instance_ids().iter().map(move |id| FleetInstance {
                id: id.clone(),
                instance_type: itype.clone(),
                subnet_id: subnet.clone(),
            })
        })
        .collect()
}

/// The capacity problems a fleet reported, per override.
fn fleet_errors(out: &aws_sdk_ec2::operation::create_fleet::CreateFleetOutput) -> Vec<FleetError> {
    out.errors()
        .iter()
        .map(|e| {
            let o = e.launch_template_and_overrides().and_then(|l| l.overrides());
            FleetError {
                code: e.error_code().unwrap_or_default().to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                instance_type: o.and_then(|o| o.instance_type()).map(|t| t.as_str().to_string()),
                subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
            }
        })
        .collect()
}
