//! Reconcile on the head node: the published desired state becomes slurm.conf and friends.
//!
//! Render with the one Slurm model, check the result on a throwaway slurmctld (its own port
//! and state directory) so the live controller is never handed a configuration it would die
//! on, install the files atomically, `scontrol reconfigure`, and report what was applied (or
//! why not) to `/hpcforge/clusters/<cluster>/status`. A bad desired state leaves the running
//! configuration alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hpc_aws::Aws;
use hpc_desired_state::{cluster_param, partitions_path, status_param, ClusterDoc, PartitionDoc, StatusDoc};
use serde::{Deserialize, Serialize};
use slurm_model::{Accounting, Cluster};

/// Where this head node keeps Slurm's files, and how it reaches the controller. Defaults are
/// the image's layout; a JSON file can override any field (other layouts, tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Layout {
    pub conf_dir: PathBuf,
    pub controller_host: Option<String>,
    pub controller_addr: Option<String>,
    pub state_dir: Option<String>,
    pub spool_dir: Option<String>,
    pub log_dir: Option<String>,
    pub run_dir: Option<String>,
    pub slurm_user: Option<String>,
    pub munge_socket: Option<String>,
    pub ports: Option<(u16, u16)>,
    pub power_programs: Option<(String, String, String)>,
    pub extra: BTreeMap<String, String>,
    /// How to restart slurmctld when nodes were added or removed (a reconfigure cannot do that
    /// before Slurm 23.02's dynamic nodes).
    pub restart_command: Vec<String>,
    /// How to start slurmctld when its first configuration is installed and it is not running
    /// (a head node whose cluster had no partition at boot); none: leave it to the caller.
    pub start_command: Option<Vec<String>>,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            conf_dir: PathBuf::from("/etc/slurm"),
            controller_host: None,
            controller_addr: None,
            state_dir: None,
            spool_dir: None,
            log_dir: None,
            run_dir: None,
            slurm_user: None,
            munge_socket: None,
            ports: None,
            power_programs: None,
            extra: BTreeMap::new(),
            restart_command: vec!["systemctl".into(), "restart".into(), "slurmctld".into()],
            start_command: None,
        }
    }
}

impl Layout {
    /// Reads overrides from a JSON object (`{"conf_dir": "...", "ports": [6817, 6818], ...}`).
    pub fn from_json(text: &str) -> Result<Layout, String> {
        serde_json::from_str(text).map_err(|e| format!("layout: {e}"))
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The cluster this head node runs: the desired state with this layout applied.
    pub fn model(&self, doc: &ClusterDoc, parts: &[PartitionDoc]) -> Result<Cluster, String> {
        let mut model = doc
            .to_model(parts)
            .map_err(|e| format!("{}: {}", e.summary, e.detail))?;
        self.apply(&mut model);
        Ok(model)
    }

    fn apply(&self, model: &mut Cluster) {
        let set = |slot: &mut String, v: &Option<String>| {
            if let Some(v) = v {
                *slot = v.clone();
            }
        };
        set(&mut model.controller_host, &self.controller_host);
        if let Some(addr) = &self.controller_addr {
            model.controller_addr = Some(addr.clone());
            // slurmdbd runs beside slurmctld: every node's sacct reaches it at the head's address.
            if let Accounting::Slurmdbd { host, .. } = &mut model.accounting {
                *host = addr.clone();
            }
        }
        set(&mut model.state_dir, &self.state_dir);
        set(&mut model.spool_dir, &self.spool_dir);
        set(&mut model.log_dir, &self.log_dir);
        set(&mut model.run_dir, &self.run_dir);
        set(&mut model.slurm_user, &self.slurm_user);
        if self.munge_socket.is_some() {
            model.munge_socket = self.munge_socket.clone();
        }
        if self.ports.is_some() {
            model.ports = self.ports;
        }
        if let Some((resume, suspend, fail)) = &self.power_programs {
            model.power_save.resume_program = resume.clone();
            model.power_save.suspend_program = suspend.clone();
            model.power_save.resume_fail_program = fail.clone();
        }
        model.extra.extend(self.extra.clone());
    }
}

/// What one reconcile did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The cluster has no partition yet: nothing for Slurm to run (no configuration written).
    NoPartitions,
    /// The files already matched the desired state.
    Unchanged,
    /// New files installed; `reconfigured`/`restarted` say how a running slurmctld took them.
    Applied { reconfigured: bool, restarted: bool },
}

