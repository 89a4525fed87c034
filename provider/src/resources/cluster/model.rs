//! The typed model of an `hpc_cluster` value (configuration, plan or state), read with the
//! schema's defaults, and its two maps: to the published cluster document and back (import).

use std::collections::BTreeMap;

use tfplugin::model::{Field, Model, ModelError};
use tfplugin::{Number, Value};

use crate::desired_state::{
    self, AccountingDoc, BackupControllerDoc, ClusterDoc, HeadNodeDoc, MountDoc, UserDoc, SCHEMA,
};

tfplugin::model! {
    /// An `hpc_cluster`: every attribute and block of its schema.
    #[derive(Debug, Clone)]
    pub struct Cluster {
        pub id: Option<String>,
        pub name: String,
        pub subnet_id: String,
        pub security_group_id: Option<String>,
        pub wait_for_ready: bool,
        pub tags: Option<BTreeMap<String, String>>,
        pub tags_all: Option<BTreeMap<String, String>>,
        pub vpc_id: Option<String>,
        pub head_node_instance_id: Option<String>,
        pub head_node_private_ip: Option<String>,
        pub head_node_network_interface_id: Option<String>,
        pub state_volume_id: Option<String>,
        pub backup_controller_instance_id: Option<String>,
        pub backup_controller_private_ip: Option<String>,
        pub backup_controller_network_interface_id: Option<String>,
        pub controller_state_file_system_id: Option<String>,
        pub home_file_system_id: Option<String>,
        pub login_node_ids: Option<Vec<String>>,
        pub login_node_private_ips: Option<Vec<String>>,
        pub security_group_ids: Option<Vec<String>>,
        pub munge_key_secret_arn: Option<String>,
        pub desired_state_parameter: Option<String>,
        pub desired_state_version: Option<i64>,
        pub slurm_conf: Option<String>,
        pub instance_profile_policy: Option<String>,
        pub estimated_hourly_cost: Option<Number>,
        pub head_node: HeadNode,
        pub slurm: Slurm,
        pub accounting: Accounting,
        pub login_nodes: LoginNodes,
        pub user: Vec<User>,
        pub mfa: Option<Mfa>,
        pub home: Home,
        pub storage: Vec<Storage>,
        pub timeouts: Value,
    }
}

tfplugin::model! {
    /// The `head_node` block. Sizes stay `i64` so that the plan checks, not the reader, word
    /// the refusal of an impossible size.
    #[derive(Debug, Clone)]
    pub struct HeadNode {
        pub ami_id: String,
        pub instance_type: String,
        pub root_volume_size: i64,
        pub root_volume_type: String,
        pub root_volume_encrypted: bool,
        pub key_name: Option<String>,
        pub allowed_ssh_cidrs: Option<Vec<String>>,
        pub instance_profile_arn: Option<String>,
        pub node_role_arns: Option<Vec<String>>,
        pub state_volume_size: i64,
        pub backup_controller: bool,
        pub state_volume_on_delete: String,
        pub state_snapshot_id: Option<String>,
    }
}

tfplugin::model! {
    /// The part of `head_node` a cost depends on, known before the rest of the block may be:
    /// its type, and whether a backup controller of that type runs beside it.
    #[derive(Debug, Clone)]
    pub struct InstanceType {
        pub instance_type: String,
        pub backup_controller: bool,
    }
}

tfplugin::model! {
    /// The `slurm` block.
    #[derive(Debug, Clone)]
    pub struct Slurm {
        pub version: String,
        pub scaledown_idletime: String,
        pub resume_timeout: String,
        pub extra: Option<BTreeMap<String, String>>,
    }
}

tfplugin::model! {
    /// The `accounting` block (`password` is write-only: configuration only).
    #[derive(Debug, Clone)]
    pub struct Accounting {
        pub mode: String,
        pub host: Option<String>,
        pub port: Option<i64>,
        pub user: Option<String>,
        pub database: Option<String>,
        pub password_secret_arn: Option<String>,
        pub password: Option<String>,
        pub password_version: Option<i64>,
    }
}

tfplugin::model! {
    /// The `login_nodes` block.
    #[derive(Debug, Clone)]
    pub struct LoginNodes {
        pub count: i64,
        pub instance_type: String,
    }
}

