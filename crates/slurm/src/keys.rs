//! Which slurm.conf keys `extra` may set, per Slurm version.
//!
//! The lists are the parameters documented in the slurm.conf man page of each version
//! that its parser accepts, split into:
//! - keys the model controls (rejected in `extra`, with the field to use instead),
//! - list-valued keys the model merges with (`SlurmctldParameters`, `PrivateData`,
//!   `CommunicationParameters`, `SuspendExcNodes`): the user's entries are added,
//! - everything else, passed through (replacing the model's default where it has one).
//!
//! Keys are case-insensitive in Slurm; `extra` may spell them any way, the rendered file
//! uses the canonical spelling below.

use crate::model::SlurmVersion;

/// How a key given in `extra` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyClass {
    /// Passed through; replaces the model's default for the key if it renders one.
    Allowed(&'static str),
    /// A comma-separated list the model also writes; the user's items are appended.
    Merged(&'static str),
    /// Set by the model from a field; `by` names the field.
    Controlled { key: &'static str, by: &'static str },
    /// Valid in other supported versions only; `note` says why.
    OtherVersion { key: &'static str, note: &'static str },
    /// Not a parameter of this file.
    Unknown,
}

/// slurm.conf parameters every supported version accepts and the model does not control.
const CLUSTER_COMMON: &[&str] = &[
    "AccountingStorageBackupHost",
    "AccountingStorageEnforce",
    "AccountingStorageExternalHost",
    "AccountingStorageParameters",
    "AccountingStorageTRES",
    "AccountingStoreFlags",
    "AcctGatherEnergyType",
    "AcctGatherFilesystemType",
    "AcctGatherInterconnectType",
    "AcctGatherNodeFreq",
    "AcctGatherProfileType",
    "AllowSpecResourcesUsage",
    "AuthAltParameters",
    "AuthAltTypes",
    "BatchStartTimeout",
    "BcastExclude",
    "BcastParameters",
    "BurstBufferType",
    "CliFilterPlugins",
    "CompleteWait",
    "CpuFreqDef",
    "CpuFreqGovernors",
    "CredType",
    "DebugFlags",
    "DefCPUPerGPU",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "DefMemPerNode",
    "DependencyParameters",
    "DisableRootJobs",
    "EioTimeout",
    "EnforcePartLimits",
    "Epilog",
    "EpilogMsgTime",
    "EpilogSlurmctld",
    "FairShareDampeningFactor",
    "FederationParameters",
    "FirstJobId",
    "GroupUpdateForce",
    "GroupUpdateTime",
    "HealthCheckInterval",
    "HealthCheckNodeState",
    "InactiveLimit",
    "InteractiveStepOptions",
    "JobAcctGatherFrequency",
    "JobAcctGatherParams",
    "JobAcctGatherType",
    "JobCompHost",
    "JobCompLoc",
    "JobCompParams",
    "JobCompPass",
    "JobCompPort",
    "JobCompType",
    "JobCompUser",
    "JobFileAppend",
    "JobRequeue",
    "JobSubmitPlugins",
    "KillOnBadExit",
    "KillWait",
    "LaunchParameters",
    "Licenses",
    "LogTimeFormat",
    "MCSParameters",
    "MCSPlugin",
    "MailDomain",
    "MailProg",
    "MaxArraySize",
    "MaxDBDMsgs",
    "MaxJobCount",
    "MaxJobId",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "MaxNodeCount",
    "MaxStepCount",
    "MaxTasksPerNode",
    "MessageTimeout",
    "MinJobAge",
    "MpiDefault",
    "MpiParams",
    "NodeFeaturesPlugins",
    "OverTimeLimit",
    "PlugStackConfig",
    "PluginDir",
    "PrEpParameters",
    "PrEpPlugins",
    "PreemptExemptTime",
    "PreemptMode",
    "PreemptType",
    "PriorityCalcPeriod",
    "PriorityDecayHalfLife",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityMaxAge",
    "PriorityParameters",
    "PrioritySiteFactorParameters",
    "PrioritySiteFactorPlugin",
    "PriorityType",
    "PriorityUsageResetPeriod",
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityWeightTRES",
    "ProctrackType",
    "Prolog",
    "PrologEpilogTimeout",
    "PrologFlags",
    "PrologSlurmctld",
    "PropagatePrioProcess",
    "PropagateResourceLimits",
    "PropagateResourceLimitsExcept",
    "RebootProgram",
    "ReconfigFlags",
    "RequeueExit",
    "RequeueExitHold",
    "ResvEpilog",
    "ResvOverRun",
    "ResvProlog",
    "ReturnToService",
    "SchedulerParameters",
    "SchedulerTimeSlice",
    "SchedulerType",
    "ScronParameters",
    "SelectTypeParameters",
    "SlurmSchedLogFile",
    "SlurmSchedLogLevel",
    "SlurmctldAddr",
    "SlurmctldDebug",
    "SlurmctldPrimaryOffProg",
    "SlurmctldPrimaryOnProg",
    "SlurmctldSyslogDebug",
    "SlurmctldTimeout",
    "SlurmdDebug",
    "SlurmdParameters",
    "SlurmdSyslogDebug",
    "SlurmdTimeout",
    "SlurmdUser",
    "SrunEpilog",
    "SrunPortRange",
    "SrunProlog",
    "SuspendExcParts",
    "SwitchParameters",
    "SwitchType",
    "TCPTimeout",
    "TaskEpilog",
    "TaskPlugin",
    "TaskPluginParam",
    "TaskProlog",
    "TopologyParam",
    "TopologyPlugin",
    "TrackWCKey",
    "TreeWidth",
    "UnkillableStepProgram",
    "UnkillableStepTimeout",
    "VSizeFactor",
    "WaitTime",
];

/// A parameter only some supported versions have: from `since` (the first supported version
/// that has it) up to, not including, `until`; `note` says when Slurm added or removed it.
#[derive(Debug, Clone, Copy)]
struct Versioned {
    key: &'static str,
    since: Option<SlurmVersion>,
    until: Option<SlurmVersion>,
    note: &'static str,
}

impl Versioned {
    const fn until(key: &'static str, until: SlurmVersion, note: &'static str) -> Versioned {
        Versioned {
            key,
            since: None,
            until: Some(until),
            note,
        }
    }

    const fn since(key: &'static str, since: SlurmVersion, note: &'static str) -> Versioned {
        Versioned {
            key,
            since: Some(since),
            until: None,
            note,
        }
    }

    fn in_version(&self, version: SlurmVersion) -> bool {
        self.since.is_none_or(|s| version >= s) && self.until.is_none_or(|u| version < u)
    }
}

use SlurmVersion::{V24_11, V26_05};

/// slurm.conf parameters that came or went between the supported versions (the slurm.conf man
/// pages of Debian's 22.05.8, 24.11.5 and 26.05.5).
const CLUSTER_VERSIONED: &[Versioned] = &[
    Versioned::until("CoreSpecPlugin", V24_11, "CoreSpecPlugin was removed in Slurm 24.05"),
    Versioned::until(
        "ExtSensorsFreq",
        V24_11,
        "the ExtSensors plugins were deprecated in 23.11 and are defunct in 24.11",
    ),
    Versioned::until(
        "ExtSensorsType",
        V24_11,
        "the ExtSensors plugins were deprecated in 23.11 and are defunct in 24.11",
    ),
    Versioned::until(
        "LaunchType",
        V24_11,
        "LaunchType is no longer a documented parameter in 24.11 (launch/slurm is the only launcher)",
    ),
    Versioned::until(
        "PowerParameters",
        V24_11,
        "the power management plugins are defunct in 24.11",
    ),
    Versioned::until(
        "PowerPlugin",
        V24_11,
        "the power management plugins are defunct in 24.11",
    ),
    Versioned::until(
        "RoutePlugin",
        V24_11,
        "RoutePlugin=route/topology was replaced by TopologyParam=RouteTree in 23.11",
    ),
    Versioned::until(
        "SlurmctldPlugstack",
        V24_11,
        "SlurmctldPlugstack was removed in Slurm 23.02",
    ),
    Versioned::since("HashPlugin", V24_11, "HashPlugin was added after Slurm 22.05"),
    Versioned::since("MaxBatchRequeue", V24_11, "MaxBatchRequeue was added in Slurm 23.02"),
    Versioned::since(
        "PreemptParameters",
        V24_11,
        "PreemptParameters was added in Slurm 23.02 (22.05 keeps these options in SchedulerParameters)",
    ),
    Versioned::since("SuspendExcStates", V24_11, "SuspendExcStates was added in Slurm 23.02"),
    Versioned::until("GetEnvTimeout", V26_05, "GetEnvTimeout was removed in Slurm 25.05"),
    Versioned::until(
        "JobContainerType",
        V26_05,
        "JobContainerType was renamed NamespaceType in Slurm 25.11",
    ),
    Versioned::since(
        "NamespaceType",
        V26_05,
        "NamespaceType was added in Slurm 25.11 (before, JobContainerType)",
    ),
    Versioned::since(
        "PrologTimeout",
        V26_05,
        "PrologTimeout was added in Slurm 25.05 (before, PrologEpilogTimeout)",
    ),
    Versioned::since(
        "EpilogTimeout",
        V26_05,
        "EpilogTimeout was added in Slurm 25.05 (before, PrologEpilogTimeout)",
    ),
    Versioned::since(
        "HealthCheckTimeout",
        V26_05,
        "HealthCheckTimeout was added after Slurm 24.11",
    ),
    Versioned::since(
        "CliFilterParameters",
        V26_05,
        "CliFilterParameters was added after Slurm 24.11",
    ),
    Versioned::since(
        "LicenseParameters",
        V26_05,
        "LicenseParameters was added after Slurm 24.11",
    ),
    Versioned::since("MetricsType", V26_05, "MetricsType was added after Slurm 24.11"),
    Versioned::since("TLSType", V26_05, "TLSType was added after Slurm 24.11"),
    Versioned::since("TLSParameters", V26_05, "TLSParameters was added after Slurm 24.11"),
    Versioned::since("CertmgrType", V26_05, "CertmgrType was added after Slurm 24.11"),
    Versioned::since(
        "CertmgrParameters",
        V26_05,
        "CertmgrParameters was added after Slurm 24.11",
    ),
];

/// List-valued slurm.conf parameters the model writes and the user may add items to.
const CLUSTER_MERGED: &[&str] = &[
    "CommunicationParameters",
    "PrivateData",
    "SlurmctldParameters",
    "SuspendExcNodes",
];

/// slurm.conf parameters the model sets, and the field that sets them.
const CLUSTER_CONTROLLED: &[(&str, &str)] = &[
    ("ClusterName", "name"),
    ("SlurmctldHost", "controller_host and controller_addr"),
    ("ControlMachine", "controller_host"),
    ("ControlAddr", "controller_addr"),
    (
        "BackupController",
        "controller_host (a backup controller is not modelled)",
    ),
    ("BackupAddr", "controller_addr (a backup controller is not modelled)"),
    ("SlurmUser", "slurm_user"),
    ("StateSaveLocation", "state_dir"),
    ("SlurmdSpoolDir", "spool_dir"),
    ("SlurmctldLogFile", "log_dir"),
    ("SlurmdLogFile", "log_dir"),
    ("SlurmctldPidFile", "run_dir"),
    ("SlurmdPidFile", "run_dir"),
    ("SlurmctldPort", "ports"),
    ("SlurmdPort", "ports"),
    ("AuthType", "munge_socket (authentication is always auth/munge)"),
    ("AuthInfo", "munge_socket"),
    ("AccountingStorageType", "accounting"),
    ("AccountingStorageHost", "accounting"),
    ("AccountingStoragePort", "accounting"),
    (
        "AccountingStoragePass",
        "munge_socket (with slurmdbd it names the MUNGE socket)",
    ),
    ("AccountingStorageUser", "accounting"),
    ("ResumeProgram", "power_save.resume_program"),
    ("SuspendProgram", "power_save.suspend_program"),
    ("ResumeFailProgram", "power_save.resume_fail_program"),
    ("ResumeTimeout", "power_save.resume_timeout_s"),
    ("SuspendTime", "power_save.suspend_time_s"),
    ("SuspendTimeout", "power_save.suspend_timeout_s"),
    ("ResumeRate", "power_save.resume_rate"),
    ("SuspendRate", "power_save.suspend_rate"),
    ("HealthCheckProgram", "health_check_program"),
    (
        "SelectType",
        "the model (always select/cons_tres, which GPU scheduling needs)",
    ),
    ("GresTypes", "the node sets (gpu is added when any node set has GPUs)"),
    ("NodeName", "the partitions' node_sets"),
    ("NodeSet", "the partitions' node_sets"),
    ("PartitionName", "partitions"),
    ("DownNodes", "the partitions' node_sets"),
    (
        "FrontendName",
        "the partitions' node_sets (front end nodes are not modelled)",
    ),
    ("Include", "the model (rendered files are self-contained)"),
];

/// Partition parameters every supported version accepts and the model does not control.
const PARTITION_COMMON: &[&str] = &[
    "AllocNodes",
    "Alternate",
    "CpuBind",
    "DefCPUPerGPU",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "DefMemPerNode",
    "DenyAccounts",
    "DenyQos",
    "DisableRootJobs",
    "ExclusiveUser",
    "GraceTime",
    "Hidden",
    "LLN",
    "MaxCPUsPerNode",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "OverTimeLimit",
    "PreemptMode",
    "PriorityJobFactor",
    "QOS",
    "ReqResv",
    "ResumeTimeout",
    "RootOnly",
    "SelectTypeParameters",
    "SuspendTime",
    "SuspendTimeout",
    "TRESBillingWeights",
];

/// Partition parameters that came or went between the supported versions.
const PARTITION_VERSIONED: &[Versioned] = &[
    Versioned::since("ExclusiveTopo", V24_11, "ExclusiveTopo was added in Slurm 24.05"),
    Versioned::since(
        "MaxCPUsPerSocket",
        V24_11,
        "MaxCPUsPerSocket was added after Slurm 22.05",
    ),
    Versioned::since("PowerDownOnIdle", V24_11, "PowerDownOnIdle was added after Slurm 22.05"),
];

/// Partition parameters the model sets, and the field that sets them.
const PARTITION_CONTROLLED: &[(&str, &str)] = &[
    ("PartitionName", "name"),
    ("Nodes", "node_sets"),
    ("MaxTime", "max_time"),
    ("DefaultTime", "default_time"),
    ("MaxNodes", "max_nodes_per_job"),
    ("MinNodes", "min_nodes_per_job"),
    ("AllowAccounts", "allow_accounts"),
    ("AllowGroups", "allow_groups"),
    ("AllowQos", "allow_qos"),
    ("PriorityTier", "priority_tier"),
    (
        "Priority",
        "priority_tier (Priority is the old name; PriorityJobFactor may go in extra)",
    ),
    ("OverSubscribe", "oversubscribe or exclusive"),
    (
        "Shared",
        "oversubscribe or exclusive (Shared is the old name of OverSubscribe)",
    ),
    ("Default", "default"),
    (
        "State",
        "the model (partitions are rendered State=UP; drain with scontrol)",
    ),
];

/// The DefMem* partition keys: at most one, and any of them replaces the derived
/// `DefMemPerCPU`.
pub(crate) const PARTITION_DEF_MEM: &[&str] = &["DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode"];

fn find(list: &[&'static str], key: &str) -> Option<&'static str> {
    list.iter().copied().find(|k| k.eq_ignore_ascii_case(key))
}

fn find_pair(list: &[(&'static str, &'static str)], key: &str) -> Option<(&'static str, &'static str)> {
    list.iter().copied().find(|(k, _)| k.eq_ignore_ascii_case(key))
}

fn find_versioned(list: &[Versioned], key: &str) -> Option<Versioned> {
    list.iter().copied().find(|v| v.key.eq_ignore_ascii_case(key))
}

/// A versioned key: allowed where `version` has it, else named with its note.
fn classify_versioned(list: &[Versioned], version: SlurmVersion, key: &str) -> Option<KeyClass> {
    find_versioned(list, key).map(|v| {
        if v.in_version(version) {
            KeyClass::Allowed(v.key)
        } else {
            KeyClass::OtherVersion {
                key: v.key,
                note: v.note,
            }
        }
    })
}

/// Classifies a slurm.conf key given in `Cluster::extra`.
pub(crate) fn classify_cluster_key(version: SlurmVersion, key: &str) -> KeyClass {
    if let Some((key, by)) = find_pair(CLUSTER_CONTROLLED, key) {
        return KeyClass::Controlled { key, by };
    }
    if let Some(k) = find(CLUSTER_MERGED, key) {
        return KeyClass::Merged(k);
    }
    if let Some(k) = find(CLUSTER_COMMON, key) {
        return KeyClass::Allowed(k);
    }
    classify_versioned(CLUSTER_VERSIONED, version, key).unwrap_or(KeyClass::Unknown)
}

/// Classifies a partition key given in `Partition::extra`.
pub(crate) fn classify_partition_key(version: SlurmVersion, key: &str) -> KeyClass {
    if let Some((key, by)) = find_pair(PARTITION_CONTROLLED, key) {
        return KeyClass::Controlled { key, by };
    }
    if let Some(k) = find(PARTITION_COMMON, key) {
        return KeyClass::Allowed(k);
    }
    classify_versioned(PARTITION_VERSIONED, version, key).unwrap_or(KeyClass::Unknown)
}

fn versioned_keys(list: &[Versioned], version: SlurmVersion) -> impl Iterator<Item = &'static str> + '_ {
    list.iter().filter(move |v| v.in_version(version)).map(|v| v.key)
}

/// The slurm.conf keys `Cluster::extra` accepts for `version` (canonical spelling,
/// sorted): pass-through keys and the list-valued keys the model merges with.
pub fn cluster_extra_keys(version: SlurmVersion) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = CLUSTER_COMMON
        .iter()
        .copied()
        .chain(CLUSTER_MERGED.iter().copied())
        .chain(versioned_keys(CLUSTER_VERSIONED, version))
        .collect();
    keys.sort_unstable_by_key(|k| k.to_ascii_lowercase());
    keys
}

/// The partition keys `Partition::extra` accepts for `version` (canonical spelling,
/// sorted).
pub fn partition_extra_keys(version: SlurmVersion) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = PARTITION_COMMON
        .iter()
        .copied()
        .chain(versioned_keys(PARTITION_VERSIONED, version))
        .collect();
    keys.sort_unstable_by_key(|k| k.to_ascii_lowercase());
    keys
}

/// The slurm.conf keys the model writes itself (canonical spelling).
#[cfg(test)]
pub(crate) fn controlled_cluster_keys() -> impl Iterator<Item = &'static str> {
    CLUSTER_CONTROLLED.iter().map(|(k, _)| *k)
}

