//! `abode builds cancel` in every state a build can be canceled in: pending
//! (no worker free), running, and a cancel that only the database knows of
//! (recorded by another server process, or before the worker that claimed the
//! build got to it). A build awaiting confirmation is canceled in
//! `e2e_guarded.rs`; one followed after a server restart in `abode-api`'s
//! server tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::process::Child;
use std::time::{Duration, Instant};

use util::{
    assert_no_processes_left, finish, fixture, require_terraform, sqlite_execute, Platform,
};

/// One provisioner, so that a second build waits; a short grace after SIGINT.
fn platform() -> Platform {
    require_terraform();
    let mut flags = util::FAST_AGENT_FLAGS.to_vec();
    flags.extend(["--provisioners", "1", "--cancel-grace", "2"]);
    let platform = Platform::start_with(&flags);
    platform.login_owner();
    let slow = fixture("slow");
    platform
        .run(&["templates", "push", "slow", "-d", slow.to_str().unwrap()])
        .ok();
    platform
}

fn create(platform: &Platform, workspace: &str) -> Child {
    platform.spawn(&["create", workspace, "--template", "slow"])
}

#[track_caller]
fn wait_for_apply(platform: &Platform, workspace: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = platform.run(&["builds", "logs", workspace, "1"]);
        if log.stdout.contains("slow: Provisioning with 'local-exec'") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the slow apply never started:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pending_and_running_builds_are_canceled() {
    let platform = platform();
    let first = create(&platform, "one");
    wait_for_apply(&platform, "one");
    let second = create(&platform, "two");
    platform.wait_for_build_status("two", "pending");

    // Pending: canceled at once, no worker ever runs it.
    platform.run(&["builds", "cancel", "two", "1"]).ok();
    let build = platform.show("two")["latest_build"].clone();
    assert_eq!(build["status"], "canceled", "{build:#}");

    // Running: Terraform is interrupted. Asked twice, it is one cancel.
    platform.run(&["builds", "cancel", "one", "1"]).ok();
    let _ = platform.run(&["builds", "cancel", "one", "1"]);
    let build = platform.wait_for_build_status("one", "canceled");
    let audit = platform
        .run(&["audit", "--workspace", "one", "--output", "json"])
        .ok()
        .json();
    let cancels = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["action"] == "build.cancel")
        .count();
    assert_eq!(cancels, 1, "{audit:#}");
    assert!(
        build["error"]
            .as_str()
            .unwrap()
            .starts_with("canceled during terraform apply"),
        "{build:#}"
    );
    finish(first);
    finish(second);
    assert_no_processes_left(&platform, "after both cancels");
}

#[test]
fn a_cancel_recorded_only_in_the_database_is_honoured() {
    let platform = platform();
    let create = create(&platform, "one");
    wait_for_apply(&platform, "one");
    // As another server process (or a cancel that arrived between the claim
    // and the run) would leave it: the flag, and no signal to this process.
    sqlite_execute(&platform, "UPDATE jobs SET cancel_requested = TRUE");
    let build = platform.wait_for_build_status("one", "canceled");
    assert!(
        build["error"]
            .as_str()
            .unwrap()
            .starts_with("canceled during terraform apply"),
        "{build:#}"
    );
    finish(create);
    assert_no_processes_left(&platform, "after the cancel");
}
