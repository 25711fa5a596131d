//! Bringing an archive's files back into a volume (`abode retained restore`).
//!
//! The volume is someone's: whatever is in it may be a link planted to lead
//! a privileged writer elsewhere. So every step is relative to a directory
//! already open, never through a symlink (`O_NOFOLLOW`), and a name the
//! archive writes is first unlinked when something other than a directory
//! of the same name is there (a link is replaced, never written through).
//! Everything restored belongs to the volume's own owner (its top
//! directory's uid and gid), so a restore by root leaves nothing of root's.

use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{
    chownat, fchmod, fchown, mkdirat, openat, symlinkat, unlinkat, AtFlags, FileType, Gid, Mode,
    OFlags, Uid,
};
use tar::EntryType;

use crate::fsx::{self, io_err};
use crate::{ArchiveError, MANIFEST_NAME, MAX_DEPTH, VOLUME_DIR};

/// What a restore wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreSummary {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
}

/// Writes the `volume/` members of the archive `input` into `dir` (which
/// must exist and not be a symlink), over what is there: a file of the same
/// path is replaced, others are left. Call it on an archive [`crate::verify`]
/// found whole: a member it cannot place (a path outside the volume, a file
/// where a directory is) is an error, and what was restored before it stays.
pub fn restore(input: impl Read, dir: &Path) -> Result<RestoreSummary, ArchiveError> {
    let (root, root_st) = fsx::open_root(dir)?;
    let owner = (Uid::from_raw(root_st.st_uid), Gid::from_raw(root_st.st_gid));
    let shown_root = dir.display().to_string();
    let mut summary = RestoreSummary::default();
    let mut archive = tar::Archive::new(input);
    let entries = archive.entries().map_err(ArchiveError::Read)?;
    for entry in entries {
        let mut entry = entry.map_err(ArchiveError::Read)?;
        let path = entry.path().map_err(ArchiveError::Read)?.into_owned();
        let shown = path.display().to_string();
        if path == Path::new(MANIFEST_NAME) {
            continue;
        }
        let Ok(rel) = path.strip_prefix(VOLUME_DIR) else {
            return Err(ArchiveError::Malformed(format!(
                "member {shown} is outside {VOLUME_DIR}/"
            )));
        };
        let mut names = Vec::new();
        for component in rel.components() {
            match component {
                Component::Normal(name) => names.push(
                    CString::new(name.as_encoded_bytes())
                        .map_err(|_| ArchiveError::Malformed(format!("member {shown}")))?,
                ),
                Component::CurDir => {}
                _ => {
                    return Err(ArchiveError::Malformed(format!(
                        "member {shown} leaves the volume"
                    )))
                }
            }
        }
        if names.len() > MAX_DEPTH {
            return Err(ArchiveError::Limit {
                what: format!("the depth of {shown}"),
                max: MAX_DEPTH as u64,
            });
        }
        let Some(name) = names.pop() else {
            // `volume/` itself: the volume's own directory stays as it is.
            continue;
        };
        let target = format!("{shown_root}/{}", rel.display());
        let parent = open_parents(&root, &names, owner, &target)?;
        let mode = entry.header().mode().map_err(ArchiveError::Read)? & 0o7777;
        match entry.header().entry_type() {
            EntryType::Directory => {
                match fsx::lstat_at(&parent, &name) {
                    Ok(st) if fsx::file_type(&st) == FileType::Directory => {}
                    Ok(_) => {
                        unlinkat(&parent, name.as_c_str(), AtFlags::empty())
                            .map_err(|e| io_err(&target, e))?;
                        mkdirat(&parent, name.as_c_str(), Mode::from_raw_mode(0o700))
                            .map_err(|e| io_err(&target, e))?;
                    }
                    Err(_) => mkdirat(&parent, name.as_c_str(), Mode::from_raw_mode(0o700))
                        .map_err(|e| io_err(&target, e))?,
                }
                let made =
                    fsx::open_dir_at(&parent, name.as_c_str()).map_err(|e| io_err(&target, e))?;
                fchown(&made, Some(owner.0), Some(owner.1)).map_err(|e| io_err(&target, e))?;
                fchmod(&made, Mode::from_raw_mode(mode)).map_err(|e| io_err(&target, e))?;
                summary.dirs += 1;
            }
            EntryType::Regular | EntryType::Continuous => {
                clear(&parent, &name, &target)?;
                let file = openat(
                    &parent,
                    name.as_c_str(),
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(|e| io_err(&target, e))?;
                fchown(&file, Some(owner.0), Some(owner.1)).map_err(|e| io_err(&target, e))?;
                let mut out = std::fs::File::from(file);
                let copied = io::copy(&mut entry, &mut out).map_err(|e| io_err(&target, e))?;
                fchmod(&out, Mode::from_raw_mode(mode)).map_err(|e| io_err(&target, e))?;
                summary.files += 1;
                summary.bytes += copied;
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(ArchiveError::Read)?
                    .ok_or_else(|| {
                        ArchiveError::Malformed(format!("symlink {shown} has no target"))
                    })?
                    .into_owned();
                clear(&parent, &name, &target)?;
                symlinkat(link.as_os_str(), &parent, name.as_c_str())
                    .map_err(|e| io_err(&target, e))?;
                chownat(
                    &parent,
                    name.as_c_str(),
                    Some(owner.0),
                    Some(owner.1),
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| io_err(&target, e))?;
                summary.symlinks += 1;
            }
            other => {
                return Err(ArchiveError::Malformed(format!(
                    "member {shown} is a {other:?}, which a volume export never holds"
                )))
            }
        }
    }
    Ok(summary)
}

/// [`restore`] of the archive file `archive` into `dir`, once
/// [`crate::verify`] found it whole (a first read): an archive that differs
/// from its manifest restores nothing.
pub fn restore_verified(archive: &Path, dir: &Path) -> Result<RestoreSummary, ArchiveError> {
    let shown = archive.display().to_string();
    let open = || {
        std::fs::File::open(archive)
            .map(|file| io::BufReader::with_capacity(256 * 1024, file))
            .map_err(|e| io_err(&shown, e))
    };
    let report = crate::verify(open()?)?;
    if let Some(problem) = report.problems.first() {
        return Err(ArchiveError::Malformed(format!(
            "{shown} does not match its manifest ({problem}, {} problem(s)); nothing was restored",
            report.problems.len()
        )));
    }
    restore(open()?, dir)
}

/// Removes what is at `name` unless nothing is; a directory there is an
/// error (a restore never empties one).
fn clear(parent: &OwnedFd, name: &CString, target: &str) -> Result<(), ArchiveError> {
    match fsx::lstat_at(parent, name) {
        Ok(st) if fsx::file_type(&st) == FileType::Directory => Err(ArchiveError::Changed {
            path: target.to_owned(),
            what: "a directory is where the archive has a file or link".to_owned(),
        }),
        Ok(_) => unlinkat(parent, name.as_c_str(), AtFlags::empty()).map_err(|e| io_err(target, e)),
        Err(_) => Ok(()),
    }
}

/// Opens (making what is missing, owned by `owner`) the directories `names`
/// under `root`, never through a link.
fn open_parents(
    root: &OwnedFd,
    names: &[CString],
    owner: (Uid, Gid),
    target: &str,
) -> Result<OwnedFd, ArchiveError> {
    let mut dir = rustix::io::dup(root).map_err(|e| io_err(target, e))?;
    for name in names {
        let next = match fsx::open_dir_at(&dir, name.as_c_str()) {
            Ok(next) => next,
            Err(rustix::io::Errno::NOENT) => {
                mkdirat(&dir, name.as_c_str(), Mode::from_raw_mode(0o700))
                    .map_err(|e| io_err(target, e))?;
                let made =
                    fsx::open_dir_at(&dir, name.as_c_str()).map_err(|e| io_err(target, e))?;
                fchown(&made, Some(owner.0), Some(owner.1)).map_err(|e| io_err(target, e))?;
                made
            }
            Err(e) => return Err(io_err(target, e)),
        };
        dir = next;
    }
    Ok(dir)
}
