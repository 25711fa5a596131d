//! `abode_script` (issue 48, item 1), end to end with the real agent of the
//! example template: two start scripts run in parallel (each waits for the
//! other's marker), a `start_blocks_login` one holds the agent's `ready`
//! and an SSH login until it ends, a failing script that does not block
//! login is only a failed script (its exit status and output through
//! `abode scripts`), a cron script every 2 s runs at least twice in 10 s
//! and never overlaps itself, and a stop script has written into the home
//! volume when the stop ends. Bad scripts fail at plan time in one line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    example_with, only_subdir, push_template as push, require_terraform, wait_for, Platform,
};

/// One `abode_script` of the example's agent.
fn script(name: &str, settings: &str, body: &str) -> String {
    format!(
        "\nresource \"abode_script\" \"{name}\" {{\n  count        = data.abode_workspace.me.start_count\n  agent_id     = abode_agent.main[0].id\n  display_name = \"{name}\"\n{settings}\n  script       = <<-EOT\n{body}\n  EOT\n}}\n"
    )
}

/// Waits for `path` to exist and the other's marker, up to 2 minutes.
fn meets(mine: &str, other: &str) -> String {
    format!(
        "    touch \"$HOME/{mine}-started\"\n    i=0\n    while [ ! -e \"$HOME/{other}-started\" ]; do\n      i=$((i+1)); [ \"$i\" -gt 1200 ] && {{ echo \"{other} never started\"; exit 9; }}\n      sleep 0.1\n    done\n    echo \"met {other}\""
    )
}

fn scripts_template() -> String {
    let mut text = example_with(&[]);
    text.push_str(&script(
        "left",
        "  run_on_start = true\n  timeout      = 300",
        &meets("left", "right"),
    ));
    text.push_str(&script(
        "right",
        "  run_on_start = true\n  timeout      = 300",
        &meets("right", "left"),
    ));
    text.push_str(&script(
        "gate",
        "  run_on_start       = true\n  start_blocks_login = true",
        "    touch \"$HOME/gate-started\"\n    i=0\n    while [ ! -e \"$HOME/release-gate\" ]; do\n      i=$((i+1)); [ \"$i\" -gt 3000 ] && exit 9\n      sleep 0.1\n    done\n    touch \"$HOME/gate-ended\"",
    ));
    text.push_str(&script(
        "fails",
        "  run_on_start = true",
        "    echo broken\n    exit 7",
    ));
    text.push_str(&script(
        "tick",
        "  cron = \"*/2 * * * * *\"",
        "    echo \"start\" >> \"$HOME/tick.log\"\n    mkdir \"$HOME/tick.lock\" 2>/dev/null || echo overlap >> \"$HOME/tick.log\"\n    sleep 3\n    rmdir \"$HOME/tick.lock\"\n    echo end >> \"$HOME/tick.log\"",
    ));
    text.push_str(&script(
        "saver",
        "  run_on_stop = true\n  timeout     = 60",
        "    echo saved > \"$HOME/saved-by-stop\"",
    ));
    text
}

