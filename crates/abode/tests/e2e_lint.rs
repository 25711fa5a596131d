//! The template lint through the real binary: `abode templates lint` on a
//! folder (findings, exit statuses 0, 1 and 2, JSON), and against a real
//! server and Terraform, the lint at push: findings printed, `--strict`
//! refusing an error in one line before anything is stored, and
//! `templates versions show` listing what the version keeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::{Path, PathBuf};
use std::process::Command;

use util::{abode_bin, repo_root, require_terraform, Platform, Run};

const STABLE_NAME: &str = r#"name = "home-${data.abode_workspace.me.id}""#;
const OWNER_NAME: &str = r#"name = "home-${data.abode_workspace_owner.me.name}""#;

fn example() -> PathBuf {
    repo_root().join("examples/local-workspace")
}

/// The example template with its volume named after the owner: renaming the
/// owner would replace the home volume with an empty one.
fn hazardous_template(root: &Path) -> PathBuf {
    let main = std::fs::read_to_string(example().join("main.tf")).unwrap();
    assert!(
        main.contains(STABLE_NAME),
        "the example changed its volume name"
    );
    let dir = root.join("hazard");
    std::fs::create_dir_all(&dir).unwrap();
    let main = util::name_not_kept(&main).replace(STABLE_NAME, OWNER_NAME);
    std::fs::write(dir.join("main.tf"), main).unwrap();
    dir
}

/// The line of `main.tf` where the volume's name is written.
fn name_line(dir: &Path) -> usize {
    let main = std::fs::read_to_string(dir.join("main.tf")).unwrap();
    main.lines().position(|l| l.contains(OWNER_NAME)).unwrap() + 1
}

fn lint(args: &[&str]) -> Run {
    let output = Command::new(abode_bin())
        .args(["templates", "lint"])
        .args(args)
        .env_remove("ABODE_URL")
        .env_remove("ABODE_TOKEN")
        .output()
        .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        command: format!("abode templates lint {}", args.join(" ")),
    }
}

#[test]
fn lint_reports_findings_with_documented_exit_statuses() {
    let root = tempfile::tempdir().unwrap();
    let bad = hazardous_template(root.path());
    let line = name_line(&bad);

    // The example is clean: exit 0.
    let clean = lint(&[example().to_str().unwrap()]).ok();
    assert!(
        clean.stdout.trim_end().ends_with(": no findings"),
        "{clean}"
    );

    // A volume named after its owner: exit 1, the finding where it is written.
    let found = lint(&[bad.to_str().unwrap()]);
    assert_eq!(found.code, Some(1), "{found}");
    assert!(
        found.stdout.contains(&format!(
            "main.tf:{line}:3: error persistent-identity-mutable: abode_volume.home (name)"
        )),
        "{found}"
    );
    assert!(
        found.stdout.contains("  why: ") && found.stdout.contains("  fix: "),
        "{found}"
    );
    assert!(found.stdout.trim_end().ends_with(": 1 error"), "{found}");

    // The same as JSON.
    let json = lint(&[bad.to_str().unwrap(), "--output", "json"]);
    assert_eq!(json.code, Some(1), "{json}");
    let report = json.json();
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["errors"], 1);
    assert_eq!(report["findings"][0]["rule"], "persistent-identity-mutable");
    assert_eq!(report["findings"][0]["line"], line);

    // Only warnings: exit 0.
    let unprotected = root.path().join("unprotected");
    std::fs::create_dir_all(&unprotected).unwrap();
    std::fs::write(
        unprotected.join("main.tf"),
        "resource \"docker_volume\" \"data\" {\n  name = \"data\"\n}\n",
    )
    .unwrap();
    let warned = lint(&[unprotected.to_str().unwrap()]).ok();
    assert!(
        warned
            .stdout
            .contains("warning persistent-unprotected: docker_volume.data"),
        "{warned}"
    );

    // A type added by flag is judged like the built-in ones.
    let custom = root.path().join("custom");
    std::fs::create_dir_all(&custom).unwrap();
    std::fs::write(
        custom.join("main.tf"),
        "data \"abode_workspace\" \"me\" {}\nresource \"lxc_disk\" \"d\" {\n  name = data.abode_workspace.me.name\n}\n",
    )
    .unwrap();
    lint(&[custom.to_str().unwrap()]).ok();
    let flagged = lint(&[
        custom.to_str().unwrap(),
        "--persistent-type",
        "lxc_disk=name",
    ]);
    assert_eq!(flagged.code, Some(1), "{flagged}");

    // Unreadable input: exit 2, one error line.
    let broken = root.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("main.tf"),
        "resource \"abode_volume\" \"v\" {\n  name = [\n}\n",
    )
    .unwrap();
    lint(&[broken.to_str().unwrap()]).fails_with(2, &["main.tf:3:1: syntax error"]);
    lint(&[root.path().join("missing").to_str().unwrap()]).fails_with(2, &["cannot read"]);
    lint(&[bad.to_str().unwrap(), "--persistent-type", "no spaces"])
        .fails_with(2, &["--persistent-type"]);
}

