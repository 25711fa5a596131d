//! A new workspace: pick a template, then name the workspace and fill in
//! the parameters its active version declares (or choose a preset). The
//! API's `create_workspace`: the door checks every value against the
//! version's declarations and the page shows what it refused.
//!
//! "Estimate cost" shows, before anything is queued, what the create would
//! cost a day (the template's import plan with the form's values) and how
//! it sits in the person's budget. Where quotas are enforced, a create is
//! estimated first, so one that clearly does not fit is refused before any
//! Terraform runs.

use std::collections::BTreeMap;

use abode_control::create_estimate::CreateEstimate;
use abode_store::ParameterDefinition;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use crate::html::{self, page as whole_page, respond};
use crate::nav::{header, workspace_url};
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// Parameter fields are named with this prefix, apart from the form's own.
const PARAMETER_PREFIX: &str = "parameter.";

#[derive(Deserialize, Default)]
pub(crate) struct NewQuery {
    #[serde(default)]
    template: Option<String>,
}

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<NewQuery>>,
) -> Response {
    let template = query
        .and_then(|Query(query)| query.template)
        .filter(|template| !template.is_empty());
    render(&state, &viewer, template.as_deref(), &[], None, None, false).await
}

/// `/templates/T/create?name=N&param.NAME=VALUE&mode=form|auto`: the create
/// form of template T with those values filled in (`abode templates
/// link`). `auto` shows it with one button that creates the workspace: a
/// link never creates one without that click. What the link names that the
/// form does not know (a parameter T does not declare, another field, a
/// mode) is an error on the form, and `auto` falls back to the whole form.
pub(crate) async fn link(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(template): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let mut problems = Vec::new();
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .unwrap_or_else(|_| {
            problems.push("its query is not form-encoded".to_string());
            Vec::new()
        });
    let (mut given, mut auto) = (Vec::new(), false);
    for (key, value) in pairs {
        match (key.as_str(), key.strip_prefix("param.")) {
            ("name" | "preset", _) => given.push((key, value)),
            ("mode", _) => match value.as_str() {
                "form" => auto = false,
                "auto" => auto = true,
                _ => problems.push(format!("mode \"{value}\" is neither form nor auto")),
            },
            (_, Some(parameter)) => given.push((format!("{PARAMETER_PREFIX}{parameter}"), value)),
            _ => problems.push(format!(
                "\"{key}\" is none of name, preset, param.NAME and mode"
            )),
        }
    }
    if let Ok((_, declared)) = details(&state, &viewer, &template).await {
        for (key, _) in &given {
            let Some(parameter) = key.strip_prefix(PARAMETER_PREFIX) else {
                continue;
            };
            if !declared
                .iter()
                .any(|definition| definition.name == parameter)
            {
                problems.push(format!(
                    "template \"{template}\" has no parameter \"{parameter}\""
                ));
            }
        }
    }
    let problem = (!problems.is_empty()).then(|| {
        (
            StatusCode::BAD_REQUEST,
            format!("This link does not fit the form: {}.", problems.join("; ")),
        )
    });
    let auto = auto && problem.is_none();
    render(
        &state,
        &viewer,
        Some(&template),
        &given,
        problem,
        None,
        auto,
    )
    .await
}

