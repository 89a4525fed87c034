//! Files in the agent's state directory that several programs change at once: Slurm runs
//! resume and suspend programs side by side as SlurmUser, the sweep runs as root. Each change
//! reads, changes and writes the file under a lock on the directory (a lock needs no file any
//! of them may fail to open) and replaces the file atomically through a temporary file of its
//! own process.

use std::fs::File;
use std::io;
use std::path::Path;

/// Holds the directory's lock until dropped.
pub fn lock_dir(dir: &Path) -> io::Result<File> {
    std::fs::create_dir_all(dir)?;
    let handle = File::open(dir)?;
    handle.lock()?;
    Ok(handle)
}

/// Replaces `path` with `bytes` at once (readers see the old file or the new one).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
