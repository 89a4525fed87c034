//! The amazon-ebs builder (real AWS): launch a builder instance from a source AMI with a
//! temporary key pair and security group, run the same component scripts over SSH, clean
//! up inside, stop, CreateImage, then the same copy/share steps as a local publish. The
//! instance, key pair and security group are always removed, also on failure or Ctrl-C:
//! everything created is recorded first and torn down by [`Resources::teardown`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use hpc_aws::ec2::Ec2;
use hpc_aws::image::most_recent;
use hpc_aws::Aws;
use tokio::process::Command;

use crate::host::{BuildError, Result};
use crate::local::CLEANUP_SCRIPT;
use crate::plan::{sh_quote, EbsSource, PublishConfig, Step};
use crate::progress::Progress;

/// What a build created, so it can always be removed.
#[derive(Debug, Default, Clone)]
pub struct Resources {
    pub key_name: Option<String>,
    pub key_file: Option<PathBuf>,
    pub security_group: Option<String>,
    pub instance: Option<String>,
}

impl Resources {
    /// Terminates the instance, then deletes the security group and key pair. Reports every
    /// failure; never stops at the first.
    pub async fn teardown(&mut self, aws: &Aws, region: &str) -> Vec<String> {
        let ec2 = aws.ec2_in(region);
        let mut problems = Vec::new();
        if let Some(id) = self.instance.take() {
            if let Err(e) = ec2.terminate(std::slice::from_ref(&id), Duration::from_secs(900)).await {
                problems.push(format!("terminating builder instance {id}: {e}"));
            }
        }
        if let Some(sg) = self.security_group.take() {
            if let Err(e) = ec2.delete_security_group(&sg).await {
                problems.push(format!("deleting security group {sg}: {e}"));
            }
        }
        if let Some(key) = self.key_name.take() {
            if let Err(e) = ec2.delete_key_pair(&key).await {
                problems.push(format!("deleting key pair {key}: {e}"));
            }
        }
        if let Some(f) = self.key_file.take() {
            let _ = std::fs::remove_file(f);
        }
        problems
    }
}

pub struct EbsBuild<'a> {
    pub aws: &'a Aws,
    pub source: &'a EbsSource,
    pub steps: &'a [Step],
    pub publish: &'a PublishConfig,
    pub template_sha256: &'a str,
    pub work: PathBuf,
}

fn aws_err(e: hpc_aws::AwsError) -> BuildError {
    BuildError::new(e.to_string())
}