tfplugin::model! {
    /// One `user` block.
    #[derive(Debug, Clone)]
    pub struct User {
        pub name: String,
        pub uid: i64,
        pub gid: Option<i64>,
        pub ssh_public_keys: Option<Vec<String>>,
        pub sudo: bool,
        pub accounts: Option<Vec<String>>,
    }
}

tfplugin::model! {
    /// The `mfa` block.
    #[derive(Debug, Clone)]
    pub struct Mfa {
        pub pam_module: String,
        pub config: Option<String>,
        pub settings_file: Option<String>,
        pub settings_secret_arn: Option<String>,
    }
}

tfplugin::model! {
    /// The `home` block.
    #[derive(Debug, Clone)]
    pub struct Home {
        pub storage: String,
        pub efs_id: Option<String>,
        pub on_delete: String,
    }
}

tfplugin::model! {
    /// One `storage` block.
    #[derive(Debug, Clone)]
    pub struct Storage {
        pub lustre_id: Option<String>,
        pub dns_name: Option<String>,
        pub mount_name: Option<String>,
        pub mount_point: String,
    }
}

impl Cluster {
    /// Reads a configuration, plan or state value with the schema's defaults filled in.
    pub fn of(v: &Value) -> Result<Cluster, ModelError> {
        Cluster::from_value(&super::schema().block.with_defaults(v))
    }

    /// The value of this model, blocks that say only their defaults left out.
    pub fn value(&self) -> Value {
        let block = super::schema().block;
        block.without_defaults(&self.write(&block.ty()))
    }
}

impl Cluster {
    /// [`Cluster::of`] for apply, where a value that cannot be read stops it with that error.
    pub fn read(v: &Value) -> Result<Cluster, tfplugin::Diagnostics> {
        Cluster::of(v).map_err(|e| e.into_diagnostics("The cluster cannot be read"))
    }
}

/// Reads the view `T` of a value with the schema's defaults filled in: for a plan whose other
/// parts are not known yet.
pub fn view<T: Model>(v: &Value) -> Result<T, ModelError> {
    T::from_value(&super::schema().block.with_defaults(v))
}

tfplugin::model! {
    /// What the fixed hourly cost depends on: the head's type and the login nodes.
    #[derive(Debug, Clone)]
    pub struct FixedNodes {
        pub head_node: InstanceType,
        pub login_nodes: LoginNodes,
    }
}

tfplugin::model! {
    /// The login nodes alone.
    #[derive(Debug, Clone)]
    pub struct Logins {
        pub login_nodes: LoginNodes,
    }
}

tfplugin::model! {
    /// The head node's settings a new instance is launched for.
    #[derive(Debug, Clone)]
    pub struct HeadSettings {
        pub head_node: HeadInstance,
    }
}

tfplugin::model! {
    /// The users, each once known whole.
    #[derive(Debug, Clone)]
    pub struct Users {
        pub user: Field<Vec<Field<User>>>,
    }
}

/// A duration attribute's seconds, or `default` when it does not parse (the plan checks
/// refuse such a value before anything is published).
fn secs(text: &str, default: u32) -> u32 {
    tfplugin::timeouts::parse_duration(text)
        .ok()
        .and_then(|d| u32::try_from(d.as_secs()).ok())
        .unwrap_or(default)
}

impl User {
    /// The user as the agent reads it.
    pub fn doc(&self) -> UserDoc {
        let uid = u32::try_from(self.uid).unwrap_or(0);
        UserDoc {
            name: self.name.clone(),
            uid,
            gid: self.gid.and_then(|g| u32::try_from(g).ok()).unwrap_or(uid),
            ssh_public_keys: self.ssh_public_keys.clone().unwrap_or_default(),
            sudo: self.sudo,
            accounts: self.accounts.clone().unwrap_or_default(),
        }
    }

    fn of_doc(u: &UserDoc) -> User {
        User {
            name: u.name.clone(),
            uid: i64::from(u.uid),
            gid: (u.gid != u.uid).then_some(i64::from(u.gid)),
            ssh_public_keys: non_empty(&u.ssh_public_keys),
            sudo: u.sudo,
            accounts: non_empty(&u.accounts),
        }
    }
}

