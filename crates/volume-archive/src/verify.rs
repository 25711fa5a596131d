//! Reading an archive back and comparing it with its manifest. Reads only;
//! never writes anything anywhere.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, Read};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::manifest::{EntryKind, ExportMeta, Manifest, ManifestEntry, SCHEMA_VERSION};
use crate::{
    hex, ArchiveError, MANIFEST_NAME, MAX_ENTRIES, MAX_MANIFEST_BYTES, MAX_PATH_BYTES, VOLUME_DIR,
};

/// The buffer data is hashed through.
const READ_BUFFER: usize = 64 * 1024;
/// A member's path may be `volume/` plus [`MAX_PATH_BYTES`], with room to
/// spare for what it is compared against.
const MAX_MEMBER_PATH: u64 = MAX_PATH_BYTES as u64 + 64;
/// What verify counts for one member besides its path and target.
const RECORD_OVERHEAD: u64 = 128;

/// What a verification found: the manifest's description of the volume and
/// every difference between the manifest and the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    pub meta: ExportMeta,
    /// What the manifest lists.
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// The manifest's files' bytes.
    pub bytes: u64,
    /// Sorted by path; empty when the archive is what its manifest says.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether the archive holds exactly what its manifest lists.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One difference. `path` is relative to the volume, as in the manifest;
/// `member` is a member's whole path in the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file's content is not what was exported (SHA-256, hex).
    Mismatch {
        path: String,
        expected: String,
        actual: String,
    },
    SizeMismatch {
        path: String,
        expected: u64,
        actual: u64,
    },
    /// In the manifest, not in the archive.
    Missing { path: String },
    /// In the archive's `volume/`, not in the manifest.
    Unexpected { path: String },
    KindMismatch {
        path: String,
        expected: EntryKind,
        actual: EntryKind,
    },
    ModeMismatch {
        path: String,
        expected: u32,
        actual: u32,
    },
    LinkMismatch {
        path: String,
        expected: String,
        actual: String,
    },
    /// More than one member with this path.
    Duplicate { path: String },
    /// A member outside `volume/` other than the manifest.
    Foreign { member: String },
    /// A member path that is absolute, climbs with `..`, has empty or `.`
    /// components or is not UTF-8 (shown lossily).
    UnsafePath { member: String },
}

impl Problem {
    /// The path (or member) the problem is about, for sorting and display.
    pub fn path(&self) -> &str {
        match self {
            Problem::Mismatch { path, .. }
            | Problem::SizeMismatch { path, .. }
            | Problem::Missing { path }
            | Problem::Unexpected { path }
            | Problem::KindMismatch { path, .. }
            | Problem::ModeMismatch { path, .. }
            | Problem::LinkMismatch { path, .. }
            | Problem::Duplicate { path } => path,
            Problem::Foreign { member } | Problem::UnsafePath { member } => member,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Mismatch {
                path,
                expected,
                actual,
            } => write!(
                f,
                "{path:?}: content differs (sha256 {actual}, manifest {expected})"
            ),
            Problem::SizeMismatch {
                path,
                expected,
                actual,
            } => write!(f, "{path:?}: {actual} bytes, manifest says {expected}"),
            Problem::Missing { path } => write!(f, "{path:?}: in the manifest, not in the archive"),
            Problem::Unexpected { path } => {
                write!(f, "{path:?}: in the archive, not in the manifest")
            }
            Problem::KindMismatch {
                path,
                expected,
                actual,
            } => write!(f, "{path:?}: a {actual}, manifest says a {expected}"),
            Problem::ModeMismatch {
                path,
                expected,
                actual,
            } => write!(f, "{path:?}: mode {actual:o}, manifest says {expected:o}"),
            Problem::LinkMismatch {
                path,
                expected,
                actual,
            } => write!(
                f,
                "{path:?}: links to {actual:?}, manifest says {expected:?}"
            ),
            Problem::Duplicate { path } => write!(f, "{path:?}: more than one member"),
            Problem::Foreign { member } => {
                write!(f, "member {member:?} is outside {VOLUME_DIR}/")
            }
            Problem::UnsafePath { member } => write!(f, "member {member:?} has an unsafe path"),
        }
    }
}

/// One `volume/` member as read.
struct Record {
    kind: EntryKind,
    size: u64,
    sha256: Option<String>,
    mode: u32,
    target: Option<String>,
}