/// The form, with the values given so far and the door's refusal if any.
async fn render(
    state: &WebState,
    viewer: &Viewer,
    template: Option<&str>,
    given: &[(String, String)],
    problem: Option<(StatusCode, String)>,
    estimate: Option<&CreateEstimate>,
    auto: bool,
) -> Response {
    let control = &state.control;
    let templates = match control
        .templates()
        .list_templates(&viewer.caller, None, Some(200))
        .await
    {
        Ok(templates) => templates.items,
        Err(error) => return html::control_error(error),
    };
    let value_of = |name: &str| -> String {
        given
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_default()
    };
    let chosen = match template {
        Some(name) => Some(details(state, viewer, name).await),
        None => None,
    };
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        p { a href="/workspaces" { "← Workspaces" } }
        h1 { "New workspace" }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        @if let Some(chosen) = templates.iter().find(|candidate| Some(candidate.name.as_str()) == template) {
            @if let Some(message) = &chosen.deprecation_message {
                p id="template-deprecated" class="error" role="alert" {
                    (abode_sdk::deprecation::refusal(&chosen.name, message, chosen.deprecation_replacement.as_deref()))
                }
            }
        }
        form class="filters" method="get" action="/workspaces/new" {
            div {
                label for="template" { "Template" }
                select id="template" name="template" {
                    @for candidate in templates.iter().filter(|candidate| candidate.active_version.is_some()) {
                        option value=(candidate.name) selected[Some(candidate.name.as_str()) == template] { (candidate.name) }
                    }
                }
            }
            div { button id="choose-template" type="submit" { "Choose" } }
        }
        @match (&chosen, template) {
            (Some(Ok((presets, parameters))), Some(template)) => {
                form method="post" action="/workspaces/new" {
                    input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                    input type="hidden" name="template" value=(template);
                    label for="name" { "Name" }
                    input id="name" name="name" type="text" required pattern="[a-z0-9][a-z0-9-]{0,63}"
                        aria-describedby="name-help" value=(value_of("name"));
                    p id="name-help" class="muted" { "Lowercase letters, digits and '-', starting with a letter or digit." }
                    @if !presets.is_empty() {
                        label for="preset" { "Preset" }
                        select id="preset" name="preset" {
                            option value="" { "none" }
                            @for preset in presets {
                                option value=(preset) selected[value_of("preset") == *preset] { (preset) }
                            }
                        }
                    }
                    @for parameter in parameters {
                        (parameter_input(parameter, &value_of(&format!("{PARAMETER_PREFIX}{}", parameter.name))))
                    }
                    @if let Some(estimate) = estimate {
                        (estimate_markup(estimate))
                    }
                    @if auto {
                        p role="status" { "Check the values: nothing is created until you click." }
                        p { button id="confirm-create" class="primary" type="submit" { "Create workspace" } }
                    } @else {
                        p {
                            button class="primary" type="submit" { "Create and start" }
                            " "
                            button id="estimate" type="submit" name="intent" value="estimate" formnovalidate { "Estimate cost" }
                        }
                    }
                }
            }
            (Some(Err(message)), _) => { p class="error" role="alert" { (message) } }
            _ => {}
        }
    };
    respond(
        status,
        whole_page("New workspace", Some(header(viewer)), body),
    )
}

/// The estimate under the form: the cost, its parts, the budget, and
/// whether it fits.
fn estimate_markup(estimate: &CreateEstimate) -> Markup {
    html! {
        div id="cost-estimate" role="status" {
            p {
                "Estimated daily cost: "
                @match estimate.daily_cost {
                    Some(total) => { strong { (total) } " a day" }
                    None => { "unknown until the build's plan" }
                }
                " (" (estimate.source.describe()) ")."
            }
            @if let Some(why) = &estimate.unknown { p class="muted" { (why) } }
            @if !estimate.items.is_empty() {
                ul {
                    @for item in &estimate.items {
                        li {
                            span class="mono" { (item.metadata) }
                            @if let Some(resource) = &item.resource { " for " span class="mono" { (resource) } }
                            ": " (item.daily_cost)
                        }
                    }
                }
            }
            p {
                "Your budget: " (estimate.spent) " of " (estimate.budget) " a day used, "
                (estimate.remaining()) " remain"
                @if !estimate.enforced { span class="muted" { " (quotas are not enforced)" } }
                "."
            }
            @if estimate.fits() == Some(false) {
                p class="error" role="alert" { "It does not fit your budget: its build would be refused before anything is created." }
            }
        }
    }
}

