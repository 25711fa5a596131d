//! Bad input through the real CLI and server: malicious template archives, a
//! template Terraform refuses, unknown names, a wrong password, a member
//! pushing a template, usage errors, two concurrent starts. Each gets a clear
//! one-line error and a non-zero exit, and nothing is stored half-way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::Path;
use std::process::Stdio;

use flate2::write::GzEncoder;
use flate2::Compression;
use util::{fixture, require_terraform, Platform};

/// One entry of a hand-made archive; the name and link bytes are written
/// as given (no sanitising), which is what an attacker would do.
enum Entry<'a> {
    File(&'a str, Vec<u8>),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
}

fn raw_header(name: &str, kind: tar::EntryType, size: u64, link: &str) -> tar::Header {
    let mut header = tar::Header::new_old();
    {
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
    }
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    header
}

fn archive(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for entry in entries {
        match entry {
            Entry::File(name, data) => {
                let header = raw_header(name, tar::EntryType::Regular, data.len() as u64, "");
                builder.append(&header, data.as_slice()).unwrap();
            }
            Entry::Symlink(name, target) => {
                let header = raw_header(name, tar::EntryType::Symlink, 0, target);
                builder.append(&header, std::io::empty()).unwrap();
            }
            Entry::Hardlink(name, target) => {
                let header = raw_header(name, tar::EntryType::Link, 0, target);
                builder.append(&header, std::io::empty()).unwrap();
            }
        }
    }
    builder.into_inner().unwrap().finish().unwrap()
}

fn minimal_main_tf() -> Entry<'static> {
    Entry::File(
        "main.tf",
        std::fs::read(fixture("minimal").join("main.tf")).unwrap(),
    )
}

/// A file name no test would create by accident, to look for escapes.
fn escape_name() -> String {
    format!("abode-e2e-escaped-{}.tf", std::process::id())
}

#[test]
fn malicious_template_archives_are_rejected_and_nothing_is_stored() {
    let platform = Platform::start();
    platform.login_owner();
    let client = platform.client_for(&platform.config_dir());
    let escaped = escape_name();
    let absolute = format!("/tmp/{escaped}");
    let parent = format!("../{escaped}");
    let nested_parent = format!("modules/../../{escaped}");
    let big = vec![0u8; 65 * 1024 * 1024];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "absolute path",
            archive(&[minimal_main_tf(), Entry::File(&absolute, b"x".to_vec())]),
        ),
        (
            "parent directory",
            archive(&[minimal_main_tf(), Entry::File(&parent, b"x".to_vec())]),
        ),
        (
            "nested parent directory",
            archive(&[
                minimal_main_tf(),
                Entry::File(&nested_parent, b"x".to_vec()),
            ]),
        ),
        (
            "symlink to an absolute path",
            archive(&[minimal_main_tf(), Entry::Symlink("etc", "/etc")]),
        ),
        (
            "symlink climbing out",
            archive(&[minimal_main_tf(), Entry::Symlink("up", "../../..")]),
        ),
        (
            "symlink then a file through it",
            archive(&[
                minimal_main_tf(),
                Entry::Symlink("out", "/tmp"),
                Entry::File(&format!("out/{escaped}"), b"x".to_vec()),
            ]),
        ),
        (
            "hard link to a file outside",
            archive(&[minimal_main_tf(), Entry::Hardlink("passwd", "/etc/passwd")]),
        ),
        (
            "unpacked size over the limit",
            archive(&[minimal_main_tf(), Entry::File("big.bin", big)]),
        ),
        ("not a gzip tar", b"this is not an archive".to_vec()),
    ];
    let check = |what: &str, bytes: &[u8]| {
        let err = client
            .push_template("evil", bytes, true, None)
            .err()
            .unwrap_or_else(|| panic!("{what}: the server accepted the archive"));
        assert_eq!(err.status(), Some(400), "{what}: {err}");
        assert_eq!(err.code(), Some("invalid_archive"), "{what}: {err}");
        let message = err.to_string();
        assert!(
            !message.is_empty() && !message.contains('\n'),
            "{what}: {message:?}"
        );
    };
    for (what, bytes) in &cases {
        check(what, bytes);
    }
    for place in [
        Path::new("/tmp").to_path_buf(),
        platform.root().to_path_buf(),
        platform.data_dir(),
        platform.root().parent().unwrap().to_path_buf(),
    ] {
        assert!(
            !place.join(&escaped).exists(),
            "an archive entry escaped to {}",
            place.display()
        );
    }
    let templates = platform
        .run(&["templates", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        templates,
        serde_json::json!([]),
        "a rejected push left a template"
    );
}

