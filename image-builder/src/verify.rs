//! Verification: boot the disk under qemu (UEFI via OVMF; KVM when it works, software
//! emulation otherwise) on a throwaway snapshot, let the image's verification unit run every
//! check, and read the results from the second serial port.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::process::Command;

use crate::host::{BuildError, Result};

pub const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
pub const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CheckResult {
    pub name: String,
    pub ok: bool,
    pub exit_code: i32,
    pub seconds: u64,
    pub output: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub accelerator: String,
    pub checks: Vec<CheckResult>,
    pub seconds: f64,
    pub console_log: PathBuf,
}

/// Parses the verification runner's report. None when it never finished.
pub fn parse_results(text: &str) -> Option<Vec<CheckResult>> {
    let mut checks = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    let mut finished = false;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(name) = line.strip_prefix("HPCFORGE-CHECK-BEGIN ") {
            current = Some((name.trim().to_string(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("HPCFORGE-CHECK-END ") {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            let (name, output) = current.take().unwrap_or_default();
            let exit_code = parts.get(1).and_then(|c| c.parse().ok()).unwrap_or(-1);
            checks.push(CheckResult {
                name: parts.first().map_or(name, |n| n.to_string()),
                ok: exit_code == 0,
                exit_code,
                seconds: parts.get(2).and_then(|s| s.parse().ok()).unwrap_or(0),
                output: output.join("\n"),
            });
        } else if line.starts_with("HPCFORGE-VERIFY-END") {
            finished = true;
        } else if let Some((_, out)) = current.as_mut() {
            out.push(line);
        }
    }
    finished.then_some(checks)
}

/// How long a machine under KVM gets to print its first byte (OVMF prints within a second
/// or two when KVM works; under software emulation within about ten).
const KVM_SIGN_OF_LIFE: Duration = Duration::from_secs(40);

fn kvm_usable() -> bool {
    fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok()
}

pub fn missing_tools() -> Vec<String> {
    let mut missing = crate::host::missing_tools(&[("qemu-system-x86_64", "qemu-system-x86")]);
    for f in [OVMF_CODE, OVMF_VARS] {
        if !Path::new(f).is_file() {
            missing.push(format!("{f} (Debian package ovmf)"));
        }
    }
    missing
}

pub struct Boot<'a> {
    pub disk: &'a Path,
    pub work: &'a Path,
    pub memory_mib: u64,
    pub cpus: u64,
    pub timeout: Duration,
}

/// How long qemu took to exit, if it did within the time it was given.
type Waited = std::result::Result<std::io::Result<std::process::ExitStatus>, tokio::time::error::Elapsed>;

/// A file's text, empty when it cannot be read.
fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The files of one verification boot.
struct BootFiles {
    /// OVMF's variable store (a fresh copy per boot).
    vars: PathBuf,
    console: PathBuf,
    /// What the verification unit in the image writes on its second serial port.
    results: PathBuf,
}

impl BootFiles {
    fn reset(&self) -> Result<()> {
        for f in [&self.console, &self.results] {
            let _ = fs::remove_file(f);
        }
        fs::copy(OVMF_VARS, &self.vars)
            .map(|_| ())
            .map_err(|e| BuildError::new(format!("copying OVMF vars: {e}")))
    }
}

impl Boot<'_> {
    pub async fn run(&self) -> Result<VerifyReport> {
        let missing = missing_tools();
        if !missing.is_empty() {
            return Err(BuildError::new(format!(
                "verification needs: {} (or set verify = false in the source)",
                missing.join(", ")
            )));
        }
        fs::create_dir_all(self.work).map_err(|e| BuildError::new(format!("creating {}: {e}", self.work.display())))?;
        let files = BootFiles {
            vars: self.work.join("OVMF_VARS.fd"),
            console: self.work.join("console.log"),
            results: self.work.join("results.log"),
        };
        let started = Instant::now();
        let (accel, mut child, waited) = self.boot(&files, started).await?;
        self.exited(waited, &mut child, &files).await?;
        let text = read_lossy(&files.results);
        let checks = parse_results(&text).ok_or_else(|| BuildError {
            message: format!(
                "the image powered off without finishing its checks{}; console log: {}",
                parse_partial(&text),
                files.console.display()
            ),
            output: Some(tail_text(&read_lossy(&files.console), 30)),
        })?;
        Ok(VerifyReport {
            accelerator: accel.to_string(),
            checks,
            seconds: started.elapsed().as_secs_f64(),
            console_log: files.console,
        })
    }

    /// Boots the image under KVM when it is usable, and again under software emulation when
    /// KVM turns out not to run it; waits within the timeout.
    async fn boot(&self, files: &BootFiles, started: Instant) -> Result<(&'static str, tokio::process::Child, Waited)> {
        files.reset()?;
        let accel = if kvm_usable() { "kvm" } else { "tcg" };
        let mut child = self.spawn(accel, &files.vars, &files.console, &files.results)?;
        let first_window = if accel == "kvm" {
            KVM_SIGN_OF_LIFE.min(self.timeout)
        } else {
            self.timeout
        };
        let waited = tokio::time::timeout(first_window, child.wait()).await;
        // KVM can be present yet unusable: seen here as an MSR assertion at start (qemu exits
        // at once) and as a machine that never runs (not a byte on the serial console).
        let kvm_failed = accel == "kvm"
            && match &waited {
                Ok(Ok(status)) => !status.success(),
                Err(_) => fs::metadata(&files.console).map(|m| m.len() == 0).unwrap_or(true),
                Ok(Err(_)) => false,
            };
        if kvm_failed {
            if waited.is_err() {
                let _ = child.kill().await;
                eprintln!(
                    "    no output from the machine under KVM within {}s; booting it again under software emulation",
                    KVM_SIGN_OF_LIFE.as_secs()
                );
            }
            files.reset()?;
            let mut child = self.spawn("tcg", &files.vars, &files.console, &files.results)?;
            let waited = tokio::time::timeout(self.timeout, child.wait()).await;
            return Ok(("tcg", child, waited));
        }
        let waited = if waited.is_err() && first_window < self.timeout {
            // Alive under KVM: the rest of the time.
            tokio::time::timeout(self.timeout.saturating_sub(started.elapsed()), child.wait()).await
        } else {
            waited
        };
        Ok((accel, child, waited))
    }

    /// Fails unless qemu exited cleanly in time (the image powers off after its checks).
    async fn exited(&self, waited: Waited, child: &mut tokio::process::Child, files: &BootFiles) -> Result<()> {
        match waited {
            Err(_) => {
                let _ = child.kill().await;
                let partial = parse_partial(&read_lossy(&files.results));
                Err(BuildError {
                    message: format!(
                        "the image did not finish verification within {}s{}; console log: {}",
                        self.timeout.as_secs(),
                        partial,
                        files.console.display()
                    ),
                    output: Some(tail_text(&read_lossy(&files.console), 30)),
                })
            }
            Ok(Err(e)) => Err(BuildError::new(format!("waiting for qemu: {e}"))),
            Ok(Ok(status)) if !status.success() => {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use tokio::io::AsyncReadExt;
                    let _ = e.read_to_string(&mut stderr).await;
                }
                Err(BuildError {
                    message: format!("qemu exited with {status}"),
                    output: Some(stderr),
                })
            }
            Ok(Ok(_)) => Ok(()),
        }
    }

    fn spawn(&self, accel: &str, vars: &Path, console: &Path, results: &Path) -> Result<tokio::process::Child> {
        let mut cmd = Command::new("qemu-system-x86_64");
        cmd.args(["-machine", "q35", "-display", "none", "-monitor", "none", "-no-reboot"])
            .args(["-accel", accel, "-cpu", "max"])
            .args(["-m", &self.memory_mib.to_string(), "-smp", &self.cpus.to_string()])
            .arg("-drive")
            .arg(format!("if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}"))
            .arg("-drive")
            .arg(format!("if=pflash,format=raw,unit=1,file={}", vars.display()))
            .arg("-drive")
            .arg(format!("file={},format=raw,if=virtio,snapshot=on", self.disk.display()))
            .args(["-nic", "user,model=virtio-net-pci"])
            .args(["-smbios", "type=11,value=io.hpcforge.verify=1"])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-serial")
            .arg(format!("file:{}", results.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd.spawn()
            .map_err(|e| BuildError::new(format!("starting qemu-system-x86_64: {e}")))
    }
}

fn parse_partial(text: &str) -> String {
    let started: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("HPCFORGE-CHECK-BEGIN "))
        .collect();
    match started.last() {
        Some(last) => format!(" (last check started: {last})"),
        None if text.contains("HPCFORGE-VERIFY-BEGIN") => String::new(),
        None => " (the checks never started: did the image boot?)".to_string(),
    }
}

fn tail_text(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_parse_into_checks_with_output() {
        let text = "HPCFORGE-VERIFY-BEGIN\nHPCFORGE-CHECK-BEGIN base\nkernel 6.1\nHPCFORGE-CHECK-END base 0 2\n\
                    HPCFORGE-CHECK-BEGIN slurm\nsrun: error\r\nHPCFORGE-CHECK-END slurm 1 30\nHPCFORGE-VERIFY-END 1\n";
        let checks = parse_results(text).expect("finished");
        assert_eq!(checks.len(), 2);
        assert!(checks[0].ok && checks[0].output == "kernel 6.1");
        assert_eq!((checks[1].ok, checks[1].exit_code, checks[1].seconds), (false, 1, 30));
        assert_eq!(checks[1].output, "srun: error");
    }

    #[test]
    fn unfinished_results_are_not_a_pass() {
        assert_eq!(
            parse_results("HPCFORGE-VERIFY-BEGIN\nHPCFORGE-CHECK-BEGIN base\n"),
            None
        );
        assert!(parse_partial("HPCFORGE-CHECK-BEGIN slurm\n").contains("slurm"));
        assert!(parse_partial("").contains("never started"));
    }
}
