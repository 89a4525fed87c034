//! What the user sees while a build runs: one line per step with its elapsed time, all
//! command output in a log file, and the tail of a failing step's output.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Progress {
    started: Instant,
    pub log_path: PathBuf,
    log: File,
    quiet: bool,
}

pub fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl Progress {
    pub fn new(log_path: &Path, quiet: bool) -> std::io::Result<Progress> {
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = OpenOptions::new().create(true).append(true).open(log_path)?;
        Ok(Progress {
            started: Instant::now(),
            log_path: log_path.to_path_buf(),
            log,
            quiet,
        })
    }

    /// A line for the user (stderr) and the log.
    pub fn say(&mut self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
        let _ = writeln!(self.log, "[{:>7}] {line}", secs(self.started.elapsed()));
    }

    pub fn step(&mut self, n: usize, total: usize, what: &str) -> Instant {
        self.say(&format!("==> [{n}/{total}] {what}"));
        Instant::now()
    }

    pub fn done(&mut self, what: &str, since: Instant) {
        self.say(&format!("    {what} ({})", secs(since.elapsed())));
    }

    /// A handle commands write their output into.
    pub fn log_file(&self) -> std::io::Result<File> {
        self.log.try_clone()
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The last `n` lines of a file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