/// The partition keys the model writes itself (canonical spelling).
#[cfg(test)]
pub(crate) fn controlled_partition_keys() -> impl Iterator<Item = &'static str> {
    PARTITION_CONTROLLED.iter().map(|(k, _)| *k)
}

/// Option values of merged keys that a version no longer accepts, and why.
pub(crate) fn defunct_list_item(version: SlurmVersion, key: &str, item: &str) -> Option<&'static str> {
    if version < SlurmVersion::V24_11 {
        return None;
    }
    let item = item.trim();
    match key {
        "SlurmctldParameters" if item.eq_ignore_ascii_case("cloud_reg_addrs") => Some(
            "cloud_reg_addrs is defunct since Slurm 23.11 (it is the default behaviour); slurmctld logs an error for it",
        ),
        "PrivateData" if item.eq_ignore_ascii_case("cloud") => {
            Some("PrivateData=cloud has had no effect since Slurm 23.02: cloud nodes are always shown")
        }
        "CommunicationParameters" if item.eq_ignore_ascii_case("NoAddrCache") => {
            Some("NoAddrCache was removed in Slurm 23.11")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_have_no_overlaps_or_duplicates() {
        let mut all: Vec<String> = CLUSTER_COMMON
            .iter()
            .chain(CLUSTER_MERGED)
            .map(|k| k.to_ascii_lowercase())
            .chain(CLUSTER_CONTROLLED.iter().map(|(k, _)| k.to_ascii_lowercase()))
            .chain(CLUSTER_VERSIONED.iter().map(|v| v.key.to_ascii_lowercase()))
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a cluster key is listed twice");

        let mut part: Vec<String> = PARTITION_COMMON
            .iter()
            .map(|k| k.to_ascii_lowercase())
            .chain(PARTITION_CONTROLLED.iter().map(|(k, _)| k.to_ascii_lowercase()))
            .chain(PARTITION_VERSIONED.iter().map(|v| v.key.to_ascii_lowercase()))
            .collect();
        let n = part.len();
        part.sort();
        part.dedup();
        assert_eq!(part.len(), n, "a partition key is listed twice");
    }

    #[test]
    fn keys_are_case_insensitive_and_canonicalised() {
        assert_eq!(
            classify_cluster_key(SlurmVersion::V22_05, "schedulerparameters"),
            KeyClass::Allowed("SchedulerParameters")
        );
        assert_eq!(
            classify_partition_key(SlurmVersion::V24_11, "qos"),
            KeyClass::Allowed("QOS")
        );
    }

    #[test]
    fn version_specific_keys() {
        assert_eq!(
            classify_cluster_key(SlurmVersion::V22_05, "SlurmctldPlugstack"),
            KeyClass::Allowed("SlurmctldPlugstack")
        );
        assert!(matches!(
            classify_cluster_key(SlurmVersion::V24_11, "SlurmctldPlugstack"),
            KeyClass::OtherVersion { .. }
        ));
        assert_eq!(
            classify_cluster_key(SlurmVersion::V24_11, "SuspendExcStates"),
            KeyClass::Allowed("SuspendExcStates")
        );
        assert!(matches!(
            classify_cluster_key(SlurmVersion::V22_05, "SuspendExcStates"),
            KeyClass::OtherVersion { .. }
        ));
        assert!(matches!(
            classify_partition_key(SlurmVersion::V22_05, "PowerDownOnIdle"),
            KeyClass::OtherVersion { .. }
        ));
        assert_eq!(
            classify_partition_key(SlurmVersion::V24_11, "PowerDownOnIdle"),
            KeyClass::Allowed("PowerDownOnIdle")
        );
    }

    #[test]
    fn keys_that_came_or_went_after_24_11() {
        assert_eq!(
            classify_cluster_key(SlurmVersion::V24_11, "JobContainerType"),
            KeyClass::Allowed("JobContainerType")
        );
        match classify_cluster_key(SlurmVersion::V26_05, "jobcontainertype") {
            KeyClass::OtherVersion { key, note } => {
                assert_eq!(key, "JobContainerType");
                assert!(note.contains("NamespaceType"), "{note}");
            }
            other => panic!("JobContainerType on 26.05: {other:?}"),
        }
        assert_eq!(
            classify_cluster_key(SlurmVersion::V26_05, "NamespaceType"),
            KeyClass::Allowed("NamespaceType")
        );
        for old in [SlurmVersion::V22_05, SlurmVersion::V24_11] {
            assert!(matches!(
                classify_cluster_key(old, "NamespaceType"),
                KeyClass::OtherVersion { .. }
            ));
        }
        // What 24.11 added stays in 26.05; what it removed stays out.
        assert_eq!(
            classify_cluster_key(SlurmVersion::V26_05, "SuspendExcStates"),
            KeyClass::Allowed("SuspendExcStates")
        );
        assert!(matches!(
            classify_cluster_key(SlurmVersion::V26_05, "SlurmctldPlugstack"),
            KeyClass::OtherVersion { .. }
        ));
        let keys = cluster_extra_keys(SlurmVersion::V26_05);
        assert!(
            keys.contains(&"PrologTimeout") && !keys.contains(&"GetEnvTimeout"),
            "{keys:?}"
        );
        assert!(partition_extra_keys(SlurmVersion::V26_05).contains(&"PowerDownOnIdle"));
    }

    #[test]
    fn controlled_and_unknown_keys() {
        assert!(matches!(
            classify_cluster_key(SlurmVersion::V22_05, "ResumeProgram"),
            KeyClass::Controlled { .. }
        ));
        assert!(matches!(
            classify_partition_key(SlurmVersion::V22_05, "maxtime"),
            KeyClass::Controlled { .. }
        ));
        assert_eq!(
            classify_cluster_key(SlurmVersion::V22_05, "NoSuchKey"),
            KeyClass::Unknown
        );
        assert_eq!(
            classify_cluster_key(SlurmVersion::V22_05, "FastSchedule"),
            KeyClass::Unknown
        );
        assert_eq!(
            classify_partition_key(SlurmVersion::V22_05, "Features"),
            KeyClass::Unknown
        );
    }

    #[test]
    fn extra_key_listings_are_sorted_and_versioned() {
        let k22 = cluster_extra_keys(SlurmVersion::V22_05);
        let k24 = cluster_extra_keys(SlurmVersion::V24_11);
        assert!(k22.contains(&"SlurmctldPlugstack") && !k24.contains(&"SlurmctldPlugstack"));
        assert!(k24.contains(&"SuspendExcStates") && !k22.contains(&"SuspendExcStates"));
        assert!(k22.contains(&"SlurmctldParameters"));
        let mut sorted = k22.clone();
        sorted.sort_by_key(|k| k.to_ascii_lowercase());
        assert_eq!(sorted, k22);
        assert!(partition_extra_keys(SlurmVersion::V24_11).contains(&"ExclusiveTopo"));
        assert!(!partition_extra_keys(SlurmVersion::V22_05).contains(&"ExclusiveTopo"));
    }

    #[test]
    fn defunct_items_only_matter_for_24_11() {
        assert!(defunct_list_item(SlurmVersion::V24_11, "SlurmctldParameters", "cloud_reg_addrs").is_some());
        assert!(defunct_list_item(SlurmVersion::V22_05, "SlurmctldParameters", "cloud_reg_addrs").is_none());
        assert!(defunct_list_item(SlurmVersion::V24_11, "PrivateData", "Cloud").is_some());
        assert!(defunct_list_item(SlurmVersion::V24_11, "PrivateData", "jobs").is_none());
    }
}
