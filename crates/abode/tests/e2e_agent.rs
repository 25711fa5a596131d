//! `abode agent` and workspace health: a template whose agent cannot
//! authenticate gives a succeeded build but an unhealthy workspace; the agent
//! runs the startup script (ready when it succeeds, start_error when it
//! fails, heartbeats throughout); the agent process itself retries, never
//! prints its token, and stops cleanly on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{abode_bin, copy_dir, fixture, require_terraform, Platform};

const TOKEN: &str = "agent-token-that-must-never-be-printed";

#[test]
fn broken_agent_token_gives_a_succeeded_build_and_an_unhealthy_workspace() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("broken-agent");
    platform
        .run(&[
            "templates",
            "push",
            "broken",
            "--directory",
            template.to_str().unwrap(),
        ])
        .ok();
    platform
        .run(&["create", "dev", "--template", "broken"])
        .ok();
    // Past the connect timeout (8 s) by the server's clock.
    platform.advance_clock(Duration::from_secs(9));
    let shown = platform.wait_for_agent("dev", "unhealthy", Duration::from_secs(10));
    assert_eq!(shown["status"], "running", "{shown:#}");
    assert_eq!(shown["latest_build"]["status"], "succeeded", "{shown:#}");
    assert_eq!(shown["healthy"], false, "{shown:#}");
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(text.contains("Agent:       unhealthy"), "{text}");
    assert!(text.contains("Healthy:     no"), "{text}");
    platform.run(&["delete", "dev"]).ok();
}

/// The home volume of a workspace the startup fixtures created.
fn home_volume(platform: &Platform, shown: &serde_json::Value) -> std::path::PathBuf {
    platform
        .volumes_dir()
        .join(format!("home-{}", shown["id"].as_str().unwrap()))
}

