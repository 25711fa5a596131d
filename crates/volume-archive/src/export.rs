//! Writing the archive: one pass, hashing while copying.

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{FileType, Stat};
use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

use crate::fsx::{self, io_err};
use crate::manifest::{ExportMeta, Manifest, ManifestEntry, SCHEMA_VERSION};
use crate::{
    hex, join, ArchiveError, MANIFEST_NAME, MAX_DEPTH, MAX_ENTRIES, MAX_MANIFEST_BYTES,
    MAX_PATH_BYTES, VOLUME_DIR,
};

/// The buffer between the writer and the caller's stream.
const WRITE_BUFFER: usize = 256 * 1024;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// The files' bytes (not the archive's).
    pub bytes: u64,
    /// Entries neither file, directory nor symlink, left out.
    pub skipped: Vec<Skipped>,
}

/// An entry export left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Relative to the volume.
    pub path: String,
    /// "socket", "fifo", "character device", "block device" or "unknown".
    pub kind: &'static str,
}

/// Writes `dir` as an uncompressed tar to `out`: `volume/` and everything
/// under it, then `MANIFEST.json` (the crate's docs say why last). Symlinks
/// are stored, never followed; other special files are skipped and listed in
/// the summary. `out` is written through a buffer and flushed at the end; on
/// an error what was written is incomplete.
pub fn export(
    dir: &Path,
    out: impl Write,
    meta: &ExportMeta,
) -> Result<ExportSummary, ArchiveError> {
    let (root, root_st) = fsx::open_root(dir)?;
    let mut ex = Exporter {
        builder: tar::Builder::new(BufWriter::with_capacity(WRITE_BUFFER, out)),
        entries: Vec::new(),
        summary: ExportSummary::default(),
        shown_root: dir.display().to_string(),
    };
    ex.append_dir(VOLUME_DIR, &root_st)?;
    ex.walk(&root, "", 1)?;

    let Exporter {
        mut builder,
        entries,
        summary,
        ..
    } = ex;
    let manifest = Manifest {
        schema_version: SCHEMA_VERSION,
        volume: meta.volume.clone(),
        retained_id: meta.retained_id.clone(),
        workspace: meta.workspace.clone(),
        owner: meta.owner.clone(),
        exported_at: meta.exported_at.clone(),
        entries,
    };
    let mut json =
        serde_json::to_vec(&manifest).map_err(|e| ArchiveError::Write(io::Error::other(e)))?;
    json.push(b'\n');
    let len = json.len() as u64;
    if len > MAX_MANIFEST_BYTES {
        return Err(ArchiveError::Limit {
            what: format!("the manifest ({len} bytes)"),
            max: MAX_MANIFEST_BYTES,
        });
    }
    let mut header = Header::new_gnu();
    header.set_entry_type(EntryType::Regular);
    header.set_size(len);
    header.set_mode(0o644);
    header.set_mtime(0);
    builder
        .append_data(&mut header, MANIFEST_NAME, json.as_slice())
        .map_err(ArchiveError::Write)?;
    let mut buffered = builder.into_inner().map_err(ArchiveError::Write)?;
    buffered.flush().map_err(ArchiveError::Write)?;
    Ok(summary)
}

struct Exporter<W: Write> {
    builder: tar::Builder<BufWriter<W>>,
    entries: Vec<ManifestEntry>,
    summary: ExportSummary,
    shown_root: String,
}

impl<W: Write> Exporter<W> {
    fn shown(&self, rel: &str) -> String {
        format!("{}/{rel}", self.shown_root)
    }

    fn push(&mut self, entry: ManifestEntry) -> Result<(), ArchiveError> {
        if self.entries.len() >= MAX_ENTRIES {
            return Err(ArchiveError::Limit {
                what: "the volume's number of entries".to_owned(),
                max: MAX_ENTRIES as u64,
            });
        }
        self.entries.push(entry);
        Ok(())
    }

