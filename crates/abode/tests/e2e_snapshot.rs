//! A snapshot before a confirmed destroy (issue 47) through the real CLI,
//! server, Terraform and provider: a confirmed replacement of the example's
//! protected home archives it first as a retained record of kind
//! `snapshot`, which `verify` checks and `restore` brings back into a
//! stopped workspace; a snapshot that fails applies nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::PathBuf;

use util::{
    example_with, only_subdir, printed_digest, push_template as push, require_terraform, Platform,
};

const RENAME: (&str, &str) = ("name = \"home-${", "name = \"home2-${");
const RENAME_AGAIN: (&str, &str) = ("name = \"home-${", "name = \"home3-${");

/// The example's `abode_protect` with `line` added.
fn protect_with(line: &str) -> (&'static str, String) {
    (
        "  mode        = \"confirm\"\n",
        format!("  mode        = \"confirm\"\n  {line}\n"),
    )
}

fn records(platform: &Platform) -> Vec<serde_json::Value> {
    platform
        .run(&["retained", "list", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// `dev` from the example (with `edits`), with files in its home.
fn dev_with_files(platform: &Platform, edits: &[(&str, &str)]) -> PathBuf {
    push(platform, "local", 1, &example_with(edits));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "unsaved work\n").unwrap();
    fs::create_dir_all(volume.join("src/deep")).unwrap();
    fs::write(volume.join("src/deep/main.rs"), "fn main() {}\n").unwrap();
    volume
}

/// Pushes `version` of the template and updates `dev` to it: held, and the
/// number and digest of the held build.
/// The example's kept name is dropped: its rename then replaces the volume.
fn held_update(platform: &Platform, version: u32, main_tf: &str) -> (String, String) {
    push(platform, "local", version, &util::name_not_kept(main_tf));
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let number = platform.show("dev")["latest_build"]["number"]
        .as_i64()
        .unwrap()
        .to_string();
    (number, printed_digest(&held))
}

fn log_of(platform: &Platform, number: &str) -> String {
    platform.run(&["builds", "logs", "dev", number]).ok().stdout
}

#[test]
fn a_confirmed_replacement_leaves_a_snapshot_that_verify_and_restore_bring_back() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = dev_with_files(&platform, &[]);
    let (number, digest) = held_update(&platform, 2, &example_with(&[RENAME]));
    assert!(records(&platform).is_empty());

    platform
        .run(&["builds", "confirm", "dev", &number, "--digest", &digest])
        .ok();
    assert!(
        !volume.exists(),
        "the confirmed replacement kept the old volume"
    );
    let log = log_of(&platform, &number);
    assert!(
        log.contains("snapshot of abode_volume.home: 2 files"),
        "{log}"
    );

    let listed = records(&platform);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let record = &listed[0];
    assert_eq!(record["kind"], "snapshot");
    assert_eq!(record["status"], "open");
    assert_eq!(record["address"], "abode_volume.home");
    assert_eq!(record["workspace"], "dev");
    let id = record["id"].as_str().unwrap().to_string();
    let table = platform.run(&["retained", "list"]).ok().stdout;
    assert!(
        table.contains("KIND") && table.contains("snapshot"),
        "{table}"
    );

    // Its archive leaves as a file that verifies against its manifest.
    let export = platform.root().join("snapshot.tar");
    platform
        .run(&["retained", "export", &id, "--to", export.to_str().unwrap()])
        .ok();
    let verified = platform
        .run(&["retained", "verify", export.to_str().unwrap()])
        .ok();
    assert!(verified.stderr.contains("2 files"), "{verified}");

    // A snapshot is not adopted, and a running workspace is not restored into.
    platform
        .run(&["create", "other", "--template", "local", "--adopt", &id])
        .fails_with(1, &["snapshot"]);
    platform
        .run(&["retained", "restore", &id, "--to", "dev"])
        .fails_with(1, &["dev is running", "abode stop dev"]);

    // Stopped, the new home gets the old files back.
    platform.run(&["stop", "dev"]).ok();
    let new_home = only_subdir(&platform.volumes_dir());
    assert!(!new_home.join("notes.txt").exists());
    fs::write(new_home.join("notes.txt"), "written since\n").unwrap();
    fs::write(new_home.join("new.txt"), "kept\n").unwrap();
    let restored = platform
        .run(&["retained", "restore", &id, "--to", "dev"])
        .ok();
    assert!(restored.stderr.contains("2 files"), "{restored}");
    assert_eq!(
        fs::read_to_string(new_home.join("notes.txt")).unwrap(),
        "unsaved work\n"
    );
    assert_eq!(
        fs::read_to_string(new_home.join("src/deep/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(
        fs::read_to_string(new_home.join("new.txt")).unwrap(),
        "kept\n"
    );
    let audit = platform.run(&["audit", "-o", "json"]).ok().json();
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["action"] == "retained.restore"),
        "{audit:#}"
    );

    // Destroyed on purpose: the archive goes, the record is closed.
    platform.run(&["retained", "destroy", &id]).ok();
    assert!(records(&platform).is_empty());
    platform
        .run(&["retained", "restore", &id, "--to", "dev"])
        .fails_with(1, &["destroyed"]);
    let snapshots: Vec<_> = fs::read_dir(platform.data_dir().join("snapshots"))
        .unwrap()
        .collect();
    assert!(snapshots.is_empty(), "{snapshots:?}");
}

#[test]
fn a_failing_snapshot_applies_nothing() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let failing = protect_with("snapshot_command = \"echo taking a snapshot; exit 1\"");
    let failing = (failing.0, failing.1.as_str());
    let volume = dev_with_files(&platform, &[failing]);

    // The command exits 1: the confirmed plan fails before any apply.
    let (number, digest) = held_update(&platform, 2, &example_with(&[failing, RENAME]));
    let confirmed = platform.run(&["builds", "confirm", "dev", &number, "--digest", &digest]);
    assert_ne!(confirmed.code, Some(0), "{confirmed}");
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "failed", "{build:#}");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.contains("snapshot_command of abode_volume.home failed with exit status 1")
            && error.contains("nothing was applied"),
        "{error}"
    );
    assert!(log_of(&platform, &number).contains("snapshot_command: taking a snapshot"));
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "unsaved work\n"
    );
    assert_eq!(only_subdir(&platform.volumes_dir()), volume);
    assert!(records(&platform).is_empty());

    // A command that is not found: the same, said so.
    let missing = protect_with("snapshot_command = \"no-such-snapshot-tool --now\"");
    let missing = (missing.0, missing.1.as_str());
    let (number, digest) = held_update(&platform, 3, &example_with(&[missing, RENAME]));
    let confirmed = platform.run(&["builds", "confirm", "dev", &number, "--digest", &digest]);
    assert_ne!(confirmed.code, Some(0), "{confirmed}");
    let build = platform.show("dev")["latest_build"].clone();
    let error = build["error"].as_str().unwrap();
    assert!(
        error.contains("snapshot_command of abode_volume.home was not found"),
        "{error}"
    );
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "unsaved work\n"
    );
    assert!(records(&platform).is_empty());

    // An empty command is refused at push, in one line.
    let empty = protect_with("snapshot_command = \"\"");
    let dir = platform.root().join("templates/empty");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("main.tf"),
        example_with(&[(empty.0, empty.1.as_str())]),
    )
    .unwrap();
    platform
        .run(&["templates", "push", "local", "-d", dir.to_str().unwrap()])
        .fails_with(1, &["snapshot_command is empty"]);

    // A command that works sees the resource's attributes, and the volume
    // is archived besides (`snapshot` defaults to true for a volume).
    let echo = protect_with(
        "snapshot_command = \"echo \\\"$ABODE_SNAPSHOT_ADDRESS $ABODE_SNAPSHOT_TYPE $ABODE_ATTR_NAME\\\"\"",
    );
    let echo = (echo.0, echo.1.as_str());
    let (number, digest) = held_update(&platform, 4, &example_with(&[echo, RENAME_AGAIN]));
    platform
        .run(&["builds", "confirm", "dev", &number, "--digest", &digest])
        .ok();
    let log = log_of(&platform, &number);
    let name = volume.file_name().unwrap().to_str().unwrap();
    assert!(
        log.contains(&format!(
            "snapshot_command: abode_volume.home abode_volume {name}"
        )),
        "{log}"
    );
    assert!(!volume.exists());
    let listed = records(&platform);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["import_id"], name);

    // `snapshot = false` with no command: nothing is taken.
    let off = protect_with("snapshot = false");
    let off = (off.0, off.1.as_str());
    let (number, digest) = held_update(
        &platform,
        5,
        &example_with(&[off, ("name = \"home-${", "name = \"home4-${")]),
    );
    platform
        .run(&["builds", "confirm", "dev", &number, "--digest", &digest])
        .ok();
    assert!(!log_of(&platform, &number).contains("snapshot of"));
    assert_eq!(records(&platform).len(), 1);
}

