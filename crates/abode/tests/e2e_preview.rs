//! Fleet previews through the real CLI, server, Terraform and provider: a
//! version that replaces the protected volume only for some parameter values
//! is planned against every workspace of the template with its own state,
//! parameters and transition; the report names exactly those workspaces
//! (with the attribute and the lint rule behind it), nothing is applied, a
//! person's build started during a preview is not queued behind it, and
//! activation asks before going on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use util::{fixture, require_terraform, Platform};

const STABLE: &str = r#"name = "home-${data.abode_workspace.me.id}""#;
/// Large workspaces' volumes get a new name: replaced, with their files.
const BY_TIER: &str = r#"name = data.abode_parameter.tier.value == "large" ? "large-${data.abode_workspace.me.id}" : "home-${data.abode_workspace.me.id}""#;
/// The tier may no longer be "medium": a workspace that has it cannot plan.
const VALIDATED: (&str, &str) = (
    "  mutable = true\n",
    "  mutable = true\n  validation {\n    regex = \"^(small|large)$\"\n    error = \"tier is small or large\"\n  }\n",
);

/// Version 2 of the fleet's template, in a folder of its own.
fn second_version(platform: &Platform) -> PathBuf {
    let main = fs::read_to_string(fixture("preview-fleet").join("main.tf")).unwrap();
    assert!(main.contains(STABLE) && main.contains(VALIDATED.0));
    let dir = platform.root().join("preview-fleet-v2");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("main.tf"),
        main.replace(STABLE, BY_TIER)
            .replace(VALIDATED.0, VALIDATED.1),
    )
    .unwrap();
    dir
}

/// Every workspace's stored state and latest build number, as the API gives them.
fn snapshot(platform: &Platform, workspaces: &[&str]) -> BTreeMap<String, (Vec<u8>, u64)> {
    let client = platform.client_for(&platform.config_dir());
    workspaces
        .iter()
        .map(|workspace| {
            let state = client.workspace_state(workspace).unwrap();
            let build = platform.show(workspace)["latest_build"]["number"]
                .as_u64()
                .unwrap();
            (workspace.to_string(), (state, build))
        })
        .collect()
}

/// The decision (or status) of each workspace in a preview's JSON report.
fn decisions(report: &serde_json::Value) -> BTreeMap<String, String> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| {
            let decision = result["decision"]
                .as_str()
                .unwrap_or_else(|| result["status"].as_str().unwrap());
            (
                result["workspace"].as_str().unwrap().to_string(),
                decision.to_string(),
            )
        })
        .collect()
}

