//! Capacity planning at plan time: a partition's largest shape against the account's EC2 vCPU
//! quota (Service Quotas) in each pool's region. A partition that can never reach `max_nodes`
//! gets a warning with the numbers, or an error under the `enforce_quotas` guardrail.

use std::collections::BTreeMap;

use hpc_aws::ec2::InstanceTypeInfo;
use hpc_aws::quotas::{vcpu_quota, VcpuQuota};
use tfplugin::{AttributePath, Diagnostic, Diagnostics, Value};

use crate::convert::{int, string, strings};
use crate::provider::Clients;

/// The most vCPUs a partition may hold against one quota: `max_nodes` of its largest type of
/// that class.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuotaNeed {
    pub region: String,
    pub quota: VcpuQuota,
    pub vcpus: u64,
    pub instance_type: String,
    pub per_node: u64,
}

/// What the partition needs of each (region, quota); pools sharing one count once (a node is in
/// one pool at a time).
pub(crate) fn needs(planned: &Value, infos: &[InstanceTypeInfo], home_region: &str) -> Vec<QuotaNeed> {
    let max_nodes = int(planned.attr("max_nodes")).unwrap_or(0).max(0) as u64;
    let types = strings(planned.attr("instance_types")).unwrap_or_default();
    let mut needs: BTreeMap<(String, &'static str), QuotaNeed> = BTreeMap::new();
    for pool in planned.attr("capacity_pool").elements() {
        let region = string(pool.attr("region")).unwrap_or_else(|| home_region.to_string());
        let spot = pool.attr("capacity_type").as_str() == Some("spot");
        for t in &types {
            let (Some(info), Some(quota)) = (infos.iter().find(|i| &i.instance_type == t), vcpu_quota(t, spot)) else {
                continue;
            };
            let per_node = u64::from(info.vcpus);
            let need = QuotaNeed {
                region: region.clone(),
                quota,
                vcpus: per_node * max_nodes,
                instance_type: t.clone(),
                per_node,
            };
            let entry = needs
                .entry((region.clone(), quota.code))
                .or_insert_with(|| need.clone());
            if need.vcpus > entry.vcpus {
                *entry = need;
            }
        }
    }
    needs.into_values().collect()
}

/// Each need against the quota's value in its region; a quota that cannot be read is a warning.
pub(crate) async fn quota_checks(clients: &Clients, planned: &Value, infos: &[InstanceTypeInfo]) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let name = string(planned.attr("name")).unwrap_or_default();
    for need in needs(planned, infos, &clients.aws.region) {
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
        if (need.vcpus as f64) <= value {
            continue;
        }
        let fits = (value / need.per_node as f64).floor() as u64;
        let summary = format!(
            "partition {name} may need {} vCPUs of the quota \"{}\" in {}, which is {value} vCPUs",
            need.vcpus, need.quota.name, need.region
        );
        let detail = format!(
            "max_nodes of {} ({} vCPUs each) would be {} vCPUs; the account's quota {} allows {fits} of them. \
             Ask for an increase in Service Quotas, or lower max_nodes.",
            need.instance_type, need.per_node, need.vcpus, need.quota.code
        );
        let diag = if clients.limits.enforce_quotas {
            Diagnostic::error(
                summary,
                format!("{detail} (The provider's guardrails set enforce_quotas.)"),
            )
        } else {
            Diagnostic::warning(summary, detail)
        };
        diags.push(diag.at(AttributePath::root("max_nodes")));
    }
    diags
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert;

    fn info(t: &str, vcpus: u32) -> InstanceTypeInfo {
        InstanceTypeInfo {
            instance_type: t.into(),
            vcpus,
            ..Default::default()
        }
    }

    #[test]
    fn a_partition_needs_its_largest_type_per_quota_and_region() {
        let pool = |region: Option<&str>, kind: &str| {
            let mut v = vec![("capacity_type", Value::string(kind))];
            if let Some(r) = region {
                v.push(("region", Value::string(r)));
            }
            convert::object(v)
        };
        let planned = convert::object(vec![
            ("max_nodes", Value::int(4)),
            (
                "instance_types",
                convert::of_list(Some(&[
                    "p5.48xlarge".to_string(),
                    "g6e.12xlarge".into(),
                    "p4d.24xlarge".into(),
                ])),
            ),
            (
                "capacity_pool",
                Value::List(vec![
                    pool(None, "on_demand"),
                    pool(None, "on_demand"),
                    pool(Some("us-west-2"), "spot"),
                ]),
            ),
        ]);
        let infos = [
            info("p5.48xlarge", 192),
            info("g6e.12xlarge", 48),
            info("p4d.24xlarge", 96),
        ];
        let got: Vec<(String, &str, u64, String)> = needs(&planned, &infos, "us-east-1")
            .into_iter()
            .map(|n| (n.region, n.quota.code, n.vcpus, n.instance_type))
            .collect();
        assert_eq!(
            got,
            vec![
                ("us-east-1".into(), "L-417A185B", 768, "p5.48xlarge".into()),
                ("us-east-1".into(), "L-DB2E81BA", 192, "g6e.12xlarge".into()),
                ("us-west-2".into(), "L-3819A6DF", 192, "g6e.12xlarge".into()),
                ("us-west-2".into(), "L-7212CCBC", 768, "p5.48xlarge".into()),
            ]
        );
    }
}
