//! The walk's system calls: everything relative to a directory descriptor,
//! nothing through a symlink.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{openat, statat, AtFlags, Dir, FileType, Mode, OFlags, Stat, CWD};

use crate::ArchiveError;

pub(crate) fn io_err(path: &str, e: impl Into<io::Error>) -> ArchiveError {
    ArchiveError::Io {
        path: path.to_owned(),
        source: e.into(),
    }
}

pub(crate) fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

pub(crate) fn size(st: &Stat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}

// `st_mtime` is a C `long`: `i64` on the 64-bit targets Abode builds for.
#[allow(clippy::useless_conversion)]
pub(crate) fn mtime(st: &Stat) -> i64 {
    i64::from(st.st_mtime)
}

/// Whether two stats are of one inode.
pub(crate) fn same(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// Opens a directory the caller names, refusing it if it is a symlink or not
/// a directory (typed errors), with `O_NOFOLLOW` so that a swap after the
/// check fails too.
pub(crate) fn open_root(dir: &Path) -> Result<(OwnedFd, Stat), ArchiveError> {
    let shown = dir.display().to_string();
    let meta = std::fs::symlink_metadata(dir).map_err(|e| io_err(&shown, e))?;
    if meta.file_type().is_symlink() {
        return Err(ArchiveError::IsSymlink { path: shown });
    }
    if !meta.is_dir() {
        return Err(ArchiveError::NotADirectory { path: shown });
    }
    let fd = open_dir_at(CWD, dir).map_err(|e| io_err(&shown, e))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| io_err(&shown, e))?;
    Ok((fd, st))
}

/// Opens a directory relative to `dirfd`, not through a symlink.
pub(crate) fn open_dir_at<P: rustix::path::Arg>(
    dirfd: impl std::os::fd::AsFd,
    name: P,
) -> rustix::io::Result<OwnedFd> {
    openat(
        dirfd,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens a regular file relative to `dirfd`, not through a symlink, and
/// without blocking should a FIFO have taken its place.
pub(crate) fn open_file_at(dirfd: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    openat(
        dirfd,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
}

/// `lstat` of a name in a directory.
pub(crate) fn lstat_at(dirfd: &OwnedFd, name: &CStr) -> rustix::io::Result<Stat> {
    statat(dirfd, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// A directory's names but `.` and `..`, in byte order. Holds one
/// directory's names at a time.
pub(crate) fn list(dirfd: &OwnedFd, shown: &str) -> Result<Vec<CString>, ArchiveError> {
    let dir = Dir::read_from(dirfd).map_err(|e| io_err(shown, e))?;
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|e| io_err(shown, e))?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        names.push(name.to_owned());
    }
    names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}
