//! The routes of `/api/v1` and their handlers, in the order of docs/api.md.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use abode_control::{AuditQuery as ControlAuditQuery, BuildRequest, WorkspaceQuery};
use abode_store::{BuildStatus, Role, Roles};

use crate::views::{
    AuditEventJson, BuildJson, LogLineJson, PresetJson, PreviewJson, ProtectionJson, TemplateJson,
    UserJson, VersionJson, WorkspaceJson,
};
use crate::{request_id_layer, ApiError, AppState, Authenticated, AuthenticatedAgent, RequestId};

/// Largest accepted template upload (compressed).
pub const MAX_UPLOAD_BYTES: usize = 32 * 1024 * 1024;
/// How much of an oversized upload is read (and dropped) before answering,
/// so that the client, still sending, gets the 413 rather than a reset.
const MAX_DRAINED_BYTES: usize = 256 * 1024 * 1024;
/// Largest JSON body.
const MAX_JSON_BYTES: usize = 1024 * 1024;
/// Longest log long-poll.
const MAX_LOG_WAIT_SECONDS: u64 = 30;

type ApiResult = Result<axum::response::Response, ApiError>;

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/health", get(health))
        .route("/users/first", post(create_first_user))
        .route("/login", post(login))
        .route("/users/me", get(me))
        .route("/users", get(list_users).post(create_user))
        .route("/users/:name/roles", post(change_user_roles))
        .route("/templates", get(list_templates))
        .route("/templates/:name", get(get_template))
        .route("/templates/:name/presets", get(list_presets))
        .route(
            "/templates/:name/versions",
            get(list_versions)
                .post(push_version)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/templates/:name/versions/:number", get(get_version))
        .route(
            "/templates/:name/versions/:number/activate",
            post(activate_version),
        )
        .route("/workspaces", get(list_workspaces).post(create_workspace))
        .route("/workspaces/:workspace", get(get_workspace))
        .route(
            "/workspaces/:workspace/builds",
            get(list_builds).post(create_build),
        )
        .route("/workspaces/:workspace/builds/:number", get(get_build))
        .route(
            "/workspaces/:workspace/builds/:number/logs",
            get(build_logs),
        )
        .route(
            "/workspaces/:workspace/builds/:number/cancel",
            post(cancel_build),
        )
        .route(
            "/workspaces/:workspace/builds/:number/confirm",
            post(confirm_build),
        )
        .route("/workspaces/:workspace/orphan", post(orphan_workspace))
        .route("/workspaces/:workspace/state", get(workspace_state))
        .route(
            "/workspaces/:workspace/protections",
            get(list_protections).delete(release_protection),
        )
        .route("/audit", get(audit))
        .route("/agent/lifecycle", post(agent_lifecycle))
        .route("/agent/heartbeat", post(agent_heartbeat))
        .route("/agent/me", get(agent_me))
        .merge(crate::identity::routes())
        .merge(crate::notifications::routes())
        .merge(crate::prebuilds::routes())
        .merge(crate::previews::routes())
        .merge(crate::provisioners::routes())
        .merge(crate::provisionerd::routes())
        .merge(crate::provisioner_keys::routes())
        .merge(crate::schedules::routes())
        .merge(crate::connect::routes())
        .merge(crate::state_backend::routes())
        .layer(DefaultBodyLimit::max(MAX_JSON_BYTES))
        .layer(axum::middleware::from_fn(refuse_oversized_json));
    let metrics = state.control.config().metrics.clone();
    // The web dashboard (crates/web) at `/`: its own pages and layers, merged
    // after the API's JSON layers so that its HTML answers stay HTML.
    let web = abode_web::router(state.control.clone());
    Router::new()
        .nest("/api/v1", api)
        .fallback(not_found)
        .with_state(state)
        // Innermost, so that it runs inside each route and sees its template.
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            crate::prometheus::record,
        ))
        .layer(axum::middleware::from_fn(crate::json_errors))
        .merge(web)
        .layer(axum::middleware::from_fn(request_id_layer))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such API endpoint")
}

/// Parses a JSON body with a one-line error (axum's own rejection is not JSON).
pub(crate) fn parse_json<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = body.map_err(body_error)?;
    let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
    serde_json::from_slice(bytes)
        .map_err(|error| ApiError::bad_request(format!("invalid JSON body: {error}")))
}

