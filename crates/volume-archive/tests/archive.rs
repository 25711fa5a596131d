#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Export then verify: trees that must come back whole, and archives that
//! must not.

mod common;

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::symlink;
use std::path::Path;

use abode_volume_archive::{
    export, verify, ArchiveError, EntryKind, Manifest, ManifestEntry, Problem,
};
use common::Node::{self, *};
use common::{build, flip, members, meta, raw_member, raw_tar, rewrite};

fn export_bytes(dir: &Path) -> (Vec<u8>, abode_volume_archive::ExportSummary) {
    let mut out = Vec::new();
    let summary = export(dir, &mut out, &meta()).unwrap();
    (out, summary)
}

fn manifest_of(tar_bytes: &[u8]) -> Manifest {
    let mut archive = tar::Archive::new(tar_bytes);
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        if entry.path_bytes().as_ref() == b"MANIFEST.json" {
            return serde_json::from_reader(entry).unwrap();
        }
    }
    panic!("no manifest");
}

fn long_name() -> String {
    format!("{}/{}.txt", "d".repeat(120), "f".repeat(150))
}

fn trees() -> Vec<(&'static str, Vec<Node>)> {
    vec![
        ("empty volume", vec![]),
        ("one empty file", vec![File("empty", b"")]),
        (
            "nested dirs",
            vec![
                File("a/b/c/deep.txt", b"deep"),
                File("a/top.txt", b"top\n"),
                Dir("a/empty-dir"),
                DirMode("private", 0o700),
                FileMode("private/key", b"secret", 0o600),
                FileMode("bin/run.sh", b"#!/bin/sh\necho hi\n", 0o755),
            ],
        ),
        (
            "symlinks stored as links",
            vec![
                File("real.txt", b"real"),
                Link("to-real", "real.txt"),
                Link("dangling", "nowhere/at/all"),
                Link("outside", "/etc/passwd"),
                Link("dir-link", ".."),
            ],
        ),
        (
            "unicode names",
            vec![
                File("ünïcødé/日本語.txt", "こんにちは".as_bytes()),
                File("emoji 🎉 name", b"party"),
                File("spaces and\ttab", b"x"),
                Link("ссылка", "ünïcødé/日本語.txt"),
            ],
        ),
        (
            "a MANIFEST.json inside the volume",
            vec![
                File("MANIFEST.json", br#"{"schema_version": 99}"#),
                File("sub/MANIFEST.json", b"not json"),
            ],
        ),
        (
            "long paths and targets (GNU long names)",
            vec![
                Owned(long_name(), b"long".to_vec()),
                OwnedLink("long-link".to_owned(), "t".repeat(300)),
            ],
        ),
        (
            "files across buffer sizes",
            vec![
                Owned("511".to_owned(), vec![7; 511]),
                Owned("512".to_owned(), vec![8; 512]),
                Owned("513".to_owned(), vec![9; 513]),
                Owned(
                    "300k".to_owned(),
                    (0..300_000u32).map(|i| i as u8).collect(),
                ),
            ],
        ),
    ]
}

#[test]
fn trees_export_and_verify_ok() {
    for (name, nodes) in trees() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        build(&root, &nodes);
        let (tar_bytes, summary) = export_bytes(&root);
        assert!(summary.skipped.is_empty(), "{name}");

        let report = verify(tar_bytes.as_slice()).unwrap();
        assert!(report.ok(), "{name}: {:?}", report.problems);
        assert_eq!(report.meta, meta(), "{name}");
        assert_eq!(
            (report.files, report.dirs, report.symlinks, report.bytes),
            (summary.files, summary.dirs, summary.symlinks, summary.bytes),
            "{name}"
        );

        // The manifest names every node, with the right hash and target.
        let manifest = manifest_of(&tar_bytes);
        assert_eq!(manifest.schema_version, 1);
        for node in &nodes {
            let (path, expect_file, expect_link): (String, Option<&[u8]>, Option<String>) =
                match node {
                    File(p, d) | FileMode(p, d, _) => (p.to_string(), Some(d), None),
                    Owned(p, d) => (p.clone(), Some(d.as_slice()), None),
                    Link(p, t) => (p.to_string(), None, Some(t.to_string())),
                    OwnedLink(p, t) => (p.clone(), None, Some(t.clone())),
                    Dir(p) | DirMode(p, _) => (p.to_string(), None, None),
                };
            let entry = manifest
                .entries
                .iter()
                .find(|e| e.path() == path)
                .unwrap_or_else(|| panic!("{name}: {path} not in the manifest"));
            match (entry, expect_file, expect_link) {
                (ManifestEntry::File { size, sha256, .. }, Some(data), None) => {
                    assert_eq!(*size, data.len() as u64, "{name}: {path}");
                    assert_eq!(*sha256, common::sha256_hex(data), "{name}: {path}");
                }
                (ManifestEntry::Symlink { target, .. }, None, Some(t)) => {
                    assert_eq!(*target, t, "{name}: {path}")
                }
                (ManifestEntry::Dir { .. }, None, None) => {}
                other => panic!("{name}: {path}: {other:?}"),
            }
        }
        // Modes are kept.
        for node in &nodes {
            if let FileMode(p, _, mode) | DirMode(p, mode) = node {
                let entry = manifest.entries.iter().find(|e| e.path() == *p).unwrap();
                let got = match entry {
                    ManifestEntry::File { mode, .. } | ManifestEntry::Dir { mode, .. } => *mode,
                    ManifestEntry::Symlink { .. } => panic!(),
                };
                assert_eq!(got, *mode, "{name}: {p}");
            }
        }
        // The manifest is the last member; everything else is under volume/.
        let all = members(&tar_bytes);
        assert_eq!(all.last().unwrap().0, "MANIFEST.json", "{name}");
        assert_eq!(all[0].0, "volume", "{name}");
        for (path, _, _) in &all[..all.len() - 1] {
            assert!(
                path.starts_with("volume/") || path == "volume",
                "{name}: {path}"
            );
        }
    }
}

