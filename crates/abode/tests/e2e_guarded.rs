//! Guarded builds through the real CLI, server, Terraform and provider: a
//! protected resource is never destroyed or replaced outside a delete unless
//! someone allowed to confirm said yes to that exact plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use util::{
    example_with, fixture, only_subdir, printed_digest, push_template as push, require_terraform,
    sqlite_execute, Platform, NAME_NOT_KEPT,
};

const RENAME: (&str, &str) = ("name = \"home-${", "name = \"home2-${");
const BLOCK: (&str, &str) = ("mode        = \"confirm\"", "mode        = \"block\"");

/// The example's `abode_protect` block removed.
fn example_without_protect(edits: &[(&str, &str)]) -> String {
    let text = example_with(edits);
    let start = text.find("resource \"abode_protect\" \"home\"").unwrap();
    let end = start + text[start..].find("\n}\n").unwrap() + 3;
    format!("{}{}", &text[..start], &text[end..])
}

fn latest_build(platform: &Platform, workspace: &str) -> serde_json::Value {
    platform.show(workspace)["latest_build"].clone()
}

/// Creates `dev` from the example and writes a file into its volume.
fn workspace_with_a_file(platform: &Platform, main_tf: &str) -> PathBuf {
    push(platform, "local", 1, main_tf);
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();
    volume
}

#[test]
fn renamed_protected_volume_waits_for_a_confirmation_of_that_exact_plan() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[NAME_NOT_KEPT, RENAME]),
    );

    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home"), "{held}");
    assert!(held.stderr.contains("name"), "{held}");
    assert!(
        held.stderr.contains("abode builds confirm dev 2 --digest"),
        "{held}"
    );
    let digest = printed_digest(&held);
    let build = latest_build(&platform, "dev");
    assert_eq!(build["status"], "awaiting_confirmation");
    assert_eq!(build["plan_digest"], digest.as_str());
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );

    // The held build holds the workspace.
    platform.run(&["stop", "dev"]).fails_with(1, &["dev"]);
    // A digest of the wrong shape is refused before asking the server; a
    // well-formed wrong one by the server; neither confirms anything.
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", "0000"])
        .fails_with(2, &["64 hex characters"]);
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &"0".repeat(64)])
        .fails_with(1, &["digest"]);
    assert_eq!(
        latest_build(&platform, "dev")["status"],
        "awaiting_confirmation"
    );

    // A member may not confirm someone else's build.
    let bob = platform.login_new_user("bob", "member");
    let by_bob = platform.run_as(
        &bob,
        &["builds", "confirm", "alice/dev", "2", "--digest", &digest],
        None,
    );
    assert_eq!(by_bob.code, Some(1), "{by_bob}");
    assert_eq!(
        latest_build(&platform, "dev")["status"],
        "awaiting_confirmation"
    );

    // The owner confirms what was shown: the volume is replaced.
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .ok();
    assert!(
        !volume.exists(),
        "the confirmed replacement kept the old volume"
    );
    let build = latest_build(&platform, "dev");
    assert_eq!(build["status"], "succeeded");
    assert_eq!(build["confirmed_by"], "alice");
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .fails_with(1, &["not awaiting confirmation"]);

    let audit = platform
        .run(&["audit", "--workspace", "dev", "-o", "json"])
        .ok()
        .json();
    let confirmed = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["action"] == "build.confirm" && event["outcome"] == "success")
        .unwrap_or_else(|| panic!("no build.confirm event: {audit:#}"));
    assert_eq!(confirmed["actor"], "alice");
    assert!(
        confirmed["details"].as_str().unwrap().contains(&digest),
        "{confirmed:#}"
    );
    let text = platform.run(&["audit"]).ok().stdout;
    assert!(text.starts_with("TIME"), "{text}");
    // Members see nothing of other users' workspaces.
    let seen_by_bob = platform
        .run_as(&bob, &["audit", "-o", "json"], None)
        .ok()
        .json();
    let leaked: Vec<&serde_json::Value> = seen_by_bob
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| {
            event["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("alice/"))
        })
        .collect();
    assert!(leaked.is_empty(), "bob sees alice's events: {leaked:#?}");
    platform.run(&["delete", "dev"]).ok();
}