impl EbsBuild<'_> {
    /// Builds the image; the caller runs [`Resources::teardown`] whatever happens.
    pub async fn run(&self, res: &mut Resources, progress: &mut Progress) -> Result<String> {
        let ec2 = self.aws.ec2_in(&self.source.region);
        let total = self.steps.len() + 4;
        std::fs::create_dir_all(&self.work).map_err(|e| BuildError::new(format!("{}: {e}", self.work.display())))?;

        let t = progress.step(1, total, "launching the builder instance");
        let ami = self.source_ami(&ec2).await?;
        let (instance, ssh) = self.launch(&ec2, &ami, res).await?;
        progress.done(&format!("{instance} from {ami} at {}", ssh.host), t);

        let t = progress.step(2, total, "waiting for SSH");
        ssh.wait(self.source.ssh_timeout, &self.work.join("ssh.log")).await?;
        progress.done("connected", t);

        for (i, step) in self.steps.iter().enumerate() {
            let t = progress.step(i + 3, total, &step.label);
            let log = self
                .work
                .join(format!("{:02}-{}.log", i + 1, step.id.replace(['@', '/'], "_")));
            ssh.run_step(step, &log).await?;
            progress.done("done", t);
        }
        let t = progress.step(total - 1, total, "cleanup, stop and CreateImage");
        let image = self.capture(&ec2, &ssh, &instance, ami).await?;
        progress.done(&format!("{image} in {}", self.source.region), t);
        Ok(image)
    }

    /// The source's AMI: its id, or the newest image its filter matches.
    async fn source_ami(&self, ec2: &Ec2) -> Result<String> {
        match (&self.source.source_ami, &self.source.source_ami_filter) {
            (Some(id), _) => Ok(id.clone()),
            (None, Some(f)) => {
                let found = ec2.find_images(&f.name, &f.owners).await.map_err(aws_err)?;
                most_recent(&found).map(|i| i.id.clone()).ok_or_else(|| {
                    BuildError::new(format!(
                        "no available image matches source_ami_filter name {:?} owners {:?} in {}",
                        f.name, f.owners, self.source.region
                    ))
                })
            }
            (None, None) => Err(BuildError::new("the source names no source_ami")),
        }
    }

    /// The builder instance's VPC: the subnet's, or the region's default.
    async fn vpc(&self, ec2: &Ec2) -> Result<String> {
        match &self.source.subnet_id {
            Some(s) => ec2.subnet_vpc(s).await.map_err(aws_err),
            None => ec2.default_vpc().await.map_err(aws_err)?.ok_or_else(|| {
                BuildError::new(format!(
                    "{} has no default VPC: set subnet_id in the amazon-ebs source",
                    self.source.region
                ))
            }),
        }
    }

    /// Launches the builder instance from `ami` with a key pair and a security group of its
    /// own (each recorded in `res` as soon as it exists), and waits until it runs.
    async fn launch(&self, ec2: &Ec2, ami: &str, res: &mut Resources) -> Result<(String, Ssh)> {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..12];
        let name = format!("hpc-image-{suffix}");
        let mut tags: Vec<(String, String)> = self.source.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        tags.push(("Name".into(), name.clone()));
        tags.push((hpc_desired_state::tag::BUILDER.into(), "hpc-image".into()));

        let vpc = self.vpc(ec2).await?;
        res.key_name = Some(name.clone());
        let key = ec2.create_key_pair(&name, &tags).await.map_err(aws_err)?;
        let key_file = self.work.join("builder-key");
        write_private(&key_file, &key)?;
        res.key_file = Some(key_file.clone());
        let ingress: Vec<(i32, String)> = self.source.ssh_cidrs.iter().map(|c| (22, c.clone())).collect();
        let sg = ec2
            .ensure_security_group(&name, "hpc-image builder (temporary)", &vpc, &ingress, &tags)
            .await
            .map_err(aws_err)?;
        res.security_group = Some(sg.clone());
        let instance = ec2
            .run_builder_instance(&hpc_aws::image::BuilderInstance {
                image_id: ami.to_string(),
                instance_type: self.source.instance_type.clone(),
                key_name: name.clone(),
                security_group_id: sg,
                subnet_id: self.source.subnet_id.clone(),
                instance_profile: self.source.iam_instance_profile.clone(),
                root_volume_gib: self.source.root_volume_gib,
                tags,
                client_token: name,
            })
            .await
            .map_err(aws_err)?;
        res.instance = Some(instance.clone());
        let info = ec2
            .wait_instance_running(&instance, Duration::from_secs(600))
            .await
            .map_err(aws_err)?;
        let host = info
            .public_ip
            .or(info.private_ip)
            .ok_or_else(|| BuildError::new(format!("builder instance {instance} has no IP address")))?;
        let ssh = Ssh {
            user: self.source.ssh_username.clone(),
            host,
            key: key_file,
            known_hosts: self.work.join("known_hosts"),
        };
        Ok((instance, ssh))
    }

    /// Cleans the builder up, stops it and makes the image of it (or finds the one a run
    /// before made), waiting until the image is available.
    async fn capture(&self, ec2: &Ec2, ssh: &Ssh, instance: &str, ami: String) -> Result<String> {
        let cleanup = Step {
            id: "cleanup".into(),
            label: "cleanup".into(),
            version: String::new(),
            script: format!("set -eu\n{CLEANUP_SCRIPT}"),
            files: vec![],
            check: None,
            args: Default::default(),
        };
        ssh.run_step(&cleanup, &self.work.join("cleanup.log")).await?;
        ec2.stop_instance(instance, Duration::from_secs(900))
            .await
            .map_err(aws_err)?;
        let mut image_tags = crate::publish::image_tags(self.publish, self.template_sha256);
        image_tags.push((hpc_desired_state::tag::SOURCE_AMI.into(), ami));
        let image = match ec2.find_own_image(&self.publish.ami_name).await.map_err(aws_err)? {
            Some(existing) => existing.id,
            None => ec2
                .create_image(instance, &self.publish.ami_name, &self.publish.description, &image_tags)
                .await
                .map_err(aws_err)?,
        };
        ec2.wait_image_available(&image, Duration::from_secs(3600))
            .await
            .map_err(aws_err)?;
        Ok(image)
    }
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| BuildError::new(format!("writing the builder key: {e}")))?;
    f.write_all(text.as_bytes())
        .map_err(|e| BuildError::new(format!("writing the builder key: {e}")))
}

