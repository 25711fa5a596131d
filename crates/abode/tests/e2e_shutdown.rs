//! Stop scripts and disk-full warnings (issue 47, parts 4 and 5), end to
//! end: the real binary, Terraform, and the example template's agent with a
//! `shutdown_script`. A stop waits for the script, which has written its
//! file into the home volume when the stop ends, and the build's log says how
//! it ended with its output; a script that sleeps past a short
//! `shutdown_timeout` is stopped, logged, and the stop goes on; a negative
//! timeout is refused at plan time in one line. A home volume on a real,
//! small tmpfs filled past 90% raises one `disk_full_warning`, not one per
//! heartbeat, and again only a day later (the injected clock moved).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{repo_root, require_terraform, Platform};

/// Heartbeats every second: a request reaches the agent within one.
const FLAGS: [&str; 2] = ["--agent-heartbeat-interval", "1"];

/// The example template with `settings` added to its `abode_agent`, written
/// under the platform's root.
fn template_with(platform: &Platform, name: &str, settings: &str) -> PathBuf {
    let dir = platform.root().join(format!("template-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let example = repo_root().join("examples/local-workspace");
    for entry in std::fs::read_dir(&example).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "tf") {
            let text = std::fs::read_to_string(&path).unwrap();
            let agent = "  dir   = abode_volume.home.path\n";
            let text = if text.contains("resource \"abode_agent\"") {
                assert!(text.contains(agent), "the example's agent changed");
                text.replacen(
                    agent,
                    &format!("  dir   = abode_volume.home.path\n{settings}\n"),
                    1,
                )
            } else {
                text
            };
            std::fs::write(dir.join(path.file_name().unwrap()), text).unwrap();
        }
    }
    dir
}

fn push(platform: &Platform, name: &str, dir: &Path) -> util::Run {
    platform.run(&["templates", "push", name, "-d", dir.to_str().unwrap()])
}

fn started(platform: &Platform, template: &str) -> Value {
    platform
        .run(&["create", "dev", "--template", template])
        .ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(120))
}

fn home(platform: &Platform, shown: &Value) -> PathBuf {
    platform
        .volumes_dir()
        .join(format!("home-{}", shown["id"].as_str().unwrap()))
}

fn build_log(platform: &Platform, number: &str) -> String {
    platform.run(&["builds", "logs", "dev", number]).ok().stdout
}

#[test]
fn a_stop_waits_for_the_shutdown_script_which_has_written_its_file() {
    require_terraform();
    let platform = Platform::start_with(&FLAGS);
    platform.login_owner();
    let dir = template_with(
        &platform,
        "saving",
        r#"  shutdown_script = "echo flushed > \"$HOME/saved-at-stop\"; echo shutdown says hi; exit 3""#,
    );
    push(&platform, "saving", &dir).ok();
    let shown = started(&platform, "saving");
    let home = home(&platform, &shown);
    assert!(!home.join("saved-at-stop").exists());

    platform.run(&["stop", "dev"]).ok();
    // Written before the apply that ended the agent: there when the stop ends.
    assert_eq!(
        std::fs::read_to_string(home.join("saved-at-stop")).unwrap(),
        "flushed\n"
    );
    assert_eq!(platform.show("dev")["status"], "stopped");
    let log = build_log(&platform, "2");
    // A failing script is logged, and does not hold the stop.
    for needle in [
        "asking agent main[0] to run its shutdown script (up to 300 s)",
        "agent main[0]: the shutdown script exited with status 3; the build goes on",
        "main[0] | shutdown says hi",
    ] {
        assert!(log.contains(needle), "{needle:?} not in the log:\n{log}");
    }
    let asked = log.find("asking agent main[0]").unwrap();
    let applied = log.find("[apply]").unwrap_or(usize::MAX);
    assert!(asked < applied, "the script runs before the apply:\n{log}");

    // Started again, a delete asks too (a restart's stop does as this stop).
    platform.run(&["start", "dev"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(120));
    platform.run(&["delete", "dev"]).ok();
    let log = build_log(&platform, "4");
    assert!(
        log.contains("agent main[0]: the shutdown script exited with status 3"),
        "{log}"
    );
}

#[test]
fn a_script_past_its_timeout_is_stopped_and_the_stop_goes_on() {
    require_terraform();
    let platform = Platform::start_with(&FLAGS);
    platform.login_owner();
    let dir = template_with(
        &platform,
        "sleepy",
        "  shutdown_script  = \"echo started; sleep 600; echo late > \\\"$HOME/too-late\\\"\"\n  shutdown_timeout = 2",
    );
    push(&platform, "sleepy", &dir).ok();
    let shown = started(&platform, "sleepy");
    let home = home(&platform, &shown);
    let began = Instant::now();
    platform.run(&["stop", "dev"]).ok();
    let took = began.elapsed();
    assert_eq!(platform.show("dev")["status"], "stopped");
    assert!(
        took < Duration::from_secs(120),
        "the stop waited {took:?} for a script of 2 s"
    );
    let log = build_log(&platform, "2");
    for needle in [
        "(up to 2 s)",
        "agent main[0]: the shutdown script ran past its shutdown_timeout of 2 s and was stopped; the build goes on",
        "main[0] | started",
    ] {
        assert!(log.contains(needle), "{needle:?} not in the log:\n{log}");
    }
    assert!(!home.join("too-late").exists());
}

#[test]
fn a_negative_shutdown_timeout_is_refused_in_one_line() {
    require_terraform();
    let platform = Platform::start_with(&FLAGS);
    platform.login_owner();
    let dir = template_with(
        &platform,
        "negative",
        "  shutdown_script  = \"true\"\n  shutdown_timeout = -1",
    );
    let needle = "abode_agent shutdown_timeout must be 0 or more seconds, not -1";
    let pushed = push(&platform, "negative", &dir);
    let refused = if pushed.code == Some(0) {
        // The import plan has no agent (count 0): the workspace's plan refuses.
        platform
            .run(&["create", "dev", "--template", "negative"])
            .fails_with(1, &[needle])
    } else {
        pushed.fails_with(1, &[needle])
    };
    assert!(refused.stderr.contains(needle), "{refused}");
}

/// Unmounts a tmpfs when dropped (after the platform using it, declared
/// after it).
struct Tmpfs(std::rc::Rc<std::cell::RefCell<Option<PathBuf>>>);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Some(path) = self.0.borrow_mut().take() {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&path)
                .status();
        }
    }
}

