//! The host's plumbing every builder shares: the build error, running a command with its
//! output in a log, finding host tools, and copying or hashing files. Below the builders
//! (`local`, `disk`, `verify`, `ebs_builder`), which import it and not each other for it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use crate::progress::tail;

#[derive(Debug)]
pub struct BuildError {
    pub message: String,
    /// The failing command's last lines of output.
    pub output: Option<String>,
}

impl BuildError {
    pub fn new(message: impl Into<String>) -> Self {
        BuildError {
            message: message.into(),
            output: None,
        }
    }
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(out) = &self.output {
            write!(f, "\n--- last lines of output ---\n{out}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BuildError {}

pub type Result<T> = std::result::Result<T, BuildError>;

pub(crate) fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> BuildError {
    move |e| BuildError::new(format!("{what}: {e}"))
}

/// Which host tools are missing, as "tool (package)".
pub fn missing_tools(tools: &[(&str, &str)]) -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/sbin"].map(PathBuf::from));
    tools
        .iter()
        .filter(|(t, _)| !dirs.iter().any(|d| d.join(t).is_file()))
        .map(|(t, p)| format!("{t} (Debian package {p})"))
        .collect()
}

/// Runs a command with its output going to `log`; on failure the error carries its tail.
pub async fn run(cmd: &mut Command, what: &str, log: &Path) -> Result<()> {
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io(format!("opening {}", log.display())))?;
    let err = out.try_clone().map_err(io("log"))?;
    // Its own process group, so an interrupted build can stop everything the step started
    // (apt, dpkg, a script's children), not just the chroot process.
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(io(format!("{what}: cannot start")))?;
    let mut group = GroupKill(child.id());
    let status = child.wait().await.map_err(io(format!("{what}: waiting")))?;
    group.0 = None;
    if status.success() {
        Ok(())
    } else {
        Err(BuildError {
            message: format!("{what} failed ({status}); full output in {}", log.display()),
            output: Some(tail(log, 40)),
        })
    }
}

/// Kills a process group when dropped while armed (the build was interrupted or dropped).
struct GroupKill(Option<u32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Copies `src` into `dst` at `offset`, writing only non-zero chunks (the disk stays sparse).
pub fn copy_sparse(src: &Path, dst: &mut File, offset: u64) -> std::io::Result<()> {
    let mut input = File::open(src)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let n = input.read(&mut buf[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        if buf[..filled].iter().any(|b| *b != 0) {
            dst.seek(SeekFrom::Start(offset + pos))?;
            dst.write_all(&buf[..filled])?;
        }
        pos += filled as u64;
        if filled < buf.len() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn sparse_copy_writes_data_at_the_offset_and_leaves_holes() {
        let dir = std::env::temp_dir().join(format!("hpc-image-sparse-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let src = dir.join("src");
        let mut data = vec![0u8; 3 << 20];
        data[(2 << 20) + 5] = 9;
        fs::write(&src, &data).expect("write");
        let dst_path = dir.join("dst");
        let mut dst = File::create(&dst_path).expect("create");
        dst.set_len(8 << 20).expect("len");
        copy_sparse(&src, &mut dst, 1 << 20).expect("copy");
        drop(dst);
        let out = fs::read(&dst_path).expect("read");
        assert_eq!(out.len(), 8 << 20);
        assert_eq!(out[(3 << 20) + 5], 9);
        assert_eq!(out.iter().filter(|b| **b != 0).count(), 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn missing_tools_name_their_package() {
        let missing = missing_tools(&[("surely-not-a-real-tool-xyz", "pkg-xyz"), ("sh", "dash")]);
        assert_eq!(
            missing,
            vec!["surely-not-a-real-tool-xyz (Debian package pkg-xyz)".to_string()]
        );
    }
}