/// The published documents and their versions (a status without its outcome yet).
async fn read_state(aws: &Aws, cluster: &str) -> Result<(ClusterDoc, Vec<PartitionDoc>, StatusDoc), String> {
    let ssm = aws.ssm();
    let param = ssm
        .get(&cluster_param(cluster))
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "cluster {cluster} has no published desired state ({})",
                cluster_param(cluster)
            )
        })?;
    let mut doc: ClusterDoc = serde_json::from_str(&param.value).map_err(|e| format!("{}: {e}", param.name))?;
    // Without a cache: one node (the head) reads them, a call per ten shards each pass.
    crate::published::fill_users(aws, &mut doc, None)
        .await
        .map_err(|e| e.to_string())?;
    let mut versions = StatusDoc {
        cluster_version: param.version,
        ..StatusDoc::default()
    };
    let mut parts = Vec::new();
    for p in ssm.list(&partitions_path(cluster)).await.map_err(|e| e.to_string())? {
        let d: PartitionDoc = serde_json::from_str(&p.value).map_err(|e| format!("{}: {e}", p.name))?;
        versions.partition_versions.insert(d.name.clone(), p.version);
        parts.push(d);
    }
    Ok((doc, parts, versions))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// Runs a throwaway slurmctld on the candidate (own ports, state and logs in a temp dir): a
/// configuration it exits on within `grace` is refused with its `fatal:` lines.
pub fn check_on_throwaway_controller(model: &Cluster, slurmctld: &Path, grace: Duration) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("hpc-node-check-{}-{}", std::process::id(), free_port()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["state", "spool", "log", "run", "etc"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    // slurmctld insists that SlurmUser owns its state directory.
    crate::host::chown_tree(&dir, &model.slurm_user).map_err(|e| e.to_string())?;
    let mut probe = model.clone();
    let p = |s: &str| dir.join(s).display().to_string();
    probe.state_dir = p("state");
    probe.spool_dir = p("spool");
    probe.log_dir = p("log");
    probe.run_dir = p("run");
    probe.ports = Some((free_port(), free_port()));
    probe.accounting = slurm_model::Accounting::None;
    let rendered = slurm_model::render_unvalidated(&probe);
    let conf = dir.join("etc/slurm.conf");
    for file in rendered.files() {
        std::fs::write(dir.join("etc").join(file.name), file.contents)
            .map_err(|e| format!("writing check files: {e}"))?;
    }
    let mut child = Command::new(slurmctld)
        .args(["-D", "-i", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the check controller {}: {e}", slurmctld.display()))?;
    let deadline = Instant::now() + grace;
    let verdict = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read as _;
                    let _ = e.read_to_string(&mut err);
                }
                let fatal: Vec<&str> = err
                    .lines()
                    .filter(|l| l.contains("fatal") || l.contains("error"))
                    .collect();
                break Err(format!(
                    "slurmctld refused the new configuration ({status}): {}",
                    fatal.join(" | ")
                ));
            }
            Ok(None) if Instant::now() >= deadline => break Ok(()),
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => break Err(format!("waiting for the check controller: {e}")),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    verdict
}

/// slurmdbd reads its configuration only if SlurmUser owns it (it holds the database password).
const SLURMDBD_CONF: &str = "slurmdbd.conf";

/// Writes files whose content differs, atomically (temp file + rename). Returns the names of
/// those that changed.
fn install(conf_dir: &Path, rendered: &slurm_model::Rendered, slurm_user: &str) -> Result<Vec<&'static str>, String> {
    let mut changed = Vec::new();
    for file in rendered.files() {
        let owner = (file.name == SLURMDBD_CONF).then_some(slurm_user);
        let path = conf_dir.join(file.name);
        if crate::host::write_file(&path, file.contents.as_bytes(), file.mode, owner).map_err(|e| e.to_string())? {
            changed.push(file.name);
        }
    }
    Ok(changed)
}