fn disk_warnings(platform: &Platform) -> Vec<Value> {
    platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["kind"] == "disk_full_warning")
        .cloned()
        .collect()
}

/// Polls until `done` holds (two minutes at most).
fn wait_until(platform: &Platform, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "never: {what}\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_full_home_volume_raises_one_warning_not_one_per_heartbeat() {
    require_terraform();
    let mounted = Tmpfs(Default::default());
    let cell = mounted.0.clone();
    // The volumes dir is a real 32 MiB filesystem (the tests run as root).
    let platform = Platform::start_prepared(None, &FLAGS, |data_dir| {
        let volumes = data_dir.join("volumes");
        std::fs::create_dir_all(&volumes).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=32m,mode=0755", "tmpfs"])
            .arg(&volumes)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "cannot mount a tmpfs at {} (this test fills a real filesystem: run it as root)",
            volumes.display()
        );
        *cell.borrow_mut() = Some(volumes);
    });
    platform.login_owner();
    let dir = repo_root().join("examples/local-workspace");
    push(&platform, "example", &dir).ok();
    let shown = started(&platform, "example");
    let home = home(&platform, &shown);
    // Reported, and far from full.
    wait_until(&platform, "a report of the home volume", || {
        let shown = platform.show("dev");
        shown["disk"][0]["total_bytes"] == 32 * 1024 * 1024
    });
    assert!(
        platform.show("dev")["disk"][0]["used_percent"]
            .as_u64()
            .unwrap()
            < 90
    );
    assert!(disk_warnings(&platform).is_empty());

    // 30 of 32 MiB: 94%, past 90 and short of 98.
    std::fs::write(home.join("fill"), vec![7u8; 30 * 1024 * 1024]).unwrap();
    wait_until(&platform, "a disk_full_warning", || {
        !disk_warnings(&platform).is_empty()
    });
    let warned = disk_warnings(&platform);
    assert_eq!(warned.len(), 1, "{warned:#?}");
    let payload = &warned[0]["payload"];
    assert_eq!(payload["threshold_percent"], 90, "{warned:#?}");
    assert_eq!(payload["agent"], "main[0]", "{warned:#?}");

    // Five more heartbeats say it again: no new warning.
    let reported = |shown: &Value| {
        shown["disk"][0]["reported_at"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for _ in 0..5 {
        let before = reported(&platform.show("dev"));
        wait_until(&platform, "another heartbeat", || {
            reported(&platform.show("dev")) != before
        });
    }
    assert_eq!(disk_warnings(&platform).len(), 1);
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(
        text.contains("Disk: 94% of 32.0 MiB used (main[0]'s home volume, reported"),
        "{text}"
    );

    // A day later the volume is still full: told once more.
    // (In two steps, each used by the session, which would expire in one.)
    for _ in 0..2 {
        platform.advance_clock(Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
    }
    wait_until(&platform, "the next day's disk_full_warning", || {
        disk_warnings(&platform).len() == 2
    });
    let before = reported(&platform.show("dev"));
    wait_until(&platform, "another heartbeat", || {
        reported(&platform.show("dev")) != before
    });
    assert_eq!(disk_warnings(&platform).len(), 2);
    platform.run(&["delete", "dev"]).ok();
    drop(platform);
    drop(mounted);
}

/// On an external daemon the same: the server asks the agent and writes the
/// log, step by step at the daemon's call, before the daemon applies.
#[test]
fn a_daemon_s_stop_waits_for_the_shutdown_script_too() {
    require_terraform();
    let mut flags = vec!["--provisioners", "0", "--job-lease", "10"];
    flags.extend(FLAGS);
    let platform = Platform::start_with(&flags);
    platform.login_owner();
    let key = util::create_key(&platform, "builders", &[]);
    let daemon = util::Daemon::start(&platform, "d1", &key, &[]);
    let dir = template_with(
        &platform,
        "saving",
        r#"  shutdown_script = "echo flushed > \"$HOME/saved-at-stop\"""#,
    );
    push(&platform, "saving", &dir).ok();
    let shown = started(&platform, "saving");
    let home = daemon
        .data_dir
        .join("volumes")
        .join(format!("home-{}", shown["id"].as_str().unwrap()));
    assert!(home.is_dir(), "{}", daemon.log());
    platform.run(&["stop", "dev"]).ok();
    assert_eq!(
        std::fs::read_to_string(home.join("saved-at-stop")).unwrap(),
        "flushed\n"
    );
    let log = build_log(&platform, "2");
    assert!(
        log.contains("agent main[0]: the shutdown script succeeded"),
        "{log}"
    );
    drop(daemon);
}
