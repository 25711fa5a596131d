//! People's accounts: the first user, login, who one is, and the
//! administration of users and their roles.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use abode_control::StatusCommand;
use abode_sdk::requests::{Login, NewUser, RoleChange};
use abode_store::{Role, Roles};

use crate::extract::{list_query, parse_json, ListQueryResult};
use crate::pages::{ok, page_answer, ApiResult};
use crate::views::{user_entry_view, user_view};
use crate::{ApiError, AppState, Authenticated, RequestId};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/first", post(create_first_user))
        .route("/login", post(login))
        .route("/sign-in-methods", get(sign_in_methods))
        .route("/oidc/cli-token", post(oidc_cli_token))
        .route("/users/me", get(me))
        .route("/users/me/quota", get(own_quota))
        .route("/users/:name/quota", get(quota))
        .route("/users", get(list_users).post(create_user))
        .route("/users/:name/roles", post(change_user_roles))
        .route("/users/:name", get(show_user).delete(delete_user))
        .route("/users/:name/suspend", post(suspend_user))
        .route("/users/:name/activate", post(activate_user))
}

/// `GET /users?deleted=true`: deleted accounts too.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UserListQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    deleted: bool,
}

async fn show_user(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(username): Path<String>,
) -> ApiResult {
    let entry = state
        .control
        .identity()
        .user_named(&caller, &username)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::UserAnswer {
            user: user_entry_view(&entry),
        },
    )
}

async fn suspend_user(
    state: State<AppState>,
    caller: Authenticated,
    username: Path<String>,
) -> ApiResult {
    set_status(state, caller, username, StatusCommand::Suspend).await
}

async fn activate_user(
    state: State<AppState>,
    caller: Authenticated,
    username: Path<String>,
) -> ApiResult {
    set_status(state, caller, username, StatusCommand::Activate).await
}

async fn delete_user(
    state: State<AppState>,
    caller: Authenticated,
    username: Path<String>,
) -> ApiResult {
    set_status(state, caller, username, StatusCommand::Delete).await
}

/// Suspends, activates or deletes an account; answers it as it is now.
async fn set_status(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(username): Path<String>,
    command: StatusCommand,
) -> ApiResult {
    let identity = state.control.identity();
    identity
        .set_user_status(&caller, &username, command)
        .await?;
    let entry = identity.user_named(&caller, &username).await?;
    ok(
        StatusCode::OK,
        abode_sdk::UserAnswer {
            user: user_entry_view(&entry),
        },
    )
}

/// The new user's roles: `roles`, or the single `role` of older clients;
/// neither: `member`.
fn new_user_roles(body: &NewUser) -> Result<Roles, ApiError> {
    let names: Vec<&str> = match (&body.roles, &body.role) {
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

/// Role names from a request; an unknown one is a 400 naming it and the
/// valid ones.
fn parse_roles<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Roles, ApiError> {
    Roles::parse_each(names).map_err(|unknown| ApiError::bad_request(unknown.to_string()))
}

/// A password sent in the clear from another machine to a server that
/// serves HTTPS crossed the network readable: refused before it is read
/// (`ClientAddress::may_send_password`), naming where to go instead.
pub(crate) fn refuse_clear_password(
    state: &AppState,
    client: Option<&abode_control::ClientAddress>,
) -> Result<(), ApiError> {
    let config = state.control.config();
    if client.is_some_and(|client| !client.may_send_password(config.tls_served)) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "https_required",
            abode_control::ClientAddress::password_refusal(&config.access_url),
        ));
    }
    Ok(())
}

async fn create_first_user(
    State(state): State<AppState>,
    axum::Extension(request_id): axum::Extension<RequestId>,
    client: Option<axum::Extension<abode_control::ClientAddress>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    refuse_clear_password(
        &state,
        client.as_ref().map(|axum::Extension(client)| client),
    )?;
    let body: NewUser = parse_json(body)?;
    let (user, token) = state
        .control
        .identity()
        .create_first_user(
            &body.username,
            &body.email,
            &body.password,
            Some(request_id.0),
        )
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::LoginResponse {
            user: user_view(&user, &state.control.identity().roles_of(&user.id).await?),
            token,
        },
    )
}

