//! `MANIFEST.json`: what export read, for verify to compare.

use serde::{Deserialize, Serialize};

/// The manifest's `schema_version`; verify refuses any other.
pub const SCHEMA_VERSION: u64 = 1;

/// What the caller knows of the volume; written into the manifest as is.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExportMeta {
    /// The `abode_volume`'s name.
    pub volume: String,
    /// The retained record's id.
    pub retained_id: String,
    /// The workspace the volume belonged to.
    pub workspace: String,
    /// The workspace's owner.
    pub owner: String,
    /// When the export was made, as the caller writes times (this crate reads
    /// no clock).
    pub exported_at: String,
}

/// The whole manifest. Its fields are spelled out rather than flattening
/// [`ExportMeta`], so serde parses it in one pass without buffering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u64,
    pub volume: String,
    pub retained_id: String,
    pub workspace: String,
    pub owner: String,
    pub exported_at: String,
    /// In archive order; paths relative to the volume, `/`-separated.
    pub entries: Vec<ManifestEntry>,
}

impl Manifest {
    pub fn meta(&self) -> ExportMeta {
        ExportMeta {
            volume: self.volume.clone(),
            retained_id: self.retained_id.clone(),
            workspace: self.workspace.clone(),
            owner: self.owner.clone(),
            exported_at: self.exported_at.clone(),
        }
    }
}

/// One entry of the volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ManifestEntry {
    File {
        path: String,
        size: u64,
        /// Lower-case hex.
        sha256: String,
        /// Permission bits (`0o7777` at most).
        mode: u32,
    },
    Dir {
        path: String,
        mode: u32,
    },
    Symlink {
        path: String,
        target: String,
    },
}

impl ManifestEntry {
    pub fn path(&self) -> &str {
        match self {
            ManifestEntry::File { path, .. }
            | ManifestEntry::Dir { path, .. }
            | ManifestEntry::Symlink { path, .. } => path,
        }
    }

    pub fn kind(&self) -> EntryKind {
        match self {
            ManifestEntry::File { .. } => EntryKind::File,
            ManifestEntry::Dir { .. } => EntryKind::Dir,
            ManifestEntry::Symlink { .. } => EntryKind::Symlink,
        }
    }
}

/// What an archive member or a manifest entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// Any other tar type (hard link, device, FIFO, sparse...), by its type
    /// byte; export never writes one.
    Other(u8),
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryKind::File => f.write_str("file"),
            EntryKind::Dir => f.write_str("directory"),
            EntryKind::Symlink => f.write_str("symlink"),
            EntryKind::Other(b) if b.is_ascii_graphic() => {
                write!(f, "tar type '{}'", char::from(*b))
            }
            EntryKind::Other(b) => write!(f, "tar type {b}"),
        }
    }
}
