//! The API driven over HTTP against a real in-process server, whose
//! provisioners run real Terraform on small `terraform_data` templates (no
//! provider needed). The binary-level end-to-end tests live in crates/abode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workspace_lifecycle_runs_real_terraform_and_keeps_state() {
    let harness = Harness::start().await;
    let token = harness.owner().await;

    let (status, body) = harness
        .push(&token, "base", "?message=first", archive(&quick_template()))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["version"]["number"], 1);
    assert_eq!(body["version"]["active"], true);
    assert_eq!(body["version"]["validation"]["ok"], true);

    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "base"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["build"]["number"], 1);
    assert_eq!(body["build"]["reason"], "initiator");

    let build = harness.wait_build(&token, "dev", 1).await;
    assert_eq!(build["status"], "succeeded", "{build}");
    assert_eq!(build["guard"]["decision"], "allow", "{build}");
    let log = harness.log_text(&token, "dev", 1).await;
    for expected in [
        "init info Terraform has been successfully initialized!",
        "plan info Plan: 2 to add",
        "apply info Apply complete! Resources: 2 added",
        "cleanup info build succeeded",
    ] {
        assert!(log.contains(expected), "missing {expected:?} in:\n{log}");
    }

    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    let workspace = &body["workspace"];
    assert_eq!(workspace["status"], "running");
    assert_eq!(workspace["healthy"], true);
    assert_eq!(
        workspace["agent"]["status"], "none",
        "no abode_agent in this template"
    );
    assert_eq!(workspace["parameters"], json!({}));

    // The state is in the database; the plan JSON is kept with the build but
    // never served.
    let store = harness.store();
    let workspace_id = workspace["id"].as_str().unwrap();
    let state = store
        .state(workspace_id)
        .await
        .unwrap()
        .expect("state stored");
    assert!(String::from_utf8_lossy(&state).contains("terraform_data"));
    let build_id = build["id"].as_str().unwrap();
    assert!(store
        .build_plan_json(build_id)
        .await
        .unwrap()
        .unwrap()
        .contains("resource_changes"));
    assert!(!build.to_string().contains("resource_changes"));

    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "start"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["message"].as_str().unwrap()),
        (409, "workspace \"dev\" is already running (version 1)")
    );

    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "stop"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        harness.wait_build(&token, "dev", 2).await["status"],
        "succeeded"
    );
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "stop"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["message"].as_str().unwrap()),
        (409, "workspace \"dev\" is already stopped")
    );
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    assert_eq!(body["workspace"]["status"], "stopped");

    // A second version, then `update` moves the workspace to it.
    let (status, body) = harness
        .push(
            &token,
            "base",
            "?activate=true&message=second",
            archive(&quick_template()),
        )
        .await;
    assert_eq!(
        (status, body["version"]["number"].as_i64()),
        (201, Some(2)),
        "{body}"
    );
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "start", "update": true})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (
            body["build"]["reason"].as_str(),
            body["build"]["template_version"].as_i64()
        ),
        (Some("initiator"), Some(2))
    );
    assert_eq!(
        harness.wait_build(&token, "dev", 3).await["status"],
        "succeeded"
    );

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
    assert!(harness
        .log_text(&token, "dev", 4)
        .await
        .contains("Apply complete! Resources: 0 added, 0 changed, 2 destroyed."));
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    assert_eq!(body["workspace"]["status"], "deleted");
    let (_, body) = harness.call("GET", "/workspaces", Some(&token), None).await;
    assert_eq!(body["workspaces"], json!([]));
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "start"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("conflict")),
        "{body}"
    );

    // Nothing of the builds is left on disk.
    let work = harness.data_dir.path().join("work");
    assert_eq!(std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0), 0);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_templates_are_refused_and_nothing_is_stored() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    let good = quick_template().remove(0).1;
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        (
            "dotdot",
            archive(&[("main.tf", good.clone()), ("../evil.tf", good.clone())]),
            400,
            "invalid_archive",
            "contains `..`",
        ),
        (
            "absolute",
            archive(&[("/tmp/evil.tf", good.clone())]),
            400,
            "invalid_archive",
            "is an absolute path",
        ),
        (
            "escaping-link",
            archive_with_symlink("escape", "../../etc"),
            400,
            "invalid_archive",
            "links outside the template",
        ),
        (
            "absolute-link",
            archive_with_symlink("escape", "/etc/passwd"),
            400,
            "invalid_archive",
            "links to an absolute path",
        ),
        (
            "not-gzip",
            b"this is not an archive".to_vec(),
            400,
            "invalid_archive",
            "not a tar.gz archive",
        ),
        (
            "no-tf",
            archive(&[("README.md", "hi".into())]),
            400,
            "invalid_archive",
            "no .tf file",
        ),
        (
            "invalid-hcl",
            archive(&[("main.tf", "resource \"terraform_data\" {".into())]),
            422,
            "invalid_template",
            "terraform init failed",
        ),
        (
            "invalid-reference",
            archive(&[(
                "main.tf",
                "output \"x\" { value = terraform_data.missing.id }".into(),
            )]),
            422,
            "invalid_template",
            "terraform validate failed: Error: Reference to undeclared resource",
        ),
    ];
    for (name, bytes, status, code, message) in cases {
        let (got, body) = harness.push(&token, name, "", bytes).await;
        assert_eq!(
            (got, body["error"]["code"].as_str().unwrap()),
            (status, code),
            "{name}: {body}"
        );
        let text = body["error"]["message"].as_str().unwrap();
        assert!(
            text.contains(message) && !text.contains('\n'),
            "{name}: {text}"
        );
    }
    let (_, body) = harness.call("GET", "/templates", Some(&token), None).await;
    assert_eq!(body["templates"], json!([]), "no template stored");
    assert!(!harness.data_dir.path().join("etc").exists());

    // A member may not push; unknown names are clear 404s; a wrong password is 401.
    let (status, _) = harness
        .call("POST", "/users", Some(&token), Some(json!({"username": "bob", "email": "bob@example.com", "password": "bobs password", "role": "member"})))
        .await;
    assert_eq!(status, 201);
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "bob", "password": "bobs password"})),
        )
        .await;
    assert_eq!(status, 200);
    let member = body["token"].as_str().unwrap().to_string();
    let (status, body) = harness
        .push(&member, "base", "", archive(&quick_template()))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let (status, body) = harness
        .call("GET", "/workspaces/alice%2Fnope", Some(&member), None)
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&member),
            Some(json!({"name": "dev", "template": "nope"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (404, Some("template \"nope\" not found"))
    );
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "bob", "password": "wrong password"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (401, Some("wrong username or password"))
    );
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "nobody", "password": "wrong password"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (401, Some("wrong username or password"))
    );
    // A password typed into the username field is not kept in the audit log
    // (which owners and auditors read).
    let (status, _) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "Hunter2-Typed-As-Name!", "password": "x"})),
        )
        .await;
    assert_eq!(status, 401);
    let (_, body) = harness.call("GET", "/audit", Some(&token), None).await;
    let events = body["events"].to_string();
    assert!(events.contains("nobody"), "{events}");
    assert!(!events.contains("Hunter2"), "{events}");
    let (status, _) = harness
        .call(
            "POST",
            "/users/first",
            None,
            Some(json!({"username": "eve", "email": "e@example.com", "password": "whatever1"})),
        )
        .await;
    assert_eq!(status, 409);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn logs_stream_while_running_concurrent_starts_conflict_and_cancel_keeps_state() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    let (status, body) = harness
        .push(&token, "slow", "", archive(&slow_template(60)))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "slow"})),
        )
        .await;
    assert_eq!(status, 201);

    // Two concurrent requests while build #1 runs: both refused, nothing queued.
    let stop = json!({"transition": "stop"});
    let (first, second) = tokio::join!(
        harness.call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(stop.clone())
        ),
        harness.call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(stop.clone())
        ),
    );
    assert_eq!((first.0, second.0), (409, 409));

    // The log shows the apply in progress before the build ends.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = 0;
    let mut seen = String::new();
    while !seen.contains("sleeping") {
        let (_, page) = harness
            .call(
                "GET",
                &format!("/workspaces/dev/builds/1/logs?after={after}&wait=5"),
                Some(&token),
                None,
            )
            .await;
        for line in page["lines"].as_array().unwrap() {
            after = line["seq"].as_i64().unwrap();
            seen.push_str(line["text"].as_str().unwrap());
            seen.push('\n');
        }
        assert_eq!(
            page["done"], false,
            "the build ended before its apply was seen:\n{seen}"
        );
        assert!(Instant::now() < deadline, "no progress in the log:\n{seen}");
    }

    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds/1/cancel",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let build = harness.wait_build(&token, "dev", 1).await;
    assert_eq!(build["status"], "canceled", "{build}");
    assert!(
        build["error"]
            .as_str()
            .unwrap()
            .starts_with("canceled during terraform apply"),
        "{build}"
    );
    // terraform_data.home was created before the cancel: the state knows it.
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    assert_eq!(body["workspace"]["status"], "canceled");
    let workspace_id = body["workspace"]["id"].as_str().unwrap().to_string();
    let state = harness
        .store()
        .state(&workspace_id)
        .await
        .unwrap()
        .expect("state kept");
    assert!(String::from_utf8_lossy(&state).contains("\"home\""));

    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds/1/cancel",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("conflict"))
    );

    // Two concurrent starts of an idle workspace: exactly one is accepted.
    let start = json!({"transition": "start"});
    let (first, second) = tokio::join!(
        harness.call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(start.clone())
        ),
        harness.call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(start.clone())
        ),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert_eq!(statuses, [201, 409], "{first:?} {second:?}");
    let (_, body) = harness
        .call("GET", "/workspaces/dev/builds", Some(&token), None)
        .await;
    assert_eq!(body["builds"].as_array().unwrap().len(), 2);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_build_whose_server_died_is_followed_after_restart_and_can_be_canceled() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    harness
        .push(&token, "slow", "", archive(&slow_template(60)))
        .await;
    harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "slow"})),
        )
        .await;
    harness.wait_status(&token, "dev", 1, "running").await;
    // Let the apply begin, then drop the server's tasks without any cleanup:
    // Terraform, like after a real crash (see e2e_crash.rs), runs on.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !harness
        .log_text(&token, "dev", 1)
        .await
        .contains("sleeping")
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut harness = harness;
    let server = harness.server.take().unwrap();
    // Started again where it was: its orphaned Terraform keeps reaching the
    // state backend at that address.
    let address = server.local_addr();
    server.abort();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let data_dir = harness.data_dir;

    let harness = Harness::start_with(data_dir, |options| options.address = address).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !harness
        .log_text(&token, "dev", 1)
        .await
        .contains("follows it until it ends")
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "stop"})),
        )
        .await;
    assert_eq!(status, 409, "the followed build is still the active one");
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds/1/cancel",
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let build = harness.wait_build(&token, "dev", 1).await;
    assert_eq!(build["status"], "canceled", "{build}");
    assert!(
        build["error"]
            .as_str()
            .unwrap()
            .starts_with("canceled during terraform apply after a server restart"),
        "{build}"
    );
    let state = harness
        .stored_state(&token, "dev")
        .await
        .expect("state salvaged");
    assert!(String::from_utf8_lossy(&state).contains("\"home\""));
    // The workspace can be built again.
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "delete"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        harness.wait_build(&token, "dev", 2).await["status"],
        "succeeded"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_authenticate_with_their_token_and_health_follows_heartbeats() {
    // Timeouts pass by moving the server's clock, not by waiting.
    let (clock, hand) = abode_control::Clock::manual(abode_control::Clock::system().now_ms());
    let harness = Harness::start_with(tempfile::tempdir().unwrap(), |options| {
        options.clock = clock;
    })
    .await;
    let token = harness.owner().await;
    harness
        .push(&token, "base", "", archive(&quick_template()))
        .await;
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
    // This template has no abode_agent (that needs the provider, covered by the
    // end-to-end tests): register one as a start build would.
    let store = harness.store();
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    let workspace_id = body["workspace"]["id"].as_str().unwrap();
    let build_id = body["workspace"]["latest_build"]["id"].as_str().unwrap();
    let agent_token = "agent-secret-token";
    store
        .replace_agents(
            workspace_id,
            build_id,
            &[abode_store::NewAgent {
                name: "main".into(),
                token_hash: abode_control::token_hash(agent_token),
                startup_script: Some("echo hi > marker".into()),
                claim_script: None,
                settings: Default::default(),
                dir: Some("/home/dev".into()),
                env: r#"{"GREETING":"hello"}"#.into(),
                apps: Vec::new(),
            }],
        )
        .await
        .unwrap();
    let agent_status = || async {
        let (_, body) = harness
            .call("GET", "/workspaces/dev", Some(&token), None)
            .await;
        (
            body["workspace"]["agent"]["status"]
                .as_str()
                .unwrap()
                .to_string(),
            body["workspace"]["healthy"].as_bool().unwrap(),
        )
    };
    // The build just finished: connecting, then unhealthy once the 2 s
    // connect timeout has passed.
    assert_eq!(agent_status().await, ("connecting".to_string(), false));
    hand.advance(Duration::from_millis(2500));
    assert_eq!(agent_status().await, ("unhealthy".to_string(), false));

    let (status, _) = harness
        .call(
            "POST",
            "/agent/heartbeat",
            Some("wrong-token"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 401);
    // An agent token is no session token, and a session token no agent token.
    let (status, _) = harness
        .call("GET", "/workspaces/dev", Some(agent_token), None)
        .await;
    assert_eq!(status, 401);
    let (status, _) = harness.call("GET", "/agent/me", Some(&token), None).await;
    assert_eq!(status, 401);
    let (status, _) = harness
        .call(
            "POST",
            "/agent/lifecycle",
            Some(agent_token),
            Some(json!({"state": "starting"})),
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(agent_status().await, ("starting".to_string(), false));
    let (status, _) = harness
        .call(
            "POST",
            "/agent/lifecycle",
            Some(agent_token),
            Some(json!({"state": "ready"})),
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(agent_status().await, ("ready".to_string(), true));
    let (status, body) = harness
        .call("GET", "/agent/me", Some(agent_token), None)
        .await;
    assert_eq!(
        (status, body["workspace"].as_str(), body["agent"].as_str()),
        (200, Some("dev"), Some("main"))
    );
    assert_eq!(
        (
            body["startup_script"].as_str(),
            body["dir"].as_str(),
            &body["env"]
        ),
        (
            Some("echo hi > marker"),
            Some("/home/dev"),
            &json!({"GREETING": "hello"})
        ),
        "the agent learns what to run at start: {body}"
    );
    assert!(
        !body.to_string().contains(agent_token),
        "the token is never served"
    );
    // A dial-back (docs/apps.md): its ticket in its header, an upgrade to
    // abode-stream, and a ticket this server issued to this agent.
    let dial_back = |headers: &'static [(&'static str, &'static str)]| {
        let url = format!("{}/agent/streams", harness.base);
        tokio::task::spawn_blocking(move || {
            let mut request = ureq::get(&url).set("Authorization", "Bearer agent-secret-token");
            for (name, value) in headers {
                request = request.set(name, value);
            }
            common::respond(request.call())
        })
    };
    const TICKET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    type Headers = &'static [(&'static str, &'static str)];
    let cases: [(Headers, u16, &str); 4] = [
        (
            &[("Connection", "Upgrade"), ("Upgrade", "abode-stream")],
            400,
            "bad_request",
        ),
        (
            &[
                ("x-abode-stream-ticket", "../../etc"),
                ("Connection", "Upgrade"),
                ("Upgrade", "abode-stream"),
            ],
            400,
            "bad_request",
        ),
        (
            &[("x-abode-stream-ticket", TICKET)],
            426,
            "upgrade_required",
        ),
        (
            &[
                ("x-abode-stream-ticket", TICKET),
                ("Connection", "Upgrade"),
                ("Upgrade", "abode-stream"),
            ],
            404,
            "not_found",
        ),
    ];
    for (headers, expected, code) in cases {
        let (status, body) = dial_back(headers).await.unwrap();
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (expected, Some(code)),
            "{headers:?}: {body}"
        );
    }
    let (status, _) = harness
        .call(
            "POST",
            "/agent/lifecycle",
            Some(agent_token),
            Some(json!({"state": "dancing"})),
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = harness
        .call(
            "POST",
            "/agent/lifecycle",
            Some(agent_token),
            Some(json!({"state": "start_error", "exit_status": 3})),
        )
        .await;
    assert_eq!(status, 204);
    let (_, body) = harness
        .call("GET", "/workspaces/dev", Some(&token), None)
        .await;
    let shown = &body["workspace"];
    assert_eq!(
        (
            shown["agent"]["status"].as_str(),
            shown["agent"]["lifecycle"].as_str(),
            shown["agent"]["reason"].as_str(),
            shown["healthy"].as_bool()
        ),
        (
            Some("start_error"),
            Some("start_error"),
            Some("startup script exited with status 3"),
            Some(false)
        ),
        "{shown}"
    );
    assert!(
        !shown.to_string().contains("echo hi"),
        "the startup script is only served to the agent: {shown}"
    );
    let (status, _) = harness
        .call(
            "POST",
            "/agent/lifecycle",
            Some(agent_token),
            Some(json!({"state": "ready"})),
        )
        .await;
    assert_eq!(status, 204);
    hand.advance(Duration::from_millis(2500));
    assert_eq!(agent_status().await, ("disconnected".to_string(), false));
    let (status, answer) = harness
        .call("POST", "/agent/heartbeat", Some(agent_token), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["owner"], "alice",
        "the heartbeat says who owns it now"
    );
    assert_eq!(agent_status().await, ("ready".to_string(), true));

    // An exit status is what a shell can report.
    let (status, _) = harness
        .call(
            "POST",
            "/agent/lifecycle",
            Some(agent_token),
            Some(json!({"state": "start_error", "exit_status": 100000})),
        )
        .await;
    assert_eq!(status, 400);

    // Once the workspace is stopped, the agent's token reads nothing more.
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/dev/builds",
            Some(&token),
            Some(json!({"transition": "stop"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        harness.wait_build(&token, "dev", 2).await["status"],
        "succeeded"
    );
    for (method, path) in [("GET", "/agent/me"), ("POST", "/agent/heartbeat")] {
        let (status, body) = harness.call(method, path, Some(agent_token), None).await;
        assert_eq!(status, 401, "{method} {path}: {body}");
    }
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_shutdown_interrupts_running_builds_and_keeps_their_state() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    harness
        .push(&token, "slow", "", archive(&slow_template(60)))
        .await;
    harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev", "template": "slow"})),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !harness
        .log_text(&token, "dev", 1)
        .await
        .contains("sleeping")
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let data_dir = harness.stop().await;
    let harness = Harness::start_in(data_dir).await;
    let build = harness.wait_build(&token, "dev", 1).await;
    assert_eq!(build["status"], "failed");
    assert_eq!(
        build["error"],
        "interrupted by a server shutdown; the Terraform state was kept"
    );
    // Interrupted, Terraform stored what it had made through the state
    // backend before the server stopped.
    let state = harness
        .stored_state(&token, "dev")
        .await
        .expect("the state Terraform stored");
    assert!(String::from_utf8_lossy(&state).contains("\"home\""));
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uploads_are_limited_to_32_mib_and_json_bodies_are_checked() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    // Over the 1 MiB JSON limit but well under the upload limit: it reaches
    // the archive check.
    let (status, body) = harness
        .push(&token, "big", "", vec![b'x'; 3 * 1024 * 1024])
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_archive")),
        "{body}"
    );
    let (status, body) = harness
        .push(&token, "huge", "", vec![b'x'; 33 * 1024 * 1024])
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "dev"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid JSON body: missing field `template`"));
    let (status, body) = harness.call("GET", "/nowhere", Some(&token), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, _) = harness
        .call("GET", "/workspaces/dev/builds/zero", Some(&token), None)
        .await;
    assert_eq!(status, 400);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parameters_that_no_build_could_carry_are_refused_at_create() {
    let harness = Harness::start().await;
    let token = harness.owner().await;
    harness
        .push(&token, "base", "", archive(&quick_template()))
        .await;
    let create = |name: &str, parameters: serde_json::Value| {
        let body = json!({"name": name, "template": "base", "parameters": parameters});
        let harness = &harness;
        let token = token.clone();
        async move {
            harness
                .call("POST", "/workspaces", Some(&token), Some(body))
                .await
        }
    };
    // The template declares no parameter (it uses a Terraform variable):
    // whatever is given is refused at the door, in one line naming it.
    for (parameters, named) in [
        (json!({"size": "x".repeat(140_000)}), "`size`"),
        (json!({"size": null}), "`size`"),
        (json!({"size": ["a"]}), "`size`"),
        (json!({"": "a"}), "``"),
    ] {
        let (status, body) = create("big", parameters).await;
        assert_eq!(status, 400, "{body}");
        let error = body["error"]["message"].as_str().unwrap();
        assert!(error.starts_with("invalid parameters: "), "{error}");
        assert!(error.contains(named), "{error}");
        assert!(error.len() < 300, "one short line: {error}");
    }
    let (status, _) = harness
        .call("GET", "/workspaces/big", Some(&token), None)
        .await;
    assert_eq!(status, 404, "nothing was created");

    // Just under the cap: every build, the delete included, still runs.
    let (status, body) = create("large", json!({})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        harness.wait_build(&token, "large", 1).await["status"],
        "succeeded"
    );
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces/large/builds",
            Some(&token),
            Some(json!({"transition": "delete"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        harness.wait_build(&token, "large", 2).await["status"],
        "succeeded"
    );
    harness.stop().await;
}

/// What probing the API with hostile requests must find: every error is JSON
/// in the documented shape and one bounded line, a caller who may not upload
/// is answered before the upload is read, and values with a shape are checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_requests_get_json_one_line_answers() {
    use std::io::{Read, Write};
    let harness = Harness::start().await;
    let token = harness.owner().await;

    // Framework rejections are JSON too (bad percent-escape, wrong method).
    let (status, body) = harness
        .call("GET", "/workspaces/%ZZ%FF", Some(&token), None)
        .await;
    assert!(status == 400 || status == 404, "{status} {body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    let (status, body) = harness.call("DELETE", "/health", None, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (405, Some("method_not_allowed"))
    );

    // Shapes: an email address, an agent's exit status.
    let (status, body) = harness
        .call(
            "POST",
            "/users",
            Some(&token),
            Some(json!({"username": "eve", "email": "eve\u{1b}[2J@x", "password": "long enough"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(!body.to_string().contains("[2J"), "not echoed: {body}");

    // A JSON body over its limit names that limit.
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&token),
            Some(json!({"name": "x".repeat(2 * 1024 * 1024)})),
        )
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("1 MiB"),
        "{body}"
    );

    // A gzip that holds no tar: one fixed line, none of the uploaded bytes.
    let mut garbage = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    garbage
        .write_all(&b"\x1b]0;owned\x07 not a tar header \n".repeat(40))
        .unwrap();
    let (status, body) = harness
        .push(&token, "junk", "", garbage.finish().unwrap())
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("not a tar.gz archive"), "{message}");
    assert!(!message.contains("owned"), "{message}");

    // A member's upload is refused on the caller's role, and read only to be
    // dropped (e2e_bad_input measures that the server holds none of it).
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
    let address = harness
        .base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let answer = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        let declared = 8 * 1024 * 1024;
        // The server's own host: another is refused before anything else.
        write!(
            stream,
            "POST /api/v1/templates/big/versions HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {member}\r\n\
             Content-Type: application/gzip\r\nContent-Length: {declared}\r\n\r\n"
        )
        .unwrap();
        stream.write_all(&vec![0u8; declared]).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut answer = vec![0u8; 4096];
        let read = stream.read(&mut answer).unwrap();
        String::from_utf8_lossy(&answer[..read]).to_string()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains(
            "you may not push templates: that needs one of the roles owner, template-admin"
        ),
        "{answer}"
    );
    harness.stop().await;
}
