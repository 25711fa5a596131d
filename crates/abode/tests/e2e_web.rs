//! The web dashboard through a real browser: headless Chromium driven over
//! WebDriver with the fantoccini client (Debian's `chromium` and
//! `chromium-driver`, installed by scripts/bootstrap.sh) against the real
//! binary, server, Terraform and the example template. First-user setup, sign-out and sign-in, the list, a
//! held update reviewed and confirmed on its page, escaping of other
//! people's text; then plain HTTP for what a browser would hide: CSRF
//! refusals, another member's workspace, and the security headers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser;
use crate::util;

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use browser::Browser;
use fantoccini::key::Key;
use util::{example_with, repo_root, require_terraform, Platform};

const PASSWORD: &str = "correct horse battery";
/// A template version message that would run script if it were markup.
const HOSTILE: &str = "<img src=x id=injected onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";

/// A template whose plan fails with an error that quotes a parameter: the
/// build log then carries whatever text the workspace's creator gave.
const HTML_LOG_TEMPLATE: &str = r#"
terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "path" {
  name    = "path"
  default = ""
}

resource "terraform_data" "file" {
  input = data.abode_parameter.path.value == "" ? "" : file(data.abode_parameter.path.value)
}
"#;

/// Waits (up to a minute) until `done` says so: a form posted with a click
/// has been handled (its answer reloads the same page, so no text tells).
async fn wait_until<F, R>(mut done: F)
where
    F: FnMut() -> R,
    R: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(Instant::now() < deadline, "the form's change never showed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Where the tests put the screenshots the README links to; only written
/// when `ABODE_UI_SCREENSHOTS` is set, so a test run leaves the tree as it was.
async fn screenshot(browser: &Browser, name: &str) {
    if std::env::var_os("ABODE_UI_SCREENSHOTS").is_some() {
        browser
            .screenshot(&repo_root().join(format!("docs/ui/{name}.png")))
            .await;
    }
}

// ---- plain HTTP with cookies ----

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().redirects(0).build()
}

/// Status, headers we look at, and body of a response (errors included).
pub(crate) struct Answer {
    pub(crate) status: u16,
    set_cookies: Vec<String>,
    header: std::collections::BTreeMap<String, String>,
    pub(crate) body: String,
}

fn answer(result: Result<ureq::Response, ureq::Error>) -> Answer {
    let response = match result {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(other) => panic!("{other}"),
    };
    let status = response.status();
    let set_cookies = response
        .all("set-cookie")
        .into_iter()
        .map(str::to_string)
        .collect();
    let header = response
        .headers_names()
        .into_iter()
        .filter_map(|name| {
            let value = response.header(&name)?.to_string();
            Some((name.to_ascii_lowercase(), value))
        })
        .collect();
    let body = response.into_string().unwrap_or_default();
    Answer {
        status,
        set_cookies,
        header,
        body,
    }
}

pub(crate) fn get(url: &str, cookie: &str) -> Answer {
    answer(agent().get(url).set("Cookie", cookie).call())
}

fn post(url: &str, cookie: &str, form: &[(&str, &str)]) -> Answer {
    answer(agent().post(url).set("Cookie", cookie).send_form(form))
}

/// `name=value` of the Set-Cookie that sets `name`.
fn cookie_pair(answer: &Answer, name: &str) -> String {
    answer
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", answer.set_cookies))
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

/// The CSRF token of the page's first form.
fn csrf_of(body: &str) -> String {
    let start = body
        .find("name=\"csrf\" value=\"")
        .expect("a form with a token")
        + 19;
    body[start..start + body[start..].find('"').unwrap()].to_string()
}

/// Signs in through the login form over plain HTTP; returns the session
/// cookie (`abode_session=...`).
pub(crate) fn sign_in_http(base: &str, username: &str, password: &str) -> String {
    let page = get(&format!("{base}/login"), "");
    let presession = cookie_pair(&page, "abode_presession");
    let signed = post(
        &format!("{base}/login"),
        &presession,
        &[
            ("csrf", &csrf_of(&page.body)),
            ("username", username),
            ("password", password),
        ],
    );
    assert_eq!(signed.status, 303, "{}", signed.body);
    cookie_pair(&signed, "abode_session")
}

// ---- the template ----

fn push(platform: &Platform, version: u32, main_tf: &str, message: &str) {
    let dir = platform.root().join(format!("templates/local-v{version}"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("main.tf"), main_tf).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "local",
            "-d",
            dir.to_str().unwrap(),
            "--activate",
            "--message",
            message,
        ])
        .ok();
}

