#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Export, then restore into another volume: the same files come back, and
//! a link planted in the target is replaced, never written through.

mod common;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};

use abode_volume_archive::{export, restore};
use common::meta;

#[test]
fn a_restore_brings_back_what_an_export_took() {
    let tmp = tempfile::tempdir().unwrap();
    let from = tmp.path().join("from");
    fs::create_dir_all(from.join("src/deep")).unwrap();
    fs::write(from.join("notes.txt"), b"unsaved work\n").unwrap();
    fs::write(from.join("src/deep/main.rs"), vec![7u8; 300_000]).unwrap();
    fs::set_permissions(from.join("notes.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    symlink("src/deep/main.rs", from.join("link")).unwrap();
    let mut tar = Vec::new();
    export(&from, &mut tar, &meta()).unwrap();

    let to = tmp.path().join("to");
    fs::create_dir_all(&to).unwrap();
    // What the workspace holds now: a file the archive overwrites, one it
    // leaves, and a link planted where the archive has a file.
    fs::write(to.join("notes.txt"), b"newer").unwrap();
    fs::write(to.join("other.txt"), b"kept").unwrap();
    let outside = tmp.path().join("outside");
    fs::write(&outside, b"not yours").unwrap();
    fs::create_dir_all(to.join("src/deep")).unwrap();
    symlink(&outside, to.join("src/deep/main.rs")).unwrap();

    let summary = restore(tar.as_slice(), &to).unwrap();
    assert_eq!(summary.files, 2);
    assert_eq!(summary.symlinks, 1);
    assert_eq!(fs::read(to.join("notes.txt")).unwrap(), b"unsaved work\n");
    assert_eq!(
        fs::metadata(to.join("notes.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    assert_eq!(fs::read(to.join("other.txt")).unwrap(), b"kept");
    assert_eq!(
        fs::read(to.join("src/deep/main.rs")).unwrap(),
        vec![7u8; 300_000]
    );
    assert!(!fs::symlink_metadata(to.join("src/deep/main.rs"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(&outside).unwrap(), b"not yours");
    assert_eq!(
        fs::read_link(to.join("link")).unwrap(),
        std::path::Path::new("src/deep/main.rs")
    );
}

#[test]
fn a_member_outside_the_volume_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    builder
        .append_data(&mut header, "elsewhere/x", &b"x"[..])
        .unwrap();
    let tar = builder.into_inner().unwrap();
    let error = restore(tar.as_slice(), tmp.path()).unwrap_err();
    assert!(error.to_string().contains("outside volume/"), "{error}");
}
