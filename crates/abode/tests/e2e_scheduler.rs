//! The lifecycle scheduler end to end, with the real binary, real Terraform
//! and a short poll interval; time moves by the server's clock offset, never
//! by waiting: a workspace past its template's ttl is stopped by the
//! scheduler (reason `autostop`, actor `scheduler`); a dormant workspace
//! whose template deletes dormant workspaces is stopped, its owner told, and
//! its deletion, which would destroy the protected home volume, is held for
//! a person instead of applied; the owner who starts it by hand wakes it.
//!
//! Where a test asserts that the scheduler did nothing, it first sees the
//! scheduler tick (`abode_background_passes_total{task="scheduler"}` in
//! the server's metrics) after the moment that matters: a check that only
//! waited would pass on a machine too slow to tick at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{repo_root, require_terraform, sqlite_execute, Platform};

/// Polls `abode show` until `done` holds; panics with the last answer after
/// `timeout`.
fn wait_for(
    platform: &Platform,
    workspace: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let shown = platform.show(workspace);
        if done(&shown) {
            return shown;
        }
        assert!(
            Instant::now() < deadline,
            "{workspace} never got {what}; last: {shown:#}\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn example(platform: &Platform) {
    let dir = repo_root().join("examples/local-workspace");
    platform
        .run(&["templates", "push", "example", "-d", dir.to_str().unwrap()])
        .ok();
}

#[test]
fn a_workspace_past_its_ttl_is_stopped_by_the_scheduler() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    example(&platform);
    sqlite_execute(
        &platform,
        "UPDATE templates SET default_ttl_ms = 60000 WHERE name = 'example'",
    );
    platform
        .run(&["create", "dev", "--template", "example"])
        .ok();
    wait_for(&platform, "dev", "running", |shown| {
        shown["status"] == "running"
    });
    // Not yet: nothing happens before the deadline.
    platform.advance_clock(Duration::from_secs(30));
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(platform.show("dev")["status"], "running");
    platform.advance_clock(Duration::from_secs(31));
    let stopped = wait_for(&platform, "dev", "stopped", |shown| {
        shown["status"] == "stopped"
    });
    let build = &stopped["latest_build"];
    assert_eq!(build["transition"], "stop", "{stopped:#}");
    assert_eq!(build["reason"], "autostop", "{stopped:#}");
    assert_eq!(build["initiator"], "scheduler", "{stopped:#}");
    assert_eq!(build["initiator_type"], "system", "{stopped:#}");
    // The home volume survives the stop.
    let id = stopped["id"].as_str().unwrap();
    assert!(platform.volumes_dir().join(format!("home-{id}")).is_dir());
}