/// Reads a tar written by [`export`](crate::export), hashes every file under
/// `volume/` and compares everything with `MANIFEST.json`. Differences are
/// the report's problems; an archive that cannot be read as one (truncated,
/// malformed, no or unreadable manifest, past a limit) is an error.
pub fn verify(input: impl Read) -> Result<VerifyReport, ArchiveError> {
    let mut archive = tar::Archive::new(input);
    // Raw: the tar crate would read GNU long names and PAX headers into
    // memory whatever their size; here they are read with a cap.
    let entries = archive.entries().map_err(ArchiveError::Read)?.raw(true);

    let mut records: HashMap<String, Record> = HashMap::new();
    let mut duplicates: HashSet<String> = HashSet::new();
    let mut problems = Vec::new();
    let mut manifest: Option<Vec<u8>> = None;
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    let mut members: u64 = 0;
    let mut budget: u64 = 0;
    let mut buf = vec![0u8; READ_BUFFER];

    for entry in entries {
        let mut entry = entry.map_err(ArchiveError::Read)?;
        let type_byte = entry.header().entry_type().as_byte();
        let declared = entry.size();
        match type_byte {
            b'L' | b'K' => {
                let slot = if type_byte == b'L' {
                    &mut long_name
                } else {
                    &mut long_link
                };
                if slot.is_some() {
                    return Err(ArchiveError::Malformed(
                        "two GNU long names for one member".to_owned(),
                    ));
                }
                let mut bytes = read_capped(&mut entry, MAX_MEMBER_PATH + 1, "a GNU long name")?;
                while bytes.last() == Some(&0) {
                    bytes.pop();
                }
                *slot = Some(bytes);
                continue;
            }
            b'x' | b'g' => {
                return Err(ArchiveError::Malformed(
                    "a PAX header, which export never writes".to_owned(),
                ));
            }
            _ => {}
        }

        members += 1;
        if members > MAX_ENTRIES as u64 + 2 {
            return Err(ArchiveError::Limit {
                what: "the archive's number of members".to_owned(),
                max: MAX_ENTRIES as u64 + 2,
            });
        }
        let mut path = match long_name.take() {
            Some(p) => p,
            None => entry.header().path_bytes().into_owned(),
        };
        let link = match long_link.take() {
            Some(l) => Some(l),
            None => entry.header().link_name_bytes().map(|l| l.into_owned()),
        };
        // Every member costs its path and target, whether it becomes a
        // record or a problem.
        budget += path.len() as u64 + link.as_ref().map_or(0, |l| l.len() as u64) + RECORD_OVERHEAD;
        if budget > MAX_MANIFEST_BYTES {
            return Err(ArchiveError::Limit {
                what: "the archive's members' paths".to_owned(),
                max: MAX_MANIFEST_BYTES,
            });
        }
        if path.len() > 1 && path.last() == Some(&b'/') {
            path.pop();
        }
        let shown = String::from_utf8_lossy(&path).into_owned();
        let kind = match type_byte {
            b'0' | b'\0' => EntryKind::File,
            b'5' => EntryKind::Dir,
            b'2' => EntryKind::Symlink,
            other => EntryKind::Other(other),
        };

        if path == MANIFEST_NAME.as_bytes() && kind == EntryKind::File {
            if manifest.is_some() {
                return Err(ArchiveError::DuplicateManifest);
            }
            if declared > MAX_MANIFEST_BYTES {
                return Err(ArchiveError::Limit {
                    what: format!("MANIFEST.json ({declared} bytes)"),
                    max: MAX_MANIFEST_BYTES,
                });
            }
            let bytes = read_capped(&mut entry, MAX_MANIFEST_BYTES, MANIFEST_NAME)?;
            if bytes.len() as u64 != declared {
                return Err(ArchiveError::Truncated { member: shown });
            }
            manifest = Some(bytes);
            continue;
        }

        let Ok(text) = std::str::from_utf8(&path) else {
            problems.push(Problem::UnsafePath { member: shown });
            continue;
        };
        if text.starts_with('/') || text.split('/').any(|c| c == "..") {
            problems.push(Problem::UnsafePath { member: shown });
            continue;
        }
        if text == VOLUME_DIR {
            if kind != EntryKind::Dir {
                problems.push(Problem::Foreign { member: shown });
            }
            continue;
        }
        let Some(rel) = text
            .strip_prefix(VOLUME_DIR)
            .and_then(|r| r.strip_prefix('/'))
        else {
            problems.push(Problem::Foreign { member: shown });
            continue;
        };
        if !clean_rel(rel) {
            problems.push(Problem::UnsafePath { member: shown });
            continue;
        }

        let (size, sha256) = if kind == EntryKind::File {
            let (size, sha) = hash(&mut entry, &mut buf, &shown)?;
            if size != declared {
                return Err(ArchiveError::Truncated { member: shown });
            }
            (size, Some(sha))
        } else {
            (declared, None)
        };
        let mode = entry.header().mode().map_err(|e| {
            ArchiveError::Malformed(format!("member {shown:?} has an unreadable mode: {e}"))
        })? & 0o7777;
        let target = match kind {
            EntryKind::Symlink => {
                Some(String::from_utf8_lossy(link.as_deref().unwrap_or_default()).into_owned())
            }
            _ => None,
        };

        if records.contains_key(rel) {
            if duplicates.insert(rel.to_owned()) {
                problems.push(Problem::Duplicate {
                    path: rel.to_owned(),
                });
            }
            continue;
        }
        records.insert(
            rel.to_owned(),
            Record {
                kind,
                size,
                sha256,
                mode,
                target,
            },
        );
    }
    if long_name.is_some() || long_link.is_some() {
        return Err(ArchiveError::Malformed(
            "a GNU long name with no member after it".to_owned(),
        ));
    }

    let manifest = parse_manifest(&manifest.ok_or(ArchiveError::NoManifest)?)?;
    let mut report = VerifyReport {
        meta: manifest.meta(),
        files: 0,
        dirs: 0,
        symlinks: 0,
        bytes: 0,
        problems,
    };
    for entry in &manifest.entries {
        match entry {
            ManifestEntry::File { size, .. } => {
                report.files += 1;
                report.bytes = report.bytes.saturating_add(*size);
            }
            ManifestEntry::Dir { .. } => report.dirs += 1,
            ManifestEntry::Symlink { .. } => report.symlinks += 1,
        }
        let path = entry.path();
        let Some(record) = records.remove(path) else {
            report.problems.push(Problem::Missing {
                path: path.to_owned(),
            });
            continue;
        };
        compare(entry, &record, &mut report.problems);
    }
    for (path, _) in records {
        report.problems.push(Problem::Unexpected { path });
    }
    report.problems.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(report)
}

