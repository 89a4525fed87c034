//! hpc-node's command line: one subcommand per job, typed arguments, `--help` on each.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "hpc-node",
    version,
    about = "The hpcforge node agent: boots each node into its role, keeps Slurm in step with the \
             cluster's desired state, and launches and ends capacity as Slurm's power-saving programs."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The cluster a command acts for.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The cluster's name.
    #[arg(long)]
    pub cluster: String,
    /// The region holding the cluster's desired state (default: the SDK's, e.g. AWS_REGION).
    #[arg(long)]
    pub region: Option<String>,
    /// Where the agent keeps its own state (pool cool-downs).
    #[arg(long, default_value = "/var/lib/hpc-node")]
    pub state_dir: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct HostsArgs {
    /// Slurm host list, e.g. `gpu-p5-48xl-[1-4,7]`.
    pub hosts: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// JSON file overriding where Slurm's files live and how the controller is reached.
    #[arg(long)]
    pub layout: Option<PathBuf>,
    /// One pass, then exit with its result.
    #[arg(long)]
    pub once: bool,
    /// Seconds between passes.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub interval: u64,
}

#[derive(Debug, Clone, Args)]
pub struct HealthArgs {
    /// This node's Slurm name.
    pub node: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct NodeInitArgs {
    /// The partition whose launch template started this instance.
    #[arg(long)]
    pub partition: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct SpotWatchArgs {
    /// This node's Slurm name.
    #[arg(long)]
    pub node: String,
    /// Seconds between looks at the instance metadata (EC2 gives two minutes' notice).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub interval: u64,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct StateMountArgs {
    /// The cluster's state volume (EBS volume id), on the head node.
    #[arg(long, required_unless_present = "controller_efs")]
    pub volume: Option<String>,
    /// The EFS file system both controllers keep slurmctld's state on (a backup controller).
    #[arg(long)]
    pub controller_efs: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Slurm's ResumeProgram: launch instances for these nodes, pool after pool.
    Resume(HostsArgs),
    /// Slurm's SuspendProgram: terminate these nodes' instances.
    Suspend(HostsArgs),
    /// Slurm's ResumeFailProgram: Slurm gave up on these nodes; end their instances.
    ResumeFail(HostsArgs),
    /// Keep slurm.conf in step with the published desired state (head node).
    Reconcile(ReconcileArgs),
    /// End orphaned compute instances; replace nodes that did not register in time.
    Sweep(ClusterArgs),
    /// Slurm's HealthCheckProgram: check this node, drain it when it fails.
    Health(HealthArgs),
    /// Start Lustre release tasks per each file system's release policy.
    Evict(ClusterArgs),
    /// The head node: read EC2's instance events (spot interruption warnings, instances
    /// stopping or ending) from the partitions' queues; power the nodes they carry down at once.
    Events(ClusterArgs),
    /// Boot the head node: munge key, Slurm's files and directories, slurmctld, the agent's units.
    HeadInit(ClusterArgs),
    /// Boot the backup controller: the head's steps but accounting, on the shared state.
    BackupInit(ClusterArgs),
    /// Boot a login node: munge key, users, Slurm client configuration from the head node.
    LoginInit(ClusterArgs),
    /// Boot a compute node: munge key, its Slurm node name, configless slurmd.
    NodeInit(NodeInitArgs),
    /// Every node, on a timer: users and mounts follow the published desired state.
    Sync(ClusterArgs),
    /// A spot node: on EC2's interruption notice, requeue the node's jobs and power it down.
    SpotWatch(SpotWatchArgs),
    /// A controller, at every boot before its daemons: mount the cluster's state volume and the
    /// shared controller state, and bind their directories (waits for them; fails rather than
    /// let the daemons start without them).
    StateMount(StateMountArgs),
}

impl Command {
    /// The cluster the command acts for.
    pub fn cluster(&self) -> &ClusterArgs {
        match self {
            Command::Resume(h) | Command::Suspend(h) | Command::ResumeFail(h) => &h.cluster,
            Command::Reconcile(r) => &r.cluster,
            Command::Health(h) => &h.cluster,
            Command::NodeInit(n) => &n.cluster,
            Command::SpotWatch(s) => &s.cluster,
            Command::StateMount(s) => &s.cluster,
            Command::Sweep(c)
            | Command::Evict(c)
            | Command::Events(c)
            | Command::HeadInit(c)
            | Command::BackupInit(c)
            | Command::LoginInit(c)
            | Command::Sync(c) => c,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;
    use hpc_desired_state::boot::{user_data, Role};

    /// The `exec` line of a user data script, split as the shell would (the provider renders
    /// no quotes or expansions into it).
    fn exec_words(script: &str) -> Vec<String> {
        let line = script
            .lines()
            .find_map(|l| l.strip_prefix("exec "))
            .expect("user data execs the agent");
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_user_data_the_provider_renders_parses_as_a_boot_command() {
        for role in [Role::Head, Role::Backup, Role::Login, Role::Compute] {
            let partition = (role == Role::Compute).then_some("gpu");
            let script = user_data(role, "research", "eu-west-1", partition, Some("echo extra"));
            let words = exec_words(&script);
            assert_eq!(words[0], hpc_desired_state::boot::AGENT);
            let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{script}\n{e}"));
            let cluster = cli.command.cluster();
            assert_eq!(cluster.cluster, "research");
            assert_eq!(cluster.region.as_deref(), Some("eu-west-1"));
            match (role, &cli.command) {
                (Role::Head, Command::HeadInit(_))
                | (Role::Backup, Command::BackupInit(_))
                | (Role::Login, Command::LoginInit(_)) => {}
                (Role::Compute, Command::NodeInit(n)) => assert_eq!(n.partition, "gpu"),
                (role, other) => panic!("{role:?} parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn slurm_programs_parse() {
        let cli = Cli::try_parse_from(["hpc-node", "resume", "cpu-[1-2]", "--cluster", "c"]).expect("resume");
        assert!(matches!(cli.command, Command::Resume(ref h) if h.hosts == "cpu-[1-2]"));
        assert!(Cli::try_parse_from(["hpc-node", "reconcile", "--cluster", "c", "--interval", "0"]).is_err());
        let watch =
            Cli::try_parse_from(["hpc-node", "spot-watch", "--node", "gpu-1", "--cluster", "c"]).expect("watch");
        assert!(matches!(watch.command, Command::SpotWatch(ref s) if s.node == "gpu-1" && s.interval == 5));
        assert!(
            Cli::try_parse_from(["hpc-node", "sweep"]).is_err(),
            "--cluster is required"
        );
    }
}
