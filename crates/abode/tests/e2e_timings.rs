//! Build timings (issue 50) against the real server, Terraform, provider
//! and agent: a start's timings have every stage that ran, in order, from
//! its queue wait to its agent's `ready`, and each of three resources'
//! apply (one of which sleeps, so its measured length shows); the stop
//! after it has each one's refresh in its plan and its delete in its apply;
//! the CLI shows them as a table and as JSON, the dashboard's build page as
//! a timeline (drawn in the real browser), `/metrics` has
//! `abode_build_stage_seconds` (promtool accepts the scrape), an unknown
//! build is one line and exit 1, a failed build's stages stop at the one
//! that failed, a held build's plan and its confirmed
//! apply are two runs with their own stages, and a daemon's build has its
//! timings too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::Duration;

use serde_json::Value;
use util::{create_key, push_template, require_terraform, Daemon, Platform};

/// An agent with a startup script and three resources, one of which takes
/// a measurable while to create; all but the volume go with a stop.
const TIMED: &str = r#"
terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "abode_agent" "main" {
  count          = data.abode_workspace.me.start_count
  os             = "linux"
  arch           = "amd64"
  dir            = abode_volume.home.path
  startup_script = "sleep 0.3; echo started"
}

resource "abode_process" "workspace" {
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env = {
    ABODE_AGENT_TOKEN   = abode_agent.main[0].token
    ABODE_AGENT_LOG_DIR = "${abode_volume.home.path}/.logs"
    HOME                = abode_volume.home.path
  }
}

resource "terraform_data" "a" {
  count = data.abode_workspace.me.start_count
  input = "a"
}

resource "terraform_data" "b" {
  count = data.abode_workspace.me.start_count
  input = terraform_data.a[0].output
  provisioner "local-exec" {
    command = "sleep 0.4"
  }
}

resource "terraform_data" "c" {
  count = data.abode_workspace.me.start_count
  input = "c"
}
"#;

/// Three resources and nothing else, for a daemon.
const THREE: &str = r#"
resource "terraform_data" "a" {
  input = "a"
}

resource "terraform_data" "b" {
  input = terraform_data.a.output
}

resource "terraform_data" "c" {
  input = "c"
}
"#;

/// The server's clock is read in milliseconds; a run's stages are measured
/// in microseconds and anchored on it: one stage may seem to start up to
/// this long before the previous one ended.
const CLOCK_RESOLUTION: f64 = 0.001;

fn timings(platform: &Platform, workspace: &str, number: &str) -> Value {
    platform
        .run(&[
            "builds",
            "show",
            workspace,
            number,
            "--timings",
            "--output",
            "json",
        ])
        .ok()
        .json()
}

