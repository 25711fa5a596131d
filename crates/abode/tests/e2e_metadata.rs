//! Live metadata and resource monitors (issue 48, items 3 and 5), end to
//! end with the real agent of the example template: a `metadata` block run
//! every second shows a changing value through `abode show` (JSON and
//! text), a failing block and a slow one show their error while the other
//! keeps changing, and a memory monitor with a 1% threshold tells the owner
//! once (`workspace_resource_high`), however many readings follow. Bad
//! blocks fail at plan time in one line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::time::Duration;

use serde_json::Value;
use util::{example_with, push_template as push, require_terraform, wait_for, Platform};

const AGENT_DIR: &str = "  dir   = abode_volume.home.path\n";

/// The example with `blocks` added to its agent.
fn with_blocks(blocks: &str) -> String {
    example_with(&[(AGENT_DIR, &format!("{AGENT_DIR}{blocks}"))])
}

fn block(key: &str, script: &str, interval: u64, timeout: u64) -> String {
    format!(
        "  metadata {{\n    key          = \"{key}\"\n    display_name = \"{key} shown\"\n    script       = \"{script}\"\n    interval     = {interval}\n    timeout      = {timeout}\n  }}\n"
    )
}

fn metadata(platform: &Platform) -> Vec<Value> {
    platform.show("dev")["metadata"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn item(platform: &Platform, key: &str) -> Value {
    metadata(platform)
        .into_iter()
        .find(|item| item["key"] == key)
        .unwrap_or(Value::Null)
}

fn resource_highs(platform: &Platform) -> Vec<Value> {
    platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["kind"] == "workspace_resource_high")
        .cloned()
        .collect()
}

/// The `tick` block's value: the agent's clock in seconds.
fn tick(platform: &Platform) -> Option<u64> {
    item(platform, "tick")["value"]
        .as_str()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn metadata_changes_failures_show_and_a_memory_monitor_tells_once() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &[]);
    platform.login_owner();
    let mut blocks = block("tick", "date +%s", 1, 5);
    blocks.push_str(&block("broken", "echo nope >&2; exit 3", 1, 5));
    blocks.push_str(&block("slow", "sleep 30", 1, 1));
    blocks.push_str("  resources_monitoring {\n    memory {\n      threshold = 1\n      enabled   = true\n    }\n    volume {\n      path      = \"/\"\n      threshold = 100\n    }\n  }\n");
    // Something the agent started holds 1.5% of the machine's memory, so
    // the workspace's processes are past 1% however big the machine.
    let total_kib: u64 = fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let hog_mib = total_kib * 3 / 200 / 1024 + 16;
    let mut template = with_blocks(&blocks);
    template.push_str(&format!(
        "\nresource \"abode_script\" \"hog\" {{\n  count        = data.abode_workspace.me.start_count\n  agent_id     = abode_agent.main[0].id\n  display_name = \"hog\"\n  run_on_start = true\n  timeout      = 3600\n  script       = \"exec python3 -c 'import time; x = b\\\"x\\\" * ({hog_mib} * 1024 * 1024); time.sleep(3600)'\"\n}}\n"
    ));
    push(&platform, "local", 1, &template);
    platform.run(&["create", "dev", "--template", "local"]).ok();

    // The value changes, through the CLI's JSON.
    let mut seen = std::collections::BTreeSet::new();
    wait_for("two values of tick", Duration::from_secs(180), || {
        if let Some(value) = tick(&platform) {
            seen.insert(value);
        }
        seen.len() >= 2
    });

    // They came on the reports' socket, opened once (an upgrade, 101).
    let log = platform.server_log();
    assert!(
        log.lines()
            .any(|line| line.contains("path=/api/v1/agent/metadata/stream")
                && line.contains("status=101")),
        "the agent never opened its reports' socket:\n{log}"
    );

    // The failing and the slow blocks show their error; tick goes on.
    wait_for("the broken block's error", Duration::from_secs(60), || {
        item(&platform, "broken")["error"]
            .as_str()
            .is_some_and(|error| error.contains("exit status 3") && error.contains("nope"))
    });
    wait_for("the slow block's timeout", Duration::from_secs(60), || {
        item(&platform, "slow")["error"]
            .as_str()
            .is_some_and(|error| error.contains("timed out"))
    });
    let before = tick(&platform).unwrap();
    wait_for("tick going on beside them", Duration::from_secs(60), || {
        tick(&platform).is_some_and(|now| now > before)
    });
    let broken = item(&platform, "broken");
    assert_eq!(broken["display_name"], "broken shown");
    assert_eq!(broken["value"], "");
    assert!(broken["age_seconds"].as_u64().is_some(), "{broken}");

    // The home's disk percent is `df`'s (used of used + available: blocks
    // reserved for root count as neither), within what other writers on
    // this machine move meanwhile.
    wait_for(
        "a report of the home volume",
        Duration::from_secs(60),
        || platform.show("dev")["disk"][0]["used_percent"].is_u64(),
    );
    let shown = platform.show("dev")["disk"][0]["used_percent"]
        .as_u64()
        .unwrap();
    let df = std::process::Command::new("df")
        .args(["--output=pcent"])
        .arg(util::only_subdir(&platform.volumes_dir()))
        .output()
        .unwrap();
    let df: u64 = String::from_utf8_lossy(&df.stdout)
        .lines()
        .nth(1)
        .and_then(|line| line.trim().trim_end_matches('%').parse().ok())
        .unwrap();
    assert!(shown.abs_diff(df) <= 2, "shown {shown}%, df {df}%");

    // The text form says them too.
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(text.contains("Metadata tick shown (main[0]): "), "{text}");
    assert!(
        text.contains("Metadata broken shown (main[0]): error: exit status 3"),
        "{text}"
    );

    // The memory monitor (1%) tells the owner once.
    wait_for(
        "a workspace_resource_high",
        Duration::from_secs(120),
        || !resource_highs(&platform).is_empty(),
    );
    // Two more monitor readings (every 10 s, on the agent's clock as tick
    // shows it) come and go: still one.
    let told_at = tick(&platform).unwrap();
    let readings = 2 * abode_contract::watch::MONITOR_INTERVAL_SECONDS + 2;
    wait_for(
        "two more monitor readings",
        Duration::from_secs(120),
        || tick(&platform).is_some_and(|now| now >= told_at + readings),
    );
    // Their report reached the server: one more second of ticks.
    let last = tick(&platform).unwrap();
    wait_for("the next report", Duration::from_secs(30), || {
        tick(&platform).is_some_and(|now| now > last)
    });
    let highs = resource_highs(&platform);
    assert_eq!(highs.len(), 1, "{highs:#?}");
    let payload = &highs[0];
    let text = payload.to_string();
    assert!(text.contains("memory"), "{text}");

    // The readings are gauges on /metrics, which promtool accepts.
    let scrape = platform.scrape();
    let memory = scrape
        .lines()
        .find(|line| line.starts_with("abode_agent_memory_used_percent{"))
        .unwrap_or_else(|| panic!("no memory gauge:\n{scrape}"));
    assert!(memory.contains("agent=\"main[0]\""), "{memory}");
    let used: f64 = memory.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(used >= 1.0, "{memory}");
    assert!(
        scrape
            .lines()
            .any(|line| line.starts_with("abode_agent_volume_used_percent{")
                && line.contains("path=\"/\"")),
        "{scrape}"
    );
    util::promtool_check(&scrape);
}

