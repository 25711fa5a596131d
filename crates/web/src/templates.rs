//! Templates: the list, and a template's versions with the active one and
//! each version's validation, and its lifecycle policy (`policy.rs`);
//! template admins activate a version. The API's `list_templates`,
//! `read_template`, `template_versions` and `activate_template_version`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::html;
use serde::Deserialize;

use abode_control::authz::{self, Action};

use crate::html::{self, page as whole_page, respond, time};
use crate::nav::header;
use crate::policy;
use crate::session::Viewer;
use crate::state::WebState;

use crate::admin::PageQuery;

pub(crate) async fn list(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<PageQuery>>,
) -> Response {
    let after = query.and_then(|Query(query)| query.after);
    let templates = match state
        .control
        .templates()
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
                            td {
                                a href=(format!("/templates/{}", template.name)) { (template.name) }
                                @if let Some(message) = &template.deprecation_message {
                                    " " span class="badge" title=(abode_sdk::deprecation::notice(message, template.deprecation_replacement.as_deref())) { "deprecated" }
                                }
                            }
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
        @if authz::authorize(&viewer.caller.subject(), Action::TemplatePush, None).is_ok() {
            h2 { "New template" }
            (upload_form(&viewer.csrf, None))
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Templates", Some(header(&viewer)), body),
    )
}

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(name): Path<String>,
) -> Response {
    render(&state, &viewer, &name, None).await
}

pub(crate) async fn render(
    state: &WebState,
    viewer: &Viewer,
    name: &str,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let control = &state.control;
    let template = match control
        .templates()
        .read_template(&viewer.caller, name)
        .await
    {
        Ok(template) => template,
        Err(error) => return html::control_error(error),
    };
    let mut versions = match control
        .templates()
        .template_versions(&viewer.caller, name)
        .await
    {
        Ok(versions) => versions,
        Err(error) => return html::control_error(error),
    };
    versions.sort_by_key(|version| std::cmp::Reverse(version.number));
    let may_activate =
        authz::authorize(&viewer.caller.subject(), Action::TemplateActivate, None).is_ok();
    let may_push = authz::authorize(&viewer.caller.subject(), Action::TemplatePush, None).is_ok();
    let may_edit_policy =
        authz::authorize(&viewer.caller.subject(), Action::TemplatePolicyEdit, None).is_ok();
    let policy = control
        .schedule_settings()
        .policy(&viewer.caller, name)
        .await
        .ok();
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
                        td { a href=(format!("/templates/{}/versions/{}", html::path_segment(&template.name), version.number)) { "Version " (version.number) } }
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
                                // Activation reads the version's preview first: on its page.
                                a href=(format!("/templates/{}/versions/{}#activate", html::path_segment(&template.name), version.number)) { "Review and activate version " (version.number) }
                            } }
                        }
                    }
                }
            }
        }
        @if let Some(policy) = &policy {
            h2 { "Lifecycle policy" }
            (policy::section(policy, &viewer.csrf, may_edit_policy))
        }
        @if may_push {
            h2 { "Push a new version" }
            (upload_form(&viewer.csrf, Some(&template.name)))
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

/// Largest template archive the dashboard accepts (the API's limit).
const MAX_ARCHIVE_BYTES: usize = 32 * 1024 * 1024;

/// The form that pushes a version: the page's script sends the archive as
/// the request body (`upload`), with the form's token in a header. For a new
/// template, the name is a field of the form.
fn upload_form(csrf: &str, template: Option<&str>) -> maud::Markup {
    html! {
        form class="upload" data-upload data-csrf=(csrf) data-template=(template.unwrap_or("")) {
            @if template.is_none() {
                label for="upload-name" { "Template name" }
                input id="upload-name" name="template" type="text" required pattern="[a-z0-9][a-z0-9-]{0,63}";
            }
            label for="upload-archive" { "The template's folder as a .tar.gz archive" }
            input id="upload-archive" name="archive" type="file" accept=".tar.gz,.tgz,application/gzip" required
                aria-describedby="upload-help";
            p id="upload-help" class="muted" { "For example " code { "tar czf template.tar.gz -C my-template ." } }
            label for="upload-message" { "Message (optional)" }
            input id="upload-message" name="message" type="text";
            label for="upload-activate" { input id="upload-activate" name="activate" type="checkbox"; " Make it the active version" }
            p { button class="primary" type="submit" { "Push the new version" } }
            p data-upload-status role="status" aria-live="polite" {}
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct UploadQuery {
    #[serde(default)]
    activate: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Pushes a version from an uploaded archive (`Templates::push_template`, as
/// `POST /api/v1/templates/{name}/versions`); the archive is read only once
/// the door has said the caller may push.
pub(crate) async fn upload(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(name): Path<String>,
    Query(query): Query<UploadQuery>,
    body: axum::body::Body,
) -> Response {
    let message = query.message.unwrap_or_default();
    let control = &state.control;
    if let Err(error) = control
        .templates()
        .may_push_template(&viewer.caller, &name, &message)
        .await
    {
        return html::control_error(error);
    }
    let Ok(archive) = axum::body::to_bytes(body, MAX_ARCHIVE_BYTES).await else {
        return html::error_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "The archive is over the limit of 32 MiB.",
        );
    };
    if archive.is_empty() {
        return html::error_page(
            StatusCode::BAD_REQUEST,
            "Choose the template folder's .tar.gz archive.",
        );
    }
    let activate = query.activate.as_deref() == Some("on");
    match control
        .templates()
        .push_template(&viewer.caller, &name, archive.to_vec(), activate, &message)
        .await
    {
        Ok((template, _)) => html::see_other(&format!("/templates/{}", template.name)),
        Err(error) => html::control_error(error),
    }
}

/// The policy section's form (`policy.rs`): the page's policy anchor on
/// success, else the page with the door's refusal above it.
pub(crate) async fn save_policy(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(name): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    match policy::save(&state, &viewer, &name, &fields).await {
        Ok(()) => html::see_other(&format!("/templates/{}#policy", html::path_segment(&name))),
        Err((status, message)) => {
            let problem = (status, format!("Policy not saved: {message}"));
            render(&state, &viewer, &name, Some(problem)).await
        }
    }
}
