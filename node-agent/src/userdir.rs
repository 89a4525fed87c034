//! Directories a user controls (their home, their `~/.ssh`), changed by root without following
//! anything the user planted there: every step is relative to a directory already opened, no
//! link is followed at any step, nothing but a regular file is read, and a file is replaced by
//! renaming a fresh one over it (never written through). A link or a file where a directory
//! belongs is refused with an error naming it; what it points at is never touched.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, Uid};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// A directory opened without following a link: what is done in it stays in it.
pub struct UserDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// Who owns what is made in a [`UserDir`], and with what mode.
#[derive(Clone, Copy, Debug)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);

impl UserDir {
    /// `path`, which must be a directory itself (a link at its last component is refused);
    /// the components above it are the system's (`/home`), not the user's.
    pub fn open(path: &Path) -> Result<UserDir> {
        let fd = rustix::fs::open(path, DIR_FLAGS, Mode::empty()).map_err(|e| refused(path, e))?;
        Ok(UserDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The subdirectory `name` if it exists (`None` if not); a link or a file there is refused.
    pub fn subdir(&self, name: &str) -> Result<Option<UserDir>> {
        match rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Some(UserDir {
                fd,
                path: self.path.join(name),
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(refused(&self.path.join(name), e)),
        }
    }

    /// The subdirectory `name`, made when missing; in either case given `mode` and `owner`.
    pub fn ensure_subdir(&self, name: &str, mode: u32, owner: Owner) -> Result<UserDir> {
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(refused(&self.path.join(name), e)),
        }
        let dir = self
            .subdir(name)?
            .ok_or_else(|| Error::new(format!("{} went away while being made", self.path.join(name).display())))?;
        dir.set(mode, owner)?;
        Ok(dir)
    }

    /// This directory's mode and owner, set through the open directory.
    pub fn set(&self, mode: u32, owner: Owner) -> Result<()> {
        rustix::fs::fchown(&self.fd, Some(uid(owner)), Some(gid(owner)))
            .and_then(|()| rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(mode)))
            .map_err(|e| refused(&self.path, e))
    }

    /// Installs `contents` as the file `name` (mode, owner) unless it already is exactly that.
    /// The new file is made beside it exclusively, owned and moded before any content, then
    /// renamed over `name`: a link at `name` is replaced, never followed. Returns whether
    /// anything changed.
    pub fn write(&self, name: &str, contents: &[u8], mode: u32, owner: Owner) -> Result<bool> {
        if self.holds(name, contents, mode, owner) {
            return Ok(false);
        }
        let tmp = crate::host::temp_name(name);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
            .map_err(|e| refused(&self.path.join(&tmp), e))?;
        let written = rustix::fs::fchown(&fd, Some(uid(owner)), Some(gid(owner)))
            .and_then(|()| rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)))
            .map_err(std::io::Error::from)
            .and_then(|()| std::fs::File::from(fd).write_all(contents))
            .and_then(|()| rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(std::io::Error::from));
        written.map_err(|e| {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            Error::new(format!("writing {}: {e}", self.path.join(name).display()))
        })?;
        Ok(true)
    }

    /// Removes the entry `name` (a file or a link, not followed); false when there was none.
    pub fn remove(&self, name: &str) -> Result<bool> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(refused(&self.path.join(name), e)),
        }
    }

    /// Whether `name` is a regular file holding exactly `contents` with `mode` and `owner`.
    /// Opened without following a link and without blocking (a FIFO planted there is no
    /// regular file), and read no further than `contents`' length.
    fn holds(&self, name: &str, contents: &[u8], mode: u32, owner: Owner) -> bool {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::openat(&self.fd, name, flags, Mode::empty()) else {
            return false;
        };
        let Ok(stat) = rustix::fs::fstat(&fd) else {
            return false;
        };
        let same_inode = FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            && stat.st_mode & 0o7777 == mode
            && (stat.st_uid, stat.st_gid) == (owner.uid, owner.gid)
            && u64::try_from(stat.st_size).is_ok_and(|size| size == contents.len() as u64);
        if !same_inode {
            return false;
        }
        let mut held = Vec::with_capacity(contents.len());
        let limit = contents.len() as u64 + 1;
        std::fs::File::from(fd).take(limit).read_to_end(&mut held).is_ok() && held == contents
    }
}