#[test]
fn export_is_deterministic_but_for_times() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vol");
    build(&root, &trees()[2].1);
    let a = export_bytes(&root).0;
    let b = export_bytes(&root).0;
    assert_eq!(a, b);
}

#[test]
fn a_flipped_byte_is_a_mismatch_of_that_file_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vol");
    build(
        &root,
        &[
            File("a.txt", b"alpha alpha alpha"),
            File("dir/b.bin", &[0u8; 2000]),
            File("dir/c.txt", b"gamma"),
        ],
    );
    let (clean, _) = export_bytes(&root);
    for (member, rel, at) in [
        ("volume/a.txt", "a.txt", 0),
        ("volume/dir/b.bin", "dir/b.bin", 1234),
        ("volume/dir/c.txt", "dir/c.txt", 4),
    ] {
        let mut bytes = clean.clone();
        flip(&mut bytes, member, at);
        let report = verify(bytes.as_slice()).unwrap();
        assert!(!report.ok());
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        match &report.problems[0] {
            Problem::Mismatch {
                path,
                expected,
                actual,
            } => {
                assert_eq!(path, rel);
                assert_ne!(expected, actual);
            }
            other => panic!("{other:?}"),
        }
        let line = report.problems[0].to_string();
        assert!(line.contains(rel) && !line.contains('\n'), "{line}");
    }
}

#[test]
fn removed_and_extra_members() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vol");
    build(
        &root,
        &[
            File("keep.txt", b"keep"),
            File("gone.txt", b"gone"),
            Link("link", "keep.txt"),
        ],
    );
    let (clean, _) = export_bytes(&root);

    let report = verify(rewrite(&clean, &["volume/gone.txt"], &[]).as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::Missing {
            path: "gone.txt".to_owned()
        }]
    );

    let report = verify(rewrite(&clean, &["volume/link"], &[]).as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::Missing {
            path: "link".to_owned()
        }]
    );

    let report =
        verify(rewrite(&clean, &[], &[("volume/sneaky.sh", b"rm -rf ~")]).as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::Unexpected {
            path: "sneaky.sh".to_owned()
        }]
    );

    // A member of the same path again: reported, whatever its content.
    let report = verify(rewrite(&clean, &[], &[("volume/keep.txt", b"keep")]).as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::Duplicate {
            path: "keep.txt".to_owned()
        }]
    );

    // Outside volume/.
    let report = verify(rewrite(&clean, &[], &[("elsewhere.txt", b"x")]).as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::Foreign {
            member: "elsewhere.txt".to_owned()
        }]
    );

    // A file where the manifest has a symlink.
    let report =
        verify(rewrite(&clean, &["volume/link"], &[("volume/link", b"keep.txt")]).as_slice())
            .unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::KindMismatch {
            path: "link".to_owned(),
            expected: EntryKind::Symlink,
            actual: EntryKind::File,
        }]
    );
}

#[test]
fn a_truncated_archive_is_an_error_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vol");
    build(
        &root,
        &[
            File("a.txt", b"alpha"),
            Owned("big".to_owned(), vec![3; 5000]),
            Owned(long_name(), b"long".to_vec()),
        ],
    );
    let (clean, _) = export_bytes(&root);
    let (_, pos, size) = members(&clean).pop().unwrap();
    let manifest_end = usize::try_from(pos + size).unwrap();
    for cut in (0..manifest_end)
        .step_by(97)
        .chain([manifest_end - 1, 512, 1024])
    {
        let result = verify(&clean[..cut]);
        let err = result.expect_err(&format!("cut at {cut}"));
        assert_eq!(err.to_string().lines().count(), 1, "{err}");
    }
    // Cut after the manifest's padding (no end blocks): everything was read
    // and checked.
    assert!(verify(&clean[..manifest_end.div_ceil(512) * 512])
        .unwrap()
        .ok());
    assert!(matches!(verify(&[][..]), Err(ArchiveError::NoManifest)));
}

