//! The cost guardrail at run time: a resume that would take the cluster past its GPU or
//! hourly-cost limit launches only what fits and refuses the rest, with the numbers.

use std::collections::BTreeMap;

use hpc_desired_state::{ClusterDoc, ShapeDoc};

/// What the cluster may still add: GPUs and USD/hour (None: no limit).
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub gpus_left: Option<i64>,
    pub cost_left: Option<f64>,
    max_gpus: Option<u64>,
    max_cost: Option<f64>,
}

fn price(shape: &ShapeDoc) -> Option<f64> {
    shape.hourly_price.as_deref().and_then(|p| p.parse().ok())
}

impl Budget {
    /// The budget left given the instance types of the compute nodes running now.
    pub fn new(cluster: &ClusterDoc, running: &[String], shapes: &BTreeMap<String, ShapeDoc>) -> Budget {
        let gpus_used: i64 = running
            .iter()
            .filter_map(|t| shapes.get(t))
            .map(|s| i64::from(s.gpus))
            .sum();
        let cost_used: f64 = running.iter().filter_map(|t| shapes.get(t)).filter_map(price).sum();
        let fixed: f64 = cluster
            .fixed_hourly_cost
            .as_deref()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0.0);
        let max_cost: Option<f64> = cluster.max_hourly_cost.as_deref().and_then(|c| c.parse().ok());
        Budget {
            gpus_left: cluster
                .max_gpus
                .map(|m| i64::try_from(m).unwrap_or(i64::MAX) - gpus_used),
            cost_left: max_cost.map(|m| m - fixed - cost_used),
            max_gpus: cluster.max_gpus,
            max_cost,
        }
    }

    /// How many of `wanted` nodes of `shape` fit, taking them out of the budget; and, when
    /// some do not fit, why (with the numbers).
    pub fn admit(&mut self, shape: &ShapeDoc, wanted: usize) -> (usize, Option<String>) {
        let mut fit = wanted as i64;
        let mut why = Vec::new();
        if let (Some(left), g) = (self.gpus_left, i64::from(shape.gpus)) {
            if g > 0 && left < fit * g {
                fit = fit.min((left / g).max(0));
                why.push(format!(
                    "max_gpus_per_cluster {}: {} GPU(s) left, {} per {} node",
                    self.max_gpus.unwrap_or(0),
                    left.max(0),
                    g,
                    shape.instance_type
                ));
            }
        }
        if let (Some(left), Some(p)) = (self.cost_left, price(shape)) {
            if p > 0.0 && left < fit as f64 * p - 1e-9 {
                fit = fit.min(((left + 1e-9) / p).floor().max(0.0) as i64);
                why.push(format!(
                    "max_hourly_cost_per_cluster ${:.2}: ${:.2}/h left, ${p:.2}/h per {} node",
                    self.max_cost.unwrap_or(0.0),
                    left.max(0.0),
                    shape.instance_type
                ));
            }
        }
        let fit = fit.max(0);
        if let Some(left) = self.gpus_left.as_mut() {
            *left -= fit * i64::from(shape.gpus);
        }
        if let (Some(left), Some(p)) = (self.cost_left.as_mut(), price(shape)) {
            *left -= fit as f64 * p;
        }
        let fit = usize::try_from(fit).unwrap_or(0);
        let reason =
            (fit < wanted).then(|| format!("{} of {wanted} node(s) refused: {}", wanted - fit, why.join("; ")));
        (fit, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p5() -> ShapeDoc {
        ShapeDoc {
            instance_type: "p5.48xlarge".into(),
            vcpus: 192,
            cores: 96,
            threads_per_core: 2,
            memory_mib: 2_097_152,
            gpus: 8,
            gpu_model: Some("H100".into()),
            gpu_memory_mib: Some(81_920),
            efa: true,
            hourly_price: Some("55.04".into()),
        }
    }

    fn cluster(max_gpus: Option<u64>, max_cost: Option<&str>) -> ClusterDoc {
        ClusterDoc {
            max_gpus,
            max_hourly_cost: max_cost.map(str::to_string),
            fixed_hourly_cost: Some("0.50".into()),
            ..ClusterDoc::default()
        }
    }

    #[test]
    fn gpus_limit_what_launches() {
        let shapes = BTreeMap::from([("p5.48xlarge".to_string(), p5())]);
        let mut b = Budget::new(&cluster(Some(24), None), &["p5.48xlarge".to_string()], &shapes);
        let (fit, why) = b.admit(&p5(), 3);
        assert_eq!(fit, 2);
        let why = why.unwrap_or_default();
        assert!(
            why.contains("1 of 3 node(s) refused") && why.contains("max_gpus_per_cluster 24: 16 GPU(s) left"),
            "{why}"
        );
        assert_eq!(b.admit(&p5(), 1).0, 0, "the budget is spent");
    }

    #[test]
    fn cost_limits_what_launches_and_no_limit_admits_all() {
        let shapes = BTreeMap::new();
        let mut b = Budget::new(&cluster(None, Some("111.00")), &[], &shapes);
        let (fit, why) = b.admit(&p5(), 4);
        assert_eq!(fit, 2, "(111 - 0.50) / 55.04 = 2 nodes");
        assert!(why.unwrap_or_default().contains("$110.50/h left"));
        let mut free = Budget::new(&cluster(None, None), &[], &shapes);
        assert_eq!(free.admit(&p5(), 100), (100, None));
    }
}
