//! Prebuilt workspaces end to end, with the real binary, real Terraform and
//! the abode provider's local volumes and processes: the example template's
//! pool converges to two ready prebuilds; a claim hands over one of them
//! (same workspace id, same volume, the agent still connected) and the pool
//! refills; two concurrent claims get different prebuilds; a template whose
//! volume is named after the owner has it replaced on claim, allowed,
//! logged and notified, and the agent runs its claim script; a failing
//! template hits the hard limit once and notifies once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{copy_dir, fixture, repo_root, require_terraform, Platform};

/// Reconcile every second, agents heartbeat every second: the test waits for
/// builds, never for a minute-long interval.
const FAST: &[&str] = &[
    "--prebuilds-reconcile-interval",
    "1",
    "--agent-heartbeat-interval",
    "1",
    "--prebuilds-backoff",
    "1",
];

fn push(platform: &Platform, name: &str, dir: &Path) {
    platform
        .run(&[
            "templates",
            "push",
            name,
            "--directory",
            dir.to_str().unwrap(),
        ])
        .ok();
}

/// The example template with `prebuild-pool/presets.tf` beside it.
fn example_with_pool(platform: &Platform) -> std::path::PathBuf {
    let dir = platform.root().join("example-with-pool");
    copy_dir(&repo_root().join("examples/local-workspace"), &dir);
    std::fs::copy(
        fixture("prebuild-pool").join("presets.tf"),
        dir.join("presets.tf"),
    )
    .unwrap();
    dir
}

