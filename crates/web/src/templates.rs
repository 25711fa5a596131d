//! Templates: the list, and a template's versions with the active one and
//! each version's validation; template admins activate a version. The
//! API's `list_templates`, `read_template`, `template_versions` and
//! `activate_template_version`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use abode_control::authz::{self, Action};

use crate::html::{self, page as whole_page, respond, time};
use crate::session::{Viewer, CSRF_FIELD};
use crate::workspaces::header;
use crate::WebState;

#[derive(Deserialize, Default)]
pub(crate) struct PageQuery {
    #[serde(default)]
    after: Option<String>,
}

pub(crate) async fn list(
    State(state): State<WebState>,
    viewer: Result<Viewer, Response>,
    query: Option<Query<PageQuery>>,
) -> Response {
    let viewer = match viewer {
        Ok(viewer) => viewer,
        Err(sign_in) => return sign_in,
    };
    let after = query.and_then(|Query(query)| query.after);
    let templates = match state
        .control
        .list_templates(&viewer.caller, after.as_deref(), Some(50))
        .await
    {
        Ok(templates) => templates,
        Err(error) => return html::control_error(error),
    };
    let body = html! {
        h1 { "Templates" }
        @if templates.items.is_empty() {
            p { "No template yet. Push one with " code { "abode templates push NAME --directory DIR" } "." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Active version" }
                    th scope="col" { "Updated" }
                } }
                tbody {
                    @for template in &templates.items {
                        tr {
                            td { a href=(format!("/templates/{}", template.name)) { (template.name) } }
                            td { @match template.active_version {
                                Some(number) => { "version " (number) }
                                None => { "none active" }
                            } }
                            td { (time(template.updated_at)) }
                        }
                    }
                }
            }
        }
        @if let Some(next) = &templates.next {
            p { a rel="next" href=(format!("/templates?{}", serde_urlencoded::to_string([("after", next)]).unwrap_or_default())) { "Next page" } }
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Templates", Some(header(&viewer)), body),
    )
}

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Result<Viewer, Response>,
    Path(name): Path<String>,
) -> Response {
    let viewer = match viewer {
        Ok(viewer) => viewer,
        Err(sign_in) => return sign_in,
    };
    render(&state, &viewer, &name, None).await
}

async fn render(
    state: &WebState,
    viewer: &Viewer,
    name: &str,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let control = &state.control;
    let template = match control.read_template(&viewer.caller, name).await {
        Ok(template) => template,
        Err(error) => return html::control_error(error),
    };
    let mut versions = match control.template_versions(&viewer.caller, name).await {
        Ok(versions) => versions,
        Err(error) => return html::control_error(error),
    };
    versions.sort_by_key(|version| std::cmp::Reverse(version.number));
    let may_activate =
        authz::authorize(&viewer.caller.subject(), Action::TemplateActivate, None).is_ok();
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        p { a href="/templates" { "← Templates" } }
        h1 { "Template " (template.name) }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        p { "Active version: " @match template.active_version {
            Some(number) => { strong { (number) } }
            None => { "none" }
        } }
        h2 { "Versions" }
        table {
            thead { tr {
                th scope="col" { "Version" }
                th scope="col" { "Active" }
                th scope="col" { "Message" }
                th scope="col" { "Pushed by" }
                th scope="col" { "Pushed" }
                th scope="col" { "Validation" }
                @if may_activate { th scope="col" { span class="muted" { "Action" } } }
            } }
            tbody {
                @for version in &versions {
                    tr {
                        td { (version.number) }
                        td { @if version.active { strong { "active" } } @else { "—" } }
                        td { (version.message) }
                        td { (version.created_by) }
                        td { (time(version.created_at)) }
                        td {
                            @if version.validation_ok { "passed" } @else { span class="badge bad" { "failed" } }
                            @if !version.validation_ok && !version.validation_message.is_empty() {
                                pre class="log" { (version.validation_message) }
                            }
                        }
                        @if may_activate {
                            td { @if !version.active && version.validation_ok {
                                form method="post" action=(format!("/templates/{}/versions/{}/activate", template.name, version.number)) {
                                    input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                                    button type="submit" { "Activate version " (version.number) }
                                }
                            } }
                        }
                    }
                }
            }
        }
    };
    respond(
        status,
        whole_page(
            &format!("Template {}", template.name),
            Some(header(viewer)),
            body,
        ),
    )
}

pub(crate) async fn activate(
    State(state): State<WebState>,
    viewer: Result<Viewer, Response>,
    Path((name, number)): Path<(String, String)>,
) -> Response {
    let viewer = match viewer {
        Ok(viewer) => viewer,
        Err(sign_in) => return sign_in,
    };
    let Some(number) = number.parse::<i64>().ok().filter(|number| *number > 0) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such template version.");
    };
    match state
        .control
        .activate_template_version(&viewer.caller, &name, number)
        .await
    {
        Ok(_) => html::see_other(&format!("/templates/{name}")),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not activated: {}", html::message_of(&error)),
            );
            render(&state, &viewer, &name, Some(problem)).await
        }
    }
}
