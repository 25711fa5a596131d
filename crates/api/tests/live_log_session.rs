//! The dashboard's live log (server-sent events) ends with its session: it
//! once streamed on after sign-out until its own 30 s wait ended. Raw HTTP
//! with the session's cookie; the stream's end is observed (the server
//! closes it), well before any of its own waits would end it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A read that found nothing yet (the socket's read timeout).
fn waited(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_live_log_ends_when_its_session_signs_out() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    let (status, body) = harness
        .push(&token, "slow", "", archive(&slow_template(120)))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "slow"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    harness.wait_status(&token, "dev", 1, "running").await;

    // A second session, which stays, to look at the build afterwards.
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "alice", "password": "correct horse"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let other = body["token"].as_str().unwrap().to_string();

    let address = harness.server().local_addr();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    write!(
        stream,
        "GET /workspaces/alice/dev/builds/1/events HTTP/1.1\r\nHost: {address}\r\n\
         Cookie: abode_session={token}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    // Up to the first `status` event: the stream is live.
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains("event: status") {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => panic!("the stream ended before signing out:\n{seen}"),
            Ok(_) => seen.push_str(&line),
            Err(error) if waited(&error) => assert!(Instant::now() < deadline, "no event:\n{seen}"),
            Err(error) => panic!("{error}"),
        }
    }

    let (status, body) = harness.call("POST", "/logout", Some(&token), None).await;
    assert_eq!(status, 204, "{body}");
    // Its end comes well before any of the stream's own would: a keep-alive
    // (15 s), the wait for lines (20 s), the stream's lifetime (30 s).
    let signed_out = Instant::now();
    let ended = tokio::task::spawn_blocking(move || {
        let mut chunk = [0u8; 4096];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => return Ok(signed_out.elapsed()),
                Ok(_) => {}
                Err(error) if waited(&error) => {}
                Err(error) => return Err(error.to_string()),
            }
            if signed_out.elapsed() > Duration::from_secs(10) {
                return Err("still streaming 10 s after sign-out".to_string());
            }
        }
    })
    .await
    .unwrap();
    assert!(ended.is_ok(), "the live log after sign-out: {ended:?}");
    // It ended for the sign-out, not for the build: that still runs.
    let (status, body) = harness
        .call("GET", "/workspaces/dev/builds/1", Some(&other), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["build"]["status"], "running", "{body}");
    harness.stop().await;
}
