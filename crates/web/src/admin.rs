//! The pages of the platform's people: the audit log (owners and auditors),
//! the users (owners and user admins) with a new user's form and each
//! user's roles (owners) and the prebuild pools. The API's `audit_events`,
//! `list_users`, `create_user`, `change_user_roles` and `prebuild_status`;
//! who may open them and use the forms is the door's answer.

use abode_control::{ControlError, StatusCommand};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use abode_control::authz::{self, Action};
use abode_control::AuditQuery;
use abode_store::{AccountStatus, Role, Roles};

use crate::html::{self, page as whole_page, path_segment, respond, time};
use crate::nav::header;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

fn next_link(path: &str, pairs: &[(&str, String)]) -> String {
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    )
}

#[derive(Deserialize, Default)]
pub(crate) struct AuditFilters {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

pub(crate) async fn audit(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<AuditFilters>>,
) -> Response {
    let filters = query.map(|Query(query)| query).unwrap_or_default();
    let workspace = non_empty(filters.workspace);
    let actor = non_empty(filters.actor);
    let action = non_empty(filters.action);
    let events = match state
        .control
        .audit_log()
        .events(
            &viewer.caller,
            &AuditQuery {
                workspace: workspace.clone(),
                target: None,
                actor: actor.clone(),
                action: action.clone(),
                since: None,
                until: None,
                after: non_empty(filters.after),
                limit: Some(100),
            },
        )
        .await
    {
        Ok(events) => events,
        Err(error) => return html::control_error(error),
    };
    let next = events.next.as_ref().map(|next| {
        let mut pairs = vec![("after", next.clone())];
        for (key, value) in [
            ("workspace", &workspace),
            ("actor", &actor),
            ("action", &action),
        ] {
            if let Some(value) = value {
                pairs.push((key, value.clone()));
            }
        }
        next_link("/audit", &pairs)
    });
    let body = html! {
        h1 { "Audit log" }
        form class="filters" method="get" action="/audit" role="search" aria-label="Filter the audit log" {
            div { label for="audit-workspace" { "Workspace (owner/name)" }
                  input id="audit-workspace" name="workspace" type="text" value=(workspace.as_deref().unwrap_or("")); }
            div { label for="audit-actor" { "Actor" }
                  input id="audit-actor" name="actor" type="text" value=(actor.as_deref().unwrap_or("")); }
            div { label for="audit-action" { "Action" }
                  input id="audit-action" name="action" type="text" value=(action.as_deref().unwrap_or("")); }
            div { button type="submit" { "Filter" } }
        }
        table {
            thead { tr {
                th scope="col" { "Time" }
                th scope="col" { "Actor" }
                th scope="col" { "Action" }
                th scope="col" { "Target" }
                th scope="col" { "Outcome" }
                th scope="col" { "Details" }
            } }
            tbody {
                @for event in &events.items {
                    tr {
                        td { (time(event.time)) }
                        td { (event.actor_name.as_deref().unwrap_or("—")) }
                        td class="mono" { (event.action) }
                        td { (event.target_type) " " span class="mono" { (event.target) } }
                        td { (event.outcome) }
                        td { (event.details.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
        @if let Some(next) = next {
            p { a rel="next" href=(next) { "Older events" } }
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Audit log", Some(header(&viewer)), body),
    )
}

/// The cursor of a paged list (`?after=`).
#[derive(Deserialize, Default)]
pub(crate) struct PageQuery {
    #[serde(default)]
    pub(crate) after: Option<String>,
}

pub(crate) async fn users(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<PageQuery>>,
) -> Response {
    let after = query.and_then(|Query(query)| non_empty(query.after));
    render_users(&state, &viewer, after, None).await
}

/// The users page, with the door's refusal of a new user if any.
async fn render_users(
    state: &WebState,
    viewer: &Viewer,
    after: Option<String>,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let users = match state
        .control
        .identity()
        .list_users(&viewer.caller, after.as_deref(), Some(100), false)
        .await
        .map_err(ControlError::from)
    {
        Ok(users) => users,
        Err(error) => return html::control_error(error),
    };
    let may_create = authz::authorize(&viewer.caller.subject(), Action::UserCreate, None).is_ok();
    let may_change_roles =
        authz::authorize(&viewer.caller.subject(), Action::UserChangeRoles, None).is_ok();
    let may_change_status =
        authz::authorize(&viewer.caller.subject(), Action::UserChangeStatus, None).is_ok();
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        h1 { "Users" }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        table {
            thead { tr {
                th scope="col" { "Username" }
                th scope="col" { "Email" }
                th scope="col" { "Roles" }
                th scope="col" { "Status" }
                th scope="col" { "Created" }
            } }
            tbody {
                @for entry in &users.items {
                    @let (user, roles) = (&entry.user, &entry.roles);
                    tr {
                        td { (user.username) }
                        td { (user.email) }
                        td {
                            @if may_change_roles && !user.system {
                                (roles_form(&user.username, roles, &viewer.csrf))
                            } @else {
                                (roles.iter().map(|role| role.as_str()).collect::<Vec<_>>().join(", "))
                            }
                        }
                        td {
                            (user.status.as_str())
                            @if may_change_status && !user.system && user.id != viewer.caller.user.id {
                                (status_form(&user.username, user.status, &viewer.csrf))
                            }
                        }
                        td { (time(user.created_at)) }
                    }
                }
            }
        }
        @if let Some(next) = &users.next {
            p { a rel="next" href=(next_link("/users", &[("after", next.clone())])) { "Next page" } }
        }
        @if may_create {
            h2 { "New user" }
            form class="card" method="post" action="/users" {
                input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                label for="new-username" { "Username" }
                input id="new-username" name="username" type="text" required autocomplete="off";
                label for="new-email" { "Email" }
                input id="new-email" name="email" type="email" required autocomplete="off";
                label for="new-password" { "Initial password" }
                input id="new-password" name="password" type="password" required autocomplete="new-password";
                fieldset {
                    legend { "Roles" }
                    @for role in Role::ALL {
                        label for=(format!("role-{}", role.as_str())) {
                            input id=(format!("role-{}", role.as_str())) name="role" type="checkbox"
                                value=(role.as_str()) checked[role == Role::Member];
                            " " (role.as_str())
                        }
                    }
                }
                p { button class="primary" type="submit" { "Create the user" } }
            }
        }
    };
    respond(status, whole_page("Users", Some(header(viewer)), body))
}

/// Suspend (an active or dormant person) or activate (a suspended one), as
/// `POST /api/v1/users/{name}/suspend|activate`.
fn status_form(username: &str, status: AccountStatus, csrf: &str) -> Markup {
    let (verb, label) = match status {
        AccountStatus::Suspended => ("activate", "Activate"),
        AccountStatus::Deleted => return html! {},
        AccountStatus::Active | AccountStatus::Dormant => ("suspend", "Suspend"),
    };
    html! {
        form class="status" method="post" action=(format!("/users/{}/{verb}", path_segment(username))) {
            input type="hidden" name=(CSRF_FIELD) value=(csrf);
            button type="submit" aria-label=(format!("{label} {username}")) { (label) }
        }
    }
}

pub(crate) async fn suspend_user(
    state: State<WebState>,
    viewer: Viewer,
    username: Path<String>,
) -> Response {
    change_status(state, viewer, username, StatusCommand::Suspend).await
}

pub(crate) async fn activate_user(
    state: State<WebState>,
    viewer: Viewer,
    username: Path<String>,
) -> Response {
    change_status(state, viewer, username, StatusCommand::Activate).await
}

/// `Identity::set_user_status`, then the users page (with the refusal if
/// any).
async fn change_status(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(username): Path<String>,
    command: StatusCommand,
) -> Response {
    match state
        .control
        .identity()
        .set_user_status(&viewer.caller, &username, command)
        .await
        .map_err(ControlError::from)
    {
        Ok(_) => html::see_other("/users"),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("{username} not changed: {}", html::message_of(&error)),
            );
            render_users(&state, &viewer, None, Some(problem)).await
        }
    }
}

/// A user's roles as a form: one box per role, the set checked is the set
/// they will hold (`Identity::change_user_roles`, as
/// `POST /api/v1/users/{name}/roles`).
fn roles_form(username: &str, roles: &Roles, csrf: &str) -> Markup {
    let slug = username_slug(username);
    html! {
        form class="roles" method="post" action=(format!("/users/{}/roles", path_segment(username))) {
            input type="hidden" name=(CSRF_FIELD) value=(csrf);
            fieldset {
                legend class="skip" { "Roles of " (username) }
                @for role in Role::ALL {
                    @let id = format!("roles-{slug}-{}", role.as_str());
                    label for=(id) {
                        input id=(id) name="role" type="checkbox" value=(role.as_str()) checked[roles.contains(role)];
                        " " (role.as_str())
                    }
                }
            }
            button type="submit" aria-label=(format!("Save the roles of {username}")) { "Save roles" }
        }
    }
}

/// A username as an id fragment: letters, digits and dashes kept, anything
/// else as its code, so two names never share ids.
fn username_slug(username: &str) -> String {
    username
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_string()
            } else {
                format!("_{:x}", u32::from(c))
            }
        })
        .collect()
}

/// What the roles form asks: the boxes checked are added, every other role
/// removed (adding wins in the store, so the two never fight).
fn role_change(checked: &Roles) -> (Roles, Roles) {
    let remove = Role::ALL
        .into_iter()
        .filter(|role| !checked.contains(*role))
        .collect();
    (checked.clone(), remove)
}

pub(crate) async fn change_roles(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(username): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let checked = Roles::parse_each(
        fields
            .iter()
            .filter(|(key, _)| key == "role")
            .map(|(_, value)| value.as_str()),
    );
    let problem = match checked {
        Err(unknown) => Some((
            StatusCode::BAD_REQUEST,
            format!("Roles of {username} not changed: {unknown}"),
        )),
        Ok(checked) => {
            let (add, remove) = role_change(&checked);
            match state
                .control
                .identity()
                .change_user_roles(&viewer.caller, &username, &add, &remove)
                .await
                .map_err(ControlError::from)
            {
                Ok(_) => None,
                Err(error) => Some((
                    html::status_of(&error),
                    format!(
                        "Roles of {username} not changed: {}",
                        html::message_of(&error)
                    ),
                )),
            }
        }
    };
    match problem {
        None => html::see_other("/users"),
        Some(problem) => render_users(&state, &viewer, None, Some(problem)).await,
    }
}

/// A new user (`Identity::create_user`, as `POST /api/v1/users`): the door
/// decides who may create whom with which roles.
pub(crate) async fn create_user(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let field = |name: &str| -> &str {
        fields
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.as_str())
    };
    let refused = |error: String| (StatusCode::BAD_REQUEST, format!("Not created: {error}"));
    let roles = match Roles::parse_each(
        fields
            .iter()
            .filter(|(key, _)| key == "role")
            .map(|(_, value)| value.as_str()),
    ) {
        Ok(roles) => roles,
        Err(unknown) => {
            return render_users(&state, &viewer, None, Some(refused(unknown.to_string()))).await
        }
    };
    match state
        .control
        .identity()
        .create_user(
            &viewer.caller,
            field("username").trim(),
            field("email").trim(),
            field("password"),
            &roles,
        )
        .await
        .map_err(ControlError::from)
    {
        Ok(_) => html::see_other("/users"),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not created: {}", html::message_of(&error)),
            );
            render_users(&state, &viewer, None, Some(problem)).await
        }
    }
}