/// The system OpenSSH client with the temporary key.
struct Ssh {
    user: String,
    host: String,
    key: PathBuf,
    known_hosts: PathBuf,
}

impl Ssh {
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.arg("-i")
            .arg(&self.key)
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "StrictHostKeyChecking=accept-new",
            ])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", self.known_hosts.display()));
        c
    }

    fn target(&self) -> String {
        format!("{}@{}", self.user, self.host)
    }

    async fn wait(&self, timeout: Duration, log: &Path) -> Result<()> {
        let started = Instant::now();
        loop {
            let ok = self
                .command("ssh")
                .arg(self.target())
                .arg("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .status()
                .await
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                let _ = std::fs::write(
                    log,
                    format!("no SSH to {} after {}s\n", self.target(), timeout.as_secs()),
                );
                return Err(BuildError::new(format!(
                    "could not connect over SSH to {} within {}s (ssh_timeout): check ssh_cidrs allows this machine and ssh_username ({}) is right for the source AMI",
                    self.host,
                    timeout.as_secs(),
                    self.user
                )));
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }

    /// Stages the step's files with a tar stream, then runs its script with sudo.
    async fn run_step(&self, step: &Step, log: &Path) -> Result<()> {
        let stage = self
            .key
            .with_file_name(format!("stage-{}", step.id.replace(['@', '/'], "_")));
        crate::local::stage_step(step, &stage)?;
        let remote = "/var/tmp/hpc-image";
        let script = format!(
            "set -e; sudo -n rm -rf {remote}; sudo -n mkdir -p {remote}; sudo -n tar -x -C {remote}; \
             sudo -n env HPC_FILES={remote}/files /bin/sh {remote}/step.sh; rc=$?; sudo -n rm -rf {remote}; exit $rc"
        );
        let tar = std::process::Command::new("tar")
            .arg("-C")
            .arg(&stage)
            .args(["-cf", "-", "."])
            .output()
            .map_err(|e| BuildError::new(format!("packing the step's files: {e}")))?;
        let mut child = self
            .command("ssh")
            .arg(self.target())
            .arg(sh_quote(&script))
            .stdin(Stdio::piped())
            .stdout(Stdio::from(
                std::fs::File::create(log).map_err(|e| BuildError::new(format!("{}: {e}", log.display())))?,
            ))
            .stderr(Stdio::from(
                std::fs::File::options()
                    .append(true)
                    .open(log)
                    .map_err(|e| BuildError::new(format!("{}: {e}", log.display())))?,
            ))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BuildError::new(format!("starting ssh: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            use tokio::io::AsyncWriteExt;
            stdin
                .write_all(&tar.stdout)
                .await
                .map_err(|e| BuildError::new(format!("sending the step's files: {e}")))?;
        }
        let status = child.wait().await.map_err(|e| BuildError::new(format!("ssh: {e}")))?;
        let _ = std::fs::remove_dir_all(&stage);
        if status.success() {
            Ok(())
        } else {
            Err(BuildError {
                message: format!(
                    "{} failed on the builder instance ({status}); output in {}",
                    step.label,
                    log.display()
                ),
                output: Some(crate::progress::tail(log, 40)),
            })
        }
    }
}
