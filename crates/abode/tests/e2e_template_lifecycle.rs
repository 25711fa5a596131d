//! Issue 50, items 3 to 5, against the real binary, server, Terraform, a
//! real provisioner daemon and a real browser: a build no connected
//! provisioner can take says so within seconds and goes ahead by itself
//! once one that can connects; a deprecated template refuses new
//! workspaces and keeps its own working; a create link fills the
//! dashboard's create form and creates only after one click.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser;
use crate::util;

use std::time::{Duration, Instant};

use browser::Browser;
use util::{create_key, fixture, require_terraform, Daemon, Platform};

/// Polls `done` every 100 ms until it is true; panics after `within`.
fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_build_no_provisioner_can_take_says_so_then_goes_ahead() {
    require_terraform();
    // The server's own provisioners offer no tags.
    let platform = Platform::start();
    platform.login_owner();
    let pushed = platform
        .run(&[
            "templates",
            "push",
            "nowhere",
            "-d",
            fixture("minimal").to_str().unwrap(),
            "--provisioner-tag",
            "cloud=none",
        ])
        .ok();
    assert!(
        pushed.stderr.contains("warning: builds of this version wait: no provisioner matches the tags (cloud=none); connected: 3 embedded on host"),
        "{pushed}"
    );

    let create = platform.spawn(&["create", "far", "--template", "nowhere"]);
    platform.wait_for_build_status("far", "pending");
    let pending_at = Instant::now();
    let mut shown = serde_json::Value::Null;
    wait_until("the note of no provisioner", Duration::from_secs(5), || {
        shown = platform.show("far");
        shown["latest_build"]["waiting"]
            .as_str()
            .is_some_and(|note| note.contains("no provisioner matches"))
    });
    let told_after = pending_at.elapsed();
    let note = shown["latest_build"]["waiting"].as_str().unwrap();
    assert!(note.contains("(cloud=none)"), "{note}");
    assert!(note.contains("embedded on host"), "{note}");
    assert!(note.contains("(no tags)"), "{note}");
    let text = platform.run(&["show", "far"]).ok().stdout;
    assert!(
        text.contains("Waiting:     no provisioner matches the tags (cloud=none)"),
        "{text}"
    );
    let log = platform.run(&["builds", "logs", "far", "1"]).ok().stdout;
    assert!(
        log.contains("waiting: no provisioner matches the tags (cloud=none)"),
        "{log}"
    );
    eprintln!("told within {told_after:?} of the build showing pending");
    let base = platform.url.trim_end_matches('/').to_string();
    let session = crate::e2e_web::sign_in_http(&base, "alice", "correct horse battery");
    let page = crate::e2e_web::get(&format!("{base}/workspaces/alice/far"), &session);
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("id=\"build-waiting\"")
            && page
                .body
                .contains("no provisioner matches the tags (cloud=none)"),
        "{}",
        page.body
    );

    // A daemon that offers the tag connects: the build goes ahead by
    // itself, and says nothing of waiting any more.
    let key = create_key(&platform, "none", &["cloud=none"]);
    let _daemon = Daemon::start(&platform, "d1", &key, &[]);
    util::finish(create);
    let build = platform.wait_for_build_status("far", "succeeded");
    assert!(build.get("waiting").is_none(), "{build:#}");
    let log = platform.run(&["builds", "logs", "far", "1"]).ok().stdout;
    assert!(
        log.contains("claimed by the external provisioner none/d1-"),
        "{log}"
    );
    // Served now: a push with the same tag is not warned.
    let again = platform
        .run(&[
            "templates",
            "push",
            "nowhere",
            "-d",
            fixture("minimal").to_str().unwrap(),
            "--provisioner-tag",
            "cloud=none",
        ])
        .ok();
    assert!(!again.stderr.contains("warning:"), "{again}");
}

