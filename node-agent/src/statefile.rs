//! Files in the agent's state directory that several programs change at once: Slurm runs
//! resume and suspend programs side by side as SlurmUser, the sweep runs as root, and with a
//! backup controller the directory is on NFS (EFS), shared by both controllers. Each change
//! reads, changes and writes the file under the directory's lock file and replaces the file
//! atomically through a temporary file of its own process.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// The lock file in a state directory. A lock file, not the directory: NFS locks a file opened
/// for writing only, and a directory cannot be.
const LOCK_FILE: &str = ".lock";

/// Holds the directory's lock until dropped. The lock file belongs to the directory's owner
/// and group, so root and SlurmUser can both open it.
pub fn lock_dir(dir: &Path) -> io::Result<File> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(LOCK_FILE);
    let handle = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o660)
        .open(&path)?;
    let (file, owner) = (handle.metadata()?, std::fs::metadata(dir)?);
    if (file.uid(), file.gid()) != (owner.uid(), owner.gid()) {
        std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid()))?;
    }
    handle.lock()?;
    Ok(handle)
}

/// Replaces `path` with `bytes` at once (readers see the old file or the new one).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
