//! From a parsed template to a build plan: sources with typed settings, the steps in the
//! order they run (components ordered by what they need, provisioners kept where they are),
//! each step's script, staged files and cache key inputs, and the publish settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hcl::Value;
use sha2::{Digest, Sha256};

use crate::catalog::{self, ArgKind, Component};
use crate::template::{ArgReader, Problem, Problems, Source, StepDecl, Template};

/// The hpc-node agent's systemd units, baked with the binary.
const AGENT_UNITS: &[(&str, &str)] = &[
    (
        "hpc-node-imds.service",
        include_str!("../../node-agent/systemd/hpc-node-imds.service"),
    ),
    (
        "hpc-node-reconcile.service",
        include_str!("../../node-agent/systemd/hpc-node-reconcile.service"),
    ),
    (
        "hpc-node-events.service",
        include_str!("../../node-agent/systemd/hpc-node-events.service"),
    ),
    (
        "hpc-node-sweep.service",
        include_str!("../../node-agent/systemd/hpc-node-sweep.service"),
    ),
    (
        "hpc-node-sweep.timer",
        include_str!("../../node-agent/systemd/hpc-node-sweep.timer"),
    ),
    (
        "hpc-node-evict.service",
        include_str!("../../node-agent/systemd/hpc-node-evict.service"),
    ),
    (
        "hpc-node-evict.timer",
        include_str!("../../node-agent/systemd/hpc-node-evict.timer"),
    ),
    (
        "hpc-node-sync.service",
        include_str!("../../node-agent/systemd/hpc-node-sync.service"),
    ),
    (
        "hpc-node-sync.timer",
        include_str!("../../node-agent/systemd/hpc-node-sync.timer"),
    ),
];

pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
const SUITES: &[&str] = &["bookworm", "trixie", "forky"];

