//! The commands: each module turns one subcommand's arguments into work; this module holds
//! what several of them share (loading a template, the cache's place, Ctrl-C, AWS, files).

mod build;
mod cache;
mod components;
mod publish;
mod validate;

use std::path::{Path, PathBuf};

use crate::cli::{Command, TemplateArgs};
use crate::plan::{self, Plan, SourceConfig};
use crate::publish::{Manifest, ManifestBuild, ManifestComponent, PublishReport};
use crate::template::{self, Template};

/// A command's failure: what went wrong, with the context each step added.
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Error(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Error(s.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Runs one command to its end.
pub async fn run(command: &Command) -> Result<()> {
    match command {
        Command::Validate(t) => validate::run(t),
        Command::Build(b) => build::run(b).await,
        Command::Publish(p) => publish::run(p).await,
        Command::Cache(c) => cache::run(c),
        Command::Components => {
            components::run();
            Ok(())
        }
    }
}

/// The template and its plan, or every problem found in them.
fn load(args: &TemplateArgs) -> Result<(Template, Plan)> {
    let report = |p: template::Problems| Error(format!("{} problem(s) in the template:\n{p}", p.0.len()));
    let (t, mut problems) = template::load_all(&args.template, &args.inputs()).map_err(report)?;
    match plan::resolve(&t) {
        Ok(plan) if problems.is_empty() => Ok((t, plan)),
        Ok(_) => Err(report(template::Problems(problems))),
        Err(more) => {
            problems.extend(more.0);
            problems.sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
            problems.dedup();
            Err(report(template::Problems(problems)))
        }
    }
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM, so both undo mounts and remove temporary resources.
async fn interrupted() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// The layer cache: `--cache-dir`, else `$HPC_IMAGE_CACHE`, else the user's cache folder.
fn cache_dir(given: Option<&PathBuf>) -> PathBuf {
    if let Some(d) = given {
        return d.clone();
    }
    if let Some(d) = std::env::var_os("HPC_IMAGE_CACHE") {
        return PathBuf::from(d);
    }
    match std::env::var_os("XDG_CACHE_HOME") {
        Some(d) => PathBuf::from(d).join("hpc-image"),
        None => match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".cache/hpc-image"),
            None => PathBuf::from("/var/cache/hpc-image"),
        },
    }
}

async fn connect(region: &str) -> Result<hpc_aws::Aws> {
    hpc_aws::Aws::connect(&hpc_aws::Settings {
        region: Some(region.to_string()),
        max_retries: 8,
        ..Default::default()
    })
    .await
    .map_err(|e| Error(format!("connecting to AWS in {region}: {e}")))
}

/// The Packer-style manifest of what a build published.
fn manifest_for(plan: &Plan, source: &str, builder: &str, ami_name: &str, report: &PublishReport) -> Manifest {
    let run = uuid::Uuid::new_v4().to_string();
    Manifest {
        builds: vec![ManifestBuild {
            name: source.to_string(),
            builder_type: builder.to_string(),
            build_time: crate::local::unix_now(),
            artifact_id: crate::publish::artifact_id(&report.images),
            packer_run_uuid: run.clone(),
            images: report.images.clone(),
            ami_name: ami_name.to_string(),
            components: plan
                .steps
                .iter()
                .filter(|s| s.check.is_some())
                .map(|s| ManifestComponent {
                    name: s.id.clone(),
                    version: s.version.clone(),
                    args: s.args.clone(),
                })
                .collect(),
            template_sha256: plan.template_sha256.clone(),
            upload: report.upload.clone(),
        }],
        last_run_uuid: run,
    }
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error(e.to_string()))?;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| Error(format!("{}: {e}", d.display())))?;
    }
    std::fs::write(path, text + "\n").map_err(|e| Error(format!("writing {}: {e}", path.display())))
}

/// The source a disk was built from, for the manifest.
fn local_source(plan: &Plan) -> String {
    plan.sources
        .iter()
        .find(|s| matches!(s, SourceConfig::Local(_)))
        .map_or("local".to_string(), SourceConfig::reference)
}