#[test]
fn a_deprecated_template_refuses_new_workspaces_and_keeps_its_own() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let minimal = fixture("minimal");
    for name in ["old", "new"] {
        platform
            .run(&["templates", "push", name, "-d", minimal.to_str().unwrap()])
            .ok();
    }
    platform.run(&["create", "kept", "--template", "old"]).ok();

    // Bad deprecations are refused with one line, and change nothing.
    platform
        .run(&["templates", "deprecate", "old", "--message", "  "])
        .fails_with(1, &["deprecation message"]);
    platform
        .run(&[
            "templates",
            "deprecate",
            "old",
            "--message",
            "gone",
            "--replacement",
            "old",
        ])
        .fails_with(1, &["cannot replace itself"]);
    platform
        .run(&[
            "templates",
            "deprecate",
            "old",
            "--message",
            "gone",
            "--replacement",
            "nosuch",
        ])
        .fails_with(1, &["nosuch"]);

    platform
        .run(&[
            "templates",
            "deprecate",
            "old",
            "--message",
            "moved to the new cluster",
            "--replacement",
            "new",
        ])
        .ok();
    platform
        .run(&["create", "fresh", "--template", "old"])
        .fails_with(
            1,
            &[
                "template \"old\" is deprecated",
                "moved to the new cluster",
                "use template \"new\" instead",
            ],
        );
    assert_eq!(platform.run(&["show", "fresh"]).code, Some(1));

    // Listed as deprecated; its workspace keeps working and says so.
    let listed = platform
        .run(&["templates", "list", "-o", "json"])
        .ok()
        .json();
    let old = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|template| template["name"] == "old")
        .unwrap();
    assert_eq!(old["deprecation"]["message"], "moved to the new cluster");
    assert_eq!(old["deprecation"]["replacement"], "new");
    let table = platform.run(&["templates", "list"]).ok().stdout;
    assert!(table.contains("DEPRECATED"), "{table}");
    let shown = platform.run(&["show", "kept"]).ok().stdout;
    assert!(
        shown.contains("Deprecated:  template old takes no new workspaces (this one keeps working): moved to the new cluster (use template \"new\" instead)"),
        "{shown}"
    );
    platform.run(&["stop", "kept"]).ok();
    platform.run(&["start", "kept"]).ok();
    assert_eq!(platform.show("kept")["latest_build"]["status"], "succeeded");

    // Undeprecated, it takes new workspaces again; both are audited.
    platform.run(&["templates", "undeprecate", "old"]).ok();
    platform.run(&["create", "fresh", "--template", "old"]).ok();
    let audit = platform
        .run(&["audit", "--limit", "1000", "--output", "json"])
        .ok()
        .json();
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["target"] == "old")
        .filter_map(|event| event["action"].as_str())
        .collect();
    assert!(actions.contains(&"template.deprecate"), "{actions:?}");
    assert!(actions.contains(&"template.undeprecate"), "{actions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_link_fills_the_form_and_creates_after_one_click() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform
        .run(&[
            "templates",
            "push",
            "echo",
            "-d",
            fixture("parameter-echo").to_str().unwrap(),
        ])
        .ok();
    let link = platform
        .run(&[
            "templates",
            "link",
            "echo",
            "--name",
            "linked",
            "--param",
            "motd=hello there",
            "--mode",
            "auto",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    let base = platform.url.trim_end_matches('/').to_string();
    assert_eq!(
        link,
        format!("{base}/templates/echo/create?name=linked&param.motd=hello%20there&mode=auto")
    );

    let browser = Browser::start().await;
    browser
        .sign_in(&base, "alice", "correct horse battery")
        .await;
    browser.go(&link).await;
    browser.wait_for_element("#confirm-create").await;
    assert_eq!(browser.value("#name").await, "linked");
    assert_eq!(browser.value("#parameter-motd").await, "hello there");
    // One button, and nothing made before it is clicked.
    assert_eq!(
        browser
            .count("form[method=post][action='/workspaces/new'] button")
            .await,
        1
    );
    browser
        .wait_for_text("nothing is created until you click")
        .await;
    assert_eq!(platform.run(&["show", "linked"]).code, Some(1));
    browser.click("#confirm-create").await;
    browser.wait_for_text("Workspace linked").await;
    platform.wait_for_build_status("linked", "succeeded");
    assert_eq!(platform.show("linked")["parameters"]["motd"], "hello there");

    // An unknown parameter is an error on the form, and `auto` falls back
    // to the whole form.
    browser
        .go(&format!(
            "{base}/templates/echo/create?name=other&param.nope=1&mode=auto"
        ))
        .await;
    let text = browser
        .wait_for_text("template \"echo\" has no parameter \"nope\"")
        .await;
    assert!(text.contains("This link does not fit the form"), "{text}");
    assert_eq!(browser.count("#confirm-create").await, 0);
    assert_eq!(browser.value("#name").await, "other");

    // Deprecated, the template's workspace page carries a banner, and its
    // create form says it takes none.
    platform
        .run(&[
            "templates",
            "deprecate",
            "echo",
            "--message",
            "use the new one",
        ])
        .ok();
    browser.go(&format!("{base}/workspaces/alice/linked")).await;
    browser.wait_for_element("#template-deprecated").await;
    let banner = browser.text("#template-deprecated").await;
    assert!(
        banner.contains("Template echo is deprecated") && banner.contains("use the new one"),
        "{banner}"
    );
    browser.go(&link).await;
    browser.wait_for_element("#template-deprecated").await;
    assert!(browser
        .text("#template-deprecated")
        .await
        .contains("takes no new workspaces: use the new one"));
    browser.close().await;
}
