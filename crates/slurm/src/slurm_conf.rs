//! slurm.conf: controller, daemons, scheduling, accounting, power saving, extras, then
//! the partitions (whose lines come from [`crate::partition`]).
//!
//! The version differences are tabled in the crate documentation.

use crate::keys::{classify_cluster_key, KeyClass};
use crate::model::{Accounting, Cluster, SlurmVersion};
use crate::partition::partition_block;
use crate::text::{conf_value, merge_list};

/// `HealthCheckInterval=` when a health check program is set (Slurm's default, 0,
/// would never run it).
pub const DEFAULT_HEALTH_CHECK_INTERVAL_S: u32 = 300;

/// `TreeWidth=` for 22.05: the documented maximum, so slurmctld talks to every cloud node
/// directly (22.05 cannot forward through nodes whose addresses other nodes do not know).
const TREE_WIDTH_22_05: u32 = 65533;

struct Section {
    title: String,
    entries: Vec<(String, String)>,
}

impl Section {
    fn new(title: impl Into<String>) -> Self {
        Section {
            title: title.into(),
            entries: Vec::new(),
        }
    }

    fn set(&mut self, key: &str, value: impl Into<String>) {
        self.entries.push((key.to_string(), value.into()));
    }
}

/// `<dir>/<file>` without a doubled slash.
pub(crate) fn join(dir: &str, file: &str) -> String {
    format!("{}/{file}", dir.trim_end_matches('/'))
}

/// The header every rendered file starts with.
pub(crate) fn header(file: &str, cluster: &Cluster) -> String {
    format!(
        "# {file} for Slurm {}, cluster {:?}.\n\
         # Rendered by hpcforge slurm-model and written by hpc-node: change the Terraform\n\
         # configuration instead of editing this file.\n",
        cluster.version, cluster.name
    )
}

fn any_gpus(c: &Cluster) -> bool {
    c.node_sets().any(|(_, ns)| ns.gres().is_some())
}

/// The always-on nodes of the cluster, as a comma-separated host list.
fn static_nodes(c: &Cluster) -> Option<String> {
    let lists: Vec<String> = c.node_sets().filter_map(|(_, ns)| ns.static_hostlist()).collect();
    (!lists.is_empty()).then(|| lists.join(","))
}

/// `SlurmctldHost`'s value: `<host>` or `<host>(<addr>)`.
fn host_and_addr(host: &str, addr: Option<&str>) -> String {
    match addr {
        Some(addr) => format!("{host}({addr})"),
        None => host.to_string(),
    }
}

fn control(c: &Cluster) -> Section {
    let mut s = Section::new("Controller and authentication");
    s.set("ClusterName", c.name.as_str());
    let host = host_and_addr(&c.controller_host, c.controller_addr.as_deref());
    s.set("SlurmctldHost", host);
    if let Some(backup) = &c.backup_controller {
        s.set("SlurmctldHost", host_and_addr(&backup.host, backup.addr.as_deref()));
    }
    s.set("SlurmUser", c.slurm_user.as_str());
    if let Some((ctld, slurmd)) = c.ports {
        s.set("SlurmctldPort", ctld.to_string());
        s.set("SlurmdPort", slurmd.to_string());
    }
    s.set("AuthType", "auth/munge");
    if let Some(socket) = &c.munge_socket {
        s.set("AuthInfo", format!("socket={socket}"));
    }
    s
}

fn paths(c: &Cluster) -> Section {
    let mut s =
        Section::new("State, spool, pid and log files (%n is the node name, so several slurmd can share a host)");
    s.set("StateSaveLocation", c.state_dir.as_str());
    s.set("SlurmdSpoolDir", join(&c.spool_dir, "%n"));
    s.set("SlurmctldPidFile", join(&c.run_dir, "slurmctld.pid"));
    s.set("SlurmdPidFile", join(&c.run_dir, "slurmd-%n.pid"));
    s.set("SlurmctldLogFile", join(&c.log_dir, "slurmctld.log"));
    s.set("SlurmdLogFile", join(&c.log_dir, "slurmd-%n.log"));
    s
}

fn scheduling(c: &Cluster) -> Section {
    let mut s = Section::new("Scheduling and resources");
    s.set("SchedulerType", "sched/backfill");
    s.set("SelectType", "select/cons_tres");
    s.set("SelectTypeParameters", "CR_Core_Memory");
    if any_gpus(c) {
        s.set("GresTypes", "gpu");
    }
    s.set("ProctrackType", "proctrack/cgroup");
    s.set("TaskPlugin", "task/cgroup,task/affinity");
    // Every job gets an extern step on each of its nodes at allocation: pam_slurm_adopt admits
    // a user to a compute node only into such a step of theirs (and ends it with the job). It
    // needs proctrack/cgroup: a cluster whose `extra` chooses another tracker goes without.
    let proctrack = c
        .extra
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("ProctrackType"))
        .map_or("proctrack/cgroup", |(_, value)| value.as_str());
    if proctrack == "proctrack/cgroup" {
        s.set("PrologFlags", "Contain");
    }
    // Cloud nodes are replaced, not repaired: a node that registers with a valid
    // configuration is a fresh instance, whatever made its predecessor DOWN.
    s.set("ReturnToService", "2");
    s
}

