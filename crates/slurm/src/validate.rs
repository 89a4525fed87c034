//! Every rule a cluster must pass before it is rendered. Each problem becomes one
//! [`ModelError`] naming the attribute and what to do.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::error::ModelError;
use crate::hostlist::digits;
use crate::keys::{classify_cluster_key, classify_partition_key, defunct_list_item, KeyClass, PARTITION_DEF_MEM};
use crate::model::{
    Accounting, BackupController, Cluster, InstanceShape, NodeSet, Partition, PartitionSettings, SlurmVersion, Storage,
};
use crate::node::{gpu_type_name, os_memory_allowance_mib};
use crate::text::unsafe_value;
use crate::time::TimeLimit;

/// Slurm's default ports, used when `Cluster::ports` is `None`.
const DEFAULT_SLURMCTLD_PORT: u16 = 6817;
const DEFAULT_SLURMD_PORT: u16 = 6818;
/// Longest host name label (RFC 1035).
const MAX_LABEL: usize = 63;
/// ClusterName limit: MySQL/MariaDB table names built from it.
const MAX_CLUSTER_NAME: usize = 40;
/// Most nodes a 22.05 cluster can have: its TreeWidth limit, since 22.05 cannot forward
/// messages through cloud nodes.
const MAX_NODES_22_05: u32 = 65533;
/// Largest `OverSubscribe=YES:n` / `FORCE:n` count (Slurm keeps a flag in bit 15).
const MAX_OVERSUBSCRIBE: u32 = 0x7fff;

/// Checks a cluster and returns every problem found (empty when it can be rendered).
pub fn validate(cluster: &Cluster) -> Vec<ModelError> {
    let mut v = Validator { errors: Vec::new() };
    v.cluster(cluster);
    v.errors
}

struct Validator {
    errors: Vec<ModelError>,
}

fn path<const N: usize>(base: &[String], tail: [&str; N]) -> Vec<String> {
    base.iter().cloned().chain(tail.iter().map(|s| s.to_string())).collect()
}

/// A partition's path element: its name, or `#<index>` when the name is empty.
fn label(name: &str, index: usize) -> String {
    if name.trim().is_empty() {
        format!("#{index}")
    } else {
        name.to_string()
    }
}

fn is_hostname_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LABEL
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_hostname(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_hostname_label)
}

fn is_host_or_ip(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok() || is_hostname(s)
}

/// Node features, GRES types, account/group/QOS names: no separators Slurm uses.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn is_unix_user(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && s.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// Parses `OverSubscribe=`: `NO`, `YES[:n]` (n >= 2), `FORCE[:n]` (n >= 1), `EXCLUSIVE`.
fn check_oversubscribe(value: &str) -> Result<(), String> {
    let upper = value.trim().to_ascii_uppercase();
    let (mode, count) = match upper.split_once(':') {
        Some((mode, count)) => (mode, Some(count)),
        None => (upper.as_str(), None),
    };
    let min = match mode {
        "NO" | "EXCLUSIVE" if count.is_none() => return Ok(()),
        "YES" => 2,
        "FORCE" => 1,
        _ => {
            return Err(format!(
                "{value:?} is not NO, YES, YES:<n>, FORCE, FORCE:<n> or EXCLUSIVE"
            ))
        }
    };
    match count {
        None => Ok(()),
        Some(n) => match n.parse::<u32>() {
            Ok(v) if n.chars().all(|c| c.is_ascii_digit()) && (min..=MAX_OVERSUBSCRIBE).contains(&v) => Ok(()),
            _ => Err(format!(
                "the job count in {value:?} must be a number from {min} to {MAX_OVERSUBSCRIBE} \
                 (Slurm treats YES:1 as NO)"
            )),
        },
    }
}

impl Validator {
    fn err(&mut self, path: Vec<String>, summary: impl Into<String>, detail: impl Into<String>) {
        self.errors.push(ModelError {
            path,
            summary: summary.into(),
            detail: detail.into(),
        });
    }

