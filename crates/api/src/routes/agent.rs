//! A workspace agent's own routes, authenticated by its agent token:
//! lifecycle reports, heartbeats and its configuration.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;

use crate::extract::{parse_json, AgentWithToken};
use crate::pages::{ok, ApiResult};
use crate::{ApiError, AppState, AuthenticatedAgent};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/agent/lifecycle", post(agent_lifecycle))
        .route("/agent/heartbeat", post(agent_heartbeat))
        .route("/agent/me", get(agent_me))
        .route("/agent/apps/health", post(agent_app_health))
        .route("/agent/unsaved", post(agent_unsaved))
        .route("/agent/shutdown", post(agent_shutdown))
        .route("/agent/scripts", post(agent_script_run))
        .route("/agent/metadata", post(agent_metadata))
        .route("/agent/metadata/stream", get(agent_metadata_stream))
        .route(
            "/agent/external-auth/token",
            post(agent_external_auth_token),
        )
}

/// The workspace owner's token of a provider, for Git in the workspace
/// (docs/external-auth.md): by provider id or by the Git URL it serves.
async fn agent_external_auth_token(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::AgentExternalAuthToken = parse_json(body)?;
    if body.username_only {
        let (Some(git_url), None) = (&body.git_url, &body.provider) else {
            return Err(crate::ApiError::bad_request(
                "`username_only` goes with `git_url` alone",
            ));
        };
        let workspace = state.control.agents().agent_workspace(&agent).await?;
        let (provider, username) = state
            .control
            .external_auth()
            .git_username_for_workspace(&workspace, git_url)
            .await?;
        return ok(
            StatusCode::OK,
            abode_sdk::ExternalAuthToken {
                provider,
                username: username.to_string(),
                access_token: String::new(),
                expires_at: None,
            },
        );
    }
    let wanted = match (&body.provider, &body.git_url) {
        (Some(provider), None) => abode_control::external_auth::TokenFor::Provider(provider),
        (None, Some(url)) => abode_control::external_auth::TokenFor::GitUrl(url),
        _ => {
            return Err(crate::ApiError::bad_request(
                "give `provider` or `git_url`, one of the two",
            ))
        }
    };
    let workspace = state.control.agents().agent_workspace(&agent).await?;
    let handed = state
        .control
        .external_auth()
        .token_for_workspace(&workspace, wanted)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::ExternalAuthToken {
            provider: handed.provider,
            username: handed.username.to_string(),
            access_token: handed.access_token,
            expires_at: handed.expires_at.map(crate::views::rfc3339),
        },
    )
}

