//! Groups and template access lists from the command line, with the real
//! binary, real Terraform and a real database (SQLite, and PostgreSQL in
//! the `_on_postgres` variant): `abode groups` round trip with
//! `--output json` and one-line refusals; with two templates and two
//! groups on a server whose new templates start with an empty access list
//! (`--default-template-access none`), a member sees and creates only from
//! the template their group may use, is told the other does not exist,
//! and claims none of its prebuilt workspaces; a per-template admin pushes
//! and activates versions of that template only; a build's template reads
//! its owner's groups (`Everyone` included).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{copy_dir, fixture, require_terraform, FreshDatabase, Platform};

const FAST: &[&str] = &[
    "--prebuilds-reconcile-interval",
    "1",
    "--prebuilds-backoff",
    "1",
    "--default-template-access",
    "none",
];

#[test]
fn groups_and_template_access_on_sqlite() {
    groups_and_template_access(None);
}

#[test]
fn groups_and_template_access_on_postgres() {
    let database = FreshDatabase::create();
    groups_and_template_access(Some(&database.url));
}

fn groups_and_template_access(database_url: Option<&str>) {
    require_terraform();
    let platform = Platform::start_on(database_url, FAST);
    platform.login_owner();
    let dev = platform.login_new_user("dev", "member");
    let lead = platform.login_new_user("lead", "member");
    platform.login_new_user("op", "member");

    groups_round_trip(&platform);

    // Two templates; `secret` keeps one prebuilt workspace ready.
    let open = platform.root().join("open");
    copy_dir(&fixture("owner-groups"), &open);
    let secret = platform.root().join("secret");
    copy_dir(&fixture("owner-groups"), &secret);
    std::fs::write(
        secret.join("presets.tf"),
        "data \"abode_workspace_preset\" \"solo\" {\n  name = \"solo\"\n  prebuilds {\n    instances = 1\n  }\n}\n",
    )
    .unwrap();
    push(&platform, &platform.config_dir(), "open", &open).ok();
    push(&platform, &platform.config_dir(), "secret", &secret).ok();

    // New templates start with an empty list here: nobody but owners and
    // template admins sees them until they are granted.
    let empty = platform
        .run(&["templates", "permissions", "open", "--output", "json"])
        .ok()
        .json();
    assert_eq!(empty["permissions"], serde_json::json!([]), "{empty}");
    let listed = list_templates(&platform, &dev);
    assert!(listed.is_empty(), "{listed:?}");

    for (args, entry) in [
        (
            ["--group", "devs", "--role", "use"],
            ("open", "group", "devs", "use"),
        ),
        (
            ["--user", "lead", "--role", "admin"],
            ("open", "user", "lead", "admin"),
        ),
        (
            ["--group", "ops", "--role", "use"],
            ("secret", "group", "ops", "use"),
        ),
    ] {
        let mut command = vec!["templates", "permissions", entry.0];
        command.extend_from_slice(&args);
        command.extend_from_slice(&["--output", "json"]);
        let answer = platform.run(&command).ok().json();
        let found = answer["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == entry.1 && p["name"] == entry.2 && p["role"] == entry.3);
        assert!(found, "{answer}");
    }
    platform
        .run(&[
            "templates",
            "permissions",
            "open",
            "--group",
            "nope",
            "--role",
            "use",
        ])
        .fails_with(1, &["group \"nope\" not found"]);
    platform
        .run(&[
            "templates",
            "permissions",
            "open",
            "--user",
            "dev",
            "--role",
            "owner",
        ])
        .fails_with(2, &["owner"]);

    // A group on an access list lends its members that role: a user admin
    // (who manages groups) may not join one holding `admin` on `open`, and
    // so gain the push they are never given; a group with no template
    // entry they still manage; the owner may add them.
    let uma = platform.login_new_user("uma", "user-admin");
    platform.run(&["groups", "create", "pushers"]).ok();
    platform
        .run(&[
            "templates",
            "permissions",
            "open",
            "--group",
            "pushers",
            "--role",
            "admin",
        ])
        .ok();
    platform
        .run_as(&uma, &["groups", "members", "add", "pushers", "uma"], None)
        .fails_with(
            1,
            &["group \"pushers\" holds `admin` on template open's access list: changing its members needs `admin` there yourself, or the owner role"],
        );
    let pushers = platform
        .run(&["groups", "show", "pushers", "--output", "json"])
        .ok()
        .json();
    assert_eq!(pushers["members"], serde_json::json!([]), "{pushers}");
    // Nor by the name or source single sign-on's group sync follows, nor by
    // deleting it; its display name is theirs to change.
    for edit in [
        &["groups", "edit", "pushers", "--new-name", "staff"][..],
        &["groups", "edit", "pushers", "--source", "oidc"],
        &["groups", "delete", "pushers"],
    ] {
        platform.run_as(&uma, edit, None).fails_with(
            1,
            &["group \"pushers\" holds `admin` on template open's access list"],
        );
    }
    platform
        .run_as(
            &uma,
            &["groups", "edit", "pushers", "--display-name", "Pushers"],
            None,
        )
        .ok();
    push(&platform, &uma, "open", &open).fails_with(1, &["may not"]);
    platform
        .run_as(&uma, &["groups", "create", "book-club"], None)
        .ok();
    platform
        .run_as(
            &uma,
            &["groups", "members", "add", "book-club", "uma"],
            None,
        )
        .ok();
    platform
        .run(&["groups", "members", "add", "pushers", "uma"])
        .ok();
    push(&platform, &uma, "open", &open).ok();

    // The member of `devs` sees `open` only, and `secret` does not exist
    // for them (404, not 403), even by name.
    assert_eq!(list_templates(&platform, &dev), vec!["open".to_string()]);
    platform
        .run_as(&dev, &["templates", "versions", "list", "secret"], None)
        .fails_with(1, &["template \"secret\" not found"]);
    platform
        .run_as(&dev, &["templates", "presets", "secret"], None)
        .fails_with(1, &["template \"secret\" not found"]);

    // The pool of `secret` is built by the prebuilds actor, whom no access
    // list names.
    let prebuilt = wait_for_prebuild(&platform);

    // A create from `secret` is refused before any claim: the prebuilt
    // workspace stays the pool's.
    platform
        .run_as(
            &dev,
            &["create", "grab", "--template", "secret", "--preset", "solo"],
            None,
        )
        .fails_with(1, &["template \"secret\" not found"]);
    assert_eq!(prebuilt_ids(&platform), vec![prebuilt.clone()]);
    let mine = platform
        .run_as(&dev, &["list", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(mine, serde_json::json!([]), "{mine}");

    // From `open` the member creates, and the build sees their groups.
    platform
        .run_as(&dev, &["create", "work", "--template", "open"], None)
        .ok();
    let shown = platform
        .run_as(&dev, &["show", "work", "--output", "json"], None)
        .ok()
        .json();
    let id = shown["workspace"]["id"]
        .as_str()
        .or_else(|| shown["id"].as_str())
        .unwrap()
        .to_string();
    let written = std::fs::read_to_string(
        platform
            .volumes_dir()
            .join(format!("groups-{id}"))
            .join("groups"),
    )
    .unwrap_or_else(|error| panic!("the build wrote no groups file ({error}): {shown}"));
    assert_eq!(written, "Everyone,devs");

    // The per-template admin pushes and activates `open`'s versions, and
    // edits its list; `secret` does not exist for them.
    push(&platform, &lead, "open", &open).ok();
    platform
        .run_as(
            &lead,
            &["templates", "versions", "activate", "open", "2", "--yes"],
            None,
        )
        .ok();
    let versions = platform
        .run_as(
            &lead,
            &["templates", "versions", "list", "open", "--output", "json"],
            None,
        )
        .ok()
        .json();
    let active: Vec<&Value> = versions
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["active"] == true)
        .collect();
    assert_eq!(active.len(), 1, "{versions}");
    assert_eq!(active[0]["number"], 2, "{versions}");
    platform
        .run_as(
            &lead,
            &[
                "templates",
                "permissions",
                "open",
                "--user",
                "op",
                "--role",
                "use",
            ],
            None,
        )
        .ok();
    // A push is refused as one to a new name: it says nothing of `secret`.
    push(&platform, &lead, "secret", &secret).fails_with(1, &["you may not push templates"]);
    platform
        .run_as(
            &lead,
            &["templates", "versions", "activate", "secret", "1", "--yes"],
            None,
        )
        .fails_with(1, &["template \"secret\" not found"]);
    // A member with `use` only may not push.
    push(&platform, &dev, "open", &open).fails_with(1, &["`admin` on the template's access list"]);

    // Taken off `open`'s list, the member keeps their workspace: it stops
    // and starts again, and no new one is created from `open`.
    platform
        .run(&[
            "templates",
            "permissions",
            "open",
            "--group",
            "devs",
            "--role",
            "none",
        ])
        .ok();
    platform.wait_for_build_status("dev/work", "succeeded");
    platform.run_as(&dev, &["stop", "work"], None).ok();
    assert_eq!(
        platform.wait_for_build_status("dev/work", "succeeded")["transition"],
        "stop"
    );
    platform.run_as(&dev, &["start", "work"], None).ok();
    assert_eq!(
        platform.wait_for_build_status("dev/work", "succeeded")["transition"],
        "start"
    );
    platform
        .run_as(&dev, &["create", "more", "--template", "open"], None)
        .fails_with(1, &["template \"open\" not found"]);

    // Every change is audited with before and after.
    let audit = platform.run(&["audit", "--output", "json"]).ok().json();
    let text = audit.to_string();
    for needle in [
        "group.create",
        "group.members",
        "template.permissions",
        "before=none after=use",
    ] {
        assert!(
            text.contains(needle),
            "no {needle} in the audit log: {text}"
        );
    }
}

/// `abode groups` end to end: create, list, show, edit, members, delete,
/// each with `--output json`, and bad input refused in one line.
fn groups_round_trip(platform: &Platform) {
    let created = platform
        .run(&[
            "groups",
            "create",
            "devs",
            "--display-name",
            "Developers",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(created["name"], "devs");
    assert_eq!(created["source"], "manual");
    assert_eq!(created["members"], 0);
    platform.run(&["groups", "create", "ops"]).ok();
    let added = platform
        .run(&[
            "groups",
            "members",
            "add",
            "devs",
            "dev",
            "lead",
            "prebuilds",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(added["members"], 3, "{added}");
    let removed = platform
        .run(&[
            "groups",
            "members",
            "remove",
            "devs",
            "lead",
            "prebuilds",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(removed["members"], 1, "{removed}");
    platform
        .run(&["groups", "members", "add", "ops", "op"])
        .ok();
    let edited = platform
        .run(&[
            "groups",
            "edit",
            "ops",
            "--display-name",
            "Operations",
            "--quota-allowance",
            "5",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(edited["display_name"], "Operations");
    assert_eq!(edited["quota_allowance"], 5);

    let listed = platform
        .run(&["groups", "list", "--output", "json"])
        .ok()
        .json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Everyone", "devs", "ops"], "{listed}");
    let everyone = &listed[0];
    assert_eq!(everyone["built_in"], true);
    // alice, dev, lead, op: every person, no system actor.
    assert_eq!(everyone["members"], 4, "{everyone}");
    let shown = platform
        .run(&["groups", "show", "devs", "--output", "json"])
        .ok()
        .json();
    assert_eq!(shown["group"]["display_name"], "Developers");
    assert_eq!(shown["members"][0]["username"], "dev", "{shown}");
    let text = platform.run(&["groups", "show", "Everyone"]).ok();
    assert!(text.stdout.contains("built in"), "{text}");

    // (arguments, exit status, what the one error line says)
    let refusals: [(&[&str], i32, &[&str]); 7] = [
        (&["groups", "create", "devs"], 1, &["already exists"]),
        (
            &["groups", "create", "Bad Name"],
            1,
            &["invalid group name"],
        ),
        (
            &["groups", "show", "nope"],
            1,
            &["group \"nope\" not found"],
        ),
        (
            &["groups", "members", "add", "nope", "dev"],
            1,
            &["group \"nope\" not found"],
        ),
        (
            &["groups", "members", "add", "devs", "nobody"],
            1,
            &["user \"nobody\" not found"],
        ),
        (
            &["groups", "delete", "Everyone"],
            1,
            &["built in", "cannot be deleted"],
        ),
        (
            &["groups", "members", "add", "Everyone", "dev"],
            1,
            &["built in"],
        ),
    ];
    for (args, code, needles) in refusals {
        platform.run(args).fails_with(code, needles);
    }
    // A member manages no group.
    let dev = platform.root().join("config-dev");
    platform
        .run_as(&dev, &["groups", "create", "mine"], None)
        .fails_with(1, &["you may not manage groups"]);

    platform.run(&["groups", "create", "temp"]).ok();
    platform.run(&["groups", "delete", "temp"]).ok();
    platform
        .run(&["groups", "show", "temp"])
        .fails_with(1, &["not found"]);
}

fn push(platform: &Platform, config: &Path, name: &str, dir: &Path) -> util::Run {
    platform.run_as(
        config,
        &[
            "templates",
            "push",
            name,
            "--directory",
            dir.to_str().unwrap(),
        ],
        None,
    )
}

fn list_templates(platform: &Platform, config: &Path) -> Vec<String> {
    let listed = platform
        .run_as(config, &["templates", "list", "--output", "json"], None)
        .ok()
        .json();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn prebuilt_ids(platform: &Platform) -> Vec<String> {
    let listed = platform
        .run(&["list", "--all", "--owner", "prebuilds", "--output", "json"])
        .ok()
        .json();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until the pool of `solo` has its one prebuilt workspace ready.
fn wait_for_prebuild(platform: &Platform) -> String {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let pools = platform
            .run(&["prebuilds", "status", "--output", "json"])
            .ok()
            .json();
        let ready = pools
            .as_array()
            .unwrap()
            .iter()
            .any(|pool| pool["preset"] == "solo" && pool["ready"] == 1);
        if ready {
            let ids = prebuilt_ids(platform);
            assert_eq!(ids.len(), 1, "{ids:?}");
            return ids[0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the pool never got ready: {pools:#}\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
