//! Apps served from a workspace through the server (issue 33), with the
//! real binary, server, Terraform, agent and a browser: a template declares
//! apps (`abode_app`) on a `python3 -m http.server` in the workspace, a
//! probe app that shows what it was sent and tries to set cookies, and a
//! WebSocket echo app. The agent checks their health; `abode show` lists
//! them; each share level lets in exactly whom it says (an `owner` app is
//! 404 to another member and sends an anonymous visitor to sign in,
//! `authenticated` opens to any signed-in person, `public` to anyone), by
//! path and by subdomain; the app never sees Abode's credentials nor sets
//! Abode's cookies; a WebSocket goes through; a port shared with `abode
//! port-share` (within the template's maximum) opens and closes on the
//! next request; and in headless Chromium a
//! person opens a subdomain app from the workspace's page, signed in there
//! by the dashboard, and the app's page cannot read the dashboard's cookie.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser;
use crate::util;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use browser::Browser;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite;
use util::{require_terraform, Platform};

const PASSWORD: &str = "correct horse battery";

/// The example, with a web server, apps and their agent.
fn template(web_port: u16, probe_port: u16, echo_port: u16) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    abode = {{
      source = "abode/abode"
    }}
  }}
}}

data "abode_workspace" "me" {{}}

resource "abode_volume" "home" {{
  name = "home-${{data.abode_workspace.me.id}}"
}}

resource "abode_agent" "main" {{
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
  dir   = abode_volume.home.path
}}

resource "abode_process" "workspace" {{
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env = {{
    ABODE_AGENT_TOKEN = abode_agent.main[0].token
    HOME              = abode_volume.home.path
  }}
}}

resource "abode_process" "web" {{
  count   = data.abode_workspace.me.start_count
  command = ["python3", "-m", "http.server", "{web_port}", "--bind", "127.0.0.1"]
  dir     = abode_volume.home.path
}}

resource "abode_app" "web" {{
  count        = data.abode_workspace.me.start_count
  agent_id     = abode_agent.main[0].id
  slug         = "web"
  display_name = "Web"
  url          = "http://127.0.0.1:{web_port}"
  subdomain    = true
  share        = "owner"
  healthcheck {{
    url       = "http://127.0.0.1:{web_port}/"
    interval  = 1
    threshold = 3
  }}
}}

resource "abode_app" "team" {{
  count    = data.abode_workspace.me.start_count
  agent_id = abode_agent.main[0].id
  slug     = "team"
  url      = "http://127.0.0.1:{web_port}"
  share    = "authenticated"
}}

resource "abode_app" "open" {{
  count    = data.abode_workspace.me.start_count
  agent_id = abode_agent.main[0].id
  slug     = "open"
  url      = "http://127.0.0.1:{web_port}"
  share    = "public"
}}

resource "abode_app" "probe" {{
  count     = data.abode_workspace.me.start_count
  agent_id  = abode_agent.main[0].id
  slug      = "probe"
  url       = "http://127.0.0.1:{probe_port}"
  subdomain = true
  share     = "authenticated"
}}

resource "abode_app" "echo" {{
  count     = data.abode_workspace.me.start_count
  agent_id  = abode_agent.main[0].id
  slug      = "echo"
  url       = "http://127.0.0.1:{echo_port}"
  subdomain = true
}}
"#
    )
}

/// An HTTP server that answers every request with the request's headers
/// (what the app was sent), setting a cookie of Abode's name, one for a
/// parent domain and one of its own.
fn probe_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buffer = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buffer[..n]),
                    }
                }
                let body = String::from_utf8_lossy(&seen).to_lowercase();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     Set-Cookie: abode_session=planted; Path=/\r\n\
                     Set-Cookie: =abode_app_session=planted; Path=/\r\n\
                     Set-Cookie: wide=1; Domain=apps.test; Path=/\r\n\
                     Set-Cookie: own=1; Path=/\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    port
}

/// A listener standing in for an attacker's site: the request line of
/// every request it is sent.
fn request_recorder() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut buffer = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buffer[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            if let Some(line) = text.lines().next().filter(|line| !line.is_empty()) {
                recorded.lock().unwrap().push(line.to_string());
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nevil",
            );
        }
    });
    (port, seen)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 GET to the server, naming `host`, with `headers`: the
