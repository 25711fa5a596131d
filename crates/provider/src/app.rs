//! `abode_app`: an app served inside the workspace by one of its agents (an
//! IDE in the browser, a notebook, the app being built), which the platform
//! serves through its own address (docs/apps.md). Pure state: the platform
//! reads it from the state after a start; the agent checks its health.
//! Every rule is `abode_contract::apps`', checked at plan time so that a
//! template with a bad app fails its push.

use abode_contract::apps::{app_target, valid_slug, AppOpenIn, AppShare, MAX_SLUG};
use serde::{Deserialize, Serialize};
use tf_provider::schema::{Block, NestedBlock};
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use crate::plumbing::ResourceType;
use crate::schema::{
    attribute_error, block, boolean, computed, known, number, optional, required, string,
    with_default,
};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct HealthcheckState {
    url: Value<String>,
    interval: Value<i64>,
    threshold: Value<i64>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct AppState {
    id: Value<String>,
    agent_id: Value<String>,
    slug: Value<String>,
    display_name: Value<String>,
    url: Value<String>,
    command: Value<String>,
    subdomain: Value<bool>,
    share: Value<String>,
    icon: Value<String>,
    open_in: Value<String>,
    healthcheck: Value<Vec<Value<HealthcheckState>>>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AppResource;

/// Unique slugs per agent cannot be checked here (one resource at a
/// time): the platform refuses a state with two apps of one slug on one
/// agent when it reads it.
fn fill_defaults(state: &mut AppState) {
    if state.subdomain.is_null() {
        state.subdomain = false.into();
    }
    if state.share.is_null() {
        state.share = AppShare::Owner.as_str().to_string().into();
    }
    if state.open_in.is_null() {
        state.open_in = "tab".to_string().into();
    }
}

impl ResourceType for AppResource {
    type State = AppState;

    fn block(&self) -> Block {
        let mut schema = block(
            "An app served inside the workspace by one of its agents, which the platform \
             serves at its own address with the sharing level chosen here (docs/apps.md).",
            vec![
                ("id", computed(string(), "Identifier of this app.")),
                (
                    "agent_id",
                    required(
                        string(),
                        "The `id` of the `abode_agent` that serves the app.",
                    ),
                ),
                (
                    "slug",
                    required(
                        string(),
                        "The app's name in its URLs: lowercase letters, digits and dashes, \
                         unique among the agent's apps.",
                    ),
                ),
                ("display_name", optional(string(), "The name people see.")),
                (
                    "url",
                    optional(
                        string(),
                        "Where the app answers on the agent's side: http://HOST:PORT[/PATH].",
                    ),
                ),
                (
                    "command",
                    optional(
                        string(),
                        "A command the dashboard offers to run in a terminal, instead of a url.",
                    ),
                ),
                (
                    "subdomain",
                    with_default(
                        boolean(),
                        "Serve it on a host of its own under the server's wildcard access URL \
                         (default false: under the dashboard's address, when the server allows \
                         path apps).",
                    ),
                ),
                (
                    "share",
                    with_default(
                        string(),
                        "Who may open it: owner (default), authenticated, public.",
                    ),
                ),
                (
                    "icon",
                    optional(string(), "An icon's URL or path, for the dashboard."),
                ),
                (
                    "open_in",
                    with_default(
                        string(),
                        "Where the dashboard opens it: tab (default) or window.",
                    ),
                ),
            ],
        );
        schema.blocks.insert(
            "healthcheck".into(),
            NestedBlock::List(block(
                "How the agent checks the app (one block at most).",
                vec![
                    (
                        "url",
                        required(
                            string(),
                            "An http:// URL on the agent's side; 2xx and 3xx are healthy.",
                        ),
                    ),
                    ("interval", required(number(), "Seconds between checks.")),
                    (
                        "threshold",
                        required(
                            number(),
                            "Failed checks in a row before the app is unhealthy.",
                        ),
                    ),
                ],
            )),
        );
        schema
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        if let Some(slug) = known(&state.slug) {
            if !valid_slug(slug) {
                attribute_error(
                    diags,
                    "slug",
                    format!(
                        "abode_app slug `{slug}` is not valid: 1 to {MAX_SLUG} lowercase letters, \
                         digits and single dashes, not starting or ending with a dash"
                    ),
                );
            }
        }
        if let Some(share) = known(&state.share) {
            if AppShare::parse(share).is_none() {
                attribute_error(
                    diags,
                    "share",
                    format!(
                        "abode_app share `{share}` is not one of {}",
                        AppShare::NAMES
                    ),
                );
            }
        }
        if let Some(open_in) = known(&state.open_in) {
            if AppOpenIn::parse(open_in).is_none() {
                attribute_error(
                    diags,
                    "open_in",
                    format!("abode_app open_in `{open_in}` is not one of tab, window"),
                );
            }
        }
        // Both unknown at plan time is fine; both set, or neither once known,
        // is not.
        let url_set = !state.url.is_null();
        let command_set = !state.command.is_null();
        if url_set && command_set {
            attribute_error(
                diags,
                "url",
                "abode_app takes a url or a command, not both".into(),
            );
        }
        if !url_set && !command_set {
            attribute_error(
                diags,
                "url",
                "abode_app needs a url (an http:// address on the agent's side) or a command"
                    .into(),
            );
        }
        if let Some(url) = known(&state.url) {
            if let Err(error) = app_target(url) {
                attribute_error(diags, "url", format!("abode_app url: {error}"));
            }
        }
        let checks: Vec<&HealthcheckState> = known(&state.healthcheck)
            .into_iter()
            .flatten()
            .filter_map(known)
            .collect();
        if checks.len() > 1 {
            attribute_error(
                diags,
                "healthcheck",
                "abode_app takes one healthcheck block at most".into(),
            );
        }
        for check in checks {
            if let Some(url) = known(&check.url) {
                if let Err(error) = app_target(url) {
                    attribute_error(
                        diags,
                        "healthcheck",
                        format!("abode_app healthcheck url: {error}"),
                    );
                }
            }
            for (name, value) in [
                ("interval", &check.interval),
                ("threshold", &check.threshold),
            ] {
                if let Some(value) = known(value) {
                    if !(1..=86_400).contains(value) {
                        attribute_error(
                            diags,
                            "healthcheck",
                            format!(
                                "abode_app healthcheck {name} must be between 1 and 86400, not {value}"
                            ),
                        );
                    }
                }
            }
        }
    }

    fn defaults(&self, state: &mut Self::State, _config: &Self::State) {
        fill_defaults(state);
    }
}
