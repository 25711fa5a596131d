//! Security promises of the running platform that no other walk checks: what
//! the server keeps on disk is private to the server's user.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::os::unix::fs::PermissionsExt;

use util::Platform;

/// The data dir holds workspace volumes (home disks), process logs and the
/// provider mirror beside the database: other local users must not read it.
#[test]
fn the_data_dir_is_private_to_the_server_user() {
    let platform = Platform::start();
    let mode = std::fs::metadata(platform.data_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700, "data dir mode is {mode:o}");
}

/// Terraform runs (and so providers and templates) get only what Terraform
/// needs of the server's environment and what the operator passes with
/// `--terraform-env`; never the server's own configuration or anything else.
#[test]
fn templates_see_only_the_environment_the_operator_passes() {
    util::require_terraform();
    let platform = Platform::start_with_env(
        &["--terraform-env", "CLOUD_*"],
        &[
            ("CLOUD_TOKEN", "cloud-credential"),
            ("SERVER_SECRET", "server-only"),
            ("ABODE_CONFIRMATION_TIMEOUT", "86400"),
        ],
    );
    platform.login_owner();
    let seen = platform.outside().join("seen-env");
    let dir = platform.root().join("templates/env");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.tf"),
        format!(
            r#"resource "terraform_data" "env" {{
  provisioner "local-exec" {{
    command = "env > {}"
  }}
}}
"#,
            seen.display()
        ),
    )
    .unwrap();
    platform
        .run(&["templates", "push", "env", "-d", dir.to_str().unwrap()])
        .ok();
    platform.run(&["create", "dev", "--template", "env"]).ok();
    let env = std::fs::read_to_string(&seen).unwrap();
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    assert!(env.contains("CLOUD_TOKEN=cloud-credential"), "{env}");
    assert!(names.contains(&"PATH"), "{env}");
    assert!(!env.contains("server-only"), "{env}");
    assert!(!names.contains(&"ABODE_CONFIRMATION_TIMEOUT"), "{env}");

    // Reserved names are refused at start, with one line.
    let refused = std::process::Command::new(util::abode_bin())
        .args(["server", "--terraform-env", "ABODE_DATABASE_URL"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("never passed"), "{stderr}");
}

/// Plan JSON can hold secrets: the server keeps it only for the newest
/// builds of each workspace (`--plan-retention`), and a build whose plan JSON
/// went says so in its log.
#[test]
fn plan_json_is_kept_only_for_the_newest_builds() {
    util::require_terraform();
    let platform = Platform::start_with(&["--plan-retention", "1"]);
    platform.login_owner();
    let minimal = util::fixture("minimal");
    platform
        .run(&[
            "templates",
            "push",
            "minimal",
            "-d",
            minimal.to_str().unwrap(),
        ])
        .ok();
    platform
        .run(&["create", "dev", "--template", "minimal"])
        .ok();
    let removed = "the plan JSON of this build was removed";
    let first = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(!first.stdout.contains(removed), "{first}");
    platform.run(&["stop", "dev"]).ok();
    let first = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(first.stdout.contains(removed), "{first}");
    let second = platform.run(&["builds", "logs", "dev", "2"]).ok();
    assert!(!second.stdout.contains(removed), "{second}");
}
