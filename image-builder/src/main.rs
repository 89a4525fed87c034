//! hpc-image: bake, verify and publish HPC machine images.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use hpc_image::local::{BuildReport, Cache, LocalBuild};
use hpc_image::plan::{self, Plan, SourceConfig};
use hpc_image::progress::{secs, Progress};
use hpc_image::publish::{self, Manifest, ManifestBuild, ManifestComponent, PublishReport};
use hpc_image::template::{self, VarInputs};
use hpc_image::{catalog, ebs_builder, verify};

const USAGE: &str = "usage:
  hpc-image validate TEMPLATE [-var NAME=VALUE]... [-var-file FILE]...
  hpc-image build TEMPLATE [-var ...] [-var-file ...] [--only SOURCE] [--output DIR]
                  [--cache-dir DIR] [--no-cache] [--log-file FILE] [--on-error cleanup|keep]
                  [--publish] [--manifest FILE]
  hpc-image publish TEMPLATE --disk FILE [-var ...] [--manifest FILE]
  hpc-image cache list|prune [--cache-dir DIR] [--older-than DURATION | --all]
  hpc-image components
  hpc-image --version";

#[derive(Debug, Default)]
struct Args {
    command: String,
    template: Option<PathBuf>,
    vars: VarInputs,
    only: Option<String>,
    output: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    log_file: Option<PathBuf>,
    keep_on_error: bool,
    publish: bool,
    manifest: Option<PathBuf>,
    disk: Option<PathBuf>,
    cache_action: Option<String>,
    older_than: Option<Duration>,
    all: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    a.command = it.next().ok_or_else(|| USAGE.to_string())?;
    let value = |it: &mut dyn Iterator<Item = String>, flag: &str| {
        it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-var" | "--var" => {
                let v = value(&mut it, "-var")?;
                let (k, val) = v
                    .split_once('=')
                    .ok_or_else(|| format!("-var {v:?}: write -var NAME=VALUE"))?;
                a.vars.vars.push((k.to_string(), val.to_string()));
            }
            "-var-file" | "--var-file" => a.vars.files.push(PathBuf::from(value(&mut it, "-var-file")?)),
            "--only" => a.only = Some(value(&mut it, "--only")?),
            "--output" => a.output = Some(PathBuf::from(value(&mut it, "--output")?)),
            "--cache-dir" => a.cache_dir = Some(PathBuf::from(value(&mut it, "--cache-dir")?)),
            "--no-cache" => a.no_cache = true,
            "--log-file" => a.log_file = Some(PathBuf::from(value(&mut it, "--log-file")?)),
            "--on-error" => {
                a.keep_on_error = match value(&mut it, "--on-error")?.as_str() {
                    "keep" => true,
                    "cleanup" => false,
                    other => return Err(format!("--on-error {other:?}: use cleanup or keep")),
                }
            }
            "--publish" => a.publish = true,
            "--manifest" => a.manifest = Some(PathBuf::from(value(&mut it, "--manifest")?)),
            "--disk" => a.disk = Some(PathBuf::from(value(&mut it, "--disk")?)),
            "--older-than" => {
                let v = value(&mut it, "--older-than")?;
                a.older_than = Some(
                    plan::parse_duration(&v)
                        .ok_or_else(|| format!("--older-than {v:?}: use a duration like 7d, 12h or 30m"))?,
                );
            }
            "--all" => a.all = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{USAGE}")),
            s => {
                if a.command == "cache" && a.cache_action.is_none() {
                    a.cache_action = Some(s.to_string());
                } else if a.template.is_none() {
                    a.template = Some(PathBuf::from(s));
                } else {
                    return Err(format!("unexpected argument {s:?}\n{USAGE}"));
                }
            }
        }
    }
    Ok(a)
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

