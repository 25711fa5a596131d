//! Guarded builds through the API with real Terraform: a remembered protection
//! on a `terraform_data` resource that a new template version replaces. (The
//! `abode_protect` annotation needs the provider: the binary-level tests cover
//! it; here the workspace's memory is seeded as an earlier build would.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use abode_store::NewProtection;
use common::*;
use serde_json::{json, Value};

/// A template whose `terraform_data.home` is replaced when `generation` changes.
fn template(generation: &str) -> Vec<u8> {
    archive(&[(
        "main.tf",
        format!(
            r#"resource "terraform_data" "home" {{
  triggers_replace = "{generation}"
}}
resource "terraform_data" "process" {{
  input = "process"
}}
"#
        ),
    )])
}

/// A running workspace `dev` on generation 1 whose memory protects
/// `terraform_data.home` with `mode`, and a pushed, active generation 2.
async fn protected_workspace(harness: &Harness, mode: &str) -> String {
    let token = harness.owner().await;
    let (status, body) = harness.push(&token, "base", "", template("one")).await;
    assert_eq!(status, 201, "{body}");
    harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "base"})),
        )
        .await;
    assert_eq!(
        harness.wait_build(&token, "dev", 1).await["status"],
        "succeeded"
    );
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    let workspace = &body["workspace"];
    harness
        .store()
        .replace_protections(
            workspace["id"].as_str().unwrap(),
            workspace["latest_build"]["id"].as_str().unwrap(),
            &[NewProtection {
                address: "terraform_data.home".into(),
                mode: mode.into(),
                retain_expire: None,
                retain_for_secs: None,
            }],
        )
        .await
        .unwrap();
    let (status, body) = harness
        .push(&token, "base", "?activate=true", template("two"))
        .await;
    assert_eq!(status, 201, "{body}");
    token
}

async fn update(harness: &Harness, token: &str) -> (u16, Value) {
    harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(token),
            Some(json!({"transition": "start", "update": true})),
        )
        .await
}