fn accounting(c: &Cluster) -> Section {
    let mut s = Section::new("Accounting");
    match &c.accounting {
        Accounting::None => s.set("AccountingStorageType", "accounting_storage/none"),
        Accounting::Slurmdbd { host, port, .. } => {
            s.set("AccountingStorageType", "accounting_storage/slurmdbd");
            s.set("AccountingStorageHost", host.as_str());
            s.set("AccountingStoragePort", port.to_string());
            if let Some(socket) = &c.munge_socket {
                s.set("AccountingStoragePass", format!("socket={socket}"));
            }
            if any_gpus(c) {
                s.set("AccountingStorageTRES", "gres/gpu");
            }
            s.set("JobAcctGatherType", "jobacct_gather/cgroup");
        }
    }
    s
}

fn health_check(c: &Cluster) -> Option<Section> {
    let program = c.health_check_program.as_ref()?;
    let mut s = Section::new("Node health check");
    s.set("HealthCheckProgram", program.as_str());
    s.set("HealthCheckInterval", DEFAULT_HEALTH_CHECK_INTERVAL_S.to_string());
    Some(s)
}

fn cloud(c: &Cluster) -> Section {
    let ps = &c.power_save;
    let title = match c.version {
        SlurmVersion::V22_05 => "Cloud nodes and power saving",
        SlurmVersion::V24_11 | SlurmVersion::V26_05 => {
            "Cloud nodes and power saving (since 23.02/23.11 Slurm shows cloud nodes, records their \
             addresses and fans out to them by itself)"
        }
    };
    let mut s = Section::new(title);
    s.set("ResumeProgram", ps.resume_program.as_str());
    s.set("SuspendProgram", ps.suspend_program.as_str());
    s.set("ResumeFailProgram", ps.resume_fail_program.as_str());
    s.set("ResumeTimeout", ps.resume_timeout_s.to_string());
    s.set("SuspendTime", ps.suspend_time_s.to_string());
    s.set("SuspendTimeout", ps.suspend_timeout_s.to_string());
    s.set("ResumeRate", ps.resume_rate.to_string());
    s.set("SuspendRate", ps.suspend_rate.to_string());
    if let Some(list) = static_nodes(c) {
        s.set("SuspendExcNodes", list);
    }
    match c.version {
        // enable_configless: compute and login nodes fetch slurm.conf and friends from
        // slurmctld (`slurmd --conf-server`), so a configuration change never touches them.
        SlurmVersion::V22_05 => {
            s.set(
                "SlurmctldParameters",
                "cloud_reg_addrs,idle_on_node_suspend,enable_configless",
            );
            s.set("PrivateData", "cloud");
            s.set("CommunicationParameters", "NoAddrCache");
            s.set("TreeWidth", TREE_WIDTH_22_05.to_string());
        }
        SlurmVersion::V24_11 | SlurmVersion::V26_05 => {
            s.set("SlurmctldParameters", "idle_on_node_suspend,enable_configless")
        }
    }
    s
}

/// Applies `Cluster::extra`: merged keys extend the model's list, known keys replace the
/// model's default or go to the site section.
fn apply_extra(c: &Cluster, sections: &mut [Section], site: &mut Section) {
    for (raw_key, value) in &c.extra {
        let raw_key = raw_key.trim();
        match classify_cluster_key(c.version, raw_key) {
            KeyClass::Merged(key) => {
                let existing = sections
                    .iter_mut()
                    .flat_map(|s| s.entries.iter_mut())
                    .find(|(k, _)| k.eq_ignore_ascii_case(key));
                match existing {
                    Some((_, current)) => {
                        let mut items: Vec<String> = current.split(',').map(str::to_string).collect();
                        merge_list(&mut items, value);
                        *current = items.join(",");
                    }
                    None => {
                        let mut items = Vec::new();
                        merge_list(&mut items, value);
                        site.set(key, items.join(","));
                    }
                }
            }
            KeyClass::Allowed(key) => {
                let existing = sections
                    .iter_mut()
                    .flat_map(|s| s.entries.iter_mut())
                    .find(|(k, _)| k.eq_ignore_ascii_case(key));
                match existing {
                    Some((_, current)) => *current = value.trim().to_string(),
                    None => site.set(key, value.trim()),
                }
            }
            // Only reachable without validation (render_unvalidated): written as given.
            KeyClass::Controlled { .. } | KeyClass::OtherVersion { .. } | KeyClass::Unknown => {
                site.set(raw_key, value.trim())
            }
        }
    }
}

fn write_section(out: &mut String, section: &Section) {
    if section.entries.is_empty() {
        return;
    }
    out.push('\n');
    out.push_str("# ");
    out.push_str(&section.title);
    out.push('\n');
    for (key, value) in &section.entries {
        out.push_str(key);
        out.push('=');
        out.push_str(&conf_value(value));
        out.push('\n');
    }
}

/// Renders slurm.conf without validating.
pub(crate) fn render_slurm_conf(c: &Cluster) -> String {
    let mut sections: Vec<Section> = [
        Some(control(c)),
        Some(paths(c)),
        Some(scheduling(c)),
        Some(accounting(c)),
        health_check(c),
        Some(cloud(c)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut site = Section::new("Site settings (extra)");
    apply_extra(c, &mut sections, &mut site);
    sections.push(site);

    let mut out = header("slurm.conf", c);
    for section in &sections {
        write_section(&mut out, section);
    }
    for partition in &c.partitions {
        out.push_str("\n# Partition ");
        out.push_str(&partition.name);
        out.push('\n');
        out.push_str(&partition_block(c, partition));
    }
    out
}