fn body_error(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        json_too_large()
    } else {
        ApiError::bad_request(format!("cannot read the request body: {rejection}"))
    }
}

fn json_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the request body is over this endpoint's limit of {} MiB",
            MAX_JSON_BYTES / 1024 / 1024
        ),
    )
}

/// A JSON body declared longer than the limit is refused before a handler
/// sees it, and read to its end (up to [`MAX_DRAINED_BYTES`]) only to be
/// dropped: a client still writing it then reads the answer instead of a
/// connection reset under its feet. (A body without a declared length is
/// cut at the limit by `DefaultBodyLimit`.) Template uploads have their own
/// limit and refusal.
async fn refuse_oversized_json(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let upload = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .is_some_and(|path| {
            path.as_str().ends_with("/templates/:name/versions")
                || crate::provisionerd::is_daemon_path(path.as_str())
                || crate::state_backend::is_state_path(path.as_str())
        });
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    match declared {
        Some(length) if !upload && length > MAX_JSON_BYTES => {
            discard_upload(request.into_body()).await;
            json_too_large().into_response()
        }
        _ => next.run(request).await,
    }
}

/// Reads and drops an upload that is refused, up to [`MAX_DRAINED_BYTES`].
async fn discard_upload(mut body: axum::body::Body) {
    use http_body_util::BodyExt;
    let mut total = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(chunk) = frame.into_data() {
            total = total.saturating_add(chunk.len());
        }
        if total > MAX_DRAINED_BYTES {
            break;
        }
    }
}

/// Reads a template upload, refusing one over [`MAX_UPLOAD_BYTES`] with 413.
async fn read_upload(mut body: axum::body::Body) -> Result<Vec<u8>, ApiError> {
    use http_body_util::BodyExt;
    let mut data = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::bad_request(format!("cannot read the request body: {error}"))
        })?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(chunk.len());
        if total <= MAX_UPLOAD_BYTES {
            data.extend_from_slice(&chunk);
        } else if total > MAX_DRAINED_BYTES {
            break;
        }
    }
    if total > MAX_UPLOAD_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the template archive is over the limit of {} MiB",
                MAX_UPLOAD_BYTES / 1024 / 1024
            ),
        ));
    }
    Ok(data)
}

pub(crate) fn ok(status: StatusCode, body: Value) -> ApiResult {
    Ok((status, Json(body)).into_response())
}

/// The query string of a list, with a one-line 400 when it does not parse.
pub(crate) type ListQueryResult<T> = Result<Query<T>, axum::extract::rejection::QueryRejection>;

pub(crate) fn list_query<T>(query: ListQueryResult<T>) -> Result<T, ApiError> {
    query
        .map(|Query(query)| query)
        .map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))
}

/// A list page's answer: its rows under `key`, and `next`, the cursor of the
/// next page (null on the last).
pub(crate) fn page_answer<T: serde::Serialize>(
    key: &str,
    items: Vec<T>,
    next: Option<String>,
) -> ApiResult {
    // Written straight from the rows' views: a page of workspaces never
    // becomes a tree of JSON values first.
    struct PageBody<'a, T> {
        key: &'a str,
        items: &'a [T],
        next: Option<&'a str>,
    }
    impl<T: serde::Serialize> serde::Serialize for PageBody<'_, T> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(Some(2))?;
            map.serialize_entry(self.key, self.items)?;
            map.serialize_entry("next", &self.next)?;
            map.end()
        }
    }
    let body = PageBody {
        key,
        items: &items,
        next: next.as_deref(),
    };
    Ok((StatusCode::OK, Json(body)).into_response())
}

/// A `since`/`until` parameter (RFC 3339) as Unix ms.
fn parse_time(raw: Option<&str>, what: &str) -> Result<Option<i64>, ApiError> {
    raw.map(|text| {
        crate::views::parse_rfc3339(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{what} must be an RFC 3339 time such as 2024-05-01T12:00:00Z"
            ))
        })
    })
    .transpose()
}

/// Pagination parameters every list takes.
#[derive(Deserialize)]
pub(crate) struct PageQuery {
    #[serde(default)]
    pub(crate) after: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<i64>,
}

