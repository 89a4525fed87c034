//! Capacity planning at plan time: what a partition may run (`max_nodes` of each of its types),
//! with every other partition published in the account and region (this cluster's and other
//! clusters'), against the account's EC2 vCPU quota for each class (Service Quotas) in each
//! pool's region. A partition that can never reach
//! `max_nodes` gets a warning with the numbers, or an error under the `enforce_quotas` guardrail.

use std::collections::BTreeMap;

use hpc_aws::ec2::InstanceTypeInfo;
use hpc_aws::quotas::{vcpu_quota, VcpuQuota};
use tfplugin::{AttributePath, Diagnostic, Diagnostics};

use crate::clients::Clients;
use crate::desired_state::{self, PartitionDoc};

/// What a partition may run: `max_nodes` of each instance type (vCPUs each), in any of its
/// pools (region, spot). Read from the planned partition or a published one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reach {
    pub name: String,
    pub max_nodes: u64,
    pub types: Vec<(String, u64)>,
    pub pools: Vec<(String, bool)>,
}

/// A planned pool, as the quotas see it: its region (None: the provider's) and whether it is spot.
pub(crate) struct PlannedPool<'a> {
    pub region: Option<&'a str>,
    pub spot: bool,
}

impl Reach {
    /// A planned partition's reach: `max_nodes` of `types` in `pools` (types EC2 does not
    /// describe are left out).
    pub fn planned(
        name: &str,
        max_nodes: i64,
        types: &[String],
        pools: &[PlannedPool],
        infos: &[InstanceTypeInfo],
        home_region: &str,
    ) -> Self {
        Reach {
            name: name.to_string(),
            max_nodes: u64::try_from(max_nodes).unwrap_or(0),
            types: types
                .iter()
                .filter_map(|t| infos.iter().find(|i| &i.instance_type == t))
                .map(|i| (i.instance_type.clone(), u64::from(i.vcpus)))
                .collect(),
            pools: pools
                .iter()
                .map(|p| (p.region.unwrap_or(home_region).to_string(), p.spot))
                .collect(),
        }
    }

    /// A published partition's reach.
    pub fn published(doc: &PartitionDoc) -> Self {
        Reach {
            name: doc.name.clone(),
            max_nodes: u64::from(doc.max_nodes),
            types: doc
                .shapes
                .iter()
                .map(|s| (s.instance_type.clone(), u64::from(s.vcpus)))
                .collect(),
            pools: doc
                .pools
                .iter()
                .map(|p| (p.region.clone(), p.capacity_type == "spot"))
                .collect(),
        }
    }
}

/// What every other partition published in the provider's region may run: this cluster's by
/// name, other clusters' as `cluster/partition` (they draw on the same account quotas).
pub(crate) async fn published_reaches(
    clients: &Clients,
    cluster: &str,
    partition: &str,
) -> Result<Vec<Reach>, Diagnostics> {
    let params = clients
        .ssm
        .view(desired_state::CLUSTERS_ROOT)
        .await
        .map_err(|e| crate::resources::aws_diag("Cannot read the published partitions for the quota check", &e))?;
    let mut reaches: Vec<(bool, Reach)> = params
        .values()
        .filter_map(|p| desired_state::partition_of_param(&p.name).map(|at| (at, p)))
        .filter(|((c, n), _)| (*c, *n) != (cluster, partition))
        .filter_map(|((c, _), p)| {
            let doc = serde_json::from_str::<PartitionDoc>(&p.value).ok()?;
            let mut reach = Reach::published(&doc);
            if c != cluster {
                reach.name = format!("{c}/{}", reach.name);
            }
            Some((c != cluster, reach))
        })
        .collect();
    // This cluster's first, then other clusters', each by name.
    reaches.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    Ok(reaches.into_iter().map(|(_, r)| r).collect())
}

/// The most vCPUs a partition may hold against one quota in one region: `max_nodes` of each
/// of its types of that class (every node set may be full at once).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuotaNeed {
    pub region: String,
    pub quota: VcpuQuota,
    pub vcpus: u64,
    /// (instance type, vCPUs per node) that count against it.
    pub types: Vec<(String, u64)>,
}