    fn backup_controller(&mut self, base: &[String], c: &Cluster, backup: &BackupController) {
        if !is_hostname(&backup.host) || backup.host == c.controller_host {
            self.err(
                path(base, ["backup_controller", "host"]),
                "invalid backup controller host name",
                format!(
                    "{:?} must be a short host name (letters, digits and '-') other than the \
                     controller's ({:?}).",
                    backup.host, c.controller_host
                ),
            );
        }
        if let Some(addr) = backup.addr.as_ref().filter(|a| !is_host_or_ip(a)) {
            self.err(
                path(base, ["backup_controller", "addr"]),
                "invalid backup controller address",
                format!("{addr:?} is neither an IP address nor a host name."),
            );
        }
    }

    fn cluster(&mut self, c: &Cluster) {
        let base = vec!["cluster".to_string()];
        self.cluster_name(&c.name);
        if !is_hostname(&c.controller_host) {
            self.err(
                path(&base, ["controller_host"]),
                "invalid controller host name",
                format!(
                    "{:?} is not a host name. SlurmctldHost takes the controller's short host name \
                     (what `hostname -s` prints): letters, digits and '-'.",
                    c.controller_host
                ),
            );
        }
        if let Some(addr) = &c.controller_addr {
            if !is_host_or_ip(addr) {
                self.err(
                    path(&base, ["controller_addr"]),
                    "invalid controller address",
                    format!("{addr:?} is neither an IP address nor a host name."),
                );
            }
        }
        if let Some(backup) = &c.backup_controller {
            self.backup_controller(&base, c, backup);
        }
        if !is_unix_user(&c.slurm_user) {
            self.err(
                path(&base, ["slurm_user"]),
                "invalid Slurm user",
                format!(
                    "{:?} is not a Unix user name: lowercase letters, digits, '_' and '-', starting \
                     with a letter or '_', at most 32 characters.",
                    c.slurm_user
                ),
            );
        }
        for (field, value) in [
            ("state_dir", &c.state_dir),
            ("spool_dir", &c.spool_dir),
            ("log_dir", &c.log_dir),
            ("run_dir", &c.run_dir),
        ] {
            self.abs_path(path(&base, [field]), value);
        }
        if let Some(socket) = &c.munge_socket {
            self.abs_path(path(&base, ["munge_socket"]), socket);
        }
        if let Some(program) = &c.health_check_program {
            self.abs_path(path(&base, ["health_check_program"]), program);
        }
        self.ports(c);
        self.accounting(c);
        self.power_save(c);
        self.cluster_extra(c);
        self.partitions(c);
    }