/// Waits until the build leaves pending/running (awaiting counts as settled).
async fn settle(harness: &Harness, token: &str, number: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, body) = harness
            .call(
                "GET",
                &format!("/workspaces/dev/builds/{number}"),
                Some(token),
                None,
            )
            .await;
        let build = body["build"].clone();
        if !["pending", "running"].contains(&build["status"].as_str().unwrap()) {
            return build;
        }
        assert!(Instant::now() < deadline, "build #{number} never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn home_id(harness: &Harness, token: &str) -> String {
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(token), None)
        .await;
    let workspace_id = body["workspace"]["id"].as_str().unwrap().to_string();
    let state = harness.store().state(&workspace_id).await.unwrap().unwrap();
    let state: Value = serde_json::from_slice(&state).unwrap();
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "home")
        .map(|r| {
            r["instances"][0]["attributes"]["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .unwrap()
}

async fn actions(harness: &Harness, token: &str) -> Vec<String> {
    let (_, body) = harness.call("GET", "/audit", Some(token), None).await;
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["action"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["actor"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replaced_protected_resource_waits_for_a_confirmation_of_that_exact_plan() {
    let harness = Harness::start().await;
    let token = protected_workspace(&harness, "confirm").await;
    let before = home_id(&harness, &token).await;

    let (status, body) = update(&harness, &token).await;
    assert_eq!(status, 201, "{body}");
    let build = settle(&harness, &token, 2).await;
    assert_eq!(build["status"], "awaiting_confirmation", "{build}");
    assert_eq!(build["guard"]["decision"], "confirm");
    assert_eq!(
        build["guard"]["protected_changes"][0]["address"],
        "terraform_data.home"
    );
    let digest = build["plan_digest"].as_str().unwrap().to_string();
    assert_eq!(digest.len(), 64);
    assert!(build["expires_at"].is_string());
    assert_eq!(home_id(&harness, &token).await, before, "nothing applied");
    let log = harness.log_text(&token, "dev", 2).await;
    assert!(
        log.contains(&format!(
            "confirm with: abode builds confirm alice/dev 2 --digest {digest}"
        )),
        "{log}"
    );
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    assert_eq!(body["workspace"]["status"], "awaiting_confirmation");
    let (_, page) = harness
        .call(
            "GET",
            "/workspaces/dev/builds/2/logs?wait=5",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(page["done"], true, "a held build has nothing more to log");

    // The held build holds the workspace.
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "stop"})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("awaiting confirmation"));

    // Only that plan's digest confirms it.
    let confirm = |digest: Value| {
        let harness = &harness;
        let token = token.clone();
        async move {
            harness
                .call(
                    "POST",
                    "/workspaces/dev/builds/2/confirm",
                    Some(&token),
                    Some(json!({ "digest": digest })),
                )
                .await
        }
    };
    let (status, _) = confirm(Value::Null).await;
    assert_eq!(status, 400);
    let (status, body) = confirm(json!("0".repeat(64))).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("the digest does not match"));
    let (status, body) = confirm(json!(digest)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["build"]["confirmed_by"], "alice");
    let build = harness.wait_build(&token, "dev", 2).await;
    assert_eq!(build["status"], "succeeded", "{build}");
    assert_ne!(
        home_id(&harness, &token).await,
        before,
        "replaced as confirmed"
    );
    let log = harness.log_text(&token, "dev", 2).await;
    assert!(
        log.contains(&format!(
            "confirmed by alice: applying the saved plan {digest}"
        )),
        "{log}"
    );
    assert!(
        log.contains("Apply complete! Resources: 1 added, 0 changed, 1 destroyed."),
        "{log}"
    );

    // Single use, and the plan is gone.
    let (status, body) = confirm(json!(digest)).await;
    assert_eq!(status, 409, "{body}");
    let build_id = build["id"].as_str().unwrap();
    let store = harness.store();
    assert!(store.saved_plan(build_id).await.unwrap().is_none());

    // The memory still protects the (new) resource; the record says who did what.
    let (_, body) = harness
        .call("GET", "/workspaces/dev/protections", Some(&token), None)
        .await;
    assert_eq!(body["protections"][0]["address"], "terraform_data.home");
    assert_eq!(body["protections"][0]["mode"], "confirm");
    let log = actions(&harness, &token).await;
    for expected in [
        "build.confirm success alice",
        "build.confirm failure alice",
        "build.held success server",
        "build.start success alice",
        "template.push success alice",
        "token.create success alice",
    ] {
        assert!(
            log.contains(&expected.to_string()),
            "missing {expected}: {log:?}"
        );
    }
    let (_, body) = harness
        .call("GET", "/audit?workspace=dev", Some(&token), None)
        .await;
    let confirmed = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "build.confirm" && e["outcome"] == "success")
        .unwrap();
    assert_eq!(confirmed["details"], format!("build=2 digest={digest}"));
    assert!(confirmed["request_id"].is_string());
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blocked_change_fails_before_apply_and_can_never_be_confirmed() {
    let harness = Harness::start().await;
    let token = protected_workspace(&harness, "block").await;
    let before = home_id(&harness, &token).await;
    update(&harness, &token).await;
    let build = harness.wait_build(&token, "dev", 2).await;
    assert_eq!(build["status"], "failed");
    assert_eq!(build["guard"]["decision"], "block");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.starts_with("blocked by the plan guard: terraform_data.home: "),
        "{error}"
    );
    assert!(build["plan_digest"].is_null());
    assert_eq!(home_id(&harness, &token).await, before, "nothing applied");
    let log = harness.log_text(&token, "dev", 2).await;
    assert!(!log.contains("apply info"), "{log}");
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds/2/confirm",
            Some(&token),
            Some(json!({"digest": "a".repeat(64)})),
        )
        .await;
    assert_eq!(status, 409);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("can never be confirmed"));
    assert!(actions(&harness, &token)
        .await
        .contains(&"build.blocked success server".to_string()));

    // Releasing the protection (on the record) lets the same update through.
    let (status, _) = harness
        .call(
            "DELETE",
            "/workspaces/dev/protections?address=terraform_data.nope",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, body) = harness
        .call(
            "DELETE",
            "/workspaces/dev/protections?address=terraform_data.home",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["released"]["mode"], "block");
    update(&harness, &token).await;
    assert_eq!(
        harness.wait_build(&token, "dev", 3).await["status"],
        "succeeded"
    );
    assert!(actions(&harness, &token)
        .await
        .contains(&"protection.release success alice".to_string()));
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_plans_cancel_expiry_members_and_deletes() {
    let data_dir = tempfile::tempdir().unwrap();
    // The default deadline (a day): the test moves the sweep's time instead
    // of waiting, so the sweeper never races it.
    let harness = Harness::start_with(data_dir, |_| {}).await;
    let token = protected_workspace(&harness, "confirm").await;
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    let workspace_id = body["workspace"]["id"].as_str().unwrap().to_string();
    let store = harness.store();

    // A confirmation after the state changed is refused.
    update(&harness, &token).await;
    let build = settle(&harness, &token, 2).await;
    assert_eq!(build["status"], "awaiting_confirmation");
    let original = store.state(&workspace_id).await.unwrap().unwrap();
    let mut changed: Value = serde_json::from_slice(&original).unwrap();
    changed["serial"] = json!(changed["serial"].as_i64().unwrap() + 1);
    store
        .put_state(
            &workspace_id,
            build["id"].as_str().unwrap(),
            changed.to_string().as_bytes(),
        )
        .await
        .unwrap();
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds/2/confirm",
            Some(&token),
            Some(json!({"digest": build["plan_digest"]})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["message"].as_str().unwrap()),
        (
            409,
            "the workspace changed since this plan was made; start the build again"
        )
    );

    // Cancel discards the held build and its plan.
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds/2/cancel",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["build"]["status"], "canceled");
    assert!(store
        .saved_plan(build["id"].as_str().unwrap())
        .await
        .unwrap()
        .is_none());

    // Nobody confirms: the held build expires.
    update(&harness, &token).await;
    let build = settle(&harness, &token, 3).await;
    assert_eq!(build["status"], "awaiting_confirmation");
    let expires_at = store
        .build_by_id(build["id"].as_str().unwrap())
        .await
        .unwrap()
        .expires_at
        .unwrap();
    let held_for = expires_at - harness.server().control().config().clock.now_ms();
    assert!(
        (23 * 3600 * 1000..=24 * 3600 * 1000).contains(&held_for),
        "a held build waits a day by default: {build}"
    );
    let control = harness.server().control();
    control.held().expire_at(expires_at - 1).await;
    assert_eq!(
        settle(&harness, &token, 3).await["status"],
        "awaiting_confirmation",
        "not before its deadline"
    );
    control.held().expire_at(expires_at).await;
    let build = settle(&harness, &token, 3).await;
    assert_eq!(build["status"], "canceled");
    assert_eq!(
        build["error"],
        "expired: nobody confirmed the plan within 24 h; the plan was discarded",
    );
    assert!(store
        .saved_plan(build["id"].as_str().unwrap())
        .await
        .unwrap()
        .is_none());

    // A member sees neither the workspace nor its audit events, and cannot
    // confirm or release anything of it.
    harness
        .call(
            "POST",
            "/users",
            Some(&token),
            Some(json!({"username": "bob", "email": "bob@example.com", "password": "bobs password", "role": "member"})),
        )
        .await;
    let (_, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "bob", "password": "bobs password"})),
        )
        .await;
    let member = body["token"].as_str().unwrap().to_string();
    let (status, _) = harness
        .call(
            "POST",
            "/workspaces/alice%2Fdev/builds/3/confirm",
            Some(&member),
            Some(json!({"digest": "a".repeat(64)})),
        )
        .await;
    assert_eq!(status, 403);
    // What is not a digest is refused before anything is looked up or stored.
    let huge = "\u{1b}[2J".repeat(100_000);
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/alice%2Fdev/builds/3/confirm",
            Some(&member),
            Some(json!({"digest": huge})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (_, body) = harness.call("GET", "/audit", Some(&token), None).await;
    assert!(
        !body.to_string().contains("[2J"),
        "the audit log keeps no part of it"
    );
    let (status, _) = harness
        .call(
            "DELETE",
            "/workspaces/alice%2Fdev/protections?address=terraform_data.home",
            Some(&member),
            None,
        )
        .await;
    assert_eq!(status, 403);
    let (_, body) = harness.call("GET", "/audit", Some(&member), None).await;
    let events = body["events"].as_array().unwrap();
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|e| e["actor"] == "bob"),
        "a member sees only their own events: {events:?}"
    );

    // A delete is never held, and forgets the protections.
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "delete"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let build = harness.wait_build(&token, "dev", 4).await;
    assert_eq!(build["status"], "succeeded", "{build}");
    assert_eq!(build["guard"]["decision"], "allow");
    let (_, body) = harness
        .call("GET", "/workspaces/dev/protections", Some(&token), None)
        .await;
    assert_eq!(body["protections"], json!([]));
    harness.stop().await;
}
