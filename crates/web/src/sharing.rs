//! The workspace page's sharing panel (issue 49): who else may use the
//! workspace, with a form to share it with a user or a group and a button
//! per entry to stop; shown to whoever may manage it (its owner, owners,
//! template admins). The door (`Workspaces::share`) decides and audits.

use axum::extract::{Path, State};
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use abode_control::{PermissionSubject, Sharing};
use abode_store::ShareRole;

use crate::html;
use crate::nav::workspace_url;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// The panel, when the viewer may manage the workspace's sharing.
pub(crate) fn section(sharing: &Sharing, url: &str, csrf: &str) -> Markup {
    let action = format!("{url}/sharing");
    html! {
        h2 id="sharing" { "Sharing" }
        p class="muted" {
            "“use” connects (SSH, port forwards, the terminal, owner apps); “admin” also starts, stops, restarts and updates it."
        }
        @if sharing.entries.is_empty() {
            p class="muted" { "Shared with nobody." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Kind" }
                    th scope="col" { "Name" }
                    th scope="col" { "Role" }
                    th scope="col" { "Stop sharing" }
                } }
                tbody {
                    @for entry in &sharing.entries {
                        tr {
                            td { (entry.kind) }
                            td { (entry.name) }
                            td { (entry.role.as_str()) }
                            td {
                                form method="post" action=(action) {
                                    input type="hidden" name=(CSRF_FIELD) value=(csrf);
                                    input type="hidden" name="kind" value=(entry.kind);
                                    input type="hidden" name="name" value=(entry.name);
                                    input type="hidden" name="role" value="none";
                                    button type="submit" { "Stop sharing with " (entry.name) }
                                }
                            }
                        }
                    }
                }
            }
        }
        form method="post" action=(action) {
            input type="hidden" name=(CSRF_FIELD) value=(csrf);
            label for="share-kind" { "Share with" }
            " "
            select id="share-kind" name="kind" {
                option value="user" { "user" }
                option value="group" { "group" }
            }
            " "
            label for="share-name" { "Name" }
            input id="share-name" name="name" type="text" autocomplete="off" required;
            " "
            label for="share-role" { "Role" }
            select id="share-role" name="role" {
                option value="use" { "use" }
                option value="admin" { "admin" }
            }
            " "
            button type="submit" { "Share" }
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ShareForm {
    kind: String,
    name: String,
    role: String,
}

/// The panel's forms: one entry set (`use`, `admin`) or removed (`none`).
pub(crate) async fn change(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    Form(form): Form<ShareForm>,
) -> Response {
    let whom = match form.kind.as_str() {
        "group" => PermissionSubject::Group(form.name.trim().to_string()),
        _ => PermissionSubject::User(form.name.trim().to_string()),
    };
    let role = match form.role.as_str() {
        "none" => None,
        "admin" => Some(ShareRole::Admin),
        _ => Some(ShareRole::Use),
    };
    let reference = format!("{owner}/{name}");
    match state
        .control
        .workspaces()
        .share(&viewer.caller, &reference, &whom, role)
        .await
    {
        Ok(_) => html::see_other(&format!("{}#sharing", workspace_url(&owner, &name))),
        Err(error) => html::control_error(error),
    }
}
