//! The workspaces list and a workspace's page, and its start, stop, update
//! and delete: the API's list, view, builds and schedule, through the same
//! control-plane calls (`Workspaces::list` and `get`, `Control::list_builds`,
//! `ScheduleSettings::schedule`, `Control::request_transition`). The page is
//! made of parts that name no page: the schedule's section and its changes
//! (`schedule.rs`, whose forms this page answers, with itself again on a
//! refusal), the current build's log panel (`builds.rs`) and the apps
//! (`apps.rs`). The list shows each workspace's daily cost and the viewer's
//! budget from `Identity::quota`, as `abode quota show` does.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use abode_control::authz::{self, Action};
use abode_control::{BuildRequest, VersionChoice, WorkspaceQuery, WorkspaceStatus, WorkspaceView};
use abode_store::{BuildStatus, QuotaUsage, Transition};

use crate::builds::log_panel;
use crate::html::{self, badge, page as whole_page, respond, time, words};
use crate::nav::{build_url, header, workspace_url};
use crate::schedule;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// How many workspaces one page of the list shows.
const PAGE_SIZE: i64 = 50;
/// How many builds the history shows.
const HISTORY: i64 = 20;

pub(crate) async fn home(viewer: Result<Viewer, Response>) -> Response {
    match viewer {
        Ok(_) => html::see_other("/workspaces"),
        Err(_) => html::see_other("/login"),
    }
}

#[derive(Deserialize, Default)]
pub(crate) struct ListQuery {
    #[serde(default)]
    all: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

fn non_empty(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_string)
}

const STATUSES: [WorkspaceStatus; 10] = [
    WorkspaceStatus::Running,
    WorkspaceStatus::Stopped,
    WorkspaceStatus::Starting,
    WorkspaceStatus::Stopping,
    WorkspaceStatus::Pending,
    WorkspaceStatus::AwaitingConfirmation,
    WorkspaceStatus::Failed,
    WorkspaceStatus::Canceled,
    WorkspaceStatus::Deleting,
    WorkspaceStatus::Deleted,
];

pub(crate) async fn list(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<ListQuery>>,
) -> Response {
    let query = query.map(|Query(query)| query).unwrap_or_default();
    let all = query.all.as_deref() == Some("on");
    let template = non_empty(&query.template);
    let status_name = non_empty(&query.status);
    let status = match status_name.as_deref().map(str::parse::<WorkspaceStatus>) {
        Some(Ok(status)) => Some(status),
        Some(Err(error)) => return html::control_error(error),
        None => None,
    };
    let control = &state.control;
    let page_of = control
        .workspaces()
        .list(
            &viewer.caller,
            &WorkspaceQuery {
                all,
                include_deleted: false,
                owner: None,
                template: template.clone(),
                status,
                after: non_empty(&query.after),
                limit: Some(PAGE_SIZE),
            },
        )
        .await;
    let workspaces = match page_of {
        Ok(workspaces) => workspaces,
        Err(error) => return html::control_error(error),
    };
    // One read of the templates for the page (not one per row): which
    // version each template has active, for "outdated".
    let active: BTreeMap<String, i64> = match control
        .templates()
        .list_templates(&viewer.caller, None, Some(200))
        .await
    {
        Ok(templates) => templates
            .items
            .into_iter()
            .filter_map(|template| Some((template.name, template.active_version?)))
            .collect(),
        Err(_) => BTreeMap::new(),
    };
    let costs = costs(&state, &viewer, &workspaces.items).await;
    let enforced = control.config().quota_enforce;
    let next_url = workspaces.next.as_ref().map(|next| {
        let mut pairs = vec![("after", next.clone())];
        if all {
            pairs.push(("all", "on".into()));
        }
        if let Some(template) = &template {
            pairs.push(("template", template.clone()));
        }
        if let Some(status) = &status_name {
            pairs.push(("status", status.clone()));
        }
        format!(
            "/workspaces?{}",
            serde_urlencoded::to_string(&pairs).unwrap_or_default()
        )
    });
    // Offered to those the policy lets read everyone's workspaces; the
    // list itself is the door's answer either way.
    let may_see_all = authz::widest_scope(&viewer.caller.subject(), Action::WorkspaceRead)
        == Some(authz::Scope::Any);
    let body = html! {
        h1 { "Workspaces" }
        @if let Some(own) = &costs.own {
            p class="budget" {
                "Your budget: " (own.spent()) " of " (own.budget()) " a day used, "
                (own.budget().saturating_sub(own.spent())) " remain"
                @if !enforced { span class="muted" { " (quotas are not enforced)" } }
            }
        }
        p { a href="/workspaces/new" { "New workspace" } }
        form class="filters" method="get" action="/workspaces" role="search" aria-label="Filter workspaces" {
            div {
                label for="filter-template" { "Template" }
                input id="filter-template" name="template" type="text" value=(template.as_deref().unwrap_or(""));
            }
            div {
                label for="filter-status" { "Status" }
                select id="filter-status" name="status" {
                    option value="" { "any" }
                    @for candidate in STATUSES {
                        option value=(candidate.as_str()) selected[status == Some(candidate)] { (words(candidate.as_str())) }
                    }
                }
            }
            @if may_see_all {
                div {
                    label for="filter-all" {
                        input id="filter-all" name="all" type="checkbox" checked[all];
                        " Everyone's"
                    }
                }
            }
            div { button type="submit" { "Filter" } }
        }
        @if workspaces.items.is_empty() {
            p { "No workspace matches. " a href="/workspaces/new" { "Create one" } " (or " code { "abode create NAME --template TEMPLATE" } ")." }
        } @else {
            table {
                caption class="muted" { "Workspaces you may see" }
                thead { tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Owner" }
                    th scope="col" { "Template" }
                    th scope="col" { "Status" }
                    th scope="col" { "Agent" }
                    th scope="col" { "Daily cost" }
                    th scope="col" { "Last build" }
                } }
                tbody {
                    @for view in &workspaces.items {
                        (row(view, &active, &costs))
                    }
                }
            }
        }
        @if let Some(next_url) = next_url {
            p { a href=(next_url) rel="next" { "Next page" } }
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Workspaces", Some(header(&viewer)), body),
    )
}

