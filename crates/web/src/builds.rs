//! A build's page (the held build's review above all, then its timeline:
//! `timeline.rs`), its live log as
//! server-sent events, and the confirmation or cancel of a held build: the
//! API's `build`, `build_logs`, `confirm_build` and `cancel_build`.
//!
//! Confirm posts the plan digest the page was rendered with: if the plan
//! changed since (canceled, expired, re-planned), the door refuses it and
//! the page says so.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Form;
use futures_util::stream::{self, Stream};
use maud::{html, Markup};
use serde::Deserialize;

use abode_control::{Caller, Control};
use abode_store::{Build, BuildReason, BuildStatus, SystemActor};

use crate::html::{self, badge, page as whole_page, respond, time, words};
use crate::nav::{build_url, header, workspace_url};
use crate::report;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// How many lines of a settled build's log a page shows (one page of the
/// log, as the API reads it).
const SHOWN_LINES: usize = 1000;

/// How long one wait for new log lines lasts before the stream asks again.
const LOG_WAIT: Duration = Duration::from_secs(20);
/// How long one event stream lasts: the browser reconnects on its own and
/// resumes after the last line it has (`Last-Event-ID`), so a stream never
/// holds a server's graceful shutdown longer than an API long-poll would.
const STREAM_LIFETIME: Duration = Duration::from_secs(30);
/// How soon the browser reconnects after a stream ends.
const RECONNECT: Duration = Duration::from_secs(1);

/// Whether a build's log can still grow (a held build writes nothing until
/// someone confirms it).
fn settled(build: &Build) -> bool {
    build.status.is_at_rest()
}

fn log_lines(lines: &[abode_store::LogLine]) -> Markup {
    html! {
        @for line in lines {
            div { span class="stage" { "[" (line.stage) "] " } (line.text) }
        }
    }
}

/// A build's log: written out when the build has settled, else followed
/// live by the page's script from the events route.
pub(crate) async fn log_panel(
    control: &Control,
    caller: &Caller,
    reference: &str,
    build: &Build,
) -> Markup {
    let summary = html! {
        // Announced as it changes; the lines themselves are not (too many).
        p aria-live="polite" {
            "Build #" (build.number) " (" (build.transition.as_str()) "): "
            strong data-status { (words(build.status.as_str())) }
            " · stage: " span data-stage { "—" }
            " · " a href=(build_url(build)) { "build page" }
        }
    };
    if settled(build) {
        let lines = control
            .workspace_builds()
            .build_logs(caller, reference, Some(build.number), 0, Duration::ZERO)
            .await
            .map(|page| page.lines)
            .unwrap_or_default();
        let stage = lines.last().map(|line| line.stage.clone());
        return html! {
            div class="build-log" {
                p {
                    "Build #" (build.number) " (" (build.transition.as_str()) "): "
                    strong data-status { (words(build.status.as_str())) }
                    @if let Some(stage) = stage { " · last stage: " span data-stage { (stage) } }
                    " · " a href=(build_url(build)) { "build page" }
                }
                @if let Some(error) = &build.error {
                    p class="error" { (error) }
                }
                pre class="log" aria-label="Build log" tabindex="0" { (log_lines(&lines)) }
                @if lines.len() >= SHOWN_LINES {
                    p class="muted" { "The first " (SHOWN_LINES) " lines; " code { "abode builds logs" } " prints all of them." }
                }
            }
        };
    }
    html! {
        div class="build-log" data-stream=(format!("{}/events", build_url(build))) {
            (summary)
            pre class="log" aria-label="Build log (live)" tabindex="0" {}
        }
    }
}

fn parse_number(raw: &str) -> Option<i64> {
    raw.parse::<i64>().ok().filter(|number| *number > 0)
}

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name, number)): Path<(String, String, String)>,
) -> Response {
    render(&state, &viewer, &owner, &name, &number, None).await
}

