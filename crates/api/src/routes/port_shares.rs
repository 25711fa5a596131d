//! Ports shared without a template change (`abode port-share`,
//! docs/apps.md): a workspace's shared ports, and how far a template lets
//! its workspaces share. Each a thin call into the gateway's apps.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, put};
use axum::Router;
use serde::Deserialize;

use crate::extract::parse_json;
use crate::pages::{ok, ApiResult};
use crate::{AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaces/:workspace/port-shares", get(list))
        .route(
            "/workspaces/:workspace/port-shares/:port",
            put(share).delete(unshare),
        )
        .route(
            "/templates/:name/port-share",
            get(template_max).put(set_template_max),
        )
}

fn wire(shared: &abode_store::PortShare, url: Option<String>) -> abode_sdk::PortShare {
    abode_sdk::PortShare {
        agent: shared.agent_name.clone(),
        port: shared.port,
        share: shared.share,
        url,
    }
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let shares = state
        .gateway
        .apps()
        .port_shares(&caller, &workspace)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::PortSharesAnswer {
            port_shares: shares
                .into_iter()
                .map(|(shared, url)| wire(&shared, url))
                .collect(),
        },
    )
}

async fn share(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, port)): Path<(String, u16)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::SharePort = parse_json(body)?;
    state
        .gateway
        .apps()
        .share_port(&caller, &workspace, port, body.share, body.agent.as_deref())
        .await?;
    let shares = state
        .gateway
        .apps()
        .port_shares(&caller, &workspace)
        .await?;
    let shown = shares
        .into_iter()
        .find(|(shared, _)| shared.port == port)
        .map(|(shared, url)| wire(&shared, url));
    ok(
        StatusCode::OK,
        abode_sdk::PortShareAnswer { port_share: shown },
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentQuery {
    agent: Option<String>,
}

async fn unshare(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, port)): Path<(String, u16)>,
    Query(query): Query<AgentQuery>,
) -> ApiResult {
    state
        .gateway
        .apps()
        .unshare_port(&caller, &workspace, port, query.agent.as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn template_max(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let max = state
        .gateway
        .apps()
        .template_max_port_share(&caller, &name, None)
        .await?;
    ok(StatusCode::OK, abode_sdk::TemplatePortShare { max })
}

async fn set_template_max(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::SetTemplatePortShare = parse_json(body)?;
    let max = state
        .gateway
        .apps()
        .template_max_port_share(&caller, &name, Some(body.max))
        .await?;
    ok(StatusCode::OK, abode_sdk::TemplatePortShare { max })
}