pub(crate) fn parse_number(raw: &str, what: &str) -> Result<Option<i64>, ApiError> {
    if raw == "latest" {
        return Ok(None);
    }
    raw.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(format!("invalid {what} `{raw}`: use a positive number"))
        })
}

// ---- server ----

async fn health() -> ApiResult {
    ok(
        StatusCode::OK,
        json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}),
    )
}

// ---- users ----

#[derive(Deserialize)]
struct NewUserBody {
    username: String,
    email: String,
    password: String,
    /// The new user's roles; the single `role` of older clients is a list
    /// of one. Neither: `member`.
    #[serde(default)]
    roles: Option<Vec<String>>,
    #[serde(default)]
    role: Option<String>,
}

impl NewUserBody {
    fn roles(&self) -> Result<Roles, ApiError> {
        let names: Vec<&str> = match (&self.roles, &self.role) {
            (Some(roles), None) => roles.iter().map(String::as_str).collect(),
            (None, Some(role)) => vec![role.as_str()],
            (None, None) => vec![Role::Member.as_str()],
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "give `roles` (a list) or the older `role`, not both",
                ))
            }
        };
        parse_roles(names)
    }
}

/// Role names from a request; an unknown one is a 400 naming it and the
/// valid ones.
fn parse_roles<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Roles, ApiError> {
    Roles::parse_each(names).map_err(|unknown| ApiError::bad_request(unknown.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleChangeBody {
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
}

#[derive(Deserialize)]
struct LoginBody {
    username: String,
    password: String,
}

async fn create_first_user(
    State(state): State<AppState>,
    axum::Extension(request_id): axum::Extension<RequestId>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: NewUserBody = parse_json(body)?;
    let (user, token) = state
        .control
        .create_first_user(
            &body.username,
            &body.email,
            &body.password,
            Some(request_id.0),
        )
        .await?;
    ok(
        StatusCode::CREATED,
        json!({"user": UserJson::new(&user, &state.control.roles_of(&user.id).await?), "token": token}),
    )
}

async fn login(
    State(state): State<AppState>,
    axum::Extension(request_id): axum::Extension<RequestId>,
    // The socket's peer, never a forwarded-for header (which anyone can
    // write): the throttle counts failures per client address.
    peer: Option<axum::extract::ConnectInfo<std::net::SocketAddr>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: LoginBody = parse_json(body)?;
    let client = peer.map(|axum::extract::ConnectInfo(address)| address.ip());
    let (user, token) = state
        .control
        .login_from(&body.username, &body.password, client, Some(request_id.0))
        .await?;
    let roles = state.control.roles_of(&user.id).await?;
    ok(
        StatusCode::OK,
        json!({"user": UserJson::new(&user, &roles), "token": token}),
    )
}

async fn me(Authenticated(caller): Authenticated) -> ApiResult {
    ok(
        StatusCode::OK,
        json!({"user": UserJson::new(&caller.user, &caller.roles)}),
    )
}

async fn create_user(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: NewUserBody = parse_json(body)?;
    let roles = body.roles()?;
    let user = state
        .control
        .create_user(&caller, &body.username, &body.email, &body.password, &roles)
        .await?;
    ok(
        StatusCode::CREATED,
        json!({"user": UserJson::new(&user, &roles)}),
    )
}

async fn change_user_roles(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(username): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: RoleChangeBody = parse_json(body)?;
    let add = parse_roles(body.add.iter().map(String::as_str))?;
    let remove = parse_roles(body.remove.iter().map(String::as_str))?;
    let (user, change) = state
        .control
        .change_user_roles(&caller, &username, &add, &remove)
        .await?;
    ok(
        StatusCode::OK,
        json!({"user": UserJson::new(&user, &change.after)}),
    )
}

async fn list_users(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let page = state
        .control
        .list_users(&caller, query.after.as_deref(), query.limit)
        .await?;
    let users: Vec<UserJson> = page
        .items
        .iter()
        .map(|(user, roles)| UserJson::new(user, roles))
        .collect();
    page_answer("users", users, page.next)
}

// ---- templates ----

async fn list_templates(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let page = state
        .control
        .list_templates(&caller, query.after.as_deref(), query.limit)
        .await?;
    let templates: Vec<TemplateJson> = page.items.iter().map(TemplateJson::from).collect();
    page_answer("templates", templates, page.next)
}

async fn get_template(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let template = state.control.read_template(&caller, &name).await?;
    ok(
        StatusCode::OK,
        json!({"template": TemplateJson::from(&template)}),
    )
}

async fn list_versions(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let versions = state.control.template_versions(&caller, &name).await?;
    let versions: Vec<VersionJson> = versions.iter().map(VersionJson::from).collect();
    ok(StatusCode::OK, json!({"versions": versions}))
}

#[derive(Deserialize)]
struct PresetsQuery {
    #[serde(default)]
    version: Option<i64>,
}

async fn list_presets(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    query: Result<Query<PresetsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    if let Some(number) = query.version.filter(|number| *number < 1) {
        return Err(ApiError::bad_request(format!(
            "invalid version `{number}`: use a positive number"
        )));
    }
    let (version, presets) = state
        .control
        .template_presets(&caller, &name, query.version)
        .await?;
    let presets: Vec<PresetJson> = presets.iter().map(PresetJson::from).collect();
    ok(
        StatusCode::OK,
        json!({"template": version.template_name, "version": version.number, "presets": presets}),
    )
}

#[derive(Deserialize)]
struct PushQuery {
    #[serde(default)]
    activate: Option<bool>,
    #[serde(default)]
    message: Option<String>,
    /// Refuse the version when the lint finds an error-level hazard.
    #[serde(default)]
    strict: Option<bool>,
    /// The provisioner tags its builds need, `key=value` separated by commas.
    #[serde(default)]
    provisioner_tags: Option<String>,
}

async fn push_version(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    query: Result<Query<PushQuery>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Body,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let message = query.message.as_deref().unwrap_or("");
    if let Err(refusal) = state.control.may_push_template(&caller, &name, message) {
        // Nothing of it is kept; it is read (and dropped) only so that the
        // client, still sending, gets to read why.
        discard_upload(body).await;
        return Err(refusal.into());
    }
    let archive = read_upload(body).await?;
    if archive.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_archive",
            "the request body is empty: send the template folder as a .tar.gz archive",
        ));
    }
    let options = abode_control::PushOptions {
        activate: query.activate.unwrap_or(false),
        message: message.to_string(),
        strict: query.strict.unwrap_or(false),
        provisioner_tags: query
            .provisioner_tags
            .as_deref()
            .map(|tags| {
                tags.split(',')
                    .filter(|tag| !tag.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    };
    let (template, version, lint) = state
        .control
        .push_template_with(&caller, &name, archive.to_vec(), &options)
        .await?;
    let provisioner_tags = state.control.provisioner_tags_of(&version).await?;
    ok(
        StatusCode::CREATED,
        json!({
            "template": TemplateJson::from(&template),
            "version": VersionJson::from(&version),
            "lint": lint,
            "provisioner_tags": provisioner_tags,
        }),
    )
}

/// One version with the lint's findings it keeps (`null`: pushed before
/// the lint existed).
async fn get_version(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((name, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "version")?
        .ok_or_else(|| ApiError::bad_request("give a version number"))?;
    let (version, lint) = state
        .control
        .template_version_detail(&caller, &name, number)
        .await?;
    let gate = state.control.preview_gate(&caller, &name, number).await?;
    let preview = gate.as_ref().map(|gate| PreviewJson::from(&gate.preview));
    let provisioner_tags = state.control.provisioner_tags_of(&version).await?;
    ok(
        StatusCode::OK,
        json!({
            "version": VersionJson::from(&version),
            "lint": lint,
            "preview": preview,
            "provisioner_tags": provisioner_tags,
        }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActivateBody {
    /// The id of the version's latest preview, acknowledged: needed when
    /// that preview would hold or block workspaces or has not finished.
    #[serde(default)]
    acknowledge_preview: Option<String>,
}

async fn activate_version(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((name, number)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: ActivateBody = parse_json(body)?;
    let number = parse_number(&number, "version")?
        .ok_or_else(|| ApiError::bad_request("give a version number to activate"))?;
    let (template, version) = state
        .control
        .activate_previewed_version(&caller, &name, number, body.acknowledge_preview.as_deref())
        .await?;
    ok(
        StatusCode::OK,
        json!({"template": TemplateJson::from(&template), "version": VersionJson::from(&version)}),
    )
}

// ---- workspaces ----

#[derive(Deserialize)]
struct NewWorkspaceBody {
    name: String,
    template: String,
    /// A preset of the template's active version.
    #[serde(default)]
    preset: Option<String>,
    #[serde(default)]
    parameters: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct ListQuery {
    #[serde(default)]
    all: Option<bool>,
    #[serde(default)]
    deleted: Option<bool>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn create_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: NewWorkspaceBody = parse_json(body)?;
    // Values go to the door as received: it checks them against the
    // template version's declarations and answers every problem at once.
    let parameters = body.parameters;
    let (view, build) = state
        .control
        .create_workspace(
            &caller,
            &body.name,
            &body.template,
            body.preset.as_deref(),
            parameters,
        )
        .await?;
    ok(
        StatusCode::CREATED,
        json!({"workspace": WorkspaceJson::from(&view), "build": BuildJson::from(&build)}),
    )
}

async fn list_workspaces(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let status = query
        .status
        .as_deref()
        .map(str::parse::<abode_control::WorkspaceStatus>)
        .transpose()?;
    let page = state
        .control
        .list_workspaces(
            &caller,
            &WorkspaceQuery {
                all: query.all.unwrap_or(false),
                include_deleted: query.deleted.unwrap_or(false),
                owner: query.owner,
                template: query.template,
                status,
                after: query.after,
                limit: query.limit,
            },
        )
        .await?;
    let workspaces: Vec<WorkspaceJson> = page.items.iter().map(WorkspaceJson::from).collect();
    page_answer("workspaces", workspaces, page.next)
}

async fn get_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let view = state.control.workspace(&caller, &workspace).await?;
    ok(
        StatusCode::OK,
        json!({"workspace": WorkspaceJson::from(&view)}),
    )
}

// ---- builds ----

#[derive(Deserialize)]
struct NewBuildBody {
    transition: String,
    #[serde(default)]
    template_version: Option<i64>,
    #[serde(default)]
    update: Option<bool>,
    /// New parameter values for a start or an update.
    #[serde(default)]
    parameters: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct LogsQuery {
    #[serde(default)]
    after: Option<i64>,
    #[serde(default)]
    wait: Option<u64>,
}

async fn create_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: NewBuildBody = parse_json(body)?;
    let transition = body.transition.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "unknown transition `{}`: use start, stop or delete",
            body.transition.chars().take(40).collect::<String>()
        ))
    })?;
    let request = BuildRequest {
        transition,
        template_version: body.template_version,
        update: body.update.unwrap_or(false),
        parameters: body.parameters,
    };
    let build = state
        .control
        .start_build(&caller, &workspace, &request)
        .await?;
    ok(
        StatusCode::CREATED,
        json!({"build": BuildJson::from(&build)}),
    )
}

#[derive(Deserialize)]
struct BuildsQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn list_builds(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    query: ListQueryResult<BuildsQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let status = query
        .status
        .as_deref()
        .map(|status| {
            status.parse::<BuildStatus>().map_err(|_| {
                ApiError::bad_request(format!(
                    "unknown build status \"{}\" (one of: pending, running, \
                     awaiting_confirmation, succeeded, failed, canceled)",
                    status.escape_debug()
                ))
            })
        })
        .transpose()?;
    let page = state
        .control
        .builds(
            &caller,
            &workspace,
            status,
            query.after.as_deref(),
            query.limit,
        )
        .await?;
    let builds: Vec<BuildJson> = page.items.iter().map(BuildJson::from).collect();
    page_answer("builds", builds, page.next)
}

async fn get_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "build number")?;
    let build = state.control.build(&caller, &workspace, number).await?;
    ok(StatusCode::OK, json!({"build": BuildJson::from(&build)}))
}

async fn build_logs(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let number = parse_number(&number, "build number")?;
    let wait = Duration::from_secs(query.wait.unwrap_or(0).min(MAX_LOG_WAIT_SECONDS));
    let page = state
        .control
        .build_logs(&caller, &workspace, number, query.after.unwrap_or(0), wait)
        .await?;
    let lines: Vec<LogLineJson> = page.lines.iter().map(LogLineJson::from).collect();
    ok(
        StatusCode::OK,
        json!({"lines": lines, "status": page.status.as_str(), "done": page.done}),
    )
}

async fn cancel_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "build number")?;
    let build = state
        .control
        .cancel_build(&caller, &workspace, number)
        .await?;
    ok(StatusCode::OK, json!({"build": BuildJson::from(&build)}))
}

