//! The host plumbing every boot step uses: files written only when they change, ownership by
//! account name, systemd, waiting with a deadline. Each helper is idempotent.

use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{Context as _, Error, Result};

/// A uid and gid from the system's account database (`getent passwd`).
pub fn account(name: &str) -> Result<(u32, u32)> {
    let out = Command::new("getent")
        .args(["passwd", name])
        .output()
        .context(|| "running getent".to_string())?;
    let line = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = line.trim().split(':').collect();
    match (fields.get(2).map(|s| s.parse()), fields.get(3).map(|s| s.parse())) {
        (Some(Ok(uid)), Some(Ok(gid))) => Ok((uid, gid)),
        _ => Err(Error::new(format!("no account {name} on this image"))),
    }
}

/// Whether a group or user exists (`getent <db> <name>`).
pub fn exists(db: &str, name: &str) -> bool {
    Command::new("getent")
        .args([db, name])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes `contents` to `path` with `mode` (and `owner`) unless it already has exactly that;
/// atomically (temp file, then rename). Returns whether anything changed.
pub fn write_file(path: &Path, contents: &[u8], mode: u32, owner: Option<&str>) -> Result<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let ids = owner.map(account).transpose()?;
    let same = std::fs::read(path).ok().as_deref() == Some(contents)
        && std::fs::metadata(path).is_ok_and(|m| {
            m.permissions().mode() & 0o7777 == mode && ids.is_none_or(|(uid, gid)| (m.uid(), m.gid()) == (uid, gid))
        });
    if same {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(temp_name(&name));
    // Made exclusively (never through a link left there), and its mode and owner set before any
    // content: a secret is never readable beyond them, not even while it is written.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut file| {
            use std::io::Write as _;
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            if let Some((uid, gid)) = ids {
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
            }
            file.write_all(contents)
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::new(format!("writing {}: {e}", tmp.display())));
    }
    std::fs::rename(&tmp, path).context(|| format!("installing {}", path.display()))?;
    Ok(!same)
}

/// A temporary name beside `name`, unique per writer: on a shared file system (/home) other
/// nodes may write the same file (their processes may have the same pid: the time tells them
/// apart), and threads here.
pub fn temp_name(name: &str) -> String {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".{name}.hpc-node.{}.{nanos}.{write}", std::process::id())
}

/// Creates `path` (and parents) owned by `owner` with `mode`.
pub fn directory(path: &str, mode: u32, owner: &str) -> Result<()> {
    std::fs::create_dir_all(path).context(|| format!("creating {path}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).context(|| format!("chmod {path}"))?;
    let (uid, gid) = account(owner)?;
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).context(|| format!("chown {path}"))
}

/// Gives `path` and everything below it to `owner`.
pub fn chown_tree(path: &Path, owner: &str) -> Result<()> {
    let (uid, gid) = account(owner)?;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).context(|| format!("chown {}", p.display()))?;
        if p.is_dir() {
            for entry in std::fs::read_dir(&p)
                .context(|| format!("reading {}", p.display()))?
                .flatten()
            {
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

/// Runs a program to success, or fails with its output.
/// Runs a Slurm client (`scontrol`, `sacctmgr`) against the configuration `conf`; its output,
/// or an error naming the command and what it said.
pub fn slurm_client(program: &str, conf: &Path, args: &[String]) -> std::result::Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .env("SLURM_CONF", conf)
        .output()
        .map_err(|e| format!("running {program}: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(if out.stderr.is_empty() {
        &out.stdout
    } else {
        &out.stderr
    });
    Err(format!(
        "{program} {} failed ({}): {}",
        args.join(" "),
        out.status,
        said.trim()
    ))
}

pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .context(|| format!("running {program}"))?;
    stdout_or_error(program, args, out)
}

/// A finished program's standard output, or an error with its error output.
fn stdout_or_error(program: &str, args: &[&str], out: std::process::Output) -> Result<String> {
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(Error::new(format!(
        "{program} {} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// Runs a program to success with `input` on its standard input (how a secret reaches a
/// program without showing in its arguments); fails with its error output.
pub fn run_with_input(program: &str, args: &[&str], input: &[u8]) -> Result<String> {
    use std::io::Write as _;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context(|| format!("running {program}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).context(|| format!("writing to {program}"))?;
    }
    let out = child.wait_with_output().context(|| format!("running {program}"))?;
    stdout_or_error(program, args, out)
}

pub fn systemctl(args: &[&str]) -> Result<()> {
    run("systemctl", args).map(|_| ())
}

/// How often a long wait says on the console what it waits for.
const TELL_EVERY: Duration = Duration::from_secs(20);

/// Polls `probe` every `every` until it gives a value or `limit` passes; says on the console
/// what it is waiting for (and the last error) every 20 s.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, every: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + limit;
    let mut told = Instant::now();
    loop {
        let last = match probe().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => None,
            Err(e) => Some(e),
        };
        if told.elapsed() >= TELL_EVERY {
            let why = last.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
            log("waiting", &format!("still waiting for {what}{why}"));
            told = Instant::now();
        }
        if Instant::now() >= deadline {
            let why = last.map(|e| format!(": {e}")).unwrap_or_default();
            return Err(Error::new(format!("{what}: not within {}s{why}", limit.as_secs())));
        }
        tokio::time::sleep(every).await;
    }
}

/// This machine's short host name.
pub fn short_hostname() -> Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").context(|| "reading the host name".to_string())?;
    Ok(name.trim().split('.').next().unwrap_or_default().to_string())
}

/// Whether something accepts TCP connections at `addr:port` within a second.
pub fn listening(addr: &str, port: u16) -> bool {
    use std::net::ToSocketAddrs as _;
    (addr, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
}

/// Logs a boot step on the console (cloud-init copies the user data's output there).
pub fn log(step: &str, message: &str) {
    eprintln!("hpc-node[{step}]: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes sharing /home write the same files at once (a user's keys at boot): every write
    /// lands whole and none fails on another writer's temporary file.
    #[test]
    fn writers_of_one_file_on_a_shared_folder_do_not_trip_over_each_other() {
        let dir = std::env::temp_dir().join(format!("hpc-node-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("authorized_keys");
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let text = format!("writer {w} pass {i}\n");
                        write_file(&path, text.as_bytes(), 0o600, None).map_err(|e| e.to_string())?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        for w in writers {
            assert_eq!(w.join().expect("writer thread"), Ok(()));
        }
        let last = std::fs::read_to_string(&path).expect("the file");
        assert!(last.starts_with("writer ") && last.ends_with('\n'), "{last:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