/// The pool of `preset`, from `abode prebuilds status -o json`.
fn pool(platform: &Platform, preset: &str) -> Value {
    let pools = platform
        .run(&["prebuilds", "status", "--output", "json"])
        .ok()
        .json();
    pools
        .as_array()
        .unwrap()
        .iter()
        .find(|pool| pool["preset"] == preset)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Polls the pool until `done` holds; panics with the last status after
/// `timeout`.
fn wait_for_pool(
    platform: &Platform,
    preset: &str,
    timeout: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let pool = pool(platform, preset);
        if done(&pool) {
            return pool;
        }
        assert!(
            Instant::now() < deadline,
            "the pool of {preset} never got {what}; last: {pool:#}\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The prebuilt workspaces (owned by `prebuilds`), by id.
fn prebuild_ids(platform: &Platform) -> Vec<String> {
    let listed = platform
        .run(&["list", "--all", "--owner", "prebuilds", "--output", "json"])
        .ok()
        .json();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|workspace| workspace["id"].as_str().unwrap().to_string())
        .collect()
}

fn ready(pool: &Value, count: u64) -> bool {
    pool["ready"] == count && pool["desired"] == count && pool["in_progress"] == 0
}

#[test]
fn a_pool_of_the_example_template_converges_is_claimed_and_refills() {
    require_terraform();
    let mut flags = FAST.to_vec();
    flags.extend(["--metrics-refresh-interval", "1"]);
    let platform = Platform::start_with_metrics(None, &flags);
    platform.login_owner();
    let template = example_with_pool(&platform);
    push(&platform, "example", &template);
    let presets = platform
        .run(&["templates", "presets", "example", "--output", "json"])
        .ok()
        .json();
    assert_eq!(presets[0]["name"], "small", "{presets:#}");

    wait_for_pool(
        &platform,
        "small",
        Duration::from_secs(180),
        "2 ready",
        |pool| ready(pool, 2),
    );
    let pooled = prebuild_ids(&platform);
    assert_eq!(pooled.len(), 2, "{pooled:?}");
    let listed_by_owner = platform
        .run(&["list", "--all", "--output", "json"])
        .ok()
        .json();
    assert!(
        listed_by_owner.as_array().unwrap().is_empty(),
        "prebuilt workspaces are not in everyone's list: {listed_by_owner:#}"
    );

    let claimed = platform.run(&[
        "create",
        "mine",
        "--template",
        "example",
        "--preset",
        "small",
    ]);
    let claimed = claimed.ok();
    assert!(
        claimed.stderr.contains("prebuilt"),
        "create says it claimed a prebuilt workspace: {claimed}"
    );
    let shown = platform.wait_for_agent("mine", "ready", Duration::from_secs(30));
    let id = shown["id"].as_str().unwrap().to_string();
    assert!(
        pooled.contains(&id),
        "the claimed workspace is one of the pool's: {id} {pooled:?}"
    );
    assert_eq!(shown["owner"], "alice", "{shown:#}");
    assert_eq!(
        shown["latest_build"]["reason"], "prebuild_claim",
        "{shown:#}"
    );
    assert!(
        platform.volumes_dir().join(format!("home-{id}")).is_dir(),
        "the prebuild's volume is the workspace's"
    );

    // The pool builds a replacement for the claimed one.
    wait_for_pool(
        &platform,
        "small",
        Duration::from_secs(180),
        "refilled",
        |pool| ready(pool, 2),
    );
    let refilled = prebuild_ids(&platform);
    assert!(!refilled.contains(&id), "{refilled:?}");
    let labels = r#"{template_name="example",preset_name="small"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = platform.scrape();
        let sample = |name: &str| {
            let series = format!("{name}{labels} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&series).map(str::to_string))
        };
        let seen = [
            sample("abode_prebuilt_workspaces_created_total"),
            sample("abode_prebuilt_workspaces_claimed_total"),
            sample("abode_prebuilt_workspaces_resource_replacements_total"),
            sample("abode_prebuilt_workspaces_claim_duration_seconds_count"),
            sample("abode_prebuilt_workspaces_desired"),
            sample("abode_prebuilt_workspaces_eligible"),
            sample("abode_prebuilt_workspaces_paused"),
        ];
        let expected = ["3", "1", "0", "1", "2", "2", "0"].map(|value| Some(value.to_string()));
        if seen == expected {
            break;
        }
        assert!(Instant::now() < deadline, "metrics: {seen:?}\n{text}");
        std::thread::sleep(Duration::from_millis(250));
    }

    // Two claims at once take two different prebuilds.
    let claims: Vec<std::process::Child> = ["one", "two"]
        .iter()
        .map(|name| {
            platform
                .cmd(&["create", name, "--template", "example", "--preset", "small"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut claim in claims {
        assert!(claim.wait().unwrap().success());
    }
    let one = platform.show("one");
    let two = platform.show("two");
    assert_ne!(one["id"], two["id"]);
    for shown in [&one, &two] {
        assert!(
            refilled.contains(&shown["id"].as_str().unwrap().to_string()),
            "{shown:#}"
        );
    }

    // A template admin may delete a prebuilt workspace, not a person's.
    wait_for_pool(
        &platform,
        "small",
        Duration::from_secs(180),
        "refilled again",
        |pool| ready(pool, 2),
    );
    let admin = platform.login_new_user("tina", "template-admin");
    let listed = platform
        .run(&["list", "--all", "--owner", "prebuilds", "--output", "json"])
        .ok()
        .json();
    let name = listed[0]["name"].as_str().unwrap().to_string();
    platform
        .run_as(&admin, &["delete", &format!("prebuilds/{name}")], None)
        .ok();
    platform
        .run_as(&admin, &["delete", "alice/mine"], None)
        .fails_with(1, &["delete"]);
}

#[test]
fn a_claim_that_replaces_a_protected_volume_is_allowed_logged_and_notified() {
    require_terraform();
    let platform = Platform::start_with(FAST);
    platform.login_owner();
    push(&platform, "by-owner", &fixture("prebuild-owner-volume"));
    wait_for_pool(
        &platform,
        "solo",
        Duration::from_secs(180),
        "1 ready",
        |pool| ready(pool, 1),
    );
    let id = prebuild_ids(&platform).remove(0);

    platform
        .run(&[
            "create",
            "mine",
            "--template",
            "by-owner",
            "--preset",
            "solo",
        ])
        .ok();
    let shown = platform.show("mine");
    assert_eq!(shown["id"], id.as_str());
    assert_eq!(shown["latest_build"]["status"], "succeeded", "{shown:#}");
    let number = shown["latest_build"]["number"]
        .as_i64()
        .unwrap()
        .to_string();
    let log = platform
        .run(&["builds", "logs", "mine", &number])
        .ok()
        .stdout;
    assert!(
        log.contains("-/+ abode_volume.home (replaced on claim: name)"),
        "{log}"
    );
    let notifications = platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json();
    let replaced: Vec<&Value> = notifications
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["kind"] == "prebuild_resource_replaced")
        .collect();
    assert_eq!(replaced.len(), 1, "{notifications:#}");
    let payload = &replaced[0]["payload"];
    assert_eq!(payload["claimant"]["name"], "alice", "{payload:#}");
    assert_eq!(
        payload["replaced"][0]["address"], "abode_volume.home",
        "{payload:#}"
    );
    assert_eq!(payload["replaced"][0]["paths"][0], "name", "{payload:#}");

    // The agent kept running through the claim and ran its claim script.
    let marker = platform
        .volumes_dir()
        .join(format!("work-{id}"))
        .join("claimed-by");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the claim script never ran\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&marker).unwrap();
        if text.ends_with('\n') {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(text, "alice mine\n");
}

#[test]
fn a_failing_template_hits_the_hard_limit_once_and_notifies_once() {
    require_terraform();
    let platform = Platform::start_with_metrics(
        None,
        &[
            "--prebuilds-reconcile-interval",
            "1",
            "--prebuilds-backoff",
            "1",
            "--prebuilds-failure-hard-limit",
            "2",
        ],
    );
    platform.login_owner();
    push(&platform, "broken", &fixture("prebuild-fails"));
    let limited = wait_for_pool(
        &platform,
        "broken",
        Duration::from_secs(180),
        "hard-limited",
        |pool| pool["hard_limited"] == true,
    );
    assert_eq!(limited["consecutive_failures"], 2, "{limited:#}");
    // More rounds change nothing: no new build, no second notification
    // (in the inbox once the dispatcher looked again).
    platform.wait_for_passes("prebuilds", 2);
    platform.wait_for_passes("notifications", 2);
    let still = pool(&platform, "broken");
    assert_eq!(still["consecutive_failures"], 2, "{still:#}");
    assert_eq!(still["in_progress"], 0, "{still:#}");
    let notifications = platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json();
    let limited: Vec<&Value> = notifications
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["kind"] == "preset_hard_limited")
        .collect();
    assert_eq!(limited.len(), 1, "{notifications:#}");
    assert_eq!(limited[0]["payload"]["preset"], "broken");
}