/// slurmdbd.conf as this head node runs it: `DbdHost=localhost` (slurmdbd refuses a host name
/// that is not its own) and the database password from Secrets Manager. The secret is read
/// only when the installed file differs from the rendering in more than its password.
pub async fn slurmdbd_conf(
    aws: &Aws,
    doc: &ClusterDoc,
    model: &Cluster,
    installed: Option<&str>,
) -> Result<Option<String>, String> {
    let mut local = model.clone();
    let Accounting::Slurmdbd { host, .. } = &mut local.accounting else {
        return Ok(None);
    };
    *host = "localhost".into();
    let without = slurm_model::try_slurmdbd_conf(&local, None).map_err(|e| format!("{}: {}", e.summary, e.detail))?;
    if let (Some(installed), Some(without)) = (installed, &without) {
        if same_but_password(installed, without) {
            return Ok(Some(installed.to_string()));
        }
    }
    let Some(arn) = doc.accounting.password_secret_arn.as_deref() else {
        // A local database published without a password (by a provider before it kept one):
        // MariaDB knows SlurmUser by the socket it connects through.
        if doc.accounting.mode == "local" {
            return Ok(without);
        }
        return Err("the cluster's desired state names no database password secret".into());
    };
    let password = aws
        .secrets()
        .value(arn)
        .await
        .map_err(|e| format!("the database password: {e}"))?;
    let password = String::from_utf8(password.bytes().to_vec())
        .map_err(|_| format!("the database password in {arn} is not text"))?;
    slurm_model::try_slurmdbd_conf(&local, Some(&password)).map_err(|e| format!("{}: {}", e.summary, e.detail))
}

/// Whether two slurmdbd.conf renderings differ at most in the password line.
fn same_but_password(a: &str, b: &str) -> bool {
    let settings = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("StoragePass=") && !l.starts_with("# StoragePass is filled"))
            .map(str::to_string)
            .collect()
    };
    settings(a) == settings(b)
}

/// The node definitions of a slurm.conf: adding or removing nodes needs a restart.
fn node_lines(conf: &str) -> Vec<&str> {
    conf.lines()
        .filter(|l| l.starts_with("NodeName=") || l.starts_with("SuspendExcNodes="))
        .collect()
}

/// Whether slurmctld accepts connections (a quick TCP check: `scontrol ping` against a
/// stopped controller waits out its message timeouts, about a minute).
fn controller_listening(model: &Cluster) -> bool {
    use std::net::ToSocketAddrs as _;
    let host = model
        .controller_addr
        .clone()
        .unwrap_or_else(|| model.controller_host.clone());
    let port = model.ports.map(|p| p.0).unwrap_or(6817);
    (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok())
}

/// Writes what was applied (or the error) where the provider and people can read it.
async fn report(aws: &Aws, cluster: &str, versions: &StatusDoc, error: Option<&str>) -> Result<(), String> {
    // One status per cluster: a backup controller standing by leaves it to the head.
    if !crate::controller::in_charge() {
        return Ok(());
    }
    let status = StatusDoc {
        error: error.map(str::to_string),
        at: crate::resume::now_s(),
        ..versions.clone()
    };
    let text = serde_json::to_string(&status).map_err(|e| e.to_string())?;
    aws.ssm()
        .put(&status_param(cluster), &text, &[])
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Runs a layout's command (`what` names it in errors).
fn run_command(command: &[String], what: &str) -> Result<(), String> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| format!("{what}: the layout has no command"))?;
    let ok = Command::new(program).args(args).status().is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!("{what} with {command:?} failed"))
    }
}

/// The accounts, QOS and user associations the documents name, added to the accounting
/// database where missing (nothing without accounting).
fn associations(doc: &ClusterDoc, parts: &[PartitionDoc], conf: &Path) -> Result<(), String> {
    if doc.accounting.enabled() {
        let want = crate::associations::wanted(doc, parts);
        for done in crate::associations::ensure(&doc.name, conf, &want)? {
            crate::host::log("accounting", &done);
        }
    }
    Ok(())
}