#[test]
fn cli_push_of_a_folder_with_an_escaping_link_fails_cleanly() {
    let platform = Platform::start();
    platform.login_owner();
    let folder = platform.root().join("linked-template");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(fixture("minimal").join("main.tf"), folder.join("main.tf")).unwrap();
    std::os::unix::fs::symlink("/etc", folder.join("etc")).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "linked",
            "-d",
            folder.to_str().unwrap(),
        ])
        .fails_with(1, &["not pushed"]);
    let missing = platform.root().join("missing");
    platform
        .run(&["templates", "push", "x", "-d", missing.to_str().unwrap()])
        .fails_with(1, &["does not exist"]);
    let templates = platform
        .run(&["templates", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(templates, serde_json::json!([]));
}

#[test]
fn template_failing_validate_is_rejected_and_nothing_is_stored() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let invalid = fixture("invalid-template");
    let invalid = invalid.to_str().unwrap();
    platform
        .run(&["templates", "push", "broken", "-d", invalid])
        .fails_with(1, &["undeclared"]);
    let templates = platform
        .run(&["templates", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(templates, serde_json::json!([]));

    let minimal = fixture("minimal");
    platform
        .run(&["templates", "push", "tpl", "-d", minimal.to_str().unwrap()])
        .ok();
    platform
        .run(&["templates", "push", "tpl", "-d", invalid, "--activate"])
        .fails_with(1, &["undeclared"]);
    let versions = platform
        .run(&["templates", "versions", "list", "tpl", "-o", "json"])
        .ok()
        .json();
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions:#}");
    assert_eq!(versions[0]["active"], true);
}

#[test]
fn sessions_roles_unknown_names_and_usage_errors() {
    let platform = Platform::start();
    platform.login_owner();
    let url = platform.url.clone();

    // A second first user, and a wrong password: refused, session kept.
    let other = platform.root().join("config-other");
    platform
        .run_as(
            &other,
            &[
                "login",
                &url,
                "--first-user",
                "--username",
                "mallory",
                "--email",
                "m@example.com",
                "--password-stdin",
            ],
            Some("whatever-password\n"),
        )
        .fails_with(1, &["first user"]);
    platform
        .run_as(
            &platform.config_dir(),
            &["login", &url, "--username", "alice", "--password-stdin"],
            Some("not the password\n"),
        )
        .fails_with(1, &["cannot log in"]);
    let me = platform.run(&["users", "me", "-o", "json"]).ok().json();
    assert_eq!(me["username"], "alice");
    assert_eq!(me["role"], "owner");

    // No session, then a session from the environment only.
    let empty = platform.root().join("config-empty");
    platform
        .run_as(&empty, &["list"], None)
        .fails_with(1, &["not logged in"]);
    let session = abode_client::config::load_session(&platform.config_dir())
        .unwrap()
        .unwrap();
    let from_env = platform
        .cmd_as(&empty, &["users", "me", "-o", "json"])
        .env("ABODE_URL", &session.url)
        .env("ABODE_TOKEN", &session.token)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(from_env.status.success());
    assert!(String::from_utf8_lossy(&from_env.stdout).contains("\"alice\""));

    // A member may not push templates; nothing is stored.
    let member = platform.login_new_user("bob", "member");
    let minimal = fixture("minimal");
    platform
        .run_as(
            &member,
            &["templates", "push", "tpl", "-d", minimal.to_str().unwrap()],
            None,
        )
        .fails_with(1, &["not pushed"]);
    // A large one is answered before the server reads it, and the member
    // still reads why.
    let big = platform.root().join("big-template");
    std::fs::create_dir_all(&big).unwrap();
    std::fs::copy(minimal.join("main.tf"), big.join("main.tf")).unwrap();
    let mut noise = vec![0u8; 24 * 1024 * 1024];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for byte in noise.iter_mut() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        *byte = seed as u8;
    }
    std::fs::write(big.join("blob.bin"), noise).unwrap();
    // Six at once: once, each was held whole before the 403 (40 held 1.5 GB).
    let pid = platform.server_pid().unwrap();
    let before_kb = util::peak_rss_kb(pid);
    let pushes: Vec<_> = (0..6)
        .map(|_| {
            platform
                .cmd_as(
                    &member,
                    &["templates", "push", "tpl", "-d", big.to_str().unwrap()],
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for push in pushes {
        let output = push.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("you may not push templates"), "{stderr}");
    }
    let grown_kb = util::peak_rss_kb(pid).saturating_sub(before_kb);
    assert!(
        grown_kb < 48 * 1024,
        "six refused 24 MB uploads grew the server by {grown_kb} kB"
    );
    let templates = platform
        .run(&["templates", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(templates, serde_json::json!([]));
    platform
        .run_as(
            &member,
            &[
                "users",
                "create",
                "eve",
                "--email",
                "e@example.com",
                "--password-stdin",
            ],
            Some("eve-password\n"),
        )
        .fails_with(1, &["eve"]);

    // Unknown workspaces and templates.
    let unknown: &[&[&str]] = &[
        &["show", "nope"],
        &["start", "nope"],
        &["stop", "nope"],
        &["delete", "nope"],
        &["update", "nope"],
        &["builds", "list", "nope"],
        &["builds", "logs", "nope"],
        &["create", "ws", "--template", "nope"],
        &["templates", "versions", "list", "nope"],
        &["templates", "versions", "activate", "nope", "1"],
    ];
    for args in unknown {
        platform.run(args).fails_with(1, &["nope"]);
    }
    let listed = platform.run(&["list", "-o", "json"]).ok().json();
    assert_eq!(
        listed,
        serde_json::json!([]),
        "a failed create left a workspace"
    );

    // Usage errors exit 2.
    let usage: &[&[&str]] = &[
        &["create"],
        &["create", "ws", "--template", "t", "--parameter", "novalue"],
        &["list", "--output", "yaml"],
        &["builds", "logs"],
        &["login", &url, "--username", "alice"],
        &["no-such-command"],
    ];
    for args in usage {
        let run = platform.run(args);
        assert_eq!(run.code, Some(2), "{}: {run}", run.command);
    }
}

#[test]
fn two_concurrent_starts_of_one_workspace_one_wins_one_is_refused() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.run(&["stop", "dev"]).ok();

    let spawn = || {
        platform
            .cmd(&["start", "dev"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn(), spawn());
    let outcomes: Vec<(Option<i32>, String)> = [first, second]
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        })
        .collect();
    let mut codes: Vec<Option<i32>> = outcomes.iter().map(|(code, _)| *code).collect();
    codes.sort();
    assert_eq!(codes, vec![Some(0), Some(1)], "{outcomes:#?}");
    let (_, refused) = outcomes.iter().find(|(code, _)| *code == Some(1)).unwrap();
    let errors: Vec<&str> = refused
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{refused}");
    assert!(errors[0].contains("dev"), "{refused}");

    let builds = platform
        .run(&["builds", "list", "dev", "-o", "json"])
        .ok()
        .json();
    let builds = builds.as_array().unwrap();
    assert_eq!(
        builds.len(),
        3,
        "the refused start queued a build: {builds:#?}"
    );
    assert_eq!(builds[0]["status"], "succeeded");
    assert_eq!(platform.show("dev")["status"], "running");
    platform.run(&["delete", "dev"]).ok();
}

/// A parameter value too large for any build to carry (they reach Terraform
/// in one environment variable, the delete's too) is refused at create;
/// one just under the cap builds and deletes.
#[test]
fn a_huge_parameter_is_refused_and_a_large_one_still_deletes() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let sized = fixture("sized");
    platform
        .run(&["templates", "push", "sized", "-d", sized.to_str().unwrap()])
        .ok();
    let huge = format!("size={}", "x".repeat(100_000));
    platform
        .run(&["create", "big", "--template", "sized", "--parameter", &huge])
        .fails_with(1, &["at most 64 KiB"]);
    platform.run(&["show", "big"]).fails_with(1, &["not found"]);
    let large = format!("size={}", "x".repeat(60_000));
    platform
        .run(&[
            "create",
            "big",
            "--template",
            "sized",
            "--parameter",
            &large,
        ])
        .ok();
    platform.run(&["delete", "big"]).ok();
}

#[test]
fn a_reader_that_went_away_ends_a_listing_quietly() {
    let platform = Platform::start();
    platform.login_owner();
    let (reader, writer) = std::io::pipe().unwrap();
    // `abode users list | head -0`: the reader is gone before anything is
    // printed.
    drop(reader);
    let out = platform
        .cmd(&["users", "list"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(141), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
