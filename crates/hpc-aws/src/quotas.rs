//! Service Quotas: the EC2 vCPU quotas an account has per instance class, for capacity
//! planning at plan time. EC2 counts running instances' vCPUs against one quota per class of
//! instance type and market (on-demand or spot).

use aws_sdk_servicequotas::Client;

use crate::error::{AwsError, Result};

/// One EC2 vCPU quota: its Service Quotas code and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VcpuQuota {
    pub code: &'static str,
    pub name: &'static str,
}

const fn quota(code: &'static str, name: &'static str) -> VcpuQuota {
    VcpuQuota { code, name }
}

/// EC2's vCPU quota classes: the instance families of each (the letters before the
/// generation digit), its on-demand quota, and its spot quota (None: the class has no spot).
const CLASSES: &[(&[&str], VcpuQuota, Option<VcpuQuota>)] = &[
    (
        &["g", "gr", "vt"],
        quota("L-DB2E81BA", "Running On-Demand G and VT instances"),
        Some(quota("L-3819A6DF", "All G and VT Spot Instance Requests")),
    ),
    (
        &["p"],
        quota("L-417A185B", "Running On-Demand P instances"),
        Some(quota("L-7212CCBC", "All P Spot Instance Requests")),
    ),
    (
        &["trn"],
        quota("L-2C3B7624", "Running On-Demand Trn instances"),
        Some(quota("L-6B0D517C", "All Trn Spot Instance Requests")),
    ),
    (
        &["inf"],
        quota("L-1945791B", "Running On-Demand Inf instances"),
        Some(quota("L-B5D1601B", "All Inf Spot Instance Requests")),
    ),
    (
        &["dl"],
        quota("L-6E869C2A", "Running On-Demand DL instances"),
        Some(quota("L-85EED4F7", "All DL Spot Instance Requests")),
    ),
    (
        &["f"],
        quota("L-74FC7D96", "Running On-Demand F instances"),
        Some(quota("L-88CF9481", "All F Spot Instance Requests")),
    ),
    (
        &["x"],
        quota("L-7295265B", "Running On-Demand X instances"),
        Some(quota("L-E3A00192", "All X Spot Instance Requests")),
    ),
    (&["hpc"], quota("L-F7808C92", "Running On-Demand HPC instances"), None),
    (
        &["u"],
        quota("L-43DA4232", "Running On-Demand High Memory instances"),
        None,
    ),
];

const STANDARD: VcpuQuota = quota(
    "L-1216C47A",
    "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
);
const STANDARD_SPOT: VcpuQuota = quota(
    "L-34B43A08",
    "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
);

/// The vCPU quota `instance_type` counts against, on-demand or spot; None for a type of no
/// vCPU quota class (mac hosts) and for spot of a class without spot (HPC, high memory).
pub fn vcpu_quota(instance_type: &str, spot: bool) -> Option<VcpuQuota> {
    let family: String = instance_type.chars().take_while(|c| c.is_ascii_lowercase()).collect();
    let (on_demand, on_spot) = match CLASSES
        .iter()
        .find(|(families, _, _)| families.contains(&family.as_str()))
    {
        Some((_, on_demand, on_spot)) => (*on_demand, *on_spot),
        // One or two letters (c, m, r, im, is, ...).
        None if family.len() <= 2 && family.starts_with(['a', 'c', 'd', 'h', 'i', 'm', 'r', 't', 'z']) => {
            (STANDARD, Some(STANDARD_SPOT))
        }
        None => return None,
    };
    if spot {
        on_spot
    } else {
        Some(on_demand)
    }
}

/// Every vCPU quota this knows (for the emulator's and the docs' lists).
pub fn all_vcpu_quotas() -> Vec<VcpuQuota> {
    let mut all = vec![STANDARD, STANDARD_SPOT];
    for (_, on_demand, on_spot) in CLASSES {
        all.push(*on_demand);
        all.extend(*on_spot);
    }
    all
}

