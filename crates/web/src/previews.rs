//! A template version's page: its lint findings and its latest fleet
//! preview (docs/preview.md), with the button that starts a preview and the
//! activation that acknowledges one. It calls the services the API's routes
//! call: `Templates`' `template_version_detail` and
//! `activate_previewed_version`, `Previews`' `report`, `gate` and `start`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use abode_control::authz::{self, Action};
use abode_control::previews::{PreviewEntry, PreviewGate, PreviewReport};
use abode_control::VersionLint;

use crate::admin::PageQuery;
use crate::html::{self, badge, page as whole_page, path_segment, respond, time};
use crate::nav::header;
use crate::report;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// Results per page of a preview's report.
const RESULTS_PER_PAGE: i64 = 100;

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((name, number)): Path<(String, String)>,
    query: Option<Query<PageQuery>>,
) -> Response {
    let Some(number) = version_number(&number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such template version.");
    };
    let after = query.and_then(|Query(query)| query.after);
    render(&state, &viewer, &name, number, after.as_deref(), None).await
}

fn version_number(text: &str) -> Option<i64> {
    text.parse::<i64>().ok().filter(|number| *number > 0)
}

pub(crate) async fn render(
    state: &WebState,
    viewer: &Viewer,
    name: &str,
    number: i64,
    after: Option<&str>,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let control = &state.control;
    let (version, lint) = match control
        .templates()
        .template_version_detail(&viewer.caller, name, number)
        .await
    {
        Ok(detail) => detail,
        Err(error) => return html::control_error(error),
    };
    let subject = viewer.caller.subject();
    let may_preview = authz::authorize(&subject, Action::TemplatePreview, None).is_ok();
    let may_activate = authz::authorize(&subject, Action::TemplateActivate, None).is_ok();
    let gate = match control.previews().gate(&viewer.caller, name, number).await {
        Ok(gate) => gate,
        Err(error) => return html::control_error(error),
    };
    let report = if may_preview {
        match control
            .previews()
            .report(&viewer.caller, name, number, after, Some(RESULTS_PER_PAGE))
            .await
        {
            Ok(report) => report,
            Err(error) => return html::control_error(error),
        }
    } else {
        None
    };
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let base = format!(
        "/templates/{}/versions/{number}",
        path_segment(&version.template_name)
    );
    let body = html! {
        p { a href=(format!("/templates/{}", path_segment(&version.template_name))) { "← Template " (version.template_name) } }
        h1 { "Template " (version.template_name) ", version " (number) }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        dl class="facts" {
            dt { "Active" } dd { @if version.active { strong { "yes" } } @else { "no" } }
            dt { "Pushed by" } dd { (version.created_by) }
            dt { "Pushed" } dd { (time(version.created_at)) }
            dt { "Message" } dd { @if version.message.is_empty() { "—" } @else { (version.message) } }
            dt { "Validation" } dd { @if version.validation_ok { "passed" } @else { (badge("failed")) " " (version.validation_message) } }
        }
        (lint_section(lint.as_ref()))
        h2 { "Fleet preview" }
        p class="muted" {
            "A preview plans this version against the template's workspaces, each with its own state and parameters, and applies nothing."
        }
        @match (&report, &gate) {
            (Some(report), _) => { (preview_section(report, &base)) }
            (None, Some(gate)) => { p { (summary(&gate.preview)) } }
            (None, None) => { p { "This version was never previewed." } }
        }
        @if may_preview && version.validation_ok {
            form method="post" action=(format!("{base}/preview")) {
                input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                button type="submit" { "Preview on every workspace not on version " (number) }
            }
        }
        @if may_activate && !version.active && version.validation_ok {
            h2 id="activate" { "Activate" }
            (activate_form(&viewer.csrf, &base, number, gate.as_ref()))
        }
    };
    respond(
        status,
        whole_page(
            &format!("Template {} version {number}", version.template_name),
            Some(header(viewer)),
            body,
        ),
    )
}