/// A workspace moves to a version only when a build of it succeeds: a held
/// update that is canceled leaves it on its version, with its agent, and its
/// next stop plans the version it runs (nothing held).
#[test]
fn a_canceled_held_update_leaves_the_workspace_on_its_version() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[NAME_NOT_KEPT, RENAME]),
    );

    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let shown = platform.show("dev");
    assert_eq!(shown["template_version"], 1, "{shown:#}");
    assert_eq!(shown["latest_build"]["template_version"], 2, "{shown:#}");

    platform.run(&["builds", "cancel", "dev", "2"]).ok();
    let shown = platform.show("dev");
    assert_eq!(shown["template_version"], 1, "{shown:#}");
    assert_eq!(shown["latest_build"]["status"], "canceled", "{shown:#}");

    // The stop plans version 1, which it runs: nothing to confirm.
    platform.run(&["stop", "dev"]).ok();
    let build = latest_build(&platform, "dev");
    assert_eq!(
        (build["status"].as_str(), build["template_version"].as_i64()),
        (Some("succeeded"), Some(1)),
        "{build:#}"
    );
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    // Builds say who asked and why.
    let builds = platform
        .run(&["builds", "list", "dev", "-o", "json"])
        .ok()
        .json();
    for build in builds.as_array().unwrap() {
        assert_eq!(
            (build["initiator"].as_str(), build["reason"].as_str()),
            (Some("alice"), Some("initiator")),
            "{build:#}"
        );
    }
}

/// Without `--digest` and off a terminal nobody can have read the plan: the
/// CLI refuses (usage) and prints the command to run once someone has.
#[test]
fn confirm_without_a_digest_off_a_terminal_prints_the_command_and_applies_nothing() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[NAME_NOT_KEPT, RENAME]),
    );
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);

    let refused = platform
        .run(&["builds", "confirm", "dev", "2"])
        .fails_with(2, &["terminal", "nothing was confirmed"]);
    assert_eq!(
        latest_build(&platform, "dev")["status"],
        "awaiting_confirmation"
    );
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    let line = refused
        .stderr
        .lines()
        .find(|line| line.starts_with("error:"))
        .unwrap();
    let command = line
        .split("then run: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no command in {line:?}"));
    let expected = format!("abode builds confirm dev 2 --digest {digest}");
    assert_eq!(command, expected, "{refused}");
    assert_eq!(digest.len(), 64, "{digest}");

    // The printed command, run as printed, applies the plan.
    let words: Vec<&str> = command.split_whitespace().skip(1).collect();
    platform.run(&words).ok();
    assert!(!volume.exists(), "the confirmed plan kept the old volume");
    assert_eq!(latest_build(&platform, "dev")["status"], "succeeded");
    platform.run(&["delete", "dev"]).ok();
}

