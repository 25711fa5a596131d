//! The retained resources page (issue 32): what workspace deletes kept for
//! the viewer (everyone's with `?all=1`, for those who read every
//! workspace), where each came from, until when it is kept, with a form to
//! keep it longer and the commands that adopt, export or destroy it. The
//! API's `Retained` service (`GET /api/v1/retained`, `POST
//! /api/v1/retained/{id}/extend`): who may see and change what is its
//! answer.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::html;
use serde::Deserialize;

use abode_store::RetainedResource;

use crate::html::{self, page as whole_page, path_segment, respond, time};
use crate::nav::header;
use crate::schedule::parse_duration;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// How many records one page shows.
const PAGE: i64 = 100;

#[derive(Deserialize, Default)]
pub(crate) struct ListQuery {
    #[serde(default)]
    all: Option<String>,
    #[serde(default)]
    closed: Option<String>,
}

pub(crate) async fn list(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<ListQuery>>,
) -> Response {
    let query = query.map(|Query(query)| query).unwrap_or_default();
    let everyone = query.all.is_some();
    let closed = query.closed.is_some();
    render(&state, &viewer, everyone, closed, None).await
}

async fn render(
    state: &WebState,
    viewer: &Viewer,
    everyone: bool,
    closed: bool,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let page = match state
        .control
        .retained()
        .list(&viewer.caller, everyone, closed, None, PAGE)
        .await
    {
        Ok(page) => page,
        Err(error) => return html::control_error(error),
    };
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        h1 { "Retained resources" }
        p class="muted" {
            "What workspace deletes kept instead of destroying (docs/retain.md). "
            "Adopt one into a new workspace with "
            code { "abode create NAME --template T --adopt ID" }
            "; destroy one on purpose with "
            code { "abode retained destroy ID" }
            " (its plan waits for your confirmation)."
        }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        @if page.items.is_empty() {
            p { "No retained resources." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Resource" }
                    th scope="col" { "From" }
                    th scope="col" { "Status" }
                    th scope="col" { "Retained" }
                    th scope="col" { "Kept until" }
                    th scope="col" { "Keep longer" }
                } }
                tbody {
                    @for record in &page.items {
                        (row(record, &viewer.csrf))
                    }
                }
            }
            @if page.next.is_some() {
                p class="muted" { "The oldest " (PAGE) " are shown: " code { "abode retained list" } " lists them all." }
            }
        }
    };
    respond(
        status,
        whole_page("Retained resources", Some(header(viewer)), body),
    )
}

fn row(record: &RetainedResource, csrf: &str) -> maud::Markup {
    html! {
        tr {
            td {
                code { (record.address) }
                br;
                span class="muted" { "id " (record.id) }
            }
            td { (record.owner_name) "/" (record.workspace_name) br; span class="muted" { (record.template_name) " version " (record.template_version) } }
            td { (html::badge(record.status.as_str())) }
            td { (time(record.created_at)) br; span class="muted" { "by " (record.retained_by) } }
            td {
                @match record.expires_at {
                    Some(at) => { (time(at)) br; span class="muted" { "then " (record.expire_action) } }
                    None => { "until someone adopts or destroys it" }
                }
            }
            td {
                @if record.status == abode_store::RetainedStatus::Open {
                    form method="post" action=(format!("/retained/{}/extend", path_segment(&record.id))) {
                        input type="hidden" name=(CSRF_FIELD) value=(csrf);
                        label { "By " input type="text" name="by" value="30d" size="5" aria-label=(format!("Keep {} longer by", record.address)); }
                        " "
                        button type="submit" { "Extend" }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct ExtendForm {
    by: String,
}

/// Keep a record longer (`Retained::extend`).
pub(crate) async fn extend(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(form): Form<ExtendForm>,
) -> Response {
    let result = match parse_duration(&form.by) {
        Ok(Some(ms)) if ms > 0 => state
            .control
            .retained()
            .extend(&viewer.caller, &id, i64::try_from(ms).unwrap_or(i64::MAX))
            .await
            .map(|_| ())
            .map_err(|error| (html::status_of(&error), html::message_of(&error))),
        _ => Err((
            StatusCode::BAD_REQUEST,
            "keep it longer by a duration such as 30d or 12h".to_string(),
        )),
    };
    match result {
        Ok(()) => html::see_other("/retained"),
        Err(problem) => render(&state, &viewer, false, false, Some(problem)).await,
    }
}