/// A snapshot kept `retain_for = "1d"` with `expire = "destroy"` stays for
/// its day, then the scheduler's expiry pass removes its archive and closes
/// its record: `abode retained list` no longer shows it.
#[test]
fn an_expired_snapshot_is_destroyed_by_the_expiry_pass() {
    require_terraform();
    let mut platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    let rule = protect_with(
        "on_delete   = \"retain\"\n  retain_for  = \"1d\"\n  expire      = \"destroy\"",
    );
    let rule = (rule.0, rule.1.as_str());
    dev_with_files(&platform, &[rule]);
    let (number, digest) = held_update(&platform, 2, &example_with(&[rule, RENAME]));
    platform
        .run(&["builds", "confirm", "dev", &number, "--digest", &digest])
        .ok();
    let listed = records(&platform);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["kind"], "snapshot");
    let id = listed[0]["id"].as_str().unwrap().to_string();
    let archive = platform
        .data_dir()
        .join("snapshots")
        .join(format!("{id}.tar"));
    assert!(archive.is_file());

    // An archive a crash left half-written is removed when the server
    // starts, said in its log; whole ones stay.
    let crashed = platform.data_dir().join("snapshots/crashed.tar.partial");
    fs::write(&crashed, "half an archive").unwrap();
    platform.restart_server();
    assert!(!crashed.exists());
    assert!(archive.is_file());
    let log = platform.server_log();
    assert!(
        log.contains("removed a snapshot archive a crash left half-written")
            && log.contains("crashed.tar.partial"),
        "{log}"
    );

    // The clock moves in half days (a session idles out after one).
    let half_days = |count: usize| {
        for _ in 0..count {
            platform.advance_clock(std::time::Duration::from_secs(12 * 3600));
            platform.run(&["users", "me"]).ok();
        }
    };
    // Within its day: kept.
    half_days(1);
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(records(&platform).len(), 1);
    assert!(archive.is_file());

    // Past it: the expiry pass destroys it.
    half_days(2);
    platform.wait_for_passes("scheduler", 2);
    assert!(records(&platform).is_empty(), "{:?}", records(&platform));
    assert!(!archive.exists());
    let closed = platform
        .run(&["retained", "list", "--closed", "--output", "json"])
        .ok()
        .json();
    let closed: Vec<&serde_json::Value> = closed
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["id"] == id.as_str())
        .collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0]["status"], "destroyed", "{closed:?}");
    platform
        .run(&["retained", "restore", &id, "--to", "dev"])
        .fails_with(1, &["destroyed"]);
}
