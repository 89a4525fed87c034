//! hpc_cluster's schema: its attributes, blocks, defaults and plan behaviour.

use super::{DEFAULT_RESUME_TIMEOUT_S, DEFAULT_SCALEDOWN_IDLETIME_S, DEFAULT_STATE_VOLUME_GIB};
use crate::desired_state;
use tfplugin::timeouts;
use tfplugin::Attribute;
use tfplugin::Block;
use tfplugin::BlockNesting;
use tfplugin::NestedBlock;
use tfplugin::Schema;
use tfplugin::Type;
use tfplugin::Value;

pub(super) fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(attributes()).with_blocks(blocks()).description(
            "A Slurm cluster: head node with slurmctld and accounting, login nodes, users and shared storage.",
        ),
    )
}

/// The top-level attributes.
fn attributes() -> Vec<Attribute> {
    vec![
        Attribute::computed_kept("id", Type::String, "The cluster name."),
        Attribute::required("name", Type::String)
            .description(
                "Cluster name (Slurm ClusterName): lowercase letters, digits, `-`. One cluster per name in an \
                     account and region: creating a name another Terraform state's cluster has is refused before \
                     anything is made (import that cluster instead).",
            )
            .requires_replace(),
        Attribute::required("subnet_id", Type::String)
            .description("Subnet of the head and login nodes.")
            .requires_replace(),
        Attribute::optional("security_group_id", Type::String)
            .description(
                "Use this security group as the cluster group (all traffic between members) instead of \
                     creating one, e.g. `hpc_network.security_group_id`, so a Lustre file system made before the \
                     cluster in that group is reachable from every node. It is never deleted by the cluster.",
            )
            .requires_replace(),
        Attribute::optional("wait_for_ready", Type::Bool)
            .description(
                "Create and update wait (within their timeouts) until the head node reports slurmctld running \
                     and each new login node reports it serves, and fail with the node's own error and its console's \
                     last lines when it reports a failure or never reports. Default true.",
            )
            .default(Value::Bool(true)),
        Attribute::optional("tags", Type::map(Type::String)).description("Tags of everything the cluster creates."),
        Attribute::computed("tags_all", Type::map(Type::String))
            .description("`tags` merged over the provider's `default_tags`."),
        Attribute::computed_kept("vpc_id", Type::String, "VPC of the subnet."),
        Attribute::computed_kept("head_node_instance_id", Type::String, "Head node instance."),
        Attribute::computed_kept(
            "head_node_private_ip",
            Type::String,
            "Head node address (SlurmctldHost): the kept network interface's, the same for every head node.",
        ),
        Attribute::computed_kept(
            "head_node_network_interface_id",
            Type::String,
            "Network interface every head node of the cluster is launched on.",
        ),
        Attribute::computed_kept(
            "state_volume_id",
            Type::String,
            "EBS volume with the cluster's state, attached to each head node.",
        ),
        Attribute::computed_kept(
            "backup_controller_instance_id",
            Type::String,
            "The backup controller's instance (`head_node.backup_controller`).",
        ),
        Attribute::computed_kept(
            "backup_controller_private_ip",
            Type::String,
            "The backup controller's address (the second SlurmctldHost): its kept network interface's.",
        ),
        Attribute::computed_kept(
            "backup_controller_network_interface_id",
            Type::String,
            "Network interface every backup controller of the cluster is launched on.",
        ),
        Attribute::computed_kept(
            "controller_state_file_system_id",
            Type::String,
            "EFS file system (encrypted) both controllers keep slurmctld's saved state and the agent's capacity \
                 records on, with a backup controller; deleted with the cluster.",
        ),
        Attribute::computed_kept(
            "home_file_system_id",
            Type::String,
            "EFS file system every node mounts at /home: `home.efs_id`, or the one the provider made \
                 (encrypted, elastic throughput, a mount target in each zone of the cluster's and its partitions' \
                 subnets in this region; deleted with the cluster, the users' files with it).",
        ),
        Attribute::computed("login_node_ids", Type::list(Type::String)).description("Login node instances."),
        Attribute::computed("login_node_private_ips", Type::list(Type::String)).description("Login node addresses."),
        Attribute::computed_kept(
            "security_group_ids",
            Type::list(Type::String),
            "Cluster security group and SSH security group.",
        ),
        Attribute::computed_kept(
            "munge_key_secret_arn",
            Type::String,
            "Secrets Manager secret with the munge key (generated; never in state).",
        ),
        Attribute::computed_kept(
            "desired_state_parameter",
            Type::String,
            "SSM parameter of the cluster's desired state.",
        ),
        Attribute::computed("desired_state_version", Type::Number)
            .description("Version of the published cluster document."),
        Attribute::computed("slurm_conf", Type::String)
            .description("The cluster-wide part of slurm.conf (each hpc_partition shows its own lines)."),
        Attribute::computed_kept(
            "instance_profile_policy",
            Type::String,
            "IAM policy JSON the instance profile needs.",
        ),
        Attribute::computed("estimated_hourly_cost", Type::Number)
            .description("On-demand USD/hour of the head and login nodes (partitions report their own)."),
    ]
}

