//! `/groups` (docs/api.md, "Groups"): groups of people, their members, and
//! the built-in `Everyone`. Owners and user-admins manage them; template
//! admins read them too (to name them in access lists).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use abode_control::GroupEdit;
use abode_sdk::requests;
use abode_store::{Group, GroupSource, NewGroup};

use crate::extract::{list_query, parse_json, ListQueryResult};
use crate::pages::{ok, page_answer, ApiResult, PageQuery};
use crate::views::rfc3339;
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/groups", get(list).post(create))
        .route("/groups/:name", get(show).patch(edit).delete(remove))
        .route("/groups/:name/members", get(members).patch(change_members))
}

/// A group as the wire shows it.
pub(crate) fn group_view(group: &Group) -> abode_sdk::Group {
    abode_sdk::Group {
        name: group.name.clone(),
        display_name: group.display_name.clone(),
        source: group.source.to_string(),
        quota_allowance: group.quota_allowance,
        members: group.members,
        built_in: group.is_everyone(),
        created_at: rfc3339(group.created_at),
    }
}

fn parse_source(source: Option<&str>) -> Result<Option<GroupSource>, ApiError> {
    source
        .map(|name| name.parse::<GroupSource>())
        .transpose()
        .map_err(|error| ApiError::bad_request(error.to_string()))
}

async fn create(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    // Refused before the body is read.
    state.control.identity().may_manage_groups(&caller)?;
    let body: requests::NewGroup = parse_json(body)?;
    let group = NewGroup {
        name: body.name,
        display_name: body.display_name,
        source: parse_source(body.source.as_deref())?.unwrap_or(GroupSource::Manual),
        quota_allowance: body.quota_allowance,
    };
    let group = state
        .control
        .identity()
        .create_group(&caller, &group)
        .await?;
    ok(StatusCode::CREATED, group_view(&group))
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let page = state
        .control
        .identity()
        .list_groups(&caller, query.after.as_deref(), query.limit)
        .await?;
    let groups: Vec<abode_sdk::Group> = page.items.iter().map(group_view).collect();
    page_answer("groups", groups, page.next)
}

async fn show(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let group = state.control.identity().group(&caller, &name).await?;
    ok(StatusCode::OK, group_view(&group))
}

async fn edit(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    state.control.identity().may_manage_groups(&caller)?;
    let body: requests::GroupEdit = parse_json(body)?;
    let edit = GroupEdit {
        name: body.name,
        display_name: body.display_name,
        source: parse_source(body.source.as_deref())?,
        quota_allowance: body.quota_allowance,
    };
    let group = state
        .control
        .identity()
        .edit_group(&caller, &name, &edit)
        .await?;
    ok(StatusCode::OK, group_view(&group))
}

async fn remove(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    state
        .control
        .identity()
        .delete_group(&caller, &name)
        .await?;
    Ok(axum::response::IntoResponse::into_response(
        StatusCode::NO_CONTENT,
    ))
}

async fn members(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    query: ListQueryResult<PageQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let page = state
        .control
        .identity()
        .group_members(&caller, &name, query.after.as_deref(), query.limit)
        .await?;
    let members: Vec<abode_sdk::GroupMember> = page
        .items
        .iter()
        .map(|member| abode_sdk::GroupMember {
            username: member.username.clone(),
            email: member.email.clone(),
            system: member.system,
        })
        .collect();
    page_answer("members", members, page.next)
}

async fn change_members(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    state.control.identity().may_manage_groups(&caller)?;
    let body: requests::GroupMembersChange = parse_json(body)?;
    let group = state
        .control
        .identity()
        .change_group_members(&caller, &name, &body.add, &body.remove)
        .await?;
    ok(StatusCode::OK, group_view(&group))
}
