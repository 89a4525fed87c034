//! How an instance becomes a node of its cluster: the boot command its user data runs (one
//! rendering, read back by hpc-node's own argument parser in its tests), and the boot reports
//! the provider waits on: the head node's (compute and login nodes also find the controller by
//! it) and each login node's.

use serde::{Deserialize, Serialize};

use crate::cluster_prefix;

/// Where the image installs the agent.
pub const AGENT: &str = "/usr/local/bin/hpc-node";

/// What an instance is to its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Head,
    /// The second slurmctld (`head_node.backup_controller`).
    Backup,
    Login,
    Compute,
}

impl Role {
    /// The hpc-node subcommand that boots this role.
    pub fn command(self) -> &'static str {
        match self {
            Role::Head => "head-init",
            Role::Backup => "backup-init",
            Role::Login => "login-init",
            Role::Compute => "node-init",
        }
    }

    /// Its value of `tag::ROLE` on head and login instances and their launch templates.
    pub fn tag(self) -> &'static str {
        match self {
            Role::Head => "head",
            Role::Backup => "backup",
            Role::Login => "login",
            Role::Compute => "compute",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Role::Head => "head node",
            Role::Backup => "backup controller",
            Role::Login => "login node",
            Role::Compute => "compute node",
        }
    }
}

/// The launch template the provider keeps for a cluster's head or login nodes.
pub fn launch_template_name(cluster: &str, role: Role) -> String {
    format!("hpc-{cluster}-{}", role.tag())
}

/// The command line that boots an instance of `role` (`partition` for compute nodes).
pub fn boot_command(role: Role, cluster: &str, region: &str, partition: Option<&str>) -> String {
    let mut line = format!("{AGENT} {} --cluster {cluster} --region {region}", role.command());
    if let Some(p) = partition {
        line.push_str(&format!(" --partition {p}"));
    }
    line
}

/// The user data of an instance: a shell script that runs `extra` (the user's own boot
/// commands) and then execs the boot command, so cloud-init's console log shows both.
pub fn user_data(role: Role, cluster: &str, region: &str, partition: Option<&str>, extra: Option<&str>) -> String {
    let what = match partition {
        Some(p) => format!("{} of cluster {cluster}, partition {p}", role.describe()),
        None => format!("{} of cluster {cluster}", role.describe()),
    };
    let extra = extra.map(|e| format!("{}\n", e.trim_end())).unwrap_or_default();
    format!(
        "#!/bin/bash\nset -euo pipefail\n# hpcforge {what}\n{extra}exec {}\n",
        boot_command(role, cluster, region, partition)
    )
}

/// The head node's boot report parameter.
pub fn head_param(cluster: &str) -> String {
    format!("{}/head", cluster_prefix(cluster))
}

/// The backup controller's boot report parameter.
pub fn backup_param(cluster: &str) -> String {
    format!("{}/backup", cluster_prefix(cluster))
}

/// A login node's boot report parameter (the provider deletes it with the node).
pub fn login_param(cluster: &str, instance_id: &str) -> String {
    format!("{}/{instance_id}", login_reports_path(cluster))
}

/// The folder of the login nodes' boot reports.
pub fn login_reports_path(cluster: &str) -> String {
    format!("{}/login", cluster_prefix(cluster))
}

/// How far a head or login node's boot got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Boot in progress; `step` says where.
    Booting,
    /// The node serves: slurmctld is up on the published configuration (head), users can log in
    /// and submit (login).
    Ready,
    /// The boot stopped; `error` says why.
    Failed,
}

/// What a head or login node says about its own boot, written at each step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootReport {
    pub instance_id: String,
    /// The node's host name and address (the head's are `SlurmctldHost=<host>(<addr>)`).
    pub host: String,
    pub addr: String,
    pub phase: Phase,
    pub step: String,
    pub error: Option<String>,
    /// Seconds since the Unix epoch.
    pub at: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_runs_the_extra_commands_then_execs_the_boot_command() {
        let ud = user_data(Role::Compute, "c", "us-east-1", Some("gpu"), Some("echo hi\n"));
        assert!(ud.starts_with("#!/bin/bash\nset -euo pipefail\n# hpcforge compute node of cluster c, partition gpu\n"));
        assert!(ud.ends_with(
            "echo hi\nexec /usr/local/bin/hpc-node node-init --cluster c --region us-east-1 --partition gpu\n"
        ));
        let head = user_data(Role::Head, "c", "eu-west-1", None, None);
        assert!(head.ends_with("\nexec /usr/local/bin/hpc-node head-init --cluster c --region eu-west-1\n"));
    }

    #[test]
    fn reports_round_trip() {
        let r = BootReport {
            instance_id: "i-1".into(),
            host: "ip-10-0-0-5".into(),
            addr: "10.0.0.5".into(),
            phase: Phase::Failed,
            step: "munge key".into(),
            error: Some("denied".into()),
            at: 1,
        };
        let json = serde_json::to_string(&r).expect("json");
        assert!(json.contains("\"phase\":\"failed\""));
        assert_eq!(serde_json::from_str::<BootReport>(&json).expect("parse"), r);
    }
}