/// The top-level blocks.
fn blocks() -> Vec<NestedBlock> {
    vec![
            NestedBlock::new("head_node", BlockNesting::Single, head_block().description("The head node: slurmctld, accounting and the node agent; its AMI, type, root volume and SSH access."))
                .min_items(1)
                .max_items(1),
            NestedBlock::new("slurm", BlockNesting::Single, slurm_block().description("Slurm version, power saving timings and extra slurm.conf settings.")),
            NestedBlock::new("accounting", BlockNesting::Single, accounting_block().description("Job accounting: slurmdbd with a local MariaDB on the head node, an external database, or none.")),
            NestedBlock::new("login_nodes", BlockNesting::Single, login_block().description("Login nodes users SSH to, launched with the head node's image, key pair, instance profile and root volume. A change of those or of `instance_type` rolls them: their successors start (and, with `wait_for_ready`, report ready) before the old ones are terminated.")),
            NestedBlock::new("user", BlockNesting::List, user_block().description("A Unix user on every node (same uid everywhere).")),
            NestedBlock::new("mfa", BlockNesting::Single, mfa_block().description("Multi-factor authentication for SSH logins (a PAM module and its configuration).")),
            NestedBlock::new("home", BlockNesting::Single, home_block().description("Where /home lives: an EFS file system, the cluster's own unless you give one.")),
            NestedBlock::new("storage", BlockNesting::List, storage_block().description("A Lustre file system every node mounts.")),
            timeouts::block(&["create", "update", "delete"]),
        ]
}