#[test]
fn bad_metadata_and_monitors_fail_at_plan_time_in_one_line() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let twice = format!("{}{}", block("k", "true", 5, 1), block("k", "true", 5, 1));
    let cases = [
        (twice, "abode_agent metadata key `k` appears more than once"),
        (
            block("k", "true", 0, 1),
            "abode_agent metadata `k`: interval must be 1 or more seconds, not 0",
        ),
        (
            block("k", "true", 5, 0),
            "abode_agent metadata `k`: timeout must be 1 or more seconds, not 0",
        ),
        (
            "  resources_monitoring {\n    memory {\n      threshold = 101\n    }\n  }\n".to_string(),
            "abode_agent resources_monitoring memory: threshold must be 1 to 100 percent, not 101",
        ),
        (
            "  resources_monitoring {\n    volume {\n      path      = \"/\"\n      threshold = 0\n    }\n  }\n".to_string(),
            "abode_agent resources_monitoring volume `/`: threshold must be 1 to 100 percent, not 0",
        ),
    ];
    for (index, (blocks, needle)) in cases.into_iter().enumerate() {
        let name = format!("bad{index}");
        let dir = platform.root().join(format!("templates/{name}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("main.tf"), with_blocks(&blocks)).unwrap();
        let pushed = platform.run(&["templates", "push", &name, "-d", dir.to_str().unwrap()]);
        let refused = if pushed.code == Some(0) {
            platform
                .run(&["create", &format!("ws{index}"), "--template", &name])
                .fails_with(1, &[needle])
        } else {
            pushed.fails_with(1, &[needle])
        };
        let line = refused
            .stderr
            .lines()
            .find(|line| line.contains(needle))
            .unwrap();
        assert!(line.starts_with("error: "), "{refused}");
    }
}