fn uid(owner: Owner) -> Uid {
    Uid::from_raw(owner.uid)
}

fn gid(owner: Owner) -> Gid {
    Gid::from_raw(owner.gid)
}

/// The error for `path`, naming a link or a non-directory the way an administrator reads it
/// (opened with O_NOFOLLOW and O_DIRECTORY, Linux answers ENOTDIR for both; what is there is
/// looked at, never followed, for the message only).
fn refused(path: &Path, e: Errno) -> Error {
    let why = match e {
        Errno::LOOP | Errno::NOTDIR => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => "is a symbolic link (not followed)".to_string(),
            _ => "is not a directory".to_string(),
        },
        other => std::io::Error::from(other).to_string(),
    };
    Error::new(format!("{} {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    /// The tests' own account: they need not run as root.
    fn me() -> Owner {
        let m = std::fs::metadata(acceptance_tests::scratch_dir("userdir-owner")).expect("scratch dir");
        Owner {
            uid: m.uid(),
            gid: m.gid(),
        }
    }

    #[test]
    fn a_link_where_a_directory_belongs_is_refused_and_its_target_untouched() {
        let dir = acceptance_tests::scratch_dir("userdir-link");
        let target = dir.join("etc");
        std::fs::create_dir(&target).expect("target");
        std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let home = dir.join("home");
        std::fs::create_dir(&home).expect("home");
        std::os::unix::fs::symlink(&target, home.join(".ssh")).expect("link");
        let owner = me();
        let err = UserDir::open(&home)
            .and_then(|h| h.ensure_subdir(".ssh", 0o700, owner))
            .err()
            .expect("a link must be refused");
        assert!(
            err.to_string().contains(".ssh is a symbolic link (not followed)"),
            "{err}"
        );
        let mode = std::fs::metadata(&target).expect("target").mode() & 0o7777;
        assert_eq!(mode, 0o755, "the link's target was changed");
        // A plain file there is refused as well.
        std::fs::remove_file(home.join(".ssh")).expect("unlink");
        std::fs::write(home.join(".ssh"), b"x").expect("file");
        let err = UserDir::open(&home)
            .and_then(|h| h.ensure_subdir(".ssh", 0o700, owner))
            .err();
        assert!(err.is_some_and(|e| e.to_string().contains("is not a directory")));
        // A link given as the directory itself is refused too.
        assert!(UserDir::open(&home.join(".ssh")).is_err());
    }

    #[test]
    fn a_file_is_replaced_not_written_through_a_link_and_rewritten_only_when_it_differs() {
        let dir = acceptance_tests::scratch_dir("userdir-write");
        let victim = dir.join("shadow");
        std::fs::write(&victim, b"root secret\n").expect("victim");
        let home = dir.join("home");
        std::fs::create_dir(&home).expect("home");
        let owner = me();
        let ssh = UserDir::open(&home)
            .and_then(|h| h.ensure_subdir(".ssh", 0o700, owner))
            .expect("made .ssh");
        std::os::unix::fs::symlink(&victim, home.join(".ssh/authorized_keys")).expect("link");
        assert!(ssh
            .write("authorized_keys", b"ssh-ed25519 AAAA k\n", 0o600, owner)
            .expect("written"));
        assert_eq!(
            std::fs::read(&victim).expect("victim"),
            b"root secret\n",
            "written through the link"
        );
        let keys = home.join(".ssh/authorized_keys");
        let meta = std::fs::symlink_metadata(&keys).expect("keys");
        assert!(meta.is_file() && meta.mode() & 0o7777 == 0o600, "{meta:?}");
        assert_eq!(std::fs::read(&keys).expect("keys"), b"ssh-ed25519 AAAA k\n");
        assert!(!ssh
            .write("authorized_keys", b"ssh-ed25519 AAAA k\n", 0o600, owner)
            .expect("same"));
        assert!(ssh.remove("authorized_keys").expect("removed"));
        assert!(!ssh.remove("authorized_keys").expect("already gone"));
        let left: Vec<_> = std::fs::read_dir(home.join(".ssh")).expect("ls").flatten().collect();
        assert!(left.is_empty(), "temp files left: {left:?}");
    }
}
