//! Unsaved work holds a delete (issue 47), end to end: the real binary, the
//! example template's agent scanning its home with real `git`, repositories
//! made in the workspace through `abode ssh`. A repository with an
//! uncommitted change holds `abode delete` (exit 6), also once the workspace
//! is stopped (its last report, with its age); a stale digest is refused;
//! `--discard-unsaved` deletes. A pushed, clean repository (its remote a
//! bare repository in the home) holds nothing; its report is the fresh one
//! `abode show --scan-unsaved` asks the agent for. The scheduler's automatic
//! delete of a dormant workspace holds and notifies instead of deleting.
//!
//! Each negative is observed: the report that shows the work (or shows the
//! clean repository looked at) is seen before the delete, and the held
//! delete's audit event and notification are seen before asserting that no
//! delete build came.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{repo_root, require_terraform, sqlite_execute, Platform};

/// The agents scan their home every second.
const FAST_SCANS: [&str; 2] = ["--unsaved-scan-interval", "1"];

fn example(platform: &Platform) {
    let dir = repo_root().join("examples/local-workspace");
    platform
        .run(&["templates", "push", "example", "-d", dir.to_str().unwrap()])
        .ok();
}

/// Polls `abode show` until `done` holds.
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

/// Runs a shell script in the workspace (its home is the current directory).
fn in_workspace(platform: &Platform, script: &str) {
    platform.run(&["ssh", "dev", "--", "sh", "-c", script]).ok();
}

/// Git with an identity, in the workspace's scripts.
const GIT: &str = "git -c user.name=dev -c user.email=dev@example.com";

/// A repository `src/my app` with a committed file changed since.
fn make_uncommitted_work(platform: &Platform) {
    in_workspace(
        platform,
        &format!(
            "set -e; mkdir -p 'src/my app'; cd 'src/my app'; git init -q; \
             echo one > notes; git add notes; {GIT} commit -q -m one; echo two > notes"
        ),
    );
}

