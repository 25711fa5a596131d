#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Trees to export and tars to tamper with.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use abode_volume_archive::ExportMeta;

/// One entry of a test tree, relative to the volume.
#[derive(Debug, Clone)]
pub enum Node {
    Dir(&'static str),
    DirMode(&'static str, u32),
    File(&'static str, &'static [u8]),
    FileMode(&'static str, &'static [u8], u32),
    Owned(String, Vec<u8>),
    Link(&'static str, &'static str),
    OwnedLink(String, String),
}

pub fn build(root: &Path, nodes: &[Node]) {
    fs::create_dir_all(root).unwrap();
    for node in nodes {
        match node {
            Node::Dir(p) => fs::create_dir_all(root.join(p)).unwrap(),
            Node::DirMode(p, mode) => {
                fs::create_dir_all(root.join(p)).unwrap();
                fs::set_permissions(root.join(p), fs::Permissions::from_mode(*mode)).unwrap();
            }
            Node::File(p, data) => write(&root.join(p), data),
            Node::FileMode(p, data, mode) => {
                write(&root.join(p), data);
                fs::set_permissions(root.join(p), fs::Permissions::from_mode(*mode)).unwrap();
            }
            Node::Owned(p, data) => write(&root.join(p), data),
            Node::Link(p, target) => link(&root.join(p), target),
            Node::OwnedLink(p, target) => link(&root.join(p), target),
        }
    }
}

fn write(path: &Path, data: &[u8]) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, data).unwrap();
}

fn link(path: &Path, target: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    symlink(target, path).unwrap();
}

pub fn meta() -> ExportMeta {
    ExportMeta {
        volume: "home".to_owned(),
        retained_id: "r-42".to_owned(),
        workspace: "alice/dev".to_owned(),
        owner: "alice".to_owned(),
        exported_at: "2026-05-01T12:00:00Z".to_owned(),
    }
}

/// Each member's path, data offset in the archive and size (long names
/// resolved).
pub fn members(tar_bytes: &[u8]) -> Vec<(String, u64, u64)> {
    let mut archive = tar::Archive::new(tar_bytes);
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                String::from_utf8(e.path_bytes().into_owned()).unwrap(),
                e.raw_file_position(),
                e.size(),
            )
        })
        .collect()
}

/// Flips one bit of the byte at `at` within the data of `member`.
pub fn flip(tar_bytes: &mut [u8], member: &str, at: u64) {
    let (_, pos, size) = members(tar_bytes)
        .into_iter()
        .find(|(p, _, _)| p == member)
        .unwrap_or_else(|| panic!("no member {member}"));
    assert!(at < size, "{member} has {size} bytes");
    let i = usize::try_from(pos + at).unwrap();
    tar_bytes[i] ^= 0x01;
}

/// A copy of a tar with `drop` members left out and `extra` ones added before
/// the last member (which is the manifest in an export).
pub fn rewrite(tar_bytes: &[u8], drop: &[&str], extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    let mut archive = tar::Archive::new(tar_bytes);
    let count = members(tar_bytes).len();
    for (i, entry) in archive.entries().unwrap().enumerate() {
        if i + 1 == count {
            for (path, data) in extra {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                out.append_data(&mut h, path, *data).unwrap();
            }
        }
        let mut entry = entry.unwrap();
        let path = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
        if drop.contains(&path.as_str()) {
            continue;
        }
        let mut header = entry.header().clone();
        if header.entry_type() == tar::EntryType::Symlink {
            let target = entry.link_name().unwrap().unwrap().into_owned();
            out.append_link(&mut header, &path, target).unwrap();
        } else {
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            out.append_data(&mut header, &path, data.as_slice())
                .unwrap();
        }
    }
    out.into_inner().unwrap()
}

/// A member with exactly these name bytes in its header (no checks), for
/// paths the tar crate's builder refuses.
pub fn raw_member(name: &[u8], kind: tar::EntryType, data: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

/// A tar of raw members, each a `raw_member`'s bytes, and the end blocks.
pub fn raw_tar(members: &[Vec<u8>]) -> Vec<u8> {
    let mut out: Vec<u8> = members.concat();
    out.extend_from_slice(&[0u8; 1024]);
    out
}

/// A valid manifest of the given entries (JSON values).
pub fn manifest_json(entries: &str) -> Vec<u8> {
    format!(
        r#"{{"schema_version":1,"volume":"v","retained_id":"r","workspace":"w","owner":"o","exported_at":"t","entries":[{entries}]}}"#
    )
    .into_bytes()
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