#[derive(Debug, Clone, PartialEq)]
pub struct LocalSource {
    pub name: String,
    pub suite: String,
    pub mirror: String,
    pub disk_size: u64,
    /// Extra Debian packages for the base layer.
    pub packages: Vec<String>,
    /// Whether apt refuses Release files past their Valid-Until date (default true). A snapshot
    /// mirror (snapshot.debian.org, or a frozen copy) serves a testing suite's expired ones:
    /// `check_valid_until = false` lets the build use them; the image keeps apt's default.
    pub check_valid_until: bool,
    pub verify: bool,
    pub verify_timeout: Duration,
    pub memory_mib: u64,
    pub cpus: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AmiFilter {
    pub name: String,
    pub owners: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EbsSource {
    pub name: String,
    pub region: String,
    pub instance_type: String,
    pub source_ami: Option<String>,
    pub source_ami_filter: Option<AmiFilter>,
    pub subnet_id: Option<String>,
    /// `ssh` (the only communicator for now).
    pub communicator: String,
    pub ssh_username: String,
    /// Where SSH may come from (the builder's address); never 0.0.0.0/0.
    pub ssh_cidrs: Vec<String>,
    pub iam_instance_profile: Option<String>,
    pub root_volume_gib: i32,
    pub ssh_timeout: Duration,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SourceConfig {
    Local(LocalSource),
    Ebs(EbsSource),
}

impl SourceConfig {
    pub fn reference(&self) -> String {
        match self {
            SourceConfig::Local(s) => format!("source.local.{}", s.name),
            SourceConfig::Ebs(s) => format!("source.amazon-ebs.{}", s.name),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PublishConfig {
    pub ami_name: String,
    pub description: String,
    /// The first region is where the image is registered; the rest get copies.
    pub regions: Vec<String>,
    pub share_with_accounts: Vec<String>,
    pub tags: BTreeMap<String, String>,
    pub encrypted: bool,
    pub kms_key_id: Option<String>,
    pub upload_concurrency: usize,
    pub copy_concurrency: usize,
}

/// What a staged file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum FileContent {
    Path(PathBuf),
    Text(String),
}

/// A file put under $HPC_FILES before a step runs.
#[derive(Debug, Clone, PartialEq)]
pub struct StagedFile {
    /// Relative path under $HPC_FILES.
    pub name: String,
    pub content: FileContent,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Unique within the build: the component name, or `shell@<line>`, `file@<line>`.
    pub id: String,
    /// For people: `component "slurm"`.
    pub label: String,
    pub version: String,
    /// The whole script run as root in the target, environment included.
    pub script: String,
    pub files: Vec<StagedFile>,
    /// Verification script run in the booted image (components only).
    pub check: Option<String>,
    /// Arguments as given (for the manifest).
    pub args: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub template_sha256: String,
    pub sources: Vec<SourceConfig>,
    pub steps: Vec<Step>,
    pub publish: Option<PublishConfig>,
}

/// Single-quotes a value for sh.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// "4G", "512M", "4096MiB", or a number of bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// "90s", "15m", "1h", "7d", or seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86400)?,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

fn is_account(s: &str) -> bool {
    s.len() == 12 && s.chars().all(|c| c.is_ascii_digit())
}

/// The Debian mirror the host's apt uses (deb822 sources or sources.list), else deb.debian.org.
pub fn host_mirror() -> String {
    let mut texts = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if p.extension().is_some_and(|x| x == "sources" || x == "list") {
                texts.push(std::fs::read_to_string(p).unwrap_or_default());
            }
        }
    }
    texts.push(std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default());
    texts
        .iter()
        .find_map(|t| mirror_in(t))
        .unwrap_or_else(|| DEFAULT_MIRROR.to_string())
}

/// The first Debian archive URI (not security, not a third-party repository) in an apt source.
pub fn mirror_in(text: &str) -> Option<String> {
    let is_archive = |u: &str| {
        (u.starts_with("http://") || u.starts_with("https://"))
            && u.trim_end_matches('/').ends_with("/debian")
            && !u.contains("security")
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let uris: Vec<&str> = if let Some(rest) = line.strip_prefix("URIs:") {
            rest.split_whitespace().collect()
        } else if line.starts_with("deb ") {
            line.split_whitespace().filter(|w| w.contains("://")).take(1).collect()
        } else {
            continue;
        };
        if let Some(u) = uris.into_iter().find(|u| is_archive(u)) {
            return Some(u.trim_end_matches('/').to_string());
        }
    }
    None
}

/// Where the hpc-node binary to bake is found when the template does not say.
pub fn default_agent_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HPC_NODE_BINARY") {
        return Some(PathBuf::from(p));
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join("hpc-node"));
        }
    }
    for profile in ["release", "debug"] {
        candidates.push(PathBuf::from("target").join(profile).join("hpc-node"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

struct Resolver<'a> {
    t: &'a Template,
    file: String,
    problems: Vec<Problem>,
}

impl Resolver<'_> {
    fn reader<'b>(&'b self, block: String, line: usize, args: &'b crate::template::Args) -> ArgReader<'b> {
        ArgReader::new(&self.file, block, line, args)
    }

    fn absorb(&mut self, problems: Vec<Problem>) {
        self.problems.extend(problems);
    }

    fn source(&mut self, s: &Source) -> Option<SourceConfig> {
        let block = format!("source \"{}\" \"{}\"", s.builder, s.name);
        match s.builder.as_str() {
            "local" => Some(SourceConfig::Local(self.local_source(s, &block))),
            _ => Some(SourceConfig::Ebs(self.ebs_source(s, &block))),
        }
    }

    /// A `source "local"` block: suite, mirror, disk size, packages and the qemu check.
    fn local_source(&mut self, s: &Source, block: &str) -> LocalSource {
        let mut r = self.reader(block.to_string(), s.line, &s.args);
        let suite = r.string("suite").unwrap_or_else(|| "bookworm".to_string());
        if !SUITES.contains(&suite.as_str()) {
            r.problem(
                r.line_of("suite"),
                format!("suite {suite:?} is not supported: use bookworm (Debian 12), trixie (Debian 13) or forky (Debian 14)"),
            );
        }
        let mirror = r.string("mirror").unwrap_or_else(host_mirror);
        let size_text = r.string("disk_size").unwrap_or_else(|| "4G".to_string());
        let disk_size = match parse_size(&size_text) {
            Some(n) if n >= 2 << 30 => n,
            Some(_) => {
                r.problem(r.line_of("disk_size"), "disk_size must be at least 2G");
                0
            }
            None => {
                r.problem(
                    r.line_of("disk_size"),
                    format!("disk_size {size_text:?} is not a size like \"4G\" or \"8192M\""),
                );
                0
            }
        };
        let packages = r.strings("packages");
        let check_valid_until = r.bool("check_valid_until", true);
        let verify = r.bool("verify", true);
        let timeout_text = r.string("verify_timeout").unwrap_or_else(|| "20m".to_string());
        let verify_timeout = parse_duration(&timeout_text).unwrap_or_else(|| {
            r.problem(
                r.line_of("verify_timeout"),
                format!("verify_timeout {timeout_text:?} is not a duration like \"20m\""),
            );
            Duration::ZERO
        });
        let memory_mib = r.u64("memory_mib", 2048);
        let cpus = r.u64("cpus", 2);
        let problems = r.finish();
        self.absorb(problems);
        LocalSource {
            name: s.name.clone(),
            suite,
            mirror,
            disk_size,
            packages,
            check_valid_until,
            verify,
            verify_timeout,
            memory_mib,
            cpus,
        }
    }

    /// A `source "amazon-ebs"` block: the builder instance, its SSH access and the source AMI.
    fn ebs_source(&mut self, s: &Source, block: &str) -> EbsSource {
        let mut r = self.reader(block.to_string(), s.line, &s.args);
        let region = r.required_string("region");
        let instance_type = r.string("instance_type").unwrap_or_else(|| "c6i.large".to_string());
        let source_ami = r.string("source_ami");
        let subnet_id = r.string("subnet_id");
        let communicator = r.string("communicator").unwrap_or_else(|| "ssh".to_string());
        if communicator != "ssh" {
            r.problem(
                r.line_of("communicator"),
                "communicator must be \"ssh\" (SSM is not supported yet: components stage files, which need SSH)",
            );
        }
        let ssh_username = r.string("ssh_username").unwrap_or_else(|| "admin".to_string());
        let ssh_cidrs = ssh_cidrs(&mut r);
        let iam_instance_profile = r.string("iam_instance_profile");
        let root_volume_gib = i32::try_from(r.u64("root_volume_gib", 30)).unwrap_or(30);
        let timeout_text = r.string("ssh_timeout").unwrap_or_else(|| "10m".to_string());
        let ssh_timeout = parse_duration(&timeout_text).unwrap_or_else(|| {
            r.problem(r.line_of("ssh_timeout"), "ssh_timeout must be a duration like \"10m\"");
            Duration::ZERO
        });
        let tags = r.string_map("tags");
        let mut problems = r.finish();
        let source_ami_filter = self.ami_filter(s, block, source_ami.is_some(), &mut problems);
        self.absorb(problems);
        EbsSource {
            name: s.name.clone(),
            region,
            instance_type,
            source_ami,
            source_ami_filter,
            subnet_id,
            communicator,
            ssh_username,
            ssh_cidrs,
            iam_instance_profile,
            root_volume_gib,
            ssh_timeout,
            tags,
        }
    }

    /// An amazon-ebs source's `source_ami_filter` block, and the problems of its blocks: an
    /// unknown one, or neither a filter nor a `source_ami` (`has_ami`).
    fn ami_filter(&mut self, s: &Source, block: &str, has_ami: bool, problems: &mut Vec<Problem>) -> Option<AmiFilter> {
        let filter = s.blocks.get("source_ami_filter").map(|args| {
            let mut fr = self.reader(format!("{block} > source_ami_filter"), s.line, args);
            let name = fr.required_string("name");
            let owners = fr.strings("owners");
            let _ = fr.bool("most_recent", true);
            problems.extend(fr.finish());
            AmiFilter { name, owners }
        });
        let problem = |message: String| Problem {
            file: self.file.clone(),
            line: s.line,
            block: block.to_string(),
            message,
        };
        for k in s.blocks.keys().filter(|k| *k != "source_ami_filter") {
            problems.push(problem(format!(
                "unknown block {k:?} (amazon-ebs takes source_ami_filter)"
            )));
        }
        if !has_ami && filter.is_none() {
            problems.push(problem(
                "set source_ami or a source_ami_filter { name = \"debian-12-amd64-*\" owners = [...] } block".into(),
            ));
        }
        filter
    }

    fn component_step(&mut self, d: &StepDecl, c: &'static Component) -> Step {
        let block = d.block_name();
        let at = BlockAt {
            file: self.file.clone(),
            block: block.clone(),
        };
        let mut problems = Vec::new();
        let args = component_args(d, c, &at, &mut problems);
        download_checks(d, c, &args, &at, &mut problems);
        let files = if c.name == "hpc-node" {
            agent_files(&self.t.dir, d, &args, &at, &mut problems)
        } else {
            Vec::new()
        };
        self.absorb(problems);
        let mut env: Vec<(String, String)> = vec![
            ("HPC_COMPONENT".into(), c.name.into()),
            ("HPC_COMPONENT_VERSION".into(), c.version.into()),
        ];
        for (k, v) in &args {
            if k == "binary" {
                continue;
            }
            env.push((
                format!("HPC_ARG_{}", k.to_ascii_uppercase().replace('-', "_")),
                v.clone(),
            ));
        }
        Step {
            id: c.name.to_string(),
            label: block,
            version: c.version.to_string(),
            script: compose(&env, &format!("{}\n{}", catalog::LIB_SH, c.install)),
            files,
            check: Some(compose(&env, &format!("{}\n{}", catalog::LIB_SH, c.check))),
            args,
        }
    }

    fn provisioner_step(&mut self, d: &StepDecl) -> Option<Step> {
        let block = d.block_name();
        let mut r = ArgReader::new(&self.file, block.clone(), d.line, &d.args);
        let step = match d.name.as_str() {
            "shell" => Some(shell_step(&self.t.dir, d, block, &mut r)),
            "file" => Some(file_step(&self.t.dir, d, block, &mut r)),
            other => {
                r.problem(
                    None,
                    format!("unknown provisioner {other:?} (use \"shell\" or \"file\")"),
                );
                None
            }
        };
        let problems = r.finish();
        self.absorb(problems);
        step
    }

    fn publish(&mut self) -> Option<PublishConfig> {
        let p = self.t.publish.as_ref()?;
        let mut r = ArgReader::new(&self.file, "publish", p.line, &p.value);
        let ami_name = r.required_string("ami_name");
        if !ami_name.is_empty()
            && (ami_name.len() < 3
                || ami_name.len() > 128
                || !ami_name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "()[] ./-'@_".contains(c)))
        {
            r.problem(
                r.line_of("ami_name"),
                "ami_name must be 3-128 characters of letters, digits and ( ) [ ] . / - ' @ _ or space",
            );
        }
        let description = r.string("description").unwrap_or_default();
        let regions = r.strings("regions");
        if regions.is_empty() {
            r.problem(
                r.line_of("regions").or(Some(p.line)),
                "regions must list at least one region; the first is where the image is registered",
            );
        }
        let accounts = r.strings("share_with_accounts");
        for a in &accounts {
            if !is_account(a) {
                r.problem(
                    r.line_of("share_with_accounts"),
                    format!("{a:?} is not a 12-digit AWS account id"),
                );
            }
        }
        let tags = r.string_map("tags");
        let encrypted = r.bool("encrypted", true);
        let kms_key_id = r.string("kms_key_id");
        if encrypted && !accounts.is_empty() && kms_key_id.is_none() {
            r.problem(
                r.line_of("share_with_accounts"),
                "an encrypted image shared with other accounts needs kms_key_id: a customer-managed KMS key those accounts may use (the default EBS key cannot be shared)",
            );
        }
        let upload_concurrency = usize::try_from(r.u64("upload_concurrency", 16))
            .unwrap_or(16)
            .clamp(1, 64);
        let copy_concurrency = usize::try_from(r.u64("copy_concurrency", 4)).unwrap_or(4).clamp(1, 16);
        let problems = r.finish();
        self.absorb(problems);
        Some(PublishConfig {
            ami_name,
            description,
            regions,
            share_with_accounts: accounts,
            tags,
            encrypted,
            kms_key_id,
            upload_concurrency,
            copy_concurrency,
        })
    }
}

