//! Sessions and credentials through the real binary: logout revokes the
//! session on the server, sessions expire (idle and lifetime), API tokens are
//! shown once, work as bearers and can be revoked, password guessing is
//! throttled, and 200 parallel failed logins do not blow up the server's
//! memory (the bounded hashing pool).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use abode_client::Client;
use util::{peak_rss_kb, Platform};

const OWNER_PASSWORD: &str = "correct horse battery";

/// `POST /api/v1/login` over a plain socket, to see the status and the
/// `Retry-After` header the typed client does not expose.
fn post_login(url: &str, username: &str, password: &str) -> (u16, Option<u64>, serde_json::Value) {
    let address = url.trim_start_matches("http://");
    let body = serde_json::json!({"username": username, "password": password}).to_string();
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /api/v1/login HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap();
    let retry_after = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("retry-after")
            .then(|| value.trim().parse().ok())?
    });
    let json = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    (status, retry_after, json)
}

/// The server's audit events with `action`, as the owner reads them.
fn audit_events(platform: &Platform, action: &str) -> Vec<serde_json::Value> {
    let events = platform
        .run(&["audit", "--limit", "1000", "--output", "json"])
        .ok()
        .json();
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["action"] == action)
        .cloned()
        .collect()
}

fn owner_session_token(platform: &Platform) -> String {
    abode_client::config::load_session(&platform.config_dir())
        .unwrap()
        .expect("logged in")
        .token
}

#[test]
fn logout_revokes_the_session_on_the_server() {
    let platform = Platform::start();
    platform.login_owner();
    let token = owner_session_token(&platform);
    let client = Client::new(&platform.url, Some(token.clone()));
    assert_eq!(client.me().unwrap().username, "alice");

    let run = platform.run(&["logout"]).ok();
    assert!(run.stdout.contains("ended on the server"), "{run}");
    assert!(!run.stdout.contains(&token) && !run.stderr.contains(&token));

    // The token itself no longer works, not only the local copy.
    let error = client.me().unwrap_err();
    assert_eq!(error.status(), Some(401), "{error}");
    assert!(error.to_string().contains("log in again"), "{error}");
    platform
        .run(&["users", "me"])
        .fails_with(1, &["not logged in"]);
    // Logging out again has nothing to end.
    platform.run(&["logout"]).ok();

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
            Some(&format!("{OWNER_PASSWORD}\n")),
        )
        .ok();
    let logouts = audit_events(&platform, "logout");
    assert_eq!(logouts.len(), 1, "{logouts:?}");
    assert_eq!(logouts[0]["actor"], "alice");
    assert_eq!(logouts[0]["outcome"], "success");
    assert!(!platform.server_log().contains(&token));
}