async fn agent_app_health(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::AgentAppHealth = parse_json(body)?;
    state
        .control
        .agents()
        .agent_app_health(&agent, &body.slug, body.health)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The agent's scan of the home for unsaved work (docs/api.md).
async fn agent_unsaved(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::AgentUnsaved = parse_json(body)?;
    state.control.agents().agent_unsaved(&agent, body).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A run of one of the agent's scripts: begun, going on, ended (docs/api.md).
async fn agent_script_run(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::AgentScriptReport = parse_json(body)?;
    state
        .control
        .agents()
        .agent_script_run(&agent, body)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The latest results of the agent's `metadata` blocks and its monitors'
/// readings: kept in this server's memory (docs/api.md, "Live metadata");
/// a monitor that crossed its threshold tells the owner.
async fn agent_metadata(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let now = state.control.config().clock.now_ms();
    let live = state.gateway.live();
    let token = crate::extract::agent_bearer(&headers)?;
    let token_hash = abode_control::token_hash(&token);
    let agent = match live.reporter(&token_hash, now) {
        Some(agent) => agent,
        None => {
            let agent = state.control.agents().authenticate_agent(&token).await?;
            live.remember_reporter(&token_hash, agent.clone(), now);
            agent
        }
    };
    let body: abode_sdk::requests::AgentMetadataReport = parse_json(body)?;
    take_report(&state, &agent, &body, now).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Keeps one metadata report of `agent` (either route's) and tells the
/// owner of a monitor it made cross its threshold.
async fn take_report(
    state: &AppState,
    agent: &abode_store::Agent,
    body: &abode_sdk::requests::AgentMetadataReport,
    now: i64,
) -> Result<(), ApiError> {
    let live = state.gateway.live();
    let (watch, workspace_name, workspace) = match live.declared(&agent.id, now) {
        Some((watch, name)) => (watch, name, None),
        None => {
            let watch = std::sync::Arc::new(state.control.agents().agent_watch(agent).await?);
            let workspace = state.control.agents().agent_workspace(agent).await?;
            let name = format!("{}/{}", workspace.owner_name, workspace.name);
            live.declare(&agent.id, std::sync::Arc::clone(&watch), name.clone(), now);
            (watch, name, Some(workspace))
        }
    };
    let who = abode_gateway::Reporter {
        agent_id: &agent.id,
        agent: &agent.name,
        workspace_id: &agent.workspace_id,
        workspace: &workspace_name,
    };
    let crossings = live.report(who, &watch, body, now);
    if !crossings.is_empty() {
        let workspace = match workspace {
            Some(workspace) => workspace,
            None => state.control.agents().agent_workspace(agent).await?,
        };
        for crossing in crossings {
            tracing::info!(workspace = %workspace.id, agent = %agent.name, monitor = %crossing.monitor,
                used_percent = crossing.used_percent, "a resource monitor crossed its threshold");
            state
                .control
                .notifications()
                .notify_workspace_resource_high(
                    &workspace,
                    &abode_control::notifications::ResourceHigh {
                        agent: &agent.name,
                        monitor: &crossing.monitor,
                        threshold: crossing.threshold_percent,
                        used_percent: crossing.used_percent,
                        crossed_at: now,
                    },
                )
                .await?;
        }
    }
    Ok(())
}

/// How often a reports' socket checks its agent's token again: a stopped
/// workspace's agent is gone with it, this is for the token that stopped
/// holding while its agent still runs.
const STREAM_RECHECK_MS: i64 = 30 * 1000;

/// The same reports as `POST /agent/metadata`, one JSON message each, on a
/// WebSocket the agent keeps open: authenticated at the upgrade (and every
/// [`STREAM_RECHECK_MS`]), with no HTTP request per report (docs/api.md,
/// "Live metadata").
async fn agent_metadata_stream(
    State(state): State<AppState>,
    AgentWithToken { agent, token }: AgentWithToken,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<axum::response::Response, ApiError> {
    let upgrade = upgrade.ok_or_else(|| {
        ApiError::bad_request("this route takes a WebSocket upgrade (GET with Upgrade: websocket)")
    })?;
    Ok(upgrade
        .max_message_size(crate::extract::MAX_JSON_BYTES)
        .on_upgrade(move |socket| metadata_stream(state, token, agent, socket)))
}

async fn metadata_stream(
    state: AppState,
    token: String,
    agent: abode_store::Agent,
    mut socket: WebSocket,
) {
    let clock = state.control.config().clock.clone();
    let mut checked_at = clock.now_ms();
    while let Some(Ok(message)) = socket.recv().await {
        let text = match message {
            Message::Text(text) => text,
            Message::Close(_) => break,
            _ => continue,
        };
        let now = clock.now_ms();
        if now - checked_at >= STREAM_RECHECK_MS {
            match state.control.agents().authenticate_agent(&token).await {
                Ok(_) => checked_at = now,
                Err(abode_control::ControlError::Unauthorized(_)) => break,
                // A database hiccup does not end it: checked at the next.
                Err(_) => {}
            }
        }
        let report = match serde_json::from_str::<abode_sdk::requests::AgentMetadataReport>(&text) {
            Ok(report) => report,
            Err(error) => {
                tracing::warn!(agent = %agent.id, %error, "a metadata report that does not parse: closing its socket");
                break;
            }
        };
        if let Err(error) = take_report(&state, &agent, &report, now).await {
            tracing::warn!(agent = %agent.id, error = %error.message, "a metadata report was not kept");
        }
    }
}

/// How the shutdown script a build asked for ended (docs/api.md).
async fn agent_shutdown(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::AgentShutdownReport = parse_json(body)?;
    state
        .control
        .agents()
        .agent_shutdown_report(&agent, body)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn agent_lifecycle(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::AgentLifecycle = parse_json(body)?;
    state
        .control
        .agents()
        .agent_lifecycle(&agent, &body.state, body.exit_status)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn agent_heartbeat(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    // An empty body (an agent older than the report) says nothing more.
    let report: abode_sdk::requests::AgentHeartbeatReport = match &body {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Default::default(),
        _ => parse_json(body)?,
    };
    let workspace = state
        .control
        .agents()
        .agent_heartbeat(&agent, report)
        .await?;
    let scan_unsaved = state
        .control
        .agents()
        .unsaved_scan_requested(&agent)
        .await?;
    let shutdown = state.control.agents().agent_shutdown_asked(&agent).await?;
    ok(
        StatusCode::OK,
        abode_sdk::AgentHeartbeat {
            workspace: workspace.name,
            owner: workspace.owner_name,
            scan_unsaved,
            shutdown,
        },
    )
}

async fn agent_me(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
) -> ApiResult {
    let workspace = state.control.agents().agent_workspace(&agent).await?;
    let claim_script = state.control.agents().agent_claim_script(&agent).await?;
    let scripts = state.control.agents().agent_scripts(&agent).await?;
    let watch = state.control.agents().agent_watch(&agent).await?;
    let apps: Vec<abode_sdk::AgentApp> = state
        .control
        .agents()
        .agent_apps(&agent)
        .await?
        .into_iter()
        .filter(|app| app.definition.url.is_some())
        .filter_map(|app| {
            Some(abode_sdk::AgentApp {
                slug: app.definition.slug,
                healthcheck: app.definition.healthcheck?,
            })
        })
        .collect();
    let interval = state
        .control
        .config()
        .agent_heartbeat_interval
        .as_secs()
        .max(1);
    ok(
        StatusCode::OK,
        abode_sdk::AgentMe {
            workspace: workspace.name,
            owner: workspace.owner_name,
            agent: agent.name,
            heartbeat_interval_seconds: Some(interval),
            unsaved_scan_interval_seconds: Some(
                state
                    .control
                    .config()
                    .unsaved_scan_interval
                    .as_secs()
                    .max(1),
            ),
            startup_script: agent.startup_script,
            claim_script,
            dir: agent.dir,
            // The `abode_agent`'s env, a map of strings as its schema says.
            env: serde_json::from_str(&agent.env).unwrap_or_default(),
            apps,
            scripts,
            watch,
        },
    )
}