fn head_block() -> Block {
    Block::new(vec![
        Attribute::required("ami_id", Type::String).description(
            "AMI of the head node (an hpc-image build). Changing it (or the type, root volume, key pair or \
                 instance profile) replaces the head node in place: the old head stops, a new one starts on the \
                 same address with the same state volume; queued jobs, accounting and compute nodes stay.",
        ),
        Attribute::optional("instance_type", Type::String)
            .description("Head node instance type. Default `c7i.2xlarge`.")
            .default(Value::string("c7i.2xlarge")),
        Attribute::optional("root_volume_size", Type::Number)
            .description("Root volume GiB. Default 100.")
            .default(Value::int(100)),
        Attribute::optional("root_volume_type", Type::String)
            .description("`gp3` (default) or `gp2`.")
            .default(Value::string("gp3")),
        Attribute::optional("root_volume_encrypted", Type::Bool)
            .description("Encrypt the root volume. Default true.")
            .default(Value::Bool(true)),
        Attribute::optional("key_name", Type::String).description("EC2 key pair for SSH as the AMI's default user."),
        Attribute::optional("allowed_ssh_cidrs", Type::list(Type::String))
            .description("Networks allowed to SSH to head and login nodes. Default: none (use SSM Session Manager)."),
        Attribute::optional("instance_profile_arn", Type::String)
            .description("Instance profile of the cluster's nodes; see `instance_profile_policy` for what it needs."),
        Attribute::optional("node_role_arns", Type::list(Type::String)).description(
            "IAM roles of the instance profiles nodes launch with (the cluster's, and any partition's own). `instance_profile_policy` then lets the head node pass only these roles, and only to EC2. Default: any role, to EC2 only.",
        ),
        Attribute::optional("state_volume_size", Type::Number)
            .description(&format!(
                "GiB of the encrypted gp3 volume that keeps the cluster's state across head nodes \
             (slurmctld's saved state, the local accounting database). Default {}. It grows in place (the head \
             grows its file system online within a minute, and before any later mount); it cannot shrink.",
                DEFAULT_STATE_VOLUME_GIB
            ))
            .default(Value::int(DEFAULT_STATE_VOLUME_GIB)),
        Attribute::optional("backup_controller", Type::Bool)
            .description(
                "Run a second slurmctld (`slurmctld-backup`, the head's image and type, on its own kept \
                 interface) on shared state: slurmctld's saved state moves to an encrypted EFS file system both \
                 controllers mount, and the backup takes over scheduling when the head stops answering (after \
                 SlurmctldTimeout, 120 s by default), until the head is back (the next apply relaunches a lost \
                 one). Accounting stays on the head: the backup queues its records until slurmdbd is back. Set \
                 when the cluster is created; needs Slurm 24.11 or later. Default false.",
            )
            .default(Value::Bool(false)),
        Attribute::optional("state_volume_on_delete", Type::String)
            .description(
                "What deleting the cluster (a destroy, or a replacement) does with the state volume \
                 (slurmctld's saved state, the local accounting database): `snapshot` (the default: a final \
                 EBS snapshot, tagged with the cluster's tags and `hpcforge:role = head-state-final`, then \
                 the volume is deleted; the plan and the destroy name it) or `delete`.",
            )
            .default(Value::string(super::deletion::SNAPSHOT)),
        Attribute::optional("state_snapshot_id", Type::String).description(
            "An EBS snapshot (`snap-...`) to make the state volume from when the cluster is created: the final \
             snapshot a deleted cluster left (`hpcforge:role = head-state-final`) brings back its saved Slurm \
             state (jobs still queued, held or pending) and its local accounting database (the sacct history). \
             Read only when the cluster is created: a later change does nothing to it. `state_volume_size` must be \
             at least the snapshot's size.",
        ),
    ])
}

fn slurm_block() -> Block {
    Block::new(vec![
        Attribute::optional("version", Type::String)
            .description("Slurm release series on the images: `22.05`, `24.11` (default) or `26.05`.")
            .default(Value::string("24.11")),
        Attribute::optional("scaledown_idletime", Type::String)
            .description(&format!(
                "Idle time before a cloud node is powered down (SuspendTime). Default `{}`.",
                desired_state::duration_text(DEFAULT_SCALEDOWN_IDLETIME_S)
            ))
            .default(Value::string(desired_state::duration_text(
                DEFAULT_SCALEDOWN_IDLETIME_S,
            ))),
        Attribute::optional("resume_timeout", Type::String)
            .description(&format!(
                "How long a node may take to boot and register (ResumeTimeout); every partition's \
                 `provision_timeout` must be shorter. Default `{}`.",
                desired_state::duration_text(DEFAULT_RESUME_TIMEOUT_S)
            ))
            .default(Value::string(desired_state::duration_text(DEFAULT_RESUME_TIMEOUT_S))),
        Attribute::optional("extra", Type::map(Type::String))
            .description("More slurm.conf settings; unknown keys and keys hpcforge manages are rejected."),
    ])
}

fn accounting_block() -> Block {
    Block::new(vec![
        Attribute::optional("mode", Type::String)
            .description("`local` (MariaDB on the head node, default), `external` (your database) or `none`.")
            .default(Value::string("local")),
        Attribute::optional("host", Type::String).description("External database host."),
        Attribute::optional("port", Type::Number).description("External database port. Default 3306."),
        Attribute::optional("user", Type::String).description("External database user."),
        Attribute::optional("database", Type::String).description("External database name. Default `slurm_acct_db`."),
        Attribute::optional("password_secret_arn", Type::String)
            .description("Secrets Manager secret holding the external database password."),
        Attribute::optional("password", Type::String)
            .description("External database password, stored in Secrets Manager by the provider; never kept in state.")
            .sensitive()
            .write_only(),
        Attribute::optional("password_version", Type::Number).description(
            "Any number; change it whenever `password` changes. Terraform never compares write-only values between plans, so this is what makes the provider store the new password (as a new version of the same secret).",
        ),
    ])
}