// ---- guarded builds ----

#[derive(Deserialize)]
struct ConfirmBody {
    #[serde(default)]
    digest: Option<String>,
}

async fn confirm_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: ConfirmBody = parse_json(body)?;
    let number = parse_number(&number, "build number")?;
    let build = state
        .control
        .confirm_build(
            &caller,
            &workspace,
            number,
            body.digest.as_deref().unwrap_or(""),
        )
        .await?;
    ok(StatusCode::OK, json!({"build": BuildJson::from(&build)}))
}

async fn list_protections(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let protections = state.control.protections(&caller, &workspace).await?;
    let protections: Vec<ProtectionJson> = protections.iter().map(ProtectionJson::from).collect();
    ok(StatusCode::OK, json!({"protections": protections}))
}

#[derive(Deserialize)]
struct ReleaseQuery {
    #[serde(default)]
    address: Option<String>,
}

async fn orphan_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let orphaned = state.control.orphan_workspace(&caller, &workspace).await?;
    ok(
        StatusCode::OK,
        json!({
            "workspace": {"id": orphaned.workspace.id, "name": orphaned.workspace.name,
                          "owner": orphaned.workspace.owner_name, "deleted": orphaned.workspace.deleted},
            "resources": orphaned.resources,
        }),
    )
}

async fn workspace_state(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let bytes = state.control.workspace_state(&caller, &workspace).await?;
    Ok((
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}

async fn release_protection(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    query: Result<Query<ReleaseQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let address = query
        .address
        .filter(|address| !address.trim().is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("give the resource address to release: ?address=ADDRESS")
        })?;
    let released = state
        .control
        .release_protection(&caller, &workspace, &address)
        .await?;
    ok(
        StatusCode::OK,
        json!({"released": ProtectionJson::from(&released)}),
    )
}

#[derive(Deserialize)]
struct AuditQuery {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn audit(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let since = parse_time(query.since.as_deref(), "since")?;
    let until = parse_time(query.until.as_deref(), "until")?;
    let page = state
        .control
        .audit_events(
            &caller,
            &ControlAuditQuery {
                workspace: query.workspace,
                target: query.target,
                actor: query.actor,
                action: query.action,
                since,
                until,
                after: query.after,
                limit: query.limit,
            },
        )
        .await?;
    let events: Vec<AuditEventJson> = page.items.iter().map(AuditEventJson::from).collect();
    page_answer("events", events, page.next)
}

// ---- agent ----

#[derive(Deserialize)]
struct LifecycleBody {
    state: String,
    /// With `start_error`: the startup script's exit status.
    #[serde(default)]
    exit_status: Option<i64>,
}

async fn agent_lifecycle(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: LifecycleBody = parse_json(body)?;
    state
        .control
        .agent_lifecycle(&agent, &body.state, body.exit_status)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn agent_heartbeat(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
) -> ApiResult {
    let workspace = state.control.agent_heartbeat(&agent).await?;
    ok(
        StatusCode::OK,
        json!({ "workspace": workspace.name, "owner": workspace.owner_name }),
    )
}

async fn agent_me(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
) -> ApiResult {
    let workspace = state.control.agent_workspace(&agent).await?;
    let claim_script = state.control.agent_claim_script(&agent).await?;
    let interval = state
        .control
        .config()
        .agent_heartbeat_interval
        .as_secs()
        .max(1);
    ok(
        StatusCode::OK,
        json!({
            "workspace": workspace.name,
            "owner": workspace.owner_name,
            "agent": agent.name,
            "heartbeat_interval_seconds": interval,
            "startup_script": agent.startup_script,
            "claim_script": claim_script,
            "dir": agent.dir,
            "env": serde_json::from_str::<serde_json::Value>(&agent.env)
                .unwrap_or_else(|_| json!({})),
        }),
    )
}