fn non_empty(l: &[String]) -> Option<Vec<String>> {
    (!l.is_empty()).then(|| l.to_vec())
}

/// Where the document's secrets come from: the munge key's and the accounting password's
/// secrets, which the provider made (the user's own password secret is in the model).
pub struct Secrets<'a> {
    pub region: &'a str,
    pub munge_arn: &'a str,
    pub password_arn: Option<String>,
}

impl Secrets<'static> {
    /// For a document that is only rendered (slurm.conf at validation), never published.
    pub fn none() -> Self {
        Secrets {
            region: "",
            munge_arn: "",
            password_arn: None,
        }
    }
}

impl Cluster {
    /// The cluster's published document (users whole; `publish` moves them to shards).
    pub fn doc(&self, secrets: Secrets) -> ClusterDoc {
        let (s, a, h) = (&self.slurm, &self.accounting, &self.head_node);
        ClusterDoc {
            schema: SCHEMA,
            name: self.name.clone(),
            region: secrets.region.to_string(),
            slurm_version: s.version.clone(),
            scaledown_idletime_s: secs(&s.scaledown_idletime, super::DEFAULT_SCALEDOWN_IDLETIME_S),
            resume_timeout_s: secs(&s.resume_timeout, super::DEFAULT_RESUME_TIMEOUT_S),
            accounting: AccountingDoc {
                mode: a.mode.clone(),
                host: a.host.clone(),
                port: a.port.and_then(|p| u16::try_from(p).ok()),
                user: a.user.clone(),
                database: a.database.clone(),
                password_secret_arn: secrets.password_arn.or_else(|| a.password_secret_arn.clone()),
            },
            munge_key_secret_arn: secrets.munge_arn.to_string(),
            security_group_ids: self.security_group_ids.clone().unwrap_or_default(),
            adopted_security_group: self.security_group_id.clone(),
            vpc_id: self.vpc_id.clone().unwrap_or_default(),
            extra: s.extra.clone().unwrap_or_default(),
            users: self.user.iter().map(User::doc).collect(),
            // Filled in when publishing: the users go to their shards.
            user_shards: 0,
            users_digest: None,
            mfa_pam_module: self.mfa.as_ref().map(|m| m.pam_module.clone()),
            mfa_config: self.mfa.as_ref().and_then(|m| m.config.clone()),
            mfa_settings_file: self.mfa.as_ref().and_then(|m| m.settings_file.clone()),
            mfa_settings_secret_arn: self.mfa.as_ref().and_then(|m| m.settings_secret_arn.clone()),
            home: self.home.storage.clone(),
            home_efs_id: self.home.efs_id.clone().or_else(|| self.home_file_system_id.clone()),
            home_efs_managed: self.home.efs_id.is_none(),
            subnet_id: self.subnet_id.clone(),
            head_node: HeadNodeDoc {
                ami_id: h.ami_id.clone(),
                instance_type: h.instance_type.clone(),
                root_volume_size: h.root_volume_size,
                root_volume_type: h.root_volume_type.clone(),
                root_volume_encrypted: h.root_volume_encrypted,
                key_name: h.key_name.clone(),
                allowed_ssh_cidrs: h.allowed_ssh_cidrs.clone().unwrap_or_default(),
                instance_profile_arn: h.instance_profile_arn.clone(),
                node_role_arns: h.node_role_arns.clone().unwrap_or_default(),
                state_volume_size: h.state_volume_size,
                state_volume_id: self.state_volume_id.clone(),
                backup_controller: h.backup_controller.then(|| BackupControllerDoc {
                    address: self.backup_controller_private_ip.clone(),
                    state_efs_id: self.controller_state_file_system_id.clone(),
                }),
            },
            login_count: u32::try_from(self.login_nodes.count).unwrap_or(0),
            login_instance_type: self.login_nodes.instance_type.clone(),
            tags: self.tags_all.clone().unwrap_or_default(),
            mounts: self.storage.iter().map(Storage::doc).collect(),
            max_hourly_cost: None,
            max_gpus: None,
            fixed_hourly_cost: None,
        }
    }

