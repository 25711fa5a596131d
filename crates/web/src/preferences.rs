//! One's notification preferences: which kinds reach you (on every
//! channel), except the kinds the owners made mandatory; and, for owners,
//! which kinds are mandatory. The API's `notification_settings`,
//! `change_notification_settings` and `set_notification_kind_mandatory`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};

use abode_control::authz::{self, Action};
use abode_control::notifications::{parse_kind, KindSetting};
use abode_store::NotificationKind;

use crate::html::{self, page as whole_page, respond, words};
use crate::nav::header;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// What a kind means, in a sentence.
fn meaning(kind: NotificationKind) -> &'static str {
    match kind {
        NotificationKind::BuildHeld => "a build of yours waits for you to confirm its plan",
        NotificationKind::BuildBlocked => "the plan guard blocked a build of yours",
        NotificationKind::BuildFailed => "a build of yours failed",
        NotificationKind::HeldBuildExpiring => "a held build expires within the hour",
        NotificationKind::HeldBuildExpired => "a held build expired unconfirmed",
        NotificationKind::PrebuildResourceReplaced => {
            "claiming a prebuilt workspace replaced some of its resources"
        }
        NotificationKind::PresetHardLimited => {
            "a preset's prebuild pool stopped after repeated failures"
        }
        NotificationKind::WorkspaceDormant => "a workspace of yours became dormant",
        NotificationKind::PresetQuotaLimited => {
            "the prebuilds budget holds a preset's pool below its desired count"
        }
        NotificationKind::PresetQuotaRecovered => {
            "the prebuilds budget no longer holds a preset's pool back"
        }
        NotificationKind::WorkspaceDeletionScheduled => {
            "a dormant workspace of yours is due for deletion"
        }
        NotificationKind::ResourceRetained => "a workspace delete retained a resource of yours",
        NotificationKind::RetainedExpiring => "a retained resource of yours expires within a week",
        NotificationKind::RetainedExpired => "a retained resource of yours expired",
        NotificationKind::DiskFullWarning => "a workspace's home volume is nearly full",
        NotificationKind::WorkspaceResourceHigh => {
            "a workspace's memory or a volume crossed its monitor's threshold"
        }
        NotificationKind::DeleteHeldUnsaved => {
            "an automatic delete was held: the workspace has unsaved work"
        }
    }
}

pub(crate) async fn page(State(state): State<WebState>, viewer: Viewer) -> Response {
    render(&state, &viewer, None).await
}

async fn render(
    state: &WebState,
    viewer: &Viewer,
    problem: Option<(StatusCode, String)>,
) -> Response {
    let settings = match state.control.notifications().settings(&viewer.caller).await {
        Ok(settings) => settings,
        Err(error) => return html::control_error(error),
    };
    let may_set_policy =
        authz::authorize(&viewer.caller.subject(), Action::NotificationPolicy, None).is_ok();
    let status = problem
        .as_ref()
        .map_or(StatusCode::OK, |(status, _)| *status);
    let body = html! {
        h1 { "Notification settings" }
        p { a href="/notifications" { "Back to the inbox" } }
        @if let Some((_, message)) = &problem {
            p class="error" role="alert" { (message) }
        }
        (preferences_form(&settings, &viewer.csrf))
        @if may_set_policy {
            h2 { "Mandatory kinds" }
            p class="muted" { "A mandatory kind reaches everyone, whatever their preferences." }
            (policy_table(&settings, &viewer.csrf))
        }
    };
    respond(
        status,
        whole_page("Notification settings", Some(header(viewer)), body),
    )
}

fn preferences_form(settings: &[KindSetting], csrf: &str) -> Markup {
    html! {
        form method="post" action="/notifications/settings" {
            input type="hidden" name=(CSRF_FIELD) value=(csrf);
            fieldset {
                legend { "Send me these notifications (inbox, email and webhook)" }
                @for setting in settings {
                    @let id = format!("kind-{}", setting.kind.as_str());
                    label for=(id) {
                        input id=(id) name="enabled" type="checkbox" value=(setting.kind.as_str())
                            checked[setting.enabled] disabled[setting.mandatory];
                        " " (words(setting.kind.as_str()))
                        @if setting.mandatory { " (mandatory on this server)" }
                        br;
                        span class="muted" { (meaning(setting.kind)) }
                    }
                }
            }
            p { button class="primary" type="submit" { "Save preferences" } }
        }
    }
}