    fn cluster_name(&mut self, name: &str) {
        let p = vec!["cluster".to_string(), "name".to_string()];
        let valid_chars = name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
        if name.is_empty() {
            self.err(
                p,
                "cluster name is empty",
                "Set a cluster name: lowercase letters, digits, '-' and '_'.",
            );
        } else if name.len() > MAX_CLUSTER_NAME {
            self.err(
                p,
                "cluster name is too long",
                format!(
                    "{name:?} has {} characters; Slurm allows at most {MAX_CLUSTER_NAME} because slurmdbd \
                     builds MySQL table names from it.",
                    name.len()
                ),
            );
        } else if !valid_chars || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            self.err(
                p,
                "invalid cluster name",
                format!(
                    "{name:?} must start with a lowercase letter and contain only lowercase letters, \
                     digits, '-' and '_' (slurmdbd lowercases cluster names, so uppercase would not \
                     round-trip)."
                ),
            );
        }
    }

    fn abs_path(&mut self, p: Vec<String>, value: &str) {
        let problem = if !value.starts_with('/') {
            Some("must be an absolute path".to_string())
        } else if value.chars().any(char::is_whitespace) {
            Some("must not contain whitespace".to_string())
        } else if value.contains('%') {
            Some("must not contain '%' (Slurm substitutes %n, %h and others in some paths)".to_string())
        } else {
            unsafe_value(value).map(str::to_string)
        };
        if let Some(problem) = problem {
            self.err(p, "invalid path", format!("{value:?} {problem}."));
        }
    }

    fn ports(&mut self, c: &Cluster) {
        let (ctld, slurmd) = c.ports.unwrap_or((DEFAULT_SLURMCTLD_PORT, DEFAULT_SLURMD_PORT));
        let p = vec!["cluster".to_string(), "ports".to_string()];
        if ctld == 0 || slurmd == 0 {
            self.err(
                p.clone(),
                "port 0 is not usable",
                "SlurmctldPort and SlurmdPort must be from 1 to 65535.",
            );
        } else if ctld == slurmd {
            self.err(
                p.clone(),
                "SlurmctldPort and SlurmdPort are the same",
                format!("Both are {ctld}; slurmctld and slurmd need different ports."),
            );
        }
        if let Accounting::Slurmdbd { host, port, .. } = &c.accounting {
            if host.eq_ignore_ascii_case(&c.controller_host) && (*port == ctld || *port == slurmd) {
                self.err(
                    vec!["accounting".to_string(), "port".to_string()],
                    "slurmdbd port clashes with a Slurm daemon port",
                    format!(
                        "slurmdbd runs on the controller host {host:?} with port {port}, which slurmctld \
                         ({ctld}) or slurmd ({slurmd}) already uses. Slurm's default slurmdbd port is 6819."
                    ),
                );
            }
        }
    }

    fn accounting(&mut self, c: &Cluster) {
        let Accounting::Slurmdbd { host, port, storage } = &c.accounting else {
            return;
        };
        let base = vec!["accounting".to_string()];
        if !is_host_or_ip(host) {
            self.err(
                path(&base, ["host"]),
                "invalid slurmdbd host",
                format!("{host:?} is neither a host name nor an IP address."),
            );
        }
        if *port == 0 {
            self.err(
                path(&base, ["port"]),
                "invalid slurmdbd port",
                "The slurmdbd port must be from 1 to 65535 (Slurm's default is 6819).",
            );
        }
        if let Storage::External {
            host,
            port,
            user,
            database,
        } = storage
        {
            let base = path(&base, ["storage"]);
            if !is_host_or_ip(host) {
                self.err(
                    path(&base, ["host"]),
                    "invalid database host",
                    format!("{host:?} is neither a host name nor an IP address."),
                );
            }
            if *port == 0 {
                self.err(
                    path(&base, ["port"]),
                    "invalid database port",
                    "The database port must be from 1 to 65535 (MySQL's default is 3306).",
                );
            }
            if user.is_empty()
                || user.len() > 80
                || !user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
            {
                self.err(
                    path(&base, ["user"]),
                    "invalid database user",
                    format!("{user:?} must be 1 to 80 letters, digits, '_', '-', '.' or '@'."),
                );
            }
            if database.is_empty()
                || database.len() > 64
                || !database.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                self.err(
                    path(&base, ["database"]),
                    "invalid database name",
                    format!("{database:?} must be 1 to 64 letters, digits or '_'."),
                );
            }
        }
    }

    fn power_save(&mut self, c: &Cluster) {
        let ps = &c.power_save;
        let base = vec!["power_save".to_string()];
        for (field, program) in [
            ("resume_program", &ps.resume_program),
            ("suspend_program", &ps.suspend_program),
            ("resume_fail_program", &ps.resume_fail_program),
        ] {
            self.abs_path(path(&base, [field]), program);
        }
        for (field, key, value) in [
            ("resume_timeout_s", "ResumeTimeout", ps.resume_timeout_s),
            ("suspend_timeout_s", "SuspendTimeout", ps.suspend_timeout_s),
        ] {
            if value == 0 || value > u32::from(u16::MAX) {
                self.err(
                    path(&base, [field]),
                    format!("{key} out of range"),
                    format!("{key} is {value} s; Slurm accepts 1 to 65535 seconds."),
                );
            }
        }
        if ps.suspend_time_s == 0 {
            self.err(
                path(&base, ["suspend_time_s"]),
                "SuspendTime must be positive",
                "SuspendTime is the idle time in seconds before a node is powered down; 0 would \
                 terminate nodes as soon as they finish a job. Use at least 60.",
            );
        }
        for (field, key, value) in [
            ("resume_rate", "ResumeRate", ps.resume_rate),
            ("suspend_rate", "SuspendRate", ps.suspend_rate),
        ] {
            if value > u32::from(u16::MAX) {
                self.err(
                    path(&base, [field]),
                    format!("{key} out of range"),
                    format!("{key} is {value} nodes per minute; Slurm accepts 0 (unlimited) to 65535."),
                );
            }
        }
    }

    fn extra_value(&mut self, p: &[String], key: &str, value: &str) -> bool {
        if let Some(problem) = unsafe_value(value) {
            self.err(
                path(p, ["extra", key]),
                format!("invalid value for {key}"),
                format!("{problem}."),
            );
            return false;
        }
        true
    }

    fn cluster_extra(&mut self, c: &Cluster) {
        let base = vec!["cluster".to_string()];
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for (raw_key, value) in &c.extra {
            let key = raw_key.trim();
            let p = path(&base, ["extra", key]);
            if let Some(previous) = seen.insert(key.to_ascii_lowercase(), key) {
                self.err(
                    p.clone(),
                    format!("{key} is given twice"),
                    format!("{previous:?} and {key:?} are the same Slurm key; keep one."),
                );
            }
            match classify_cluster_key(c.version, key) {
                KeyClass::Allowed(_) => {
                    self.extra_value(&base, key, value);
                }
                KeyClass::Merged(canonical) => {
                    if self.extra_value(&base, key, value) {
                        for item in value.split(',') {
                            if let Some(note) = defunct_list_item(c.version, canonical, item) {
                                self.err(
                                    p.clone(),
                                    format!("{canonical}={} is not valid for Slurm {}", item.trim(), c.version),
                                    format!("{note}. Remove it from extra."),
                                );
                            }
                        }
                    }
                }
                KeyClass::Controlled { key, by } => self.err(
                    p,
                    format!("{key} is set by the model"),
                    format!("extra cannot override {key}; set it through {by}."),
                ),
                KeyClass::OtherVersion { key, note } => self.err(
                    p,
                    format!("{key} is not a Slurm {} parameter", c.version),
                    format!("{note}. Remove it from extra or choose another Slurm version."),
                ),
                KeyClass::Unknown => self.err(
                    p,
                    format!("unknown slurm.conf parameter {key:?}"),
                    format!(
                        "{key:?} is not a slurm.conf parameter of Slurm {} that extra may set. Check the \
                         spelling against slurm.conf(5); node and partition parameters belong in the \
                         partitions, not in the cluster's extra.",
                        c.version
                    ),
                ),
            }
        }
    }

    fn partitions(&mut self, c: &Cluster) {
        if c.partitions.is_empty() {
            self.err(
                vec!["cluster".to_string(), "partitions".to_string()],
                "the cluster has no partitions",
                "Add at least one partition with at least one node set; Slurm needs nodes to schedule on.",
            );
        }
        let total: u64 = c.node_sets().map(|(_, ns)| u64::from(ns.max_nodes)).sum();
        if c.version == SlurmVersion::V22_05 && total > u64::from(MAX_NODES_22_05) {
            self.err(
                vec!["cluster".to_string(), "partitions".to_string()],
                "too many nodes for Slurm 22.05",
                format!(
                    "The partitions define {total} nodes. Slurm 22.05 must reach every cloud node directly \
                     (TreeWidth at most {MAX_NODES_22_05}); use Slurm 24.11, which fans out through cloud \
                     nodes, or fewer nodes."
                ),
            );
        }
        let mut names: BTreeMap<String, &str> = BTreeMap::new();
        let mut default: Option<&str> = None;
        let mut node_sets: BTreeMap<&str, &str> = BTreeMap::new();
        for (i, p) in c.partitions.iter().enumerate() {
            let base = vec!["partition".to_string(), label(&p.name, i)];
            if let Some(first) = names.insert(p.name.to_ascii_lowercase(), &p.name) {
                self.err(
                    path(&base, ["name"]),
                    "duplicate partition name",
                    format!("Partitions {first:?} and {:?} have the same name (Slurm users would not be able to tell them apart); rename one.", p.name),
                );
            }
            if p.settings.default {
                if let Some(first) = default {
                    self.err(
                        path(&base, ["default"]),
                        "two default partitions",
                        format!("{first:?} is already the default partition; only one partition can be Default=YES."),
                    );
                } else {
                    default = Some(&p.name);
                }
            }
            for ns in &p.node_sets {
                if let Some(other) = node_sets.insert(ns.name.as_str(), p.name.as_str()) {
                    self.err(
                        path(&base, ["node_set", &ns.name, "name"]),
                        "duplicate node set name",
                        format!(
                            "Partition {other:?} already has a node set named {:?}, so both would define the \
                             same nodes ({}). Node set names are unique across the cluster.",
                            ns.name,
                            ns.hostlist()
                        ),
                    );
                }
            }
            self.partition(c, p, &base);
        }
    }

    fn partition(&mut self, c: &Cluster, p: &Partition, base: &[String]) {
        self.partition_name(&p.name, base);
        if p.node_sets.is_empty() {
            self.err(
                path(base, ["node_sets"]),
                "the partition has no node sets",
                format!(
                    "Partition {:?} needs at least one node set; Slurm rejects a partition without nodes.",
                    p.name
                ),
            );
        }
        for (i, ns) in p.node_sets.iter().enumerate() {
            let ns_base = path(base, ["node_set", &label(&ns.name, i)]);
            self.node_set(ns, &ns_base);
        }
        let s = &p.settings;
        self.time_limits(s, base);
        let nodes: u64 = p.node_sets.iter().map(|ns| u64::from(ns.max_nodes)).sum();
        self.nodes_per_job(s, (!p.node_sets.is_empty()).then_some(nodes), &p.name, base);
        self.access_lists(s, base);
        self.priority_and_sharing(s, base);
        self.partition_extra(c, p, base);
    }

    fn partition_name(&mut self, name: &str, base: &[String]) {
        if name.is_empty() {
            self.err(
                path(base, ["name"]),
                "partition name is empty",
                "Name the partition; users pass the name to `sbatch -p`.",
            );
        } else if name.eq_ignore_ascii_case("DEFAULT") {
            self.err(
                path(base, ["name"]),
                "reserved partition name",
                "PartitionName=DEFAULT sets defaults for other partitions in Slurm; choose another name.",
            );
        } else if name.len() > MAX_LABEL || !name.starts_with(|ch: char| ch.is_ascii_alphanumeric()) || !is_token(name)
        {
            self.err(
                path(base, ["name"]),
                "invalid partition name",
                format!(
                    "{name:?} must be 1 to {MAX_LABEL} letters, digits, '_', '.' or '-', starting with a letter \
                     or digit (commas separate partitions in `sbatch -p a,b`)."
                ),
            );
        }
    }

    fn time_limits(&mut self, s: &PartitionSettings, base: &[String]) {
        let max_time = self.time_limit(base, "max_time", "MaxTime", s.max_time.as_deref());
        let default_time = self.time_limit(base, "default_time", "DefaultTime", s.default_time.as_deref());
        if let (Some(max), Some(default)) = (max_time, default_time) {
            if default > max {
                self.err(
                    path(base, ["default_time"]),
                    "default_time exceeds max_time",
                    format!("DefaultTime ({default}) is longer than MaxTime ({max}); jobs without a time limit would be rejected. Lower default_time or raise max_time."),
                );
            }
        }
    }

    /// `MaxNodes=` and `MinNodes=` against each other and the partition's `nodes` (when it has
    /// node sets).
    fn nodes_per_job(&mut self, s: &PartitionSettings, nodes: Option<u64>, name: &str, base: &[String]) {
        if s.max_nodes_per_job == Some(0) {
            self.err(
                path(base, ["max_nodes_per_job"]),
                "max_nodes_per_job is 0",
                "MaxNodes=0 would let no job run; leave it unset for no limit.",
            );
        }
        let Some(min) = s.min_nodes_per_job else {
            return;
        };
        if let Some(max) = s.max_nodes_per_job.filter(|max| min > *max) {
            self.err(
                path(base, ["min_nodes_per_job"]),
                "min_nodes_per_job exceeds max_nodes_per_job",
                format!("MinNodes ({min}) is larger than MaxNodes ({max}); no job could satisfy both."),
            );
        }
        if let Some(total) = nodes.filter(|total| u64::from(min) > *total) {
            self.err(
                path(base, ["min_nodes_per_job"]),
                "min_nodes_per_job exceeds the partition's size",
                format!("MinNodes ({min}) is larger than the {total} nodes of partition {name:?}; no job could run."),
            );
        }
    }

    fn access_lists(&mut self, s: &PartitionSettings, base: &[String]) {
        for (field, items) in [
            ("allow_accounts", &s.allow_accounts),
            ("allow_groups", &s.allow_groups),
            ("allow_qos", &s.allow_qos),
        ] {
            for item in items {
                if !is_token(item.trim()) {
                    self.err(
                        path(base, [field]),
                        format!("invalid entry in {field}"),
                        format!("{item:?} must be letters, digits, '_', '.' or '-' (entries are joined with commas)."),
                    );
                }
            }
        }
    }

    fn priority_and_sharing(&mut self, s: &PartitionSettings, base: &[String]) {
        if let Some(tier) = s.priority_tier.filter(|tier| *tier > 65533) {
            self.err(
                path(base, ["priority_tier"]),
                "priority_tier out of range",
                format!("PriorityTier is {tier}; Slurm accepts 0 to 65533."),
            );
        }
        let Some(o) = &s.oversubscribe else {
            return;
        };
        if s.exclusive {
            self.err(
                path(base, ["oversubscribe"]),
                "oversubscribe conflicts with exclusive",
                format!("exclusive renders OverSubscribe=EXCLUSIVE; drop oversubscribe ({o:?}) or exclusive."),
            );
        } else if let Err(problem) = check_oversubscribe(o) {
            self.err(
                path(base, ["oversubscribe"]),
                "invalid oversubscribe",
                format!("{problem}."),
            );
        }
    }

    fn time_limit(&mut self, base: &[String], field: &str, key: &str, value: Option<&str>) -> Option<TimeLimit> {
        let value = value?;
        match TimeLimit::parse(value) {
            Ok(t) => Some(t),
            Err(problem) => {
                self.err(
                    path(base, [field]),
                    format!("invalid {field}"),
                    format!(
                        "{key}={value:?}: {problem}. Use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, \
                         D-HH:MM:SS, UNLIMITED or INFINITE."
                    ),
                );
                None
            }
        }
    }

    fn partition_extra(&mut self, c: &Cluster, p: &Partition, base: &[String]) {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        let mut def_mem: Vec<&str> = Vec::new();
        for (raw_key, value) in &p.settings.extra {
            let key = raw_key.trim();
            let pth = path(base, ["extra", key]);
            if let Some(previous) = seen.insert(key.to_ascii_lowercase(), key) {
                self.err(
                    pth.clone(),
                    format!("{key} is given twice"),
                    format!("{previous:?} and {key:?} are the same Slurm key; keep one."),
                );
            }
            match classify_partition_key(c.version, key) {
                KeyClass::Allowed(canonical) | KeyClass::Merged(canonical) => {
                    self.extra_value(base, key, value);
                    if PARTITION_DEF_MEM.contains(&canonical) {
                        def_mem.push(canonical);
                    }
                    if canonical == "DenyAccounts" && !p.settings.allow_accounts.is_empty() {
                        self.err(
                            pth,
                            "DenyAccounts conflicts with allow_accounts",
                            "Slurm ignores DenyAccounts when AllowAccounts is set; use one of them.",
                        );
                    } else if canonical == "DenyQos" && !p.settings.allow_qos.is_empty() {
                        self.err(
                            pth,
                            "DenyQos conflicts with allow_qos",
                            "Slurm ignores DenyQos when AllowQos is set; use one of them.",
                        );
                    }
                }
                KeyClass::Controlled { key, by } => self.err(
                    pth,
                    format!("{key} is set by the model"),
                    format!("extra cannot override {key}; set it through the partition's {by}."),
                ),
                KeyClass::OtherVersion { key, note } => self.err(
                    pth,
                    format!("{key} is not a Slurm {} partition parameter", c.version),
                    format!("{note}. Remove it from extra or choose another Slurm version."),
                ),
                KeyClass::Unknown => self.err(
                    pth,
                    format!("unknown partition parameter {key:?}"),
                    format!(
                        "{key:?} is not a partition parameter of Slurm {} that extra may set. Check the \
                         spelling against the PARTITION CONFIGURATION section of slurm.conf(5).",
                        c.version
                    ),
                ),
            }
        }
        if def_mem.len() > 1 {
            self.err(
                path(base, ["extra"]),
                "conflicting default memory settings",
                format!("{} are mutually exclusive in Slurm; keep one.", def_mem.join(", ")),
            );
        }
    }

    fn node_set(&mut self, ns: &NodeSet, base: &[String]) {
        let name = &ns.name;
        let name_ok = is_hostname_label(name)
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.chars().any(|c| c.is_ascii_uppercase());
        if !name_ok {
            self.err(
                path(base, ["name"]),
                "invalid node set name",
                format!(
                    "{name:?} must be a lowercase host name label: letters, digits and '-', starting with a \
                     letter and not ending with '-'. Nodes are named <name>-<n>."
                ),
            );
        } else {
            let longest = name.len() + 1 + digits(ns.max_nodes);
            if longest > MAX_LABEL {
                self.err(
                    path(base, ["name"]),
                    "node names would be too long",
                    format!(
                        "The last node, {name}-{}, has {longest} characters; host names allow {MAX_LABEL}. \
                         Shorten the node set name.",
                        ns.max_nodes
                    ),
                );
            }
        }
        if ns.max_nodes == 0 {
            self.err(
                path(base, ["max_nodes"]),
                "max_nodes is 0",
                "A node set needs at least one node; remove the node set instead.",
            );
        }
        if ns.static_nodes > ns.max_nodes {
            self.err(
                path(base, ["static_nodes"]),
                "static_nodes exceeds max_nodes",
                format!(
                    "{} always-on nodes cannot fit in a node set of {} nodes.",
                    ns.static_nodes, ns.max_nodes
                ),
            );
        }
        for feature in &ns.features {
            if !is_token(feature) {
                self.err(
                    path(base, ["features"]),
                    "invalid node feature",
                    format!(
                        "{feature:?} must be letters, digits, '_', '.' or '-': Slurm uses other characters \
                         ('&', '|', ',', '*', '[', ']', ':') as operators in --constraint."
                    ),
                );
            } else if feature == "efa" && !ns.shape.efa {
                self.err(
                    path(base, ["features"]),
                    "feature efa on an instance type without EFA",
                    format!(
                        "The efa feature is derived from the instance type, and {} has no EFA; jobs asking for \
                         --constraint=efa would land on nodes without it.",
                        ns.shape.instance_type
                    ),
                );
            }
        }
        if ns.weight == Some(u32::MAX) {
            self.err(
                path(base, ["weight"]),
                "weight out of range",
                format!("Weight must be below {}; Slurm reserves that value.", u32::MAX),
            );
        }
        self.shape(&ns.shape, &path(base, ["shape"]));
    }

    fn shape(&mut self, s: &InstanceShape, base: &[String]) {
        if !is_token(&s.instance_type) {
            self.err(
                path(base, ["instance_type"]),
                "invalid instance type",
                format!(
                    "{:?} is not an EC2 instance type name (it becomes a node feature).",
                    s.instance_type
                ),
            );
        }
        self.cpu_topology(s, base);
        let allowance = os_memory_allowance_mib(s.memory_mib);
        if s.memory_mib <= allowance {
            self.err(
                path(base, ["memory_mib"]),
                "instance type too small",
                format!(
                    "{} has {} MiB; the OS allowance is {allowance} MiB (512 MiB + 5 %), which leaves nothing for jobs.",
                    s.instance_type, s.memory_mib
                ),
            );
        }
        self.gpus(s, base);
    }

    /// vCPUs, sockets, cores and threads: none 0, and the product of the three the vCPUs.
    fn cpu_topology(&mut self, s: &InstanceShape, base: &[String]) {
        let mut counts_ok = true;
        for (field, value) in [
            ("vcpus", s.vcpus),
            ("sockets", s.sockets),
            ("cores_per_socket", s.cores_per_socket),
            ("threads_per_core", s.threads_per_core),
        ] {
            if value == 0 {
                counts_ok = false;
                self.err(
                    path(base, [field]),
                    format!("{field} is 0"),
                    format!("{} reports no {field}; every node needs at least one.", s.instance_type),
                );
            }
        }
        if counts_ok {
            let product = u64::from(s.sockets) * u64::from(s.cores_per_socket) * u64::from(s.threads_per_core);
            if product != u64::from(s.vcpus) {
                self.err(
                    path(base, ["vcpus"]),
                    "CPU topology does not add up",
                    format!(
                        "{}: sockets ({}) x cores_per_socket ({}) x threads_per_core ({}) = {product}, but vcpus is {}. \
                         Slurm rejects a node whose CPUs do not match its topology.",
                        s.instance_type, s.sockets, s.cores_per_socket, s.threads_per_core, s.vcpus
                    ),
                );
            }
        }
    }

    /// A GPU model exactly when there are GPUs, and a count a node can have.
    fn gpus(&mut self, s: &InstanceShape, base: &[String]) {
        match (s.gpus, s.gpu_model.as_deref()) {
            (0, Some(model)) => self.err(
                path(base, ["gpu_model"]),
                "gpu_model without GPUs",
                format!("gpu_model is {model:?} but gpus is 0; set gpus or drop gpu_model."),
            ),
            (n, None) if n > 0 => self.err(
                path(base, ["gpu_model"]),
                "GPUs without a model",
                format!(
                    "{} has {n} GPUs but no gpu_model; Slurm needs a GPU type for Gres=gpu:<type>:{n} and \
                     gres.conf (e.g. \"H100\" from DescribeInstanceTypes GpuInfo).",
                    s.instance_type
                ),
            ),
            (n, Some(model)) if n > 0 && gpu_type_name(model).is_empty() => self.err(
                path(base, ["gpu_model"]),
                "invalid GPU model",
                format!("{model:?} has no letters or digits to name a GRES type."),
            ),
            _ => {}
        }
        if s.gpus > 1024 {
            self.err(
                path(base, ["gpus"]),
                "too many GPUs",
                format!(
                    "{} GPUs per node; Slurm allows at most 1024 device files per node.",
                    s.gpus
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversubscribe_values() {
        for ok in ["NO", "no", "YES", "YES:2", "yes:32767", "FORCE", "FORCE:1", "EXCLUSIVE"] {
            assert!(check_oversubscribe(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "MAYBE",
            "YES:1",
            "YES:0",
            "FORCE:0",
            "YES:x",
            "FORCE:32768",
            "NO:2",
            "EXCLUSIVE:1",
            "YES:",
        ] {
            assert!(check_oversubscribe(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_names() {
        assert!(is_hostname("head-1.ec2.internal"));
        assert!(is_host_or_ip("10.0.0.1"));
        assert!(is_host_or_ip("fd00::1"));
        assert!(!is_hostname("bad_host"));
        assert!(!is_hostname("-x"));
        assert!(!is_hostname(""));
    }

    #[test]
    fn unix_users() {
        assert!(is_unix_user("slurm"));
        assert!(is_unix_user("_slurm-1"));
        assert!(!is_unix_user("Slurm"));
        assert!(!is_unix_user("1slurm"));
        assert!(!is_unix_user(""));
    }
}