    /// The configuration a published document stands for (import): what the provider computes
    /// (addresses, instances, cost) is the caller's to fill in. `external_password` is the
    /// user's own password secret, if any (not the one the provider keeps).
    pub fn of_doc(doc: &ClusterDoc, version: i64, user_tags: Option<BTreeMap<String, String>>) -> Cluster {
        let h = &doc.head_node;
        Cluster {
            id: Some(doc.name.clone()),
            name: doc.name.clone(),
            subnet_id: doc.subnet_id.clone(),
            security_group_id: doc.adopted_security_group.clone(),
            wait_for_ready: true,
            tags: user_tags,
            tags_all: Some(doc.tags.clone()),
            vpc_id: Some(doc.vpc_id.clone()),
            head_node_instance_id: None,
            head_node_private_ip: None,
            head_node_network_interface_id: None,
            state_volume_id: h.state_volume_id.clone(),
            backup_controller_instance_id: None,
            backup_controller_private_ip: h.backup_controller.as_ref().and_then(|b| b.address.clone()),
            backup_controller_network_interface_id: None,
            controller_state_file_system_id: h.backup_controller.as_ref().and_then(|b| b.state_efs_id.clone()),
            home_file_system_id: doc.home_efs_id.clone(),
            login_node_ids: None,
            login_node_private_ips: None,
            security_group_ids: Some(doc.security_group_ids.clone()),
            munge_key_secret_arn: Some(doc.munge_key_secret_arn.clone()),
            desired_state_parameter: Some(desired_state::cluster_param(&doc.name)),
            desired_state_version: Some(version),
            slurm_conf: None,
            instance_profile_policy: None,
            estimated_hourly_cost: None,
            head_node: HeadNode::of_doc(doc),
            slurm: Slurm::of_doc(doc),
            accounting: Accounting::of_doc(doc),
            login_nodes: LoginNodes {
                count: i64::from(doc.login_count),
                instance_type: doc.login_instance_type.clone(),
            },
            user: doc.users.iter().map(User::of_doc).collect(),
            mfa: doc.mfa_pam_module.as_ref().map(|m| Mfa {
                pam_module: m.clone(),
                config: doc.mfa_config.clone(),
                settings_file: doc.mfa_settings_file.clone(),
                settings_secret_arn: doc.mfa_settings_secret_arn.clone(),
            }),
            home: Home {
                storage: doc.home.clone(),
                efs_id: if doc.home_efs_managed {
                    None
                } else {
                    doc.home_efs_id.clone()
                },
                // Not published: an import takes the defaults.
                on_delete: super::deletion::RETAIN.into(),
            },
            storage: doc.mounts.iter().map(Storage::of_doc).collect(),
            timeouts: Value::Null,
        }
    }
}

impl HeadNode {
    fn of_doc(doc: &ClusterDoc) -> HeadNode {
        let h = &doc.head_node;
        HeadNode {
            ami_id: h.ami_id.clone(),
            instance_type: h.instance_type.clone(),
            root_volume_size: h.root_volume_size,
            root_volume_type: h.root_volume_type.clone(),
            root_volume_encrypted: h.root_volume_encrypted,
            key_name: h.key_name.clone(),
            allowed_ssh_cidrs: non_empty(&h.allowed_ssh_cidrs),
            instance_profile_arn: h.instance_profile_arn.clone(),
            node_role_arns: non_empty(&h.node_role_arns),
            // Documents from before the state volume say 0: theirs is the default size.
            state_volume_size: if h.state_volume_size > 0 {
                h.state_volume_size
            } else {
                super::DEFAULT_STATE_VOLUME_GIB
            },
            backup_controller: h.backup_controller.is_some(),
            // Not published: an import takes the default.
            state_volume_on_delete: super::deletion::SNAPSHOT.into(),
            state_snapshot_id: None,
        }
    }
}

impl Slurm {
    fn of_doc(doc: &ClusterDoc) -> Slurm {
        Slurm {
            version: doc.slurm_version.clone(),
            scaledown_idletime: desired_state::duration_text(doc.scaledown_idletime_s),
            resume_timeout: desired_state::duration_text(doc.resume_timeout_s),
            extra: (!doc.extra.is_empty()).then(|| doc.extra.clone()),
        }
    }
}