/// A script: exported environment, then the body.
fn compose(env: &[(String, String)], body: &str) -> String {
    let mut s = String::from("#!/bin/sh\n");
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", sh_quote(v)));
    }
    s.push_str(": \"${HPC_SUITE:=$(. /etc/os-release && echo \"$VERSION_CODENAME\")}\"\nexport HPC_SUITE\n");
    s.push_str(body);
    s
}

/// Orders steps: a component runs after the components it requires; a provisioner runs
/// after everything written before it and before everything written after it. Among steps
/// free to run, the one written first goes first.
fn order(decls: &[StepDecl], file: &str, problems: &mut Vec<Problem>) -> Vec<usize> {
    let n = decls.len();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in decls.iter().enumerate() {
        if d.kind == "provisioner" {
            after[i].extend(0..i);
            for later in after.iter_mut().skip(i + 1) {
                later.push(i);
            }
            continue;
        }
        let Some(c) = catalog::find(&d.name) else { continue };
        for r in c.requires {
            match decls.iter().position(|o| o.kind == "component" && o.name == *r) {
                Some(j) => after[i].push(j),
                None => problems.push(Problem {
                    file: file.to_string(),
                    line: d.line,
                    block: d.block_name(),
                    message: format!(
                        "component {:?} needs {r:?}: add component \"{r}\" {{}} to the build",
                        c.name
                    ),
                }),
            }
        }
    }
    let mut done = vec![false; n];
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let next = (0..n).find(|&i| !done[i] && after[i].iter().all(|&j| done[j]));
        match next {
            Some(i) => {
                done[i] = true;
                out.push(i);
            }
            None => {
                let stuck: Vec<String> = (0..n).filter(|&i| !done[i]).map(|i| decls[i].block_name()).collect();
                problems.push(Problem {
                    file: file.to_string(),
                    line: decls[(0..n).find(|&i| !done[i]).unwrap_or(0)].line,
                    block: "build".into(),
                    message: format!(
                        "these steps cannot be ordered ({}): a component needs one listed after a provisioner; move it before the provisioner",
                        stuck.join(", ")
                    ),
                });
                break;
            }
        }
    }
    out
}