/// The build page, with `problem` (a refused confirmation) said on top.
async fn render(
    state: &WebState,
    viewer: &Viewer,
    owner: &str,
    name: &str,
    number: &str,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let Some(number) = parse_number(number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such build.");
    };
    let reference = format!("{owner}/{name}");
    let control = &state.control;
    let build = match control
        .workspace_builds()
        .build(&viewer.caller, &reference, Some(number))
        .await
    {
        Ok(build) => build,
        Err(error) => return html::control_error(error),
    };
    // The page shows a report as JSON values, as it shows a preview's.
    let report = match build
        .guard_report
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
    {
        Ok(report) => report,
        Err(error) => {
            return html::error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("The build's guard report cannot be shown: {error}"),
            )
        }
    };
    // The version's message says what changed (a template admin's words).
    let version_message = control
        .templates()
        .template_versions(
            &viewer.caller,
            &build_template(control, &viewer.caller, &reference).await,
        )
        .await
        .ok()
        .and_then(|versions| {
            versions
                .into_iter()
                .find(|version| version.number == build.template_version)
                .map(|version| version.message)
        })
        .filter(|message| !message.is_empty());
    let held = build.status == BuildStatus::AwaitingConfirmation;
    let decision = report.as_ref().and_then(report::decision);
    let blocked = decision == Some("block");
    let confirmable = held && decision == Some("confirm");
    let started_by = if SystemActor::by_user_id(&build.initiator_id).is_some() {
        format!("{} (the system)", build.initiator_name)
    } else {
        build.initiator_name.clone()
    };
    let timings = control
        .workspace_builds()
        .build_timings(&viewer.caller, &reference, Some(number))
        .await
        .map(|(_, timings)| timings)
        .unwrap_or_default();
    let log = log_panel(control, &viewer.caller, &reference, &build).await;
    let url = build_url(&build);
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        p { a href=(workspace_url(owner, name)) { "← Workspace " (name) } }
        h1 { "Build #" (build.number) " of " (build.workspace_name) }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        dl class="facts" {
            dt { "Status" } dd { (badge(build.status.as_str())) }
            dt { "Transition" } dd { (build.transition.as_str()) }
            dt { "Template version" } dd {
                (build.template_version)
                @if let Some(message) = &version_message { ": " span class="version-message" { (message) } }
            }
            dt { "Started by" } dd {
                (started_by)
                // `initiator`: the person asked; any other reason is the system's.
                @if build.reason != BuildReason::Initiator { " (reason: " (words(build.reason.as_str())) ")" }
            }
            dt { "Created" } dd { (time(build.created_at)) }
            @if let Some(expires) = build.expires_at.filter(|_| held) {
                dt { "Expires" } dd { (time(expires)) " (canceled if nobody confirms it by then)" }
            }
            @if let Some(by) = &build.confirmed_by {
                dt { "Confirmed by" } dd { (by) @if let Some(at) = build.confirmed_at { " at " (time(at)) } }
            }
        }
        @if blocked {
            p class="error" role="status" {
                "This build was blocked by the plan guard: a rule forbids what its plan does to a protected resource, so it can never be confirmed. "
                "Change the template, or release the protection, then start again."
            }
        } @else if confirmable {
            p class="notice" role="status" {
                "This build is held: its plan would destroy or replace a protected resource. "
                "Confirm applies exactly the plan shown below; if it changed since this page was shown, the confirmation is refused."
            }
        }
        @if let Some(report) = &report {
            (report::render(report))
        } @else {
            p class="muted" { "No guard report: this build never reached the plan guard." }
        }
        @if held {
            div class="actions" {
                @if confirmable {
                    form method="post" action=(format!("{url}/confirm")) {
                        input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                        input type="hidden" name="digest" value=(build.plan_digest.as_deref().unwrap_or(""));
                        button class="primary" type="submit" { "Confirm this plan" }
                    }
                }
                form method="post" action=(format!("{url}/cancel")) {
                    input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                    button type="submit" { "Cancel the build" }
                }
            }
        }
        h2 { "Timeline" }
        (crate::timeline::render(&timings))
        h2 { "Log" }
        (log)
    };
    respond(
        status,
        whole_page(
            &format!("Build #{} of {}", build.number, build.workspace_name),
            Some(header(viewer)),
            body,
        ),
    )
}

/// The template of the workspace (for its versions' messages); empty when
/// it cannot be read, which then shows no message.
async fn build_template(control: &Control, caller: &Caller, reference: &str) -> String {
    control
        .workspaces()
        .get(caller, reference)
        .await
        .map(|view| view.workspace.template_name)
        .unwrap_or_default()
}

#[derive(Deserialize)]
pub(crate) struct ConfirmForm {
    #[serde(default)]
    digest: String,
}

pub(crate) async fn confirm(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name, number)): Path<(String, String, String)>,
    Form(form): Form<ConfirmForm>,
) -> Response {
    let Some(build_number) = parse_number(&number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such build.");
    };
    let reference = format!("{owner}/{name}");
    match state
        .control
        .workspace_builds()
        .confirm_build(&viewer.caller, &reference, Some(build_number), &form.digest)
        .await
    {
        Ok(_) => html::see_other(&workspace_url(&owner, &name)),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not confirmed: {}", html::message_of(&error)),
            );
            render(&state, &viewer, &owner, &name, &number, Some(problem)).await
        }
    }
}

