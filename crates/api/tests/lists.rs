//! Lists over HTTP: pages with `limit` and `next`, followed to the end;
//! a malformed cursor, status or time is one 400 line; `GET /users` is for
//! owners. (That a page is one query is the store's business: its tests.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::Harness;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_are_paged_by_cursor_and_refuse_bad_parameters() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    for n in 0..5 {
        let (status, body) = harness
            .call(
                "POST",
                "/users",
                Some(&token),
                Some(
                    json!({"username": format!("user{n}"), "email": format!("u{n}@example.com"),
                            "password": "correct horse", "role": "member"}),
                ),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }

    // Two at a time, to the end: every user once, by name.
    let mut names = Vec::new();
    let mut path = "/users?limit=2".to_string();
    loop {
        let (status, body) = harness.call("GET", &path, Some(&token), None).await;
        assert_eq!(status, 200, "{body}");
        let users = body["users"].as_array().unwrap();
        assert!(users.len() <= 2);
        names.extend(
            users
                .iter()
                .map(|u| u["username"].as_str().unwrap().to_string()),
        );
        match &body["next"] {
            Value::String(next) => path = format!("/users?limit=2&after={next}"),
            Value::Null => break,
            other => panic!("next is {other}"),
        }
    }
    assert_eq!(
        names,
        ["alice", "user0", "user1", "user2", "user3", "user4"]
    );

    // Every list answers `next`, null when all fits.
    for (path, key) in [
        ("/workspaces?all=true", "workspaces"),
        ("/templates", "templates"),
        ("/audit?limit=500", "events"),
    ] {
        let (status, body) = harness.call("GET", path, Some(&token), None).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body[key].is_array(), "{path}: {body}");
        assert_eq!(body["next"], Value::Null, "{path}: {body}");
    }

    // One-line 400s for what cannot be read.
    for path in [
        "/users?after=not-a-cursor",
        "/workspaces?after=%21%21",
        "/workspaces?status=sleeping",
        "/audit?since=yesterday",
        "/templates?limit=many",
    ] {
        let (status, body) = harness.call("GET", path, Some(&token), None).await;
        assert_eq!(status, 400, "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains('\n'), "{message}");
    }
    // Another list's cursor is not this one's.
    let (_, users) = harness
        .call("GET", "/users?limit=1", Some(&token), None)
        .await;
    let next = users["next"].as_str().unwrap();
    let (status, _) = harness
        .call(
            "GET",
            &format!("/templates?after={next}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, 400);

    // Audit filters: this owner's first-user event, not before now.
    let (status, body) = harness
        .call(
            "GET",
            "/audit?actor=alice&until=2000-01-01T00:00:00Z",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        (status, body["events"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{body}"
    );

    // Members may not list users.
    let (_, login) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "user0", "password": "correct horse"})),
        )
        .await;
    let member = login["token"].as_str().unwrap();
    let (status, _) = harness.call("GET", "/users", Some(member), None).await;
    assert_eq!(status, 403);
    harness.stop().await;
}
