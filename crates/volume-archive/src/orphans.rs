//! Directories in the volumes dir that nothing knows.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, CWD};

use crate::fsx::{self, io_err};
use crate::{ArchiveError, MAX_DEPTH};

/// A directory directly under the volumes dir whose name no workspace's state
/// and no retained record knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The directory's name (lossily decoded if it is not UTF-8; `path` is
    /// exact).
    pub name: String,
    pub path: PathBuf,
    /// The sum of the sizes of the regular files under it (apparent sizes;
    /// symlinks are not followed and count nothing).
    pub size_bytes: u64,
    /// The directory's own modification time, in seconds since the epoch.
    pub mtime_unix: i64,
}

/// The directories directly under `volumes_dir` whose names are not in
/// `known`, sorted by name. Files and symlinks there are not volumes and are
/// left out; `volumes_dir` itself may be reached through a symlink (it is
/// the server's configuration), nothing under it is.
pub fn orphans(volumes_dir: &Path, known: &HashSet<String>) -> Result<Vec<Orphan>, ArchiveError> {
    let shown = volumes_dir.display().to_string();
    // Without O_NOFOLLOW: the volumes dir is configuration, not a volume.
    let dirfd = rustix::fs::openat(
        CWD,
        volumes_dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err(&shown, e))?;
    let mut found = Vec::new();
    for name in fsx::list(&dirfd, &shown)? {
        let lossy = String::from_utf8_lossy(name.as_bytes()).into_owned();
        let child_shown = format!("{shown}/{lossy}");
        let st = match fsx::lstat_at(&dirfd, &name) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(io_err(&child_shown, e)),
        };
        if fsx::file_type(&st) != FileType::Directory {
            continue;
        }
        // A name that is not UTF-8 cannot be known.
        if std::str::from_utf8(name.as_bytes()).is_ok_and(|n| known.contains(n)) {
            continue;
        }
        let sub = match fsx::open_dir_at(&dirfd, name.as_c_str()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(io_err(&child_shown, e)),
        };
        let size_bytes = tree_size(&sub, &child_shown, 1)?;
        found.push(Orphan {
            name: lossy,
            path: volumes_dir.join(std::ffi::OsStr::from_bytes(name.as_bytes())),
            size_bytes,
            mtime_unix: fsx::mtime(&st),
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.path.cmp(&b.path)));
    Ok(found)
}

/// The sizes of the regular files under a directory; what vanishes during
/// the walk counts nothing.
fn tree_size(dirfd: &OwnedFd, shown: &str, depth: usize) -> Result<u64, ArchiveError> {
    let mut total = 0u64;
    for name in fsx::list(dirfd, shown)? {
        let child_shown = format!("{shown}/{}", String::from_utf8_lossy(name.as_bytes()));
        let st = match fsx::lstat_at(dirfd, &name) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(io_err(&child_shown, e)),
        };
        match fsx::file_type(&st) {
            FileType::RegularFile => total = total.saturating_add(fsx::size(&st)),
            FileType::Directory => {
                if depth >= MAX_DEPTH {
                    return Err(ArchiveError::Limit {
                        what: format!("{child_shown}: directory depth"),
                        max: MAX_DEPTH as u64,
                    });
                }
                let sub = match fsx::open_dir_at(dirfd, name.as_c_str()) {
                    Ok(fd) => fd,
                    Err(rustix::io::Errno::NOENT) => continue,
                    Err(e) => return Err(io_err(&child_shown, e)),
                };
                total = total.saturating_add(tree_size(&sub, &child_shown, depth + 1)?);
            }
            _ => {}
        }
    }
    Ok(total)
}