/// What the list knows of costs: each listed workspace's counted daily
/// cost (and whether its build still reserves it), by owner and name, for
/// the owners whose quota the viewer may read (their own; owners and
/// user-admins anyone's), and the viewer's own usage.
struct Costs {
    by_workspace: BTreeMap<(String, String), (i64, bool)>,
    own: Option<QuotaUsage>,
}

/// One quota read per owner on the page (a page is at most [`PAGE_SIZE`]
/// rows); an owner whose quota the viewer may not read shows no cost.
async fn costs(state: &WebState, viewer: &Viewer, items: &[WorkspaceView]) -> Costs {
    let identity = state.control.identity();
    let me = viewer.caller.user.username.as_str();
    let owners: BTreeSet<&str> = items
        .iter()
        .map(|view| view.workspace.owner_name.as_str())
        .filter(|owner| *owner != me)
        .collect();
    let own = identity
        .quota(&viewer.caller, None)
        .await
        .ok()
        .map(|(_, usage)| usage);
    let mut by_workspace = BTreeMap::new();
    let mut add = |owner: &str, usage: &QuotaUsage| {
        for workspace in &usage.workspaces {
            by_workspace.insert(
                (owner.to_string(), workspace.workspace_name.clone()),
                (workspace.daily_cost, workspace.reserved),
            );
        }
    };
    if let Some(usage) = &own {
        add(me, usage);
    }
    for owner in owners {
        if let Ok((_, usage)) = identity.quota(&viewer.caller, Some(owner)).await {
            add(owner, &usage);
        }
    }
    Costs { by_workspace, own }
}

fn row(view: &WorkspaceView, active: &BTreeMap<String, i64>, costs: &Costs) -> Markup {
    let workspace = &view.workspace;
    let build = &view.latest_build;
    let newer = active
        .get(&workspace.template_name)
        .copied()
        .filter(|active| *active > workspace.template_version);
    html! {
        tr {
            td { a href=(workspace_url(&workspace.owner_name, &workspace.name)) { (workspace.name) } }
            td { (workspace.owner_name) }
            td {
                (workspace.template_name) " v" (workspace.template_version)
                @if let Some(newer) = newer {
                    " " span class="badge warn" title=(format!("version {newer} is active")) { "outdated" }
                }
            }
            td { (badge(view.status.as_str())) }
            td { (agent_text(view)) }
            td class="cost" {
                @match costs.by_workspace.get(&(workspace.owner_name.clone(), workspace.name.clone())) {
                    Some((cost, reserved)) => {
                        (cost)
                        @if *reserved { " " span class="muted" { "(reserved)" } }
                    }
                    None => span class="muted" { "–" },
                }
            }
            td {
                a href=(build_url(build)) {
                    "#" (build.number) " " (build.transition.as_str())
                }
                " " (words(build.status.as_str()))
                br;
                span class="muted" { (time(build.finished_at.unwrap_or(build.created_at))) }
            }
        }
    }
}

