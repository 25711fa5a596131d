//! A server killed with SIGKILL in the middle of a build, then started again:
//! nothing is applied twice, and what Terraform applied after the server died
//! reaches the workspace's stored state.
//!
//! The template records every provisioner run in a ledger file outside the
//! workspace, so "applied twice" is a line written twice. Terraform and its
//! providers outlive the killed server; that is part of what is tested. A
//! confirmed rename whose apply outlives the server is carried out once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use util::{assert_no_processes_left, finish, printed_digest, require_terraform, Platform};

/// What every template here starts with: the provider and the workspace.
const PRELUDE: &str = r#"terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}
"#;

/// A workspace whose apply records each step in `ledger`: `fast-G`, then
/// `slow-start-G`, 6 s, `slow-G` (G the generation), with a protected volume
/// whose name changes with `volume`. With `gate`, the plan blocks reading the
/// FIFO at that path until someone writes to it (the path depends on a data
/// source, so `terraform validate` at push does not read it; push's
/// template-import plan, whose workspace is named `dev` too, reads it, so
/// the test pushes while the gate is an ordinary file).
fn template(ledger: &Path, generation: u32, volume: &str, gate: Option<&Path>) -> String {
    let ledger = ledger.display();
    let gate = match gate {
        Some(fifo) => format!(
            r#"
resource "terraform_data" "gate" {{
  input = file("{}/${{data.abode_workspace.me.name}}.fifo")
}}
"#,
            fifo.parent().unwrap().display()
        ),
        None => String::new(),
    };
    format!(
        r#"{PRELUDE}
resource "abode_volume" "home" {{
  name = "{volume}-${{data.abode_workspace.me.id}}"
}}

resource "abode_protect" "home" {{
  resource_id = abode_volume.home.id
  mode        = "confirm"
}}

resource "terraform_data" "fast" {{
  triggers_replace = "{generation}"
  provisioner "local-exec" {{
    command = "echo fast-{generation} >> {ledger}"
  }}
}}

resource "terraform_data" "slow" {{
  depends_on       = [terraform_data.fast]
  triggers_replace = "{generation}"
  provisioner "local-exec" {{
    command = "echo slow-start-{generation} >> {ledger}; sleep 6; echo slow-{generation} >> {ledger}"
  }}
}}
{gate}"#
    )
}

fn push(platform: &Platform, version: u32, main_tf: &str) {
    let dir = platform.root().join(format!("templates/crash-v{version}"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("main.tf"), main_tf).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "crash",
            "-d",
            dir.to_str().unwrap(),
            "--activate",
        ])
        .ok();
}

