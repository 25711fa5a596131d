//! Single sign-on through a real OpenID provider: the npm package
//! oidc-provider on Node (`tests/oidc/provider.mjs`, installed by
//! scripts/bootstrap.sh), with its own RSA signing key, Abode as its client,
//! people with a `groups` claim, and its own login and consent pages, which
//! headless Chromium fills in (as e2e_web drives the dashboard). Against
//! the real binary and server:
//! - a person signs in from the dashboard's "Sign in with ..." and lands on
//!   the workspaces page, their account made at that first sign-in and put
//!   in the mapped group of their claim (made; an unmapped one is not);
//! - `abode login URL` completes through the same provider (the browser it
//!   opens is this test's, which follows the URL the CLI hands `$BROWSER`),
//!   back on the CLI's loopback, and its session works;
//! - the provider's signing key rotated between two sign-ins: both succeed;
//! - a replayed callback, and an ID token that expired by the server's
//!   clock, are refused with a page that says so;
//! - a person removed from the allowed group at the provider is refused at
//!   their next sign-in, and the session they had is refused from then on;
//! - a suspended account is refused whatever the provider says;
//! - a sign-on that takes someone out of a group cuts at once the SSH
//!   session they had open through a share to that group;
//! - a hostile provider (the same real one, its token endpoint swapping the
//!   ID token it signed for a forged one: `alg: none`, another audience,
//!   another issuer, expired, an earlier sign-in's, HMAC keyed by the client
//!   secret, another key under the provider's key id) and an address it has
//!   not verified are refused, each a table case driven over plain HTTP
//!   (the callback's cookies and audit events are what is checked), with
//!   no session and no account left, between two honest sign-ins that
//!   succeed.
//!
//! The same forgeries without a network, and more of them (a token changed
//! after signing, an unknown key, no nonce), are `abode-oidc`'s table tests
//! (crates/oidc/tests/verify.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};
use util::{free_port, Platform};

const CLIENT_SECRET: &str = "test-client-secret";

// ---- the provider ----

/// The test OpenID provider, a Node process of its own.
struct Provider {
    child: Child,
    issuer: String,
}

impl Provider {
    fn start() -> Provider {
        let (child, started) = util::start_node_server(
            "provider.mjs",
            &[("CLIENT_ID", "abode"), ("CLIENT_SECRET", CLIENT_SECRET)],
        );
        Provider {
            child,
            issuer: started["issuer"].as_str().unwrap().to_string(),
        }
    }

    fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let request = ureq::request(method, &format!("{}{path}", self.issuer));
        let response = match body {
            Some(body) => request.send_json(body),
            None => request.call(),
        };
        response.unwrap().into_json().unwrap()
    }

    fn set_user(&self, sub: &str, groups: &[&str]) {
        self.admin(
            "PUT",
            &format!("/admin/users/{sub}"),
            Some(json!({
                "email": format!("{sub}@example.com"),
                "email_verified": true,
                "preferred_username": sub,
                "groups": groups,
            })),
        );
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- the browser ----

/// Headless Chromium behind its own chromedriver, a fresh profile each (no
/// session at the provider from an earlier sign-in).
struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is not on PATH (source scripts/bootstrap.sh)");
        let profile = tempfile::tempdir().unwrap();
        let Value::Object(capabilities) = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage",
                         format!("--user-data-dir={}", profile.path().display())],
            }
        }) else {
            unreachable!()
        };
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(capabilities);
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            match builder.connect(&format!("http://127.0.0.1:{port}")).await {
                Ok(client) => break client,
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "chromedriver never started: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    async fn go(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    async fn text(&self) -> String {
        self.client
            .execute(
                "return document.body ? document.body.innerText : '';",
                vec![],
            )
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits (up to two minutes on a loaded machine) for `css`.
    async fn wait_for(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if !self
                .client
                .find_all(Locator::Css(css))
                .await
                .unwrap()
                .is_empty()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {css} on {}: {}",
                self.client.current_url().await.unwrap(),
                self.text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the page's text to contain `needle`.
    async fn wait_for_text(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let text = self.text().await;
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {needle:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The provider's own pages: its login form (any password: the login is
    /// the person) and its consent page.
    async fn provider_sign_in(&self, login: &str) {
        self.wait_for("input[name=login]").await;
        let field = self
            .client
            .find(Locator::Css("input[name=login]"))
            .await
            .unwrap();
        field.send_keys(login).await.unwrap();
        let password = self
            .client
            .find(Locator::Css("input[name=password]"))
            .await
            .unwrap();
        password.send_keys("any password").await.unwrap();
        self.client
            .find(Locator::Css("button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // The consent page: its one button.
        self.wait_for_text("Continue").await;
        self.client
            .find(Locator::Css("button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// From the dashboard's sign-in page, through the provider, as `login`.
    async fn dashboard_sign_in(&self, platform: &Platform, login: &str) {
        self.go(&format!("{}/login", platform.url)).await;
        self.wait_for("#oidc-sign-in").await;
        self.client
            .find(Locator::Css("#oidc-sign-in"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        self.provider_sign_in(login).await;
    }

    async fn session_cookie(&self) -> String {
        self.client
            .get_named_cookie("abode_session")
            .await
            .unwrap()
            .value()
            .to_string()
    }

    async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `GET /users/me` with `token`: its status.
fn me_status(platform: &Platform, token: &str) -> u16 {
    match ureq::get(&format!("{}/api/v1/users/me", platform.url))
        .set("authorization", &format!("Bearer {token}"))
        .call()
    {
        Ok(response) => response.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(other) => panic!("{other}"),
    }
}

fn start_platform(provider: &Provider, extra: &[&str]) -> Platform {
    let root = tempfile::tempdir().unwrap();
    let secret = root.path().join("client-secret");
    std::fs::write(&secret, format!("{CLIENT_SECRET}\n")).unwrap();
    let mut flags = vec![
        "--oidc-issuer-url",
        &provider.issuer,
        "--oidc-client-id",
        "abode",
        "--oidc-client-secret-file",
        secret.to_str().unwrap(),
        "--oidc-scopes",
        "openid,profile,email,groups",
        "--oidc-sign-in-text",
        "Test IdP",
    ];
    flags.extend_from_slice(extra);
    let platform = Platform::start_with(&flags);
    // The server's port is known now: register its callback.
    provider.admin(
        "PUT",
        "/admin/redirect-uris",
        Some(json!([format!("{}/api/v1/oidc/callback", platform.url)])),
    );
    // The secret file is read at start.
    drop(root);
    platform
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_through_the_provider_from_the_dashboard_and_the_cli() {
    let provider = Provider::start();
    provider.set_user("ann", &["dev", "ops"]);
    provider.set_user("bob", &["dev"]);
    let platform = start_platform(
        &provider,
        &[
            "--oidc-allow-signups",
            "--oidc-group-field",
            "groups",
            "--oidc-allowed-groups",
            "dev",
            "--oidc-group-mapping",
            "ops=operators",
            "--oidc-group-auto-create",
        ],
    );
    platform.login_owner();

    // The dashboard: the provider's login and consent, back on the
    // workspaces page as a new account.
    let browser = Browser::start().await;
    browser.go(&format!("{}/login", platform.url)).await;
    let page = browser.wait_for_text("Sign in with Test IdP").await;
    assert!(
        page.contains("Password"),
        "beside the password form:\n{page}"
    );
    browser.dashboard_sign_in(&platform, "ann").await;
    browser.wait_for_text("Signed in as").await;
    let url = browser.client.current_url().await.unwrap();
    assert!(url.path().starts_with("/workspaces"), "{url}");
    assert!(browser.text().await.contains("ann"));
    let ann_session = browser.session_cookie().await;
    assert_eq!(me_status(&platform, &ann_session), 200);
    // Group sync: the mapped group, `ops` under its Abode name, made on
    // first sight; with a mapping, a group it does not name (`dev`) is
    // neither made nor joined.
    let shown = platform
        .run(&["groups", "show", "operators", "--output", "json"])
        .ok();
    let members = shown.json()["members"].to_string();
    assert!(members.contains("\"ann\""), "operators: {shown}");
    platform
        .run(&["groups", "show", "dev", "--output", "json"])
        .fails_with(1, &["dev"]);

    // The same callback again, even with its state cookie: taken once.
    let last = provider.admin("GET", "/admin/last-callback", None);
    let callback = last["url"].as_str().unwrap().to_string();
    let state = callback
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("state="))
        .unwrap()
        .to_string();
    let replayed = match ureq::get(&callback)
        .set("cookie", &format!("abode_oidc_state={state}"))
        .call()
    {
        Err(ureq::Error::Status(code, response)) => (code, response.into_string().unwrap()),
        other => panic!(
            "a replayed callback was not refused: {:?}",
            other.map(|r| r.status())
        ),
    };
    assert_eq!(replayed.0, 400);
    assert!(
        replayed.1.contains("unknown, already used or expired"),
        "{}",
        replayed.1
    );
    // In the browser (whose state cookie the callback cleared), the same.
    browser.go(&callback).await;
    browser.wait_for_text("Sign-in refused").await;
    browser.close().await;

    // The CLI: `abode login URL` hands its address to $BROWSER (here a
    // script that writes it down); this test's browser follows it.
    let bob_dir = cli_sign_in(&platform, "bob").await;
    let me = platform
        .run_as(&bob_dir, &["users", "me", "--output", "json"], None)
        .ok();
    assert_eq!(me.json()["username"], "bob", "{me}");

    // The provider's key rotated: the next sign-in's token names a key the
    // server has not seen, which it fetches, and the sign-in succeeds.
    let before = provider.admin("POST", "/admin/rotate", None);
    assert!(before["kid"].is_string());
    let browser = Browser::start().await;
    browser.dashboard_sign_in(&platform, "bob").await;
    browser.wait_for_text("Signed in as").await;
    browser.close().await;
    assert!(
        platform
            .server_log()
            .contains("signing keys were fetched again"),
        "{}",
        platform.server_log()
    );

    // Ann leaves the allowed group at the provider: her next sign-in is
    // refused with a page that says why, and her session ends.
    provider.set_user("ann", &["ops"]);
    let browser = Browser::start().await;
    browser.dashboard_sign_in(&platform, "ann").await;
    let page = browser.wait_for_text("Sign-in refused").await;
    assert!(page.contains("not in a group allowed"), "{page}");
    browser.close().await;
    assert_eq!(me_status(&platform, &ann_session), 401);

    // A suspended account stays out whatever the provider says.
    platform.run(&["users", "suspend", "bob"]).ok();
    let browser = Browser::start().await;
    browser.dashboard_sign_in(&platform, "bob").await;
    let page = browser.wait_for_text("Sign-in refused").await;
    assert!(page.contains("your account is suspended"), "{page}");
    browser.close().await;
    platform.run(&["users", "activate", "bob"]).ok();

    // An ID token that expired by the server's clock (an hour's lifetime,
    // the server two hours ahead) is refused.
    platform.advance_clock(Duration::from_secs(2 * 60 * 60));
    let browser = Browser::start().await;
    browser.dashboard_sign_in(&platform, "bob").await;
    let page = browser.wait_for_text("Sign-in refused").await;
    assert!(page.contains("the ID token has expired"), "{page}");
    browser.close().await;

    // Each outcome is in the audit log as a login with method=oidc, with
    // no code, state or token.
    let audit = platform
        .run(&["audit", "--output", "json"])
        .ok()
        .to_string();
    assert!(audit.contains("method=oidc"), "{audit}");
    assert!(audit.contains("reason=not_in_allowed_groups"), "{audit}");
    assert!(!audit.contains(&state), "the state is in the audit log");
    assert!(
        !platform.server_log().contains(&state),
        "the state is in the server's log"
    );
}

#[test]
fn password_sign_in_can_be_turned_off() {
    let platform = Platform::start_with(&["--disable-password-auth"]);
    // The first user's setup still works, and so does the recovery command.
    platform.login_owner();
    let refused = platform.run_as(
        &platform.config_dir(),
        &[
            "login",
            &platform.url,
            "--username",
            "alice",
            "--password-stdin",
        ],
        Some("correct horse battery\n"),
    );
    refused.fails_with(1, &["password sign-in is turned off"]);
    let page = ureq::get(&format!("{}/login", platform.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(page.contains("Password sign-in is turned off"), "{page}");
    assert!(!page.contains("name=\"password\""), "{page}");
    let methods: Value = ureq::get(&format!("{}/api/v1/sign-in-methods", platform.url))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(methods, json!({"password": false, "oidc": null}));
    // `abode login URL` without a username says how this server signs in.
    platform
        .run(&["login", &platform.url])
        .fails_with(1, &["has no single sign-on"]);
}

/// Issue 46: single sign-on's start and callback are throttled per client
/// address, as password logins are: each start keeps a pending sign-in and
/// asks the provider, so one address may not make them without end. The
/// 31st attempt within the minute from one address is refused (429, with
/// `Retry-After`), audited once; another address (forwarded by a trusted
/// proxy) still starts its sign-in.
#[test]
fn single_sign_on_attempts_are_throttled_per_address() {
    let provider = Provider::start();
    let platform = start_platform(&provider, &["--trusted-proxies", "127.0.0.1/32"]);
    platform.login_owner();
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let attempt = |from: &str, path: &str| -> (u16, Option<String>) {
        let request = agent
            .get(&format!("{}{path}", platform.url))
            .set("x-forwarded-for", from);
        match request.call() {
            Ok(response) => (
                response.status(),
                response.header("retry-after").map(str::to_string),
            ),
            Err(ureq::Error::Status(status, response)) => {
                (status, response.header("retry-after").map(str::to_string))
            }
            Err(other) => panic!("{other}"),
        }
    };
    // Starts and callbacks count alike: 20 starts and 10 callbacks.
    for _ in 0..20 {
        assert_eq!(attempt("203.0.113.9", "/api/v1/oidc/login").0, 303);
    }
    for _ in 0..10 {
        let (status, _) = attempt("203.0.113.9", "/api/v1/oidc/callback?state=x&code=y");
        assert_ne!(status, 429);
    }
    let (status, retry_after) = attempt("203.0.113.9", "/api/v1/oidc/login");
    assert_eq!(status, 429);
    assert!(retry_after.is_some_and(|seconds| seconds.parse::<u64>().is_ok_and(|s| s >= 1)));
    let (status, _) = attempt("203.0.113.9", "/api/v1/oidc/callback?state=x&code=y");
    assert_eq!(status, 429);
    // Another address is not held back by this one.
    assert_eq!(attempt("198.51.100.4", "/api/v1/oidc/login").0, 303);
    let audit = platform
        .run(&["audit", "--action", "login.throttle", "--output", "json"])
        .ok();
    assert_eq!(
        audit.stdout.matches("method=oidc").count(),
        1,
        "audited once per window: {}",
        audit.stdout
    );
    assert!(audit.stdout.contains("203.0.113.9"), "{}", audit.stdout);
}

// ---- a hostile provider ----

/// Provider cookies, as a browser keeps them (by name: every path of this
/// one provider gets them all, which it does not mind).
#[derive(Default)]
struct Jar(std::collections::BTreeMap<String, String>);

impl Jar {
    fn keep(&mut self, response: &ureq::Response) {
        for line in response.all("set-cookie") {
            let pair = line.split(';').next().unwrap_or_default();
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            let cleared = value.is_empty() || line.to_ascii_lowercase().contains("01 jan 1970");
            if cleared {
                self.0.remove(name.trim());
            } else {
                self.0.insert(name.trim().to_string(), value.to_string());
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A request's answer whatever its status (no redirect followed).
fn answer(result: Result<ureq::Response, ureq::Error>) -> ureq::Response {
    match result {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(other) => panic!("{other}"),
    }
}

/// What Abode's callback answered.
#[derive(Debug)]
struct Callback {
    status: u16,
    location: Option<String>,
    /// The `abode_session` cookie it set, if any.
    session: Option<String>,
    /// The page's text (entities of its one sentence undone).
    page: String,
}

impl Callback {
    fn call(callback: &str, state: &str) -> Callback {
        let agent = ureq::AgentBuilder::new().redirects(0).build();
        let response = answer(
            agent
                .get(callback)
                .set("cookie", &format!("abode_oidc_state={state}"))
                .call(),
        );
        let session = response
            .all("set-cookie")
            .iter()
            .filter_map(|line| line.split(';').next()?.strip_prefix("abode_session="))
            .find(|value| !value.is_empty())
            .map(str::to_string);
        Callback {
            status: response.status(),
            location: response.header("location").map(str::to_string),
            session,
            page: response
                .into_string()
                .unwrap()
                .replace("&#39;", "'")
                .replace("&#x27;", "'")
                .replace("&quot;", "\"")
                .replace("&amp;", "&"),
        }
    }
}

/// A dashboard sign-in over plain HTTP, as a browser makes it: Abode's
/// start (its state cookie), the provider's own login and consent forms as
/// `login`, and the provider's redirect back. The callback's URL and the
/// state cookie, for [`Callback::call`].
fn http_sign_in(platform: &Platform, provider: &Provider, login: &str) -> (String, String) {
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let started = answer(
        agent
            .get(&format!("{}/api/v1/oidc/login", platform.url))
            .call(),
    );
    assert_eq!(started.status(), 303, "{}", platform.server_log());
    let state = started
        .all("set-cookie")
        .iter()
        .find_map(|line| line.split(';').next()?.strip_prefix("abode_oidc_state="))
        .unwrap()
        .to_string();
    let mut url = started.header("location").unwrap().to_string();
    let callback = format!("{}/api/v1/oidc/callback?", platform.url);
    let mut jar = Jar::default();
    for _ in 0..20 {
        let request = agent.get(&url).set("cookie", &jar.header());
        let mut response = answer(request.call());
        jar.keep(&response);
        if response.header("location").is_none() {
            // One of the provider's pages: its login form (any password:
            // the login is the person) or its consent form.
            let page = response.into_string().unwrap();
            let form: &[(&str, &str)] = if page.contains(r#"name="prompt" value="login""#) {
                &[
                    ("prompt", "login"),
                    ("login", login),
                    ("password", "any password"),
                ]
            } else if page.contains(r#"name="prompt" value="consent""#) {
                &[("prompt", "consent")]
            } else {
                panic!(
                    "the provider's page at {url} is neither its login nor its consent:\n{page}"
                );
            };
            response = answer(
                agent
                    .post(&url)
                    .set("cookie", &jar.header())
                    .send_form(form),
            );
            jar.keep(&response);
        }
        let location = response
            .header("location")
            .unwrap_or_else(|| panic!("the provider sent no redirect from {url}"));
        url = if location.starts_with('/') {
            format!("{}{location}", provider.issuer)
        } else {
            location.to_string()
        };
        if url.starts_with(&callback) {
            return (url, state);
        }
    }
    panic!("the provider never sent {login} back to Abode (last at {url})");
}

/// The owner's audit events, newest first.
fn audit_events(platform: &Platform) -> Vec<Value> {
    platform
        .run(&["audit", "--limit", "1000", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// Every account's name, sorted.
fn usernames(platform: &Platform) -> Vec<String> {
    let listed = platform
        .run(&["users", "list", "--all", "--output", "json"])
        .ok()
        .json();
    let mut names: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|user| user["username"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// One attempt of the table below.
enum Attempt {
    /// A sign-in as this person at the provider, its token endpoint lying
    /// as the forgery says (`None`: telling the truth).
    SignIn {
        login: &'static str,
        forge: Option<&'static str>,
    },
    /// The first sign-in's callback again, with its state cookie.
    ReplayFirstCallback,
}

/// What Abode must do with an attempt.
enum Outcome {
    /// Signed in: a session for this account, which exists afterwards.
    SignedIn(&'static str),
    /// Refused with this status and page sentence, audited as a failed
    /// `login` with this reason, and nothing else done.
    Refused(u16, &'static str, &'static str),
}

/// Issue 46: a hostile identity provider. The real provider (oidc-provider,
/// its own login and consent, its own key) runs every sign-in, but its
/// token endpoint swaps the ID token it signed for a forged one
/// (provider.mjs's forgeries): unsigned (`alg: none`), for another client,
/// from another issuer, expired an hour ago, the token of an earlier
/// sign-in (another nonce), HMAC keyed by the client secret, and signed by
/// a key of the forger's under the provider's key id; and the provider
/// itself vouches for an address it has not verified, where the address is
/// what makes the account (sign-ups on). Each is refused with a page that
/// says which check failed, audited as a failed `login` with that check as
/// its reason, and leaves no session cookie, no account and no other audit
/// event behind; a replayed callback is refused the same way. Two honest
/// sign-ins, first and last, succeed in the same server: the test tells a
/// forgery from a sign-in.
#[test]
fn forged_id_tokens_from_a_hostile_provider_are_refused() {
    let provider = Provider::start();
    provider.admin(
        "PUT",
        "/admin/users/unverified",
        Some(json!({
            "email": "unverified@example.com",
            "email_verified": false,
            "preferred_username": "unverified",
            "groups": [],
        })),
    );
    let platform = start_platform(&provider, &["--oidc-allow-signups"]);
    platform.login_owner();

    use Attempt::*;
    use Outcome::*;
    let refused_token = |why: &'static str, reason: &'static str| Refused(403, why, reason);
    let cases: Vec<(&str, Attempt, Outcome)> = vec![
        (
            "honest: ann's first sign-in makes her account",
            SignIn {
                login: "ann",
                forge: None,
            },
            SignedIn("ann"),
        ),
        (
            "the same callback again",
            ReplayFirstCallback,
            Refused(
                400,
                "this sign-in is unknown, already used or expired",
                "unknown_state",
            ),
        ),
        (
            "ann's earlier ID token presented to her new sign-in",
            SignIn {
                login: "ann",
                forge: Some("replay"),
            },
            refused_token(
                "the ID token answers another sign-in (nonce)",
                "id_token_nonce",
            ),
        ),
        (
            "alg none",
            SignIn {
                login: "forged-none",
                forge: Some("none"),
            },
            refused_token(
                "the ID token's signature algorithm `none` is refused",
                "id_token_algorithm",
            ),
        ),
        (
            "signed for another client",
            SignIn {
                login: "forged-audience",
                forge: Some("audience"),
            },
            refused_token(
                "the ID token is for another client (audience)",
                "id_token_audience",
            ),
        ),
        (
            "signed as another issuer",
            SignIn {
                login: "forged-issuer",
                forge: Some("issuer"),
            },
            refused_token("the ID token comes from another issuer", "id_token_issuer"),
        ),
        (
            "expired an hour ago",
            SignIn {
                login: "forged-expired",
                forge: Some("expired"),
            },
            refused_token("the ID token has expired", "id_token_expired"),
        ),
        (
            "HMAC keyed by the client secret",
            SignIn {
                login: "forged-hmac",
                forge: Some("hmac"),
            },
            refused_token(
                "the ID token's signature algorithm `HS256` is refused",
                "id_token_algorithm",
            ),
        ),
        (
            "signed by the forger's key under the provider's key id",
            SignIn {
                login: "forged-key",
                forge: Some("foreign-key"),
            },
            refused_token(
                "the ID token's signature does not verify",
                "id_token_signature",
            ),
        ),
        (
            "an address the provider has not verified",
            SignIn {
                login: "unverified",
                forge: None,
            },
            Refused(
                403,
                "the identity provider has not verified the email address unverified@example.com",
                "email_not_verified",
            ),
        ),
        (
            "honest again: bo's first sign-in makes his account",
            SignIn {
                login: "bo",
                forge: None,
            },
            SignedIn("bo"),
        ),
    ];

    let mut first_callback: Option<(String, String)> = None;
    for (name, attempt, outcome) in cases {
        let users_before = usernames(&platform);
        let audit_before: Vec<Value> = audit_events(&platform)
            .iter()
            .map(|event| event["id"].clone())
            .collect();
        let (callback, state) = match attempt {
            SignIn { login, forge } => {
                provider.admin("PUT", "/admin/forge", Some(json!({ "forge": forge })));
                let made = http_sign_in(&platform, &provider, login);
                first_callback.get_or_insert_with(|| made.clone());
                made
            }
            ReplayFirstCallback => first_callback.clone().unwrap(),
        };
        let answered = Callback::call(&callback, &state);
        let new_events: Vec<Value> = audit_events(&platform)
            .into_iter()
            .filter(|event| !audit_before.contains(&event["id"]))
            .collect();
        let users_after = usernames(&platform);
        match outcome {
            SignedIn(username) => {
                assert_eq!(answered.status, 303, "{name}: {answered:?}");
                assert_eq!(answered.location.as_deref(), Some("/workspaces"), "{name}");
                let token = answered
                    .session
                    .as_deref()
                    .unwrap_or_else(|| panic!("{name}: no session cookie: {answered:?}"));
                let me: Value = ureq::get(&format!("{}/api/v1/users/me", platform.url))
                    .set("authorization", &format!("Bearer {token}"))
                    .call()
                    .unwrap()
                    .into_json()
                    .unwrap();
                assert_eq!(me["user"]["username"], username, "{name}: {me}");
                assert!(!users_before.contains(&username.to_string()), "{name}");
                assert!(users_after.contains(&username.to_string()), "{name}");
                let login = new_events
                    .iter()
                    .find(|event| event["action"] == "login")
                    .unwrap_or_else(|| panic!("{name}: no login audited: {new_events:#?}"));
                assert_eq!(login["outcome"], "success", "{name}: {login}");
                assert!(
                    login["details"]
                        .as_str()
                        .is_some_and(|details| details.contains("method=oidc")),
                    "{name}: {login}"
                );
            }
            Refused(status, sentence, reason) => {
                assert_eq!(answered.status, status, "{name}: {}", answered.page);
                assert!(
                    answered.page.contains("Sign-in refused") && answered.page.contains(sentence),
                    "{name}: the page does not say {sentence:?}:\n{}",
                    answered.page
                );
                assert_eq!(answered.location, None, "{name}: redirected");
                assert_eq!(answered.session, None, "{name}: a session cookie was set");
                assert_eq!(users_after, users_before, "{name}: an account was made");
                // Nothing but the refusal happened: no account, session
                // (`token.create`) or group sync was recorded.
                assert_eq!(
                    new_events.len(),
                    1,
                    "{name}: more than the refusal happened: {new_events:#?}"
                );
                let refusal = &new_events[0];
                assert_eq!(refusal["action"], "login", "{name}: {refusal}");
                assert_eq!(refusal["outcome"], "failure", "{name}: {refusal}");
                let details = refusal["details"].as_str().unwrap_or_default();
                let words: Vec<&str> = details.split(' ').collect();
                assert!(
                    words.contains(&"method=oidc")
                        && words.contains(&format!("reason={reason}").as_str()),
                    "{name}: audited as {details:?}, not reason={reason}"
                );
            }
        }
    }
    // What the server's log says of the refusals carries no ID token (a
    // JWT's header, `eyJ...`).
    assert!(
        !platform.server_log().contains("eyJ"),
        "{}",
        platform.server_log()
    );
}

/// `abode login URL` as `login` through the provider: the CLI hands its
/// address to `$BROWSER` (here a script that writes it down), which this
/// test's browser follows. The CLI's config dir, signed in.
async fn cli_sign_in(platform: &Platform, login: &str) -> std::path::PathBuf {
    let opened = platform.root().join(format!("{login}-opened-url"));
    let script = platform.root().join(format!("{login}-browser.sh"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" > {}.tmp && mv {0}.tmp {0}\n",
            opened.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let dir = platform.root().join(format!("{login}-cli"));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = Command::new(util::abode_bin())
        .args(["login", &platform.url])
        .env("ABODE_CONFIG_DIR", &dir)
        .env("BROWSER", &script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let address = loop {
        if let Ok(text) = std::fs::read_to_string(&opened) {
            break text.trim().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "abode login never opened a browser"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        address.starts_with(&format!("{}/api/v1/oidc/login?cli_port=", platform.url)),
        "{address}"
    );
    let browser = Browser::start().await;
    browser.go(&address).await;
    browser.provider_sign_in(login).await;
    browser.wait_for_text("close this tab").await;
    browser.close().await;
    let output = cli.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(&format!("as {login} (member)")), "{stdout}");
    dir
}

/// A sign-on whose group sync takes someone out of a group cuts, at once,
/// the session they had open through a share to that group: the sync
/// narrows access as a group edit does (the server says what woke the
/// check that closed it, so the 15 s periodic check cannot pass for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_group_at_sign_on_cuts_a_session_shared_through_it() {
    util::require_terraform();
    let provider = Provider::start();
    provider.set_user("bob", &["pairing"]);
    let platform = start_platform(
        &provider,
        &[
            "--oidc-allow-signups",
            "--oidc-group-field",
            "groups",
            "--oidc-group-auto-create",
        ],
    );
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let bob = cli_sign_in(&platform, "bob").await;
    platform
        .run(&[
            "sharing", "add", "dev", "--group", "pairing", "--role", "use",
        ])
        .ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let mut session = platform.open_ssh_session(&bob, "alice/dev");

    // Out of the group at the provider; his next sign-on syncs it.
    provider.set_user("bob", &[]);
    let browser = Browser::start().await;
    browser.dashboard_sign_in(&platform, "bob").await;
    browser.wait_for_text("Signed in as").await;
    browser.close().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while session.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = session.kill();
            panic!("bob's session still open 60 s after he left the group");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    platform.assert_connection_closed_at_once();
}
