//! Security groups: find-or-create by name, the rules kept in step with what is asked
//! (added and revoked), and deletion once nothing uses them.

use super::*;

impl Ec2 {
    /// The security group with this name in the VPC, created if missing, whose single-port TCP
    /// ingress from CIDRs is exactly `ingress`: pairs no longer listed are revoked, new ones
    /// authorized; other kinds of rules (e.g. [`Ec2::allow_self`]) are left as they are. Never
    /// opens anything to 0.0.0.0/0 by itself.
    pub async fn ensure_security_group(
        &self,
        name: &str,
        description: &str,
        vpc_id: &str,
        ingress: &[(i32, String)],
        tags: &[(String, String)],
    ) -> Result<String> {
        let existing = self
            .client
            .describe_security_groups()
            .filters(filter("vpc-id", &[vpc_id]))
            .filters(filter("group-name", &[name]))
            .send()
            .await
            .map_err(|e| self.err("looking up security group", &e))?;
        let (id, current) = match existing.security_groups().first() {
            Some(group) if group.group_id().is_some() => (
                group.group_id().unwrap_or_default().to_string(),
                tcp_cidr_rules(group.ip_permissions()),
            ),
            _ => {
                let out = self
                    .client
                    .create_security_group()
                    .group_name(name)
                    .description(description)
                    .vpc_id(vpc_id)
                    .set_tag_specifications(tag_specs(&[ResourceType::SecurityGroup], tags))
                    .send()
                    .await
                    .map_err(|e| self.err(&format!("creating security group {name}"), &e))?;
                (out.group_id().unwrap_or_default().to_string(), BTreeSet::new())
            }
        };
        let wanted: BTreeSet<(i32, String)> = ingress.iter().cloned().collect();
        for (port, cidr) in current.difference(&wanted) {
            self.revoke(&id, tcp_from(*port, cidr)).await?;
        }
        for (port, cidr) in wanted.difference(&current) {
            self.authorize(&id, tcp_from(*port, cidr)).await?;
        }
        Ok(id)
    }

    /// Allows all traffic between members of the group (what EFA requires), ingress and egress.
    pub async fn allow_self(&self, group_id: &str) -> Result<()> {
        let perm = IpPermission::builder()
            .ip_protocol("-1")
            .user_id_group_pairs(UserIdGroupPair::builder().group_id(group_id).build())
            .build();
        self.authorize(group_id, perm.clone()).await?;
        match self
            .client
            .authorize_security_group_egress()
            .group_id(group_id)
            .ip_permissions(perm)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("allowing egress within the group", &e)
                .or_ok_if(&["InvalidPermission.Duplicate"], ()),
        }
    }

    pub(super) async fn revoke(&self, group_id: &str, perm: IpPermission) -> Result<()> {
        match self
            .client
            .revoke_security_group_ingress()
            .group_id(group_id)
            .ip_permissions(perm)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("revoking a security group rule", &e)
                .or_ok_if(&["InvalidPermission.NotFound", "InvalidGroup.NotFound"], ()),
        }
    }

    pub(super) async fn authorize(&self, group_id: &str, perm: IpPermission) -> Result<()> {
        match self
            .client
            .authorize_security_group_ingress()
            .group_id(group_id)
            .ip_permissions(perm)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .err("adding a security group rule", &e)
                .or_ok_if(&["InvalidPermission.Duplicate"], ()),
        }
    }

    /// Deletes a security group; retries while instances that used it are still shutting down.
    pub async fn delete_security_group(&self, id: &str) -> Result<()> {
        wait::until(
            &format!("deleting security group {id}"),
            Duration::from_secs(300),
            Backoff::default(),
            || async {
                match self.client.delete_security_group().group_id(id).send().await {
                    Ok(_) => Ok(Poll::Done(())),
                    Err(e) => {
                        let err = self.err("deleting security group", &e);
                        if err.code_is(&["InvalidGroup.NotFound"]) {
                            Ok(Poll::Done(()))
                        } else if err.code_is(&["DependencyViolation"]) {
                            Ok(Poll::Pending("in use".into()))
                        } else {
                            Err(err)
                        }
                    }
                }
            },
        )
        .await
    }
}

/// TCP ingress on one port from one IPv4 CIDR.
fn tcp_from(port: i32, cidr: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(port)
        .to_port(port)
        .ip_ranges(IpRange::builder().cidr_ip(cidr).build())
        .build()
}

/// The (port, CIDR) pairs of a group's single-port TCP rules from IPv4 ranges.
fn tcp_cidr_rules(perms: &[IpPermission]) -> BTreeSet<(i32, String)> {
    perms
        .iter()
        .filter(|p| p.ip_protocol() == Some("tcp") && p.from_port().is_some() && p.from_port() == p.to_port())
        .flat_map(|p| {
            let port = p.from_port().unwrap_or_default();
            p.ip_ranges()
                .iter()
                .filter_map(move |r| r.cidr_ip().map(|c| (port, c.to_string())))
        })
        .collect()
}