fn ledger_lines(ledger: &Path) -> Vec<String> {
    fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[track_caller]
fn wait_for_ledger(platform: &Platform, ledger: &Path, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !ledger_lines(ledger).iter().any(|l| l == line) {
        assert!(
            Instant::now() < deadline,
            "the ledger never got {line:?}: {:?}\n{}",
            ledger_lines(ledger),
            platform.run(&["builds", "logs", "dev"])
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[track_caller]
fn wait_for_log(platform: &Platform, build: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let log = platform.run(&["builds", "logs", "dev", build]);
        if log.stdout.contains(text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "build {build} never logged {text:?}:\n{log}\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until build `number` of `dev` has a final status and returns it.
#[track_caller]
fn wait_until_final(platform: &Platform, number: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let build = platform.show("dev")["latest_build"].clone();
        let status = build["status"].as_str().unwrap_or("").to_string();
        if build["number"] == number && !matches!(status.as_str(), "pending" | "running") {
            return build;
        }
        assert!(
            Instant::now() < deadline,
            "build {number} never ended: {build:#}\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn no_terraform_left(platform: &Platform) {
    assert_no_processes_left(platform, "after the interrupted build ended");
}

fn setup() -> (Platform, PathBuf) {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let ledger = platform.outside().join("ledger");
    (platform, ledger)
}

#[test]
fn a_server_killed_mid_apply_leaves_terraform_to_finish_and_stores_what_it_created() {
    let (mut platform, ledger) = setup();
    push(&platform, 1, &template(&ledger, 1, "home", None));
    let create = platform.spawn(&["create", "dev", "--template", "crash"]);
    wait_for_ledger(&platform, &ledger, "slow-start-1");

    platform.kill_server();
    platform.start_server_again();
    finish(create);

    let build = wait_until_final(&platform, 1);
    assert_eq!(build["status"], "failed", "{build:#}");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.starts_with("the server stopped during terraform apply; Terraform ran on and ended without error; its state was saved"),
        "{error}"
    );
    assert_eq!(
        ledger_lines(&ledger),
        ["fast-1", "slow-start-1", "slow-1"],
        "the apply ran once, to its end"
    );
    let log = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(
        log.stdout.contains("follows it until it ends"),
        "{}",
        log.stdout
    );
    no_terraform_left(&platform);

    // Everything the orphaned apply created is in the stored state: the next
    // start creates nothing again.
    platform.run(&["start", "dev"]).ok();
    assert_eq!(ledger_lines(&ledger), ["fast-1", "slow-start-1", "slow-1"]);
    platform.run(&["delete", "dev"]).ok();
    no_terraform_left(&platform);
}

/// A workspace process started after a slow step: an apply killed during
/// the step asks the process supervisor only after its server died.
fn process_after_slow_template(ledger: &Path) -> String {
    let ledger = ledger.display();
    format!(
        r#"{PRELUDE}
resource "abode_volume" "home" {{
  name = "home-${{data.abode_workspace.me.id}}"
}}

resource "terraform_data" "slow" {{
  provisioner "local-exec" {{
    command = "echo slow-start >> {ledger}; sleep 6; echo slow >> {ledger}"
  }}
}}

resource "abode_process" "after" {{
  depends_on = [terraform_data.slow]
  command    = ["sleep", "600"]
  dir        = abode_volume.home.path
}}
"#
    )
}

/// The supervisor lives in the server: the killed server's goes with it.
/// The restarted one opens the build's socket again while it follows the
/// apply, and the provider waits for it, so the process is started and the
/// apply ends without error (before: "cannot reach the process
/// supervisor").
#[test]
fn an_apply_that_outlives_the_server_reaches_the_restarted_server_s_supervisor() {
    let (mut platform, ledger) = setup();
    push(&platform, 1, &process_after_slow_template(&ledger));
    let create = platform.spawn(&["create", "dev", "--template", "crash"]);
    wait_for_ledger(&platform, &ledger, "slow-start");
    platform.kill_server();
    platform.start_server_again();
    finish(create);

    let build = wait_until_final(&platform, 1);
    let error = build["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(
            "the server stopped during terraform apply; Terraform ran on and ended without error"
        ),
        "{build:#}\n{}",
        platform.run(&["builds", "logs", "dev", "1"])
    );
    // The process is the workspace's, in the stored state: a stop stops it
    // through the supervisor, and a start starts it again.
    platform.run(&["stop", "dev"]).ok();
    platform.run(&["start", "dev"]).ok();
    platform.run(&["delete", "dev"]).ok();
    no_terraform_left(&platform);
}

#[test]
fn a_server_killed_mid_plan_applies_nothing_and_the_workspace_builds_again() {
    let (mut platform, ledger) = setup();
    let gates = platform.outside().join("gates");
    fs::create_dir_all(&gates).unwrap();
    let fifo = gates.join("dev.fifo");
    fs::write(&fifo, "open").unwrap();
    push(&platform, 1, &template(&ledger, 1, "home", Some(&fifo)));
    fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let create = platform.spawn(&["create", "dev", "--template", "crash"]);
    wait_for_log(
        &platform,
        "1",
        "Terraform has been successfully initialized",
    );
    // Let the plan reach the gate.
    std::thread::sleep(Duration::from_millis(1500));

    platform.kill_server();
    platform.start_server_again();
    finish(create);
    wait_for_log(&platform, "1", "follows it until it ends");
    open_gate(&fifo);

    let build = wait_until_final(&platform, 1);
    assert_eq!(build["status"], "failed", "{build:#}");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "the server stopped during terraform plan; Terraform ran on and ended without error"
        ),
        "{error}"
    );
    assert!(ledger_lines(&ledger).is_empty(), "a plan applies nothing");
    no_terraform_left(&platform);

    // From now on the gate is an ordinary file: it never blocks.
    fs::remove_file(&fifo).unwrap();
    fs::write(&fifo, "open").unwrap();
    platform.run(&["start", "dev"]).ok();
    assert_eq!(ledger_lines(&ledger), ["fast-1", "slow-start-1", "slow-1"]);
}

/// Lets a plan blocked reading the FIFO go on; fails if no plan reads it
/// within a minute.
fn open_gate(fifo: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Non-blocking: without a reader the open fails (ENXIO) instead of waiting.
        match fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc_o_nonblock())
            .open(fifo)
        {
            Ok(mut writer) => {
                writer.write_all(b"open").unwrap();
                return;
            }
            Err(error) => assert!(
                Instant::now() < deadline,
                "no plan read {}: {error}",
                fifo.display()
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// O_NONBLOCK on Linux.
fn libc_o_nonblock() -> i32 {
    0o4000
}

#[test]
fn a_held_build_survives_a_crash_and_its_confirmed_apply_survives_another() {
    let (mut platform, ledger) = setup();
    push(&platform, 1, &template(&ledger, 1, "home", None));
    platform.run(&["create", "dev", "--template", "crash"]).ok();
    push(&platform, 2, &template(&ledger, 2, "home2", None));
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);

    // Killed while the build waits for a confirmation: it still waits, with
    // the same plan.
    platform.kill_server();
    platform.start_server_again();
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(
        (build["status"].as_str(), build["plan_digest"].as_str()),
        (Some("awaiting_confirmation"), Some(digest.as_str())),
        "{build:#}"
    );
    no_terraform_left(&platform);

    // Killed during the apply of the confirmed plan.
    let confirm = platform.spawn(&["builds", "confirm", "dev", "2", "--digest", &digest]);
    wait_for_ledger(&platform, &ledger, "slow-start-2");
    platform.kill_server();
    platform.start_server_again();
    finish(confirm);

    // Its Terraform ran on to success: the build succeeds (recovered) and
    // the workspace is on the confirmed version, as if the server had not
    // died.
    let build = wait_until_final(&platform, 2);
    assert_eq!(build["status"], "succeeded", "{build:#}");
    let log = platform.run(&["builds", "logs", "dev", "2"]).ok().stdout;
    assert!(log.contains("the build succeeded (recovered)"), "{log}");
    assert_eq!(platform.show("dev")["template_version"], 2);
    let applied = [
        "fast-1",
        "slow-start-1",
        "slow-1",
        "fast-2",
        "slow-start-2",
        "slow-2",
    ];
    assert_eq!(ledger_lines(&ledger), applied);
    // The confirmed plan is never applied again.
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .fails_with(1, &[]);
    no_terraform_left(&platform);

    // The next plain stop is not held: it does not plan to undo what was
    // confirmed (the replacement is in the stored state, and the version is
    // the confirmed one), and it runs nothing of the update again.
    platform.run(&["stop", "dev"]).ok();
    assert_eq!(ledger_lines(&ledger), applied);
}

/// A workspace whose volume and slow step are named after the workspace:
/// a rename replaces the (protected) volume, so it is held, and its apply
/// records `slow-start-NAME`, 6 s, `slow-NAME` in `ledger`.
fn named_template(ledger: &Path) -> String {
    let ledger = ledger.display();
    format!(
        r#"{PRELUDE}
resource "abode_volume" "home" {{
  name = "home-${{data.abode_workspace.me.name}}"
}}

resource "abode_protect" "home" {{
  resource_id = abode_volume.home.id
  mode        = "confirm"
}}

resource "terraform_data" "slow" {{
  input            = data.abode_workspace.me.name
  triggers_replace = data.abode_workspace.me.name
  provisioner "local-exec" {{
    command = "echo slow-start-${{self.input}} >> {ledger}; sleep 6; echo slow-${{self.input}} >> {ledger}"
  }}
}}
"#
    )
}

#[test]
fn a_confirmed_rename_whose_apply_outlives_the_server_renames_the_workspace_once() {
    let (mut platform, ledger) = setup();
    push(&platform, 1, &named_template(&ledger));
    platform.run(&["create", "dev", "--template", "crash"]).ok();
    let held = platform.run(&["rename", "dev", "work"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);

    // Killed during the apply of the confirmed rename.
    let confirm = platform.spawn(&["builds", "confirm", "dev", "2", "--digest", &digest]);
    wait_for_ledger(&platform, &ledger, "slow-start-work");
    platform.kill_server();
    platform.start_server_again();
    finish(confirm);

    // Its Terraform ran on to success: the rename is carried out, as if the
    // server had not died, and nothing of it runs twice.
    let deadline = Instant::now() + Duration::from_secs(120);
    let shown = loop {
        let work = platform.run(&["show", "work", "--output", "json"]);
        if work.code == Some(0) {
            let shown = work.json();
            if shown["latest_build"]["status"] == "succeeded" {
                break shown;
            }
        }
        let dev = platform.run(&["show", "dev", "--output", "json"]);
        if dev.code == Some(0) {
            let status = dev.json()["latest_build"]["status"].clone();
            assert!(
                !matches!(status.as_str(), Some("failed" | "canceled")),
                "the confirmed rename did not survive the crash: {}\n{}",
                dev.stdout,
                platform.run(&["builds", "logs", "dev", "2"])
            );
        }
        assert!(
            Instant::now() < deadline,
            "the rename never ended:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(shown["latest_build"]["number"], 2, "{shown:#}");
    let log = platform.run(&["builds", "logs", "work", "2"]).ok().stdout;
    assert!(log.contains("the build succeeded (recovered)"), "{log}");
    platform.run(&["show", "dev"]).fails_with(1, &["not found"]);
    let applied = ["slow-start-dev", "slow-dev", "slow-start-work", "slow-work"];
    assert_eq!(ledger_lines(&ledger), applied);
    // The volume is the new name's, as confirmed.
    assert!(platform.volumes_dir().join("home-work").exists());
    assert!(!platform.volumes_dir().join("home-dev").exists());
    no_terraform_left(&platform);

    // The next stop plans under the new name: nothing held, nothing of the
    // rename run again.
    platform.run(&["stop", "work"]).ok();
    assert_eq!(ledger_lines(&ledger), applied);
}