/// What the partition needs of each (region, quota); pools sharing one count once (a node is in
/// one pool at a time).
pub(crate) fn needs(reach: &Reach) -> Vec<QuotaNeed> {
    let mut needs: BTreeMap<(String, &'static str), QuotaNeed> = BTreeMap::new();
    for (region, spot) in &reach.pools {
        for (t, per_node) in &reach.types {
            let Some(quota) = vcpu_quota(t, *spot) else {
                continue;
            };
            let need = needs.entry((region.clone(), quota.code)).or_insert_with(|| QuotaNeed {
                region: region.clone(),
                quota,
                vcpus: 0,
                types: vec![],
            });
            if !need.types.iter().any(|(known, _)| known == t) {
                need.vcpus += per_node * reach.max_nodes;
                need.types.push((t.clone(), *per_node));
            }
        }
    }
    needs.into_values().collect()
}

/// Each need of the partition, with what the other published partitions need of the same
/// quota, against the quota's value in its region; a quota that cannot be read is a
/// warning.
pub(crate) async fn quota_checks(clients: &Clients, this: &Reach, others: &[Reach]) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let name = &this.name;
    let other_needs: Vec<(String, QuotaNeed)> = others
        .iter()
        .flat_map(|o| needs(o).into_iter().map(|n| (o.name.clone(), n)))
        .collect();
    for need in needs(this) {
        let value = match clients.aws.quotas_in(&need.region).ec2_value(need.quota.code).await {
            Ok(v) => v,
            Err(e) => {
                diags.push(Diagnostic::warning(
                    format!("Cannot check the EC2 quota {} in {}", need.quota.code, need.region),
                    format!("{e}. Partition {name} may need {} vCPUs of it.", need.vcpus),
                ));
                continue;
            }
        };
        let sharing: Vec<(&str, u64)> = other_needs
            .iter()
            .filter(|(_, n)| n.region == need.region && n.quota.code == need.quota.code)
            .map(|(o, n)| (o.as_str(), n.vcpus))
            .collect();
        let total = need.vcpus + sharing.iter().map(|(_, v)| v).sum::<u64>();
        if (total as f64) <= value {
            continue;
        }
        diags.push(over_quota(
            this,
            &need,
            &sharing,
            total,
            value,
            clients.limits.enforce_quotas,
        ));
    }
    diags
}

/// The warning (or, under `enforce_quotas`, the error) for a partition past a quota.
fn over_quota(
    this: &Reach,
    need: &QuotaNeed,
    sharing: &[(&str, u64)],
    total: u64,
    value: f64,
    enforce: bool,
) -> Diagnostic {
    let summary = format!(
        "partition {} may need {} vCPUs of the quota \"{}\" in {}, which is {value} vCPUs",
        this.name, total, need.quota.name, need.region
    );
    let each: Vec<String> = need
        .types
        .iter()
        .map(|(t, per_node)| format!("{} of {t} ({per_node} vCPUs each)", this.max_nodes))
        .collect();
    let mut detail = format!("max_nodes {} would be {} vCPUs", each.join(" and "), need.vcpus);
    if !sharing.is_empty() {
        let others: Vec<String> = sharing.iter().map(|(n, v)| format!("{n} {v}")).collect();
        detail.push_str(&format!(
            ", and the other published partitions may hold {} ({}) of the same quota",
            total - need.vcpus,
            others.join(", ")
        ));
    }
    let left = (value - (total - need.vcpus) as f64).max(0.0);
    let largest = need.types.iter().map(|(_, v)| *v).max().unwrap_or(1).max(1);
    let fits = (left / largest as f64).floor() as u64;
    detail.push_str(&format!(
        "; the account's quota {} allows {fits} of them{}. Ask for an increase in Service Quotas, or lower max_nodes. \
         Instances not launched by a cluster published in this region count against it too.",
        need.quota.code,
        if need.types.len() > 1 || !sharing.is_empty() {
            format!(" ({} vCPUs each, in what the quota has left)", largest)
        } else {
            String::new()
        }
    ));
    let diag = if enforce {
        Diagnostic::error(
            summary,
            format!("{detail} (The provider's guardrails set enforce_quotas.)"),
        )
    } else {
        Diagnostic::warning(summary, detail)
    };
    diag.at(AttributePath::root("max_nodes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(t: &str, vcpus: u32) -> InstanceTypeInfo {
        InstanceTypeInfo {
            instance_type: t.into(),
            vcpus,
            ..Default::default()
        }
    }

    #[test]
    fn a_partition_needs_max_nodes_of_every_type_per_quota_and_region() {
        let pool = |region, spot| PlannedPool { region, spot };
        let types = ["p5.48xlarge".to_string(), "g6e.12xlarge".into(), "p4d.24xlarge".into()];
        let pools = [pool(None, false), pool(None, false), pool(Some("us-west-2"), true)];
        let infos = [
            info("p5.48xlarge", 192),
            info("g6e.12xlarge", 48),
            info("p4d.24xlarge", 96),
        ];
        let reach = Reach::planned("gpu", 4, &types, &pools, &infos, "us-east-1");
        let got: Vec<(String, &str, u64, usize)> = needs(&reach)
            .into_iter()
            .map(|n| (n.region, n.quota.code, n.vcpus, n.types.len()))
            .collect();
        // p5 and p4d share the P quota: 4 x 192 + 4 x 96.
        assert_eq!(
            got,
            vec![
                ("us-east-1".into(), "L-417A185B", 1152, 2),
                ("us-east-1".into(), "L-DB2E81BA", 192, 1),
                ("us-west-2".into(), "L-3819A6DF", 192, 1),
                ("us-west-2".into(), "L-7212CCBC", 1152, 2),
            ]
        );
    }
}