fn scripts(platform: &Platform) -> Vec<Value> {
    platform
        .run(&["scripts", "dev", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

fn script_named(platform: &Platform, name: &str) -> Value {
    scripts(platform)
        .into_iter()
        .find(|script| script["display_name"] == name)
        .unwrap_or_else(|| panic!("no script {name}: {:?}", scripts(platform)))
}

fn starts(home: &Path) -> usize {
    fs::read_to_string(home.join("tick.log"))
        .unwrap_or_default()
        .lines()
        .filter(|line| *line == "start")
        .count()
}

#[test]
fn start_cron_and_stop_scripts_run_as_they_say() {
    require_terraform();
    let platform = Platform::start_with(&["--agent-heartbeat-interval", "1"]);
    platform.login_owner();
    push(&platform, "local", 1, &scripts_template());
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let home = only_subdir(&platform.volumes_dir());

    // The two start scripts met while the blocking one still held the agent.
    wait_for("left and right meeting", Duration::from_secs(120), || {
        ["left", "right"]
            .iter()
            .all(|name| script_named(&platform, name)["state"] == "succeeded")
    });
    assert!(home.join("gate-started").exists());
    assert!(!home.join("gate-ended").exists());
    assert_eq!(platform.show("dev")["agent"]["status"], "starting");

    // A login meanwhile waits, told why, and gets in once the gate ended.
    let mut login = platform
        .cmd(&[
            "ssh",
            "dev",
            "--",
            "sh",
            "-c",
            "test -e gate-ended && echo after-the-gate",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut told = String::new();
    BufReader::new(login.stderr.take().unwrap())
        .read_line(&mut told)
        .unwrap();
    assert!(told.contains("login waits for its start scripts"), "{told}");
    fs::write(home.join("release-gate"), "").unwrap();
    let login = login.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&login.stdout);
    assert!(
        login.status.success() && said.contains("after-the-gate"),
        "{said}"
    );
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let ready = Instant::now();
    assert!(home.join("gate-ended").exists());

    // A failing script that does not block login: failed, the agent ready.
    wait_for("the failing script's end", Duration::from_secs(30), || {
        script_named(&platform, "fails")["state"] == "failed"
    });
    let failed = script_named(&platform, "fails");
    assert_eq!(failed["exit_status"], 7, "{failed}");
    let listed = platform.run(&["scripts", "dev"]).ok();
    assert!(listed.stdout.contains("failed (exit 7)"), "{listed}");
    let log = platform.run(&["scripts", "dev", "--log", "fails"]).ok();
    assert_eq!(log.stdout, "broken\n", "{log}");
    // The dashboard shows the same: the table, and the script's log.
    let page = platform.dashboard_page("alice", "correct horse battery", "/workspaces/alice/dev");
    assert!(page.contains("<h2>Scripts</h2>"), "{page}");
    let link = "/workspaces/alice/dev/scripts/log?agent=main%5B0%5D&amp;script=fails";
    assert!(page.contains(link), "no link to the log in:\n{page}");
    let log_page = platform.dashboard_page(
        "alice",
        "correct horse battery",
        "/workspaces/alice/dev/scripts/log?agent=main%5B0%5D&script=fails",
    );
    assert!(
        log_page.contains("<pre class=\"log\">broken\n</pre>"),
        "{log_page}"
    );
    assert_eq!(platform.show("dev")["agent"]["status"], "ready");
    // The example template's own start script.
    wait_for("the example's script", Duration::from_secs(30), || {
        script_named(&platform, "welcome")["state"] == "succeeded"
    });
    let welcome = platform.run(&["scripts", "dev", "--log", "welcome"]).ok();
    assert!(
        welcome
            .stdout
            .starts_with("welcome, the workspace started at "),
        "{welcome}"
    );
    platform
        .run(&["scripts", "dev", "--log", "nope"])
        .fails_with(1, &["workspace \"dev\" has no script \"nope\""]);

    // Every 2 s, each run 3 s long: at least twice in 10 s, never two at once.
    wait_for(
        "two cron runs",
        Duration::from_secs(10).saturating_sub(ready.elapsed()) + Duration::from_secs(1),
        || starts(&home) >= 2,
    );
    wait_for("a third cron run", Duration::from_secs(20), || {
        starts(&home) >= 3
    });
    let ticks = fs::read_to_string(home.join("tick.log")).unwrap();
    assert!(!ticks.contains("overlap"), "{ticks}");
    assert!(script_named(&platform, "tick")["runs"].as_i64().unwrap() >= 3);

    // The stop script wrote into the volume before the stop ended.
    assert!(!home.join("saved-by-stop").exists());
    platform.run(&["stop", "dev"]).ok();
    assert_eq!(
        fs::read_to_string(home.join("saved-by-stop")).unwrap(),
        "saved\n"
    );
    let log = platform.run(&["builds", "logs", "dev", "2"]).ok();
    assert!(
        log.stdout
            .contains("asking agent main[0] to run its stop scripts (up to 60 s)"),
        "{log}"
    );
    for needle in [
        "agent main[0]: the stop scripts ended; the build goes on",
        "main[0] | [saver] succeeded",
    ] {
        assert!(
            log.stdout.contains(needle),
            "{needle:?} not in the log:\n{log}"
        );
    }
}

#[test]
fn bad_scripts_fail_at_plan_time_in_one_line() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let cases = [
        (
            "  cron = \"*/2 * * * *\"",
            "abode_script cron `*/2 * * * *` has 5 fields; expected 6",
        ),
        (
            "  run_on_start = true\n  timeout      = 0",
            "abode_script timeout must be more than 0 seconds, not 0",
        ),
        (
            "",
            "abode_script never runs: set run_on_start, run_on_stop or cron",
        ),
    ];
    for (index, (settings, needle)) in cases.into_iter().enumerate() {
        let mut text = example_with(&[]);
        text.push_str(&script("bad", settings, "    true"));
        let name = format!("bad{index}");
        let dir = platform.root().join(format!("templates/{name}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("main.tf"), &text).unwrap();
        let pushed = platform.run(&["templates", "push", &name, "-d", dir.to_str().unwrap()]);
        let refused = if pushed.code == Some(0) {
            // The import plan has no agent (count 0): the workspace's plan refuses.
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

    // An agent_id that is no agent's: refused when the plan is judged.
    let mut text = example_with(&[]);
    text.push_str(
        &script("lost", "  run_on_start = true", "    true")
            .replace("abode_agent.main[0].id", "\"no-such-agent\""),
    );
    push(&platform, "lost", 1, &text);
    let failed = platform.run(&["create", "dev2", "--template", "lost"]);
    assert_eq!(failed.code, Some(1), "{failed}");
    let log = platform.run(&["builds", "logs", "dev2", "1"]).ok();
    let said = format!("{failed}\n{log}");
    assert!(
        said.contains("abode_script.lost[0]: agent_id `no-such-agent` is the id of no abode_agent of this workspace; nothing was applied"),
        "{said}"
    );
}
