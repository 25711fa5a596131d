//! `abode_env` and `abode stat` (issue 48), end to end with the real agent of
//! the example template: a variable an `abode_env` sets is in every process
//! the agent starts (its startup script, an SSH session), its value hidden
//! from logs and answers; `abode` is on their PATH; two `abode_env`s setting
//! one name for one agent fail the build at plan time, naming both; and
//! `abode stat` measures the workspace from outside (through the server, by
//! the agent) and inside (in the startup script and an SSH session), its
//! memory figure within 20% of what /proc says for the agent's processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::time::Duration;

use serde_json::Value;
use util::{example_with, only_subdir, push_template as push, require_terraform, Platform};

const SECRET: &str = "s3cr3t-value-4242";

/// The example's agent with a startup script that writes what it sees.
const STARTUP: (&str, &str) = (
    "  dir   = abode_volume.home.path\n",
    "  dir   = abode_volume.home.path\n  startup_script = <<-EOT\n    printf '%s\\n' \"$EDITOR_CHOICE\" > env-seen.txt\n    command -v abode > abode-seen.txt\n    abode stat --output json > stat-inside.json 2> stat-inside.err\n  EOT\n",
);

fn env_resources(extra: &str) -> String {
    format!(
        "{}\nresource \"abode_env\" \"editor\" {{\n  count    = data.abode_workspace.me.start_count\n  agent_id = abode_agent.main[0].id\n  name     = \"EDITOR_CHOICE\"\n  value    = \"vim\"\n}}\n\nresource \"abode_env\" \"token\" {{\n  count    = data.abode_workspace.me.start_count\n  agent_id = abode_agent.main[0].id\n  name     = \"API_TOKEN\"\n  value    = \"{SECRET}\"\n}}\n{extra}",
        example_with(&[STARTUP])
    )
}

/// Each process the workspace sees in /proc but the shell reading it: its
/// pid, parent and resident memory in KiB, one per line.
const PROC_LISTING: &str = r#"for d in /proc/[0-9]*; do
  p=${d#/proc/}; [ "$p" = "$$" ] && continue
  s=$(cat "$d/stat" 2>/dev/null) || continue
  r=0
  while read -r k v rest; do [ "$k" = "VmRSS:" ] && r=$v; done < "$d/status"
  set -- ${s##*) }
  echo "$p $2 $r"
done"#;

/// Resident memory of `root` and every process under it, in bytes, from
/// [`PROC_LISTING`]'s lines.
fn tree_rss(listing: &str, root: u32) -> u64 {
    let processes: Vec<(u32, u32, u64)> = listing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((
                words.next()?.parse().ok()?,
                words.next()?.parse().ok()?,
                words.next()?.parse().ok()?,
            ))
        })
        .collect();
    let mut tree = vec![root];
    let mut index = 0;
    while index < tree.len() {
        let pid = tree[index];
        tree.extend(processes.iter().filter(|p| p.1 == pid).map(|p| p.0));
        index += 1;
    }
    processes
        .iter()
        .filter(|p| tree.contains(&p.0))
        .map(|p| p.2 * 1024)
        .sum()
}

fn plausible(stat: &Value) {
    let memory = stat["memory"]["used_bytes"].as_u64().unwrap();
    let limit = stat["memory"]["limit_bytes"].as_u64().unwrap();
    assert!(memory > 1_000_000 && memory < limit, "{stat:#}");
    let cores = stat["cpu"]["used_cores"].as_f64().unwrap();
    let cpu_limit = stat["cpu"]["limit_cores"].as_f64().unwrap();
    assert!(cores >= 0.0 && cores <= cpu_limit * 1.05, "{stat:#}");
    let disk = &stat["disk"];
    let total = disk["total_bytes"].as_u64().unwrap();
    assert!(
        total > 0 && disk["used_bytes"].as_u64().unwrap() <= total,
        "{stat:#}"
    );
    assert!(
        disk["available_bytes"].as_u64().unwrap() <= total,
        "{stat:#}"
    );
}

