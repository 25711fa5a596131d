//! The authorization matrix, end to end: every API route, asked by each
//! kind of caller, answers with the status written in one table by hand (not
//! derived from `authz::POLICY`, so that a change to the policy shows here as
//! a changed expectation).
//!
//! The server's one provisioner is kept busy by a build that never ends, so
//! the builds of the workspaces the table acts on stay pending: every request
//! the policy allows then ends in the same, deterministic answer whatever ran
//! before it (a build request on a workspace with a pending build is a 409,
//! which only a request past authorization reaches). Builds and template
//! pushes run real Terraform.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use abode_store::{NewAgent, NewProtection};
use common::*;
use serde_json::{json, Value};

/// Who asks, in the order of the table's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    /// `alice`: owner (and member).
    Owner,
    /// `tadmin`: template-admin only.
    TemplateAdmin,
    /// `uadmin`: user-admin only.
    UserAdmin,
    /// `audra`: auditor only.
    Auditor,
    /// `mem`, a member, on their own workspace.
    MemberOwn,
    /// `mem` on `bob`'s workspace.
    MemberOther,
    /// No `Authorization` header.
    NoToken,
    /// A workspace agent's token.
    Agent,
}

const COLUMNS: [Column; 8] = [
    Column::Owner,
    Column::TemplateAdmin,
    Column::UserAdmin,
    Column::Auditor,
    Column::MemberOwn,
    Column::MemberOther,
    Column::NoToken,
    Column::Agent,
];

impl Column {
    /// Unique per column: names of things a column creates.
    fn slug(self) -> &'static str {
        match self {
            Column::Owner => "owner",
            Column::TemplateAdmin => "tadmin",
            Column::UserAdmin => "uadmin",
            Column::Auditor => "auditor",
            Column::MemberOwn => "mem-own",
            Column::MemberOther => "mem-other",
            Column::NoToken => "none",
            Column::Agent => "agent",
        }
    }

    /// Whose workspaces a column acts on: the member's own by its short
    /// name, bob's for "member on another's", and the member's for everyone
    /// else (who own none of them).
    fn workspace_prefix(self) -> &'static str {
        match self {
            Column::MemberOwn => "",
            Column::MemberOther => "bob%2F",
            _ => "mem%2F",
        }
    }
}