impl Accounting {
    /// The password comes back only as the user's own secret (a write-only one is not read).
    fn of_doc(doc: &ClusterDoc) -> Accounting {
        let a = &doc.accounting;
        Accounting {
            mode: a.mode.clone(),
            host: a.host.clone(),
            port: a.port.map(i64::from),
            user: a.user.clone(),
            database: a.database.clone(),
            password_secret_arn: super::external_password_secret(doc),
            password: None,
            password_version: None,
        }
    }
}

impl Storage {
    fn doc(&self) -> MountDoc {
        MountDoc {
            lustre_id: self.lustre_id.clone(),
            dns_name: self.dns_name.clone(),
            mount_name: self.mount_name.clone(),
            mount_point: self.mount_point.clone(),
        }
    }

    fn of_doc(m: &MountDoc) -> Storage {
        Storage {
            lustre_id: m.lustre_id.clone(),
            dns_name: m.dns_name.clone(),
            mount_name: m.mount_name.clone(),
            mount_point: m.mount_point.clone(),
        }
    }
}

tfplugin::model! {
    /// The attributes of an `hpc_cluster` its validation and plan read, as a configuration, plan
    /// or state carries them: unset, known only at apply, or known.
    #[derive(Debug, Clone, Default)]
    pub struct ClusterConfig {
        pub name: Field<String>,
        pub head_node_instance_id: Field<String>,
        pub head_node_network_interface_id: Field<String>,
        pub state_volume_id: Field<String>,
        pub backup_controller_instance_id: Field<String>,
        pub login_node_ids: Field<Vec<String>>,
        pub home_file_system_id: Field<String>,
        pub subnet_id: Field<String>,
        pub tags: Field<BTreeMap<String, String>>,
        pub head_node: Field<HeadConfig>,
        pub login_nodes: Field<LoginConfig>,
        pub slurm: Field<SlurmConfig>,
        pub accounting: Field<AccountingConfig>,
        pub mfa: Field<MfaConfig>,
        pub home: Field<HomeConfig>,
        pub user: Field<Vec<UserConfig>>,
        pub storage: Field<Vec<StorageConfig>>,
    }
}

impl ClusterConfig {
    /// The head node's block, once known.
    pub fn head(&self) -> Option<&HeadConfig> {
        self.head_node.known()
    }

    /// `slurm.version`, once known.
    pub fn slurm_version(&self) -> Option<&str> {
        self.slurm.known().and_then(|s| s.version.as_str())
    }

    /// A plan's prior state (null for a create: every attribute unset) or planned value.
    pub fn of_state(v: &Value) -> Result<ClusterConfig, ModelError> {
        if v.is_null() {
            return Ok(ClusterConfig::default());
        }
        ClusterConfig::from_value(v)
    }
}

tfplugin::model! {
    /// What the provider computes for a cluster: the ids and addresses apply makes, the
    /// published version and the rendered slurm.conf. Unknown in a plan until they are made,
    /// null where there is none. Apply and refresh change them through [`record`].
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Computed {
        pub id: Field<String>,
        pub desired_state_parameter: Field<String>,
        pub instance_profile_policy: Field<String>,
        pub estimated_hourly_cost: Field<Number>,
        pub vpc_id: Field<String>,
        pub security_group_ids: Field<Vec<String>>,
        pub munge_key_secret_arn: Field<String>,
        pub head_node_network_interface_id: Field<String>,
        pub state_volume_id: Field<String>,
        pub head_node_instance_id: Field<String>,
        pub head_node_private_ip: Field<String>,
        pub backup_controller_instance_id: Field<String>,
        pub backup_controller_private_ip: Field<String>,
        pub backup_controller_network_interface_id: Field<String>,
        pub controller_state_file_system_id: Field<String>,
        pub home_file_system_id: Field<String>,
        pub login_node_ids: Field<Vec<String>>,
        pub login_node_private_ips: Field<Vec<String>>,
        pub desired_state_version: Field<i64>,
        pub slurm_conf: Field<String>,
    }
}

impl Computed {
    /// The computed attributes of a plan or state.
    pub fn of(v: &Value) -> Result<Computed, tfplugin::Diagnostics> {
        Computed::from_value(v).map_err(|e| e.into_diagnostics("The cluster's computed attributes cannot be read"))
    }
}

