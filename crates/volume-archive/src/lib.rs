//! Export, verification and orphans of workspace volumes (issue 32, "retain on
//! delete").
//!
//! When a workspace with an `abode_volume` is deleted and its volume is
//! retained, an admin may take it away as a file (`abode retained export ID
//! --to FILE`), check such a file later (`abode retained verify FILE`), and
//! find directories in the volumes dir that nothing knows any more (`abode
//! volumes orphans`). This crate is the work behind those three commands; the
//! CLI and the server only say which directory, which stream and which names
//! are known.
//!
//! # The archive
//!
//! An uncompressed tar (GNU headers, GNU long names past 100 bytes):
//!
//! - `volume/`, the volume's directory itself, then its regular files,
//!   directories and symlinks as `volume/<path>`, depth first, each
//!   directory's names in byte order (so two exports of one tree are alike
//!   but for times);
//! - last, `MANIFEST.json` ([`Manifest`]): `schema_version` 1, the
//!   [`ExportMeta`] the caller gave, and for every entry its path relative to
//!   the volume, kind and mode, for files the size and SHA-256, for symlinks
//!   the target.
//!
//! The manifest comes **last** so that export is one pass that streams: each
//! file is hashed while it is copied into the tar, and the manifest is written
//! once every hash is known. Putting it first would mean reading every file
//! twice (hash, then copy), or buffering the archive. Verify does not mind
//! where it is: it records every member as it goes and compares at the end.
//! A file called `MANIFEST.json` inside the volume is `volume/MANIFEST.json`
//! and never confused with it.
//!
//! # Invariants
//!
//! - **Pure apart from the files it is pointed at**: no clock (the caller
//!   passes `exported_at`), no network, no database, no environment.
//! - **Symlinks are never followed.** The walk opens every directory and file
//!   relative to its parent's descriptor with `O_NOFOLLOW` and checks that
//!   what it opened is what it listed, so a link planted during an export is
//!   an error, never a way out of the volume. Symlinks are stored as links;
//!   sockets, FIFOs and devices are skipped and counted
//!   ([`ExportSummary::skipped`]). Export refuses a `dir` that is itself a
//!   symlink (only the last component: the caller's path to the volume is
//!   the caller's).
//! - **Streams**: no file is held in memory; data goes through a fixed
//!   buffer and the hasher. A file whose size changes while it is read is an
//!   error naming it ([`ArchiveError::Changed`]): a tar header's size must be
//!   the data's. On any error the output is incomplete and the caller should
//!   delete it.
//! - **Verify never writes** (not to disk, not anywhere) and never panics on
//!   a hostile archive: `..` or absolute member paths, members outside
//!   `volume/`, duplicates, hard links, devices are reported as
//!   [`Problem`]s; PAX headers (export never writes them), truncation and
//!   malformed headers are errors.
//! - **Bounded memory**: the manifest may be at most [`MAX_MANIFEST_BYTES`]
//!   (256 MiB), an archive at most [`MAX_ENTRIES`] entries, a path or link
//!   target at most [`MAX_PATH_BYTES`], a tree at most [`MAX_DEPTH`]
//!   directories deep. Export refuses a volume past these limits, so any
//!   archive it writes verifies. Verify keeps one small record per member
//!   (its path, kind, size, mode, hash), the paths' total capped at
//!   [`MAX_MANIFEST_BYTES`] too, so a hostile archive costs at most about
//!   1 GiB, a real one a little more than twice its manifest.
//! - Names must be UTF-8 (the manifest is JSON): export refuses a volume with
//!   another name rather than write a manifest that does not say it.
//!
//! # Restore
//!
//! [`restore`] writes an archive's `volume/` members back into a volume
//! (`abode retained restore`, issue 47): relative to open directories, never
//! through a link, a link or file in the way replaced rather than written
//! through, and everything owned by the volume's own owner.
//!
//! The CLI and the server call it (`abode retained export|verify|restore`,
//! `abode volumes orphans`, a snapshot before a confirmed destroy);
//! `tests/big.rs` exports and verifies 200 MB.

mod export;
mod fsx;
mod manifest;
mod orphans;
mod restore;
mod verify;

use std::io;

pub use export::{export, ExportSummary, Skipped};
pub use manifest::{EntryKind, ExportMeta, Manifest, ManifestEntry, SCHEMA_VERSION};
pub use orphans::{orphans, Orphan};
pub use restore::{restore, restore_verified, RestoreSummary};
pub use verify::{verify, Problem, VerifyReport};

/// Whether `name` is one plain file or directory name (no path, no dot
/// first): a volume's or an archive's name as records keep it.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The top folder of the volume's members in the archive.
pub const VOLUME_DIR: &str = "volume";
/// The manifest member's path in the archive.
pub const MANIFEST_NAME: &str = "MANIFEST.json";
/// The largest manifest export writes and verify reads (256 MiB: about 1.5
/// million files at 60-byte paths).
pub const MAX_MANIFEST_BYTES: u64 = 256 * 1024 * 1024;
/// The most entries (files, directories, symlinks) in one archive.
pub const MAX_ENTRIES: usize = 2_000_000;
/// The longest path (relative to the volume) or symlink target, in bytes
/// (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// The deepest directory nesting export and orphans walk (each level holds
/// one open descriptor).
pub const MAX_DEPTH: usize = 256;

/// Why an export, a verification or a listing of orphans failed. Every
/// message is one line. A verification that ran is never an error: what it
/// found is in [`VerifyReport::problems`].
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: is a symbolic link (export never follows one)")]
    IsSymlink { path: String },
    #[error("{path}: changed while being exported ({what})")]
    Changed { path: String, what: String },
    #[error("{path}: name is not UTF-8, which the manifest cannot hold")]
    NonUtf8Name { path: String },
    #[error("{what} exceeds the limit of {max}")]
    Limit { what: String, max: u64 },
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("writing the archive: {0}")]
    Write(io::Error),
    #[error("reading the archive: {0}")]
    Read(io::Error),
    #[error("the archive is truncated in member {member}")]
    Truncated { member: String },
    #[error("malformed archive: {0}")]
    Malformed(String),
    #[error("the archive has no MANIFEST.json")]
    NoManifest,
    #[error("the archive has more than one MANIFEST.json")]
    DuplicateManifest,
    #[error("MANIFEST.json is unreadable: {0}")]
    BadManifest(String),
    #[error(
        "MANIFEST.json has schema_version {found}; this version of Abode reads {SCHEMA_VERSION}"
    )]
    UnsupportedSchema { found: u64 },
}

/// Lower-case hex of bytes (a SHA-256 digest).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// `rel/name`, or `name` at the volume's root.
pub(crate) fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_owned()
    } else {
        format!("{rel}/{name}")
    }
}
