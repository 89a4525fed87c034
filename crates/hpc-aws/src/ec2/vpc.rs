//! Networks: finding, describing and deleting a cluster network (its creation, which adopts
//! what an interrupted run made, is in `network`).

use super::*;

impl Ec2 {
    /// Removes a route table's subnet associations (it cannot be deleted while it has any).
    async fn disassociate_all(&self, route_table: &str) -> Result<()> {
        let out = match self
            .client
            .describe_route_tables()
            .route_table_ids(route_table)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let err = self.err("describing route table", &e);
                return if err.code_is(&["InvalidRouteTableID.NotFound"]) {
                    Ok(())
                } else {
                    Err(err)
                };
            }
        };
        for assoc in out.route_tables().iter().flat_map(|r| r.associations()) {
            if assoc.main() == Some(true) {
                continue;
            }
            if let Some(id) = assoc.route_table_association_id() {
                if let Err(e) = self.client.disassociate_route_table().association_id(id).send().await {
                    let err = self.err("disassociating route table", &e);
                    if !err.code_is(&["InvalidAssociationID.NotFound"]) {
                        return Err(err);
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) async fn wait_nat(&self, id: &str, want: &str, timeout: Duration) -> Result<()> {
        wait::until(&format!("NAT gateway {id}"), timeout, Backoff::default(), || async {
            let out = self
                .client
                .describe_nat_gateways()
                .nat_gateway_ids(id)
                .send()
                .await
                .map_err(|e| self.err("describing NAT gateway", &e))?;
            let state = out
                .nat_gateways()
                .first()
                .and_then(|n| n.state())
                .map(|s| s.as_str().to_string());
            match state.as_deref() {
                Some(s) if s == want => Ok(Poll::Done(())),
                None if want == "deleted" => Ok(Poll::Done(())),
                Some("failed") if want != "deleted" => Err(AwsError::new(
                    self.ctx("creating NAT gateway"),
                    Some("failed"),
                    format!("NAT gateway {id} failed"),
                )),
                Some(s) => Ok(Poll::Pending(s.to_string())),
                None => Ok(Poll::Pending("not visible yet".into())),
            }
        })
        .await
    }

    /// Finds the parts of a network that [`Ec2::create_network`] made, from the VPC id and the
    /// names it tagged them with (`<name>-public-<zone>`, `<name>-cluster`, ...), for import.
    /// Returns the name, the network, the VPC's CIDR and its tags (without `Name`).
    pub async fn discover_network(
        &self,
        vpc_id: &str,
    ) -> Result<Option<(String, Network, String, Vec<(String, String)>)>> {
        let vpcs = match self.client.describe_vpcs().vpc_ids(vpc_id).send().await {
            Ok(out) => out,
            Err(e) => {
                return self
                    .err("describing VPC", &e)
                    .or_ok_if(&["InvalidVpcID.NotFound"], None)
            }
        };
        let Some(vpc) = vpcs.vpcs().first() else {
            return Ok(None);
        };
        let Some(name) = tag_value(vpc.tags(), "Name").and_then(|n| n.strip_suffix("-vpc").map(str::to_string)) else {
            return Err(AwsError::new(
                self.ctx("importing network"),
                None,
                format!("VPC {vpc_id} has no Name tag ending in -vpc: it was not made by hpc_network"),
            ));
        };
        let mut tags: Vec<(String, String)> = vpc
            .tags()
            .iter()
            .filter(|t| t.key() != Some("Name"))
            .map(|t| {
                (
                    t.key().unwrap_or_default().to_string(),
                    t.value().unwrap_or_default().to_string(),
                )
            })
            .collect();
        tags.sort();
        let mut net = Network {
            vpc_id: vpc_id.to_string(),
            internet_gateway_id: self.found_internet_gateway(vpc_id).await?,
            s3_endpoint_id: self.found_s3_endpoint(vpc_id).await?,
            security_group_id: self.found_cluster_group(&name, vpc_id).await?,
            ..Network::default()
        };
        self.find_subnets(&name, &mut net).await?;
        self.find_route_tables(&name, &mut net).await?;
        self.find_nat(&mut net).await?;
        let cidr = vpc.cidr_block().unwrap_or_default().to_string();
        Ok(Some((name, net, cidr, tags)))
    }

    async fn found_internet_gateway(&self, vpc_id: &str) -> Result<String> {
        let igws = self
            .client
            .describe_internet_gateways()
            .filters(filter("attachment.vpc-id", &[vpc_id]))
            .send()
            .await
            .map_err(|e| self.err("describing internet gateways", &e))?;
        Ok(igws
            .internet_gateways()
            .first()
            .and_then(|g| g.internet_gateway_id())
            .unwrap_or_default()
            .to_string())
    }

    /// The public and private subnets of network `name`, by zone (sorted).
    async fn find_subnets(&self, name: &str, net: &mut Network) -> Result<()> {
        let subnets = self
            .client
            .describe_subnets()
            .filters(filter("vpc-id", &[&net.vpc_id]))
            .send()
            .await
            .map_err(|e| self.err("describing subnets", &e))?;
        for s in subnets.subnets() {
            let (Some(n), Some(az), Some(id)) = (tag_value(s.tags(), "Name"), s.availability_zone(), s.subnet_id())
            else {
                continue;
            };
            if n == format!("{name}-public-{az}") {
                net.public_subnets.push((az.to_string(), id.to_string()));
            } else if n == format!("{name}-private-{az}") {
                net.private_subnets.push((az.to_string(), id.to_string()));
            }
        }
        net.public_subnets.sort();
        net.private_subnets.sort();
        Ok(())
    }

    async fn find_route_tables(&self, name: &str, net: &mut Network) -> Result<()> {
        let tables = self
            .client
            .describe_route_tables()
            .filters(filter("vpc-id", &[&net.vpc_id]))
            .send()
            .await
            .map_err(|e| self.err("describing route tables", &e))?;
        for t in tables.route_tables() {
            let id = t.route_table_id().unwrap_or_default().to_string();
            match tag_value(t.tags(), "Name") {
                Some(n) if n == format!("{name}-public") => net.public_route_table_id = id,
                Some(n) if n == format!("{name}-private") => net.private_route_table_id = id,
                _ => {}
            }
        }
        Ok(())
    }

    /// The VPC's available NAT gateway and its address's allocation, if any.
    async fn find_nat(&self, net: &mut Network) -> Result<()> {
        let nats = self
            .client
            .describe_nat_gateways()
            .filter(filter("vpc-id", &[&net.vpc_id]))
            .send()
            .await
            .map_err(|e| self.err("describing NAT gateways", &e))?;
        if let Some(nat) = nats
            .nat_gateways()
            .iter()
            .find(|n| n.state().is_some_and(|s| s.as_str() == "available"))
        {
            net.nat_gateway_id = nat.nat_gateway_id().map(str::to_string);
            net.eip_allocation_id = nat
                .nat_gateway_addresses()
                .first()
                .and_then(|a| a.allocation_id())
                .map(str::to_string);
        }
        Ok(())
    }

    async fn found_s3_endpoint(&self, vpc_id: &str) -> Result<Option<String>> {
        let endpoints = self
            .client
            .describe_vpc_endpoints()
            .filters(filter("vpc-id", &[vpc_id]))
            .send()
            .await
            .map_err(|e| self.err("describing VPC endpoints", &e))?;
        Ok(endpoints
            .vpc_endpoints()
            .iter()
            .find(|e| e.service_name().is_some_and(|s| s.ends_with(".s3")))
            .and_then(|e| e.vpc_endpoint_id())
            .map(str::to_string))
    }

    async fn found_cluster_group(&self, name: &str, vpc_id: &str) -> Result<String> {
        let groups = self
            .client
            .describe_security_groups()
            .filters(filter("vpc-id", &[vpc_id]))
            .filters(filter("group-name", &[&format!("{name}-cluster")]))
            .send()
            .await
            .map_err(|e| self.err("describing security groups", &e))?;
        Ok(groups
            .security_groups()
            .first()
            .and_then(|g| g.group_id())
            .unwrap_or_default()
            .to_string())
    }

    /// Deletes a network made by [`Ec2::create_network`], in reverse order; missing parts are skipped.
    pub async fn delete_network(&self, net: &Network, timeout: Duration) -> Result<()> {
        if let Some(id) = &net.s3_endpoint_id {
            let r = self.client.delete_vpc_endpoints().vpc_endpoint_ids(id).send().await;
            self.deleted("deleting S3 endpoint", r)?;
        }
        if let Some(id) = &net.nat_gateway_id {
            let r = self.client.delete_nat_gateway().nat_gateway_id(id).send().await;
            if self.deleted("deleting NAT gateway", r)? {
                self.wait_nat(id, "deleted", timeout).await?;
            }
        }
        if let Some(id) = &net.eip_allocation_id {
            let r = self.client.release_address().allocation_id(id).send().await;
            self.deleted("releasing the NAT address", r)?;
        }
        let tables = [&net.public_route_table_id, &net.private_route_table_id];
        for rt in tables.into_iter().filter(|rt| !rt.is_empty()) {
            self.disassociate_all(rt).await?;
        }
        for (_, subnet) in net.public_subnets.iter().chain(&net.private_subnets) {
            let r = self.client.delete_subnet().subnet_id(subnet).send().await;
            self.deleted(&format!("deleting subnet {subnet}"), r)?;
        }
        for rt in tables.into_iter().filter(|rt| !rt.is_empty()) {
            let r = self.client.delete_route_table().route_table_id(rt).send().await;
            self.deleted(&format!("deleting route table {rt}"), r)?;
        }
        if !net.internet_gateway_id.is_empty() {
            let igw = &net.internet_gateway_id;
            let detached = self
                .client
                .detach_internet_gateway()
                .internet_gateway_id(igw)
                .vpc_id(&net.vpc_id);
            // Already detached (or gone): the deletion says which.
            let _ = detached.send().await;
            let r = self
                .client
                .delete_internet_gateway()
                .internet_gateway_id(igw)
                .send()
                .await;
            self.deleted("deleting internet gateway", r)?;
        }
        if !net.security_group_id.is_empty() {
            self.delete_security_group(&net.security_group_id).await?;
        }
        if !net.vpc_id.is_empty() {
            let r = self.client.delete_vpc().vpc_id(&net.vpc_id).send().await;
            self.deleted("deleting VPC", r)?;
        }
        Ok(())
    }

    /// A deletion's outcome: true when it happened, false when the resource was already gone
    /// (any `*.NotFound`), else the error.
    fn deleted<T, E>(&self, what: &str, result: std::result::Result<T, E>) -> Result<bool>
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
    {
        match result {
            Ok(_) => Ok(true),
            Err(e) => {
                let err = self.err(what, &e);
                if err.code.as_deref().is_some_and(|c| c.ends_with(".NotFound")) {
                    Ok(false)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Makes the tags of every given resource go from `old` to `new`.
    pub async fn retag(&self, ids: &[String], old: &[(String, String)], new: &[(String, String)]) -> Result<()> {
        let _changing = self.tagged.changing();
        let ids: Vec<String> = ids.iter().filter(|i| !i.is_empty()).cloned().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let removed: Vec<Tag> = old
            .iter()
            .filter(|(k, _)| !new.iter().any(|(nk, _)| nk == k))
            .map(|(k, _)| Tag::builder().key(k).build())
            .collect();
        let changed: Vec<(String, String)> = new.iter().filter(|kv| !old.contains(kv)).cloned().collect();
        if !removed.is_empty() {
            self.client
                .delete_tags()
                .set_resources(Some(ids.clone()))
                .set_tags(Some(removed))
                .send()
                .await
                .map_err(|e| self.err("removing tags", &e))?;
        }
        if !changed.is_empty() {
            self.client
                .create_tags()
                .set_resources(Some(ids))
                .set_tags(Some(sdk_tags(&changed)))
                .send()
                .await
                .map_err(|e| self.err("tagging", &e))?;
        }
        Ok(())
    }

    /// The tags of a VPC, sorted (None when the VPC is gone).
    pub async fn vpc_tags(&self, vpc_id: &str) -> Result<Option<Vec<(String, String)>>> {
        match self.client.describe_vpcs().vpc_ids(vpc_id).send().await {
            Ok(out) => Ok(out.vpcs().first().map(|v| {
                let mut t: Vec<(String, String)> = v
                    .tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().unwrap_or_default().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect();
                t.sort();
                t
            })),
            Err(e) => self
                .err("describing VPC", &e)
                .or_ok_if(&["InvalidVpcID.NotFound"], None),
        }
    }
}

/// The value of tag `key` among `tags`.
fn tag_value(tags: &[Tag], key: &str) -> Option<String> {
    tags.iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
        .map(str::to_string)
}