pub(crate) async fn cancel(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name, number)): Path<(String, String, String)>,
) -> Response {
    let Some(build_number) = parse_number(&number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such build.");
    };
    let reference = format!("{owner}/{name}");
    match state
        .control
        .workspace_builds()
        .cancel_build(&viewer.caller, &reference, Some(build_number))
        .await
    {
        Ok(_) => html::see_other(&workspace_url(&owner, &name)),
        Err(error) => html::control_error(error),
    }
}

/// Where the stream of one build's log is.
struct Follow {
    control: Control,
    caller: Caller,
    /// The session the stream was opened with: checked again at every
    /// step, and whenever this server revokes a token, so that a stream
    /// ends with its session (a sign-out, here or on another server).
    session: String,
    revocations: tokio::sync::watch::Receiver<u64>,
    reference: String,
    number: i64,
    after: i64,
    finished: bool,
    ends_at: Instant,
}

/// The build's log as server-sent events: `line` events (JSON: seq, stage,
/// level, text; the event id is the line's seq) as lines arrive, a `status`
/// event (JSON: status, done) after each batch. The stream ends once the
/// build has settled, or after [`STREAM_LIFETIME`]; a reconnecting browser
/// sends the last id it saw and gets the lines after it.
pub(crate) async fn events(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name, number)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let Some(number) = parse_number(&number) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such build.");
    };
    let reference = format!("{owner}/{name}");
    // Refused here, before the stream starts, like the API's log route.
    if let Err(error) = state
        .control
        .workspace_builds()
        .build(&viewer.caller, &reference, Some(number))
        .await
    {
        return html::control_error(error);
    }
    let follow = Follow {
        control: state.control.clone(),
        caller: viewer.caller,
        session: viewer.session,
        revocations: state.control.identity().revocations(),
        reference,
        number,
        after: headers
            .get("last-event-id")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<i64>().ok())
            .unwrap_or(0)
            .max(0),
        finished: false,
        ends_at: Instant::now() + STREAM_LIFETIME,
    };
    let retry = stream::iter([Ok::<_, Infallible>(Event::default().retry(RECONNECT))]);
    Sse::new(futures_util::StreamExt::chain(retry, log_stream(follow)))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn log_stream(follow: Follow) -> impl Stream<Item = Result<Event, Infallible>> {
    use futures_util::StreamExt;
    stream::unfold(follow, |mut follow| async move {
        let left = follow.ends_at.saturating_duration_since(Instant::now());
        if follow.finished || left.is_zero() {
            return None;
        }
        // The session still stands (and its roles are today's), or the
        // stream ends: the browser's reconnect then meets the sign-in.
        follow.revocations.borrow_and_update();
        match follow
            .control
            .identity()
            .authenticate_caller(&follow.session, follow.caller.request_id.clone())
            .await
        {
            Ok(caller) => follow.caller = caller,
            Err(_) => return None,
        }
        let wait = follow.control.workspace_builds().build_logs(
            &follow.caller,
            &follow.reference,
            Some(follow.number),
            follow.after,
            LOG_WAIT.min(left),
        );
        let page = tokio::select! {
            page = wait => Some(page),
            // A token was revoked meanwhile: look at this one again.
            _ = follow.revocations.changed() => None,
        };
        let Some(page) = page else {
            let nothing: Vec<Event> = Vec::new();
            return Some((stream::iter(nothing.into_iter().map(Ok)), follow));
        };
        let mut events = Vec::new();
        match page {
            Ok(page) => {
                for line in &page.lines {
                    follow.after = follow.after.max(line.seq);
                    let data = serde_json::json!({
                        "seq": line.seq, "stage": line.stage, "level": line.level, "text": line.text,
                    });
                    events.push(
                        Event::default()
                            .event("line")
                            .id(line.seq.to_string())
                            .data(data.to_string()),
                    );
                }
                let status = serde_json::json!({"status": page.status.as_str(), "done": page.done});
                events.push(Event::default().event("status").data(status.to_string()));
                follow.finished = page.done;
            }
            Err(error) => {
                let status = serde_json::json!({"status": "unavailable", "done": true, "error": html::message_of(&error)});
                events.push(Event::default().event("status").data(status.to_string()));
                follow.finished = true;
            }
        }
        Some((stream::iter(events.into_iter().map(Ok)), follow))
    })
    .flatten()
}