#[derive(Clone, Debug)]
pub struct Quotas {
    client: Client,
    region: String,
}

impl Quotas {
    pub fn new(client: Client, region: String) -> Self {
        Quotas { client, region }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The account's value of an EC2 quota in this region: the applied value, else AWS's
    /// default (an account that never asked for an increase has no applied value).
    pub async fn ec2_value(&self, code: &str) -> Result<f64> {
        let ctx = || format!("reading EC2 quota {code} ({})", self.region);
        match self
            .client
            .get_service_quota()
            .service_code("ec2")
            .quota_code(code)
            .send()
            .await
        {
            Ok(out) => out
                .quota()
                .and_then(|q| q.value())
                .ok_or_else(|| AwsError::new(ctx(), None, "the quota has no value")),
            Err(e) => {
                let err = AwsError::from_sdk(ctx(), &e);
                if !err.code_is(&["NoSuchResourceException"]) {
                    return Err(err);
                }
                let out = self
                    .client
                    .get_aws_default_service_quota()
                    .service_code("ec2")
                    .quota_code(code)
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk(ctx(), &e))?;
                out.quota()
                    .and_then(|q| q.value())
                    .ok_or_else(|| AwsError::new(ctx(), None, "the quota has no value"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_types_map_to_their_class_quota() {
        assert_eq!(vcpu_quota("c7i.8xlarge", false).map(|q| q.code), Some("L-1216C47A"));
        assert_eq!(vcpu_quota("im4gn.large", false).map(|q| q.code), Some("L-1216C47A"));
        assert_eq!(vcpu_quota("r7iz.xlarge", true).map(|q| q.code), Some("L-34B43A08"));
        assert_eq!(vcpu_quota("g6e.12xlarge", false).map(|q| q.code), Some("L-DB2E81BA"));
        assert_eq!(vcpu_quota("vt1.3xlarge", true).map(|q| q.code), Some("L-3819A6DF"));
        assert_eq!(vcpu_quota("p5.48xlarge", false).map(|q| q.code), Some("L-417A185B"));
        assert_eq!(vcpu_quota("p4d.24xlarge", true).map(|q| q.code), Some("L-7212CCBC"));
        assert_eq!(vcpu_quota("trn1.32xlarge", false).map(|q| q.code), Some("L-2C3B7624"));
        assert_eq!(vcpu_quota("trn2.48xlarge", true).map(|q| q.code), Some("L-6B0D517C"));
        assert_eq!(vcpu_quota("inf2.xlarge", false).map(|q| q.code), Some("L-1945791B"));
        assert_eq!(vcpu_quota("dl1.24xlarge", false).map(|q| q.code), Some("L-6E869C2A"));
        assert_eq!(vcpu_quota("f1.2xlarge", true).map(|q| q.code), Some("L-88CF9481"));
        assert_eq!(vcpu_quota("x2idn.32xlarge", false).map(|q| q.code), Some("L-7295265B"));
        assert_eq!(vcpu_quota("hpc7g.16xlarge", false).map(|q| q.code), Some("L-F7808C92"));
        assert_eq!(vcpu_quota("u-6tb1.metal", false).map(|q| q.code), Some("L-43DA4232"));
        // No spot for HPC and high memory instances; mac hosts count no vCPUs.
        assert_eq!(vcpu_quota("hpc7g.16xlarge", true), None);
        assert_eq!(vcpu_quota("u-6tb1.metal", true), None);
        assert_eq!(vcpu_quota("mac2.metal", false), None);
    }

    #[test]
    fn every_quota_is_listed_once() {
        let all = all_vcpu_quotas();
        for q in &all {
            assert_eq!(all.iter().filter(|o| o.code == q.code).count(), 1, "{q:?}");
            assert!(q.code.starts_with("L-") && q.code.len() == 10, "{q:?}");
        }
        assert_eq!(all.len(), 18);
    }
}
