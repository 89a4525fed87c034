//! `hpc-image build`: each source of the template baked (local: debootstrap, chroot layers,
//! a raw disk, a qemu boot running every component's check; amazon-ebs: an EC2 builder), then
//! published with `--publish`.

use std::path::{Path, PathBuf};

use super::{cache_dir, connect, interrupted, load, manifest_for, write_json, Error, Result};
use crate::cli::{BuildArgs, OnError};
use crate::local::{BuildReport, Cache, LocalBuild};
use crate::plan::{EbsSource, LocalSource, Plan, SourceConfig};
use crate::progress::{secs, Progress};
use crate::{ebs_builder, publish, verify};

pub async fn run(args: &BuildArgs) -> Result<()> {
    let (_t, plan) = load(&args.template)?;
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
        return Err(Error(format!(
            "--only {:?} matches no source of the build",
            args.only.as_deref().unwrap_or("")
        )));
    }
    for source in sources {
        match source {
            SourceConfig::Local(src) => build_local(args, &plan, src, &source.reference()).await?,
            SourceConfig::Ebs(src) => build_ebs(args, &plan, src, &source.reference()).await?,
        }
    }
    Ok(())
}

/// `--output`, or `output/<source name>`.
fn output_dir(args: &BuildArgs, name: &str) -> PathBuf {
    args.output
        .clone()
        .unwrap_or_else(|| PathBuf::from("output").join(name))
}

fn progress_for(args: &BuildArgs, out: &Path) -> Result<Progress> {
    let log = args.log_file.clone().unwrap_or_else(|| out.join("build.log"));
    Progress::new(&log, false).map_err(|e| Error(format!("{}: {e}", log.display())))
}

async fn build_local(args: &BuildArgs, plan: &Plan, src: &LocalSource, reference: &str) -> Result<()> {
    let out = output_dir(args, &src.name);
    let mut progress = progress_for(args, &out)?;
    progress.say(&format!("hpc-image: building {reference} into {}", out.display()));
    let b = LocalBuild {
        source: src,
        steps: &plan.steps,
        cache: Cache {
            dir: cache_dir(args.cache_dir.as_ref()),
        },
        use_cache: !args.no_cache,
        out_dir: out.clone(),
    };
    // Ctrl-C drops the build: its chroot guard unmounts and its children are killed.
    let result = tokio::select! {
        r = b.run(&mut progress) => r,
        _ = interrupted() => Err(crate::host::BuildError::new("interrupted; chroot mounts were undone")),
    };
    let mut report = match result {
        Ok(r) => r,
        Err(e) => return Err(failed(args, &out, &progress, &e.to_string())),
    };
    if src.verify {
        verify_disk(src, &out, &mut report, &mut progress).await?;
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
        super::publish::publish_disk(plan, reference, &report.disk, args.manifest.as_ref(), &mut progress).await?;
    }
    Ok(())
}

/// A failed local build's error, after unmounting (an interrupted debootstrap leaves its own
/// mounts) and removing or keeping the work directory as `--on-error` says.
fn failed(args: &BuildArgs, out: &Path, progress: &Progress, error: &str) -> Error {
    let work = out.join("work");
    let keep = args.on_error == OnError::Keep;
    let cleanup = if keep {
        crate::local::unmount_all_under(&work)
    } else {
        crate::local::remove_tree(&work)
    };
    let note = match cleanup {
        Ok(()) if keep => format!("\nwork directory kept: {}", work.display()),
        Ok(()) => String::new(),
        Err(c) => format!("\n{c}"),
    };
    Error(format!("{error}{note}\nlog: {}", progress.log_path.display()))
}

/// Boots the disk under qemu and runs every component's check; the report records them, and
/// a failed check fails the build (the disk is kept).
async fn verify_disk(src: &LocalSource, out: &Path, report: &mut BuildReport, progress: &mut Progress) -> Result<()> {
    let t = progress.step(1, 1, "verifying: booting the image under qemu");
    let boot = verify::Boot {
        disk: &report.disk,
        work: &out.join("verify"),
        memory_mib: src.memory_mib,
        cpus: src.cpus,
        timeout: src.verify_timeout,
    };
    let v = tokio::select! {
        r = boot.run() => r.map_err(|e| Error(e.to_string()))?,
        _ = interrupted() => return Err("interrupted; the qemu guest was stopped".into()),
    };
    for c in &v.checks {
        let how = if c.ok {
            String::new()
        } else {
            format!(", exit {}", c.exit_code)
        };
        let mark = if c.ok { "ok  " } else { "FAIL" };
        progress.say(&format!("    {mark} {} ({}s){how}", c.name, c.seconds));
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
    write_json(&out.join("build-report.json"), &*report)?;
    if !failed.is_empty() {
        return Err(Error(format!(
            "verification failed: {}\n{}\nthe disk is kept at {} for inspection",
            failed.join(", "),
            details.join("\n"),
            report.disk.display()
        )));
    }
    Ok(())
}

/// An amazon-ebs source: built on an EC2 instance (always torn down), then published from the
/// builder's region.
async fn build_ebs(args: &BuildArgs, plan: &Plan, src: &EbsSource, reference: &str) -> Result<()> {
    let cfg = plan
        .publish
        .as_ref()
        .ok_or("an amazon-ebs build needs a publish block (the AMI name and regions)")?;
    let out = output_dir(args, &src.name);
    let mut progress = progress_for(args, &out)?;
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
        return Err(Error(format!(
            "built {image}, but removing the builder's resources failed"
        )));
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
    let report = result.map_err(|e| Error(e.to_string()))?;
    let manifest = manifest_for(plan, reference, "amazon-ebs", &cfg.ami_name, &report);
    write_json(
        &args.manifest.clone().unwrap_or_else(|| out.join("manifest.json")),
        &manifest,
    )
}