/// What a row sends.
enum Body {
    None,
    Json(&'static str),
    /// A template archive (`POST .../versions`).
    Archive,
}

/// One route asked by every column: (method, path, body, expected status per
/// column). In paths and bodies, `{ws}`, `{settled}` and `{missing}` are the
/// column's workspace references and `{col}` its slug.
type Row = (&'static str, &'static str, Body, [u16; 8]);

const DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[rustfmt::skip]
fn table() -> Vec<Row> {
    vec![
        //                                                                                               owner tadm uadm audit m-own m-oth none agent
        // ---- before login ----
        ("GET", "/health", Body::None,                                                                     [200, 200, 200, 200, 200, 200, 200, 200]),
        ("GET", "/ready", Body::None,                                                                      [200, 200, 200, 200, 200, 200, 200, 200]),
        ("POST", "/users/first", Body::Json(r#"{"username":"zed","email":"z@example.com","password":"long enough"}"#),
                                                                                                           [409, 409, 409, 409, 409, 409, 409, 409]),
        ("POST", "/login", Body::Json(r#"{"username":"carol","password":"carols password"}"#),           [200, 200, 200, 200, 200, 200, 200, 200]),
        ("GET", "/sign-in-methods", Body::None,                                                            [200, 200, 200, 200, 200, 200, 200, 200]),
        // Single sign-on is off on this server: a code is nothing to trade.
        ("POST", "/oidc/cli-token", Body::Json(r#"{"code":"0000"}"#),                                      [404, 404, 404, 404, 404, 404, 404, 404]),
        // ---- one's own account ----
        ("GET", "/users/me", Body::None,                                                                   [200, 200, 200, 200, 200, 200, 401, 401]),
        // ---- quotas: one's own; owners and user-admins anyone's (a member
        // asking about another is refused before the name is looked up) ----
        ("GET", "/users/me/quota", Body::None,                                                             [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/users/mem/quota", Body::None,                                                            [200, 403, 200, 403, 200, 200, 401, 401]),
        ("GET", "/users/bob/quota", Body::None,                                                            [200, 403, 200, 403, 403, 403, 401, 401]),
        ("GET", "/users/nobody-such/quota", Body::None,                                                    [404, 403, 404, 403, 403, 403, 401, 401]),
        // ---- retained resources: one's own; reading every workspace reads
        // everyone's; their files only for those who may connect; anything
        // else of another's is not found ----
        ("GET", "/retained", Body::None,                                                                   [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/retained?all=true", Body::None,                                                          [200, 200, 403, 200, 403, 403, 401, 401]),
        ("GET", "/retained/{rec}", Body::None,                                                             [200, 200, 404, 200, 200, 404, 401, 401]),
        ("POST", "/retained/{rec}/extend", Body::Json(r#"{"by":"1d"}"#),                                 [200, 403, 404, 403, 200, 404, 401, 401]),
        ("POST", "/retained/{rec}/assign", Body::Json(r#"{"user":"mem"}"#),                              [200, 403, 404, 403, 200, 404, 401, 401]),
        ("GET", "/retained/{rec}/export", Body::None,                                                      [400, 403, 404, 403, 400, 404, 401, 401]),
        ("POST", "/retained/{rec}/destroy", Body::Json(r#"{}"#),                                          [409, 403, 404, 403, 409, 404, 401, 401]),
        // A snapshot's files go only where one may connect; {rec} is a
        // retained resource, not a snapshot: 400 for those who got that far.
        ("POST", "/retained/{rec}/restore", Body::Json(r#"{"to":"x"}"#),                                 [400, 403, 404, 403, 400, 404, 401, 401]),
        ("GET", "/volumes/orphans", Body::None,                                                            [200, 403, 403, 403, 403, 403, 401, 401]),
        ("POST", "/tokens", Body::Json(r#"{"name":"t-{col}"}"#),                                         [201, 201, 201, 201, 201, 201, 401, 401]),
        ("GET", "/tokens", Body::None,                                                                     [200, 200, 200, 200, 200, 200, 401, 401]),
        ("DELETE", "/tokens/t-{col}", Body::None,                                                          [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/notifications?unread=true", Body::None,                                                 [200, 200, 200, 200, 200, 200, 401, 401]),
        ("POST", "/notifications/n-{col}/read", Body::None,                                                [404, 404, 404, 404, 404, 404, 401, 401]),
        ("POST", "/notifications/read-all", Body::None,                                                    [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/notifications/failed", Body::None,                                                       [200, 403, 403, 403, 403, 403, 401, 401]),
        ("GET", "/notifications/settings", Body::None,                                                     [200, 200, 200, 200, 200, 200, 401, 401]),
        ("POST", "/notifications/settings", Body::Json(r#"{"disable":["build_failed"]}"#),               [200, 200, 200, 200, 200, 200, 401, 401]),
        ("POST", "/notifications/mandatory", Body::Json(r#"{"kind":"build_held","mandatory":true}"#),    [200, 403, 403, 403, 403, 403, 401, 401]),
        // ---- users ----
        ("GET", "/users", Body::None,                                                                      [200, 403, 200, 403, 403, 403, 401, 401]),
        ("POST", "/users", Body::Json(r#"{"username":"new-{col}","email":"n@example.com","password":"long enough"}"#),
                                                                                                           [201, 403, 201, 403, 403, 403, 401, 401]),
        ("POST", "/users", Body::Json(r#"{"username":"aud-{col}","email":"n@example.com","password":"long enough","roles":["auditor"]}"#),
                                                                                                           [201, 403, 403, 403, 403, 403, 401, 401]),
        ("POST", "/users/carol/roles", Body::Json(r#"{"add":["auditor"]}"#),                              [200, 403, 403, 403, 403, 403, 401, 401]),
        ("GET", "/users/carol", Body::None,                                                                [200, 403, 200, 403, 403, 403, 401, 401]),
        ("POST", "/users/dave/suspend", Body::None,                                                        [200, 403, 200, 403, 403, 403, 401, 401]),
        ("POST", "/users/dave/activate", Body::None,                                                       [200, 403, 200, 403, 403, 403, 401, 401]),
        ("DELETE", "/users/new-{col}", Body::None,                                                         [200, 403, 200, 403, 403, 403, 401, 401]),
        // 403: allowed, but the current password is wrong.
        ("PUT", "/users/me/password", Body::Json(r#"{"current_password":"not it","password":"long enough"}"#),
                                                                                                           [403, 403, 403, 403, 403, 403, 401, 401]),
        // ---- templates ----
        ("GET", "/templates", Body::None,                                                                  [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/templates/quick", Body::None,                                                            [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/templates/quick/versions", Body::None,                                                   [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/templates/quick/versions/1", Body::None,                                                 [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/templates/quick/presets?version=1", Body::None,                                          [200, 200, 200, 200, 200, 200, 401, 401]),
        ("POST", "/templates/quick/versions", Body::Archive,                                               [201, 201, 403, 403, 403, 403, 401, 401]),
        ("POST", "/templates/quick/versions/1/activate", Body::None,                                       [200, 200, 403, 403, 403, 403, 401, 401]),
        // Deprecated and undeprecated at once: the rows after still create
        // workspaces from it.
        ("PUT", "/templates/quick/deprecation", Body::Json(r#"{"message":"retired"}"#),                  [200, 200, 403, 403, 403, 403, 401, 401]),
        ("DELETE", "/templates/quick/deprecation", Body::None,                                             [200, 200, 403, 403, 403, 403, 401, 401]),
        ("POST", "/templates/quick/versions/1/previews", Body::Json("{}"),                                 [201, 201, 403, 403, 403, 403, 401, 401]),
        ("GET", "/templates/quick/versions/1/previews/latest", Body::None,                                 [200, 200, 403, 403, 403, 403, 401, 401]),
        ("GET", "/provisioners", Body::None,                                                               [200, 200, 403, 403, 403, 403, 401, 401]),
        ("POST", "/provisioner-keys", Body::Json(r#"{"name":"k-{col}","tags":["cloud=a"]}"#),           [201, 403, 403, 403, 403, 403, 401, 401]),
        ("GET", "/provisioner-keys", Body::None,                                                           [200, 403, 403, 403, 403, 403, 401, 401]),
        ("DELETE", "/provisioner-keys/k-owner", Body::None,                                                [204, 403, 403, 403, 403, 403, 401, 401]),
        ("GET", "/templates/quick/policy", Body::None,                                                     [200, 200, 200, 200, 200, 200, 401, 401]),
        ("PATCH", "/templates/quick/policy", Body::Json(r#"{"activity_bump_ms":3600000}"#),              [200, 200, 403, 403, 403, 403, 401, 401]),
        // ---- workspaces: reading ----
        ("GET", "/workspaces", Body::None,                                                                 [200, 200, 403, 200, 200, 200, 401, 401]),
        ("GET", "/workspaces?all=true", Body::None,                                                        [200, 200, 403, 200, 200, 200, 401, 401]),
        ("GET", "/workspaces/{ws}", Body::None,                                                            [200, 200, 403, 200, 200, 403, 401, 401]),
        // Another's workspace that does not exist: those who may not read
        // others' workspaces learn nothing (403, not 404).
        ("GET", "/workspaces/{missing}", Body::None,                                                       [404, 404, 403, 404, 404, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/builds", Body::None,                                                     [200, 200, 403, 200, 200, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/builds/1", Body::None,                                                   [200, 200, 403, 200, 200, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/builds/1/logs", Body::None,                                              [200, 200, 403, 200, 200, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/builds/1/timings", Body::None,                                           [200, 200, 403, 200, 200, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/protections", Body::None,                                                [200, 200, 403, 200, 200, 403, 401, 401]),
        // ---- shared ports: read like the workspace, changed by who may
        // connect to it ----
        ("GET", "/workspaces/{ws}/port-shares", Body::None,                                                [200, 200, 403, 200, 200, 403, 401, 401]),
        ("PUT", "/workspaces/{ws}/port-shares/8080", Body::Json(r#"{"share":"owner"}"#),                  [400, 403, 403, 403, 400, 403, 401, 401]),
        ("DELETE", "/workspaces/{ws}/port-shares/8080", Body::None,                                        [404, 403, 403, 403, 404, 403, 401, 401]),
        // ---- sharing (issue 49): the owner, owners and template admins;
        // readers of every workspace do not manage who else uses one ----
        ("GET", "/workspaces/{ws}/sharing", Body::None,                                                    [200, 200, 403, 403, 200, 403, 401, 401]),
        ("PUT", "/workspaces/{ws}/sharing", Body::Json(r#"{"user":"carol","role":"use"}"#),              [200, 200, 403, 403, 200, 403, 401, 401]),
        ("PUT", "/workspaces/{ws}/sharing", Body::Json(r#"{"group":"no-such-group","role":"use"}"#),     [404, 404, 403, 403, 404, 403, 401, 401]),
        ("GET", "/templates/quick/port-share", Body::None,                                                 [200, 200, 200, 200, 200, 200, 401, 401]),
        ("PUT", "/templates/quick/port-share", Body::Json(r#"{"max":"owner"}"#),                          [200, 200, 403, 403, 403, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/schedule", Body::None,                                                   [200, 200, 403, 200, 200, 403, 401, 401]),
        // ---- workspaces: acting (409: allowed, refused for the pending build) ----
        ("POST", "/workspaces", Body::Json(r#"{"name":"new-{col}","template":"quick"}"#),                [201, 403, 403, 403, 201, 201, 401, 401]),
        ("POST", "/templates/quick/estimate", Body::Json("{}"),                                           [200, 403, 403, 403, 200, 200, 401, 401]),
        // ---- external auth: one's own accounts (no provider configured here) ----
        ("GET", "/external-auth", Body::None,                                                              [200, 200, 200, 200, 200, 200, 401, 401]),
        ("POST", "/external-auth/github/link", Body::None,                                                 [404, 404, 404, 404, 404, 404, 401, 401]),
        ("DELETE", "/external-auth/github", Body::None,                                                    [404, 404, 404, 404, 404, 404, 401, 401]),
        ("POST", "/workspaces/{ws}/builds", Body::Json(r#"{"transition":"start"}"#),                     [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/builds", Body::Json(r#"{"transition":"stop"}"#),                      [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/builds", Body::Json(r#"{"transition":"start","update":true}"#),       [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/builds", Body::Json(r#"{"transition":"delete"}"#),                    [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/rename", Body::Json(r#"{"name":"renamed-{col}"}"#),                   [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/restart", Body::None,                                                   [409, 403, 403, 403, 409, 403, 401, 401]),
        // Build #1 of {settled} was canceled: 409 is "allowed, already final".
        ("POST", "/workspaces/{settled}/builds/1/cancel", Body::None,                                      [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/builds/1/confirm", Body::Json(r#"{"digest":"{digest}"}"#),            [409, 403, 403, 403, 409, 403, 401, 401]),
        // Only the owner's release succeeds (the protection is then gone).
        ("DELETE", "/workspaces/{ws}/protections?address=terraform_data.home", Body::None,                 [200, 403, 403, 403, 403, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/state", Body::None,                                                      [200, 403, 403, 403, 403, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/orphan", Body::None,                                                    [409, 403, 403, 403, 403, 403, 401, 401]),
        // 409: allowed, but not locked by a lost holder.
        ("POST", "/workspaces/{ws}/unlock", Body::Json(r#"{"build":1}"#),                                 [409, 409, 403, 403, 403, 403, 401, 401]),
        // 409: allowed, but its build is pending (and no provisioner runs on that host).
        ("POST", "/workspaces/{ws}/move", Body::Json(r#"{"host":"elsewhere"}"#),                          [409, 403, 403, 403, 403, 403, 401, 401]),
        // The state backend is Terraform's: no person's or agent's token opens it.
        ("GET", "/builds/b-{col}/state", Body::None,                                                       [401, 401, 401, 401, 401, 401, 401, 401]),
        ("POST", "/builds/b-{col}/state/lock", Body::Json(r#"{"ID":"x"}"#),                              [401, 401, 401, 401, 401, 401, 401, 401]),
        // ---- lifecycle settings (409: allowed, but not running / not dormant) ----
        ("PUT", "/workspaces/{ws}/schedule", Body::Json(r#"{"ttl_ms":3600000}"#),                        [200, 403, 403, 403, 200, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/extend", Body::Json(r#"{"duration_ms":60000}"#),                      [409, 403, 403, 403, 409, 403, 401, 401]),
        ("POST", "/workspaces/{ws}/wake", Body::None,                                                      [409, 403, 403, 403, 409, 403, 401, 401]),
        // ---- connections (409: allowed, but no agent is connected) ----
        ("GET", "/workspaces/{ws}/connect?kind=ssh", Body::None,                                           [409, 403, 403, 403, 409, 403, 401, 401]),
        ("GET", "/workspaces/{ws}/connect?kind=port-forward&port=8080", Body::None,                        [409, 403, 403, 403, 409, 403, 401, 401]),
        // ---- prebuild pools ----
        ("GET", "/prebuilds", Body::None,                                                                  [200, 200, 403, 403, 403, 403, 401, 401]),
        ("POST", "/prebuilds/pause", Body::None,                                                           [200, 403, 403, 403, 403, 403, 401, 401]),
        ("POST", "/prebuilds/resume", Body::None,                                                          [200, 403, 403, 403, 403, 403, 401, 401]),
        // ---- audit ----
        ("GET", "/audit", Body::None,                                                                      [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/audit?workspace={ws}", Body::None,                                                       [200, 200, 403, 200, 200, 403, 401, 401]),
        // The whole log, for owners and auditors only.
        ("GET", "/audit/export?since=2020-01-01T00:00:00Z", Body::None,                                    [200, 403, 403, 200, 403, 403, 401, 401]),
        ("GET", "/audit/export?format=csv", Body::None,                                                    [200, 403, 403, 200, 403, 403, 401, 401]),
        ("GET", "/audit/export?format=xml", Body::None,                                                    [400, 400, 400, 400, 400, 400, 401, 401]),
        // ---- the connection log: everyone signed in reads it, filtered to
        // what they may see (a workspace filter resolves as workspace.read) ----
        ("GET", "/connections", Body::None,                                                                [200, 200, 200, 200, 200, 200, 401, 401]),
        ("GET", "/connections?workspace={ws}", Body::None,                                                 [200, 200, 403, 200, 200, 403, 401, 401]),
        ("GET", "/connections?since=yesterday", Body::None,                                                [400, 400, 400, 400, 400, 400, 401, 401]),
        // ---- the agent's routes ----
        ("GET", "/agent/me", Body::None,                                                                   [401, 401, 401, 401, 401, 401, 401, 200]),
        ("POST", "/agent/heartbeat", Body::None,                                                           [401, 401, 401, 401, 401, 401, 401, 200]),
        ("POST", "/agent/lifecycle", Body::Json(r#"{"state":"starting"}"#),                              [401, 401, 401, 401, 401, 401, 401, 204]),
        ("POST", "/agent/activity", Body::None,                                                            [401, 401, 401, 401, 401, 401, 401, 204]),
        // Not a WebSocket request: 426 once the agent is known.
        ("GET", "/agent/connect", Body::None,                                                              [401, 401, 401, 401, 401, 401, 401, 426]),
        // A dial-back without its ticket: 400 once the agent is known.
        ("GET", "/agent/streams", Body::None,                                                              [401, 401, 401, 401, 401, 401, 401, 400]),
        // ---- last: it ends the session each column used ----
        ("POST", "/logout", Body::None,                                                                    [204, 204, 204, 204, 204, 204, 401, 401]),
    ]
}

const AGENT_TOKEN: &str = "matrix-agent-token-0123456789abcdef";

/// Creates a user with `roles` as the owner and logs them in.
async fn user(harness: &Harness, owner: &str, name: &str, roles: &[&str]) -> String {
    let password = format!("{name}s password");
    let (status, body) = harness
        .call(
            "POST",
            "/users",
            Some(owner),
            Some(
                json!({"username": name, "email": format!("{name}@example.com"),
                        "password": password, "roles": roles}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": name, "password": password})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// A workspace of the token's user; its build #1 stays pending.
async fn workspace(harness: &Harness, token: &str, name: &str) -> Value {
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(token),
            Some(json!({"name": name, "template": "quick"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    body["workspace"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_for_every_kind_of_caller() {
    require_terraform();
    let harness = Harness::start_with(tempfile::tempdir().unwrap(), |options| {
        options.provisioners = 1;
    })
    .await;
    let owner = harness.owner().await;
    let (status, body) = harness
        .push(
            &owner,
            "quick",
            "?activate=true",
            archive(&quick_template()),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let tadmin = user(&harness, &owner, "tadmin", &["template-admin"]).await;
    let uadmin = user(&harness, &owner, "uadmin", &["user-admin"]).await;
    let auditor = user(&harness, &owner, "audra", &["auditor"]).await;
    let mem = user(&harness, &owner, "mem", &["member"]).await;
    // A second session of mem's, so that each member column logs out its own.
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": "mem", "password": "mems password"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mem_again = body["token"].as_str().unwrap().to_string();
    let bob = user(&harness, &owner, "bob", &["member"]).await;
    let carol = user(&harness, &owner, "carol", &["member"]).await;
    user(&harness, &owner, "dave", &["member"]).await;
    // A suspended owner: whatever their roles, their token opens nothing
    // a caller without one could not open.
    let suspended = user(&harness, &owner, "sus", &["owner", "member"]).await;
    let (status, body) = harness
        .call("POST", "/users/sus/suspend", Some(&owner), None)
        .await;
    assert_eq!(status, 200, "{body}");

    // An agent of carol's started workspace (Terraform made no agent: it is
    // written in as a build with the provider would have).
    let store = harness.store().clone();
    let started = workspace(&harness, &carol, "started").await;
    assert_eq!(
        harness.wait_build(&carol, "started", 1).await["status"],
        "succeeded"
    );
    let build_id = started["latest_build"]["id"].as_str().unwrap();
    store
        .replace_agents(
            started["id"].as_str().unwrap(),
            build_id,
            &[NewAgent {
                name: "main".into(),
                token_hash: abode_control::token_hash(AGENT_TOKEN),
                startup_script: None,
                claim_script: None,
                settings: Default::default(),
                dir: None,
                env: "{}".into(),
                apps: Vec::new(),
            }],
        )
        .await
        .unwrap();

    // The server's one provisioner is kept busy for good, so that the
    // builds of the workspaces below stay pending.
    let (status, body) = harness
        .push(
            &owner,
            "slow",
            "?activate=true",
            archive(&slow_template(3600)),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = harness
        .call(
            "POST",
            "/workspaces",
            Some(&owner),
            Some(json!({"name": "blocker", "template": "slow"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    harness.wait_status(&owner, "blocker", 1, "running").await;

    // Each member: `busy` (build #1 pending for good) and `settled` (build
    // #1 canceled), and a retained resource of theirs.
    let mut records = Vec::new();
    for token in [&mem, &bob] {
        let busy = workspace(&harness, token, "busy").await;
        workspace(&harness, token, "settled").await;
        let (status, body) = harness
            .call(
                "POST",
                "/workspaces/settled/builds/1/cancel",
                Some(token),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (id, build) = (
            busy["id"].as_str().unwrap(),
            busy["latest_build"]["id"].as_str().unwrap(),
        );
        store
            .put_state(id, build, b"{\"version\":4}")
            .await
            .unwrap();
        store
            .replace_protections(
                id,
                build,
                &[NewProtection {
                    address: "terraform_data.home".into(),
                    mode: "block".into(),
                    retain_expire: None,
                    retain_for_secs: None,
                }],
            )
            .await
            .unwrap();
        store
            .insert_retained(
                build,
                "someone",
                &[abode_store::NewRetained {
                    address: "terraform_data.kept".into(),
                    resource_type: "terraform_data".into(),
                    provider: "terraform.io/builtin/terraform".into(),
                    import_id: "kept".into(),
                    attributes: "{}".into(),
                    expires_at: None,
                    expire_action: "hold".into(),
                    state_fragment: None,
                }],
            )
            .await
            .unwrap();
        let settled = store.settle_retained(build, &[]).await.unwrap();
        records.push(settled[0].id.clone());
    }

    // Before the table, whose last row ends the sessions.
    access_lists(&harness, &owner).await;
    // The owner's scoped tokens, walked after the table.
    let mut scoped = Vec::new();
    for scope in crate::token_scopes::SCOPES {
        let limits = match scope {
            "template:push" => json!({"templates": ["quick"]}),
            "read" => json!({}),
            _ => json!({"workspaces": ["mem/busy", "mem/settled"]}),
        };
        let mut body =
            json!({"name": format!("scoped-{}", scope.replace(':', "-")), "scopes": [scope]});
        body.as_object_mut()
            .unwrap()
            .extend(limits.as_object().unwrap().clone());
        let (status, answer) = harness
            .call("POST", "/tokens", Some(&owner), Some(body))
            .await;
        assert_eq!(status, 201, "{answer}");
        scoped.push((scope, answer["token"].as_str().unwrap().to_string()));
    }

    let token_of = |column: Column| -> Option<&str> {
        match column {
            Column::Owner => Some(&owner),
            Column::TemplateAdmin => Some(&tadmin),
            Column::UserAdmin => Some(&uadmin),
            Column::Auditor => Some(&auditor),
            Column::MemberOwn => Some(&mem),
            Column::MemberOther => Some(&mem_again),
            Column::NoToken => None,
            Column::Agent => Some(AGENT_TOKEN),
        }
    };
    let fill = |text: &str, column: Column| -> String {
        let prefix = column.workspace_prefix();
        text.replace("{ws}", &format!("{prefix}busy"))
            .replace("{settled}", &format!("{prefix}settled"))
            .replace("{missing}", &format!("{prefix}nothing"))
            .replace("{col}", column.slug())
            .replace("{digest}", DIGEST)
            .replace(
                "{rec}",
                if column == Column::MemberOther {
                    &records[1]
                } else {
                    &records[0]
                },
            )
    };

    let mut mismatches = Vec::new();
    for (method, path, body, expected) in table() {
        for (column, expected) in COLUMNS.into_iter().zip(expected) {
            let path = fill(path, column);
            let token = token_of(column);
            let (status, answer) = match &body {
                Body::None => harness.call(method, &path, token, None).await,
                Body::Json(text) => {
                    let json: Value = serde_json::from_str(&fill(text, column)).unwrap();
                    harness.call(method, &path, token, Some(json)).await
                }
                Body::Archive => match token {
                    Some(token) => {
                        harness
                            .push(token, "quick", "", archive(&quick_template()))
                            .await
                    }
                    None => harness.call(method, &path, None, Some(json!({}))).await,
                },
            };
            if status != expected {
                mismatches.push(format!(
                    "{method} {path} as {column:?}: expected {expected}, got {status}: {answer}"
                ));
            }
            // The suspended owner, asked once per row beside the no-token
            // column: the same answer.
            if column == Column::NoToken {
                let path = path.replace("none", "sus");
                let (status, answer) = match &body {
                    Body::Json(text) => {
                        let json: Value = serde_json::from_str(&fill(text, column)).unwrap();
                        harness
                            .call(method, &path, Some(&suspended), Some(json))
                            .await
                    }
                    _ => harness.call(method, &path, Some(&suspended), None).await,
                };
                if status != expected {
                    mismatches.push(format!(
                        "{method} {path} as a suspended owner: expected {expected}, got {status}: {answer}"
                    ));
                }
            }
        }
    }
    // Every route with each scoped token of the owner's, on mem's
    // workspaces (the owner's columns' paths).
    for (scope, token) in &scoped {
        for (method, written, body, _) in table() {
            let path = fill(written, Column::Owner);
            let (status, answer) = match &body {
                Body::None => harness.call(method, &path, Some(token), None).await,
                Body::Json(text) => {
                    let json: Value = serde_json::from_str(&fill(text, Column::Owner)).unwrap();
                    harness.call(method, &path, Some(token), Some(json)).await
                }
                Body::Archive => {
                    harness
                        .push(token, "quick", "", archive(&quick_template()))
                        .await
                }
            };
            let text = match &body {
                Body::Json(text) => text,
                _ => "",
            };
            if let Some(mismatch) =
                crate::token_scopes::judge(scope, method, written, text, status, &answer)
            {
                mismatches.push(mismatch);
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} cells differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    harness.stop().await;
}

/// Who asks in [`access_table`], by column: owner, template-admin,
/// user-admin, auditor, a member not on `locked`'s access list (`mem2`), a
/// member whose group has `use` on it (`gina`), a member with `admin` on
/// it (`pat`), no token.
#[rustfmt::skip]
fn access_table() -> Vec<(&'static str, &'static str, Body, [u16; 8])> {
    vec![
        //                                                                                               owner tadm uadm audit mem gina  pat none
        // ---- groups ----
        ("GET", "/groups", Body::None,                                                                     [200, 200, 200, 403, 403, 403, 403, 401]),
        ("POST", "/groups", Body::Json(r#"{"name":"g-{col}"}"#),                                          [201, 403, 201, 403, 403, 403, 403, 401]),
        ("GET", "/groups/team", Body::None,                                                                [200, 200, 200, 403, 403, 403, 403, 401]),
        ("GET", "/groups/team/members", Body::None,                                                        [200, 200, 200, 403, 403, 403, 403, 401]),
        ("PATCH", "/groups/team", Body::Json(r#"{"display_name":"Team"}"#),                               [200, 403, 200, 403, 403, 403, 403, 401]),
        // `team` holds `use` on `locked`, which the user admin does not:
        // its members are changed only by who holds that role (or owners).
        ("PATCH", "/groups/team/members", Body::Json(r#"{"add":["carol"]}"#),                             [200, 403, 403, 403, 403, 403, 403, 401]),
        ("PATCH", "/groups/g-{col}/members", Body::Json(r#"{"add":["carol"]}"#),                          [200, 403, 200, 403, 403, 403, 403, 401]),
        ("DELETE", "/groups/g-{col}", Body::None,                                                          [204, 403, 204, 403, 403, 403, 403, 401]),
        ("DELETE", "/groups/Everyone", Body::None,                                                         [400, 403, 400, 403, 403, 403, 403, 401]),
        // ---- a template whose access list is `team: use`, `pat: admin`:
        // those who may not read it are told it does not exist ----
        ("GET", "/templates/locked", Body::None,                                                           [200, 200, 404, 404, 404, 200, 200, 401]),
        ("GET", "/templates/locked/versions", Body::None,                                                  [200, 200, 404, 404, 404, 200, 200, 401]),
        ("GET", "/templates/locked/versions/1", Body::None,                                                [200, 200, 404, 404, 404, 200, 200, 401]),
        ("GET", "/templates/locked/presets?version=1", Body::None,                                         [200, 200, 404, 404, 404, 200, 200, 401]),
        ("GET", "/templates/locked/policy", Body::None,                                                    [200, 200, 404, 404, 404, 200, 200, 401]),
        ("GET", "/templates/locked/permissions", Body::None,                                               [200, 200, 404, 404, 404, 403, 200, 401]),
        ("PUT", "/templates/locked/permissions", Body::Json(r#"{"user":"carol","role":"use"}"#),          [200, 200, 404, 404, 404, 403, 200, 401]),
        ("POST", "/workspaces", Body::Json(r#"{"name":"l-{col}","template":"locked"}"#),                 [201, 403, 403, 403, 404, 201, 201, 401]),
        ("POST", "/templates/locked/estimate", Body::Json("{}"),                                          [200, 403, 403, 403, 404, 200, 200, 401]),
        // A push is refused as a push to a new name would be: it tells
        // nobody whether the template exists.
        ("POST", "/templates/locked/versions", Body::Archive,                                              [201, 201, 403, 403, 403, 403, 201, 401]),
        ("POST", "/templates/locked/versions/1/activate", Body::None,                                      [200, 200, 404, 404, 404, 403, 200, 401]),
        ("PUT", "/templates/locked/deprecation", Body::Json(r#"{"message":"retired"}"#),                 [200, 200, 404, 404, 404, 403, 200, 401]),
        ("DELETE", "/templates/locked/deprecation", Body::None,                                            [200, 200, 404, 404, 404, 403, 200, 401]),
        // A fleet preview plans others' workspaces: not a list admin's.
        ("POST", "/templates/locked/versions/1/previews", Body::Json("{}"),                                [201, 201, 404, 404, 404, 403, 403, 401]),
        ("PATCH", "/templates/locked/policy", Body::Json(r#"{"activity_bump_ms":3600000}"#),             [200, 200, 404, 404, 404, 403, 403, 401]),
    ]
}

/// Groups and a template's access list, asked by every kind of caller.
async fn access_lists(harness: &Harness, owner: &str) {
    let (status, body) = harness
        .push(
            owner,
            "locked",
            "?activate=true",
            archive(&quick_template()),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let mem2 = user(harness, owner, "mem2", &["member"]).await;
    let gina = user(harness, owner, "gina", &["member"]).await;
    let pat = user(harness, owner, "pat", &["member"]).await;
    let tadmin = login(harness, "tadmin").await;
    let uadmin = login(harness, "uadmin").await;
    let auditor = login(harness, "audra").await;
    let setup = [
        ("POST", "/groups", json!({"name": "team"})),
        ("PATCH", "/groups/team/members", json!({"add": ["gina"]})),
        (
            "PUT",
            "/templates/locked/permissions",
            json!({"group": "Everyone", "role": "none"}),
        ),
        (
            "PUT",
            "/templates/locked/permissions",
            json!({"group": "team", "role": "use"}),
        ),
        (
            "PUT",
            "/templates/locked/permissions",
            json!({"user": "pat", "role": "admin"}),
        ),
    ];
    for (method, path, body) in setup {
        let (status, answer) = harness.call(method, path, Some(owner), Some(body)).await;
        assert!(status < 300, "{method} {path}: {status} {answer}");
    }
    let columns: [(&str, Option<&str>); 8] = [
        ("owner", Some(owner)),
        ("tadmin", Some(&tadmin)),
        ("uadmin", Some(&uadmin)),
        ("auditor", Some(&auditor)),
        ("mem2", Some(&mem2)),
        ("gina", Some(&gina)),
        ("pat", Some(&pat)),
        ("none", None),
    ];
    let mut mismatches = Vec::new();
    for (method, path, body, expected) in access_table() {
        for ((slug, token), expected) in columns.into_iter().zip(expected) {
            let path = &path.replace("{col}", slug);
            let (status, answer) = match &body {
                Body::None => harness.call(method, path, token, None).await,
                Body::Json(text) => {
                    let json: Value = serde_json::from_str(&text.replace("{col}", slug)).unwrap();
                    harness.call(method, path, token, Some(json)).await
                }
                Body::Archive => match token {
                    Some(token) => {
                        harness
                            .push(token, "locked", "", archive(&quick_template()))
                            .await
                    }
                    None => harness.call(method, path, None, Some(json!({}))).await,
                },
            };
            if status != expected {
                mismatches.push(format!(
                    "{method} {path} as {slug}: expected {expected}, got {status}: {answer}"
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} cells differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The list shows each person the templates they may use.
    for (token, expected) in [(&mem2, false), (&gina, true), (&pat, true)] {
        let (status, body) = harness.call("GET", "/templates", Some(token), None).await;
        assert_eq!(status, 200, "{body}");
        let names: Vec<&str> = body["templates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.contains(&"locked"), expected, "{names:?}");
        assert!(names.contains(&"quick"), "{names:?}");
    }
}

/// A new session of `name`, whose password [`user`] set.
async fn login(harness: &Harness, name: &str) -> String {
    let (status, body) = harness
        .call(
            "POST",
            "/login",
            None,
            Some(json!({"username": name, "password": format!("{name}s password")})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}
