//! A daemon's call about a build that no daemon of its key holds is refused
//! before its body is read: a daemon that lost a build once sent 95 MiB log
//! posts for it, eight at a time, and the server read and parsed each
//! before saying no. Raw HTTP: the request's headers go, the answer is read,
//! and the body is never sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use serde_json::json;

/// Sends the headers of a POST declaring `length` bytes of JSON, none of
/// them; the status of the answer that comes back meanwhile.
fn answer_before_body(address: SocketAddr, path: &str, key: &str, length: usize) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    // The answer must come without the body: a server that waits for it
    // never answers, and this read times out.
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream
        .read_exact(&mut head)
        .unwrap_or_else(|error| panic!("no answer to {path} before its body: {error}"));
    let head = String::from_utf8_lossy(&head).to_string();
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_about_a_build_the_key_does_not_hold_are_refused_unread() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    let (status, body) = harness
        .push(&token, "quick", "", archive(&quick_template()))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "quick"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // Built by the server's own provisioners: no daemon ever held it.
    let build = harness.wait_build(&token, "dev", 1).await;
    assert_eq!(build["status"], "succeeded", "{build}");
    let build_id = build["id"].as_str().unwrap().to_string();
    let (status, body) = harness
        .call(
            "POST",
            "/provisioner-keys",
            Some(&token),
            Some(json!({"name": "k", "tags": []})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let key = body["secret"].as_str().unwrap().to_string();

    let address = harness.server().local_addr();
    let large = 95 * 1024 * 1024;
    // (call, status)
    let cases = [
        ("logs", 409),
        ("judge", 409),
        ("applied", 409),
        ("complete", 409),
        ("heartbeat", 409),
        ("state", 403),
    ];
    for (call, expected) in cases {
        for build in [build_id.as_str(), "no-such-build"] {
            let path = format!("/api/v1/provisionerd/jobs/{build}/{call}");
            let key = key.clone();
            let status = tokio::task::spawn_blocking(move || {
                answer_before_body(address, &path, &key, large)
            })
            .await
            .unwrap();
            assert_eq!(status, expected, "{call} for {build}");
        }
    }
    harness.stop().await;
}
