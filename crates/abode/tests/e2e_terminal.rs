//! The web terminal (issue 33) through a real browser: headless Chromium
//! over WebDriver against the real binary, server, Terraform, the example
//! template and its real agent. The dashboard opens a shell in the
//! workspace: what is typed runs (`echo $((6*7))` shows 42), a resized
//! window resizes the terminal (`stty size`), and a reloaded page shows the
//! earlier output again and the same shell (`echo $$`), and so does the
//! page after its connection dropped (the server restarted), without
//! showing anything twice. Then, in plain
//! HTTP, what a browser would hide: a WebSocket opened from another origin
//! with the dashboard's cookie is refused, so is the cookie without a
//! browser's origin, an anonymous visitor is sent to sign in, and the
//! connection is audited as a `pty` connection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser;
use crate::util;

use std::time::{Duration, Instant};

use browser::{done, Browser};
use fantoccini::key::Key;
use tokio_tungstenite::tungstenite;
use tungstenite::client::IntoClientRequest;
use util::{copy_dir, repo_root, require_terraform, Platform};

const PASSWORD: &str = "correct horse battery";

/// The terminal's text as the page shows it, one row per line.
async fn screen(browser: &Browser) -> String {
    browser
        .script("const rows = document.querySelector('.xterm-rows'); return rows ? rows.innerText : '';")
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Waits (up to a minute) until the terminal shows a line that `matches`
/// picks something from; returns what it picked, newest line first.
async fn wait_for_line<F>(browser: &Browser, what: &str, matches: F) -> String
where
    F: Fn(&str) -> Option<String>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = screen(browser).await;
        if let Some(found) = text.lines().rev().find_map(|line| matches(line.trim())) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "the terminal never showed {what}; it shows:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every line of the terminal `matches` picks something from.
async fn all_lines<F>(browser: &Browser, matches: F) -> Vec<String>
where
    F: Fn(&str) -> Option<String>,
{
    screen(browser)
        .await
        .lines()
        .filter_map(|line| matches(line.trim()))
        .collect()
}

/// What is between `before` and `after` at the end of a line: the shell's
/// output, never the echo of the typed command (which shows the unexpanded
/// `$(...)`). A prompt may precede it on the line, because a line typed
/// before the shell's first prompt is echoed by the terminal before it.
fn between(before: &'static str, after: &'static str) -> impl Fn(&str) -> Option<String> {
    move |line: &str| {
        let (_, inner) = line.strip_suffix(after)?.rsplit_once(before)?;
        (!inner.is_empty() && !inner.contains('$')).then(|| inner.to_string())
    }
}

/// A line the shell ended with `answer` (not the echo of a command).
fn answered(answer: &'static str) -> impl Fn(&str) -> Option<String> {
    move |line: &str| {
        (line.split_whitespace().last() == Some(answer) && !line.contains("echo"))
            .then(|| answer.to_string())
    }
}

/// Types `line` into the terminal and presses Enter.
async fn type_line(browser: &Browser, line: &str) {
    browser.type_into(".xterm-helper-textarea", line).await;
    browser
        .type_into(
            ".xterm-helper-textarea",
            &char::from(Key::Enter).to_string(),
        )
        .await;
}

async fn wait_connected(browser: &Browser) {
    browser.wait_for_element(".xterm-rows").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while browser.text("#terminal-status").await != "Connected." {
        assert!(Instant::now() < deadline, "the terminal never connected");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The example template with an app whose command greets and then hands
/// over to a shell.
const GREETING_APP: &str = r#"
resource "abode_app" "greet" {
  count    = data.abode_workspace.me.start_count
  agent_id = abode_agent.main[0].id
  slug     = "greet"
  command  = "printf 'app says %s\\n' $((6*7)); exec sh"
}
"#;

/// alice's running workspace `dev` from the example (with
/// [`GREETING_APP`]), and a browser signed in as her.
async fn signed_in_with_a_workspace(platform: &Platform) -> Browser {
    platform.login_owner();
    let template = platform.root().join("templates/local");
    copy_dir(&repo_root().join("examples/local-workspace"), &template);
    let main = template.join("main.tf");
    let text = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, format!("{text}{GREETING_APP}")).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "local",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let base = platform.url.trim_end_matches('/').to_string();
    let browser = Browser::start().await;
    browser.go(&format!("{base}/login")).await;
    browser.type_into("#username", "alice").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("button[type=submit].primary").await;
    browser.wait_for_text("Signed in as alice").await;
    browser
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_in_the_browser_survives_a_reload_and_follows_the_window() {
    require_terraform();
    let mut platform = Platform::start();
    let browser = signed_in_with_a_workspace(&platform).await;
    let base = platform.url.trim_end_matches('/').to_string();

    // From the workspace's page to its terminal.
    browser.go(&format!("{base}/workspaces/alice/dev")).await;
    browser.click("#open-terminal").await;
    wait_connected(&browser).await;
    let address = browser.url().await;
    assert!(address.contains("/terminal?session="), "{address}");

    type_line(&browser, "echo $((6*7))").await;
    wait_for_line(&browser, "42", answered("42")).await;

    // The terminal follows the window's size.
    type_line(&browser, "echo S$(stty size)E").await;
    let before = wait_for_line(&browser, "the terminal's size", between("S", "E")).await;
    done(
        browser.client.set_window_size(800, 600).await,
        "resizing the window",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        type_line(&browser, "echo T$(stty size)U").await;
        let after = wait_for_line(&browser, "the new size", between("T", "U")).await;
        if after != before {
            break after;
        }
        assert!(
            Instant::now() < deadline,
            "stty size stayed {before} after the window shrank"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let columns = |size: &str| -> u32 { size.split(' ').nth(1).unwrap().parse().unwrap() };
    assert!(columns(&after) < columns(&before), "{before} -> {after}");

    // A reload finds the same shell, and what it printed before.
    type_line(&browser, "echo P$$Q").await;
    let shell = wait_for_line(&browser, "the shell's pid", between("P", "Q")).await;
    done(browser.client.refresh().await, "reloading the page");
    wait_connected(&browser).await;
    assert_eq!(
        browser.url().await,
        address,
        "the session stays in the address"
    );
    wait_for_line(&browser, "the replayed 42", answered("42")).await;
    type_line(&browser, "echo P$$Q").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pids = all_lines(&browser, between("P", "Q")).await;
        if pids.len() >= 2 {
            assert!(pids.iter().all(|pid| *pid == shell), "{pids:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second pid never showed: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The network drops (the server restarts): the page sees it, connects
    // again to the same shell, and is sent only what it had not shown.
    // The page may see the drop and connect again between two looks: it
    // counts every status it shows other than connected.
    browser
        .script(
            "const status = document.getElementById('terminal-status'); \
             window.abodeDrops = 0; \
             new MutationObserver(() => { \
               if (status.textContent !== 'Connected.') { window.abodeDrops += 1; } \
             }).observe(status, { childList: true, characterData: true, subtree: true }); \
             return true;",
        )
        .await;
    platform.restart_server();
    let deadline = Instant::now() + Duration::from_secs(60);
    while browser.script("return window.abodeDrops;").await == 0 {
        assert!(Instant::now() < deadline, "the page never saw the drop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_connected(&browser).await;
    type_line(&browser, "echo P$$Q").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pids = all_lines(&browser, between("P", "Q")).await;
        if pids.len() >= 3 {
            assert!(pids.iter().all(|pid| *pid == shell), "{pids:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the third pid never showed: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answers = all_lines(&browser, answered("42")).await;
    assert_eq!(answers.len(), 1, "output shown twice after reconnecting");

    // The picture docs/web-terminal.md shows, when asked for.
    if std::env::var_os("ABODE_UI_SCREENSHOTS").is_some() {
        browser
            .screenshot(&repo_root().join("docs/ui/terminal.png"))
            .await;
    }
    // An app with a command opens a terminal that runs it, from the
    // workspace's page.
    browser.go(&format!("{base}/workspaces/alice/dev")).await;
    browser
        .wait_for_element("a.app-link[data-slug=greet]")
        .await;
    browser.click("a.app-link[data-slug=greet]").await;
    wait_connected(&browser).await;
    assert!(
        browser.url().await.contains("app=greet"),
        "{}",
        browser.url().await
    );
    wait_for_line(&browser, "the app's greeting", answered("42")).await;
    // An app of no command, or none at all, is no terminal.
    browser
        .go(&format!("{base}/workspaces/alice/dev/terminal?app=nope"))
        .await;
    browser
        .wait_for_text("has no app \"nope\" with a command")
        .await;
    let cookie = done(
        browser.client.get_named_cookie("abode_session").await,
        "the session cookie",
    );
    let session = format!("abode_session={}", cookie.value());
    browser.close().await;

    // A page elsewhere cannot ride on the cookie: its WebSocket says its
    // origin, and is refused before any upgrade.
    let ws_base = base.replacen("http://", "ws://", 1);
    let url = format!(
        "{ws_base}/api/v1/workspaces/alice%2Fdev/connect?kind=pty&session=abc&rows=24&cols=80"
    );
    let mut request = url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("cookie", session.parse().unwrap());
    request
        .headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    match tungstenite::connect(request) {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403),
        other => panic!(
            "a cross-origin WebSocket was not refused: {:?}",
            other.map(|_| ())
        ),
    }
    // Without a browser's Origin, the cookie alone opens nothing.
    let mut request = url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("cookie", session.parse().unwrap());
    match tungstenite::connect(request) {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!(
            "a cookie without an origin was taken: {:?}",
            other.map(|_| ())
        ),
    }

    // An anonymous visitor is sent to sign in.
    let anonymous = ureq::AgentBuilder::new().redirects(0).build();
    let answer = anonymous
        .get(&format!("{base}/workspaces/alice/dev/terminal"))
        .call()
        .unwrap();
    assert_eq!(answer.status(), 303);
    assert_eq!(answer.header("location"), Some("/login"));

    // The connection is audited as the terminal's.
    let audit = platform.run(&["audit", "--output", "json"]).ok();
    assert!(
        audit.stdout.contains("kind=pty") && audit.stdout.contains("app=greet"),
        "no pty connection (and the app's) in the audit log: {}",
        audit.stdout
    );
}

/// The echo bench (benches/terminal-echo.sh; not part of the suite): each
/// keystroke's round trip from the page's keydown to its echo drawn in the
/// page (the terminal's rows changed), timed in the page itself so that the
/// WebDriver's own latency is not counted. Floor: p99 under 50 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: benches/terminal-echo.sh runs it"]
async fn bench_terminal_echo() {
    require_terraform();
    let keystrokes: usize = std::env::var("ABODE_BENCH_KEYSTROKES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let platform = Platform::start();
    let browser = signed_in_with_a_workspace(&platform).await;
    let base = platform.url.trim_end_matches('/').to_string();
    browser
        .go(&format!("{base}/workspaces/alice/dev/terminal"))
        .await;
    wait_connected(&browser).await;
    // `cat` on a raw terminal: each keystroke is echoed by the terminal
    // alone, as a shell's line editor would.
    type_line(&browser, "stty -icanon; cat > /dev/null").await;
    wait_for_line(&browser, "the typed command", |line| {
        line.ends_with("cat > /dev/null").then(|| line.into())
    })
    .await;
    browser
        .script(
            "window.benchSamples = []; window.benchDown = null;
             const rows = document.querySelector('.xterm-rows');
             document.querySelector('.xterm-helper-textarea').addEventListener('keydown',
               () => { window.benchDown = performance.now(); }, true);
             new MutationObserver(() => {
               if (window.benchDown !== null) {
                 window.benchSamples.push(performance.now() - window.benchDown);
                 window.benchDown = null;
               }
             }).observe(rows, { subtree: true, childList: true, characterData: true });
             return true;",
        )
        .await;
    for i in 0..keystrokes {
        let key = char::from(b'a' + (i % 26) as u8).to_string();
        browser.type_into(".xterm-helper-textarea", &key).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while browser
            .script("return window.benchSamples.length;")
            .await
            .as_u64()
            < Some(i as u64 + 1)
        {
            assert!(Instant::now() < deadline, "keystroke {i} never echoed");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let samples = browser.script("return window.benchSamples;").await;
    let mut samples: Vec<f64> = samples
        .as_array()
        .unwrap()
        .iter()
        .map(|sample| sample.as_f64().unwrap())
        .collect();
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let rank = (samples.len() as f64 * q).ceil() as usize;
        samples[rank.clamp(1, samples.len()) - 1]
    };
    println!(
        "terminal echo, {} keystrokes: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (floor: p99 under 50 ms)",
        samples.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
    browser.close().await;
}