/// Changes the computed attributes of the plan or state `v` through [`Computed`]; its other
/// attributes stay as they are.
pub fn record(v: &mut Value, change: impl FnOnce(&mut Computed)) -> Result<(), tfplugin::Diagnostics> {
    tfplugin::model::change(v, &super::schema().block.ty(), change)
        .map_err(|e| e.into_diagnostics("The cluster's computed attributes cannot be read"))
}

/// A known value, for a [`Computed`] field.
pub fn known<T: Clone>(t: &T) -> Field<T> {
    Field::Known(t.clone())
}

tfplugin::model! {
    /// The head node's settings a change of which needs a new instance (in place: the same
    /// cluster, address and state). SSH networks change the security group instead.
    #[derive(Debug, Clone, PartialEq)]
    pub struct HeadInstance {
        pub ami_id: Field<String>,
        pub instance_type: Field<String>,
        pub root_volume_size: Field<i64>,
        pub root_volume_type: Field<String>,
        pub root_volume_encrypted: Field<bool>,
        pub key_name: Field<String>,
        pub instance_profile_arn: Field<String>,
    }
}

tfplugin::model! {
    /// The `head_node` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct HeadConfig {
        pub ami_id: Field<String>,
        pub instance_type: Field<String>,
        pub key_name: Field<String>,
        pub root_volume_size: Field<i64>,
        pub root_volume_type: Field<String>,
        pub root_volume_encrypted: Field<bool>,
        pub instance_profile_arn: Field<String>,
        pub node_role_arns: Field<Vec<String>>,
        pub allowed_ssh_cidrs: Field<Vec<String>>,
        pub state_volume_size: Field<i64>,
        pub backup_controller: Field<bool>,
        pub state_volume_on_delete: Field<String>,
        pub state_snapshot_id: Field<String>,
    }
}

tfplugin::model! {
    /// The `login_nodes` block, as validation and plan read it.
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct LoginConfig {
        pub count: Field<i64>,
        pub instance_type: Field<String>,
    }
}

tfplugin::model! {
    /// The `slurm` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct SlurmConfig {
        pub version: Field<String>,
        pub scaledown_idletime: Field<String>,
        pub resume_timeout: Field<String>,
    }
}

tfplugin::model! {
    /// The `accounting` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct AccountingConfig {
        pub mode: Field<String>,
        pub host: Field<String>,
        pub port: Field<i64>,
        pub password: Field<String>,
        pub password_secret_arn: Field<String>,
        pub password_version: Field<Value>,
    }
}

tfplugin::model! {
    /// The `mfa` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct MfaConfig {
        pub pam_module: Field<String>,
        pub config: Field<String>,
        pub settings_file: Field<String>,
        pub settings_secret_arn: Field<String>,
    }
}

tfplugin::model! {
    /// The `home` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct HomeConfig {
        pub storage: Field<String>,
        pub efs_id: Field<String>,
        pub on_delete: Field<String>,
    }
}

tfplugin::model! {
    /// One `user` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct UserConfig {
        pub name: Field<String>,
        pub uid: Field<i64>,
        pub gid: Field<i64>,
        pub ssh_public_keys: Field<Vec<Field<String>>>,
        pub accounts: Field<Vec<Field<String>>>,
    }
}

tfplugin::model! {
    /// One `storage` block, as validation and plan read it.
    #[derive(Debug, Clone, Default)]
    pub struct StorageConfig {
        pub dns_name: Field<String>,
        pub mount_name: Field<String>,
        pub mount_point: Field<String>,
    }
}

#[cfg(test)]
mod schema_tests {
    use super::*;
    use tfplugin::model::{fields_outside_schema, schema_mismatches};
    use tfplugin::Block;