fn default_cache_dir() -> PathBuf {
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

fn load(args: &Args) -> Result<(template::Template, Plan), String> {
    let path = args
        .template
        .as_ref()
        .ok_or_else(|| format!("which template?\n{USAGE}"))?;
    let report = |p: template::Problems| format!("{} problem(s) in the template:\n{p}", p.0.len());
    let (t, mut problems) = template::load_all(path, &args.vars).map_err(report)?;
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

fn validate(args: &Args) -> Result<(), String> {
    let (t, plan) = load(args)?;
    let steps: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    let sources: Vec<String> = plan.sources.iter().map(SourceConfig::reference).collect();
    println!(
        "{}: ok — sources {}; steps in order: {}{}",
        t.path.display(),
        sources.join(", "),
        steps.join(" → "),
        match &plan.publish {
            Some(p) => format!("; publishes {:?} to {}", p.ami_name, p.regions.join(", ")),
            None => String::new(),
        }
    );
    Ok(())
}

fn components() {
    for c in catalog::COMPONENTS {
        println!("{} {} — {}", c.name, c.version, c.summary);
        if !c.requires.is_empty() {
            println!("    requires: {}", c.requires.join(", "));
        }
        for a in c.args {
            println!(
                "    {} = {}  {}",
                a.name,
                a.default.map_or("(no default)".to_string(), |d| format!("{d:?}")),
                a.help
            );
        }
    }
}

fn cache(args: &Args) -> Result<(), String> {
    let cache = Cache {
        dir: args.cache_dir.clone().unwrap_or_else(default_cache_dir),
    };
    match args.cache_action.as_deref() {
        Some("list") => {
            let layers = cache.list();
            let total: u64 = layers.iter().map(|(l, _)| l.bytes).sum();
            for (l, _) in &layers {
                println!("{}  {:>8} MiB  {}", &l.key[..16], l.bytes >> 20, l.step);
            }
            println!(
                "{} layer(s), {} MiB in {}",
                layers.len(),
                total >> 20,
                cache.dir.display()
            );
            Ok(())
        }
        Some("prune") => {
            let older = match (args.all, args.older_than) {
                (true, _) => Duration::ZERO,
                (false, Some(d)) => d,
                (false, None) => return Err("cache prune needs --older-than DURATION (e.g. 7d) or --all".into()),
            };
            let (n, bytes) = cache.prune(older);
            println!("removed {n} layer(s), {} MiB", bytes >> 20);
            Ok(())
        }
        _ => Err(format!("cache list or cache prune?\n{USAGE}")),
    }
}

async fn connect(region: &str) -> Result<hpc_aws::Aws, String> {
    hpc_aws::Aws::connect(&hpc_aws::Settings {
        region: Some(region.to_string()),
        max_retries: 8,
        ..Default::default()
    })
    .await
    .map_err(|e| e.to_string())
}

fn manifest_for(plan: &Plan, source: &str, builder: &str, ami_name: &str, report: &PublishReport) -> Manifest {
    let run = uuid::Uuid::new_v4().to_string();
    Manifest {
        builds: vec![ManifestBuild {
            name: source.to_string(),
            builder_type: builder.to_string(),
            build_time: hpc_image::local::unix_now(),
            artifact_id: publish::artifact_id(&report.images),
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

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::write(path, text + "\n").map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The Slurm version in the build report written beside `disk` (None: no report, or no Slurm).
fn built_slurm_version(disk: &Path) -> Option<String> {
    let report = std::fs::read(disk.with_file_name("build-report.json")).ok()?;
    let report: serde_json::Value = serde_json::from_slice(&report).ok()?;
    report["slurm_version"].as_str().map(str::to_string)
}

async fn publish_disk(
    args: &Args,
    plan: &Plan,
    source: &str,
    disk: &Path,
    progress: &mut Progress,
) -> Result<PublishReport, String> {
    let cfg = plan
        .publish
        .as_ref()
        .ok_or("the template has no publish block: add publish { ami_name = ... regions = [...] }")?;
    let t = progress.step(
        1,
        1,
        &format!("publishing {} to {}", cfg.ami_name, cfg.regions.join(", ")),
    );
    let aws = connect(&cfg.regions[0]).await?;
    // The image's Slurm, as the build that wrote the disk found it, goes on the AMI: the
    // provider refuses at plan a cluster whose slurm.version differs.
    let mut cfg = cfg.clone();
    if let Some(version) = built_slurm_version(disk) {
        progress.say(&format!(
            "Slurm {version} (tag {})",
            hpc_desired_state::SLURM_VERSION_TAG
        ));
        cfg.tags.insert(hpc_desired_state::SLURM_VERSION_TAG.into(), version);
    }
    let cfg = &cfg;
    let mut lines = Vec::new();
    let result = publish::publish(&aws, cfg, Some(disk), &plan.template_sha256, &mut |l: &str| {
        lines.push(l.to_string())
    })
    .await;
    for l in lines {
        progress.say(&l);
    }
    let report = result.map_err(|e| e.to_string())?;
    progress.done("published", t);
    let manifest = manifest_for(plan, source, "local", &cfg.ami_name, &report);
    let path = args
        .manifest
        .clone()
        .unwrap_or_else(|| disk.parent().unwrap_or(Path::new(".")).join("manifest.json"));
    write_json(&path, &manifest)?;
    progress.say(&format!("manifest: {}", path.display()));
    Ok(report)
}

async fn build(args: &Args) -> Result<(), String> {
    let (_t, plan) = load(args)?;
    let sources: Vec<&SourceConfig> = plan
        .sources
        .iter()
        .filter(|s| {
            args.only
                .as_ref()
                .is_none_or(|o| s.reference().ends_with(&format!(".{o}")) || &s.reference() == o)
        })
        .collect();
    if sources.is_empty() {
        return Err(format!(
            "--only {:?} matches no source of the build",
            args.only.as_deref().unwrap_or("")
        ));
    }
    for source in sources {
        match source {
            SourceConfig::Local(src) => {
                let out = args
                    .output
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("output").join(&src.name));
                let log = args.log_file.clone().unwrap_or_else(|| out.join("build.log"));
                let mut progress = Progress::new(&log, false).map_err(|e| format!("{}: {e}", log.display()))?;
                progress.say(&format!(
                    "hpc-image: building {} into {}",
                    source.reference(),
                    out.display()
                ));
                let b = LocalBuild {
                    source: src,
                    steps: &plan.steps,
                    cache: Cache {
                        dir: args.cache_dir.clone().unwrap_or_else(default_cache_dir),
                    },
                    use_cache: !args.no_cache,
                    out_dir: out.clone(),
                };
                // Ctrl-C drops the build: its chroot guard unmounts and its children are killed.
                let result = tokio::select! {
                    r = b.run(&mut progress) => r,
                    _ = interrupted() => Err(hpc_image::local::BuildError::new("interrupted; chroot mounts were undone")),
                };
                let mut report: BuildReport = match result {
                    Ok(r) => r,
                    Err(e) => {
                        // Mounts first (an interrupted debootstrap leaves its own), then files.
                        let cleanup = if args.keep_on_error {
                            hpc_image::local::unmount_all_under(&out.join("work"))
                        } else {
                            hpc_image::local::remove_tree(&out.join("work"))
                        };
                        let note = match cleanup {
                            Ok(()) if args.keep_on_error => {
                                format!("\nwork directory kept: {}", out.join("work").display())
                            }
                            Ok(()) => String::new(),
                            Err(c) => format!("\n{c}"),
                        };
                        return Err(format!("{e}{note}\nlog: {}", progress.log_path.display()));
                    }
                };
                if src.verify {
                    let t = progress.step(1, 1, "verifying: booting the image under qemu");
                    let boot = verify::Boot {
                        disk: &report.disk,
                        work: &out.join("verify"),
                        memory_mib: src.memory_mib,
                        cpus: src.cpus,
                        timeout: src.verify_timeout,
                    };
                    let v = tokio::select! {
                        r = boot.run() => r.map_err(|e| e.to_string())?,
                        _ = interrupted() => return Err("interrupted; the qemu guest was stopped".into()),
                    };
                    for c in &v.checks {
                        progress.say(&format!(
                            "    {} {} ({}s){}",
                            if c.ok { "ok  " } else { "FAIL" },
                            c.name,
                            c.seconds,
                            if c.ok {
                                String::new()
                            } else {
                                format!(", exit {}", c.exit_code)
                            }
                        ));
                    }
                    progress.done(&format!("booted with {}", v.accelerator), t);
                    let failed: Vec<String> = v.checks.iter().filter(|c| !c.ok).map(|c| c.name.clone()).collect();
                    let details: Vec<String> = v
                        .checks
                        .iter()
                        .filter(|c| !c.ok)
                        .map(|c| format!("--- check {} (exit {}) ---\n{}", c.name, c.exit_code, c.output))
                        .collect();
                    report.verify = Some(v);
                    write_json(&out.join("build-report.json"), &report)?;
                    if !failed.is_empty() {
                        return Err(format!(
                            "verification failed: {}\n{}\nthe disk is kept at {} for inspection",
                            failed.join(", "),
                            details.join("\n"),
                            report.disk.display()
                        ));
                    }
                }
                report.seconds = progress.elapsed().as_secs_f64();
                write_json(&out.join("build-report.json"), &report)?;
                progress.say(&format!(
                    "built {} in {} ({} layer(s) reused, {} built); report: {}",
                    report.disk.display(),
                    secs(progress.elapsed()),
                    report.layers_reused,
                    report.layers_built,
                    out.join("build-report.json").display()
                ));
                if args.publish {
                    publish_disk(args, &plan, &source.reference(), &report.disk, &mut progress).await?;
                }
            }
            SourceConfig::Ebs(src) => {
                let cfg = plan
                    .publish
                    .as_ref()
                    .ok_or("an amazon-ebs build needs a publish block (the AMI name and regions)")?;
                let out = args
                    .output
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("output").join(&src.name));
                let log = args.log_file.clone().unwrap_or_else(|| out.join("build.log"));
                let mut progress = Progress::new(&log, false).map_err(|e| format!("{}: {e}", log.display()))?;
                let aws = connect(&src.region).await?;
                let b = ebs_builder::EbsBuild {
                    aws: &aws,
                    source: src,
                    steps: &plan.steps,
                    publish: cfg,
                    template_sha256: &plan.template_sha256,
                    work: out.join("work"),
                };
                let mut res = ebs_builder::Resources::default();
                let result = tokio::select! {
                    r = b.run(&mut res, &mut progress) => r.map_err(|e| e.to_string()),
                    _ = interrupted() => Err("interrupted".to_string()),
                };
                let leftovers = res.teardown(&aws, &src.region).await;
                progress.say(if leftovers.is_empty() {
                    "    builder instance, key pair and security group removed"
                } else {
                    "    cleanup was incomplete:"
                });
                for l in &leftovers {
                    progress.say(&format!("      {l}"));
                }
                let image = result?;
                if !leftovers.is_empty() {
                    return Err(format!("built {image}, but removing the builder's resources failed"));
                }
                let mut cfg = cfg.clone();
                // The image exists in the builder's region: publish copies it from there.
                cfg.regions.retain(|r| r != &src.region);
                cfg.regions.insert(0, src.region.clone());
                let mut lines = Vec::new();
                let result = publish::publish(&aws, &cfg, None, &plan.template_sha256, &mut |l: &str| {
                    lines.push(l.to_string())
                })
                .await;
                for l in lines {
                    progress.say(&l);
                }
                let report = result.map_err(|e| e.to_string())?;
                let manifest = manifest_for(&plan, &source.reference(), "amazon-ebs", &cfg.ami_name, &report);
                write_json(
                    &args.manifest.clone().unwrap_or_else(|| out.join("manifest.json")),
                    &manifest,
                )?;
            }
        }
    }
    Ok(())
}

async fn publish_cmd(args: &Args) -> Result<(), String> {
    let (_t, plan) = load(args)?;
    let disk = args
        .disk
        .clone()
        .ok_or("publish needs --disk FILE (the disk.raw a build wrote)")?;
    if !disk.is_file() {
        return Err(format!(
            "{} does not exist: build it first with hpc-image build",
            disk.display()
        ));
    }
    let source = plan
        .sources
        .iter()
        .find(|s| matches!(s, SourceConfig::Local(_)))
        .map_or("local".to_string(), SourceConfig::reference);
    let log = args
        .log_file
        .clone()
        .unwrap_or_else(|| disk.parent().unwrap_or(Path::new(".")).join("publish.log"));
    let mut progress = Progress::new(&log, false).map_err(|e| format!("{}: {e}", log.display()))?;
    publish_disk(args, &plan, &source, &disk, &mut progress)
        .await
        .map(|_| ())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if args.command == "--version" || args.command == "version" {
        println!("hpc-image {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hpc-image: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match args.command.as_str() {
            "validate" => validate(&args),
            "components" => {
                components();
                Ok(())
            }
            "cache" => cache(&args),
            "publish" => publish_cmd(&args).await,
            "build" => build(&args).await,
            "-h" | "--help" | "help" => {
                println!("{USAGE}");
                Ok(())
            }
            other => Err(format!("unknown command {other:?}\n{USAGE}")),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hpc-image: {e}");
            ExitCode::FAILURE
        }
    }
}
