//! `abode plan check` as users run it: the real binary, real files, exit statuses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guard/tests")
        .join(case)
}

fn abode(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_abode"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// Runs `abode plan check ARGS` and checks the exit status and a piece of output.
fn check(args: &[&str], stdin: Option<&[u8]>, status: i32, expect: &str) {
    let out = abode(args, stdin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(status),
        "args {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let seen = if status == 1 || status == 2 {
        &stderr
    } else {
        &stdout
    };
    assert!(
        seen.contains(expect),
        "args {args:?}: expected {expect:?} in\n{seen}"
    );
    if status == 1 {
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "one-line error: {stderr}"
        );
        assert!(stdout.is_empty(), "nothing on stdout on error: {stdout}");
    }
}

#[test]
fn exit_status_follows_the_decision() {
    let replace = fixture("fixtures/replace-triggers/plan.json");
    let replace = replace.to_str().unwrap();
    check(&["plan", "check", replace], None, 0, "Decision: allow");
    check(
        &["plan", "check", "--protect", "terraform_data.home", replace],
        None,
        3,
        "CONFIRMATION REQUIRED",
    );
    check(
        &[
            "plan",
            "check",
            "--protect-type",
            "terraform_data",
            "--mode",
            "block",
            replace,
        ],
        None,
        4,
        "BLOCKED",
    );
    check(
        &[
            "plan",
            "check",
            "--transition",
            "delete",
            "--protect",
            "terraform_data.home",
            replace,
        ],
        None,
        0,
        "allowed",
    );
    check(
        &[
            "plan",
            "check",
            "--format",
            "json",
            "--protect",
            "terraform_data.home",
            replace,
        ],
        None,
        3,
        "\"decision\": \"confirm\"",
    );
}