    fn block(name: &str) -> Block {
        let schema = super::super::schema::schema();
        schema
            .block
            .blocks
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.block.clone())
            .unwrap_or_else(|| panic!("the schema has no block {name}"))
    }

    #[test]
    fn every_model_reads_exactly_its_blocks_attributes() {
        let mismatches = [
            (
                "hpc_cluster",
                schema_mismatches::<Cluster>(&super::super::schema::schema().block),
            ),
            ("head_node", schema_mismatches::<HeadNode>(&block("head_node"))),
            ("slurm", schema_mismatches::<Slurm>(&block("slurm"))),
            ("accounting", schema_mismatches::<Accounting>(&block("accounting"))),
            ("login_nodes", schema_mismatches::<LoginNodes>(&block("login_nodes"))),
            ("user", schema_mismatches::<User>(&block("user"))),
            ("mfa", schema_mismatches::<Mfa>(&block("mfa"))),
            ("home", schema_mismatches::<Home>(&block("home"))),
            ("storage", schema_mismatches::<Storage>(&block("storage"))),
        ];
        let wrong: Vec<String> = mismatches
            .into_iter()
            .flat_map(|(at, list)| list.into_iter().map(move |m| format!("{at}: {m}")))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
        // The partial views read only attributes their blocks have.
        let partial = [
            ("head_node", fields_outside_schema::<InstanceType>(&block("head_node"))),
            (
                "hpc_cluster",
                fields_outside_schema::<ClusterConfig>(&super::super::schema::schema().block),
            ),
            ("head_node", fields_outside_schema::<HeadConfig>(&block("head_node"))),
            ("head_node", fields_outside_schema::<HeadInstance>(&block("head_node"))),
            (
                "hpc_cluster",
                fields_outside_schema::<FixedNodes>(&super::super::schema::schema().block),
            ),
            (
                "hpc_cluster",
                fields_outside_schema::<Logins>(&super::super::schema::schema().block),
            ),
            (
                "hpc_cluster",
                fields_outside_schema::<HeadSettings>(&super::super::schema::schema().block),
            ),
            (
                "hpc_cluster",
                fields_outside_schema::<Users>(&super::super::schema::schema().block),
            ),
            (
                "hpc_cluster",
                fields_outside_schema::<Computed>(&super::super::schema::schema().block),
            ),
            (
                "login_nodes",
                fields_outside_schema::<LoginConfig>(&block("login_nodes")),
            ),
            ("slurm", fields_outside_schema::<SlurmConfig>(&block("slurm"))),
            (
                "accounting",
                fields_outside_schema::<AccountingConfig>(&block("accounting")),
            ),
            ("mfa", fields_outside_schema::<MfaConfig>(&block("mfa"))),
            ("home", fields_outside_schema::<HomeConfig>(&block("home"))),
            ("user", fields_outside_schema::<UserConfig>(&block("user"))),
            ("storage", fields_outside_schema::<StorageConfig>(&block("storage"))),
        ];
        let outside: Vec<String> = partial
            .into_iter()
            .flat_map(|(at, list)| list.into_iter().map(move |m| format!("{at}: {m}")))
            .collect();
        assert!(outside.is_empty(), "{outside:#?}");
    }

    #[test]
    fn computed_is_every_attribute_the_provider_computes_and_nothing_the_user_sets() {
        // tags_all: the provider's default tags merged in, for every resource alike.
        let block = super::super::schema::schema().block;
        let mismatches = tfplugin::model::computed_mismatches::<Computed>(&block, &["tags_all"]);
        assert_eq!(mismatches, Vec::<String>::new());
    }

    #[test]
    fn record_changes_the_computed_attributes_and_keeps_the_configuration() {
        let mut v = Value::Object(
            [
                ("name".to_string(), Value::string("c1")),
                ("vpc_id".to_string(), Value::Unknown),
                ("state_volume_id".to_string(), Value::Unknown),
                ("head_node_instance_id".to_string(), Value::string("i-old")),
            ]
            .into(),
        );
        record(&mut v, |m| {
            m.vpc_id = known(&"vpc-1".to_string());
            m.head_node_instance_id = Field::Unset;
        })
        .expect("a cluster value");
        assert_eq!(v.attr("name"), &Value::string("c1"));
        assert_eq!(v.attr("vpc_id"), &Value::string("vpc-1"));
        assert_eq!(v.attr("state_volume_id"), &Value::Unknown);
        assert_eq!(v.attr("head_node_instance_id"), &Value::Null);
        let wrong = Value::Object([("vpc_id".to_string(), Value::int(3))].into());
        let err = Computed::of(&wrong).expect_err("a number is no VPC id");
        assert!(format!("{err:?}").contains("vpc_id"), "{err:?}");
    }
}
