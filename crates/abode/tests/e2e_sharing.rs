//! Workspace sharing (issue 49), with the real binary, server, Terraform
//! and the example template: Alice shares a workspace with Bob as `use`:
//! he finds it in his `abode list` marked as shared and connects with
//! `abode ssh alice/dev`, but may not stop or delete it (one line each);
//! shared through a group, his open SSH session closes as soon as he
//! leaves the group; every change is in the audit log; a template that
//! forbids sharing refuses `abode sharing add`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::{Duration, Instant};

use util::{require_terraform, Platform};

#[test]
fn a_shared_workspace_connects_refuses_the_rest_and_cuts_on_leaving_the_group() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let bob = platform.login_new_user("bob", "member");
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));

    // Not shared: not his.
    let refused = platform.run_as(&bob, &["ssh", "alice/dev", "--", "true"], None);
    assert_ne!(refused.code, Some(0), "{refused}");

    // Shared as `use`: listed, marked, and he connects.
    let listed = platform
        .run(&[
            "sharing", "add", "dev", "--user", "bob", "--role", "use", "-o", "json",
        ])
        .ok()
        .json();
    assert_eq!(listed["workspace"], "alice/dev", "{listed}");
    assert_eq!(listed["shares"][0]["name"], "bob", "{listed}");
    assert_eq!(listed["shares"][0]["role"], "use", "{listed}");
    let mine = platform
        .run_as(&bob, &["list", "-o", "json"], None)
        .ok()
        .json();
    let rows = mine.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{mine}");
    assert_eq!(rows[0]["owner"], "alice");
    assert_eq!(rows[0]["shared"], true);
    let text = platform.run_as(&bob, &["list"], None).ok();
    assert!(text.stdout.contains("alice/dev (shared)"), "{text}");
    // Alice's own list marks nothing.
    let hers = platform.run(&["list", "-o", "json"]).ok().json();
    assert!(hers[0].get("shared").is_none(), "{hers}");
    // `show` marks it too, for him only.
    let shown = platform
        .run_as(&bob, &["show", "alice/dev", "-o", "json"], None)
        .ok()
        .json();
    assert_eq!(shown["shared"], true, "{shown}");
    let shown = platform.run_as(&bob, &["show", "alice/dev"], None).ok();
    assert!(
        shown
            .stdout
            .contains("Workspace:   alice/dev (shared with you)"),
        "{shown}"
    );
    assert!(platform.show("dev").get("shared").is_none());
    platform
        .run_as(&bob, &["ssh", "alice/dev", "--", "true"], None)
        .ok();

    // `use` connects, and no more.
    platform
        .run_as(&bob, &["stop", "alice/dev"], None)
        .fails_with(
            1,
            &[
                "may not stop a workspace that is not yours",
                "`admin` on its share list",
            ],
        );
    platform
        .run_as(&bob, &["delete", "alice/dev"], None)
        .fails_with(1, &["may not delete a workspace that is not yours"]);
    platform
        .run_as(
            &bob,
            &[
                "sharing",
                "add",
                "alice/dev",
                "--user",
                "bob",
                "--role",
                "admin",
            ],
            None,
        )
        .fails_with(1, &["may not manage the sharing of a workspace"]);
    assert_eq!(platform.show("dev")["status"], "running");

    // Through a group: leaving it cuts the open session at once.
    platform.run(&["groups", "create", "pair"]).ok();
    platform
        .run(&["groups", "members", "add", "pair", "bob"])
        .ok();
    platform
        .run(&["sharing", "remove", "dev", "--user", "bob"])
        .ok();
    platform
        .run(&["sharing", "add", "dev", "--group", "pair", "--role", "use"])
        .ok();
    let mut session = platform.open_ssh_session(&bob, "alice/dev");
    assert!(session.try_wait().unwrap().is_none());
    platform
        .run(&["groups", "members", "remove", "pair", "bob"])
        .ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = session.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = session.kill();
            panic!("bob's session still open 10 s after he left the group");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{status:?}");
    // Cut by the group edit's signal, not the 15 s periodic check.
    platform.assert_connection_closed_at_once();
    let refused = platform.run_as(&bob, &["ssh", "alice/dev", "--", "true"], None);
    assert_ne!(refused.code, Some(0), "{refused}");

    // Every change is audited.
    let audit = platform
        .run(&["audit", "--action", "workspace.share", "-o", "json"])
        .ok()
        .stdout;
    for details in [
        "user=bob before=none after=use",
        "user=bob before=use after=none",
        "group=pair before=none after=use",
    ] {
        assert!(audit.contains(details), "{details} not in {audit}");
    }

    // The dashboard's panel: Alice shares with Bob and stops there; Bob,
    // who may not manage it, sees no panel.
    let page = "/workspaces/alice/dev";
    let action = "/workspaces/alice/dev/sharing";
    let alice = ("alice", "correct horse battery");
    let (status, said) = platform.dashboard_submit(
        alice.0,
        alice.1,
        page,
        action,
        &[("kind", "user"), ("name", "bob"), ("role", "use")],
    );
    assert_eq!(status, 303, "{said}");
    let hers = platform.dashboard_page(alice.0, alice.1, page);
    assert!(hers.contains("Stop sharing with bob"), "{hers}");
    let his = platform.dashboard_page("bob", "bob-password", page);
    assert!(!his.contains("id=\"sharing\""), "{his}");
    let (status, said) = platform.dashboard_submit(
        alice.0,
        alice.1,
        page,
        action,
        &[("kind", "user"), ("name", "bob"), ("role", "none")],
    );
    assert_eq!(status, 303, "{said}");
    let hers = platform.dashboard_page(alice.0, alice.1, page);
    assert!(!hers.contains("Stop sharing with bob"), "{hers}");

    // A template that forbids sharing: one clear line.
    platform
        .run(&["templates", "edit", "local", "--allow-sharing=false"])
        .ok();
    platform
        .run(&["sharing", "add", "dev", "--user", "bob", "--role", "use"])
        .fails_with(
            1,
            &["template \"local\" does not allow sharing its workspaces"],
        );
    let listed = platform
        .run(&["sharing", "list", "dev", "-o", "json"])
        .ok()
        .json();
    assert_eq!(listed["shares"].as_array().unwrap().len(), 1, "{listed}");
}

/// The people a workspace is shared with see its parameters, but not the
/// values its template calls sensitive (`sensitive = true`), in `show`
/// (text and JSON) and in their list, which shows a shared workspace with
/// no parameters at all; its owner sees every value.
#[test]
fn a_sharee_sees_no_sensitive_parameter_value() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let bob = platform.login_new_user("bob", "member");
    platform.push_fixture("secret", "shared-secret");
    platform
        .run(&[
            "create",
            "dev",
            "--template",
            "secret",
            "-p",
            "region=us",
            "-p",
            "api_key=hunter2-secret",
        ])
        .ok();
    platform
        .run(&["sharing", "add", "dev", "--user", "bob", "--role", "use"])
        .ok();

    let hers = platform.show("dev");
    assert_eq!(hers["parameters"]["api_key"], "hunter2-secret", "{hers}");
    let his = platform
        .run_as(&bob, &["show", "alice/dev", "-o", "json"], None)
        .ok()
        .json();
    assert_eq!(his["parameters"]["region"], "us", "{his}");
    assert!(his["parameters"].get("api_key").is_none(), "{his}");
    for args in [
        vec!["show", "alice/dev"],
        vec!["list", "-o", "json"],
        vec!["list"],
    ] {
        let seen = platform.run_as(&bob, &args, None).ok();
        assert!(!seen.stdout.contains("hunter2"), "{args:?}: {seen}");
    }
}