fn compare(entry: &ManifestEntry, record: &Record, problems: &mut Vec<Problem>) {
    let path = entry.path().to_owned();
    if entry.kind() != record.kind {
        problems.push(Problem::KindMismatch {
            path,
            expected: entry.kind(),
            actual: record.kind,
        });
        return;
    }
    match entry {
        ManifestEntry::File {
            size, sha256, mode, ..
        } => {
            let actual = record.sha256.clone().unwrap_or_default();
            if *size != record.size {
                problems.push(Problem::SizeMismatch {
                    path: path.clone(),
                    expected: *size,
                    actual: record.size,
                });
            } else if !sha256.eq_ignore_ascii_case(&actual) {
                problems.push(Problem::Mismatch {
                    path: path.clone(),
                    expected: sha256.clone(),
                    actual,
                });
            }
            if *mode != record.mode {
                problems.push(Problem::ModeMismatch {
                    path,
                    expected: *mode,
                    actual: record.mode,
                });
            }
        }
        ManifestEntry::Dir { mode, .. } => {
            if *mode != record.mode {
                problems.push(Problem::ModeMismatch {
                    path,
                    expected: *mode,
                    actual: record.mode,
                });
            }
        }
        ManifestEntry::Symlink { target, .. } => {
            let actual = record.target.clone().unwrap_or_default();
            if *target != actual {
                problems.push(Problem::LinkMismatch {
                    path,
                    expected: target.clone(),
                    actual,
                });
            }
        }
    }
}

fn parse_manifest(bytes: &[u8]) -> Result<Manifest, ArchiveError> {
    #[derive(Deserialize)]
    struct Probe {
        schema_version: Option<u64>,
    }
    let bad = |e: serde_json::Error| ArchiveError::BadManifest(e.to_string());
    let probe: Probe = serde_json::from_slice(bytes).map_err(bad)?;
    match probe.schema_version {
        Some(SCHEMA_VERSION) => {}
        Some(found) => return Err(ArchiveError::UnsupportedSchema { found }),
        None => return Err(ArchiveError::BadManifest("no schema_version".to_owned())),
    }
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(bad)?;
    if manifest.entries.len() > MAX_ENTRIES {
        return Err(ArchiveError::Limit {
            what: "the manifest's number of entries".to_owned(),
            max: MAX_ENTRIES as u64,
        });
    }
    let mut seen = HashSet::with_capacity(manifest.entries.len());
    for entry in &manifest.entries {
        let path = entry.path();
        if path.len() > MAX_PATH_BYTES || !clean_rel(path) {
            return Err(ArchiveError::BadManifest(format!(
                "entry {path:?} is not a clean relative path"
            )));
        }
        if !seen.insert(path) {
            return Err(ArchiveError::BadManifest(format!(
                "entry {path:?} is listed twice"
            )));
        }
    }
    Ok(manifest)
}

/// A relative path of plain names: not empty, no empty, `.` or `..`
/// components, no NUL.
fn clean_rel(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.contains('\0')
        && rel
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Reads a member's data whole, refusing more than `cap` bytes.
fn read_capped(r: &mut impl Read, cap: u64, what: &str) -> Result<Vec<u8>, ArchiveError> {
    let mut bytes = Vec::new();
    r.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ArchiveError::Read)?;
    if bytes.len() as u64 > cap {
        return Err(ArchiveError::Limit {
            what: what.to_owned(),
            max: cap,
        });
    }
    Ok(bytes)
}

/// Hashes a member's data through `buf`: its length and SHA-256 (hex).
fn hash(r: &mut impl Read, buf: &mut [u8], member: &str) -> Result<(u64, String), ArchiveError> {
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    loop {
        let n = match r.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(ArchiveError::Truncated {
                    member: member.to_owned(),
                })
            }
            Err(e) => return Err(ArchiveError::Read(e)),
        };
        hasher.update(buf.get(..n).unwrap_or_default());
        total += n as u64;
    }
    Ok((total, hex(&hasher.finalize())))
}