#[test]
fn push_lints_strict_refuses_and_the_version_keeps_its_findings() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let bad = hazardous_template(platform.root());
    let line = name_line(&bad);
    let bad_dir = bad.to_str().unwrap();

    // --strict: refused in one line, before anything is stored.
    platform
        .run(&["templates", "push", "home", "-d", bad_dir, "--strict"])
        .fails_with(
            1,
            &[
                "not pushed",
                "strict",
                "1 error",
                "persistent-identity-mutable",
            ],
        );
    platform
        .run(&["templates", "versions", "list", "home"])
        .fails_with(1, &["not found"]);

    // A template the lint cannot read is refused too, with the lint's line,
    // before Terraform runs.
    let broken = platform.root().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("main.tf"),
        "resource \"abode_volume\" \"v\" {\n  name = [\n}\n",
    )
    .unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "broken",
            "-d",
            broken.to_str().unwrap(),
            "--strict",
        ])
        .fails_with(
            1,
            &["strict push needs a lint", "main.tf:3:1: syntax error"],
        );

    // Without it: pushed, the findings printed.
    let pushed = platform
        .run(&["templates", "push", "home", "-d", bad_dir])
        .ok();
    let finding =
        format!("main.tf:{line}:3: error persistent-identity-mutable: abode_volume.home (name)");
    assert!(pushed.stdout.contains(&finding), "{pushed}");
    assert!(pushed.stdout.contains("Lint: 1 error"), "{pushed}");

    // The version keeps them.
    let shown = platform
        .run(&["templates", "versions", "show", "home", "1"])
        .ok();
    assert!(shown.stdout.contains("Lint:       1 error"), "{shown}");
    assert!(shown.stdout.contains(&finding), "{shown}");
    let json = platform
        .run(&["templates", "versions", "show", "home", "1", "-o", "json"])
        .ok()
        .json();
    assert_eq!(json["version"]["number"], 1);
    assert_eq!(json["lint"]["errors"], 1);
    assert_eq!(
        json["lint"]["findings"][0]["rule"],
        "persistent-identity-mutable"
    );
    assert_eq!(json["lint"]["findings"][0]["resource"], "abode_volume.home");

    // The clean example passes a strict push and keeps "no findings".
    let clean = platform
        .run(&[
            "templates",
            "push",
            "home",
            "-d",
            example().to_str().unwrap(),
            "--strict",
        ])
        .ok();
    assert!(clean.stdout.contains("Lint: no findings"), "{clean}");
    let json = platform
        .run(&["templates", "versions", "show", "home", "2", "-o", "json"])
        .ok()
        .json();
    assert_eq!(json["lint"]["findings"], serde_json::json!([]));
    platform
        .run(&["templates", "versions", "show", "home", "3"])
        .fails_with(1, &["has no version 3"]);

    // Activating a version with findings reminds of them; a clean one does not.
    let activated = platform
        .run(&["templates", "versions", "activate", "home", "1"])
        .ok();
    assert!(
        activated
            .stderr
            .contains("warning: version 1 has lint findings: 1 error"),
        "{activated}"
    );
    let activated = platform
        .run(&["templates", "versions", "activate", "home", "2"])
        .ok();
    assert!(!activated.stderr.contains("warning"), "{activated}");
}
