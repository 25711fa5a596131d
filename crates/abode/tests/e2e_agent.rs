//! `abode agent` and workspace health: a template whose agent cannot
//! authenticate gives a succeeded build but an unhealthy workspace; the agent
//! process itself retries, never prints its token, and stops cleanly on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{abode_bin, fixture, repo_root, require_terraform, Platform};

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
    let shown = platform.wait_for_agent("dev", "unhealthy", Duration::from_secs(60));
    assert_eq!(shown["status"], "running", "{shown:#}");
    assert_eq!(shown["latest_build"]["status"], "succeeded", "{shown:#}");
    assert_eq!(shown["healthy"], false, "{shown:#}");
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(text.contains("Agent:       unhealthy"), "{text}");
    assert!(text.contains("Healthy:     no"), "{text}");
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn agent_reconnects_after_a_server_restart() {
    require_terraform();
    let mut platform = Platform::start();
    platform.login_owner();
    let example = repo_root().join("examples/local-workspace");
    platform
        .run(&[
            "templates",
            "push",
            "local",
            "-d",
            example.to_str().unwrap(),
        ])
        .ok();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let agents_before = platform.spawned_processes();

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