pub(crate) async fn prebuilds(State(state): State<WebState>, viewer: Viewer) -> Response {
    let pools = match state.control.prebuilds().status(&viewer.caller, None).await {
        Ok(pools) => pools,
        Err(error) => return html::control_error(error),
    };
    let body = html! {
        h1 { "Prebuild pools" }
        @if pools.is_empty() {
            p { "No preset of an active template version asks for prebuilt workspaces." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Template" }
                    th scope="col" { "Preset" }
                    th scope="col" { "Desired" }
                    th scope="col" { "Ready" }
                    th scope="col" { "Running" }
                    th scope="col" { "In progress" }
                    th scope="col" { "Failed" }
                    th scope="col" { "State" }
                } }
                tbody {
                    @for pool in &pools {
                        tr {
                            td { a href=(format!("/templates/{}", pool.template)) { (pool.template) } }
                            td { (pool.preset) }
                            td { (pool.desired) }
                            td { (pool.ready) }
                            td { (pool.running) }
                            td { (pool.in_progress) }
                            td { (pool.failed) }
                            td {
                                @if pool.paused { "paused" }
                                @else if pool.hard_limited { span class="badge bad" { "stopped after repeated failures" } }
                                @else if let Some(until) = pool.backing_off_until { "backing off until " (time(until)) }
                                @else if pool.quota_limited { span class="badge bad" { "held back by the prebuilds budget" } }
                                @else { "reconciling" }
                                @if let Some(problem) = &pool.problem { br; span class="muted" { (problem) } }
                            }
                        }
                    }
                }
            }
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Prebuild pools", Some(header(&viewer)), body),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_roles_are_the_roles_held() {
        let cases: [&[Role]; 3] = [&[Role::Member], &[Role::Owner, Role::Member], &[]];
        for checked in cases {
            let checked: Roles = checked.iter().copied().collect();
            let (add, remove) = role_change(&checked);
            let after = Roles::new().changed(&add, &remove);
            assert_eq!(after, checked);
            let everything: Roles = Role::ALL.into_iter().collect();
            assert_eq!(everything.changed(&add, &remove), checked);
        }
    }

    #[test]
    fn the_roles_form_is_labelled_and_escaped() {
        let roles: Roles = [Role::Member].into();
        let form = roles_form("<b>o'k</b>", &roles, "tok").into_string();
        assert!(!form.contains("<b>"), "{form}");
        assert!(form.contains("Roles of &lt;b&gt;o'k&lt;/b&gt;"), "{form}");
        assert!(
            form.contains("action=\"/users/%3Cb%3Eo%27k%3C%2Fb%3E/roles\""),
            "{form}"
        );
        assert!(form.contains("name=\"csrf\" value=\"tok\""), "{form}");
        for role in Role::ALL {
            let id = format!("roles-_3cb_3eo_27k_3c_2fb_3e-{}", role.as_str());
            assert!(
                form.contains(&format!("label for=\"{id}\"")),
                "{id}: {form}"
            );
            assert!(form.contains(&format!("id=\"{id}\"")), "{id}: {form}");
        }
        assert!(form.contains("value=\"member\" checked"), "{form}");
        assert!(!form.contains("value=\"owner\" checked"), "{form}");
    }
}