fn stage_names(timings: &Value) -> Vec<String> {
    timings["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|stage| stage["stage"].as_str().unwrap().to_string())
        .collect()
}

/// Every stage ended, starts no earlier than the one before it ended, and
/// its length is its end less its start.
fn assert_in_order(timings: &Value) {
    let stages = timings["stages"].as_array().unwrap();
    let mut previous_end = 0.0_f64;
    let mut previous = String::new();
    for stage in stages {
        let name = stage["stage"].as_str().unwrap();
        let offset = stage["offset_seconds"].as_f64().unwrap();
        let seconds = stage["seconds"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} did not end: {timings:#}"));
        assert!(seconds >= 0.0, "{name} ends before it starts: {timings:#}");
        assert!(
            offset + CLOCK_RESOLUTION >= previous_end,
            "{name} starts at {offset} before {previous} ended at {previous_end}: {timings:#}"
        );
        assert!(stage["started_at"].as_str().unwrap() <= stage["ended_at"].as_str().unwrap());
        previous_end = offset + seconds;
        previous = name.to_string();
    }
}

fn resource<'a>(timings: &'a Value, phase: &str, address: &str) -> &'a Value {
    timings["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|resource| resource["phase"] == phase && resource["address"] == address)
        .unwrap_or_else(|| panic!("no {phase} of {address}: {timings:#}"))
}

/// A build's own stages, in order, when it plans and applies at once.
const BUILD_STAGES: [&str; 8] = [
    "queue_wait",
    "setup",
    "init",
    "plan",
    "guard",
    "quota",
    "apply",
    "state_write",
];

#[test]
fn a_builds_timings_have_every_stage_in_order_and_each_resource() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &[]);
    platform.login_owner();
    push_template(&platform, "timed", 1, TIMED);
    platform.run(&["create", "dev", "--template", "timed"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));

    // The start: every stage that ran, in order, from the queue to the
    // agent's ready; no retain or snapshot (none ran).
    let start = timings(&platform, "dev", "1");
    assert_eq!(start["build"], 1);
    assert_eq!(start["status"], "succeeded");
    assert_eq!(
        stage_names(&start),
        [&BUILD_STAGES[..], &["agent_connected", "scripts", "ready"]].concat(),
        "{start:#}"
    );
    assert_in_order(&start);
    // The startup script sleeps 0.3 s: measured, not guessed.
    let scripts = &start["stages"][9];
    assert!(scripts["seconds"].as_f64().unwrap() >= 0.3, "{start:#}");
    assert_eq!(scripts["run"], "agent");
    assert_eq!(scripts["agent"], "main[0]");
    // Each resource's apply, from Terraform's own timestamps: b's
    // provisioner sleeps 0.4 s.
    for address in [
        "terraform_data.a[0]",
        "terraform_data.b[0]",
        "terraform_data.c[0]",
    ] {
        let applied = resource(&start, "apply", address);
        assert_eq!(applied["action"], "create", "{applied}");
        assert!(applied["seconds"].as_f64().unwrap() >= 0.0);
        assert!(applied["started_at"].as_str().unwrap() <= applied["ended_at"].as_str().unwrap());
    }
    let slow = resource(&start, "apply", "terraform_data.b[0]")["seconds"]
        .as_f64()
        .unwrap();
    assert!(slow >= 0.4, "{start:#}");
    assert!(
        resource(&start, "apply", "terraform_data.a[0]")["seconds"]
            .as_f64()
            .unwrap()
            < slow
    );
    // The data source is read during the plan.
    assert_eq!(
        resource(&start, "plan", "data.abode_workspace.me")["action"],
        "read"
    );

    // The stop: each resource refreshed in its plan, deleted in its apply.
    platform.run(&["stop", "dev"]).ok();
    let stop = timings(&platform, "dev", "2");
    assert_in_order(&stop);
    assert_eq!(stage_names(&stop), BUILD_STAGES, "{stop:#}");
    for address in [
        "terraform_data.a[0]",
        "terraform_data.b[0]",
        "terraform_data.c[0]",
    ] {
        assert_eq!(resource(&stop, "plan", address)["action"], "refresh");
        assert_eq!(resource(&stop, "apply", address)["action"], "delete");
    }

    // The table: a heading, every stage with its bar, every resource.
    let text = platform
        .run(&["builds", "show", "dev", "1", "--timings"])
        .ok()
        .stdout;
    assert!(text.starts_with("Build #1 of "), "{text}");
    for needle in [
        "STAGE",
        "TIMELINE",
        "queue_wait",
        "agent_connected",
        "agent main[0]",
        "ready",
        "RESOURCE",
        "terraform_data.b[0]",
        "create",
        "#",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    assert!(text.lines().all(|line| line == line.trim_end()), "{text}");
    // A sample for whoever reads the test's output.
    println!("{text}");

    // The dashboard's build page: the timeline, a bar per stage (SVG
    // placed by attributes: the page allows no inline style).
    let page = platform.dashboard_page(
        "alice",
        "correct horse battery",
        "/workspaces/alice/dev/builds/1",
    );
    for needle in [
        "Timeline",
        "<td>queue_wait</td>",
        "<td>agent_connected</td>",
        "<td>ready</td>",
        "class=\"timeline-bar\"",
        "terraform_data.b[0]",
    ] {
        assert!(page.contains(needle), "{needle} missing:\n{page}");
    }

    // Without --timings: the build itself.
    let shown = platform.run(&["builds", "show", "dev", "1"]).ok().stdout;
    assert!(shown.contains("Status:     succeeded"), "{shown}");
    assert!(shown.contains("Workspace:  alice/dev"), "{shown}");
    let shown = platform
        .run(&["builds", "show", "dev", "--output", "json"])
        .ok()
        .json();
    assert_eq!(
        (shown["number"].as_u64(), shown["transition"].as_str()),
        (Some(2), Some("stop"))
    );

    // An unknown build: one line, exit 1, nothing on stdout.
    let missing = platform
        .run(&["builds", "show", "dev", "99", "--timings"])
        .fails_with(1, &["no build #99"]);
    assert_eq!(
        missing.stderr.trim().lines().count(),
        1,
        "{}",
        missing.stderr
    );
    assert!(missing.stdout.is_empty());
    platform
        .run(&["builds", "show", "nowhere", "1", "--timings"])
        .fails_with(1, &["nowhere"]);

    // The histograms: every stage observed, in a scrape promtool accepts.
    let scrape = platform.scrape();
    for stage in [
        "queue_wait",
        "plan",
        "apply",
        "agent_connected",
        "scripts",
        "ready",
    ] {
        let count = util::sample(
            &scrape,
            &format!("abode_build_stage_seconds_count{{stage=\"{stage}\"}}"),
        )
        .unwrap_or(0.0);
        assert!(count >= 1.0, "{stage} not observed:\n{scrape}");
    }
    util::promtool_check(&scrape);
}

