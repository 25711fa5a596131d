//! Backups you can restore (issue 28): `abode server backup` takes a
//! consistent copy of the SQLite database while a build applies, with its
//! SHA-256; the copy, put into a new data dir, passes `abode server check`
//! and a server starts from it with every workspace and state of the
//! backup. A damaged copy fails the check in one line; nothing is ever
//! overwritten.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::time::{Duration, Instant};

use util::{require_terraform, Platform};

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(fs::read(path).unwrap()))
}

#[test]
fn a_backup_taken_while_a_build_applies_restores_into_a_server() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_fixture("append", "append-apply");
    platform
        .run(&[
            "create",
            "kept",
            "--template",
            "append",
            "--parameter",
            "seconds=0",
        ])
        .ok();
    platform.wait_for_build_status("kept", "succeeded");
    let client = platform.client_for(&platform.config_dir());
    let kept_state = client.workspace_state("kept").unwrap();

    // A build applies (its local-exec sleeps) while the backup is taken.
    // Asked through the API: `abode create` would follow the build to its end.
    let seconds = std::collections::BTreeMap::from([("seconds".to_string(), "15".to_string())]);
    client
        .create_workspace("busy", "append", None, &seconds, &[])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let applying = || {
        client.build_logs("busy", 1, 0, 0).is_ok_and(|page| {
            page.lines
                .iter()
                .any(|line| line.text.contains("Provisioning with 'local-exec'"))
        })
    };
    while !applying() {
        assert!(Instant::now() < deadline, "busy never applied");
        std::thread::sleep(Duration::from_millis(100));
    }
    let backups = tempfile::tempdir().unwrap();
    let file = backups.path().join("abode-backup.db");
    let data_dir = platform.data_dir();
    let backup = platform
        .run(&[
            "server",
            "backup",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--to",
            file.to_str().unwrap(),
        ])
        .ok();
    // Its SHA-256, printed and beside it, is the file's.
    let digest = sha256_of(&file);
    assert_eq!(
        backup.stdout.split_whitespace().next(),
        Some(digest.as_str()),
        "{backup:?}"
    );
    let beside = fs::read_to_string(format!("{}.sha256", file.display())).unwrap();
    assert_eq!(beside, format!("{digest}  abode-backup.db\n"));
    // Never overwritten.
    platform
        .run(&[
            "server",
            "backup",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--to",
            file.to_str().unwrap(),
        ])
        .fails_with(1, &["exists already"]);
    assert_eq!(sha256_of(&file), digest);

    // A damaged copy fails the check, in one line.
    let damaged = tempfile::tempdir().unwrap();
    let bytes = fs::read(&file).unwrap();
    fs::write(damaged.path().join("abode.db"), &bytes[..bytes.len() / 2]).unwrap();
    let failed = platform
        .run(&[
            "server",
            "check",
            "--data-dir",
            damaged.path().to_str().unwrap(),
        ])
        .fails_with(1, &["database"]);
    assert_eq!(
        failed
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .count(),
        1,
        "{failed:?}"
    );

    // The restore: the copy as a new data dir's database, checked, and a
    // server started on it.
    let restored = Platform::start_prepared(None, util::FAST_AGENT_FLAGS, |data_dir| {
        fs::create_dir_all(data_dir).unwrap();
        fs::copy(&file, data_dir.join("abode.db")).unwrap();
        let checked = std::process::Command::new(util::abode_bin())
            .args(["server", "check", "--data-dir"])
            .arg(data_dir)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&checked.stdout);
        assert!(
            checked.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&checked.stderr)
        );
        assert!(said.contains("integrity: ok"), "{said}");
        assert!(said.contains("workspaces: 2"), "{said}");
        assert!(said.lines().last() == Some("ok"), "{said}");
    });
    restored.login_existing_owner();
    let listed = restored.run(&["list", "--output", "json"]).ok().json();
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["busy", "kept"]);
    // The copy was taken in the middle of busy's apply: its build is
    // running there (the original server's; this one will fail it once
    // its lease has run out).
    let busy = restored.show("busy");
    assert_eq!(
        busy["latest_build"]["status"],
        "running",
        "the backup was not taken during the apply: {busy:#}\n{}",
        restored.server_log()
    );
    let restored_client = restored.client_for(&restored.config_dir());
    assert_eq!(restored_client.workspace_state("kept").unwrap(), kept_state);
}
