//! Roles through the API: users created with a set of roles (or the older
//! single `role`), roles changed by owners on the record, the last owner
//! kept, unknown names refused in one line, and what a role lets one read of
//! the audit log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{json, Value};

async fn create(harness: &Harness, token: &str, body: Value) -> (u16, Value) {
    harness
        .call("POST", "/users", Some(token), Some(body))
        .await
}

async fn login(harness: &Harness, name: &str) -> String {
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": name, "password": "long enough"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_hold_sets_of_roles_that_owners_change_on_the_record() {
    let harness = Harness::start().await;
    let owner = harness.owner().await;
    let (_, me) = harness.call("GET", "/users/me", Some(&owner), None).await;
    assert_eq!(me["user"]["roles"], json!(["owner", "member"]));
    assert_eq!(me["user"]["role"], "owner");

    // (request body's roles, status, roles shown, legacy role shown)
    let cases: [(Value, u16, Value, &str); 5] = [
        (json!({}), 201, json!(["member"]), "member"),
        (
            json!({"role": "template-admin"}),
            201,
            json!(["template-admin"]),
            "template-admin",
        ),
        (
            json!({"roles": ["member", "auditor"]}),
            201,
            json!(["auditor", "member"]),
            "member",
        ),
        (json!({"roles": ["admin"]}), 400, Value::Null, ""),
        (json!({"roles": []}), 400, Value::Null, ""),
    ];
    for (index, (roles, status, shown, legacy)) in cases.into_iter().enumerate() {
        let mut body = json!({"username": format!("user{index}"), "email": "u@example.com",
                              "password": "long enough"});
        body.as_object_mut()
            .unwrap()
            .extend(roles.as_object().unwrap().clone());
        let (got, answer) = create(&harness, &owner, body).await;
        assert_eq!(got, status, "{roles}: {answer}");
        if status == 201 {
            assert_eq!(answer["user"]["roles"], shown, "{roles}");
            assert_eq!(answer["user"]["role"], legacy, "{roles}");
        } else {
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(!message.contains('\n'), "{message}");
        }
    }
    let (_, answer) = create(
        &harness,
        &owner,
        json!({"username": "x", "email": "x@example.com", "password": "long enough", "roles": ["admin"]}),
    )
    .await;
    assert_eq!(
        answer["error"]["message"],
        "unknown role `admin` (one of: owner, template-admin, user-admin, auditor, member)"
    );

    // A user-admin creates members only.
    let (status, _) = create(
        &harness,
        &owner,
        json!({"username": "ursula", "email": "u@example.com", "password": "long enough", "roles": ["user-admin"]}),
    )
    .await;
    assert_eq!(status, 201);
    let ursula = login(&harness, "ursula").await;
    let (status, answer) = create(
        &harness,
        &ursula,
        json!({"username": "sneaky", "email": "s@example.com", "password": "long enough", "roles": ["owner"]}),
    )
    .await;
    assert_eq!(status, 403, "{answer}");

    // Owners change roles; the answer shows the roles held afterwards.
    let (status, answer) = harness
        .call(
            "POST",
            "/users/user0/roles",
            Some(&owner),
            Some(json!({"add": ["auditor"], "remove": ["member"]})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["user"]["roles"], json!(["auditor"]));
    let (status, answer) = harness
        .call(
            "POST",
            "/users/user0/roles",
            Some(&ursula),
            Some(json!({"add": ["owner"]})),
        )
        .await;
    assert_eq!(status, 403, "{answer}");
    // (path, body, status, message part)
    let refusals = [
        (
            "/users/alice/roles",
            json!({"remove": ["owner"]}),
            409,
            "last owner",
        ),
        (
            "/users/alice/roles",
            json!({"add": ["root"]}),
            400,
            "unknown role `root`",
        ),
        (
            "/users/nobody/roles",
            json!({"add": ["member"]}),
            404,
            "not found",
        ),
        (
            "/users/user0/roles",
            json!({"remove": ["auditor"]}),
            409,
            "no role",
        ),
        (
            "/users/scheduler/roles",
            json!({"add": ["owner"]}),
            409,
            "system",
        ),
    ];
    for (path, body, status, part) in refusals {
        let (got, answer) = harness.call("POST", path, Some(&owner), Some(body)).await;
        assert_eq!(got, status, "{path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(part) && !message.contains('\n'),
            "{message}"
        );
    }
    // Another owner, then the first may step down.
    harness
        .call(
            "POST",
            "/users/user2/roles",
            Some(&owner),
            Some(json!({"add": ["owner"]})),
        )
        .await;
    let (status, answer) = harness
        .call(
            "POST",
            "/users/alice/roles",
            Some(&owner),
            Some(json!({"remove": ["owner"]})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["user"]["roles"], json!(["member"]));
    // ...and the change holds from alice's next request on.
    let (status, _) = harness.call("GET", "/users", Some(&owner), None).await;
    assert_eq!(status, 403);

    // On the record, read by auditors (everyone's events) but not by a
    // template-admin (their own only).
    let auditor = login(&harness, "user0").await;
    let (status, body) = harness
        .call("GET", "/audit?action=user.roles", Some(&auditor), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let details: Vec<&str> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["details"].as_str().unwrap())
        .collect();
    assert!(
        details.contains(&"before=owner,member after=member"),
        "{details:?}"
    );
    let template_admin = login(&harness, "user1").await;
    let (_, body) = harness
        .call(
            "GET",
            "/audit?action=user.roles",
            Some(&template_admin),
            None,
        )
        .await;
    assert_eq!(body["events"], json!([]), "{body}");
    harness.stop().await;
}
