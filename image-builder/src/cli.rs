//! hpc-image's command line: one subcommand per job, typed arguments, `--help` on each.
//! Template variables are given Packer's way (`-var NAME=VALUE`, `-var-file FILE`) or with
//! two dashes.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::template::VarInputs;

#[derive(Debug, Parser)]
#[command(
    name = "hpc-image",
    version,
    about = "Bakes, boot-verifies and publishes hpcforge's node images from HCL2 templates."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments, taking Packer's single-dash `-var` and `-var-file`.
    pub fn from_env() -> Cli {
        Cli::parse_from(packer_style(std::env::args()))
    }
}

/// `-var` and `-var-file` (Packer's spelling) as the `--var` and `--var-file` clap knows.
pub fn packer_style(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter()
        .map(|a| match a.as_str() {
            "-var" => "--var".to_string(),
            "-var-file" => "--var-file".to_string(),
            _ => a,
        })
        .collect()
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Checks a template (variables, sources, components and their order) without building.
    Validate(TemplateArgs),
    /// Bakes the template's sources (local: debootstrap and chroot, then a qemu boot check;
    /// amazon-ebs: on an EC2 instance), and publishes with --publish.
    Build(BuildArgs),
    /// Publishes a disk a build wrote: EBS direct upload, RegisterImage, copies and sharing.
    Publish(PublishArgs),
    /// Lists or prunes the local builder's layer cache.
    Cache(CacheArgs),
    /// Lists the components a template can use, with their arguments.
    Components,
}

/// The template and its variables.
#[derive(Debug, Clone, Args)]
pub struct TemplateArgs {
    /// The HCL2 template (`*.pkr.hcl`).
    pub template: PathBuf,
    /// A variable's value (`-var NAME=VALUE`), after the var files; repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// A file of variable values (`NAME = VALUE` lines, HCL); repeatable, later ones win.
    #[arg(long = "var-file", value_name = "FILE")]
    pub var_files: Vec<PathBuf>,
}

impl TemplateArgs {
    pub fn inputs(&self) -> VarInputs {
        VarInputs {
            vars: self.vars.clone(),
            files: self.var_files.clone(),
        }
    }
}

fn parse_var(v: &str) -> Result<(String, String), String> {
    v.split_once('=')
        .map(|(k, val)| (k.to_string(), val.to_string()))
        .ok_or_else(|| format!("{v:?}: write -var NAME=VALUE"))
}

/// What a failed build leaves behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OnError {
    /// Unmount and remove the work directory.
    #[default]
    Cleanup,
    /// Unmount, and keep the work directory for inspection.
    Keep,
}

#[derive(Debug, Clone, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub template: TemplateArgs,
    /// Build only this source (`local.NAME`, or its NAME).
    #[arg(long)]
    pub only: Option<String>,
    /// Where the disk, the report and the logs go (default `output/<source name>`).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The layer cache (default `$HPC_IMAGE_CACHE`, else `$XDG_CACHE_HOME/hpc-image`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Build every step again, without reading the cache.
    #[arg(long)]
    pub no_cache: bool,
    /// The build log (default `<output>/build.log`).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// What a failed build leaves behind.
    #[arg(long, value_enum, default_value_t = OnError::Cleanup)]
    pub on_error: OnError,
    /// Publish the image when the build (and its verification) succeeds.
    #[arg(long)]
    pub publish: bool,
    /// Where the manifest goes (default beside the disk).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub template: TemplateArgs,
    /// The disk.raw a build wrote.
    #[arg(long)]
    pub disk: PathBuf,
    /// Where the manifest goes (default beside the disk).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// The publish log (default `publish.log` beside the disk).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub action: CacheAction,
    /// The layer cache (default `$HPC_IMAGE_CACHE`, else `$XDG_CACHE_HOME/hpc-image`).
    #[arg(long, global = true)]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum CacheAction {
    /// Each layer's key, size and step.
    List,
    /// Removes layers not used for a while, or all of them.
    #[command(group = clap::ArgGroup::new("which").required(true).args(["older_than", "all"]))]
    Prune {
        /// Layers not used for this long, e.g. `7d`, `12h`, `30m`.
        #[arg(long, value_parser = parse_age)]
        older_than: Option<Duration>,
        /// Every layer.
        #[arg(long)]
        all: bool,
    },
}

fn parse_age(v: &str) -> Result<Duration, String> {
    crate::plan::parse_duration(v).ok_or_else(|| format!("{v:?}: use a duration like 7d, 12h or 30m"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(packer_style(line.split_whitespace().map(str::to_string)))
    }

    #[test]
    fn packer_style_variables_and_options_in_any_order() {
        let cli = parse("hpc-image build t.pkr.hcl -var verify=false --cache-dir /c -var-file v.hcl -var a=b=c")
            .expect("parses");
        let Command::Build(b) = cli.command else {
            panic!("build")
        };
        assert_eq!(b.template.template, PathBuf::from("t.pkr.hcl"));
        let inputs = b.template.inputs();
        assert_eq!(
            inputs.vars,
            vec![("verify".into(), "false".into()), ("a".into(), "b=c".into())]
        );
        assert_eq!(inputs.files, vec![PathBuf::from("v.hcl")]);
        assert_eq!(b.cache_dir, Some(PathBuf::from("/c")));
        assert_eq!(b.on_error, OnError::Cleanup);
    }

    #[test]
    fn bad_arguments_say_what_to_write() {
        let e = parse("hpc-image validate t.pkr.hcl -var novalue").expect_err("no =");
        assert!(e.to_string().contains("write -var NAME=VALUE"), "{e}");
        let e = parse("hpc-image cache prune").expect_err("prune needs an age or --all");
        assert!(e.to_string().contains("--older-than"), "{e}");
        let e = parse("hpc-image cache prune --older-than soon").expect_err("bad age");
        assert!(e.to_string().contains("use a duration like 7d"), "{e}");
        let e = parse("hpc-image publish t.pkr.hcl").expect_err("publish needs a disk");
        assert!(e.to_string().contains("--disk"), "{e}");
        let e = parse("hpc-image build t.pkr.hcl --on-error maybe").expect_err("on-error");
        assert!(e.to_string().contains("keep"), "{e}");
    }

    #[test]
    fn every_command_has_help() {
        for cmd in ["validate", "build", "publish", "cache", "components"] {
            let e = parse(&format!("hpc-image {cmd} --help")).expect_err("help exits");
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{cmd}");
        }
        let cache = parse("hpc-image cache --cache-dir /c list").expect("global cache dir");
        assert!(matches!(cache.command, Command::Cache(c) if c.cache_dir == Some(PathBuf::from("/c"))));
    }
}
