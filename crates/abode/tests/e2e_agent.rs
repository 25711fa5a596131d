//! `abode agent` and workspace health: a template whose agent cannot
//! authenticate gives a succeeded build but an unhealthy workspace; the agent
//! process itself retries, never prints its token, and stops cleanly on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{abode_bin, fixture, require_terraform, Platform};

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