/// A claim build allows what a start build of the same plan holds or blocks, and
/// says so with the allow status; its JSON lists what the claim destroys.
#[test]
fn a_claim_is_allowed_and_lists_its_replacements() {
    let case = |name: &str| {
        fixture(&format!("fixtures/{name}/plan.json"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let protected = case("claim-protected-replace");
    let deleted = case("claim-unprotected-delete");
    let nothing = case("claim-no-destroy");
    let block = ["--protect", "terraform_data.home", "--mode", "block"];
    for (transition, plan, format, status, expect) in [
        ("start", &protected, "text", 4, "BLOCKED"),
        (
            "claim",
            &protected,
            "text",
            0,
            "-/+ terraform_data.home (replaced on claim: triggers_replace)",
        ),
        (
            "claim",
            &protected,
            "text",
            0,
            "-/+ terraform_data.cache (replaced on claim)\n",
        ),
        ("claim", &protected, "json", 0, "\"protected\": true"),
        ("claim", &protected, "json", 0, "\"transition\": \"claim\""),
        (
            "claim",
            &deleted,
            "text",
            0,
            "  - terraform_data.warmup[0] (deleted on claim)",
        ),
        ("start", &nothing, "text", 0, "Decision: allow."),
        (
            "claim",
            &nothing,
            "text",
            0,
            "no resource of the prebuilt workspace is replaced or deleted",
        ),
    ] {
        let mut args = vec!["plan", "check", "--transition", transition];
        args.extend(block);
        args.extend(["--format", format, plan]);
        check(&args, None, status, expect);
    }
}

/// A delete the system started (a dormant deletion) destroys no protected
/// resource without a person: the rules' mode holds or blocks it, with the
/// matching exit status, where a person's delete of the same plan is allowed.
/// Other transitions are judged alike whoever asks.
#[test]
fn a_delete_the_system_started_is_held_or_blocked() {
    let plan = fixture("fixtures/destroy-delete/plan.json");
    let plan = plan.to_str().unwrap();
    let protect = ["--protect", "terraform_data.home"];
    for (transition, initiator, mode, format, status, expect) in [
        (
            "delete",
            "person",
            "confirm",
            "text",
            0,
            "delete build: allowed",
        ),
        (
            "delete",
            "system",
            "confirm",
            "text",
            3,
            "delete build (started by the system): CONFIRMATION REQUIRED",
        ),
        (
            "delete",
            "system",
            "confirm",
            "text",
            3,
            "The system started this delete, not a person",
        ),
        ("delete", "system", "block", "text", 4, "BLOCKED"),
        (
            "delete",
            "system",
            "block",
            "text",
            4,
            "a person can delete the workspace, or release the protection",
        ),
        (
            "delete",
            "system",
            "block",
            "json",
            4,
            "\"initiator\": \"system\"",
        ),
        (
            "delete",
            "system",
            "block",
            "json",
            4,
            "\"outcome\": \"block\"",
        ),
        (
            "start",
            "system",
            "confirm",
            "text",
            3,
            "CONFIRMATION REQUIRED",
        ),
        ("start", "person", "block", "text", 4, "BLOCKED"),
    ] {
        let mut args = vec!["plan", "check", "--transition", transition];
        args.extend(["--initiator", initiator, "--mode", mode, "--format", format]);
        args.extend(protect);
        args.push(plan);
        check(&args, None, status, expect);
    }
    // Unprotected destroys are allowed whoever asks.
    for initiator in ["person", "system"] {
        check(
            &[
                "plan",
                "check",
                "--transition",
                "delete",
                "--initiator",
                initiator,
                plan,
            ],
            None,
            0,
            "Decision: allow. No protected resource is destroyed or replaced.",
        );
    }
    // The default is a person, whose JSON report has no `initiator`.
    let out = abode(
        &[
            "plan",
            "check",
            "--transition",
            "delete",
            "--format",
            "json",
            plan,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("initiator"));
}

#[test]
fn reads_standard_input() {
    let bytes = std::fs::read(fixture("fixtures/annotation-block/plan.json")).unwrap();
    check(
        &["plan", "check", "--transition", "stop", "-"],
        Some(&bytes),
        4,
        "BLOCKED",
    );
    check(&["plan", "check", "-"], Some(b""), 1, "the plan is empty");
}

#[test]
fn bad_input_gets_one_line_and_status_1() {
    let invalid = |name: &str| {
        fixture(&format!("invalid/{name}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    for (name, message) in [
        ("not-json.txt", "not valid JSON"),
        ("truncated.json", "truncated"),
        ("state.tfstate", "state file, not a plan"),
        ("state-show.json", "JSON of a Terraform state"),
        ("format-version-2.0.json", "unsupported plan format_version"),
    ] {
        check(&["plan", "check", &invalid(name)], None, 1, message);
    }
    check(
        &["plan", "check", "/no/such/plan.json"],
        None,
        1,
        "cannot open plan file",
    );
    check(&["plan", "check", "/"], None, 1, "is a directory");
}

#[test]
fn usage_errors_exit_2() {
    check(
        &["plan", "check", "--protect", "module.x", "p.json"],
        None,
        2,
        "invalid resource address",
    );
    check(
        &["plan", "check", "--transition", "restart", "p.json"],
        None,
        2,
        "invalid value",
    );
    check(
        &["plan", "check", "--initiator", "scheduler", "p.json"],
        None,
        2,
        "invalid value",
    );
}

/// A binary plan file is converted with the real `terraform show -json`.
#[test]
fn reads_binary_plans_through_terraform() {
    let terraform = Command::new("terraform").arg("version").output();
    assert!(
        terraform.is_ok_and(|o| o.status.success()),
        "terraform is not installed: this test needs Terraform 1.x on PATH"
    );
    let dir = std::env::temp_dir().join(format!("abode-plan-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cli.tfrc"), "").unwrap();
    std::fs::write(
        dir.join("main.tf"),
        "resource \"terraform_data\" \"home\" {\n  input = \"v1\"\n}\n",
    )
    .unwrap();
    let tf = |args: &[&str]| {
        let out = Command::new("terraform")
            .args(args)
            .current_dir(&dir)
            .env("TF_CLI_CONFIG_FILE", dir.join("cli.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "terraform {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    tf(&["init", "-no-color"]);
    tf(&["apply", "-auto-approve", "-no-color"]);
    tf(&[
        "plan",
        "-replace=terraform_data.home",
        "-out=tfplan",
        "-no-color",
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_abode"))
        .args([
            "plan",
            "check",
            "--protect",
            "terraform_data.home",
            "tfplan",
        ])
        .current_dir(&dir)
        .env("TF_CLI_CONFIG_FILE", dir.join("cli.tfrc"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("replaced because the plan was asked to replace it (-replace)"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