/// One reconcile pass. Errors in the desired state are reported and returned; the running
/// configuration is not touched.
pub async fn reconcile_once(aws: &Aws, cluster: &str, layout: &Layout, slurmctld: &Path) -> Result<Outcome, String> {
    let (doc, parts, versions) = read_state(aws, cluster).await?;
    // A document breaking a rule of plan was not written by the provider: Slurm keeps the
    // configuration it runs, and the status says why.
    if let Some(why) = crate::published::refusal(&doc) {
        report(aws, cluster, &versions, Some(&why)).await?;
        return Err(why);
    }
    if parts.is_empty() {
        report(aws, cluster, &versions, None).await?;
        return Ok(Outcome::NoPartitions);
    }
    let result = async {
        let model = layout.model(&doc, &parts)?;
        let mut rendered = slurm_model::render(&model).map_err(|errors| {
            errors
                .iter()
                .map(|e| format!("{}: {} ({})", e.path.join("."), e.summary, e.detail))
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let installed_dbd = std::fs::read_to_string(layout.conf_dir.join(SLURMDBD_CONF)).ok();
        rendered.slurmdbd_conf = slurmdbd_conf(aws, &doc, &model, installed_dbd.as_deref()).await?;
        let conf = layout.conf_dir.join("slurm.conf");
        let current = std::fs::read_to_string(&conf).ok();
        let dbd_unchanged = installed_dbd == rendered.slurmdbd_conf;
        if current.as_deref() == Some(rendered.slurm_conf.as_str()) && dbd_unchanged {
            return Ok(Outcome::Unchanged);
        }
        check_on_throwaway_controller(&model, slurmctld, Duration::from_secs(3))?;
        let nodes_changed = node_lines(current.as_deref().unwrap_or("")) != node_lines(&rendered.slurm_conf);
        let running = current.is_some() && controller_listening(&model);
        let changed = install(&layout.conf_dir, &rendered, &model.slurm_user)?;
        if changed.contains(&SLURMDBD_CONF) && installed_dbd.is_some() {
            // slurmdbd reads its file only at start; try-restart leaves a stopped one stopped.
            run_command(
                &["systemctl".into(), "try-restart".into(), "slurmdbd.service".into()],
                "restarting slurmdbd",
            )?;
        }
        if !running {
            if let (None, Some(command)) = (&current, &layout.start_command) {
                // Before the start: a slurmctld loads the associations when it starts, and may
                // miss ones added while it is still registering with slurmdbd (a job submitted
                // then gets no account and waits forever behind AllowAccounts).
                associations(&doc, &parts, &conf)?;
                run_command(command, "starting slurmctld")?;
            }
            return Ok(Outcome::Applied {
                reconfigured: false,
                restarted: false,
            });
        }
        if nodes_changed {
            associations(&doc, &parts, &conf)?;
            run_command(&layout.restart_command, "restarting slurmctld")?;
            return Ok(Outcome::Applied {
                reconfigured: false,
                restarted: true,
            });
        }
        let reconfigured = Command::new("scontrol")
            .arg("reconfigure")
            .env("SLURM_CONF", &conf)
            .status()
            .is_ok_and(|s| s.success());
        Ok(Outcome::Applied {
            reconfigured,
            restarted: false,
        })
    }
    .await
    .and_then(|outcome| {
        associations(&doc, &parts, &layout.conf_dir.join("slurm.conf"))?;
        Ok(outcome)
    });
    if result.is_ok() {
        crate::blocks::keep_all(aws, &layout.conf_dir.join("slurm.conf"), &parts).await;
    }
    let error = result.as_ref().err().map(String::as_str);
    report(aws, cluster, &versions, error).await?;
    result
}

/// The slurmctld binary that checks a candidate configuration.
pub fn slurmctld() -> PathBuf {
    PathBuf::from(std::env::var("HPC_NODE_SLURMCTLD").unwrap_or_else(|_| "/usr/sbin/slurmctld".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_overrides_parse() {
        let l =
            Layout::from_json(r#"{"conf_dir": "/tmp/x", "ports": [7000, 7001], "extra": {"TaskPlugin": "task/none"}}"#)
                .expect("layout");
        assert_eq!(l.conf_dir, PathBuf::from("/tmp/x"));
        assert_eq!(l.ports, Some((7000, 7001)));
        assert_eq!(l.extra.get("TaskPlugin").map(String::as_str), Some("task/none"));
        assert!(Layout::from_json("{\"extra\": {\"A\": 1}}").is_err());
        assert!(Layout::from_json("nope").is_err());
        assert!(
            Layout::from_json(r#"{"conf_dri": "/tmp"}"#).is_err(),
            "a misspelt field is an error"
        );
        let back = Layout::from_json(&l.to_json().expect("json")).expect("round trip");
        assert_eq!(back, l);
    }
}