    fn walk(&mut self, dirfd: &OwnedFd, rel: &str, depth: usize) -> Result<(), ArchiveError> {
        let shown_dir = if rel.is_empty() {
            self.shown_root.clone()
        } else {
            self.shown(rel)
        };
        for name in fsx::list(dirfd, &shown_dir)? {
            let Ok(utf8) = std::str::from_utf8(name.as_bytes()) else {
                return Err(ArchiveError::NonUtf8Name {
                    path: self.shown(&join(rel, &String::from_utf8_lossy(name.as_bytes()))),
                });
            };
            let child = join(rel, utf8);
            if child.len() > MAX_PATH_BYTES {
                return Err(ArchiveError::Limit {
                    what: format!("{}: path length", self.shown(&child)),
                    max: MAX_PATH_BYTES as u64,
                });
            }
            let st = fsx::lstat_at(dirfd, &name).map_err(|e| self.changed(&child, e))?;
            match fsx::file_type(&st) {
                FileType::Directory => {
                    if depth >= MAX_DEPTH {
                        return Err(ArchiveError::Limit {
                            what: format!("{}: directory depth", self.shown(&child)),
                            max: MAX_DEPTH as u64,
                        });
                    }
                    let sub = fsx::open_dir_at(dirfd, name.as_c_str())
                        .map_err(|e| self.changed(&child, e))?;
                    let opened = rustix::fs::fstat(&sub).map_err(|e| io_err(&child, e))?;
                    if !fsx::same(&st, &opened) {
                        return Err(self.replaced(&child));
                    }
                    let mode = opened.st_mode & 0o7777;
                    self.append_dir(&format!("{VOLUME_DIR}/{child}"), &opened)?;
                    self.push(ManifestEntry::Dir {
                        path: child.clone(),
                        mode,
                    })?;
                    self.summary.dirs += 1;
                    self.walk(&sub, &child, depth + 1)?;
                }
                FileType::RegularFile => self.append_file(dirfd, &name, child, &st)?,
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(dirfd, name.as_c_str(), Vec::new())
                        .map_err(|e| self.changed(&child, e))?;
                    let Ok(target) = target.into_string() else {
                        return Err(ArchiveError::NonUtf8Name {
                            path: format!("{} (its target)", self.shown(&child)),
                        });
                    };
                    if target.len() > MAX_PATH_BYTES {
                        return Err(ArchiveError::Limit {
                            what: format!("{}: symlink target length", self.shown(&child)),
                            max: MAX_PATH_BYTES as u64,
                        });
                    }
                    let mut header = header_from(&st, EntryType::Symlink, 0);
                    self.builder
                        .append_link(&mut header, format!("{VOLUME_DIR}/{child}"), &target)
                        .map_err(ArchiveError::Write)?;
                    self.push(ManifestEntry::Symlink {
                        path: child,
                        target,
                    })?;
                    self.summary.symlinks += 1;
                }
                other => {
                    let kind = match other {
                        FileType::Socket => "socket",
                        FileType::Fifo => "fifo",
                        FileType::CharacterDevice => "character device",
                        FileType::BlockDevice => "block device",
                        _ => "unknown",
                    };
                    self.summary.skipped.push(Skipped { path: child, kind });
                }
            }
        }
        Ok(())
    }

    fn append_dir(&mut self, path: &str, st: &Stat) -> Result<(), ArchiveError> {
        let mut header = header_from(st, EntryType::Directory, 0);
        self.builder
            .append_data(&mut header, path, io::empty())
            .map_err(ArchiveError::Write)
    }

    /// Copies one file into the tar through the hasher; its size is the one
    /// `fstat` gave when it was opened, and it must still be that at the end.
    fn append_file(
        &mut self,
        dirfd: &OwnedFd,
        name: &CStr,
        rel: String,
        listed: &Stat,
    ) -> Result<(), ArchiveError> {
        let fd = fsx::open_file_at(dirfd, name).map_err(|e| self.changed(&rel, e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| io_err(&self.shown(&rel), e))?;
        if !fsx::same(listed, &st) || fsx::file_type(&st) != FileType::RegularFile {
            return Err(self.replaced(&rel));
        }
        let size = fsx::size(&st);
        let mut reader = Hashing {
            inner: File::from(fd),
            hasher: Sha256::new(),
            remaining: size,
            shrank: false,
            read_failed: false,
        };
        let mut header = header_from(&st, EntryType::Regular, size);
        let member = format!("{VOLUME_DIR}/{rel}");
        if let Err(e) = self.builder.append_data(&mut header, &member, &mut reader) {
            return Err(if reader.shrank {
                self.size_changed(&rel, size, "shrank")
            } else if reader.read_failed {
                io_err(&self.shown(&rel), e)
            } else {
                ArchiveError::Write(e)
            });
        }
        let mut probe = [0u8; 1];
        match reader.inner.read(&mut probe) {
            Ok(0) => {}
            Ok(_) => return Err(self.size_changed(&rel, size, "grew")),
            Err(e) => return Err(io_err(&self.shown(&rel), e)),
        }
        let sha256 = hex(&reader.hasher.finalize());
        self.push(ManifestEntry::File {
            path: rel,
            size,
            sha256,
            mode: st.st_mode & 0o7777,
        })?;
        self.summary.files += 1;
        self.summary.bytes += size;
        Ok(())
    }

    fn changed(&self, rel: &str, e: rustix::io::Errno) -> ArchiveError {
        match e {
            rustix::io::Errno::NOENT => ArchiveError::Changed {
                path: self.shown(rel),
                what: "removed".to_owned(),
            },
            // O_NOFOLLOW met a symlink, O_DIRECTORY a non-directory: the
            // entry was replaced after it was listed.
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => self.replaced(rel),
            e => io_err(&self.shown(rel), e),
        }
    }

    fn replaced(&self, rel: &str) -> ArchiveError {
        ArchiveError::Changed {
            path: self.shown(rel),
            what: "replaced by another entry".to_owned(),
        }
    }

    fn size_changed(&self, rel: &str, size: u64, how: &str) -> ArchiveError {
        ArchiveError::Changed {
            path: self.shown(rel),
            what: format!("{how} from {size} bytes while being read"),
        }
    }
}

fn header_from(st: &Stat, kind: EntryType, size: u64) -> Header {
    let mut header = Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(st.st_mode & 0o7777);
    header.set_uid(u64::from(st.st_uid));
    header.set_gid(u64::from(st.st_gid));
    header.set_mtime(u64::try_from(fsx::mtime(st)).unwrap_or(0));
    header
}

/// Reads at most `remaining` bytes, hashing them; the source ending earlier
/// is an error (the tar header already promised the size).
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    remaining: u64,
    shrank: bool,
    read_failed: bool,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let Some(buf) = buf.get_mut(..want) else {
            return Ok(0);
        };
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(e),
            Err(e) => {
                self.read_failed = true;
                return Err(e);
            }
        };
        if n == 0 {
            self.shrank = true;
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being read",
            ));
        }
        self.hasher.update(buf.get(..n).unwrap_or_default());
        self.remaining -= n as u64;
        Ok(n)
    }
}
