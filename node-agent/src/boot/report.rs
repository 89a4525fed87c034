//! A node's boot report: what the head and login nodes say about their own boot, in the
//! cluster's parameters, where the provider waits on it (and compute and login nodes find the
//! controller by the head's).

use hpc_aws::imds::Identity;
use hpc_aws::Aws;
use hpc_desired_state::boot::{BootReport, Phase};

use crate::host::log;

/// Writes the node's report at each step. A report that cannot be written is logged: the boot
/// goes on, and the provider's wait says it never heard.
pub struct Reporter<'a> {
    aws: &'a Aws,
    /// The command the log lines name (`head-init`).
    command: &'static str,
    param: String,
    report: BootReport,
}

impl<'a> Reporter<'a> {
    pub fn new(aws: &'a Aws, command: &'static str, param: String, identity: &Identity, host: &str) -> Self {
        Reporter {
            aws,
            command,
            param,
            report: BootReport {
                instance_id: identity.instance_id.clone(),
                host: host.to_string(),
                addr: identity.private_ip.clone(),
                phase: Phase::Booting,
                step: String::new(),
                error: None,
                at: 0,
            },
        }
    }

    pub async fn step(&mut self, step: &str, phase: Phase, error: Option<String>) {
        self.report.step = step.to_string();
        self.report.phase = phase;
        self.report.error = error;
        self.report.at = crate::resume::now_s();
        log(self.command, &format!("{step}: {phase:?}"));
        let text = match serde_json::to_string(&self.report) {
            Ok(t) => t,
            Err(e) => return log("report", &format!("cannot encode the report: {e}")),
        };
        if let Err(e) = self.aws.ssm().put(&self.param, &text, &[]).await {
            log("report", &format!("cannot write {}: {e}", self.param));
        }
    }
}