#[test]
fn a_daemons_build_has_its_timings_too() {
    require_terraform();
    let platform = Platform::start_with(&["--provisioners", "0", "--job-lease", "10"]);
    platform.login_owner();
    let key = create_key(&platform, "builders", &[]);
    let daemon = Daemon::start(&platform, "d1", &key, &[]);
    push_template(&platform, "three", 1, THREE);
    platform.run(&["create", "far", "--template", "three"]).ok();
    let far = timings(&platform, "far", "1");
    assert_eq!(stage_names(&far), BUILD_STAGES, "{far:#}\n{}", daemon.log());
    // Measured where Terraform ran, anchored on the server's clock: in
    // order but for the latency of the report.
    let stages = far["stages"].as_array().unwrap();
    for stage in stages {
        assert!(stage["seconds"].as_f64().unwrap() >= 0.0, "{far:#}");
    }
    for address in ["terraform_data.a", "terraform_data.b", "terraform_data.c"] {
        assert_eq!(resource(&far, "apply", address)["action"], "create");
        assert_eq!(resource(&far, "apply", address)["run"], "build");
    }
}

#[test]
fn a_confirmed_builds_two_runs_each_have_their_stages() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let digest = util::hold_a_build(&platform);
    // Held: the plan's run, nothing applied.
    let held = timings(&platform, "dev", "2");
    assert_eq!(held["status"], "awaiting_confirmation");
    assert_eq!(
        stage_names(&held),
        ["queue_wait", "setup", "init", "plan", "guard", "quota"],
        "{held:#}"
    );
    assert!(held["resources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|resource| resource["phase"] == "plan"));
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .ok();
    // Confirmed: the apply's run follows, from the confirmation; the
    // plan's stages stay as they were.
    let confirmed = timings(&platform, "dev", "2");
    let runs: Vec<(String, String)> = confirmed["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|stage| {
            (
                stage["run"].as_str().unwrap().to_string(),
                stage["stage"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let of = |run: &str| -> Vec<&str> {
        runs.iter()
            .filter(|(r, _)| r == run)
            .map(|(_, stage)| stage.as_str())
            .collect()
    };
    assert_eq!(
        of("build"),
        ["queue_wait", "setup", "init", "plan", "guard", "quota"],
        "{confirmed:#}"
    );
    let applied = of("apply_saved_plan");
    assert_eq!(applied.first(), Some(&"queue_wait"), "{confirmed:#}");
    assert!(
        applied.ends_with(&["init", "apply", "state_write"]),
        "{confirmed:#}"
    );
    assert_eq!(
        confirmed["stages"].as_array().unwrap()[..6],
        held["stages"].as_array().unwrap()[..],
        "the plan's run changed"
    );
    assert!(confirmed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|resource| resource["phase"] == "apply" && resource["run"] == "apply_saved_plan"));
}

/// The build page's timeline in the real browser: each bar drawn where its
/// stage ran (the page's policy lets no inline style through, so the bars
/// are placed by SVG attributes), the resources folded under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_is_drawn_in_the_browser() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push_template(&platform, "three", 1, THREE);
    platform.run(&["create", "dev", "--template", "three"]).ok();
    let base = platform.url.trim_end_matches('/').to_string();
    let browser = crate::browser::Browser::start().await;
    browser
        .sign_in(&base, "alice", "correct horse battery")
        .await;
    browser
        .go(&format!("{base}/workspaces/alice/dev/builds/1"))
        .await;
    browser.wait_for_text("Timeline").await;
    // One bar per stage (the resources' are folded), each drawn wider than
    // nothing, the last one ending at the right edge of its row.
    let widths = browser
        .script(
            "return Array.from(document.querySelectorAll('table.timeline')[0].querySelectorAll('svg.timeline-bar rect')).map(r => r.getBoundingClientRect().width);",
        )
        .await;
    let widths: Vec<f64> = widths
        .as_array()
        .unwrap()
        .iter()
        .map(|width| width.as_f64().unwrap())
        .collect();
    assert_eq!(widths.len(), 8, "{widths:?}");
    assert!(widths.iter().all(|width| *width > 0.0), "{widths:?}");
    let text = browser.page_text().await;
    for needle in ["queue_wait", "state_write", "Terraform resources (3)"] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
}

/// Plans fine (the guard allows it) and fails at apply.
const FAILING: &str = r#"
resource "terraform_data" "boom" {
  provisioner "local-exec" {
    command = "echo failing on purpose; exit 1"
  }
}
"#;

#[test]
fn a_failed_builds_timings_stop_where_it_failed() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push_template(&platform, "failing", 1, FAILING);
    platform
        .run(&["create", "broken", "--template", "failing"])
        .fails_with(1, &[]);
    let failed = timings(&platform, "broken", "1");
    assert_eq!(failed["status"], "failed");
    // The apply ran and failed: measured; nothing after it ran, so nothing
    // after it is there.
    assert_eq!(stage_names(&failed), &BUILD_STAGES[..7], "{failed:#}");
    assert_in_order(&failed);
    assert_eq!(
        resource(&failed, "apply", "terraform_data.boom")["action"],
        "create"
    );
}
