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

const STANDARD: VcpuQuota = VcpuQuota {
    code: "L-1216C47A",
    name: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
};
const GPU: VcpuQuota = VcpuQuota {
    code: "L-DB2E81BA",
    name: "Running On-Demand G and VT instances",
};
const P: VcpuQuota = VcpuQuota {
    code: "L-417A185B",
    name: "Running On-Demand P instances",
};
const STANDARD_SPOT: VcpuQuota = VcpuQuota {
    code: "L-34B43A08",
    name: "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
};
const GPU_SPOT: VcpuQuota = VcpuQuota {
    code: "L-3819A6DF",
    name: "All G and VT Spot Instance Requests",
};
const P_SPOT: VcpuQuota = VcpuQuota {
    code: "L-7212CCBC",
    name: "All P Spot Instance Requests",
};

/// The vCPU quota `instance_type` counts against, on-demand or spot; None for the classes this
/// does not know (X, Inf, Trn, DL, F, HPC, high memory).
pub fn vcpu_quota(instance_type: &str, spot: bool) -> Option<VcpuQuota> {
    let family: String = instance_type.chars().take_while(|c| c.is_ascii_lowercase()).collect();
    let (on_demand, on_spot) = match family.as_str() {
        "g" | "gr" | "vt" => (GPU, GPU_SPOT),
        "p" => (P, P_SPOT),
        // One or two letters (c, m, r, im, is, ...); dl is a class of its own.
        f if f.len() <= 2 && f.starts_with(['a', 'c', 'd', 'h', 'i', 'm', 'r', 't', 'z']) && f != "dl" => {
            (STANDARD, STANDARD_SPOT)
        }
        _ => return None,
    };
    Some(if spot { on_spot } else { on_demand })
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
        for other in [
            "x2idn.32xlarge",
            "trn1.32xlarge",
            "inf2.xlarge",
            "hpc7g.16xlarge",
            "u-6tb1.metal",
            "dl1.24xlarge",
        ] {
            assert_eq!(vcpu_quota(other, false), None, "{other}");
        }
    }
}