/// status, the headers (lowercase names) and the body.
fn get(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<(String, String)>, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_lowercase(), value.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_by_path_and_subdomain_with_their_share_levels() {
    require_terraform();
    let mut flags = util::FAST_AGENT_FLAGS.to_vec();
    flags.extend(["--wildcard-access-url", "*.apps.test", "--allow-path-apps"]);
    // The apps (probe, echo) are this test's servers on the host's loopback,
    // standing for a workspace's: its workspace is on the machine's network.
    flags.extend(["--workspace-network", "host"]);
    let platform = Platform::start_with_metrics(None, &flags);
    platform.login_owner();
    let (web_port, probe_port, echo_port) =
        (free_port(), probe_server(), util::websocket_echo_server());
    let dir = platform.root().join("templates/apps");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.tf"),
        template(web_port, probe_port, echo_port),
    )
    .unwrap();
    platform
        .run(&["templates", "push", "apps", "-d", dir.to_str().unwrap()])
        .ok();
    platform.run(&["create", "dev", "--template", "apps"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let home = platform.volumes_dir().join(format!(
        "home-{}",
        platform.show("dev")["id"].as_str().unwrap()
    ));
    std::fs::write(home.join("hello.txt"), "hello from the workspace\n").unwrap();
    let port: u16 = platform
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let server_host = format!("127.0.0.1:{port}");

    // The agent checks the web app; abode show lists every app.
    let deadline = Instant::now() + Duration::from_secs(60);
    let shown = loop {
        let shown = platform
            .run(&["show", "dev", "--output", "json"])
            .ok()
            .json();
        let web = shown["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|app| app["slug"] == "web")
            .cloned()
            .unwrap();
        if web["health"] == "healthy" {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "the web app never became healthy: {web}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let apps = shown["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 5, "{shown}");
    let web = apps.iter().find(|app| app["slug"] == "web").unwrap();
    let web_host = format!("web--main-0--dev--alice.apps.test:{port}");
    assert_eq!(web["url"], format!("http://{web_host}/"), "{web}");
    assert_eq!(web["share"], "owner");
    let team = apps.iter().find(|app| app["slug"] == "team").unwrap();
    assert_eq!(team["health"], "disabled");
    assert_eq!(
        team["url"],
        format!(
            "{}/@alice/dev.main-0/apps/team/",
            platform.url.trim_end_matches('/')
        )
    );
    let text = platform.run(&["show", "dev"]).ok().stdout;
    assert!(
        text.contains("Apps:") && text.contains("Web (main[0], owner, healthy)"),
        "{text}"
    );

    let alice = platform
        .run(&["tokens", "create", "--name", "apps"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let bob_dir = platform.login_new_user("bob", "member");
    let bob = platform
        .run_as(&bob_dir, &["tokens", "create", "--name", "apps"], None)
        .ok()
        .stdout
        .trim()
        .to_string();
    let as_alice = format!("Bearer {alice}");
    let as_bob = format!("Bearer {bob}");

    // By path: the owner's app, for alice only.
    let owner_path = "/@alice/dev.main-0/apps/web/hello.txt";
    let (status, _, body) = get(
        port,
        &server_host,
        owner_path,
        &[("Authorization", &as_alice)],
    );
    assert_eq!((status, body.as_str()), (200, "hello from the workspace\n"));
    let (status, _, _) = get(
        port,
        &server_host,
        owner_path,
        &[("Authorization", &as_bob)],
    );
    assert_eq!(status, 404, "another member sees no owner app");
    // The app's bytes came on a connection the agent dialed back for the
    // request, not through its tunnel's frames.
    let carried =
        |how: &str| platform.metric(&format!("abode_app_streams_total{{carried=\"{how}\"}}"));
    assert_eq!(
        (carried("dial_back") >= 1.0, carried("tunnel")),
        (true, 0.0),
        "{}",
        platform.scrape()
    );
    // A dial-back needs an agent's token, and a ticket this server issued.
    let ticket = "0".repeat(64);
    let streams = "/api/v1/agent/streams";
    let upgrade = [
        ("Connection", "Upgrade"),
        ("Upgrade", "abode-stream"),
        ("x-abode-stream-ticket", ticket.as_str()),
    ];
    let (status, _, _) = get(port, &server_host, streams, &upgrade);
    assert_eq!(status, 401, "a dial-back without an agent token");
    let mut with_person = upgrade.to_vec();
    with_person.push(("Authorization", &as_alice));
    let (status, _, _) = get(port, &server_host, streams, &with_person);
    assert_eq!(status, 401, "a person's token is no agent's");
    let (status, headers, _) = get(port, &server_host, owner_path, &[]);
    assert_eq!(
        (status, header(&headers, "location")),
        (303, vec!["/login"])
    );
    // The one agent may be left out; a path without its slash gets it.
    let (status, _, _) = get(
        port,
        &server_host,
        "/@alice/dev/apps/web/hello.txt",
        &[("Authorization", &as_alice)],
    );
    assert_eq!(status, 200);
    let (status, headers, _) = get(
        port,
        &server_host,
        "/@alice/dev.main-0/apps/web",
        &[("Authorization", &as_alice)],
    );
    assert_eq!(
        (status, header(&headers, "location")),
        (303, vec!["/@alice/dev.main-0/apps/web/"])
    );
    // Authenticated: any signed-in person; public: anyone.
    let (status, _, _) = get(
        port,
        &server_host,
        "/@alice/dev.main-0/apps/team/hello.txt",
        &[("Authorization", &as_bob)],
    );
    assert_eq!(status, 200);
    let (status, _, _) = get(
        port,
        &server_host,
        "/@alice/dev.main-0/apps/team/hello.txt",
        &[],
    );
    assert_eq!(status, 303);
    let (status, _, body) = get(
        port,
        &server_host,
        "/@alice/dev.main-0/apps/open/hello.txt",
        &[],
    );
    assert_eq!((status, body.as_str()), (200, "hello from the workspace\n"));
    let (status, _, _) = get(
        port,
        &server_host,
        "/@alice/dev.main-0/apps/nothing/",
        &[("Authorization", &as_alice)],
    );
    assert_eq!(status, 404);

    // By subdomain: the same rules; an anonymous visitor goes to the
    // dashboard to sign in for that host.
    let (status, _, body) = get(
        port,
        &web_host,
        "/hello.txt",
        &[("Authorization", &as_alice)],
    );
    assert_eq!((status, body.as_str()), (200, "hello from the workspace\n"));
    let (status, _, _) = get(port, &web_host, "/hello.txt", &[("Authorization", &as_bob)]);
    assert_eq!(status, 404);
    let (status, headers, _) = get(port, &web_host, "/hello.txt", &[]);
    assert_eq!(status, 303);
    let location = header(&headers, "location")[0].to_string();
    assert!(
        location.starts_with(&format!(
            "{}/apps/auth?host=",
            platform.url.trim_end_matches('/')
        )),
        "{location}"
    );

    // What an app sees and sets: no Abode credential in, no Abode cookie
    // and no cookie for other hosts out.
    let probe_host = format!("probe--main-0--dev--alice.apps.test:{port}");
    let (status, headers, seen) = get(
        port,
        &probe_host,
        "/",
        &[
            ("Authorization", &as_bob),
            ("Cookie", "abode_session=secret-session; theme=dark"),
        ],
    );
    assert_eq!(status, 200, "{seen}");
    assert!(
        !seen.contains(&bob.to_lowercase()) && !seen.contains("authorization"),
        "{seen}"
    );
    assert!(
        !seen.contains("secret-session") && seen.contains("theme=dark"),
        "{seen}"
    );
    let cookies = header(&headers, "set-cookie");
    assert_eq!(cookies, ["wide=1; Path=/", "own=1; Path=/"], "{headers:?}");

    // A WebSocket through the proxy.
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut request = tungstenite::client::IntoClientRequest::into_client_request(format!(
        "ws://echo--main-0--dev--alice.apps.test:{port}/"
    ))
    .unwrap();
    request
        .headers_mut()
        .insert("authorization", as_alice.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap();
    socket
        .send(tungstenite::Message::Text("echo me".into()))
        .await
        .unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(30), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(echoed.into_text().unwrap(), "echo me");
    // The WebSocket is an app session in the connection log, with its
    // bytes and end once it closes (plain requests are not logged).
    socket.close(None).await.unwrap();
    drop(socket);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let session = loop {
        let log = platform
            .run(&["connections", "log", "-o", "json"])
            .ok()
            .json();
        let apps: Vec<serde_json::Value> = log
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["kind"] == "app")
            .cloned()
            .collect();
        if apps.len() == 1 && !apps[0]["closed_at"].is_null() {
            break apps[0].clone();
        }
        assert!(apps.len() <= 1, "one app session: {log:#}");
        assert!(
            std::time::Instant::now() < deadline,
            "no ended app session: {log:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(session["app"], "echo", "{session:#}");
    assert_eq!(session["user"], "alice", "{session:#}");
    assert_eq!(session["workspace"], "alice/dev", "{session:#}");
    assert!(
        session["bytes_to_workspace"].as_u64().unwrap() > 0,
        "{session:#}"
    );
    assert!(
        session["bytes_from_workspace"].as_u64().unwrap() > 0,
        "{session:#}"
    );

    // A port shared without a template change, within the template's
    // maximum, takes effect on the next request, and so does its removal.
    let port_host = format!("{web_port}--main-0--dev--alice.apps.test:{port}");
    let (status, _, _) = get(
        port,
        &port_host,
        "/hello.txt",
        &[("Authorization", &as_bob)],
    );
    assert_eq!(status, 404, "a port is its owner's until shared");
    let (status, _, _) = get(
        port,
        &port_host,
        "/hello.txt",
        &[("Authorization", &as_alice)],
    );
    assert_eq!(status, 200, "the owner reaches their own port");
    let web_port_text = web_port.to_string();
    platform
        .run(&[
            "port-share",
            "dev",
            &web_port_text,
            "--share",
            "authenticated",
        ])
        .fails_with(1, &["up to `owner`"]);
    platform
        .run(&["templates", "port-share", "apps", "--max", "authenticated"])
        .ok();
    platform
        .run(&["port-share", "dev", &web_port_text, "--share", "public"])
        .fails_with(1, &["up to `authenticated`"]);
    let shared = platform
        .run(&[
            "port-share",
            "dev",
            &web_port_text,
            "--share",
            "authenticated",
        ])
        .ok();
    assert!(shared.stdout.contains(&port_host), "{shared:?}");
    let listed = platform
        .run(&["port-share", "list", "dev", "--output", "json"])
        .ok()
        .json();
    assert_eq!(listed[0]["share"], "authenticated", "{listed}");
    let (status, _, body) = get(
        port,
        &port_host,
        "/hello.txt",
        &[("Authorization", &as_bob)],
    );
    assert_eq!((status, body.as_str()), (200, "hello from the workspace\n"));
    platform
        .run_as(
            &bob_dir,
            &[
                "port-share",
                "alice/dev",
                &web_port_text,
                "--share",
                "authenticated",
            ],
            None,
        )
        .fails_with(1, &["may not connect"]);
    platform
        .run(&["port-share", "remove", "dev", &web_port_text])
        .ok();
    let (status, _, _) = get(
        port,
        &port_host,
        "/hello.txt",
        &[("Authorization", &as_bob)],
    );
    assert_eq!(status, 404, "unshared on the next request");

    // In the browser: from the workspace's page to the subdomain app,
    // signed in there by the dashboard; its page cannot read the
    // dashboard's cookie.
    let base = platform.url.trim_end_matches('/').to_string();
    let browser =
        Browser::start_with_args(&["--host-resolver-rules=MAP *.apps.test 127.0.0.1"]).await;
    browser.go(&format!("{base}/login")).await;
    browser.type_into("#username", "alice").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("button[type=submit].primary").await;
    browser.wait_for_text("Signed in as alice").await;
    browser.go(&format!("{base}/workspaces/alice/dev")).await;
    browser.wait_for_text("healthy").await;
    browser.click("a.app-link[data-slug=web]").await;
    browser.wait_for_text("hello.txt").await;
    assert!(
        browser
            .url()
            .await
            .starts_with(&format!("http://{web_host}/")),
        "{}",
        browser.url().await
    );
    let cookies = browser.script("return document.cookie;").await;
    assert!(
        !cookies.as_str().unwrap_or_default().contains("abode_"),
        "{cookies}"
    );
    browser.go(&format!("http://{web_host}/hello.txt")).await;
    browser.wait_for_text("hello from the workspace").await;
    // The dashboard's session still stands after the probe tried to set one.
    browser.go(&format!("http://{probe_host}/")).await;
    browser.wait_for_text("host:").await;
    browser.go(&format!("{base}/workspaces/alice/dev")).await;
    browser.wait_for_text("Signed in as alice").await;

    // The session theft a security read found: a signed-in owner lured to
    // `/apps/auth` with an app host followed by `@evil.example.com` was
    // sent, with a fresh code, to evil.example.com, which redeemed it under
    // the same forged `Host` for the owner's app session. The dashboard now
    // answers "No such app." and sends nobody anywhere; the forged host is
    // no app host (421), so no code or session is ever made for it.
    let (evil_port, evil_seen) = request_recorder();
    let attacked = Browser::start_with_args(&[&format!(
        "--host-resolver-rules=MAP *.apps.test 127.0.0.1, MAP evil.example.com 127.0.0.1:{evil_port}"
    )])
    .await;
    attacked.sign_in(&base, "alice", PASSWORD).await;
    let forged_host = format!("{web_host}@evil.example.com");
    for (host, path) in [
        (forged_host.as_str(), "/"),
        (
            &format!("web--main-0--dev--alice.apps.test:{}", port + 1),
            "/",
        ),
        (
            &format!("web--main-0--dev--alice.apps.test:{port}.evil.example.com"),
            "/",
        ),
    ] {
        attacked
            .go(&format!("{base}/apps/auth?host={host}&path={path}"))
            .await;
        attacked.wait_for_text("No such app.").await;
        assert!(
            attacked.url().await.starts_with(&base),
            "{host}: {}",
            attacked.url().await
        );
    }
    // The browser has loaded the dashboard's answer, the end of that
    // navigation: had it been sent on, evil.example.com would have the
    // request by now.
    // The recorder sees what the browser sends it: our own visit, now.
    attacked.go("http://evil.example.com/").await;
    attacked.wait_for_text("evil").await;
    let seen = evil_seen.lock().unwrap().clone();
    assert!(
        seen.first().is_some_and(|line| line == "GET / HTTP/1.1")
            && !seen
                .iter()
                .any(|line| line.contains("code=") || line.contains(".abode")),
        "evil.example.com was sent: {seen:?}"
    );
    attacked.close().await;
    for forged in [
        forged_host.clone(),
        format!("{web_host}:{port}"),
        format!("alice@{web_host}"),
        format!("web--main-0--dev--alice.apps.test:{}", port + 1),
    ] {
        for path in ["/.abode/auth?code=0123&path=/", "/hello.txt"] {
            let (status, _, body) = get(port, &forged, path, &[("Authorization", &as_alice)]);
            assert_eq!(status, 421, "{forged}{path}: {body}");
        }
    }
    browser.close().await;

    // `--app-dial-back off` (by its environment variable): the same app,
    // each request on the agent's tunnel once it reconnected.
    let mut platform = platform;
    platform.restart_server_with_env(&[("ABODE_APP_DIAL_BACK", "off")]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _, body) = get(
            port,
            &server_host,
            owner_path,
            &[("Authorization", &as_alice)],
        );
        if status == 200 {
            assert_eq!(body, "hello from the workspace\n");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the app never answered after the restart: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let carried =
        |how: &str| platform.metric(&format!("abode_app_streams_total{{carried=\"{how}\"}}"));
    assert_eq!(
        (carried("dial_back"), carried("tunnel") >= 1.0),
        (0.0, true),
        "{}",
        platform.scrape()
    );
}