/// On a terminal, without `--digest`, the CLI shows the held plan and its
/// digest and applies it only when the answer is `yes`.
#[test]
fn confirm_on_a_terminal_shows_the_plan_and_applies_only_after_yes() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[NAME_NOT_KEPT, RENAME]),
    );
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);

    for answer in ["no\n", "YES please\n", ""] {
        let declined = platform.run_on_terminal(&["builds", "confirm", "dev", "2"], answer);
        assert_eq!(declined.code, Some(1), "answer {answer:?}: {declined}");
        // What Terraform wants to destroy and why, and the digest, came first.
        let screen = &declined.stdout;
        assert!(screen.contains("-/+ abode_volume.home"), "{declined}");
        assert!(screen.contains("forces replacement"), "{declined}");
        assert!(
            screen.contains("protected by abode_protect.home"),
            "{declined}"
        );
        assert!(
            screen.contains(&format!("Plan digest: {digest}")),
            "{declined}"
        );
        assert!(screen.contains("Type yes"), "{declined}");
        assert!(screen.contains("nothing was applied"), "{declined}");
        assert_eq!(
            latest_build(&platform, "dev")["status"],
            "awaiting_confirmation"
        );
        assert_eq!(
            fs::read_to_string(volume.join("notes.txt")).unwrap(),
            "keep me\n"
        );
    }

    let confirmed = platform.run_on_terminal(&["builds", "confirm", "dev", "2"], "yes\n");
    assert_eq!(confirmed.code, Some(0), "{confirmed}");
    assert!(!volume.exists(), "the confirmed plan kept the old volume");
    let build = latest_build(&platform, "dev");
    assert_eq!(build["status"], "succeeded");
    assert_eq!(build["confirmed_by"], "alice");
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn block_mode_fails_the_build_and_can_never_be_confirmed() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[BLOCK]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[BLOCK, NAME_NOT_KEPT, RENAME]),
    );

    let blocked = platform.run(&["update", "dev"]);
    assert_eq!(blocked.code, Some(4), "{blocked}");
    assert!(blocked.stderr.contains("blocked"), "{blocked}");
    assert!(blocked.stderr.contains("abode_volume.home"), "{blocked}");
    assert_eq!(latest_build(&platform, "dev")["status"], "failed");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &"a".repeat(64)])
        .fails_with(1, &["never be confirmed"]);
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn remembered_protection_outlives_the_annotation_until_released() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    let protections = platform
        .run(&["workspaces", "protections", "dev", "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        protections[0]["address"], "abode_volume.home",
        "{protections:#}"
    );
    push(
        &platform,
        "local",
        2,
        &example_without_protect(&[NAME_NOT_KEPT, RENAME]),
    );

    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    platform.run(&["builds", "cancel", "dev", "2"]).ok();
    assert_eq!(latest_build(&platform, "dev")["status"], "canceled");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );

    let bob = platform.login_new_user("bob", "member");
    platform
        .run_as(
            &bob,
            &["workspaces", "unprotect", "alice/dev", "abode_volume.home"],
            None,
        )
        .fails_with(1, &[]);
    platform
        .run(&["workspaces", "unprotect", "dev", "abode_volume.home"])
        .ok();
    let table = platform
        .run(&["workspaces", "protections", "dev"])
        .ok()
        .stdout;
    assert!(!table.contains("abode_volume.home"), "{table}");
    platform.run(&["update", "dev"]).ok();
    assert!(!volume.exists(), "the released volume was not replaced");
    let audit = platform.run(&["audit", "-o", "json"]).ok().json();
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["action"] == "protection.release" && event["actor"] == "alice"),
        "{audit:#}"
    );
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn volume_under_start_count_by_mistake_holds_the_stop() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("count-volume");
    platform
        .run(&[
            "templates",
            "push",
            "counted",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    platform
        .run(&["create", "dev", "--template", "counted"])
        .ok();
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();
    let held = platform.run(&["stop", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home[0]"), "{held}");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    platform.run(&["builds", "cancel", "dev", "2"]).ok();
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn sensitive_value_forcing_a_replacement_never_shows() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let first = fs::read_to_string(fixture("sensitive").join("main.tf")).unwrap();
    let second = first.replace("FIRST-SECRET-VALUE-1f2e", "SECOND-SECRET-VALUE-9c8d");
    push(&platform, "vault", 1, &first);
    let created = platform.run(&["create", "dev", "--template", "vault"]).ok();
    push(&platform, "vault", 2, &second);
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("terraform_data.vault"), "{held}");

    let outputs = [
        created.to_string(),
        held.to_string(),
        platform
            .run(&["builds", "logs", "dev", "1"])
            .ok()
            .to_string(),
        platform
            .run(&["builds", "logs", "dev", "2"])
            .ok()
            .to_string(),
        platform
            .run(&["show", "dev", "-o", "json"])
            .ok()
            .to_string(),
        platform
            .run(&["builds", "list", "dev", "-o", "json"])
            .ok()
            .to_string(),
        platform.run(&["audit", "-o", "json"]).ok().to_string(),
        platform.server_log(),
    ];
    for output in outputs {
        for secret in ["FIRST-SECRET-VALUE-1f2e", "SECOND-SECRET-VALUE-9c8d"] {
            assert!(!output.contains(secret), "{secret} leaked:\n{output}");
        }
    }
    platform.run(&["builds", "cancel", "dev", "2"]).ok();
    platform.run(&["delete", "dev"]).ok();
}

/// The deadline holds by itself: a confirmation that arrives after it is
/// refused even if the server has not yet swept the build away.
#[test]
fn confirmation_after_the_deadline_is_refused_before_the_sweep() {
    require_terraform();
    let platform = Platform::start_with(&["--confirmation-timeout", "3600"]);
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[NAME_NOT_KEPT, RENAME]),
    );
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);

    // The deadline (an hour, swept every 10 s) passes by the server's clock
    // (less than a day: the CLI's session must not expire with it).
    platform.advance_clock(Duration::from_secs(2 * 60 * 60));

    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .fails_with(1, &["expired"]);
    assert_ne!(latest_build(&platform, "dev")["status"], "succeeded");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    // The sweeper may or may not have ended it by now.
    let _ = platform.run(&["builds", "cancel", "dev", "2"]);
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn confirmation_after_the_state_changed_is_refused() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let volume = workspace_with_a_file(&platform, &example_with(&[]));
    push(
        &platform,
        "local",
        2,
        &example_with(&[NAME_NOT_KEPT, RENAME]),
    );
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);

    // The stored state changes behind the held plan's back (as a restore or a
    // manual repair would do); a trailing blank keeps it valid JSON.
    sqlite_execute(
        &platform,
        "UPDATE workspace_states SET state = CAST(state || ' ' AS BLOB)",
    );

    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .fails_with(
            1,
            &["changed since this plan was made", "start the build again"],
        );
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    platform.run(&["builds", "cancel", "dev", "2"]).ok();
    platform.run(&["delete", "dev"]).ok();
}