fn agent_text(view: &WorkspaceView) -> Markup {
    let status = serde_json::to_value(view.agent.status)
        .ok()
        .and_then(|value| value.as_str().map(str::to_string))
        .unwrap_or_default();
    html! {
        (badge(&status))
        @if let Some(reason) = &view.agent.reason {
            br; span class="muted" { (reason) }
        }
    }
}

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    render(&state, &viewer, &owner, &name, None).await
}

/// The workspace's page; `problem` is the door's refusal of a form on it
/// (the schedule), shown beside that form, with the refusal's status.
pub(crate) async fn render(
    state: &WebState,
    viewer: &Viewer,
    owner: &str,
    name: &str,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let reference = format!("{owner}/{name}");
    let control = &state.control;
    let view = match control.workspaces().get(&viewer.caller, &reference).await {
        Ok(view) => view,
        Err(error) => return html::control_error(error),
    };
    let history = match control
        .workspace_builds()
        .list_builds(&viewer.caller, &reference, None, None, Some(HISTORY))
        .await
    {
        Ok(page) => page.items,
        Err(error) => return html::control_error(error),
    };
    let schedule = control
        .schedule_settings()
        .schedule(&viewer.caller, &reference)
        .await
        .ok();
    let log = log_panel(control, &viewer.caller, &reference, &view.latest_build).await;
    let apps = state
        .gateway
        .apps()
        .workspace_app_views(&view.workspace)
        .await
        .unwrap_or_default();
    let unsaved = match control.workspaces().unsaved(&view.workspace).await {
        Ok(report) => report,
        Err(error) => return html::control_error(error),
    };
    let disk = match control.workspaces().disk_usage(&view.workspace).await {
        Ok(disk) => disk,
        Err(error) => return html::control_error(error),
    };
    // The scripts: none shown rather than no page when they cannot be read.
    let scripts = control
        .workspaces()
        .scripts(&viewer.caller, &reference)
        .await
        .unwrap_or_default();
    // The sharing panel, for whoever may manage it.
    let sharing = control
        .workspaces()
        .sharing(&viewer.caller, &reference)
        .await
        .ok();
    let metadata = crate::live::current(state, &view.workspace.id).await;
    let workspace = &view.workspace;
    let url = workspace_url(&workspace.owner_name, &workspace.name);
    let parameters = &workspace.parameters;
    let latest = &view.latest_build;
    // The template's active version, for "update" (none if it cannot be read).
    let template = control
        .templates()
        .read_template(&viewer.caller, &workspace.template_name)
        .await
        .ok();
    let active_version = template
        .as_ref()
        .and_then(|template| template.active_version);
    let deprecation = template.as_ref().and_then(|template| {
        let message = template.deprecation_message.as_deref()?;
        let replacement = template.deprecation_replacement.as_deref();
        Some(abode_sdk::deprecation::notice(message, replacement))
    });
    let offered = offered_actions(view.status, active_version, workspace.template_version);
    // The form is offered to whoever the policy lets change this
    // workspace's schedule; the door still decides, with the template's
    // policy.
    let may_schedule = !workspace.deleted
        && authz::authorize(
            &viewer.caller.subject(),
            Action::WorkspaceScheduleEdit,
            Some(&workspace.owner_id),
        )
        .is_ok();
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        h1 { "Workspace " (workspace.name) }
        dl class="facts" {
            dt { "Owner" } dd { (workspace.owner_name) }
            dt { "Template" } dd { (workspace.template_name) " version " (workspace.template_version) }
            dt { "Status" } dd { (badge(view.status.as_str())) }
            dt { "Agent" } dd {
                (agent_text(&view))
                @if view.status == WorkspaceStatus::Running {
                    " " a id="open-terminal" href=(format!("{url}/terminal")) { "Open terminal" }
                }
            }
            @if let Some(preset) = &workspace.preset_name {
                dt { "Preset" } dd { (preset) }
            }
            @if let Some(host) = &workspace.host {
                // Its volumes and processes are there: only that host builds it.
                dt { "Host" } dd class="mono" { (host) }
            }
        }
        @if let Some(deprecation) = &deprecation {
            p id="template-deprecated" class="notice" role="status" {
                "Template " (workspace.template_name) " is deprecated: it takes no new workspaces; this one keeps working. "
                (deprecation)
            }
        }
        @if let Some(waiting) = &latest.waiting {
            p id="build-waiting" class="notice" role="status" {
                "Build #" (latest.number) " waits: " (waiting)
            }
        }
        @if let Some(lock) = &view.locked_by_lost_holder {
            p class="notice" role="status" {
                "Locked: build #" (lock.build_number) " of " span class="mono" { (lock.holder) }
                " was lost at " (time(lock.lost_at))
                " while its Terraform could still run; new builds wait until it reports that its Terraform ended. \
                 Once you have checked that it no longer runs: "
                code { "abode workspaces unlock " (workspace.owner_name) "/" (workspace.name) " --build " (lock.build_number) }
                "."
            }
        }
        @if latest.status == BuildStatus::AwaitingConfirmation {
            p class="notice" role="status" {
                "Build #" (latest.number) " is held by the plan guard: it would destroy or replace a protected resource. "
                a href=(build_url(latest)) { "Review the plan and confirm or cancel it" }
                "."
            }
        }
        @if !workspace.deleted {
            h2 { "Actions" }
            div class="actions" {
                @if matches!(latest.status, BuildStatus::Pending | BuildStatus::Running) {
                    form method="post" action=(format!("{}/cancel", build_url(latest))) {
                        input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                        button type="submit" { "Cancel build #" (latest.number) }
                    }
                }
                @for (action, label) in &offered {
                    form method="post" action=(format!("{url}/actions/{action}")) {
                        input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                        button type="submit" { (label) }
                    }
                }
                form method="post" action=(format!("{url}/rename")) {
                    input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                    label for="new-name" { "New name" }
                    input id="new-name" name="new_name" type="text" autocomplete="off" required
                        pattern="[a-z0-9][a-z0-9-]{0,63}" aria-describedby="rename-help";
                    " "
                    button type="submit" { "Rename" }
                    p id="rename-help" class="muted" {
                        "Planned under the new name first: a plan that would replace a protected resource is held for review."
                    }
                }
                form method="post" action=(format!("{url}/actions/delete")) data-name=(workspace.name) {
                    input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                    label for="confirm-name" { "Type " span class="mono" { (workspace.name) } " to delete" }
                    input id="confirm-name" name="confirm_name" type="text" autocomplete="off" required;
                    " "
                    @if let Some(report) = unsaved.as_ref().filter(|report| !report.repositories.is_empty()) {
                        label {
                            input type="checkbox" name="confirm_unsaved" value=(report.digest);
                            " Delete the unsaved work listed below (this report only)"
                        }
                        " "
                    }
                    button class="danger" type="submit" { "Delete" }
                }
            }
        }
        (crate::apps::section(&apps, &url))
        (crate::scripts::section(&scripts, &url))
        @if let Some(sharing) = sharing.as_ref().filter(|_| !workspace.deleted) {
            (crate::sharing::section(sharing, &url, &viewer.csrf))
        }
        (unsaved_section(unsaved.as_ref()))
        (disk_section(&disk))
        (crate::live::section(&metadata, &format!("{url}/metadata/events")))
        h2 { "Parameters" }
        @if parameters.is_empty() {
            p class="muted" { "None." }
        } @else {
            dl class="facts" {
                @for (key, value) in parameters {
                    dt class="mono" { (key) }
                    dd { (value) }
                }
            }
        }
        h2 { "Schedule" }
        @match &schedule {
            Some(schedule) => { (schedule::section(schedule, &url, &viewer.csrf, may_schedule, problem.as_ref().map(|(_, message)| message.as_str()))) }
            None => { p class="muted" { "Not available." } }
        }
        h2 { "Current build" }
        (log)
        h2 { "Build history" }
        table {
            thead { tr {
                th scope="col" { "Build" }
                th scope="col" { "Transition" }
                th scope="col" { "Status" }
                th scope="col" { "Version" }
                th scope="col" { "Started by" }
                th scope="col" { "Created" }
            } }
            tbody {
                @for build in &history {
                    tr {
                        td { a href=(build_url(build)) { "#" (build.number) } }
                        td { (build.transition.as_str()) }
                        td { (badge(build.status.as_str())) }
                        td { "v" (build.template_version) }
                        td { (build.initiator_name) }
                        td { (time(build.created_at)) }
                    }
                }
            }
        }
    };
    respond(
        status,
        whole_page(
            &format!("Workspace {}", workspace.name),
            Some(header(viewer)),
            body,
        ),
    )
}