fn login_block() -> Block {
    Block::new(vec![
        Attribute::optional("count", Type::Number)
            .description("Number of login nodes. Default 0.")
            .default(Value::int(0)),
        Attribute::optional("instance_type", Type::String)
            .description("Login node instance type. Default `c7i.xlarge`.")
            .default(Value::string("c7i.xlarge")),
    ])
}

fn user_block() -> Block {
    Block::new(vec![
        Attribute::required("name", Type::String).description("Login name."),
        Attribute::required("uid", Type::Number).description("Numeric user id (1000 or more)."),
        Attribute::optional("gid", Type::Number).description("Primary group id. Default: the uid."),
        Attribute::optional("ssh_public_keys", Type::list(Type::String)).description("Authorized SSH public keys."),
        Attribute::optional("sudo", Type::Bool)
            .description("Passwordless sudo. Default false.")
            .default(Value::Bool(false)),
        Attribute::optional("accounts", Type::list(Type::String)).description(
            "Slurm accounts the user may charge, the first their default: made in the accounting database \
             with the user's associations (what partitions' `allow_accounts` admit). Lowercase.",
        ),
    ])
}

fn home_block() -> Block {
    Block::new(vec![
        Attribute::optional("storage", Type::String)
            .description("`efs` (the default and the only kind: the head node exports nothing).")
            .default(Value::string("efs")),
        Attribute::optional("efs_id", Type::String).description(
            "Your EFS file system (`fs-...`), with a mount target in each zone the nodes run in. Without it the \
             provider makes one for the cluster (`home_file_system_id`).",
        ),
        Attribute::optional("on_delete", Type::String)
            .description(
                "What deleting the cluster (a destroy, or a replacement) does with the /home file system the \
                 provider made: `retain` (the default: it is kept with the users' files, only its mount targets \
                 go; a cluster created again under the same name in the account and region mounts it again) \
                 or `delete`. A file system you give (`efs_id`) is never deleted.",
            )
            .default(Value::string(super::deletion::RETAIN)),
    ])
}

fn mfa_block() -> Block {
    Block::new(vec![
        Attribute::required("pam_module", Type::String)
            .description(
                "PAM module for the second factor on SSH, after the key, where users log in: the login \
                 nodes (the head node and backup without login nodes), e.g. \
                 `pam_google_authenticator.so` or `pam_duo.so` (hpc-image's `mfa` component bakes both).",
            ),
        Attribute::optional("config", Type::String)
            .description("The module's arguments on its PAM line, e.g. `nullok` (users not enrolled yet log in by key)."),
        Attribute::optional("settings_file", Type::String).description(
            "Where those nodes write the module's settings, root-only (mode 0600), e.g. `/etc/security/pam_duo.conf`: \
             a path under /etc. Requires `settings_secret_arn`.",
        ),
        Attribute::optional("settings_secret_arn", Type::String).description(
            "A Secrets Manager secret whose text is the module's settings (e.g. pam_duo's host, ikey and skey). \
             Those nodes fetch it (`instance_profile_policy` grants reading it) and follow its changes within a minute.",
        ),
    ])
}

fn storage_block() -> Block {
    Block::new(vec![
        Attribute::optional("lustre_id", Type::String).description("An hpc_lustre_fs id."),
        Attribute::optional("dns_name", Type::String)
            .description("The file system's DNS name (hpc_lustre_fs.dns_name); required."),
        Attribute::optional("mount_name", Type::String)
            .description("The file system's mount name (hpc_lustre_fs.mount_name); required."),
        Attribute::required("mount_point", Type::String).description("Where nodes mount it, e.g. `/fsx`."),
    ])
}