#[test]
fn hostile_paths_are_problems() {
    let manifest = common::manifest_json("");
    let cases: Vec<(&[u8], Problem)> = vec![
        (
            b"volume/../../etc/passwd",
            Problem::UnsafePath {
                member: "volume/../../etc/passwd".to_owned(),
            },
        ),
        (
            b"/etc/passwd",
            Problem::UnsafePath {
                member: "/etc/passwd".to_owned(),
            },
        ),
        (
            b"volume/./x",
            Problem::UnsafePath {
                member: "volume/./x".to_owned(),
            },
        ),
        (
            b"volume//x",
            Problem::UnsafePath {
                member: "volume//x".to_owned(),
            },
        ),
        (
            b"volume/\xff\xfe",
            Problem::UnsafePath {
                member: "volume/\u{fffd}\u{fffd}".to_owned(),
            },
        ),
        (
            b"volumes/x",
            Problem::Foreign {
                member: "volumes/x".to_owned(),
            },
        ),
    ];
    for (name, problem) in cases {
        let tar_bytes = raw_tar(&[
            raw_member(name, tar::EntryType::Regular, b"data"),
            raw_member(b"MANIFEST.json", tar::EntryType::Regular, &manifest),
        ]);
        let report = verify(tar_bytes.as_slice()).unwrap();
        assert_eq!(report.problems, vec![problem]);
    }

    // Hard links and devices are never what export writes.
    let tar_bytes = raw_tar(&[
        raw_member(b"volume/hard", tar::EntryType::Link, b""),
        raw_member(b"MANIFEST.json", tar::EntryType::Regular, &manifest),
    ]);
    let report = verify(tar_bytes.as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::Unexpected {
            path: "hard".to_owned()
        }]
    );
}

