//! `abode delete WS --orphan`: the way out for a workspace that no build can
//! delete any more. Owners only; nothing runs; what its last state names is
//! listed, and the state stays readable (owners, to a new private file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::os::unix::fs::PermissionsExt;

use util::{fixture, require_terraform, Platform};

#[test]
fn an_undeletable_workspace_is_removed_without_terraform_and_its_state_kept() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("undeletable");
    platform
        .run(&[
            "templates",
            "push",
            "stuck",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    platform.run(&["create", "dev", "--template", "stuck"]).ok();
    let delete = platform.run(&["delete", "dev"]);
    assert_eq!(delete.code, Some(1), "{delete}");

    // Not for members, not even template-admins.
    let admin = platform.login_new_user("tina", "template-admin");
    platform
        .run_as(&admin, &["delete", "alice/dev", "--orphan"], None)
        .fails_with(1, &["that needs the owner role"]);

    let orphaned = platform.run(&["delete", "dev", "--orphan"]).ok();
    assert!(
        orphaned.stdout.contains("  terraform_data.stuck"),
        "{orphaned}"
    );
    assert!(
        orphaned
            .stdout
            .contains("abode workspaces state dev --file dev.tfstate"),
        "{orphaned}"
    );
    platform
        .run(&["delete", "dev", "--orphan"])
        .fails_with(1, &["already deleted"]);
    let listed = platform.run(&["list", "--output", "json"]).ok().json();
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");

    let file = platform.root().join("dev.tfstate");
    platform
        .run(&[
            "workspaces",
            "state",
            "dev",
            "--file",
            file.to_str().unwrap(),
        ])
        .ok();
    let state = std::fs::read_to_string(&file).unwrap();
    assert!(state.contains("\"stuck\""), "{state}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    platform
        .run(&[
            "workspaces",
            "state",
            "dev",
            "--file",
            file.to_str().unwrap(),
        ])
        .fails_with(1, &["cannot create"]);
    platform
        .run_as(
            &admin,
            &["workspaces", "state", "alice/dev", "--file", "/dev/null"],
            None,
        )
        .fails_with(1, &["that needs the owner role"]);
    let audit = platform.run(&["audit", "--output", "json"]).ok().json();
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["action"].as_str())
        .collect();
    assert!(actions.contains(&"workspace.orphan"), "{actions:?}");
    assert!(actions.contains(&"workspace.state_read"), "{actions:?}");
}
