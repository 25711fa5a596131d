//! The whole life of a workspace through the real CLI, server, Terraform and
//! provider: the example template's volume survives stop and start, its agent
//! reports ready, and delete removes the volume and every process.
//!
//! One test walks the steps in order: each one depends on the state the
//! previous one left, and Terraform is too slow to rebuild it per step.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::time::{Duration, Instant};

use util::{assert_no_processes_left, only_subdir, repo_root, require_terraform, Platform};

const AGENT_WAIT: Duration = Duration::from_secs(60);

#[test]
fn workspace_lifecycle_keeps_the_volume_and_cleans_up_on_delete() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let example = repo_root().join("examples/local-workspace");
    let example = example.to_str().unwrap();

    // Push: version 1, active, validated.
    let pushed = platform
        .run(&[
            "templates",
            "push",
            "local",
            "--directory",
            example,
            "--message",
            "first",
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(pushed["version"]["number"], 1);
    assert_eq!(pushed["version"]["active"], true);
    assert_eq!(pushed["version"]["validation"]["ok"], true);
    let templates = platform
        .run(&["templates", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(templates[0]["name"], "local");
    assert_eq!(templates[0]["active_version"], 1);
    let versions = platform
        .run(&["templates", "versions", "list", "local"])
        .ok();
    assert!(versions.stdout.starts_with("VERSION"), "{versions}");
    assert!(versions.stdout.contains("first"), "{versions}");

    // Create: the build's log streams on stdout, the outcome on stderr.
    let created = platform.run(&["create", "dev", "--template", "local"]).ok();
    assert!(created.stdout.contains("[apply]"), "{created}");
    assert!(created.stderr.contains("succeeded"), "{created}");
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();
    let shown = platform.wait_for_agent("dev", "ready", AGENT_WAIT);
    assert_eq!(shown["status"], "running");
    assert_eq!(shown["healthy"], true);
    assert!(!platform.spawned_processes().is_empty(), "no agent process");
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(text.contains("Status:      running\n"), "{text}");
    assert!(text.contains("Agent:       ready"), "{text}");
    assert!(text.contains("Healthy:     yes\n"), "{text}");

    // Stop: the process goes, the volume and its file stay.
    platform.run(&["stop", "dev"]).ok();
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    let shown = platform.show("dev");
    assert_eq!(shown["status"], "stopped");
    assert_eq!(shown["agent"]["status"], "none");
    assert_no_processes_left(&platform, "after stop");
    platform.run(&["stop", "dev"]).fails_with(1, &["dev"]);

    // Start: the same volume, the file still there, the agent back.
    platform.run(&["start", "dev"]).ok();
    assert_eq!(only_subdir(&platform.volumes_dir()), volume);
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    platform.wait_for_agent("dev", "ready", AGENT_WAIT);

    // Lists for people and scripts.
    let listed = platform.run(&["list", "-o", "json"]).ok().json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed:#}");
    assert_eq!(listed[0]["name"], "dev");
    assert_eq!(listed[0]["status"], "running");
    let table = platform.run(&["list"]).ok().stdout;
    assert!(table.starts_with("WORKSPACE"), "{table}");
    assert!(table.contains("local@1"), "{table}");
    let builds = platform
        .run(&["builds", "list", "dev", "-o", "json"])
        .ok()
        .json();
    let summary: Vec<(u64, String, String)> = builds
        .as_array()
        .unwrap()
        .iter()
        .map(|build| {
            (
                build["number"].as_u64().unwrap(),
                build["transition"].as_str().unwrap().to_string(),
                build["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(u64, String, String)> = [(3, "start"), (2, "stop"), (1, "start")]
        .into_iter()
        .map(|(n, t)| (n, t.to_string(), "succeeded".to_string()))
        .collect();
    assert_eq!(summary, expected);
    let log = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(log.stdout.contains("[apply]"), "{log}");

    // Delete: volume directory and processes gone.
    platform.run(&["delete", "dev"]).ok();
    assert!(
        !volume.exists(),
        "volume {} survived delete",
        volume.display()
    );
    assert_no_processes_left(&platform, "after delete");
    platform.run(&["start", "dev"]).fails_with(1, &[]);
}

#[test]
fn streamed_log_is_the_whole_log_and_owners_see_every_workspace() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let minimal = util::fixture("minimal");
    platform
        .run(&[
            "templates",
            "push",
            "minimal",
            "-d",
            minimal.to_str().unwrap(),
        ])
        .ok();
    let bob = platform.login_new_user("bob", "member");
    let created = platform
        .run_as(&bob, &["create", "ws", "--template", "minimal"], None)
        .ok();
    // What `create` streamed is exactly the build's stored log.
    let stored = platform
        .run_as(&bob, &["builds", "logs", "ws", "1"], None)
        .ok();
    assert_eq!(created.stdout, stored.stdout);
    let followed = platform
        .run_as(&bob, &["builds", "logs", "ws", "--follow"], None)
        .ok();
    assert_eq!(created.stdout, followed.stdout);

    // The owner sees bob's workspace with --all and by owner/name; bob sees
    // only his own, and not alice's by name.
    let everyone = platform.run(&["list", "--all"]).ok().stdout;
    assert!(everyone.contains("bob/ws"), "{everyone}");
    let own = platform.run(&["list", "-o", "json"]).ok().json();
    assert_eq!(own, serde_json::json!([]));
    let shown = platform.show("bob/ws");
    assert_eq!(shown["owner"], "bob");
    assert_eq!(shown["status"], "running");
    assert_eq!(shown["agent"]["status"], "none");
    assert_eq!(shown["healthy"], true);
    platform
        .run(&["create", "mine", "--template", "minimal"])
        .ok();
    platform
        .run_as(&bob, &["show", "alice/mine"], None)
        .fails_with(1, &[]);
    platform.run(&["stop", "bob/ws"]).ok();
    platform.run_as(&bob, &["delete", "ws"], None).ok();
    platform.run(&["delete", "mine"]).ok();
}

#[test]
fn canceling_a_running_build_ends_the_following_command_with_exit_1() {
    require_terraform();
    let mut flags = util::FAST_AGENT_FLAGS.to_vec();
    flags.extend(["--cancel-grace", "2"]);
    let platform = Platform::start_with(&flags);
    platform.login_owner();
    let slow = util::fixture("slow");
    platform
        .run(&["templates", "push", "slow", "-d", slow.to_str().unwrap()])
        .ok();
    let create = platform
        .cmd(&["create", "ws", "--template", "slow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = platform.run(&["builds", "logs", "ws", "1"]);
        if log.code == Some(0) && log.stdout.contains("slow: Provisioning with 'local-exec'") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slow apply never started:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let canceled = platform.run(&["builds", "cancel", "ws", "1"]).ok();
    assert!(
        canceled
            .stdout
            .starts_with("Build #1 (start) of workspace ws is"),
        "{canceled}"
    );

    let output = create.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: Build #1 (start) of workspace ws canceled"),
        "{stderr}"
    );
    let build = platform.show("ws")["latest_build"].clone();
    assert_eq!(build["status"], "canceled", "{build:#}");
    platform
        .run(&["builds", "cancel", "ws", "1"])
        .fails_with(1, &["not canceled"]);
}