/// Logs the CLI in as alice (made in the browser).
fn cli_login(platform: &Platform) {
    platform
        .run_as(
            &platform.config_dir(),
            &[
                "login",
                &platform.url,
                "--username",
                "alice",
                "--password-stdin",
            ],
            Some(&format!("{PASSWORD}\n")),
        )
        .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_update_is_reviewed_and_confirmed_in_the_browser() {
    require_terraform();
    let platform = Platform::start();
    let base = platform.url.trim_end_matches('/').to_string();
    let browser = Browser::start().await;

    // First-user setup in the browser signs the owner in.
    browser.go(&format!("{base}/")).await;
    browser.wait_for_text("Sign in").await;
    screenshot(&browser, "sign-in").await;
    browser.go(&format!("{base}/setup")).await;
    browser.type_into("#username", "alice").await;
    browser.type_into("#email", "alice@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("button[type=submit].primary").await;
    browser.wait_for_text("Signed in as alice").await;
    assert!(
        browser.url().await.ends_with("/workspaces"),
        "{}",
        browser.url().await
    );

    // Sign out, then sign in with the form.
    browser.click("form.signout button").await;
    browser.wait_for_text("Sign in").await;
    browser.type_into("#username", "alice").await;
    browser.type_into("#password", "wrong password!").await;
    browser.click("button[type=submit].primary").await;
    browser.wait_for_text("wrong username or password").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("button[type=submit].primary").await;
    browser.wait_for_text("Signed in as alice").await;

    // A workspace from the example, then a version that renames the
    // protected volume, with a message that would be script if it were markup.
    cli_login(&platform);

    // The first version is uploaded in the browser as a folder archive; a
    // file that is not one is refused with the door's reason.
    let folder = platform.root().join("templates/local-v1");
    fs::create_dir_all(&folder).unwrap();
    // Without the block that keeps the volume's name: going back to this
    // version renames (so replaces) the volume, which the preview below holds.
    fs::write(folder.join("main.tf"), example_with(&[util::NAME_NOT_KEPT])).unwrap();
    let archive = platform.root().join("local-v1.tar.gz");
    let tar = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(&folder)
        .arg(".")
        .status()
        .unwrap();
    assert!(tar.success());
    let not_an_archive = platform.root().join("notes.tar.gz");
    fs::write(&not_an_archive, "just text").unwrap();
    browser.go(&format!("{base}/templates")).await;
    browser.type_into("#upload-name", "local").await;
    browser
        .type_into("#upload-archive", not_an_archive.to_str().unwrap())
        .await;
    browser.click("form[data-upload] button").await;
    let refused = browser.wait_for_text("Not pushed:").await;
    assert!(refused.contains("not a tar.gz archive"), "{refused}");
    browser.clear("#upload-archive").await;
    browser
        .type_into("#upload-archive", archive.to_str().unwrap())
        .await;
    browser.type_into("#upload-message", "first").await;
    browser.click("#upload-activate").await;
    browser.click("form[data-upload] button").await;
    browser.wait_for_text("Template local").await;
    let template = browser.wait_for_text("Active version: 1").await;
    assert!(template.contains("first"), "{template}");

    // Create the workspace in the browser and watch its log to success.
    browser.go(&format!("{base}/workspaces")).await;
    browser.click("a[href='/workspaces/new']").await;
    browser.wait_for_element("#choose-template").await;
    browser.click("#choose-template").await;
    browser.wait_for_element("#name").await;
    browser.type_into("#name", "dev").await;
    browser.click("button.primary").await;
    browser.wait_for_text("Workspace dev").await;
    browser.wait_for_text("Build #1 (start): succeeded").await;
    assert_eq!(platform.show("dev")["status"], "running");

    // The schedule, set with the workspace page's form: a duration that is
    // not one is refused beside the form with the reason; a good one is
    // saved (submitted with the keyboard), shown, and what the API reads.
    browser.wait_for_text("Autostop after").await;
    browser.type_into("#schedule-ttl", "soon").await;
    browser.click("form[action$='/schedule'] button").await;
    let refused = browser.wait_for_text("Schedule not saved:").await;
    assert!(
        refused.contains("autostop: expected a duration"),
        "{refused}"
    );
    browser.clear("#schedule-cron").await;
    browser.type_into("#schedule-cron", "30 7 * * 1-5").await;
    browser.clear("#schedule-timezone").await;
    browser
        .type_into("#schedule-timezone", "Europe/Paris")
        .await;
    browser.clear("#schedule-ttl").await;
    browser.type_into("#schedule-ttl", "1h30m").await;
    browser.tab_to("form[action$='/schedule'] button").await;
    browser.press(Key::Enter).await;
    let shown = browser.wait_for_text("30 7 * * 1-5 (Europe/Paris)").await;
    assert!(shown.contains("1h30m without use"), "{shown}");
    assert!(!shown.contains("Schedule not saved"), "{shown}");
    let schedule = platform
        .run(&["schedule", "show", "dev", "--output", "json"])
        .ok()
        .json();
    assert_eq!(schedule["autostart"]["cron"], "30 7 * * 1-5", "{schedule}");
    assert_eq!(schedule["autostart"]["timezone"], "Europe/Paris");
    assert_eq!(schedule["ttl_ms"], 90 * 60 * 1000, "{schedule}");
    // A cron that is not one is the door's refusal, quoted as text.
    browser.clear("#schedule-cron").await;
    browser
        .type_into("#schedule-cron", "<b id=injected>x</b>")
        .await;
    browser.click("form[action$='/schedule'] button").await;
    browser.wait_for_text("Schedule not saved:").await;
    assert_eq!(browser.count("#injected").await, 0);
    assert_eq!(
        platform
            .run(&["schedule", "show", "dev", "--output", "json"])
            .ok()
            .json()["autostart"]["cron"],
        "30 7 * * 1-5"
    );
    push(
        &platform,
        2,
        &example_with(&[
            util::NAME_NOT_KEPT,
            ("name = \"home-${", "name = \"home2-${"),
        ]),
        HOSTILE,
    );

    // The list: name, template and version, status in words, outdated.
    browser.go(&format!("{base}/workspaces")).await;
    let list = browser.wait_for_text("dev").await;
    for expected in ["local v1", "outdated", "running", "#1 start"] {
        assert!(list.contains(expected), "{expected:?} not in:\n{list}");
    }
    screenshot(&browser, "workspaces").await;

    // Update from the workspace page: the build is held by the guard.
    browser.click("a[href='/workspaces/alice/dev']").await;
    browser.wait_for_text("Workspace dev").await;
    browser
        .click("form[action$='/actions/update'] button")
        .await;
    browser.wait_for_text("is held by the plan guard").await;
    screenshot(&browser, "workspace").await;
    browser.click("p.notice a").await;

    // The held page: what happens, why, the attribute, the rule, who, expiry.
    let held = browser.wait_for_text("Confirm this plan").await;
    for expected in [
        "abode_volume.home",
        "replaced: destroyed, then created again empty",
        "replaced because `name` cannot be updated in place",
        "Attributes that force the replacement",
        "abode_protect.home",
        "Started by",
        "alice",
        "Expires",
        "awaiting confirmation",
    ] {
        assert!(held.contains(expected), "{expected:?} not in:\n{held}");
    }
    // The version message is text, not markup: nothing of it ran or rendered.
    assert_eq!(browser.text(".version-message").await, HOSTILE);
    assert_eq!(browser.count("#injected").await, 0);
    assert_eq!(browser.count("main script").await, 0);
    assert_ne!(browser.script("return document.title;").await, "pwned");
    screenshot(&browser, "held-build").await;

    // Confirm, with the keyboard only: the plan the page was rendered with
    // is applied.
    browser.tab_to("form[action$='/confirm'] button").await;
    browser.press(Key::Enter).await;
    browser.wait_for_element("#confirm-name").await;
    platform.wait_for_build_status("dev", "succeeded");
    browser.go(&format!("{base}/workspaces/alice/dev")).await;
    let after = browser.wait_for_text("succeeded").await;
    assert!(after.contains("local version 2"), "{after}");
    assert_eq!(platform.show("dev")["template_version"], 2);

    // That build started under the schedule set above: it stops 1h30m after
    // its start, and the page extends that deadline.
    browser.wait_for_text("Stops at").await;
    let deadline = |platform: &Platform| {
        platform
            .run(&["schedule", "show", "dev", "--output", "json"])
            .ok()
            .json()["deadline"]
            .as_i64()
            .unwrap()
    };
    let before = deadline(&platform);
    browser.clear("#extend-by").await;
    browser.type_into("#extend-by", "5h").await;
    browser.click("form[action$='/extend'] button").await;
    let deadline_now = || async { deadline(&platform) > before + 3 * 3_600_000 };
    wait_until(deadline_now).await;

    // A stale held page: the build was canceled elsewhere, Confirm is refused.
    push(
        &platform,
        3,
        &example_with(&[
            util::NAME_NOT_KEPT,
            ("name = \"home-${", "name = \"home3-${"),
        ]),
        "third",
    );
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    browser
        .go(&format!("{base}/workspaces/alice/dev/builds/3"))
        .await;
    browser.wait_for_text("Confirm this plan").await;
    platform.run(&["builds", "cancel", "dev", "3"]).ok();
    browser.click("form[action$='/confirm'] button").await;
    let refused = browser.wait_for_text("Not confirmed:").await;
    assert!(refused.contains("canceled"), "{refused}");
    assert_eq!(platform.show("dev")["template_version"], 2);

    // The other pages: templates (the message escaped there too), inbox,
    // audit log, users, prebuild pools.
    browser.go(&format!("{base}/templates/local")).await;
    let template = browser.wait_for_text("Template local").await;
    assert!(template.contains(HOSTILE), "{template}");
    assert_eq!(browser.count("#injected").await, 0);

    // A version's page: its lint, and a fleet preview started from it. dev
    // is on version 2; version 1 names the volume as before, so a build of
    // it would replace dev's volume: held. Activating it then needs the
    // preview acknowledged.
    browser
        .go(&format!("{base}/templates/local/versions/1"))
        .await;
    browser.wait_for_text("never previewed").await;
    browser.click("form[action$='/preview'] button").await;
    let previewed = loop {
        browser
            .go(&format!("{base}/templates/local/versions/1"))
            .await;
        let text = browser.wait_for_text("Latest preview").await;
        if !text.contains("still to plan") {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(previewed.contains("1 would be held"), "{previewed}");
    assert!(
        previewed.contains("alice/dev: held for confirmation"),
        "{previewed}"
    );
    assert!(previewed.contains("abode_volume.home"), "{previewed}");
    assert_eq!(browser.count("#acknowledge").await, 1);
    screenshot(&browser, "template-version").await;
    assert_eq!(platform.show("dev")["template_version"], 2);
    browser.go(&format!("{base}/templates/local")).await;
    browser.wait_for_text("Template local").await;

    // The template's lifecycle policy, changed on its page by a template
    // admin (here the owner): a wrong duration names its field; a good form
    // is the whole policy.
    browser.clear("#policy-max_ttl").await;
    browser.type_into("#policy-max_ttl", "soon").await;
    browser.click("form#policy button").await;
    let refused = browser.wait_for_text("Policy not saved:").await;
    assert!(
        refused.contains("max_ttl: expected a duration"),
        "{refused}"
    );
    browser.clear("#policy-max_ttl").await;
    browser.type_into("#policy-max_ttl", "12h").await;
    browser.click("#policy-require_active_version").await;
    browser.click("form#policy button").await;
    let policy = || async {
        let shown = platform
            .run(&["templates", "policy", "local", "--output", "json"])
            .ok()
            .json();
        shown["max_ttl_ms"] == 12 * 3_600_000 && shown["require_active_version"] == true
    };
    wait_until(policy).await;
    browser.go(&format!("{base}/notifications")).await;
    let inbox = browser.wait_for_text("Inbox").await;
    assert!(inbox.contains("alice/dev"), "{inbox}");
    assert!(inbox.contains("build #2"), "{inbox}");
    browser.go(&format!("{base}/audit")).await;
    let audit = browser.wait_for_text("Audit log").await;
    assert!(audit.contains("build.confirm"), "{audit}");
    browser.go(&format!("{base}/users")).await;
    assert!(browser
        .wait_for_text("Users")
        .await
        .contains("alice@example.com"));
    browser.type_into("#new-username", "carol").await;
    browser.type_into("#new-email", "carol@example.com").await;
    browser.type_into("#new-password", "carol's password").await;
    browser.click("form[action='/users'] button").await;
    browser.wait_for_text("carol@example.com").await;
    sign_in_http(&base, "carol", "carol's password");

    // Roles, changed by the owner on the users page: the boxes checked are
    // the roles held; a change that would leave no role is the door's
    // refusal, shown on the page.
    assert!(browser.checked("#roles-carol-member").await);
    assert!(!browser.checked("#roles-carol-template-admin").await);
    browser.click("#roles-carol-template-admin").await;
    browser
        .click("form[action='/users/carol/roles'] button")
        .await;
    wait_until(|| async {
        browser.go(&format!("{base}/users")).await;
        browser
            .wait_for_element("#roles-carol-template-admin")
            .await;
        browser.checked("#roles-carol-template-admin").await
    })
    .await;
    assert!(browser.checked("#roles-carol-member").await);
    screenshot(&browser, "users").await;
    let audit = platform.run(&["audit", "--action", "user.roles"]).ok();
    assert!(audit.stdout.contains("carol"), "{audit}");
    browser.click("#roles-carol-template-admin").await;
    browser.click("#roles-carol-member").await;
    browser
        .click("form[action='/users/carol/roles'] button")
        .await;
    let refused = browser.wait_for_text("Roles of carol not changed:").await;
    assert!(refused.contains("would hold no role"), "{refused}");

    // Suspended and activated from the users page: the status shown is the
    // account's, the button the one that changes it.
    browser.go(&format!("{base}/users")).await;
    browser.wait_for_text("Users").await;
    browser
        .click("form[action='/users/carol/suspend'] button")
        .await;
    browser
        .wait_for_element("form[action='/users/carol/activate'] button")
        .await;
    let suspended = platform
        .run(&["users", "show", "carol", "--output", "json"])
        .ok()
        .json();
    assert_eq!(suspended["status"], "suspended", "{suspended:#}");
    browser
        .click("form[action='/users/carol/activate'] button")
        .await;
    browser
        .wait_for_element("form[action='/users/carol/suspend'] button")
        .await;

    // An API token: made on its page and shown once, listed (never its
    // secret again), working against the API, then revoked with its form.
    browser.go(&format!("{base}/tokens")).await;
    browser.wait_for_text("You have no API token").await;
    browser.type_into("#token-name", "ci").await;
    browser.type_into("#token-days", "7").await;
    browser.click("form[action='/tokens'] button").await;
    browser.wait_for_text("Copy it now").await;
    let token = browser.value("#new-token").await;
    assert!(token.len() > 20, "{token}");
    let bearer = |token: &str| {
        answer(
            agent()
                .get(&format!("{base}/api/v1/users/me"))
                .set("Authorization", &format!("Bearer {token}"))
                .call(),
        )
    };
    assert_eq!(bearer(&token).status, 200);
    browser.go(&format!("{base}/tokens")).await;
    let listed = browser.wait_for_text("Revoke").await;
    assert!(listed.contains("ci"), "{listed}");
    assert_eq!(browser.count("#new-token").await, 0);
    let html = browser
        .script("return document.documentElement.outerHTML;")
        .await;
    assert!(
        !html.as_str().unwrap().contains(&token),
        "the secret is shown again"
    );
    browser
        .click("form[action='/tokens/ci/revoke'] button")
        .await;
    browser.wait_for_text("You have no API token").await;
    assert_eq!(bearer(&token).status, 401);

    // Notification preferences: a kind turned off stays off; a kind the
    // owner makes mandatory cannot be turned off.
    browser.go(&format!("{base}/notifications")).await;
    browser.click("a[href='/notifications/settings']").await;
    browser.wait_for_text("Send me these notifications").await;
    assert!(browser.checked("#kind-workspace_dormant").await);
    browser.click("#kind-workspace_dormant").await;
    browser
        .click("form[action='/notifications/settings'] button")
        .await;
    wait_until(|| async {
        browser.go(&format!("{base}/notifications/settings")).await;
        browser.wait_for_element("#kind-workspace_dormant").await;
        !browser.checked("#kind-workspace_dormant").await
    })
    .await;
    browser
        .click("form[action='/notifications/mandatory']:has(input[value='build_held']) button")
        .await;
    browser
        .wait_for_text("build held (mandatory on this server)")
        .await;
    assert!(!browser.enabled("#kind-build_held").await);
    browser
        .click("form[action='/notifications/mandatory']:has(input[value='build_held']) button")
        .await;
    wait_until(|| async {
        browser.go(&format!("{base}/notifications/settings")).await;
        browser.wait_for_element("#kind-build_held").await;
        browser.enabled("#kind-build_held").await
    })
    .await;
    browser.go(&format!("{base}/prebuilds")).await;
    browser.wait_for_text("Prebuild pools").await;

    // A member cannot open another's workspace or build by URL.
    platform.login_new_user("bob", "member");
    let bob = sign_in_http(&base, "bob", "bob-password");
    for path in ["/workspaces/alice/dev", "/workspaces/alice/dev/builds/2"] {
        let refused = get(&format!("{base}{path}"), &bob);
        assert!(
            [403, 404].contains(&refused.status),
            "{path}: {}",
            refused.status
        );
        assert!(!refused.body.contains("abode_volume"), "{}", refused.body);
    }
    // ... nor act on it, even with a good token of his own.
    let list = get(&format!("{base}/workspaces?all=on"), &bob);
    // His list has his own workspaces only, even asking for everyone's.
    assert!(
        !list.body.contains("/workspaces/alice/dev"),
        "{}",
        list.body
    );
    assert!(!list.body.contains("filter-all"), "{}", list.body);
    // The user list is not a member's: not in his navigation, refused by
    // URL; his audit log has his own events only (the policy's `own`).
    assert!(!list.body.contains("href=\"/users\""), "{}", list.body);
    assert_eq!(get(&format!("{base}/users"), &bob).status, 403);
    let made = post(
        &format!("{base}/users"),
        &bob,
        &[
            ("csrf", &csrf_of(&list.body)),
            ("username", "mallory"),
            ("email", "mallory@example.com"),
            ("password", "mallory's password"),
            ("role", "owner"),
        ],
    );
    assert_eq!(made.status, 403, "{}", made.body);
    let promoted = post(
        &format!("{base}/users/bob/roles"),
        &bob,
        &[("csrf", &csrf_of(&list.body)), ("role", "owner")],
    );
    assert_eq!(promoted.status, 403, "{}", promoted.body);
    // A member's schedule form is refused on another's workspace.
    let scheduled = post(
        &format!("{base}/workspaces/alice/dev/schedule"),
        &bob,
        &[("csrf", &csrf_of(&list.body)), ("ttl", "0")],
    );
    assert!([403, 404].contains(&scheduled.status), "{}", scheduled.body);
    let audit = get(&format!("{base}/audit"), &bob);
    assert_eq!(audit.status, 200);
    assert!(!audit.body.contains("alice/dev"), "{}", audit.body);
    let stopped = post(
        &format!("{base}/workspaces/alice/dev/actions/stop"),
        &bob,
        &[("csrf", &csrf_of(&list.body))],
    );
    assert_eq!(stopped.status, 403, "{}", stopped.body);

    // A form without the session's token is refused, whoever sends it.
    let alice = sign_in_http(&base, "alice", PASSWORD);
    let alice_page = get(&format!("{base}/workspaces"), &alice);
    let bob_token = csrf_of(&list.body);
    let cases: [(&str, Vec<(&str, &str)>); 3] = [
        ("no token", vec![]),
        ("a wrong token", vec![("csrf", "00")]),
        ("bob's token", vec![("csrf", &bob_token)]),
    ];
    for (what, form) in cases {
        let refused = post(
            &format!("{base}/workspaces/alice/dev/actions/stop"),
            &alice,
            &form,
        );
        assert_eq!(refused.status, 403, "{what}: {}", refused.body);
    }
    assert_eq!(platform.show("dev")["status"], "canceled");
    // With it, the same form is done.
    let stopped = post(
        &format!("{base}/workspaces/alice/dev/actions/stop"),
        &alice,
        &[("csrf", &csrf_of(&alice_page.body))],
    );
    assert_eq!(stopped.status, 303, "{}", stopped.body);
    platform.wait_for_build_status("dev", "succeeded");
    assert_eq!(platform.show("dev")["status"], "stopped");

    // The build log as server-sent events: every line, then the end.
    let events = get(
        &format!("{base}/workspaces/alice/dev/builds/1/events"),
        &alice,
    );
    assert_eq!(events.status, 200);
    assert!(events.header["content-type"].starts_with("text/event-stream"));
    assert!(events.body.contains("event: line"), "{}", events.body);
    assert!(
        events.body.contains("\"stage\":\"apply\""),
        "{}",
        events.body
    );
    assert!(events.body.contains("\"done\":true"), "{}", events.body);
    // A browser that reconnects says the last line it has, and gets the rest.
    let ids = |body: &str| -> Vec<i64> {
        body.lines()
            .filter_map(|line| line.strip_prefix("id: ")?.parse().ok())
            .collect()
    };
    let all = ids(&events.body);
    assert!(all.len() > 3, "{}", events.body);
    let resumed = answer(
        agent()
            .get(&format!("{base}/workspaces/alice/dev/builds/1/events"))
            .set("Cookie", &alice)
            .set("Last-Event-ID", &all[2].to_string())
            .call(),
    );
    assert_eq!(ids(&resumed.body), all[3..].to_vec());

    // A blocked build shows its report, and no Confirm.
    push(
        &platform,
        4,
        &example_with(&[
            util::NAME_NOT_KEPT,
            ("name = \"home-${", "name = \"home4-${"),
            ("mode        = \"confirm\"", "mode        = \"block\""),
        ]),
        "blocked",
    );
    let blocked = platform.run(&["update", "dev"]);
    assert_eq!(blocked.code, Some(4), "{blocked}");
    let number = platform.show("dev")["latest_build"]["number"]
        .as_i64()
        .unwrap();
    browser
        .go(&format!("{base}/workspaces/alice/dev/builds/{number}"))
        .await;
    let page = browser.wait_for_text("blocked by the plan guard").await;
    assert!(page.contains("abode_volume.home"), "{page}");
    assert_eq!(browser.count("form[action$='/confirm']").await, 0);
    assert_eq!(browser.count("form[action$='/cancel']").await, 0);

    // A parameter value that is markup: the door's refusal quotes it, the
    // workspace page shows it, both as text.
    platform
        .run(&[
            "templates",
            "push",
            "echo",
            "-d",
            util::fixture("parameter-echo").to_str().unwrap(),
            "--activate",
        ])
        .ok();
    browser
        .go(&format!("{base}/workspaces/new?template=echo"))
        .await;
    browser.type_into("#name", "echo").await;
    let markup = "<b id=injected>bold</b>";
    browser
        .type_into("#parameter-motd", &format!("{markup}!"))
        .await;
    browser.click("button.primary").await;
    let refused = browser.wait_for_text("Not created:").await;
    assert!(refused.contains(&format!("not {markup}!")), "{refused}");
    assert_eq!(browser.count("#injected").await, 0);
    browser.clear("#parameter-motd").await;
    browser.type_into("#parameter-motd", markup).await;
    browser.click("button.primary").await;
    browser.wait_for_text("Workspace echo").await;
    platform.wait_for_build_status("echo", "succeeded");
    let shown = browser.wait_for_text(markup).await;
    assert!(shown.contains("motd"), "{shown}");
    assert_eq!(browser.count("#injected").await, 0);

    // A log line with markup in it (Terraform's error quotes the value) is
    // text, live and once the build has settled.
    let folder = platform.root().join("templates/html-log");
    fs::create_dir_all(&folder).unwrap();
    fs::write(folder.join("main.tf"), HTML_LOG_TEMPLATE).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "htmllog",
            "-d",
            folder.to_str().unwrap(),
            "--activate",
        ])
        .ok();
    browser
        .go(&format!("{base}/workspaces/new?template=htmllog"))
        .await;
    browser.type_into("#name", "htmllog").await;
    browser
        .type_into("#parameter-path", "<i id=injected>nofile</i>")
        .await;
    browser.click("button.primary").await;
    browser.wait_for_text("Workspace htmllog").await;
    let failed = browser.wait_for_text("Build #1 (start): failed").await;
    assert!(failed.contains("<i id=injected>nofile</i>"), "{failed}");
    assert_eq!(browser.count("#injected").await, 0);

    // Delete asks for the name: refused without it (by the server, whatever
    // the script does), disabled until it is typed, then done.
    let page = get(&format!("{base}/workspaces/alice/echo"), &alice);
    let refused = post(
        &format!("{base}/workspaces/alice/echo/actions/delete"),
        &alice,
        &[("csrf", &csrf_of(&page.body)), ("confirm_name", "dev")],
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    let disabled = "return document.querySelector('form[data-name] button').disabled;";
    browser.go(&format!("{base}/workspaces/alice/echo")).await;
    browser.wait_for_element("#confirm-name").await;
    assert_eq!(browser.script(disabled).await, true);
    browser.type_into("#confirm-name", "echo").await;
    assert_eq!(browser.script(disabled).await, false);
    browser.click("form[data-name] button").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while get(&format!("{base}/workspaces"), &alice)
        .body
        .contains("/workspaces/alice/echo")
    {
        assert!(Instant::now() < deadline, "echo was never deleted");
        std::thread::sleep(Duration::from_millis(250));
    }
    browser.close().await;
}

#[test]
fn pages_carry_the_security_headers_and_cookies() {
    let platform = Platform::start();
    let base = platform.url.trim_end_matches('/').to_string();
    let login = get(&format!("{base}/login"), "");
    assert_eq!(login.status, 200);
    let csp = &login.header["content-security-policy"];
    for expected in [
        "script-src 'self'",
        "frame-ancestors 'none'",
        "default-src 'none'",
    ] {
        assert!(csp.contains(expected), "{expected} not in {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(login.header["x-frame-options"], "DENY");
    assert_eq!(login.header["x-content-type-options"], "nosniff");
    assert!(!login.body.contains("<script>"), "no inline script");
    let presession = login
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("abode_presession="))
        .unwrap();
    assert!(presession.contains("HttpOnly") && presession.contains("SameSite=Lax"));

    // A page that needs a session sends the browser to sign in.
    let listed = get(&format!("{base}/workspaces"), "");
    assert_eq!(listed.status, 303);
    assert_eq!(listed.header["location"], "/login");

    // First-user setup without the token is refused; with it, the owner is
    // signed in with an HttpOnly session cookie (no Secure over plain HTTP).
    let setup = get(&format!("{base}/setup"), "");
    let presession = cookie_pair(&setup, "abode_presession");
    let form = [
        ("username", "alice"),
        ("email", "alice@example.com"),
        ("password", PASSWORD),
    ];
    let refused = post(&format!("{base}/setup"), &presession, &form);
    assert_eq!(refused.status, 403, "{}", refused.body);
    let refused = post(&format!("{base}/setup"), "", &form);
    assert_eq!(refused.status, 403, "{}", refused.body);
    let mut with_token = form.to_vec();
    let token = csrf_of(&setup.body);
    with_token.push(("csrf", &token));
    let created = post(&format!("{base}/setup"), &presession, &with_token);
    assert_eq!(created.status, 303, "{}", created.body);
    let session = created
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("abode_session="))
        .unwrap();
    for expected in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(session.contains(expected), "{session}");
    }
    assert!(!session.contains("Secure"), "{session}");
    // Sign-out without the token is refused too.
    let session = cookie_pair(&created, "abode_session");
    let refused = post(&format!("{base}/logout"), &session, &[]);
    assert_eq!(refused.status, 403);
    let page = get(&format!("{base}/workspaces"), &session);
    assert_eq!(page.status, 200);
    // The assets are the binary's own, with no CDN anywhere.
    let script = get(&format!("{base}/assets/app.js"), "");
    assert_eq!(script.status, 200);
    assert!(script.header["content-type"].starts_with("text/javascript"));
    assert!(script.set_cookies.is_empty(), "{:?}", script.set_cookies);
    assert!(!page.body.contains("https://"), "no outside asset");
    // The API is still where it was.
    let health = get(&format!("{base}/api/v1/health"), "");
    assert_eq!(health.status, 200);
    assert!(health.body.contains("\"ok\""));
}

#[test]
fn cookies_are_secure_when_the_server_is_reached_over_tls() {
    // A TLS-terminating proxy in front: the access URL says https.
    let platform = Platform::start_with(&["--access-url", "https://abode.example.test"]);
    let base = platform.url.trim_end_matches('/').to_string();
    let setup = get(&format!("{base}/setup"), "");
    let presession = setup
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("abode_presession="))
        .unwrap();
    assert!(presession.ends_with("; Secure"), "{presession}");
    let token = csrf_of(&setup.body);
    let created = post(
        &format!("{base}/setup"),
        &cookie_pair(&setup, "abode_presession"),
        &[
            ("csrf", token.as_str()),
            ("username", "alice"),
            ("email", "alice@example.com"),
            ("password", PASSWORD),
        ],
    );
    assert_eq!(created.status, 303, "{}", created.body);
    let session = created
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("abode_session="))
        .unwrap();
    for expected in ["HttpOnly", "SameSite=Lax", "Secure"] {
        assert!(session.contains(expected), "{session}");
    }
}
