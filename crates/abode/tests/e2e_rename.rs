//! Rename and restart through the guard (issue 33), with the real CLI,
//! server, Terraform and provider: a rename is planned under the new name
//! first, so a template that puts the name in its volume's identity has the
//! rename held until a person confirms that exact plan (and a cancel leaves
//! everything as it was), while a template that does not renames at once
//! and keeps the volume's files; a restart is a stop and a start, one
//! request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::Path;

use util::{
    example_with, only_subdir, printed_digest, push_template as push, require_terraform, Platform,
    Run,
};

/// The example's volume named after the workspace's name instead of its id:
/// a rename replaces it.
const NAMED_AFTER_THE_WORKSPACE: (&str, &str) = (
    "name = \"home-${data.abode_workspace.me.id}\"",
    "name = \"home-${data.abode_workspace.me.name}\"",
);

/// `abode ARGS` with `home` as HOME, so that ~/.ssh/config is the test's.
fn run_at_home(platform: &Platform, home: &Path, args: &[&str]) -> Run {
    let output = platform
        .cmd(args)
        .env("HOME", home)
        .output()
        .expect("abode runs");
    Run::from_output(format!("abode {}", args.join(" ")), output)
}

fn workspace_names(platform: &Platform) -> Vec<String> {
    let listed = platform.run(&["list", "--output", "json"]).ok().json();
    let mut names: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|workspace| workspace["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn a_rename_that_would_replace_the_volume_waits_for_a_confirmed_plan() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push(
        &platform,
        "named",
        1,
        &example_with(&[util::NAME_NOT_KEPT, NAMED_AFTER_THE_WORKSPACE]),
    );
    platform.run(&["create", "dev", "--template", "named"]).ok();
    let volume = only_subdir(&platform.volumes_dir());
    assert_eq!(volume.file_name().unwrap(), "home-dev");
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();

    // Planned under the new name, the volume would be replaced: held, with
    // the attribute that forces it, and nothing renamed or applied.
    let held = platform.run(&["rename", "dev", "work"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home"), "{held}");
    assert!(held.stderr.contains("name"), "{held}");
    assert!(held.stderr.contains("home-work"), "{held}");
    let number = platform.show("dev")["latest_build"]["number"]
        .as_u64()
        .unwrap()
        .to_string();
    assert_eq!(workspace_names(&platform), vec!["dev"]);
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );

    // Canceled: everything as it was.
    platform.run(&["builds", "cancel", "dev", &number]).ok();
    assert_eq!(workspace_names(&platform), vec!["dev"]);
    assert_eq!(
        util::names_in(&platform.volumes_dir()),
        vec!["home-dev".to_string()]
    );
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );

    // Asked again and confirmed: renamed, and the volume replaced as the
    // confirmed plan said.
    let held = platform.run(&["rename", "dev", "work"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);
    let number = platform.show("dev")["latest_build"]["number"]
        .as_u64()
        .unwrap()
        .to_string();
    let confirmed = platform
        .run(&["builds", "confirm", "dev", &number, "--digest", &digest])
        .ok();
    assert!(
        confirmed.stderr.contains("is now named work"),
        "{confirmed}"
    );
    assert_eq!(workspace_names(&platform), vec!["work"]);
    platform.run(&["show", "dev"]).fails_with(1, &["not found"]);
    let shown = platform.show("work");
    assert_eq!(shown["status"], "running", "{shown}");
    assert_eq!(
        util::names_in(&platform.volumes_dir()),
        vec!["home-work".to_string()]
    );
    assert!(!platform.volumes_dir().join("home-work/notes.txt").exists());

    // The audit trail names both names, and the workspace's builds follow it.
    let audit = platform
        .run(&["audit", "--action", "workspace.rename", "--output", "json"])
        .ok()
        .json();
    let text = audit.to_string();
    assert!(text.contains("from=dev to=work"), "{audit}");
    let builds = platform
        .run(&["builds", "list", "work", "--output", "json"])
        .ok()
        .json();
    assert_eq!(builds.as_array().unwrap().len(), 3, "{builds}");
    assert_eq!(builds[0]["reason"], "rename", "{builds}");
    assert_eq!(builds[0]["rename_to"], "work", "{builds}");
}

#[test]
fn a_rename_that_keeps_the_volume_is_immediate_and_a_restart_is_one_request() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push(&platform, "local", 1, &example_with(&[]));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform
        .run(&["create", "other", "--template", "local"])
        .ok();
    let home = platform.root().join("home");
    fs::create_dir_all(&home).unwrap();
    run_at_home(&platform, &home, &["config-ssh"]).ok();
    let volumes = util::names_in(&platform.volumes_dir());
    // The example names its volume after the workspace's id.
    let dev_id = platform.show("dev")["id"].as_str().unwrap().to_string();
    let dev_volume = platform.volumes_dir().join(format!("home-{dev_id}"));
    fs::write(dev_volume.join("notes.txt"), "keep me\n").unwrap();

    // A name the owner already has is refused in one line.
    platform
        .run(&["rename", "dev", "other"])
        .fails_with(1, &["already have a workspace named \"other\""]);

    // Nothing in the plan changes with the name: renamed at once.
    let renamed = run_at_home(&platform, &home, &["rename", "dev", "work"]).ok();
    assert!(renamed.stderr.contains("is now named work"), "{renamed}");
    assert_eq!(workspace_names(&platform), vec!["other", "work"]);
    assert_eq!(
        fs::read_to_string(dev_volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(util::names_in(&platform.volumes_dir()), volumes);
    let ssh_config = fs::read_to_string(home.join(".ssh/config")).unwrap();
    assert!(ssh_config.contains("Host abode.work"), "{ssh_config}");
    assert!(!ssh_config.contains("Host abode.dev"), "{ssh_config}");
    platform.wait_for_agent("work", "ready", std::time::Duration::from_secs(60));
    let listed = platform
        .run(&["ssh", "work", "--", "cat", "notes.txt"])
        .ok();
    assert_eq!(listed.stdout, "keep me\n", "{listed}");

    // A restart: its stop, then its start, both followed, one request.
    let restarted = platform.run(&["restart", "work"]).ok();
    assert!(restarted.stderr.contains("(stop)"), "{restarted}");
    assert!(restarted.stderr.contains("(start)"), "{restarted}");
    let builds = platform
        .run(&["builds", "list", "work", "--output", "json"])
        .ok()
        .json();
    let latest: Vec<(String, String, String)> = builds.as_array().unwrap()[..2]
        .iter()
        .map(|build| {
            (
                build["transition"].as_str().unwrap().to_string(),
                build["status"].as_str().unwrap().to_string(),
                build["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        latest,
        vec![
            ("start".into(), "succeeded".into(), "restart".into()),
            ("stop".into(), "succeeded".into(), "restart".into()),
        ]
    );
    assert_eq!(platform.show("work")["status"], "running");
    assert_eq!(
        fs::read_to_string(dev_volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );

    // A stopped workspace is renamed by a stop under the new name.
    platform.run(&["stop", "work"]).ok();
    platform.run(&["rename", "work", "idle"]).ok();
    let shown = platform.show("idle");
    assert_eq!(shown["status"], "stopped", "{shown}");
    assert_eq!(
        fs::read_to_string(dev_volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    // A restart of a stopped workspace is refused: there is nothing to stop.
    platform
        .run(&["restart", "idle"])
        .fails_with(1, &["already stopped"]);

    // The dashboard's rename form asks the same: a bad name is refused on
    // the page, a good one opens the rename's build and takes effect.
    let page = "/workspaces/alice/idle";
    let action = "/workspaces/alice/idle/rename";
    let (status, html) = platform.dashboard_submit(
        "alice",
        "correct horse battery",
        page,
        action,
        &[("new_name", "Not A Name")],
    );
    assert!(
        status == 400 && html.contains("Not renamed:") && html.contains("workspace name"),
        "{status} {html}"
    );
    let (status, _) = platform.dashboard_submit(
        "alice",
        "correct horse battery",
        page,
        action,
        &[("new_name", "rested")],
    );
    assert_eq!(status, 303);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !workspace_names(&platform).contains(&"rested".to_string()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the dashboard's rename never took effect: {:?}",
            workspace_names(&platform)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        fs::read_to_string(dev_volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
}