fn policy_table(settings: &[KindSetting], csrf: &str) -> Markup {
    html! {
        table {
            thead { tr {
                th scope="col" { "Kind" }
                th scope="col" { "Mandatory" }
                th scope="col" { "Change" }
            } }
            tbody {
                @for setting in settings {
                    tr {
                        td { (words(setting.kind.as_str())) }
                        td { @if setting.mandatory { "yes" } @else { "no" } }
                        td {
                            form method="post" action="/notifications/mandatory" {
                                input type="hidden" name=(CSRF_FIELD) value=(csrf);
                                input type="hidden" name="kind" value=(setting.kind.as_str());
                                input type="hidden" name="mandatory" value=(if setting.mandatory { "false" } else { "true" });
                                button type="submit" {
                                    @if setting.mandatory { "Make optional" } @else { "Make mandatory" }
                                    span class="skip" { " (" (words(setting.kind.as_str())) ")" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What the form asks: the checked kinds enabled, every other kind that is
/// not mandatory disabled (a mandatory kind's box is disabled, so it is
/// never sent and never asked about).
fn change_of(
    settings: &[KindSetting],
    checked: &[NotificationKind],
) -> (Vec<NotificationKind>, Vec<NotificationKind>) {
    let mut disable = Vec::new();
    let mut enable = Vec::new();
    for setting in settings.iter().filter(|setting| !setting.mandatory) {
        if checked.contains(&setting.kind) {
            enable.push(setting.kind);
        } else {
            disable.push(setting.kind);
        }
    }
    (disable, enable)
}

pub(crate) async fn save(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let checked: Result<Vec<NotificationKind>, _> = fields
        .iter()
        .filter(|(name, _)| name == "enabled")
        .map(|(_, value)| parse_kind(value))
        .collect();
    let result = match checked {
        Ok(checked) => match state.control.notifications().settings(&viewer.caller).await {
            Ok(settings) => {
                let (disable, enable) = change_of(&settings, &checked);
                state
                    .control
                    .notifications()
                    .change_settings(&viewer.caller, &disable, &enable)
                    .await
            }
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    match result {
        Ok(_) => html::see_other("/notifications/settings"),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not saved: {}", html::message_of(&error)),
            );
            render(&state, &viewer, Some(problem)).await
        }
    }
}

#[derive(serde::Deserialize)]
pub(crate) struct MandatoryForm {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    mandatory: String,
}

pub(crate) async fn mandatory(
    State(state): State<WebState>,
    viewer: Viewer,
    Form(form): Form<MandatoryForm>,
) -> Response {
    let result = match parse_kind(&form.kind) {
        Ok(kind) => {
            state
                .control
                .notifications()
                .set_kind_mandatory(&viewer.caller, kind, form.mandatory == "true")
                .await
        }
        Err(error) => Err(error),
    };
    match result {
        Ok(()) => html::see_other("/notifications/settings"),
        Err(error) => {
            let problem = (
                html::status_of(&error),
                format!("Not changed: {}", html::message_of(&error)),
            );
            render(&state, &viewer, Some(problem)).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(kind: NotificationKind, enabled: bool, mandatory: bool) -> KindSetting {
        KindSetting {
            kind,
            enabled,
            mandatory,
        }
    }

    #[test]
    fn the_form_states_every_optional_kind() {
        use NotificationKind::*;
        let settings = [
            setting(BuildHeld, true, true),
            setting(BuildFailed, true, false),
            setting(WorkspaceDormant, false, false),
        ];
        let cases: [(
            &[NotificationKind],
            &[NotificationKind],
            &[NotificationKind],
        ); 3] = [
            (&[], &[BuildFailed, WorkspaceDormant], &[]),
            (&[WorkspaceDormant], &[BuildFailed], &[WorkspaceDormant]),
            // A mandatory kind sent anyway is not asked about.
            (
                &[BuildHeld, BuildFailed],
                &[WorkspaceDormant],
                &[BuildFailed],
            ),
        ];
        for (checked, disable, enable) in cases {
            let (got_disable, got_enable) = change_of(&settings, checked);
            assert_eq!(got_disable, disable, "{checked:?}");
            assert_eq!(got_enable, enable, "{checked:?}");
        }
    }

    #[test]
    fn mandatory_kinds_are_checked_and_locked() {
        let form = preferences_form(
            &[
                setting(NotificationKind::BuildHeld, true, true),
                setting(NotificationKind::BuildFailed, false, false),
            ],
            "tok",
        )
        .into_string();
        assert!(
            form.contains("value=\"build_held\" checked disabled"),
            "{form}"
        );
        assert!(form.contains("(mandatory on this server)"), "{form}");
        assert!(form.contains("id=\"kind-build_failed\" name=\"enabled\" type=\"checkbox\" value=\"build_failed\">"), "{form}");
        assert!(form.contains("for=\"kind-build_failed\""), "{form}");
    }
}