/// One declared parameter as a labelled input (a select when it lists its
/// options); left empty, the declaration's default applies.
fn parameter_input(parameter: &ParameterDefinition, given: &str) -> Markup {
    let name = parameter.name.as_str();
    let id = format!("parameter-{name}");
    let label = parameter.display_name.as_deref().unwrap_or(name);
    let default = parameter.default.as_deref();
    let options: Vec<&str> = parameter.options.iter().map(String::as_str).collect();
    let help_id = format!("{id}-help");
    let field = format!("{PARAMETER_PREFIX}{name}");
    html! {
        label for=(id) { (label) " " span class="muted" { "(" (parameter.kind) ")" } }
        @if options.is_empty() {
            input id=(id) name=(field) type="text" value=(given) placeholder=(default.unwrap_or(""))
                required[default.is_none()] aria-describedby=(help_id);
        } @else {
            select id=(id) name=(field) aria-describedby=(help_id) {
                @if default.is_some() { option value="" { "default (" (default.unwrap_or("")) ")" } }
                @for option in &options {
                    option value=(option) selected[given == *option] { (option) }
                }
            }
        }
        p id=(help_id) class="muted" {
            @if let Some(description) = &parameter.description { (description) " " }
            @match default {
                Some(default) => { "Default: " span class="mono" { (default) } "." }
                None => { "Required." }
            }
        }
    }
}

/// The presets and parameter declarations of the template's active version.
async fn details(
    state: &WebState,
    viewer: &Viewer,
    template: &str,
) -> Result<(Vec<String>, Vec<ParameterDefinition>), String> {
    let control = &state.control;
    let versions = control
        .templates()
        .template_versions(&viewer.caller, template)
        .await
        .map_err(|error| html::message_of(&error))?;
    let Some(active) = versions.into_iter().find(|version| version.active) else {
        return Err(format!("template \"{template}\" has no active version"));
    };
    let parameters = active.parameters.unwrap_or_default();
    let presets = control
        .templates()
        .template_presets(&viewer.caller, template, Some(active.number))
        .await
        .map(|(_, presets)| presets.into_iter().map(|preset| preset.name).collect())
        .unwrap_or_default();
    Ok((presets, parameters))
}

pub(crate) async fn create(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let field = |name: &str| -> String {
        fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.trim().to_string())
            .unwrap_or_default()
    };
    let (name, template, preset) = (field("name"), field("template"), field("preset"));
    // An empty field means "the default": it is not sent to the door.
    let parameters: BTreeMap<String, Value> = fields
        .iter()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(PARAMETER_PREFIX)?;
            (!value.is_empty()).then(|| (name.to_string(), Value::String(value.clone())))
        })
        .collect();
    let preset = (!preset.is_empty()).then_some(preset.as_str());
    let estimating = field("intent") == "estimate";
    if estimating || state.control.config().quota_enforce {
        match state
            .control
            .builds()
            .estimate_create(&viewer.caller, &template, preset, &parameters)
            .await
        {
            Ok(estimate) if estimating => {
                return render(
                    &state,
                    &viewer,
                    Some(&template),
                    &fields,
                    None,
                    Some(&estimate),
                    false,
                )
                .await
            }
            // Planned now, the create below reads it: one that does not fit
            // is refused before any Terraform runs.
            Ok(_) => {}
            Err(error) => {
                let problem = (
                    html::status_of(&error),
                    format!(
                        "{}: {}",
                        if estimating {
                            "No estimate"
                        } else {
                            "Not created"
                        },
                        html::message_of(&error)
                    ),
                );
                return render(
                    &state,
                    &viewer,
                    Some(&template),
                    &fields,
                    Some(problem),
                    None,
                    false,
                )
                .await;
            }
        }
    }
    match state
        .control
        .workspaces()
        .create(&viewer.caller, &name, &template, preset, parameters)
        .await
    {
        Ok((view, _)) => html::see_other(&workspace_url(
            &view.workspace.owner_name,
            &view.workspace.name,
        )),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not created: {}", html::message_of(&error)),
            );
            render(
                &state,
                &viewer,
                Some(&template),
                &fields,
                Some(problem),
                None,
                false,
            )
            .await
        }
    }
}