async fn login(
    State(state): State<AppState>,
    axum::Extension(request_id): axum::Extension<RequestId>,
    // The real client (crate::client_address: the socket's peer, or whom a
    // trusted proxy forwards for): the throttle counts failures per client
    // address and the audit log records it.
    client: Option<axum::Extension<abode_control::ClientAddress>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let client = client.map(|axum::Extension(client)| client);
    refuse_clear_password(&state, client.as_ref())?;
    let body: Login = parse_json(body)?;
    let client = client.map(|client| client.ip);
    let (user, token) = state
        .control
        .identity()
        .login_from(&body.username, &body.password, client, Some(request_id.0))
        .await?;
    let roles = state.control.identity().roles_of(&user.id).await?;
    ok(
        StatusCode::OK,
        abode_sdk::LoginResponse {
            user: user_view(&user, &roles),
            token,
        },
    )
}

/// How people sign in here; asked before anyone is signed in (the
/// dashboard's sign-in page, `abode login`).
async fn sign_in_methods(State(state): State<AppState>) -> ApiResult {
    let methods = state.control.identity().sign_in_methods();
    ok(
        StatusCode::OK,
        abode_sdk::SignInMethods {
            password: methods.password,
            oidc: methods.oidc.map(|sign_in_text| abode_sdk::OidcMethod {
                sign_in_text,
                login_path: "/api/v1/oidc/login".into(),
            }),
        },
    )
}

/// The CLI's one-time code (from its single sign-on) traded for a session,
/// answered as a password login is.
async fn oidc_cli_token(
    State(state): State<AppState>,
    axum::Extension(request_id): axum::Extension<RequestId>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::OidcCode = parse_json(body)?;
    let (user, token) = state
        .control
        .identity()
        .oidc_redeem_code(&body.code, Some(request_id.0))
        .await?;
    let roles = state.control.identity().roles_of(&user.id).await?;
    ok(
        StatusCode::OK,
        abode_sdk::LoginResponse {
            user: user_view(&user, &roles),
            token,
        },
    )
}

async fn me(Authenticated(caller): Authenticated) -> ApiResult {
    ok(
        StatusCode::OK,
        abode_sdk::UserAnswer {
            user: user_view(&caller.user, &caller.roles),
        },
    )
}

async fn own_quota(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
) -> ApiResult {
    quota_answer(&state, &caller, None).await
}

async fn quota(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    quota_answer(&state, &caller, Some(&name)).await
}

/// A person's budget and what uses it (a member: only their own).
async fn quota_answer(
    state: &AppState,
    caller: &abode_control::Caller,
    name: Option<&str>,
) -> ApiResult {
    let (user, usage) = state.control.identity().quota(caller, name).await?;
    let (budget, spent) = (usage.budget(), usage.spent());
    ok(
        StatusCode::OK,
        abode_sdk::Quota {
            user: user.username,
            enforced: state.control.config().quota_enforce,
            budget,
            spent,
            remaining: budget.saturating_sub(spent),
            groups: usage
                .allowances
                .into_iter()
                .map(|group| abode_sdk::QuotaGroup {
                    name: group.group,
                    allowance: group.allowance,
                })
                .collect(),
            workspaces: usage
                .workspaces
                .into_iter()
                .map(|workspace| abode_sdk::QuotaWorkspace {
                    name: workspace.workspace_name,
                    build_number: workspace.build_number,
                    daily_cost: workspace.daily_cost,
                    reserved: workspace.reserved,
                })
                .collect(),
        },
    )
}

async fn create_user(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    client: Option<axum::Extension<abode_control::ClientAddress>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    refuse_clear_password(
        &state,
        client.as_ref().map(|axum::Extension(client)| client),
    )?;
    let body: NewUser = parse_json(body)?;
    let roles = new_user_roles(&body)?;
    let user = state
        .control
        .identity()
        .create_user(&caller, &body.username, &body.email, &body.password, &roles)
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::UserAnswer {
            user: user_view(&user, &roles),
        },
    )
}

async fn change_user_roles(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(username): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: RoleChange = parse_json(body)?;
    let add = parse_roles(body.add.iter().map(String::as_str))?;
    let remove = parse_roles(body.remove.iter().map(String::as_str))?;
    let (user, change) = state
        .control
        .identity()
        .change_user_roles(&caller, &username, &add, &remove)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::UserAnswer {
            user: user_view(&user, &change.after),
        },
    )
}

async fn list_users(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<UserListQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let page = state
        .control
        .identity()
        .list_users(&caller, query.after.as_deref(), query.limit, query.deleted)
        .await?;
    let users: Vec<abode_sdk::User> = page.items.iter().map(user_entry_view).collect();
    page_answer("users", users, page.next)
}
