//! What a page on another site can make a browser send is refused before
//! any route runs (`request_checks.rs`): a JSON route's body that is not
//! declared JSON (a `text/plain` form post), a `Host` that is not this
//! server's (DNS rebinding), and a state-changing request from another
//! origin. Raw HTTP, so that every header is the test's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::SocketAddr;

use common::*;

/// One raw HTTP/1.1 request; its status and body.
fn send(
    address: SocketAddr,
    request_line: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut text = format!("{request_line} HTTP/1.1\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(text.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A request line, its headers and body, and the status it is answered.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, u16);

const FIRST_OWNER: &str =
    r#"{"username": "mallory", "email": "mallory@example.com", "password": "correct horse"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_text_plain_form_post_creates_no_first_owner() {
    let harness = Harness::start_with(tempfile::tempdir().unwrap(), |_| {}).await;
    let address = harness.server().local_addr();
    let host = address.to_string();
    // What `<form enctype="text/plain">` on any site sends: no preflight.
    let refusals = [
        ("text/plain", FIRST_OWNER),
        ("application/x-www-form-urlencoded", FIRST_OWNER),
        ("multipart/form-data; boundary=x", FIRST_OWNER),
        ("text/plain", ""),
    ];
    for (content_type, body) in refusals {
        let (status, answer) = tokio::task::spawn_blocking({
            let host = host.clone();
            move || {
                send(
                    address,
                    "POST /api/v1/users/first",
                    &[("Host", &host), ("Content-Type", content_type)],
                    body,
                )
            }
        })
        .await
        .unwrap();
        assert_eq!(status, 415, "{content_type}: {answer}");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            answer["error"]["code"], "unsupported_media_type",
            "{answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("application/json"),
            "{answer}"
        );
    }
    // Nobody was made owner: the server is still fresh, and the real first
    // owner can be made.
    harness.owner().await;
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn foreign_hosts_and_origins_are_refused() {
    let harness = Harness::start_with(tempfile::tempdir().unwrap(), |_| {}).await;
    let token = harness.owner().await;
    let address = harness.server().local_addr();
    let own = address.to_string();
    let own_origin = format!("http://{own}");
    let bearer = format!("Bearer {token}");
    let login = r#"{"username": "alice", "password": "correct horse"}"#;
    let json = ("Content-Type", "application/json");
    let cases: Vec<Case> = vec![
        // DNS rebinding: the page's own name reaches the server.
        (
            "GET /api/v1/users/me",
            vec![("Host", "evil.example"), ("Authorization", &bearer)],
            "",
            421,
        ),
        (
            "POST /api/v1/login",
            vec![("Host", "evil.example:80"), json],
            login,
            421,
        ),
        ("GET /login", vec![("Host", "evil.example")], "", 421),
        (
            "GET /api/v1/users/me",
            vec![("Host", "127.0.0.1.evil.example")],
            "",
            421,
        ),
        // The server's own names, and loopback.
        (
            "GET /api/v1/users/me",
            vec![("Host", &own), ("Authorization", &bearer)],
            "",
            200,
        ),
        (
            "GET /api/v1/users/me",
            vec![("Host", "localhost"), ("Authorization", &bearer)],
            "",
            200,
        ),
        // Machines' routes keep their own credentials (a probe at a pod IP).
        (
            "GET /api/v1/health",
            vec![("Host", "evil.example")],
            "",
            200,
        ),
        // Another site's page posting.
        (
            "POST /api/v1/login",
            vec![("Host", &own), ("Origin", "https://evil.example"), json],
            login,
            403,
        ),
        (
            "POST /api/v1/login",
            vec![("Host", &own), ("Origin", "null"), json],
            login,
            403,
        ),
        (
            "POST /logout",
            vec![("Host", &own), ("Origin", "https://evil.example")],
            "",
            403,
        ),
        // The server's own pages, and clients that send no Origin.
        (
            "POST /api/v1/login",
            vec![("Host", &own), ("Origin", &own_origin), json],
            login,
            200,
        ),
        ("POST /api/v1/login", vec![("Host", &own), json], login, 200),
        // Reading is not refused for its Origin (the answer is the browser's to keep).
        (
            "GET /api/v1/users/me",
            vec![
                ("Host", &own),
                ("Origin", "https://evil.example"),
                ("Authorization", &bearer),
            ],
            "",
            200,
        ),
    ];
    for (line, headers, body, expected) in cases {
        let shown = format!("{line} {headers:?}");
        let headers: Vec<(String, String)> = headers
            .into_iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        let line = line.to_string();
        let body = body.to_string();
        let (status, answer) = tokio::task::spawn_blocking(move || {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect();
            send(address, &line, &headers, &body)
        })
        .await
        .unwrap();
        assert_eq!(status, expected, "{shown}: {answer}");
        if expected == 421 || expected == 403 {
            let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(!message.contains('\n'), "{message}");
        }
    }
    harness.stop().await;
}