#[test]
fn a_preview_names_exactly_the_workspaces_a_version_would_hold_and_applies_nothing() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let v1 = fixture("preview-fleet");
    platform
        .run(&["templates", "push", "fleet", "-d", v1.to_str().unwrap()])
        .ok();
    for (name, tier) in [
        ("small-run", "small"),
        ("large-run", "large"),
        ("large-off", "large"),
        ("medium-run", "medium"),
    ] {
        platform
            .run(&["create", name, "-t", "fleet", "-p", &format!("tier={tier}")])
            .ok();
    }
    platform.run(&["stop", "large-off"]).ok();
    let v2 = second_version(&platform);
    let pushed = platform
        .run(&["templates", "push", "fleet", "-d", v2.to_str().unwrap()])
        .ok();
    assert!(pushed.stdout.contains("version 2 (not active"), "{pushed}");
    let all = ["small-run", "large-run", "large-off", "medium-run"];
    let before = snapshot(&platform, &all);

    // Exit 3: some would be held (none blocked).
    let preview = platform.run(&["templates", "versions", "preview", "fleet", "2"]);
    assert_eq!(preview.code, Some(3), "{preview}");
    assert!(
        preview
            .stdout
            .contains("4 workspaces: 2 would be held, 0 blocked, 1 allowed, 1 failed to plan"),
        "{preview}"
    );
    // Each held workspace with its protected change, the attribute that
    // forces it and the lint rule behind it; the failed one with its error.
    assert!(
        preview.stdout.contains("-/+ abode_volume.home"),
        "{preview}"
    );
    assert!(preview.stdout.contains("name: "), "{preview}");
    assert!(
        preview
            .stdout
            .contains("persistent-identity-mutable (name)"),
        "{preview}"
    );
    assert!(
        preview.stdout.contains("tier is small or large"),
        "{preview}"
    );

    let shown = platform
        .run(&["templates", "versions", "show", "fleet", "2", "-o", "json"])
        .ok()
        .json();
    assert_eq!(shown["preview"]["held"], 2, "{shown:#}");
    assert_eq!(shown["preview"]["done"], true);
    let report = platform.client_for(&platform.config_dir());
    let report = report.latest_preview("fleet", 2).unwrap().unwrap();
    let report = serde_json::to_value(&report).unwrap();
    assert_eq!(
        decisions(&report),
        BTreeMap::from([
            ("alice/large-off".to_string(), "confirm".to_string()),
            ("alice/large-run".to_string(), "confirm".to_string()),
            ("alice/medium-run".to_string(), "failed".to_string()),
            ("alice/small-run".to_string(), "allow".to_string()),
        ])
    );
    let transitions: BTreeMap<&str, &str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["workspace"].as_str().unwrap(),
                r["transition"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(transitions["alice/large-off"], "stop");
    assert_eq!(transitions["alice/large-run"], "start");
    let held = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workspace"] == "alice/large-run")
        .unwrap();
    let change = &held["report"]["protected_changes"][0];
    assert_eq!(change["address"], "abode_volume.home");
    assert_eq!(change["replace_paths"][0]["path"], "name");

    // Nothing was applied: every state byte for byte, no new build.
    assert_eq!(snapshot(&platform, &all), before);

    // A person's build during a preview is not queued behind its plans: it
    // starts before the preview ends.
    let again = platform
        .run(&[
            "templates",
            "versions",
            "preview",
            "fleet",
            "2",
            "--no-wait",
            "-o",
            "json",
        ])
        .ok()
        .json();
    platform.run(&["stop", "small-run"]).ok();
    let stop = platform.show("small-run")["latest_build"].clone();
    assert_eq!(stop["status"], "succeeded", "{stop:#}");
    let finished = loop {
        let shown = platform
            .run(&["templates", "versions", "show", "fleet", "2", "-o", "json"])
            .ok()
            .json();
        assert_eq!(shown["preview"]["id"], again["id"]);
        if shown["preview"]["done"] == true {
            break shown["preview"]["finished_at"]
                .as_str()
                .unwrap()
                .to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let stop_started = stop["started_at"].as_str().unwrap();
    assert!(
        stop_started < finished.as_str(),
        "the stop started at {stop_started}, after the preview ended at {finished}"
    );

    // One named workspace, whatever version it is on.
    let one = platform.run(&[
        "templates",
        "versions",
        "preview",
        "fleet",
        "2",
        "--workspace",
        "large-run",
    ]);
    assert_eq!(one.code, Some(3), "{one}");
    assert!(one.stdout.contains("1 workspace: 1 would be held"), "{one}");

    // Activation asks: refused off a terminal without --yes, and on one
    // without a yes; with --yes it goes on, and the audit log says so.
    let refused = platform.run(&["templates", "versions", "activate", "fleet", "2"]);
    assert_eq!(refused.code, Some(3), "{refused}");
    // The latest preview of the whole fleet decides, not the one of
    // large-run alone; and a workspace that could not be planned counts.
    assert!(
        refused
            .stderr
            .contains("would hold 2 and block 0 of 4 workspaces, and could not plan 1"),
        "{refused}"
    );
    let declined =
        platform.run_on_terminal(&["templates", "versions", "activate", "fleet", "2"], "no\n");
    assert_ne!(declined.code, Some(0), "{declined}");
    let versions = platform
        .run(&["templates", "versions", "list", "fleet", "-o", "json"])
        .ok()
        .json();
    assert_eq!(versions[1]["active"], false, "{versions:#}");
    platform
        .run(&["templates", "versions", "activate", "fleet", "2", "--yes"])
        .ok();
    let audit = platform
        .run(&["audit", "--action", "template.activate", "-o", "json"])
        .ok();
    assert!(audit.stdout.contains("acknowledged=true"), "{audit}");

    // A parameter change is a build like any other: on version 2 a small
    // workspace made large would get a new, empty volume, and is held.
    let held = platform.run(&["update", "small-run", "-p", "tier=large"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home"), "{held}");
    platform
        .run(&["update", "small-run", "-p", "tier=medium"])
        .fails_with(1, &["tier is small or large"]);
}

/// `templates push --activate` is held to the rule of `versions activate`:
/// the same folder pushed again (a new version, never previewed itself)
/// once made a previewed version's files active without the
/// acknowledgement its preview needed. The preview weighed is that of the
/// files, whichever version it was made for.
#[test]
fn pushing_previewed_files_again_does_not_shed_the_preview() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let v1 = fixture("preview-fleet");
    platform
        .run(&["templates", "push", "fleet", "-d", v1.to_str().unwrap()])
        .ok();
    platform
        .run(&["create", "large-run", "-t", "fleet", "-p", "tier=large"])
        .ok();
    let v2 = second_version(&platform);
    let v2 = v2.to_str().unwrap();
    platform.run(&["templates", "push", "fleet", "-d", v2]).ok();
    let preview = platform.run(&["templates", "versions", "preview", "fleet", "2"]);
    assert_eq!(preview.code, Some(3), "{preview}");

    let versions = |platform: &Platform| {
        platform
            .run(&["templates", "versions", "list", "fleet", "-o", "json"])
            .ok()
            .json()
    };
    // The same files, activated by the push: refused, nothing stored.
    platform
        .run(&["templates", "push", "fleet", "-d", v2, "--activate"])
        .fails_with(1, &["not pushed", "would hold 1"]);
    let listed = versions(&platform);
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed:#}");
    assert_eq!(listed[0]["active"], true, "{listed:#}");

    // Pushed again without --activate, the copy's activation asks as the
    // original's does, with the original's preview.
    platform.run(&["templates", "push", "fleet", "-d", v2]).ok();
    let refused = platform.run(&["templates", "versions", "activate", "fleet", "3"]);
    assert_eq!(refused.code, Some(3), "{refused}");
    assert!(refused.stderr.contains("of version 2"), "{refused}");
    let listed = versions(&platform);
    assert_eq!(listed[2]["active"], false, "{listed:#}");
    platform
        .run(&["templates", "versions", "activate", "fleet", "3", "--yes"])
        .ok();
    let listed = versions(&platform);
    assert_eq!(listed[2]["active"], true, "{listed:#}");

    // Files never previewed are activated by a push as before.
    let v3 = platform.root().join("preview-fleet-v3");
    fs::create_dir_all(&v3).unwrap();
    let main = fs::read_to_string(fixture("preview-fleet").join("main.tf")).unwrap();
    fs::write(v3.join("main.tf"), format!("{main}\n# another version\n")).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "fleet",
            "-d",
            v3.to_str().unwrap(),
            "--activate",
        ])
        .ok();
}
