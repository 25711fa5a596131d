//! Observability of the real server: `--prometheus-address` serves a scrape
//! that `promtool check metrics` accepts and whose counters match the builds
//! that ran (a success, a failure, a held build, a stop, a workspace whose
//! agent is ready), and
//! `--log-format json` writes one JSON object per line, a build's lines
//! carrying its workspace and number.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{
    abode_bin, free_port, printed_digest, push_template as push, repo_root, require_terraform,
    scrape, Platform,
};

/// The value of one series (`name{labels}`) in a scrape.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.parse().unwrap())
}

const MINIMAL: &str = r#"
resource "terraform_data" "marker" {
  input = "minimal"
}
"#;

/// Plans fine (the guard allows it) and fails at apply.
const FAILING: &str = r#"
resource "terraform_data" "boom" {
  provisioner "local-exec" {
    command = "echo failing on purpose; exit 1"
  }
}
"#;

/// A protected volume; `{NAME}` renamed in a later version forces a
/// replacement, which the guard holds for confirmation.
const PROTECTED: &str = r#"
terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

resource "abode_volume" "home" {
  name = "{NAME}-${data.abode_workspace.me.id}"
}

resource "abode_protect" "home" {
  resource_id = abode_volume.home.id
  mode        = "confirm"
}
"#;

