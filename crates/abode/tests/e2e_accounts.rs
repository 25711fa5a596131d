//! Account status through the real binary, a real server and real
//! Terraform: a suspended member's session, API token and running `abode
//! ssh` connection are refused or closed, the scheduler (seen ticking) does
//! not autostart their workspace, and activation restores all of it; user
//! admins' refusals (themselves, an owner, someone who owns a workspace;
//! the last owner is the store's test) are one line each; dormancy after `--dormancy-period`, woken
//! by a sign-in; a person's own password; audited requests keep client,
//! user agent and status.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use abode_client::Client;
use serde_json::Value;
use util::{repo_root, require_terraform, sqlite_execute, Platform};

fn push_example(platform: &Platform) {
    let dir = repo_root().join("examples/local-workspace");
    platform
        .run(&["templates", "push", "example", "-d", dir.to_str().unwrap()])
        .ok();
}

/// `abode users show NAME -o json` as the owner.
fn shown_user(platform: &Platform, name: &str) -> Value {
    platform
        .run(&["users", "show", name, "--output", "json"])
        .ok()
        .json()
}

/// The owner's audit events with `action`, newest first.
fn audit_events(platform: &Platform, action: &str) -> Vec<Value> {
    platform
        .run(&["audit", "--limit", "1000", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["action"] == action)
        .cloned()
        .collect()
}

fn wait_until(what: &str, platform: &Platform, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "never: {what}\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn login(platform: &Platform, dir: &Path, username: &str, password: &str) -> util::Run {
    platform.run_as(
        dir,
        &[
            "login",
            &platform.url,
            "--username",
            username,
            "--password-stdin",
        ],
        Some(&format!("{password}\n")),
    )
}

#[test]
fn a_suspended_member_is_refused_everywhere_until_activated() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    push_example(&platform);
    let mia = platform.login_new_user("mia", "member");
    platform
        .run_as(&mia, &["create", "dev", "--template", "example"], None)
        .ok();
    platform.wait_for_agent("mia/dev", "ready", Duration::from_secs(120));
    let token = platform
        .run_as(&mia, &["tokens", "create", "--name", "ci"], None)
        .ok()
        .stdout
        .trim()
        .to_string();
    let api = Client::new(&platform.url, Some(token));
    api.me().unwrap();

    // A long-running ssh connection, seen working before the suspension.
    let mut ssh = platform
        .cmd_as(
            &mia,
            &["ssh", "dev", "--", "sh", "-c", "echo ready; sleep 600"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(ssh.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "ready");

    let suspended = platform
        .run(&["users", "suspend", "mia", "--output", "json"])
        .ok()
        .json();
    assert_eq!(suspended["status"], "suspended", "{suspended:#}");

    // The connection closes; the session and the token are refused.
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = ssh.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the suspended member's ssh connection stayed open\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!exited.success());
    platform
        .run_as(&mia, &["list"], None)
        .fails_with(1, &["suspended", "ask a user admin"]);
    let refused = api.me().unwrap_err();
    assert_eq!(refused.status(), Some(401), "{refused}");
    login(
        &platform,
        &platform.root().join("again"),
        "mia",
        "mia-password",
    )
    .fails_with(1, &["suspended"]);
    let listed = platform
        .run(&["users", "list", "--output", "json"])
        .ok()
        .json();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|user| user["username"] == "mia")
        .cloned()
        .unwrap();
    assert_eq!(row["status"], "suspended", "{listed:#}");
    assert_eq!(row["groups"], serde_json::json!(["Everyone"]), "{listed:#}");

    // Their workspace is not autostarted: the scheduler ticks past the
    // occurrence and does nothing with it.
    platform.run(&["stop", "mia/dev"]).ok();
    platform.wait_for_build_status("mia/dev", "succeeded");
    sqlite_execute(
        &platform,
        "UPDATE workspaces SET autostart_cron = '*/10 * * * *', \
         autostart_timezone = 'UTC' WHERE name = 'dev'",
    );
    platform.advance_clock(Duration::from_secs(11 * 60));
    platform.wait_for_passes("scheduler", 3);
    let still = platform.show("mia/dev");
    assert_eq!(still["latest_build"]["transition"], "stop", "{still:#}");

    // Activated: everything works again, and the next occurrence starts it.
    platform.run(&["users", "activate", "mia"]).ok();
    platform.run_as(&mia, &["list"], None).ok();
    api.me().unwrap();
    platform.advance_clock(Duration::from_secs(11 * 60));
    wait_until(
        "the activated member's workspace is autostarted",
        &platform,
        || {
            let shown = platform.show("mia/dev");
            shown["latest_build"]["reason"] == "autostart"
        },
    );

    // Both changes are on the record with before and after, the client,
    // its user agent and the answer's status.
    let suspension = &audit_events(&platform, "user.suspend")[0];
    assert_eq!(suspension["target"], "mia");
    assert_eq!(suspension["details"], "before=active after=suspended");
    assert_eq!(suspension["status_code"], 200, "{suspension:#}");
    assert_eq!(suspension["client_ip"], "127.0.0.1", "{suspension:#}");
    assert!(
        suspension["user_agent"]
            .as_str()
            .is_some_and(|agent| !agent.is_empty()),
        "{suspension:#}"
    );
    let activation = &audit_events(&platform, "user.activate")[0];
    assert_eq!(activation["details"], "before=suspended after=active");
    let failed_login = audit_events(&platform, "login")
        .into_iter()
        .find(|event| event["outcome"] == "failure" && event["target"] == "mia")
        .unwrap();
    assert_eq!(failed_login["status_code"], 401, "{failed_login:#}");
    assert!(
        failed_login["details"]
            .as_str()
            .is_some_and(|details| details.contains("method=password")),
        "{failed_login:#}"
    );
}

#[test]
fn user_admins_are_refused_in_one_line_where_a_change_would_lose_something() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push_example(&platform);
    let uma = platform.login_new_user("uma", "user-admin");
    let mia = platform.login_new_user("mia", "member");

    // Nobody suspends themselves; the last owner stays; members may not.
    platform
        .run(&["users", "suspend", "alice"])
        .fails_with(1, &["cannot suspend your own account"]);
    platform
        .run_as(&uma, &["users", "suspend", "alice"], None)
        .fails_with(1, &["only an owner changes an owner's account"]);
    platform
        .run_as(&uma, &["users", "delete", "alice"], None)
        .fails_with(1, &["only an owner"]);
    platform
        .run_as(&mia, &["users", "suspend", "uma"], None)
        .fails_with(1, &["you may not"]);
    platform
        .run(&["users", "suspend", "nobody-here"])
        .fails_with(1, &["user \"nobody-here\" not found"]);
    platform
        .run(&["users", "frobnicate", "mia"])
        .fails_with(2, &["frobnicate"]);

    // Someone who owns a workspace is not deleted.
    platform
        .run_as(&mia, &["create", "dev", "--template", "example"], None)
        .ok();
    platform.wait_for_build_status("mia/dev", "succeeded");
    platform
        .run_as(&uma, &["users", "delete", "mia"], None)
        .fails_with(1, &["owns 1 workspace"]);
    platform.run_as(&mia, &["delete", "dev"], None).ok();
    platform.wait_for_build_status("mia/dev", "succeeded");
    wait_until("mia's workspace is gone", &platform, || {
        platform
            .run(&["list", "--all", "--output", "json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    });
    let deleted = platform
        .run_as(&uma, &["users", "delete", "mia", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(deleted["status"], "deleted", "{deleted:#}");
    platform
        .run_as(&mia, &["list"], None)
        .fails_with(1, &["deleted"]);
    let listed = platform
        .run(&["users", "list", "--output", "json"])
        .ok()
        .json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|user| user["username"] != "mia"),
        "{listed:#}"
    );
    let all = platform
        .run(&["users", "list", "--all", "--output", "json"])
        .ok()
        .json();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|user| user["username"] == "mia" && user["status"] == "deleted"),
        "{all:#}"
    );
    platform
        .run(&["users", "activate", "mia"])
        .fails_with(1, &["was deleted"]);
}

#[test]
fn a_person_changes_their_own_password_and_keeps_this_session() {
    let platform = Platform::start();
    platform.login_owner();
    let mia = platform.login_new_user("mia", "member");
    let other = platform.root().join("mia-elsewhere");
    login(&platform, &other, "mia", "mia-password").ok();

    platform
        .run_as(
            &mia,
            &["users", "password", "--password-stdin"],
            Some("not-my-password\nnew-secret-words\n"),
        )
        .fails_with(1, &["current password is wrong"]);
    platform
        .run_as(
            &mia,
            &["users", "password", "--password-stdin"],
            Some("mia-password\nshort\n"),
        )
        .fails_with(1, &["password"]);
    let changed = platform
        .run_as(
            &mia,
            &["users", "password", "--password-stdin"],
            Some("mia-password\nnew-secret-words\n"),
        )
        .ok();
    assert!(changed.stdout.contains("1 other session"), "{changed}");
    // This session stays; the other ended; the old password opens nothing.
    platform.run_as(&mia, &["users", "me"], None).ok();
    platform
        .run_as(&other, &["users", "me"], None)
        .fails_with(1, &["log in again"]);
    login(&platform, &other, "mia", "mia-password").fails_with(1, &["wrong username or password"]);
    login(&platform, &other, "mia", "new-secret-words").ok();
}

#[test]
fn people_unseen_for_the_dormancy_period_fall_dormant_and_wake_at_sign_in() {
    let platform = Platform::start_with_metrics(
        None,
        &["--autobuild-poll-interval", "1", "--dormancy-period", "7d"],
    );
    platform.login_owner();
    let mia = platform.login_new_user("mia", "member");
    assert_eq!(shown_user(&platform, "mia")["status"], "active");

    // Eight days later: the sweep ran (observed) and both are dormant.
    platform.advance_clock(Duration::from_secs(8 * 86_400));
    platform.wait_for_passes("scheduler", 3);
    // The owner's session idled out; signing in wakes the owner alone.
    platform.login_existing_owner();
    let shown = shown_user(&platform, "mia");
    assert_eq!(shown["status"], "dormant", "{shown:#}");
    assert_eq!(shown_user(&platform, "alice")["status"], "active");

    login(&platform, &mia, "mia", "mia-password").ok();
    let woken = shown_user(&platform, "mia");
    assert_eq!(woken["status"], "active", "{woken:#}");
    assert!(woken["last_seen_at"].is_string(), "{woken:#}");
    let slept = audit_events(&platform, "user.dormant");
    assert!(
        slept
            .iter()
            .any(|event| event["target"] == "mia" && event["actor"] == "server"),
        "{slept:#?}"
    );
    let woke = audit_events(&platform, "user.activate");
    assert!(
        woke.iter().any(|event| event["target"] == "mia"
            && event["details"] == "before=dormant after=active (signed in)"),
        "{woke:#?}"
    );
}