/// The builds worth offering in `status`: what the door would refuse now (a
/// start of a running workspace, anything while a build is active or held)
/// is not offered; the door still decides what is allowed.
fn offered_actions(
    status: WorkspaceStatus,
    active_version: Option<i64>,
    version: i64,
) -> Vec<(&'static str, String)> {
    let (start, stop) = match status {
        WorkspaceStatus::Running => (false, true),
        WorkspaceStatus::Stopped => (true, false),
        WorkspaceStatus::Failed | WorkspaceStatus::Canceled => (true, true),
        _ => return Vec::new(),
    };
    let mut offered = Vec::new();
    if start {
        offered.push(("start", "Start".to_string()));
    }
    if stop {
        offered.push(("stop", "Stop".to_string()));
    }
    if status == WorkspaceStatus::Running {
        offered.push(("restart", "Restart".to_string()));
    }
    if let Some(active) = active_version.filter(|active| *active != version) {
        offered.push(("update", format!("Update to version {active}")));
    }
    offered
}

#[derive(Deserialize)]
pub(crate) struct ActionForm {
    #[serde(default)]
    confirm_name: Option<String>,
    /// The digest of the unsaved work report a delete confirms.
    #[serde(default)]
    confirm_unsaved: Option<String>,
}

/// How full each agent's home volume was when it last said (a nearly full
/// one is marked).
fn disk_section(disks: &[abode_sdk::DiskUsage]) -> Markup {
    html! {
        @if !disks.is_empty() {
            h2 { "Disk" }
            table {
                thead { tr {
                    th scope="col" { "Agent" } th scope="col" { "Used" } th scope="col" { "Size" }
                    th scope="col" { "Reported" }
                } }
                tbody {
                    @for disk in disks {
                        tr {
                            td class="mono" { (disk.agent) }
                            td class=[(disk.used_percent >= 90).then_some("notice")] {
                                (disk.used_percent) "%"
                            }
                            td { (disk.total_bytes / (1024 * 1024)) " MiB" }
                            td { (abode_control::unsaved::age_text(disk.age_seconds)) " ago" }
                        }
                    }
                }
            }
        }
    }
}