#[test]
fn startup_script_runs_in_the_agent_dir_with_its_env_before_ready() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("startup-script");
    platform
        .run(&[
            "templates",
            "push",
            "startup",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    platform
        .run(&["create", "dev", "--template", "startup"])
        .ok();
    let shown = platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    assert_eq!(shown["healthy"], true, "{shown:#}");
    let home = home_volume(&platform, &shown);
    assert_eq!(
        std::fs::read_to_string(home.join("startup-marker")).unwrap(),
        "hello from the startup script\n",
        "the script ran in the agent's dir with the agent's env before ready"
    );
    let log =
        std::fs::read_to_string(home.join(".logs/abode-startup-alice-dev-main_0_.log")).unwrap();
    assert!(log.contains("startup done"), "{log}");
    assert!(
        log.contains("token in the script's environment: none"),
        "the agent token must not reach the script: {log}"
    );

    // A new version that changes only the agent's env updates the agent in
    // place: its process (same token) goes on and the workspace stays ready;
    // the new env applies the next time the agent starts.
    let v2 = platform.root().join("startup-v2");
    copy_dir(&template, &v2);
    let main_tf = v2.join("main.tf");
    let text = std::fs::read_to_string(&main_tf).unwrap();
    std::fs::write(
        &main_tf,
        text.replace("hello from the startup script", "hello again"),
    )
    .unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "startup",
            "-d",
            v2.to_str().unwrap(),
            "--activate",
        ])
        .ok();
    let agents_before = platform.spawned_processes();
    platform.run(&["update", "dev"]).ok();
    let updated = platform.show("dev");
    assert_eq!(updated["template_version"], 2, "{updated:#}");
    assert_eq!(updated["agent"]["status"], "ready", "{updated:#}");
    assert_eq!(updated["healthy"], true, "{updated:#}");
    let agents_after = platform.spawned_processes();
    assert!(
        agents_before.iter().all(|pid| agents_after.contains(pid)),
        "the update restarted the workspace's process: {agents_before:?} -> {agents_after:?}"
    );
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn failing_startup_script_gives_start_error_and_heartbeats_go_on() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("startup-fails");
    platform
        .run(&[
            "templates",
            "push",
            "fails",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    platform.run(&["create", "dev", "--template", "fails"]).ok();
    // The script runs longer than the heartbeat timeout: the agent must stay
    // connected (starting) all along, then report start_error.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = Vec::new();
    let shown = loop {
        let shown = platform.show("dev");
        let status = shown["agent"]["status"].as_str().unwrap_or("").to_string();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status == "start_error" {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "never start_error; statuses seen {seen:?}; last {shown:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        seen.iter()
            .all(|status| status != "disconnected" && status != "unhealthy"),
        "a running startup script must not stop heartbeats: {seen:?}"
    );
    assert!(seen.contains(&"starting".to_string()), "{seen:?}");
    assert_eq!(shown["status"], "running", "{shown:#}");
    assert_eq!(shown["latest_build"]["status"], "succeeded", "{shown:#}");
    assert_eq!(shown["healthy"], false, "{shown:#}");
    assert_eq!(shown["agent"]["lifecycle"], "start_error", "{shown:#}");
    assert_eq!(
        shown["agent"]["reason"], "startup script exited with status 3",
        "{shown:#}"
    );
    let log = std::fs::read_to_string(
        home_volume(&platform, &shown).join(".logs/abode-startup-alice-dev-main_0_.log"),
    )
    .unwrap();
    assert_eq!(log, "installing\ncannot install\n");

    // Longer than the heartbeat timeout (5 s) later, by the server's clock:
    // heartbeats go on (the next one, at most a second away, is dated after
    // the jump) and the agent is still connected, still failed.
    platform.advance_clock(Duration::from_secs(7));
    let jumped = shown["agent"]["last_heartbeat_at"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let later = platform.show("dev");
        if later["agent"]["status"] == "start_error"
            && later["agent"]["last_heartbeat_at"].as_str() > Some(jumped.as_str())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "heartbeats stopped after a failed start: {later:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(text.contains("Agent:       start_error"), "{text}");
    assert!(text.contains("Healthy:     no"), "{text}");
    assert!(
        text.contains("startup script exited with status 3"),
        "{text}"
    );
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn agent_reconnects_after_a_server_restart() {
    require_terraform();
    let mut platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    // The processes that last: the example's metadata blocks run short
    // commands (`sh`, `abode stat`, `awk`, each killed at its 5 s timeout),
    // so only what was there both now and 6 s later counts.
    let first = platform.spawned_processes();
    std::thread::sleep(Duration::from_secs(6));
    let agents_before: Vec<u32> = platform
        .spawned_processes()
        .into_iter()
        .filter(|pid| first.contains(pid))
        .collect();
    assert!(!agents_before.is_empty());

    platform.restart_server();
    // Any heartbeat later than the last one the restarted server knows came
    // from the same agent process, reconnected to the new server.
    let last_known = platform.show("dev")["agent"]["last_heartbeat_at"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = platform.show("dev");
        let beat = shown["agent"]["last_heartbeat_at"].as_str().unwrap_or("");
        if shown["agent"]["status"] == "ready" && beat > last_known.as_str() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not come back after the restart: {shown:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let agents_after = platform.spawned_processes();
    assert!(
        agents_before.iter().all(|pid| agents_after.contains(pid)),
        "workspace processes died with the server: {agents_before:?} -> {agents_after:?}"
    );
    platform.run(&["delete", "dev"]).ok();
}

fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[test]
fn agent_retries_an_absent_server_and_stops_cleanly_on_sigterm() {
    let mut agent = Command::new(abode_bin())
        .args(["agent", "--url", &closed_port_url()])
        .env("ABODE_AGENT_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for a few retries with backoff.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent gave up instead of retrying"
    );
    Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the agent ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = agent.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "token printed: {stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains(TOKEN));
}

#[test]
fn agent_without_token_fails_with_one_clear_line() {
    let output = Command::new(abode_bin())
        .args(["agent", "--url", &closed_port_url()])
        .env_remove("ABODE_AGENT_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ABODE_AGENT_TOKEN is not set"), "{stderr}");
}