fn lint_section(lint: Option<&VersionLint>) -> Markup {
    html! {
        h2 { "Lint" }
        @match lint {
            None => { p { "Not linted: pushed before the lint existed." } }
            Some(lint) => {
                p { (lint.summary()) }
                @if !lint.report.findings.is_empty() {
                    ul {
                        @for finding in &lint.report.findings {
                            li {
                                span class="mono" { (finding.file) ":" (finding.line) ":" (finding.column) }
                                " " (badge(&finding.severity.to_string())) " "
                                strong { (finding.rule.id()) } " on "
                                span class="mono" { (finding.resource) }
                                @if let Some(attribute) = &finding.attribute { " (" (attribute) ")" }
                                p { "Why: " (finding.message) }
                                p { "Fix: " (finding.fix) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn summary(preview: &abode_store::Preview) -> String {
    let mut text = format!(
        "{} workspace(s): {} would be held, {} blocked, {} allowed, {} failed to plan",
        preview.total, preview.held, preview.blocked, preview.allowed, preview.failed
    );
    if preview.skipped > 0 {
        text.push_str(&format!(", {} skipped", preview.skipped));
    }
    if preview.pending > 0 {
        text.push_str(&format!(
            ", {} still to plan (reload to follow it)",
            preview.pending
        ));
    }
    text
}

fn preview_section(report: &PreviewReport, base: &str) -> Markup {
    let preview = &report.preview;
    html! {
        p role="status" {
            "Latest preview by " (preview.requested_by) ", " (time(preview.created_at)) ": "
            strong { (summary(preview)) }
        }
        @if !report.results.items.is_empty() {
            table {
                thead { tr {
                    th scope="col" { "Workspace" }
                    th scope="col" { "As" }
                    th scope="col" { "A build would be" }
                    th scope="col" { "Create" }
                    th scope="col" { "Update" }
                    th scope="col" { "Replace" }
                    th scope="col" { "Delete" }
                } }
                tbody {
                    @for entry in &report.results.items { (result_row(entry)) }
                }
            }
            @for entry in report.results.items.iter().filter(|entry| needs_reading(entry)) {
                (result_details(entry))
            }
            @if let Some(next) = &report.results.next {
                p { a href=(format!("{base}?after={next}")) { "Next workspaces →" } }
            }
        }
    }
}

/// Held, blocked and failed results are explained below the table.
fn needs_reading(entry: &PreviewEntry) -> bool {
    entry.result.error.is_some()
        || entry
            .decision
            .is_some_and(|decision| decision.as_str() != "allow")
}

fn decision_words(entry: &PreviewEntry) -> String {
    match entry.decision.map(|decision| decision.as_str()) {
        Some("allow") => "allowed".into(),
        Some("confirm") => "held for confirmation".into(),
        Some("block") => "blocked".into(),
        Some(other) => other.into(),
        None => entry.result.status.as_str().into(),
    }
}

fn result_row(entry: &PreviewEntry) -> Markup {
    let result = &entry.result;
    let count = |key: &str| {
        entry
            .report
            .as_ref()
            .and_then(|report| report.pointer(&format!("/summary/{key}")))
            .and_then(serde_json::Value::as_u64)
            .map_or_else(|| "—".to_string(), |count| count.to_string())
    };
    html! {
        tr {
            td { (result.owner_name) "/" (result.workspace_name) }
            td { (result.transition.map_or("—", |transition| transition.as_str())) }
            td { (badge(&decision_words(entry))) }
            td { (count("create")) }
            td { (count("update")) }
            td { (count("replace")) }
            td { (count("delete")) }
        }
    }
}

fn result_details(entry: &PreviewEntry) -> Markup {
    let result = &entry.result;
    let changes = entry
        .report
        .as_ref()
        .and_then(|report| report.get("protected_changes"))
        .and_then(serde_json::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    html! {
        section class="card" {
            h3 { (result.owner_name) "/" (result.workspace_name) ": " (decision_words(entry)) }
            @if let Some(error) = &result.error { p class="error" { (error) } }
            @for change in changes { (report::protected_change(change)) }
            @for link in &entry.lint {
                p {
                    "The lint flagged " span class="mono" { (link.address) } ": "
                    strong { (link.rule) }
                    @if let Some(attribute) = &link.attribute { " (" (attribute) ")" }
                }
            }
        }
    }
}

fn activate_form(csrf: &str, base: &str, number: i64, gate: Option<&PreviewGate>) -> Markup {
    let concern = gate.and_then(|gate| gate.concern.as_ref().map(|concern| (gate, concern)));
    html! {
        form method="post" action=(format!("{base}/activate")) {
            input type="hidden" name=(CSRF_FIELD) value=(csrf);
            @if let Some((gate, concern)) = concern {
                p class="error" { "Version " (number) " cannot reach every workspace safely: " (concern) "." }
                input type="hidden" name="acknowledge_preview" value=(gate.preview.id);
                label for="acknowledge" {
                    input id="acknowledge" name="acknowledged" type="checkbox" value="yes" required;
                    " I have read the preview and activate version " (number) " anyway"
                }
            }
            p { button type="submit" { "Activate version " (number) } }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct ActivateForm {
    #[serde(default)]
    acknowledge_preview: Option<String>,
    #[serde(default)]
    acknowledged: Option<String>,
}

/// Activates a version, acknowledging the preview the page showed only when
/// its box was checked; a refusal is shown on the version's page.
pub(crate) async fn activate(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((name, number)): Path<(String, String)>,
    Form(form): Form<ActivateForm>,
) -> Response {
    let Some(number) = version_number(&number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such template version.");
    };
    let acknowledged = form
        .acknowledge_preview
        .as_deref()
        .filter(|_| form.acknowledged.as_deref() == Some("yes"));
    match state
        .control
        .templates()
        .activate_previewed_version(&viewer.caller, &name, number, acknowledged)
        .await
    {
        Ok(_) => html::see_other(&format!("/templates/{}", path_segment(&name))),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not activated: {}", html::message_of(&error)),
            );
            render(&state, &viewer, &name, number, None, Some(problem)).await
        }
    }
}

/// Starts a preview of every workspace not on the version.
pub(crate) async fn start(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((name, number)): Path<(String, String)>,
) -> Response {
    let Some(number) = version_number(&number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such template version.");
    };
    match state
        .control
        .previews()
        .start(&viewer.caller, &name, number, &[])
        .await
    {
        Ok(_) => html::see_other(&format!(
            "/templates/{}/versions/{number}",
            path_segment(&name)
        )),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not previewed: {}", html::message_of(&error)),
            );
            render(&state, &viewer, &name, number, None, Some(problem)).await
        }
    }
}