#[test]
fn bad_manifests_are_one_line_errors() {
    let file = |path: &str, data: &[u8]| {
        format!(
            r#"{{"kind":"file","path":"{path}","size":{},"sha256":"{}","mode":420}}"#,
            data.len(),
            common::sha256_hex(data)
        )
    };
    let huge = r#"{"kind":"file","path":"x","size":18446744073709551615,"sha256":"00","mode":420}"#;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json".to_vec(), "unreadable"),
        (
            br#"{"schema_version": 2, "whatever": []}"#.to_vec(),
            "schema_version 2",
        ),
        (br#"{"entries": []}"#.to_vec(), "no schema_version"),
        (br#"{"schema_version": "1"}"#.to_vec(), "unreadable"),
        (br#"{"schema_version": 1}"#.to_vec(), "unreadable"),
        (
            common::manifest_json(&format!("{},{}", file("x", b"data"), file("x", b"data"))),
            "listed twice",
        ),
        (
            common::manifest_json(&file("../x", b"data")),
            "clean relative path",
        ),
        (
            common::manifest_json(&file("/x", b"data")),
            "clean relative path",
        ),
        (
            common::manifest_json(r#"{"kind":"fifo","path":"x"}"#),
            "unreadable",
        ),
    ];
    for (manifest, want) in cases {
        let tar_bytes = raw_tar(&[
            raw_member(b"volume/x", tar::EntryType::Regular, b"data"),
            raw_member(b"MANIFEST.json", tar::EntryType::Regular, &manifest),
        ]);
        let err = verify(tar_bytes.as_slice()).unwrap_err();
        let line = err.to_string();
        assert!(line.contains(want), "{line}");
        assert_eq!(line.lines().count(), 1, "{line}");
    }

    // A manifest claiming a huge file is a size mismatch, nothing more.
    let tar_bytes = raw_tar(&[
        raw_member(b"volume/x", tar::EntryType::Regular, b"data"),
        raw_member(
            b"MANIFEST.json",
            tar::EntryType::Regular,
            &common::manifest_json(huge),
        ),
    ]);
    let report = verify(tar_bytes.as_slice()).unwrap();
    assert_eq!(
        report.problems,
        vec![Problem::SizeMismatch {
            path: "x".to_owned(),
            expected: u64::MAX,
            actual: 4
        }]
    );

    // No manifest, two manifests.
    let none = raw_tar(&[raw_member(b"volume/x", tar::EntryType::Regular, b"data")]);
    assert!(matches!(
        verify(none.as_slice()),
        Err(ArchiveError::NoManifest)
    ));
    let m = common::manifest_json(&file("x", b"data"));
    let two = raw_tar(&[
        raw_member(b"MANIFEST.json", tar::EntryType::Regular, &m),
        raw_member(b"MANIFEST.json", tar::EntryType::Regular, &m),
    ]);
    assert!(matches!(
        verify(two.as_slice()),
        Err(ArchiveError::DuplicateManifest)
    ));
    // The same, once: fine, even first.
    let one = raw_tar(&[
        raw_member(b"MANIFEST.json", tar::EntryType::Regular, &m),
        raw_member(b"volume/x", tar::EntryType::Regular, b"data"),
    ]);
    assert!(verify(one.as_slice()).unwrap().ok());
}

#[test]
fn oversized_headers_are_refused_without_reading_them_whole() {
    // A manifest header claiming 1 TiB: refused from its header.
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"MANIFEST.json");
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(1 << 40);
    h.set_cksum();
    let err = verify(h.as_bytes().as_slice()).unwrap_err();
    assert!(matches!(err, ArchiveError::Limit { .. }), "{err}");

    // A GNU long name of 1 MiB (streamed: never held whole).
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_size(1 << 20);
    h.set_cksum();
    let input = io::Read::chain(
        h.as_bytes().as_slice(),
        io::Read::take(io::repeat(b'a'), 1 << 20),
    );
    let err = verify(input).unwrap_err();
    assert!(matches!(err, ArchiveError::Limit { .. }), "{err}");

    // PAX headers: export never writes them.
    let pax = raw_tar(&[raw_member(
        b"pax",
        tar::EntryType::XHeader,
        b"13 path=/etc\n",
    )]);
    assert!(matches!(
        verify(pax.as_slice()),
        Err(ArchiveError::Malformed(_))
    ));

    // Garbage.
    let err = verify(&[0x55u8; 4096][..]).unwrap_err();
    assert_eq!(err.to_string().lines().count(), 1);
}

#[test]
fn export_refuses_what_is_not_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    fs::create_dir(&dir).unwrap();
    let file = tmp.path().join("file");
    fs::write(&file, b"x").unwrap();
    let link = tmp.path().join("link");
    symlink(&dir, &link).unwrap();

    let mut out = Vec::new();
    assert!(matches!(
        export(&link, &mut out, &meta()),
        Err(ArchiveError::IsSymlink { .. })
    ));
    assert!(matches!(
        export(&file, &mut out, &meta()),
        Err(ArchiveError::NotADirectory { .. })
    ));
    assert!(matches!(
        export(&tmp.path().join("absent"), &mut out, &meta()),
        Err(ArchiveError::Io { .. })
    ));
    assert!(out.is_empty());
}

#[test]
fn symlinked_directories_are_not_followed_and_sockets_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    build(&outside, &[File("secret", b"do not export")]);
    let root = tmp.path().join("vol");
    build(&root, &[File("a", b"a")]);
    symlink(&outside, root.join("escape")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(root.join("agent.sock")).unwrap();

    let (tar_bytes, summary) = export_bytes(&root);
    assert_eq!(summary.files, 1);
    assert_eq!(summary.symlinks, 1);
    assert_eq!(summary.skipped.len(), 1);
    assert_eq!(summary.skipped[0].path, "agent.sock");
    assert_eq!(summary.skipped[0].kind, "socket");
    let names: Vec<String> = members(&tar_bytes).into_iter().map(|m| m.0).collect();
    assert!(!names.iter().any(|n| n.contains("secret")), "{names:?}");
    assert!(verify(tar_bytes.as_slice()).unwrap().ok());
}

#[cfg(target_os = "linux")]
#[test]
fn non_utf8_names_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vol");
    fs::create_dir(&root).unwrap();
    fs::write(root.join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"x").unwrap();
    let err = export(&root, io::sink(), &meta()).unwrap_err();
    assert!(matches!(err, ArchiveError::NonUtf8Name { .. }), "{err}");
}

/// A writer that, at its first write, does something to a file being
/// exported: the export's buffer fills during the file's copy.
struct Meddler<F: FnMut()> {
    meddle: Option<F>,
}

impl<F: FnMut()> Write for Meddler<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(mut f) = self.meddle.take() {
            f();
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_file_changing_size_while_read_is_an_error_naming_it() {
    for (how, meddle) in [("shrank", 0u64), ("grew", 5 << 20)] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        build(&root, &[Owned("growing.log".to_owned(), vec![1; 4 << 20])]);
        let path = root.join("growing.log");
        let out = Meddler {
            meddle: Some(|| {
                let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
                f.set_len(meddle).unwrap();
            }),
        };
        let err = export(&root, out, &meta()).unwrap_err();
        let line = err.to_string();
        assert!(matches!(err, ArchiveError::Changed { .. }), "{line}");
        assert!(line.contains("growing.log") && line.contains(how), "{line}");
    }
}
