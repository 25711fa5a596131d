#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Directories under the volumes dir that nothing knows.

mod common;

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, SystemTime};

use abode_volume_archive::{orphans, ArchiveError};
use common::build;
use common::Node::*;

/// A volumes dir, the names known, the orphans expected (name, size) in order.
type Case = (
    Vec<common::Node>,
    &'static [&'static str],
    &'static [(&'static str, u64)],
);

#[test]
fn orphans_table() {
    let cases: Vec<Case> = vec![
        (vec![], &[], &[]),
        (vec![Dir("a"), Dir("b")], &["a", "b"], &[]),
        (
            vec![
                File("c/x", b"12345"),
                File("c/sub/y", b"123"),
                Dir("b"),
                File("a/one", b"1"),
                Dir("known"),
            ],
            &["known"],
            &[("a", 1), ("b", 0), ("c", 8)],
        ),
        // Files and symlinks directly under it are not volumes.
        (
            vec![File("stray-file", b"x"), Link("link-to-dir", "a"), Dir("a")],
            &["a"],
            &[],
        ),
        // Symlinks inside an orphan count nothing, even to big files.
        (
            vec![
                File("known/big", &[0; 10_000]),
                Link("o/big-link", "../known/big"),
                Link("o/dir-link", "../known"),
                File("o/small", b"ab"),
            ],
            &["known"],
            &[("o", 2)],
        ),
        (
            vec![Dir("ünïcødé"), Dir("Zed"), Dir("alpha")],
            &[],
            &[("Zed", 0), ("alpha", 0), ("ünïcødé", 0)],
        ),
    ];
    for (i, (nodes, known, want)) in cases.into_iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("volumes");
        build(&dir, &nodes);
        let known: HashSet<String> = known.iter().map(|s| s.to_string()).collect();
        let got: Vec<(String, u64)> = orphans(&dir, &known)
            .unwrap()
            .into_iter()
            .map(|o| {
                assert_eq!(o.path, dir.join(&o.name));
                (o.name, o.size_bytes)
            })
            .collect();
        let want: Vec<(String, u64)> = want.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn an_orphans_mtime_is_its_directorys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("volumes");
    build(&dir, &[Dir("old")]);
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    fs::File::open(dir.join("old"))
        .unwrap()
        .set_modified(when)
        .unwrap();
    let found = orphans(&dir, &HashSet::new()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].mtime_unix, 1_700_000_000);
}

#[test]
fn the_volumes_dir_may_be_a_symlink_but_must_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    build(&real, &[File("v/f", b"abc")]);
    let link = tmp.path().join("volumes");
    symlink(&real, &link).unwrap();
    let found = orphans(&link, &HashSet::new()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].size_bytes, 3);

    let err = orphans(&tmp.path().join("absent"), &HashSet::new()).unwrap_err();
    assert!(matches!(err, ArchiveError::Io { .. }), "{err}");
    assert_eq!(err.to_string().lines().count(), 1);
}

#[cfg(target_os = "linux")]
#[test]
fn a_name_that_is_not_utf8_is_an_orphan() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("volumes");
    let name = std::ffi::OsStr::from_bytes(b"bad\xff");
    fs::create_dir_all(dir.join(name)).unwrap();
    let found = orphans(&dir, &HashSet::from(["bad\u{fffd}".to_owned()])).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].path, dir.join(name));
}