/// The workspace's last report of unsaved work: each repository and what is
/// unsaved there, and the report's age (a delete that would lose it is
/// held).
fn unsaved_section(report: Option<&abode_sdk::UnsavedReport>) -> Markup {
    html! {
        h2 { "Unsaved work" }
        @match report {
            None => { p class="muted" { "Not reported yet." } }
            Some(report) => {
                p class="muted" {
                    "Reported " (abode_control::unsaved::age_text(report.age_seconds)) " ago ("
                    (report.made_at) "), " (report.repositories_scanned) " repositories looked at"
                    @if report.truncated { "; the scan stopped at its bounds, there may be more" }
                    ". Digest " span class="mono" { (report.digest) } "."
                }
                @if report.repositories.is_empty() {
                    p { "None: a delete goes ahead." }
                } @else {
                    p class="notice" role="status" {
                        "A delete is held until this work is saved, or confirmed to be discarded."
                    }
                    table {
                        thead { tr { th scope="col" { "Repository" } th scope="col" { "Unsaved" } } }
                        tbody {
                            @for repository in &report.repositories {
                                tr {
                                    td class="mono" { "~/" (repository.path) }
                                    td { (abode_control::unsaved::kinds_text(&repository.kinds)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Start, stop, update or delete: a build requested through the door, as
/// `POST /api/v1/workspaces/{ws}/builds` does.
pub(crate) async fn act(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name, action)): Path<(String, String, String)>,
    Form(form): Form<ActionForm>,
) -> Response {
    if action == "restart" {
        let reference = format!("{owner}/{name}");
        return match state
            .control
            .workspace_builds()
            .request_restart(&viewer.caller, &reference)
            .await
        {
            Ok(_) => html::see_other(&workspace_url(&owner, &name)),
            Err(error) => html::control_error(error),
        };
    }
    let (transition, version) = match action.as_str() {
        "start" => (Transition::Start, VersionChoice::Current),
        "stop" => (Transition::Stop, VersionChoice::Current),
        "update" => (Transition::Start, VersionChoice::Active),
        "delete" => (Transition::Delete, VersionChoice::Current),
        _ => return html::error_page(StatusCode::NOT_FOUND, "No such workspace action."),
    };
    if transition == Transition::Delete && form.confirm_name.as_deref() != Some(name.as_str()) {
        return html::error_page(
            StatusCode::BAD_REQUEST,
            "The workspace was not deleted: type its name exactly to confirm.",
        );
    }
    let reference = format!("{owner}/{name}");
    let request = BuildRequest {
        transition,
        version,
        parameters: BTreeMap::new(),
        retention: None,
        // The page shows the unsaved work and offers its report's digest
        // to confirm; a report that changed since holds the delete.
        unsaved: match form.confirm_unsaved {
            Some(digest) if transition == Transition::Delete => {
                abode_control::UnsavedConsent::Confirm(digest)
            }
            _ => abode_control::UnsavedConsent::None,
        },
    };
    match state
        .control
        .workspace_builds()
        .request_transition(&viewer.caller, &reference, &request)
        .await
    {
        Ok(_) => html::see_other(&workspace_url(&owner, &name)),
        Err(error) => html::control_error(error),
    }
}

#[derive(Deserialize)]
pub(crate) struct RenameForm {
    new_name: String,
}

/// A rename, as `abode rename` asks it: the workspace is planned under the
/// new name first; the rename's build page shows a held plan for review.
pub(crate) async fn rename(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    Form(form): Form<RenameForm>,
) -> Response {
    let reference = format!("{owner}/{name}");
    match state
        .control
        .workspace_builds()
        .request_rename(&viewer.caller, &reference, form.new_name.trim())
        .await
    {
        Ok(build) => html::see_other(&build_url(&build)),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not renamed: {}", html::message_of(&error)),
            );
            render(&state, &viewer, &owner, &name, Some(problem)).await
        }
    }
}

/// The schedule section's form (`schedule.rs`): the whole schedule.
pub(crate) async fn save_schedule(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    Form(form): Form<schedule::ScheduleForm>,
) -> Response {
    let reference = format!("{owner}/{name}");
    let result = schedule::save(&state, &viewer, &reference, &form).await;
    after_schedule(&state, &viewer, &owner, &name, result).await
}

/// The schedule section's extend form.
pub(crate) async fn extend(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    Form(form): Form<schedule::ExtendForm>,
) -> Response {
    let reference = format!("{owner}/{name}");
    let result = schedule::extend(&state, &viewer, &reference, &form).await;
    after_schedule(&state, &viewer, &owner, &name, result).await
}

/// The schedule section's wake form.
pub(crate) async fn wake(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    let reference = format!("{owner}/{name}");
    let result = schedule::wake(&state, &viewer, &reference).await;
    after_schedule(&state, &viewer, &owner, &name, result).await
}

/// The page after a change of the schedule: the schedule section on
/// success, else the page with the door's refusal beside the form.
async fn after_schedule(
    state: &WebState,
    viewer: &Viewer,
    owner: &str,
    name: &str,
    result: schedule::Outcome,
) -> Response {
    match result {
        Ok(()) => html::see_other(&format!("{}#schedule", workspace_url(owner, name))),
        Err((status, message)) => {
            let problem = format!("Schedule not saved: {message}");
            render(state, viewer, owner, name, Some((status, problem))).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_builds_a_status_allows_are_offered() {
        let names = |status, active| -> Vec<&'static str> {
            offered_actions(status, active, 1)
                .into_iter()
                .map(|(action, _)| action)
                .collect()
        };
        let cases: [(WorkspaceStatus, Option<i64>, &[&str]); 7] = [
            (WorkspaceStatus::Running, Some(1), &["stop", "restart"]),
            (
                WorkspaceStatus::Running,
                Some(2),
                &["stop", "restart", "update"],
            ),
            (WorkspaceStatus::Stopped, Some(1), &["start"]),
            (WorkspaceStatus::Failed, None, &["start", "stop"]),
            (
                WorkspaceStatus::Canceled,
                Some(3),
                &["start", "stop", "update"],
            ),
            (WorkspaceStatus::AwaitingConfirmation, Some(2), &[]),
            (WorkspaceStatus::Starting, Some(2), &[]),
        ];
        for (status, active, expected) in cases {
            assert_eq!(names(status, active), expected, "{status:?} {active:?}");
        }
    }
}