#[test]
fn sessions_expire_when_idle_and_at_their_lifetime_but_api_tokens_do_not_idle() {
    // The server's clock is moved, never waited for.
    let platform = Platform::start_with(&[
        "--session-idle-timeout",
        "30m",
        "--session-max-lifetime",
        "2h",
    ]);
    platform.login_owner();
    let anonymous = Client::new(&platform.url, None);

    // Idle: unused for longer than 30 minutes.
    let idle = anonymous.login("alice", OWNER_PASSWORD).unwrap().token;
    let idle = Client::new(&platform.url, Some(idle));
    idle.me().unwrap();
    // An API token (made with a fresh session) has no idle timeout.
    let api_token = platform
        .run(&["tokens", "create", "--name", "idle-check"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let api = Client::new(&platform.url, Some(api_token));
    platform.advance_clock(Duration::from_secs(31 * 60));
    let error = idle.me().unwrap_err();
    assert_eq!(error.status(), Some(401), "{error}");
    assert!(
        error.to_string().contains("session expired") && error.to_string().contains("log in again"),
        "{error}"
    );
    assert_eq!(api.me().unwrap().username, "alice");
    // The CLI says the same, on one line.
    platform
        .run(&["users", "me"])
        .fails_with(1, &["session expired", "log in again"]);

    // Lifetime: used every 25 minutes (never idle), it still ends 2 hours
    // after its login: it works at 100 minutes and not at 125.
    let step = Duration::from_secs(25 * 60);
    let busy = anonymous.login("alice", OWNER_PASSWORD).unwrap().token;
    let busy = Client::new(&platform.url, Some(busy));
    let mut aged = Duration::ZERO;
    let error = loop {
        if let Err(error) = busy.me() {
            break error;
        }
        assert!(aged < Duration::from_secs(4 * 60 * 60), "never expired");
        platform.advance_clock(step);
        aged += step;
    };
    assert!(error.to_string().contains("session expired"), "{error}");
    assert_eq!(aged, 5 * step, "expired at {aged:?} after its login");
}

#[test]
fn api_tokens_are_shown_once_work_as_bearers_and_can_be_revoked() {
    let platform = Platform::start_with(&["--api-token-max-lifetime", "30d"]);
    platform.login_owner();

    let created = platform
        .run(&["tokens", "create", "--name", "ci", "--lifetime", "7d"])
        .ok();
    let token = created.stdout.trim().to_string();
    assert!(
        token.starts_with("abode_api_") && created.stdout.lines().count() == 1,
        "stdout must be the token alone:\n{created}"
    );
    assert!(created.stderr.contains("shown only now"), "{created}");
    assert!(!created.stderr.contains(&token));

    // It works as a bearer, for the API and for the CLI.
    let api = Client::new(&platform.url, Some(token.clone()));
    assert_eq!(api.me().unwrap().username, "alice");
    let mut with_token = platform.cmd_as(&platform.root().join("no-session"), &["users", "me"]);
    with_token
        .env("ABODE_URL", &platform.url)
        .env("ABODE_TOKEN", &token);
    let output = with_token.output().unwrap();
    assert!(output.status.success(), "{output:?}");

    // Listed without the token; names are unique per user.
    for format in ["text", "json"] {
        let listed = platform.run(&["tokens", "list", "--output", format]).ok();
        assert!(listed.stdout.contains("ci"), "{listed}");
        assert!(!listed.stdout.contains(&token), "{listed}");
    }
    let listed = platform
        .run(&["tokens", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(listed[0]["name"], "ci");
    assert!(listed[0]["expires_at"].is_string() && listed[0]["last_used_at"].is_string());
    platform
        .run(&["tokens", "create", "--name", "ci"])
        .fails_with(1, &["already have an API token named \"ci\""]);
    // The server caps lifetimes.
    platform
        .run(&["tokens", "create", "--name", "long", "--lifetime", "31d"])
        .fails_with(1, &["at most"]);
    // An API token cannot mint API tokens (it would outlive any cap).
    let mut minting = platform.cmd_as(
        &platform.root().join("no-session"),
        &["tokens", "create", "--name", "child"],
    );
    minting
        .env("ABODE_URL", &platform.url)
        .env("ABODE_TOKEN", &token);
    let output = minting.output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot create API tokens"));

    // Its own lifetime ends it.
    let short = platform
        .run(&["tokens", "create", "--name", "short", "--lifetime", "1h"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let short = Client::new(&platform.url, Some(short));
    assert_eq!(short.me().unwrap().username, "alice");
    platform.advance_clock(Duration::from_secs(61 * 60));
    let error = short.me().unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert!(error.to_string().contains("expired"), "{error}");

    // Revoked: 401 at once; the name is free again.
    platform.run(&["tokens", "revoke", "ci"]).ok();
    let error = api.me().unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert!(error.to_string().contains("revoked"), "{error}");
    platform
        .run(&["tokens", "revoke", "ci"])
        .fails_with(1, &["no API token named \"ci\""]);
    let listed = platform
        .run(&["tokens", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["name"], "short");

    assert_eq!(audit_events(&platform, "api_token.create").len(), 2);
    assert_eq!(audit_events(&platform, "api_token.revoke").len(), 1);
    let log = platform.server_log();
    assert!(!log.contains(&token), "the token reached the server log");
}

/// A token narrowed to pushing one template (issue 49): it pushes that
/// template, created by the push, and everything else is refused with the
/// scope it needs named; a `read` token reads and changes nothing. Bad
/// scopes are one line each.
#[test]
fn a_template_push_token_pushes_its_template_and_nothing_else() {
    util::require_terraform();
    let platform = Platform::start_with(&[]);
    platform.login_owner();
    let template = util::repo_root().join("examples/local-workspace");
    let template = template.to_str().unwrap();

    for (args, says) in [
        (vec!["--scope", "write"], "unknown scope `write`"),
        (vec!["--scope", "template:push"], "--template T"),
        (vec!["--template", "web"], "template:push only"),
        (vec!["--scope", "all", "--scope", "read"], "give all alone"),
        (
            vec!["--scope", "workspace:build", "--workspace", "nope"],
            "workspace \"nope\" not found",
        ),
    ] {
        let mut command = vec!["tokens", "create", "bad"];
        command.extend(args);
        platform.run(&command).fails_with(1, &[says]);
    }

    let created = platform
        .run(&[
            "tokens",
            "create",
            "ci-push",
            "--lifetime",
            "1h",
            "--scope",
            "template:push",
            "--template",
            "web",
        ])
        .ok();
    let push_token = created.stdout.trim().to_string();
    assert!(
        created.stderr.contains("scope template:push=web"),
        "{created}"
    );
    let read_token = platform
        .run(&["tokens", "create", "reader", "--scope", "read"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let as_token = |token: &str, args: &[&str]| {
        let mut command = platform.cmd_as(&platform.root().join("no-session"), args);
        command
            .env("ABODE_URL", &platform.url)
            .env("ABODE_TOKEN", token);
        util::Run::from_output(
            format!("abode {}", args.join(" ")),
            command.output().unwrap(),
        )
    };

    // Its template, which the push creates.
    as_token(&push_token, &["templates", "push", "web", "-d", template]).ok();
    // Anything else: refused, naming the scope that would allow it.
    as_token(&push_token, &["list"]).fails_with(1, &["needs scope read"]);
    as_token(&push_token, &["templates", "push", "api", "-d", template])
        .fails_with(1, &["needs scope template:push for template \"api\""]);
    let pushed = platform
        .run(&["templates", "list", "--output", "json"])
        .ok()
        .json();
    let names: Vec<&str> = pushed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|template| template["name"].as_str())
        .collect();
    assert_eq!(names, ["web"], "{pushed:#}");

    // A read token reads, and changes nothing.
    as_token(&read_token, &["list"]).ok();
    as_token(&read_token, &["templates", "list"]).ok();
    as_token(&read_token, &["create", "dev", "--template", "web"])
        .fails_with(1, &["needs scope all"]);

    // The list shows each token's scope; the audit log, the scope asked.
    let listed = platform
        .run(&["tokens", "list", "--output", "json"])
        .ok()
        .json();
    let scope_of = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|token| token["name"] == name)
            .map(|token| token["scope"].clone())
    };
    assert_eq!(scope_of("ci-push").unwrap(), "template:push=web");
    assert_eq!(scope_of("reader").unwrap(), "read");
    let created = audit_events(&platform, "api_token.create");
    assert!(
        created.iter().any(|event| event["details"]
            .as_str()
            .unwrap_or("")
            .contains("scope=template:push=web")),
        "{created:#?}"
    );
}

#[test]
fn the_eleventh_failed_login_within_a_minute_is_throttled_and_audited_once() {
    let platform = Platform::start();
    platform.login_owner();
    for attempt in 1..=10 {
        let (status, _, body) = post_login(&platform.url, "alice", "wrong password");
        assert_eq!(status, 401, "attempt {attempt}: {body}");
    }
    let mut retry_afters = Vec::new();
    for _ in 0..3 {
        // The right password too: the username is throttled, not the guess.
        for password in ["wrong password", OWNER_PASSWORD] {
            let (status, retry_after, body) = post_login(&platform.url, "alice", password);
            assert_eq!(status, 429, "{body}");
            assert_eq!(body["error"]["code"], "too_many_requests");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("too many failed logins") && !message.contains('\n'),
                "{message}"
            );
            retry_afters.push(retry_after.expect("a Retry-After header"));
        }
    }
    assert!(
        retry_afters
            .iter()
            .all(|&seconds| (1..=60).contains(&seconds)),
        "{retry_afters:?}"
    );
    let throttled = audit_events(&platform, "login.throttle");
    assert_eq!(throttled.len(), 1, "audited once per window: {throttled:?}");
    assert_eq!(throttled[0]["target"], "alice");
    assert_eq!(throttled[0]["outcome"], "failure");
    let failures = audit_events(&platform, "login")
        .into_iter()
        .filter(|event| event["outcome"] == "failure")
        .count();
    assert_eq!(failures, 10, "refused tries are not checked nor audited");
    // The session made before keeps working.
    platform.run(&["users", "me"]).ok();
}

/// 200 wrong-password logins in parallel (half for a real user, half for
/// unknown ones) once took the server from 15 MB to 6 GB: each ran Argon2's
/// 19 MiB on a thread of its own. Now they share a few hashing threads and
/// the rest are refused as busy.
#[test]
fn two_hundred_parallel_failed_logins_keep_the_servers_peak_memory_bounded() {
    // No throttle: every try should reach the password check.
    let platform = Platform::start_with(&["--login-failures-per-minute", "0"]);
    let pid = platform.server_pid().unwrap();
    let idle_kb = peak_rss_kb(pid);
    platform.login_owner();

    let start = std::sync::Arc::new(std::sync::Barrier::new(200));
    let threads: Vec<_> = (0..200)
        .map(|index| {
            let url = platform.url.clone();
            let start = std::sync::Arc::clone(&start);
            std::thread::spawn(move || {
                let username = if index % 2 == 0 {
                    "alice".to_string()
                } else {
                    format!("nobody-{index}")
                };
                start.wait();
                let (status, retry_after, body) = post_login(&url, &username, "not the password");
                (status, retry_after, body)
            })
        })
        .collect();
    let mut refused = 0;
    let mut busy = 0;
    for thread in threads {
        let (status, retry_after, body) = thread.join().unwrap();
        match status {
            401 => refused += 1,
            503 => {
                assert_eq!(body["error"]["code"], "unavailable", "{body}");
                assert!(retry_after.is_some(), "503 without Retry-After");
                busy += 1;
            }
            other => panic!("unexpected status {other}: {body}"),
        }
    }
    let peak_kb = peak_rss_kb(pid);
    let growth_mb = peak_kb.saturating_sub(idle_kb) / 1024;
    eprintln!(
        "server peak RSS: idle {} MB, after 200 parallel failed logins {} MB (+{growth_mb} MB); \
         {refused} checked and refused (401), {busy} refused as busy (503)",
        idle_kb / 1024,
        peak_kb / 1024
    );
    assert!(refused > 0, "no password was checked at all");
    assert!(
        growth_mb < 100,
        "the server's peak memory grew by {growth_mb} MB (idle {idle_kb} kB, peak {peak_kb} kB)"
    );
    // The server still answers logins.
    let (status, _, _) = post_login(&platform.url, "alice", OWNER_PASSWORD);
    assert_eq!(status, 200);
}