/// Checks a template against the catalog and builds the plan. All problems together.
pub fn resolve(t: &Template) -> Result<Plan, Problems> {
    let mut r = Resolver {
        t,
        file: t.path.display().to_string(),
        problems: Vec::new(),
    };
    let mut sources = Vec::new();
    for s in &t.sources {
        if let Some(cfg) = r.source(s) {
            if t.build.sources.contains(&s.reference()) {
                sources.push(cfg);
            }
        }
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &t.build.steps {
        if d.kind == "component" {
            if catalog::find(&d.name).is_none() {
                r.problems.push(Problem {
                    file: r.file.clone(),
                    line: d.line,
                    block: d.block_name(),
                    message: format!(
                        "unknown component {:?} (known: {})",
                        d.name,
                        catalog::names().join(", ")
                    ),
                });
            }
            if let Some(first) = seen.insert(&d.name, d.line) {
                r.problems.push(Problem {
                    file: r.file.clone(),
                    line: d.line,
                    block: d.block_name(),
                    message: format!("component {:?} is listed twice (first on line {first})", d.name),
                });
            }
        }
    }
    let file = r.file.clone();
    let ordered = order(&t.build.steps, &file, &mut r.problems);
    let mut steps = Vec::new();
    for i in ordered {
        let d = &t.build.steps[i];
        match d.kind.as_str() {
            "component" => {
                if let Some(c) = catalog::find(&d.name) {
                    steps.push(r.component_step(d, c));
                }
            }
            _ => {
                if let Some(s) = r.provisioner_step(d) {
                    steps.push(s);
                }
            }
        }
    }
    let publish = r.publish();
    if r.problems.is_empty() {
        Ok(Plan {
            template_sha256: sha256_hex(t.text.as_bytes()),
            sources,
            steps,
            publish,
        })
    } else {
        let mut problems = r.problems;
        problems.sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
        problems.dedup();
        Err(Problems(problems))
    }
}

/// The digest of a staged file's content.
pub fn staged_digest(f: &StagedFile) -> std::io::Result<String> {
    Ok(match &f.content {
        FileContent::Text(t) => sha256_hex(t.as_bytes()),
        FileContent::Path(p) => sha256_hex(&std::fs::read(p)?),
    })
}

/// The cache key of a step's result: the previous layer's key, the step's script and files.
pub fn step_key(prev: &str, step: &Step) -> std::io::Result<String> {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(step.id.as_bytes());
    h.update(step.version.as_bytes());
    h.update(step.script.as_bytes());
    for f in &step.files {
        h.update(f.name.as_bytes());
        h.update(f.mode.to_le_bytes());
        h.update(staged_digest(f)?.as_bytes());
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

pub fn resolve_path(dir: &Path, p: &str) -> PathBuf {
    dir.join(p)
}

/// A `provisioner "shell"` block: inline commands or a script file, with its environment.
fn shell_step(dir: &Path, d: &StepDecl, block: String, r: &mut ArgReader<'_>) -> Step {
    let inline = r.strings("inline");
    let script = r.string("script");
    let env_vars = r.string_map("environment_vars");
    let mut files = Vec::new();
    let body = match (inline.is_empty(), &script) {
        (false, None) => inline.join("\n"),
        (true, Some(path)) => {
            let full = dir.join(path);
            if !full.is_file() {
                r.problem(r.line_of("script"), format!("script {} does not exist", full.display()));
            }
            files.push(StagedFile {
                name: "script".into(),
                content: FileContent::Path(full),
                mode: 0o755,
            });
            "\"$HPC_FILES/script\"".to_string()
        }
        _ => {
            r.problem(
                None,
                "a shell provisioner takes either inline = [...] or script = \"FILE\"",
            );
            String::new()
        }
    };
    let env: Vec<(String, String)> = env_vars.into_iter().collect();
    Step {
        id: format!("shell@{}", d.line),
        label: block,
        version: String::new(),
        script: compose(&env, &format!("set -eu\n{body}\n")),
        files,
        check: None,
        args: BTreeMap::new(),
    }
}

/// A `provisioner "file"` block: a file of the template's folder installed in the image.
fn file_step(dir: &Path, d: &StepDecl, block: String, r: &mut ArgReader<'_>) -> Step {
    let source = r.required_string("source");
    let destination = r.required_string("destination");
    let mode_text = r.string("mode").unwrap_or_else(|| "0644".to_string());
    let mode = u32::from_str_radix(mode_text.trim_start_matches("0o"), 8).unwrap_or_else(|_| {
        r.problem(
            r.line_of("mode"),
            format!("mode {mode_text:?} is not an octal mode like \"0644\""),
        );
        0o644
    });
    if !destination.is_empty() && !destination.starts_with('/') {
        r.problem(
            r.line_of("destination"),
            "destination must be an absolute path in the image",
        );
    }
    let full = dir.join(&source);
    if !source.is_empty() && !full.is_file() {
        r.problem(
            r.line_of("source"),
            format!(
                "source {} is not a file (relative paths start at the template's directory)",
                full.display()
            ),
        );
    }
    Step {
        id: format!("file@{}", d.line),
        label: block,
        version: String::new(),
        script: format!(
            "set -eu\ninstall -D -m {mode:o} \"$HPC_FILES/file\" {}\n",
            sh_quote(&destination)
        ),
        files: vec![StagedFile {
            name: "file".into(),
            content: FileContent::Path(full),
            mode,
        }],
        check: None,
        args: BTreeMap::from([("destination".to_string(), destination)]),
    }
}

/// Where a component block's problems are reported.
struct BlockAt {
    file: String,
    block: String,
}

impl BlockAt {
    fn problem(&self, line: usize, message: impl Into<String>) -> Problem {
        Problem {
            file: self.file.clone(),
            line,
            block: self.block.clone(),
            message: message.into(),
        }
    }
}

/// A component block's arguments checked against the component's (names, kinds, choices),
/// with the defaults of those not given.
fn component_args(d: &StepDecl, c: &Component, at: &BlockAt, problems: &mut Vec<Problem>) -> BTreeMap<String, String> {
    let problem = |line: usize, message: String| at.problem(line, message);
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &d.args {
        let Some(spec) = c.args.iter().find(|a| a.name == k) else {
            let known: Vec<&str> = c.args.iter().map(|a| a.name).collect();
            problems.push(problem(
                v.line,
                if known.is_empty() {
                    format!("unknown argument {k:?}: component {:?} takes no arguments", c.name)
                } else {
                    format!(
                        "unknown argument {k:?} (component {:?} takes {})",
                        c.name,
                        known.join(", ")
                    )
                },
            ));
            continue;
        };
        let text = match (&spec.kind, &v.value) {
            (ArgKind::Bool, Value::Bool(b)) => b.to_string(),
            (ArgKind::Bool, _) => {
                problems.push(problem(v.line, format!("{k} must be true or false")));
                continue;
            }
            (_, Value::String(s)) => s.clone(),
            (_, Value::Number(n)) => n.to_string(),
            _ => {
                problems.push(problem(v.line, format!("{k} must be a string")));
                continue;
            }
        };
        if let ArgKind::Choice(choices) = spec.kind {
            if !choices.contains(&text.as_str()) {
                problems.push(problem(
                    v.line,
                    format!("{k} = {text:?} is not one of {}", choices.join(", ")),
                ));
            }
        }
        args.insert(k.clone(), text);
    }
    for spec in c.args {
        if let (false, Some(default)) = (args.contains_key(spec.name), spec.default) {
            args.insert(spec.name.to_string(), default.to_string());
        }
    }
    for spec in c.args {
        if let (false, Some(default)) = (args.contains_key(spec.name), spec.default) {
            args.insert(spec.name.to_string(), default.to_string());
        }
    }
    args
}

/// Each download the arguments turn on names its URL and its SHA-256.
fn download_checks(
    d: &StepDecl,
    c: &Component,
    args: &BTreeMap<String, String>,
    at: &BlockAt,
    problems: &mut Vec<Problem>,
) {
    let problem = |line: usize, message: String| at.problem(line, message);
    for dl in c.downloads {
        let applies = match dl.when {
            None => true,
            Some((a, value)) => args.get(a).map(String::as_str) == Some(value),
        };
        if !applies {
            continue;
        }
        let why = match dl.when {
            None => String::new(),
            Some((a, value)) => format!(" with {a} = {value:?}"),
        };
        match args.get(dl.url_arg) {
            None => problems.push(problem(
                d.line,
                format!("{}{why} needs {} (and {})", c.name, dl.url_arg, dl.sha256_arg),
            )),
            Some(u) if !(u.starts_with("https://") || u.starts_with("http://") || u.starts_with("file://")) => problems
                .push(problem(
                    d.args.get(dl.url_arg).map_or(d.line, |a| a.line),
                    format!("{} must be an https://, http:// or file:// URL", dl.url_arg),
                )),
            Some(_) => {}
        }
        match args.get(dl.sha256_arg) {
            None => problems.push(problem(
                d.line,
                format!(
                    "{}{why} downloads {}: its checksum {} is required (sha256sum of the file)",
                    c.name, dl.url_arg, dl.sha256_arg
                ),
            )),
            Some(s) if !is_sha256(s) => problems.push(problem(
                d.args.get(dl.sha256_arg).map_or(d.line, |a| a.line),
                format!("{} must be 64 hex digits (a SHA-256)", dl.sha256_arg),
            )),
            Some(_) => {}
        }
    }
}

/// The hpc-node component's files: the agent binary (`binary`, else the one built beside this
/// program) and its systemd units.
fn agent_files(
    dir: &Path,
    d: &StepDecl,
    args: &BTreeMap<String, String>,
    at: &BlockAt,
    problems: &mut Vec<Problem>,
) -> Vec<StagedFile> {
    let problem = |line: usize, message: String| at.problem(line, message);
    let mut files = Vec::new();
    let given = args.get("binary").filter(|b| !b.is_empty()).map(|b| dir.join(b));
    match given.or_else(default_agent_binary) {
        Some(path) if path.is_file() => files.push(StagedFile {
            name: "hpc-node".into(),
            content: FileContent::Path(path),
            mode: 0o755,
        }),
        Some(path) => problems.push(problem(
            d.args.get("binary").map_or(d.line, |a| a.line),
            format!("binary {} does not exist", path.display()),
        )),
        None => problems.push(problem(
            d.line,
            "no hpc-node binary found: run `cargo build --release -p hpc-node`, or set binary = \"PATH\"".into(),
        )),
    }
    for (name, text) in AGENT_UNITS {
        files.push(StagedFile {
            name: format!("systemd/{name}"),
            content: FileContent::Text((*text).to_string()),
            mode: 0o644,
        });
    }
    files
}

/// The builder's `ssh_cidrs`: required, and never the whole Internet.
fn ssh_cidrs(r: &mut ArgReader<'_>) -> Vec<String> {
    let cidrs = r.strings("ssh_cidrs");
    for c in cidrs.iter().filter(|c| c.ends_with("/0")) {
        r.problem(
            r.line_of("ssh_cidrs"),
            format!("ssh_cidrs must not contain {c}: list the builder's own address, e.g. 203.0.113.7/32"),
        );
    }
    if cidrs.is_empty() {
        r.problem(
            None,
            "ssh_cidrs is required: the addresses SSH may come from, e.g. [\"203.0.113.7/32\"]",
        );
    }
    cidrs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_unit_is_baked() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../node-agent/systemd");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("node-agent/systemd")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut baked: Vec<String> = AGENT_UNITS.iter().map(|(n, _)| n.to_string()).collect();
        baked.sort();
        assert_eq!(baked, on_disk, "AGENT_UNITS must list every unit in node-agent/systemd");
    }
    use crate::template::{parse, VarInputs};

    fn plan(text: &str) -> Result<Plan, Vec<String>> {
        let t = parse("t.hcl", text, Path::new("/nonexistent"), &VarInputs::default())
            .map_err(|p| p.0.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        resolve(&t).map_err(|p| p.0.iter().map(ToString::to_string).collect())
    }

    fn build(body: &str) -> String {
        format!("source \"local\" \"d\" {{}}\nbuild {{\n  sources = [\"source.local.d\"]\n{body}}}\n")
    }

    #[test]
    fn components_are_ordered_by_what_they_need() {
        let p = plan(&build(
            "  component \"slurm\" {}\n  component \"efa\" {}\n  component \"munge\" {}\n",
        ))
        .expect("plan");
        let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["efa", "munge", "slurm"]);
    }

    #[test]
    fn provisioners_stay_where_they_are_written() {
        let p = plan(&build(
            "  component \"munge\" {}\n  provisioner \"shell\" {\n    inline = [\"true\"]\n  }\n  component \"efa\" {}\n",
        ))
        .expect("plan");
        let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["munge", "shell@5", "efa"]);
    }

    #[test]
    fn a_missing_requirement_names_what_to_add() {
        let errs = plan(&build("  component \"cuda\" {}\n")).expect_err("problems");
        assert!(
            errs.iter()
                .any(|e| e.contains("t.hcl:4: in component \"cuda\": component \"cuda\" needs \"nvidia-driver\"")),
            "{errs:?}"
        );
    }

    #[test]
    fn downloads_need_a_checksum() {
        let errs = plan(&build(
            "  component \"efa\" {\n    method = \"installer\"\n    installer_url = \"https://example.com/efa.tar.gz\"\n  }\n",
        ))
        .expect_err("problems");
        assert!(
            errs.iter().any(|e| e.contains("installer_sha256 is required")),
            "{errs:?}"
        );
    }

    #[test]
    fn arguments_are_checked_against_the_component() {
        let errs = plan(&build(
            "  component \"munge\" {\n    key = \"x\"\n  }\n  component \"slurm\" {\n    accounting = \"yes\"\n  }\n  component \"efa\" {\n    method = \"magic\"\n  }\n",
        ))
        .expect_err("problems");
        let all = errs.join("\n");
        assert!(
            all.contains("t.hcl:5: in component \"munge\": unknown argument \"key\""),
            "{all}"
        );
        assert!(all.contains("accounting must be true or false"), "{all}");
        assert!(
            all.contains("method = \"magic\" is not one of distro, installer"),
            "{all}"
        );
    }

    #[test]
    fn component_scripts_carry_arguments_and_defaults() {
        let p = plan(&build(
            "  component \"munge\" {}\n  component \"slurm\" {\n    accounting = true\n  }\n",
        ))
        .expect("plan");
        let slurm = &p.steps[1];
        assert!(slurm.script.contains("export HPC_ARG_ACCOUNTING='true'"));
        assert!(slurm.script.contains("export HPC_ARG_VERSION='distro'"));
        assert!(slurm.script.contains("hpc_apt_install"));
        assert!(slurm.check.as_deref().is_some_and(|c| c.contains("srun")));
    }

    #[test]
    fn cache_keys_change_with_the_step_and_everything_before_it() {
        let a = plan(&build("  component \"munge\" {}\n  component \"slurm\" {}\n")).expect("plan");
        let b = plan(&build(
            "  component \"munge\" {}\n  component \"slurm\" {\n    accounting = true\n  }\n",
        ))
        .expect("plan");
        let ka0 = step_key("base", &a.steps[0]).expect("key");
        let kb0 = step_key("base", &b.steps[0]).expect("key");
        assert_eq!(ka0, kb0);
        assert_ne!(
            step_key(&ka0, &a.steps[1]).expect("key"),
            step_key(&kb0, &b.steps[1]).expect("key")
        );
        assert_ne!(step_key("other-base", &a.steps[0]).expect("key"), ka0);
    }

    #[test]
    fn publish_settings_are_checked() {
        let errs = plan(&format!(
            "{}publish {{\n  ami_name = \"x\"\n  share_with_accounts = [\"12\"]\n}}\n",
            build("")
        ))
        .expect_err("problems");
        let all = errs.join("\n");
        assert!(all.contains("ami_name must be 3-128"), "{all}");
        assert!(all.contains("\"12\" is not a 12-digit AWS account id"), "{all}");
        assert!(all.contains("regions must list at least one region"), "{all}");
        assert!(all.contains("needs kms_key_id"), "{all}");
    }

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("4G"), Some(4 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_duration("15m"), Some(Duration::from_secs(900)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86400)));
        assert_eq!(parse_duration("1w"), None);
    }

    #[test]
    fn the_host_mirror_comes_from_apt_sources() {
        let deb822 = "Types: deb\n# http://snapshot.debian.org/x\nURIs: http://mirror.example/debian/\nSuites: bookworm\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\n";
        assert_eq!(mirror_in(deb822).as_deref(), Some("http://mirror.example/debian"));
        let legacy = "deb [arch=amd64] https://packages.cloud.google.com/apt cloud-sdk main\ndeb http://ftp.de.debian.org/debian bookworm main\n";
        assert_eq!(mirror_in(legacy).as_deref(), Some("http://ftp.de.debian.org/debian"));
        assert_eq!(
            mirror_in("deb http://security.debian.org/debian-security bookworm-security main\n"),
            None
        );
    }

    #[test]
    fn sh_quote_survives_quotes() {
        assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    }
}
