//! Workspace sharing (`abode sharing`, issue 49): a workspace's share list,
//! and one entry set or removed. Each a thin call into the workspaces.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::extract::parse_json;
use crate::pages::{ok, ApiResult};
use crate::views::rfc3339;
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/workspaces/:workspace/sharing", get(list).put(set))
}

fn wire(sharing: &abode_control::Sharing) -> abode_sdk::WorkspaceSharing {
    let workspace = &sharing.workspace;
    abode_sdk::WorkspaceSharing {
        workspace: format!("{}/{}", workspace.owner_name, workspace.name),
        template: workspace.template_name.clone(),
        shares: sharing
            .entries
            .iter()
            .map(|entry| abode_sdk::WorkspaceShare {
                kind: entry.kind.clone(),
                name: entry.name.clone(),
                role: entry.role.to_string(),
                created_at: Some(rfc3339(entry.created_at)),
            })
            .collect(),
    }
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let sharing = state
        .control
        .workspaces()
        .sharing(&caller, &workspace)
        .await?;
    ok(StatusCode::OK, wire(&sharing))
}

async fn set(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    // Refused (or not found) before the body is read.
    state
        .control
        .workspaces()
        .sharing(&caller, &workspace)
        .await?;
    let body: abode_sdk::requests::WorkspaceShareChange = parse_json(body)?;
    let whom = match (body.user, body.group) {
        (Some(user), None) => abode_control::PermissionSubject::User(user),
        (None, Some(group)) => abode_control::PermissionSubject::Group(group),
        _ => return Err(ApiError::bad_request("name one `user` or one `group`")),
    };
    let role = match body.role.as_str() {
        "none" => None,
        other => Some(other.parse::<abode_store::ShareRole>().map_err(|_| {
            ApiError::bad_request(format!("unknown role {other:?} (one of: use, admin, none)"))
        })?),
    };
    let sharing = state
        .control
        .workspaces()
        .share(&caller, &workspace, &whom, role)
        .await?;
    ok(StatusCode::OK, wire(&sharing))
}