fn listed(shown: &Value) -> Vec<(String, Vec<String>)> {
    shown["unsaved"]["repositories"]
        .as_array()
        .map(|repositories| {
            repositories
                .iter()
                .map(|repository| {
                    (
                        repository["path"].as_str().unwrap_or_default().to_string(),
                        repository["kinds"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|kind| kind.as_str().unwrap().to_string())
                            .collect(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

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

fn started(platform: &Platform) -> Value {
    platform.login_owner();
    example(platform);
    platform
        .run(&["create", "dev", "--template", "example"])
        .ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(120))
}

#[test]
fn an_uncommitted_change_holds_a_delete_until_it_is_discarded() {
    require_terraform();
    let platform = Platform::start_with(&FAST_SCANS);
    started(&platform);
    make_uncommitted_work(&platform);
    let shown = wait_for(&platform, "dev", "a report of the change", |shown| {
        // Its one commit is on no remote either.
        listed(shown)
            == vec![(
                "src/my app".to_string(),
                vec!["uncommitted".to_string(), "unpushed".to_string()],
            )]
    });
    let digest = shown["unsaved"]["digest"].as_str().unwrap().to_string();
    let text = platform.run(&["show", "dev"]).ok();
    assert!(
        text.stdout.contains("~/src/my app: uncommitted, unpushed")
            && text.stdout.contains(&digest),
        "{text}"
    );

    // Stopped, the workspace is judged by its last report, which says how
    // old it is.
    platform.run(&["stop", "dev"]).ok();
    let held = platform.run(&["delete", "dev"]).fails_with(
        6,
        &["unsaved work", "src/my app", "uncommitted", "ago", &digest],
    );
    assert!(
        held.stderr.contains("~/src/my app: uncommitted, unpushed"),
        "{held}"
    );
    let events = audit_events(&platform, "workspace.delete_held_unsaved");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["outcome"], "held");
    let shown = platform.show("dev");
    assert_eq!(shown["latest_build"]["transition"], "stop", "{shown:#}");
    assert_eq!(shown["status"], "stopped");

    // A digest of another report is refused.
    let stale = "0".repeat(64);
    platform
        .run(&["delete", "dev", "--confirm-unsaved", &stale])
        .fails_with(6, &["changed since"]);
    assert_eq!(platform.show("dev")["status"], "stopped");

    platform.run(&["delete", "dev", "--discard-unsaved"]).ok();
    assert_eq!(platform.show("dev")["status"], "deleted");
    let discarded = audit_events(&platform, "workspace.unsaved_discard");
    assert_eq!(discarded.len(), 1, "{discarded:#?}");
    assert!(
        discarded[0]["details"].as_str().unwrap().contains(&digest),
        "{discarded:#?}"
    );
}

#[test]
fn the_report_s_digest_confirms_a_delete() {
    require_terraform();
    let platform = Platform::start_with(&FAST_SCANS);
    started(&platform);
    in_workspace(
        &platform,
        "set -e; mkdir scratch; cd scratch; git init -q; echo x > 'new file'",
    );
    let shown = wait_for(&platform, "dev", "a report of the new file", |shown| {
        listed(shown) == vec![("scratch".to_string(), vec!["untracked".to_string()])]
    });
    let digest = shown["unsaved"]["digest"].as_str().unwrap().to_string();
    platform
        .run(&["delete", "dev", "--confirm-unsaved", &digest])
        .ok();
    assert_eq!(platform.show("dev")["status"], "deleted");
    assert_eq!(
        audit_events(&platform, "workspace.unsaved_confirm").len(),
        1
    );
}

#[test]
fn a_pushed_clean_repository_does_not_hold_a_delete() {
    require_terraform();
    // Scans every 5 minutes (the default): the report that sees the
    // repository is the one `--scan-unsaved` asks for.
    let platform = Platform::start();
    started(&platform);
    in_workspace(
        &platform,
        &format!(
            "set -e; git init -q --bare remote.git; git init -q work; cd work; \
             echo x > f; printf 'build/\\n' > .gitignore; git add f .gitignore; \
             {GIT} commit -q -m one; git remote add origin ../remote.git; \
             git push -q origin HEAD:refs/heads/main; git fetch -q origin; \
             mkdir build; echo ignored > build/out"
        ),
    );
    // Seen and found clean: the fresh report counts it and lists nothing.
    let shown = platform
        .run(&["show", "dev", "--scan-unsaved", "--output", "json"])
        .ok();
    assert!(!shown.stderr.contains("no fresh report"), "{shown}");
    let shown = shown.json();
    assert_eq!(shown["unsaved"]["repositories_scanned"], 1, "{shown:#}");
    assert_eq!(listed(&shown), vec![], "{shown:#}");
    platform.run(&["delete", "dev"]).ok();
    assert_eq!(platform.show("dev")["status"], "deleted");
    assert!(audit_events(&platform, "workspace.delete_held_unsaved").is_empty());
}

#[test]
fn an_automatic_delete_of_a_dormant_workspace_holds_and_notifies() {
    require_terraform();
    let platform = Platform::start_with_metrics(
        None,
        &[
            "--autobuild-poll-interval",
            "1",
            FAST_SCANS[0],
            FAST_SCANS[1],
        ],
    );
    let shown = started(&platform);
    let id = shown["id"].as_str().unwrap().to_string();
    make_uncommitted_work(&platform);
    wait_for(&platform, "dev", "a report of the change", |shown| {
        !listed(shown).is_empty()
    });
    // Unused for a day makes it dormant; dormant for a day deletes it.
    sqlite_execute(
        &platform,
        "UPDATE templates SET dormancy_threshold_ms = 86400000, \
         dormancy_auto_deletion_ms = 86400000 WHERE name = 'example'",
    );
    for _ in 0..2 {
        platform.advance_clock(Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
    }
    wait_for(&platform, "dev", "stopped by dormancy", |shown| {
        shown["status"] == "stopped" && shown["latest_build"]["reason"] == "dormancy"
    });
    for _ in 0..3 {
        platform.advance_clock(Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
        platform.wait_for_passes("scheduler", 2);
    }
    let notified = || -> Vec<Value> {
        platform
            .run(&["notifications", "list", "--output", "json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|message| message["kind"] == "delete_held_unsaved")
            .cloned()
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while notified().is_empty() {
        assert!(
            Instant::now() < deadline,
            "delete_held_unsaved never sent\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let events = audit_events(&platform, "workspace.delete_held_unsaved");
    assert_eq!(events.len(), 1, "audited once per report: {events:#?}");
    assert_eq!(events[0]["actor"], "scheduler", "{events:#?}");
    // Passes after the hold still hold: no delete build, the home stays.
    platform.wait_for_passes("scheduler", 3);
    let shown = platform.show("dev");
    assert_eq!(shown["latest_build"]["reason"], "dormancy", "{shown:#}");
    assert_eq!(shown["status"], "stopped", "{shown:#}");
    assert!(platform.volumes_dir().join(format!("home-{id}")).is_dir());
    assert_eq!(
        audit_events(&platform, "workspace.delete_held_unsaved").len(),
        1
    );
    assert_eq!(notified().len(), 1);
}