#[test]
fn the_scrape_passes_promtool_and_counts_the_builds_that_ran() {
    require_terraform();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    // Through the environment, as a service unit would set it.
    let platform = Platform::start_with_env(
        &[],
        &[
            ("ABODE_PROMETHEUS_ADDRESS", &address),
            ("ABODE_METRICS_REFRESH_INTERVAL", "1"),
        ],
    );
    platform.login_owner();

    push(&platform, "minimal", 1, MINIMAL);
    push(&platform, "failing", 1, FAILING);
    push(
        &platform,
        "protected",
        1,
        &PROTECTED.replace("{NAME}", "home"),
    );
    platform
        .run(&["create", "ok", "--template", "minimal"])
        .ok();
    platform.run(&["stop", "ok"]).ok();
    let failed = platform.run(&["create", "bad", "--template", "failing"]);
    assert_eq!(failed.code, Some(1), "{failed}");
    platform
        .run(&["create", "dev", "--template", "protected"])
        .ok();
    push(
        &platform,
        "protected",
        2,
        &PROTECTED.replace("{NAME}", "home2"),
    );
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    printed_digest(&held);
    // A workspace whose agent runs (the example template's).
    let example = fs::read_to_string(repo_root().join("examples/local-workspace/main.tf")).unwrap();
    push(&platform, "local", 1, &example);
    platform
        .run(&["create", "agent", "--template", "local"])
        .ok();
    platform.wait_for_agent("agent", "ready", Duration::from_secs(60));
    let statuses: Vec<String> = ["ok", "bad", "dev", "agent"]
        .iter()
        .map(|name| {
            platform.show(name)["latest_build"]["status"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        statuses,
        ["succeeded", "failed", "awaiting_confirmation", "succeeded"]
    );

    // The database gauges follow within a refresh; a scrape never queries.
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(port);
        if value(&text, "abode_builds_held") == Some(1.0)
            && value(&text, r#"abode_agents{status="ready"}"#) == Some(1.0)
        {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the held build or the ready agent never showed:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    util::promtool_check(&text);

    let expected = [
        // ok, dev and agent (create)
        (
            r#"abode_builds_total{transition="start",status="succeeded",reason="initiator"}"#,
            3.0,
        ),
        (
            r#"abode_builds_total{transition="stop",status="succeeded",reason="initiator"}"#,
            1.0,
        ),
        (
            r#"abode_builds_total{transition="start",status="failed",reason="initiator"}"#,
            1.0,
        ),
        // dev's update, held by the guard
        (
            r#"abode_builds_total{transition="start",status="awaiting_confirmation",reason="initiator"}"#,
            1.0,
        ),
        (
            r#"abode_build_duration_seconds_count{transition="start"}"#,
            5.0,
        ),
        (
            r#"abode_build_duration_seconds_count{transition="stop"}"#,
            1.0,
        ),
        // ok (create, stop), bad (plans fine, fails at apply), dev, agent (create)
        (r#"abode_guard_decisions_total{decision="allow"}"#, 5.0),
        (r#"abode_guard_decisions_total{decision="confirm"}"#, 1.0),
        ("abode_builds_held", 1.0),
        ("abode_jobs_pending", 0.0),
        ("abode_job_queue_oldest_seconds", 0.0),
        (r#"abode_provisioners{state="busy"}"#, 0.0),
        (r#"abode_provisioners{state="idle"}"#, 3.0),
        (
            r#"abode_http_requests_total{route="/api/v1/workspaces",method="POST",status="201"}"#,
            4.0,
        ),
    ];
    for (series, wanted) in expected {
        assert_eq!(value(&text, series), Some(wanted), "{series} in\n{text}");
    }
    // One agent, ready; every other status is there, at 0.
    for (status, count) in [
        ("connecting", 0.0),
        ("starting", 0.0),
        ("ready", 1.0),
        ("start_error", 0.0),
        ("unhealthy", 0.0),
        ("disconnected", 0.0),
    ] {
        let series = format!("abode_agents{{status=\"{status}\"}}");
        assert_eq!(value(&text, &series), Some(count), "{series} in\n{text}");
    }
    let total_builds: f64 = text
        .lines()
        .filter(|line| line.starts_with("abode_builds_total{"))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(total_builds, 6.0, "one count per build run:\n{text}");
    assert!(
        !text.contains(r#"decision="block""#),
        "nothing was blocked:\n{text}"
    );
    assert!(value(&text, "abode_metrics_last_updated_seconds").unwrap() > 0.0);
    // Route templates only, never a workspace's name in a path.
    assert!(
        text.contains(r#"route="/api/v1/workspaces/:workspace""#),
        "{text}"
    );
    assert!(!text.contains("/workspaces/dev"), "{text}");
}

#[test]
fn json_logs_are_one_object_per_line_and_a_build_s_lines_name_it() {
    require_terraform();
    let platform = Platform::start_with(&["--log-format", "json", "--log-filter", "info"]);
    platform.login_owner();
    push(&platform, "minimal", 1, MINIMAL);
    platform
        .run(&["create", "ok", "--template", "minimal"])
        .ok();

    // The log line of the build's end follows its recorded end.
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = loop {
        let log = platform.server_log();
        if log.contains("build finished") {
            break log;
        }
        assert!(Instant::now() < deadline, "no build finished in:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // Complete lines only: the server may be writing the next one.
    let complete = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    let lines: Vec<serde_json::Value> = complete
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}\nin:\n{log}"))
        })
        .collect();
    // A line is the build's when it is in the build's span or names the
    // build by id: every one of them names the workspace and the number.
    let build_lines: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line["span"]["name"] == "build" || line["fields"]["build"].is_string())
        .collect();
    for message in ["claimed a job", "build finished"] {
        assert!(
            build_lines
                .iter()
                .any(|line| line["fields"]["message"] == message),
            "{message:?} is logged with the build:\n{log}"
        );
    }
    for line in &build_lines {
        assert_eq!(line["span"]["name"], "build", "{line}");
        assert_eq!(line["span"]["workspace"], "alice/ok", "{line}");
        assert_eq!(line["span"]["build_number"], 1, "{line}");
    }
}

#[test]
fn bad_observability_options_stop_the_server_at_start_with_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_address = taken.local_addr().unwrap().to_string();
    let cases: [(&[&str], i32, &str); 4] = [
        (&["--log-filter", "info,["], 1, "is not a log filter"),
        (&["--log-format", "xml"], 2, "--log-format"),
        (
            &["--prometheus-address", "not-an-address"],
            2,
            "--prometheus-address",
        ),
        (
            &["--prometheus-address", &taken_address],
            1,
            "cannot listen on",
        ),
    ];
    for (flags, code, needle) in cases {
        let data = tempfile::tempdir().unwrap();
        let output = Command::new(abode_bin())
            .arg("server")
            .arg("--address")
            .arg(format!("127.0.0.1:{}", free_port()))
            .arg("--data-dir")
            .arg(data.path())
            .args(flags)
            .env_remove("RUST_LOG")
            .env_remove("ABODE_PROMETHEUS_ADDRESS")
            .env_remove("ABODE_LOG_FORMAT")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{flags:?}: {stderr}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with("error"))
            .collect();
        assert_eq!(errors.len(), 1, "{flags:?}: one error line in {stderr}");
        assert!(errors[0].contains(needle), "{flags:?}: {stderr}");
    }
}