#[test]
fn abode_env_reaches_every_process_and_stat_measures_the_workspace() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push(&platform, "local", 1, &env_resources(""));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(120));
    let home = only_subdir(&platform.volumes_dir());

    // The startup script saw the variable, found `abode` on its PATH and
    // measured its workspace from inside.
    assert_eq!(
        fs::read_to_string(home.join("env-seen.txt")).unwrap(),
        "vim\n"
    );
    assert!(
        fs::read_to_string(home.join("abode-seen.txt"))
            .unwrap()
            .trim_end()
            .ends_with("/abode"),
        "{:?}",
        fs::read_to_string(home.join("abode-seen.txt"))
    );
    let inside: Value = serde_json::from_str(
        &fs::read_to_string(home.join("stat-inside.json")).unwrap_or_else(|_| {
            panic!(
                "{:?}",
                fs::read_to_string(home.join("stat-inside.err")).unwrap_or_default()
            )
        }),
    )
    .unwrap();
    plausible(&inside);
    assert_eq!(
        inside["disk"]["path"].as_str().unwrap(),
        home.to_str().unwrap()
    );

    // An SSH session: the variables, and `abode stat` by its own name.
    let seen = platform
        .run(&[
            "ssh",
            "dev",
            "--",
            "sh",
            "-c",
            "printf '%s %s' \"$EDITOR_CHOICE\" \"$ABODE_AGENT_PID\"",
        ])
        .ok();
    let mut words = seen.stdout.split_whitespace();
    assert_eq!(words.next(), Some("vim"), "{seen}");
    let agent_pid: u32 = words.next().unwrap().parse().unwrap();
    let in_session = platform
        .run(&["ssh", "dev", "--", "abode", "stat", "--output", "json"])
        .ok();
    plausible(&in_session.json());

    // From outside, through the server: the agent measures.
    let outside = platform
        .run(&["stat", "dev", "--output", "json"])
        .ok()
        .json();
    plausible(&outside);
    if outside["source"] == "proc" {
        // What /proc says inside the workspace (its own pid namespace) for
        // the agent and what it runs, the reading shell left out.
        let listing = platform
            .run(&["ssh", "dev", "--", "sh", "-c", PROC_LISTING])
            .ok();
        let by_proc = tree_rss(&listing.stdout, agent_pid) as f64;
        assert!(by_proc > 0.0, "{listing}");
        let measured = outside["memory"]["used_bytes"].as_u64().unwrap() as f64;
        eprintln!(
            "abode stat dev: {measured} bytes in use; /proc inside: {by_proc} bytes; {outside}"
        );
        assert!(
            (measured - by_proc).abs() <= by_proc * 0.2,
            "abode stat says {measured} bytes, /proc {by_proc}"
        );
    } else {
        assert_eq!(outside["source"], "cgroup", "{outside:#}");
    }
    let text = platform.run(&["stat", "dev"]).ok();
    for line in ["CPU:", "Memory:", "Disk:", "Source:"] {
        assert!(text.stdout.contains(line), "{text}");
    }

    // The value never shows: not in the build's log, nor the server's, nor
    // the workspace's answer.
    let log = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(!log.stdout.contains(SECRET), "{log}");
    assert!(!platform.server_log().contains(SECRET));
    assert!(!platform.show("dev").to_string().contains(SECRET));

    // Outside a workspace, `abode stat` needs one named.
    platform
        .cmd(&["stat"])
        .env_remove("ABODE_AGENT_PID")
        .output()
        .map(|output| {
            let run = util::Run::from_output("abode stat".into(), output);
            run.fails_with(1, &["not inside a workspace", "abode stat WS"])
        })
        .unwrap();
}

#[test]
fn two_abode_envs_setting_one_name_fail_the_build_naming_both() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let again = "\nresource \"abode_env\" \"again\" {\n  count    = data.abode_workspace.me.start_count\n  agent_id = abode_agent.main[0].id\n  name     = \"EDITOR_CHOICE\"\n  value    = \"emacs\"\n}\n";
    push(&platform, "local", 1, &env_resources(again));
    let failed = platform.run(&["create", "dev", "--template", "local"]);
    assert_eq!(failed.code, Some(1), "{failed}");
    let log = platform.run(&["builds", "logs", "dev", "1"]).ok();
    let said = format!("{failed}\n{log}");
    let refused = said
        .lines()
        .find(|line| line.contains("both set `EDITOR_CHOICE` for abode_agent.main[0].id"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        refused.contains("abode_env.editor[0]") && refused.contains("abode_env.again[0]"),
        "{refused}"
    );
    assert!(refused.contains("nothing was applied"), "{refused}");
    // Refused before anything was applied: no volume, no process.
    assert!(util::names_in(&platform.volumes_dir()).is_empty());

    // A name that is not a variable's fails the push, in one line.
    let dir = platform.root().join("templates/bad-name");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("main.tf"),
        env_resources("").replace("\"EDITOR_CHOICE\"", "\"9-LIVES\""),
    )
    .unwrap();
    platform
        .run(&["templates", "push", "bad", "-d", dir.to_str().unwrap()])
        .fails_with(1, &["abode_env name", "9-LIVES", "not a variable name"]);
}
