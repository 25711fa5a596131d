//! The lifecycle settings end to end, with the real binary and server: a
//! template's policy edited and shown (and refused to a member), a
//! workspace's autostart and autostop set, shown and turned off, the
//! refusals (bad cron, unknown time zone, autostart the template does not
//! allow, an extension past the max ttl), waking a dormant workspace, and
//! the agent's activity report. The scheduler that acts on these settings
//! has its own tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::process::Stdio;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use util::{fixture, require_terraform, sqlite_execute, Platform, Run};

const HOUR_MS: u64 = 3_600_000;

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// `abode agent activity` with the agent's environment.
fn agent_activity(platform: &Platform, token: &str) -> Run {
    let output = platform
        .cmd(&["agent", "activity"])
        .env("ABODE_AGENT_TOKEN", token)
        .env("ABODE_AGENT_URL", &platform.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        command: "abode agent activity".into(),
    }
}

#[test]
fn lifecycle_settings_are_set_shown_and_refused_from_the_cli() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let minimal = fixture("minimal");
    platform
        .run(&[
            "templates",
            "push",
            "minimal",
            "--directory",
            minimal.to_str().unwrap(),
        ])
        .ok();
    platform
        .run(&["create", "dev", "--template", "minimal"])
        .ok();

    // ---- the template's policy ----
    let policy = platform
        .run(&["templates", "policy", "minimal", "-o", "json"])
        .ok()
        .json();
    assert_eq!(policy["default_ttl_ms"], 0);
    assert_eq!(policy["activity_bump_ms"], HOUR_MS);
    assert_eq!(policy["allow_user_autostart"], true);

    let edited = platform
        .run(&[
            "templates",
            "edit",
            "minimal",
            "--default-ttl",
            "8h",
            "--max-ttl",
            "1d",
            "--autostart-days",
            "fri,mon",
            "--failure-ttl",
            "0",
            "--dormancy-threshold",
            "30d",
            "--require-active-version",
            "true",
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(edited["default_ttl_ms"], 8 * HOUR_MS);
    assert_eq!(edited["max_ttl_ms"], 24 * HOUR_MS);
    assert_eq!(edited["autostart_days"], "mon,fri");
    assert_eq!(edited["dormancy_threshold_ms"], 30 * 24 * HOUR_MS);
    assert_eq!(edited["require_active_version"], true);
    let shown = platform.run(&["templates", "policy", "minimal"]).ok();
    assert!(shown.stdout.contains("Default ttl:"), "{shown}");
    assert!(shown.stdout.contains("8h"), "{shown}");
    assert!(shown.stdout.contains("mon,fri"), "{shown}");

    // Refusals: one line, exit 1 (2 for what the command line cannot read).
    let member = platform.login_new_user("mia", "member");
    platform
        .run_as(
            &member,
            &["templates", "edit", "minimal", "--default-ttl", "1h"],
            None,
        )
        .fails_with(1, &["may not edit", "template-admin"]);
    platform
        .run(&["templates", "edit", "minimal"])
        .fails_with(1, &["nothing to change"]);
    platform
        .run(&[
            "templates",
            "edit",
            "minimal",
            "--autostart-days",
            "mon,funday",
        ])
        .fails_with(1, &["funday"]);
    platform
        .run(&["templates", "edit", "minimal", "--default-ttl", "2d"])
        .fails_with(1, &["longer than the max ttl"]);
    let usage = platform.run(&["templates", "edit", "minimal", "--max-ttl", "5x"]);
    assert_eq!(usage.code, Some(2), "{usage}");

    // ---- the workspace's schedule ----
    let schedule = platform
        .run(&[
            "schedule",
            "start",
            "dev",
            "30 8 * * 1-5",
            "--timezone",
            "Europe/Paris",
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(schedule["autostart"]["cron"], "30 8 * * 1-5");
    assert_eq!(schedule["autostart"]["timezone"], "Europe/Paris");
    assert_eq!(schedule["ttl_ms"], serde_json::Value::Null);
    let schedule = platform
        .run(&["schedule", "stop", "dev", "2h", "-o", "json"])
        .ok()
        .json();
    assert_eq!(schedule["ttl_ms"], 2 * HOUR_MS);
    assert_eq!(schedule["autostart"]["cron"], "30 8 * * 1-5", "kept");
    let shown = platform.run(&["schedule", "show", "dev"]).ok();
    for needle in ["30 8 * * 1-5 (Europe/Paris)", "Autostop:", "2h"] {
        assert!(shown.stdout.contains(needle), "{needle}: {shown}");
    }
    let schedule = platform
        .run(&["schedule", "start", "dev", "--off", "-o", "json"])
        .ok()
        .json();
    assert_eq!(schedule["autostart"], serde_json::Value::Null);
    assert_eq!(schedule["ttl_ms"], 2 * HOUR_MS, "kept");
    let schedule = platform
        .run(&["schedule", "stop", "dev", "--off", "-o", "json"])
        .ok()
        .json();
    assert_eq!(schedule["ttl_ms"], 0);
    let schedule = platform
        .run(&["schedule", "stop", "dev", "--default", "-o", "json"])
        .ok()
        .json();
    assert_eq!(schedule["ttl_ms"], serde_json::Value::Null);

    platform
        .run(&["schedule", "start", "dev", "61 8 * * *"])
        .fails_with(1, &["cron"]);
    platform
        .run(&[
            "schedule",
            "start",
            "dev",
            "0 8 * * *",
            "--timezone",
            "Mars/Olympus",
        ])
        .fails_with(1, &["unknown time zone", "Mars/Olympus"]);
    let usage = platform.run(&["schedule", "start", "dev"]);
    assert_eq!(usage.code, Some(2), "{usage}");
    platform
        .run(&[
            "templates",
            "edit",
            "minimal",
            "--allow-user-autostart",
            "false",
        ])
        .ok();
    platform
        .run(&["schedule", "start", "dev", "0 8 * * *"])
        .fails_with(1, &["does not allow", "autostart"]);
    // Another member's workspace is not theirs to schedule.
    platform
        .run_as(&member, &["schedule", "stop", "alice/dev", "1h"], None)
        .fails_with(1, &["may not"]);

    // ---- extend: only a deadline there is, never past the max ----
    platform
        .run(&["schedule", "extend", "dev", "1h"])
        .fails_with(1, &["no autostop deadline"]);
    let now = now_ms();
    sqlite_execute(
        &platform,
        &format!(
            "UPDATE workspaces SET deadline = {}, max_deadline = {} WHERE name = 'dev'",
            now + 600_000,
            now + 1_800_000
        ),
    );
    platform
        .run(&["schedule", "extend", "dev", "1h"])
        .fails_with(1, &["max ttl"]);
    let extended = platform
        .run(&["schedule", "extend", "dev", "20m", "-o", "json"])
        .ok()
        .json();
    let deadline = extended["deadline"].as_i64().unwrap();
    assert!(deadline >= now + 1_200_000, "{extended}");
    assert!(deadline <= now + 1_800_000, "{extended}");

    // ---- dormancy ----
    platform
        .run(&["workspaces", "dormant", "dev", "--off"])
        .fails_with(1, &["not dormant"]);
    sqlite_execute(
        &platform,
        "UPDATE workspaces SET dormant_at = 1, deleting_at = 2 WHERE name = 'dev'",
    );
    platform
        .run(&["workspaces", "dormant", "dev", "--off"])
        .ok();
    let schedule = platform
        .run(&["schedule", "show", "dev", "-o", "json"])
        .ok()
        .json();
    assert_eq!(schedule["dormant_at"], serde_json::Value::Null);
    assert_eq!(schedule["deleting_at"], serde_json::Value::Null);
    assert!(schedule["last_used_at"].as_i64().is_some(), "{schedule}");

    // ---- the agent's activity report ----
    let token = "schedule-settings-agent-token";
    let hash = hex::encode(Sha256::digest(token.as_bytes()));
    sqlite_execute(
        &platform,
        &format!(
            "INSERT INTO agents (id, workspace_id, build_id, name, token_hash, created_at) \
             SELECT 'agent-1', w.id, b.id, 'main', '{hash}', 0 \
             FROM workspaces w JOIN builds b ON b.workspace_id = w.id WHERE w.name = 'dev'"
        ),
    );
    let reported = agent_activity(&platform, token);
    assert_eq!(reported.code, Some(0), "{reported}");
    let refused = agent_activity(&platform, "not-a-token");
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains("unknown agent token"), "{refused}");

    // Every change was audited.
    let audit = platform.run(&["audit", "-o", "json"]).ok().json();
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["action"].as_str())
        .collect();
    for action in [
        "template.policy",
        "workspace.schedule",
        "workspace.extend",
        "workspace.wake",
    ] {
        assert!(actions.contains(&action), "{action} not in {actions:?}");
    }
}