#[test]
fn a_dormant_workspace_s_deletion_is_held_when_it_would_destroy_the_protected_volume() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    example(&platform);
    platform
        .run(&["create", "dev", "--template", "example"])
        .ok();
    let shown = wait_for(&platform, "dev", "running", |shown| {
        shown["status"] == "running"
    });
    let id = shown["id"].as_str().unwrap().to_string();
    // Unused for a day makes it dormant; dormant for a day deletes it.
    sqlite_execute(
        &platform,
        "UPDATE templates SET dormancy_threshold_ms = 86400000, \
         dormancy_auto_deletion_ms = 86400000 WHERE name = 'example'",
    );
    // Half a day at a time, with a request in between: the CLI's session
    // would expire after a day without one.
    for _ in 0..2 {
        platform.advance_clock(Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
    }
    let stopped = wait_for(&platform, "dev", "stopped by dormancy", |shown| {
        shown["status"] == "stopped" && shown["latest_build"]["reason"] == "dormancy"
    });
    assert_eq!(stopped["latest_build"]["initiator"], "scheduler");
    let notified = |kind: &str| {
        let list = platform
            .run(&["notifications", "list", "--output", "json"])
            .ok()
            .json();
        list.as_array()
            .unwrap()
            .iter()
            .filter(|message| message["kind"] == kind)
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while notified("workspace_dormant") == 0 {
        assert!(Instant::now() < deadline, "workspace_dormant never sent");
        std::thread::sleep(Duration::from_millis(250));
    }
    // The deletion comes a day later, after the owner was told.
    for _ in 0..3 {
        platform.advance_clock(Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
        platform.wait_for_passes("scheduler", 2);
    }
    let held = wait_for(&platform, "dev", "a held deletion", |shown| {
        shown["latest_build"]["transition"] == "delete"
            && shown["latest_build"]["status"] == "awaiting_confirmation"
    });
    assert_eq!(held["latest_build"]["reason"], "autodelete", "{held:#}");
    assert_eq!(held["latest_build"]["initiator"], "scheduler", "{held:#}");
    assert!(
        platform.volumes_dir().join(format!("home-{id}")).is_dir(),
        "the protected volume is not destroyed without a person"
    );
    assert!(notified("workspace_deletion_scheduled") >= 1);
    assert!(notified("build_held") >= 1);

    // The owner is never locked out by a held automated build: they cancel
    // it and start the workspace by hand.
    let number = held["latest_build"]["number"].as_i64().unwrap().to_string();
    platform.run(&["builds", "cancel", "dev", &number]).ok();
    platform.run(&["start", "dev"]).ok();
    let running = wait_for(&platform, "dev", "running again", |shown| {
        shown["status"] == "running"
    });
    assert_eq!(
        running["latest_build"]["reason"], "initiator",
        "{running:#}"
    );
    // Starting it woke it: the scheduler ticks on and queues no deletion.
    platform.wait_for_passes("scheduler", 3);
    let still = platform.show("dev");
    assert_eq!(
        still["latest_build"]["number"], running["latest_build"]["number"],
        "{still:#}"
    );
    assert_eq!(still["status"], "running", "{still:#}");
}

#[test]
fn an_autostart_schedule_starts_a_stopped_workspace() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    example(&platform);
    platform
        .run(&["create", "dev", "--template", "example"])
        .ok();
    wait_for(&platform, "dev", "running", |shown| {
        shown["status"] == "running"
    });
    platform.run(&["stop", "dev"]).ok();
    sqlite_execute(
        &platform,
        "UPDATE workspaces SET autostart_cron = '*/10 * * * *', \
         autostart_timezone = 'Europe/Paris' WHERE name = 'dev'",
    );
    // Some occurrence of "every ten minutes" falls in the next eleven.
    platform.advance_clock(Duration::from_secs(11 * 60));
    let started = wait_for(&platform, "dev", "started by autostart", |shown| {
        shown["status"] == "running" && shown["latest_build"]["reason"] == "autostart"
    });
    assert_eq!(
        started["latest_build"]["initiator"], "scheduler",
        "{started:#}"
    );
}

#[test]
fn two_servers_on_one_postgres_database_stop_a_workspace_once() {
    require_terraform();
    let database = util::FreshDatabase::create();
    let ticking = &["--autobuild-poll-interval", "1"];
    let first = Platform::start_with_metrics(Some(&database.url), ticking);
    // The second server builds nothing (its data dir holds no volume), but
    // ticks like the first: the lease must keep them from both acting.
    let second = Platform::start_with_metrics(
        Some(&database.url),
        &["--autobuild-poll-interval", "1", "--provisioners", "0"],
    );
    first.login_owner();
    example(&first);
    util::psql(
        &database.url,
        "UPDATE templates SET default_ttl_ms = 3600000 WHERE name = 'example'",
    )
    .unwrap();
    first.run(&["create", "dev", "--template", "example"]).ok();
    wait_for(&first, "dev", "running", |shown| {
        shown["status"] == "running"
    });
    for platform in [&first, &second] {
        platform.advance_clock(Duration::from_secs(61 * 60));
    }
    wait_for(&first, "dev", "stopped", |shown| {
        shown["status"] == "stopped"
    });
    // A few more ticks on both servers (each server counts its own), and
    // between them one stop asked for: the other server ticked and did
    // nothing, and nothing was refused.
    for platform in [&first, &second] {
        platform.wait_for_passes("scheduler", 2);
    }
    let actions = |action: &str| {
        let series = format!("abode_scheduler_actions_total{{action=\"{action}\"}}");
        [&first, &second].map(|platform| platform.metric(&series) as u64)
    };
    let asked = actions("build");
    assert_eq!(
        asked.iter().sum::<u64>(),
        1,
        "builds asked by each server: {asked:?}"
    );
    assert_eq!(actions("failed"), [0, 0]);
    let builds = util::psql(
        &database.url,
        "SELECT string_agg(transition || ':' || reason, ',' ORDER BY number) FROM builds",
    )
    .unwrap();
    assert_eq!(builds, "start:initiator,stop:autostop");
}

#[test]
fn an_autostart_that_would_replace_the_protected_volume_is_held_and_told() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    example(&platform);
    platform
        .run(&["create", "dev", "--template", "example"])
        .ok();
    wait_for(&platform, "dev", "running", |shown| {
        shown["status"] == "running"
    });
    platform.run(&["stop", "dev"]).ok();
    // Version 2 renames the home volume: a start on it would replace it.
    let renamed = platform.root().join("renamed");
    util::copy_dir(&repo_root().join("examples/local-workspace"), &renamed);
    let main_tf = renamed.join("main.tf");
    let text = std::fs::read_to_string(&main_tf).unwrap();
    assert!(text.contains("name = \"home-"));
    let text = util::name_not_kept(&text);
    std::fs::write(&main_tf, text.replace("name = \"home-", "name = \"house-")).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "example",
            "-d",
            renamed.to_str().unwrap(),
            "--activate",
        ])
        .ok();
    sqlite_execute(
        &platform,
        "UPDATE templates SET require_active_version = TRUE WHERE name = 'example'",
    );
    sqlite_execute(
        &platform,
        "UPDATE workspaces SET autostart_cron = '*/10 * * * *', \
         autostart_timezone = 'America/New_York' WHERE name = 'dev'",
    );
    platform.advance_clock(Duration::from_secs(11 * 60));
    let held = wait_for(&platform, "dev", "a held autostart", |shown| {
        shown["latest_build"]["status"] == "awaiting_confirmation"
    });
    let build = &held["latest_build"];
    assert_eq!(build["reason"], "autostart", "{held:#}");
    assert_eq!(build["initiator"], "scheduler", "{held:#}");
    assert_eq!(build["template_version"], 2, "{held:#}");
    let notifications = platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json();
    let told = notifications
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["kind"] == "build_held")
        .unwrap_or_else(|| panic!("no build_held: {notifications:#}"));
    assert_eq!(
        told["payload"]["initiator"]["name"], "scheduler",
        "{told:#}"
    );
    assert_eq!(told["payload"]["initiator"]["system"], true, "{told:#}");
    // Nothing retried it meanwhile: the held build is still the third
    // (create, stop, autostart).
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(platform.show("dev")["latest_build"]["number"], 3);
}
