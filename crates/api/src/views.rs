//! The answers of docs/api.md, built from the control plane's records as
//! `abode-sdk` types (one definition of the wire, shared with the client).
//! Nothing secret is ever a field here: no password hash, no token hash, no
//! plan, no state.

use abode_control::presets::PresetDefinition;
use abode_control::{AgentHealth, AgentStatus, WorkspaceView as ControlWorkspaceView};
use abode_sdk as sdk;
use abode_store::{
    AuditEvent, Build, LogLine, Protection, Role, Roles, Template, TemplateVersion, User,
};
use serde::Serialize;
use serde_json::Value;

/// A count or number the store keeps signed, as the wire's unsigned one (the
/// store never holds a negative one).
pub(crate) fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub fn user_view(user: &User, roles: &Roles) -> sdk::User {
    sdk::User {
        id: user.id.clone(),
        username: user.username.clone(),
        email: user.email.clone(),
        // Every role the user holds, widest first, and the widest of the
        // first schema's three roles (for clients from before `roles`).
        roles: roles
            .iter()
            .map(|role| Role::as_str(role).to_string())
            .collect(),
        role: roles.legacy_role().to_string(),
        created_at: Some(rfc3339(user.created_at)),
        status: Some(user.status.to_string()),
        last_seen_at: user.last_seen_at.map(rfc3339),
        groups: None,
    }
}

/// A person as the user directory shows them: [`user_view`] with their
/// groups.
pub fn user_entry_view(entry: &abode_store::UserEntry) -> sdk::User {
    sdk::User {
        groups: Some(entry.groups.clone()),
        ..user_view(&entry.user, &entry.roles)
    }
}

pub fn template_view(template: &Template) -> sdk::Template {
    sdk::Template {
        id: template.id.clone(),
        name: template.name.clone(),
        active_version: template.active_version.map(unsigned),
        created_at: Some(rfc3339(template.created_at)),
        updated_at: Some(rfc3339(template.updated_at)),
        deprecation: deprecation_view(template),
    }
}

/// A template's deprecation, if it is deprecated.
pub fn deprecation_view(template: &Template) -> Option<sdk::Deprecation> {
    template
        .deprecation_message
        .as_ref()
        .map(|message| sdk::Deprecation {
            message: message.clone(),
            replacement: template.deprecation_replacement.clone(),
        })
}

pub fn version_view(version: &TemplateVersion) -> sdk::TemplateVersion {
    sdk::TemplateVersion {
        id: version.id.clone(),
        template: version.template_name.clone(),
        number: unsigned(version.number),
        active: version.active,
        message: Some(version.message.clone()),
        created_by: Some(version.created_by.clone()),
        created_at: Some(rfc3339(version.created_at)),
        validation: sdk::Validation {
            ok: version.validation_ok,
            message: version.validation_message.clone(),
        },
    }
}

/// A preset of a template version (`GET /templates/{name}/presets`).
pub fn preset_view(preset: &PresetDefinition) -> sdk::Preset {
    sdk::Preset {
        name: preset.name.clone(),
        parameters: preset.parameters.clone(),
        prebuilds: preset
            .prebuilds
            .as_ref()
            .map(|prebuilds| sdk::PresetPrebuilds {
                instances: prebuilds.instances,
                ttl_seconds: prebuilds.ttl_seconds,
                scheduling: prebuilds
                    .scheduling
                    .as_ref()
                    .map(|scheduling| sdk::PresetScheduling {
                        timezone: scheduling.timezone.clone(),
                        schedules: scheduling
                            .schedules
                            .iter()
                            .map(|schedule| sdk::PresetSchedule {
                                cron: schedule.cron.clone(),
                                instances: schedule.instances,
                            })
                            .collect(),
                    }),
            }),
    }
}

/// A build as docs/api.md shows it, with the guard's report the store
/// decoded.
pub type BuildView = sdk::Build<abode_guard::Report>;

/// A workspace as docs/api.md shows it, with its parameters and its latest
/// build's report as the store decoded them.
pub type WorkspaceView = sdk::Workspace<abode_guard::Report>;

pub fn build_view(build: &Build) -> BuildView {
    sdk::Build {
        id: build.id.clone(),
        workspace: build.workspace_name.clone(),
        owner: build.owner_name.clone(),
        number: unsigned(build.number),
        transition: build.transition,
        status: build.status.as_str().to_string(),
        template_version: unsigned(build.template_version),
        // Who asked for the build: a username, or a system actor's name.
        initiator: Some(build.initiator_name.clone()),
        // `user`, or `system` for the server, the scheduler or prebuilds.
        initiator_type: Some(
            if abode_store::SystemActor::by_user_id(&build.initiator_id).is_some() {
                "system"
            } else {
                "user"
            }
            .to_string(),
        ),
        reason: Some(build.reason.as_str().to_string()),
        error: build.error.clone(),
        created_at: Some(rfc3339(build.created_at)),
        started_at: build.started_at.map(rfc3339),
        finished_at: build.finished_at.map(rfc3339),
        guard: build.guard_report.clone(),
        plan_digest: build.plan_digest.clone(),
        expires_at: build.expires_at.map(rfc3339),
        confirmed_by: build.confirmed_by.clone(),
        confirmed_at: build.confirmed_at.map(rfc3339),
        daily_cost: build.daily_cost,
        refusal: build.refusal.clone(),
        rename_to: build.rename_to.clone(),
        then_start: build.then_start,
        waiting: build.waiting.clone(),
    }
}

fn agent_status(status: AgentStatus) -> &'static str {
    match status {
        AgentStatus::None => "none",
        AgentStatus::Connecting => "connecting",
        AgentStatus::Starting => "starting",
        AgentStatus::Ready => "ready",
        AgentStatus::StartError => "start_error",
        AgentStatus::Unhealthy => "unhealthy",
        AgentStatus::Disconnected => "disconnected",
    }
}

pub fn agent_view(health: &AgentHealth) -> sdk::AgentInfo {
    sdk::AgentInfo {
        status: agent_status(health.status).to_string(),
        lifecycle: health.lifecycle.clone(),
        last_heartbeat_at: health.last_heartbeat_at.map(rfc3339),
        connected_at: health.connected_at.map(rfc3339),
        reason: health.reason.clone(),
    }
}

pub fn workspace_view(view: &ControlWorkspaceView) -> WorkspaceView {
    let workspace = &view.workspace;
    sdk::Workspace {
        id: workspace.id.clone(),
        name: workspace.name.clone(),
        owner: workspace.owner_name.clone(),
        template: workspace.template_name.clone(),
        template_version: unsigned(workspace.template_version),
        parameters: workspace.parameters.clone(),
        // The preset the workspace was created with, if any.
        preset: workspace.preset_name.clone(),
        status: view.status.as_str().to_string(),
        created_at: Some(rfc3339(workspace.created_at)),
        updated_at: Some(rfc3339(workspace.updated_at)),
        latest_build: Some(build_view(&view.latest_build)),
        agent: agent_view(&view.agent),
        healthy: view.healthy,
        // Present when a build whose provisioner was lost still holds the
        // workspace's state lock: new builds wait until it reports its
        // Terraform ended, or an owner or template admin unlocks it.
        locked_by_lost_holder: view
            .locked_by_lost_holder
            .as_ref()
            .map(|lock| sdk::LostLock {
                build_number: lock.build_number,
                holder: lock.holder.clone(),
                taken_at: Some(rfc3339(lock.taken_at)),
                lost_at: Some(rfc3339(lock.lost_at)),
            }),
        // Where its volumes and processes are: only that host builds it.
        host: workspace.host.clone(),
        template_deprecation: None,
        shared: view.shared,
    }
}

pub fn app_view(view: &abode_gateway::AppView) -> sdk::App {
    let definition = &view.app.definition;
    sdk::App {
        agent: view.app.agent_name.clone(),
        slug: definition.slug.clone(),
        display_name: definition.display_name.clone(),
        url: view.url().map(str::to_string),
        path_url: view.path_url.clone(),
        subdomain_url: view.subdomain_url.clone(),
        internal_url: definition.url.clone(),
        command: definition.command.clone(),
        subdomain: definition.subdomain,
        share: definition.share,
        health: view.app.health,
        open_in: definition.open_in,
        icon: definition.icon.clone(),
        healthcheck: definition.healthcheck.clone(),
    }
}

pub fn protection_view(protection: &Protection) -> sdk::Protection {
    sdk::Protection {
        address: protection.address.clone(),
        mode: protection.mode.clone(),
        updated_at: Some(rfc3339(protection.updated_at)),
    }
}

pub fn audit_event_view(event: &AuditEvent) -> sdk::AuditEvent {
    sdk::AuditEvent {
        id: Value::from(event.id),
        time: Some(rfc3339(event.time)),
        actor: event.actor_name.clone(),
        action: event.action.clone(),
        target_type: Some(event.target_type.clone()),
        target: Some(event.target.clone()),
        outcome: Some(event.outcome.clone()),
        request_id: event.request_id.clone(),
        details: event.details.clone(),
        client_ip: event.client_ip.clone(),
        user_agent: event.user_agent.clone(),
        status_code: event.status_code.and_then(|code| u16::try_from(code).ok()),
    }
}

pub fn connection_log_view(entry: &abode_store::ConnectionLogEntry) -> sdk::ConnectionLogEntry {
    sdk::ConnectionLogEntry {
        id: entry.id.clone(),
        user: entry.user_name.clone(),
        token_name: entry.token_name.clone(),
        workspace: entry.workspace_name.clone(),
        kind: entry.kind.clone(),
        app: entry.app.clone(),
        port: entry.port.and_then(|port| u16::try_from(port).ok()),
        client_ip: entry.client_ip.clone(),
        user_agent: entry.user_agent.clone(),
        opened_at: rfc3339(entry.opened_at),
        closed_at: entry.closed_at.map(rfc3339),
        bytes_to_workspace: unsigned(entry.bytes_to_workspace),
        bytes_from_workspace: unsigned(entry.bytes_from_workspace),
        end_reason: entry.end_reason.clone(),
        server_id: entry.server_id.clone(),
    }
}

pub fn log_line_view(line: &LogLine) -> sdk::LogLine {
    sdk::LogLine {
        seq: unsigned(line.seq),
        time: Some(rfc3339(line.time)),
        stage: line.stage.to_string(),
        level: line.level.to_string(),
        text: line.text.clone(),
    }
}

/// Unix milliseconds as RFC 3339 in UTC with milliseconds,
/// e.g. `2026-11-29T17:40:00.123Z`.
pub fn rfc3339(ms: i64) -> String {
    Rfc3339(ms).to_string()
}

/// Unix milliseconds that serialize as [`rfc3339`] text, written straight into
/// the answer (a page has hundreds of times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rfc3339(pub i64);

impl std::fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = abode_clock::UtcTime::from_ms(self.0);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year, t.month, t.day, t.hour, t.minute, t.second, t.millis
        )
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Unix milliseconds of an RFC 3339 time (`2024-05-01T12:00:00Z`, optional
/// fraction, `Z` or `+HH:MM`); `None` if it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse().ok())?
    };
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded: String = fraction[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = padded.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hours = number(text.len() - 5..text.len() - 3)?;
            let minutes = number(text.len() - 2..text.len())?;
            sign * (hours * 60 + minutes)
        }
        _ => return None,
    };
    let days = abode_clock::days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// A fleet preview's summary (`GET /templates/{name}/versions/{n}/previews/latest`):
/// `done` once every workspace is planned (or skipped) and the counts are
/// final; `activation_concern` says why activating the version asks for
/// confirmation (null when it does not).
pub fn preview_view(preview: &abode_store::Preview) -> sdk::Preview {
    sdk::Preview {
        id: preview.id.clone(),
        template: preview.template_name.clone(),
        version: unsigned(preview.version),
        requested_by: preview.requested_by.clone(),
        created_at: rfc3339(preview.created_at),
        done: preview.pending == 0,
        finished_at: preview
            .finished_at
            .filter(|_| preview.pending == 0)
            .map(rfc3339),
        total: unsigned(preview.total),
        pending: unsigned(preview.pending),
        allowed: unsigned(preview.allowed),
        held: unsigned(preview.held),
        blocked: unsigned(preview.blocked),
        failed: unsigned(preview.failed),
        skipped: unsigned(preview.skipped),
        activation_concern: abode_control::previews::activation_concern(preview),
    }
}

/// One workspace's preview: what the guard would decide for a build of the
/// version, with its report (sensitive values hidden as in every report)
/// and the lint findings on the resources of its protected changes.
pub fn preview_result_view(entry: &abode_control::previews::PreviewEntry) -> sdk::PreviewResult {
    let result = &entry.result;
    sdk::PreviewResult {
        workspace: format!("{}/{}", result.owner_name, result.workspace_name),
        status: result.status.as_str().to_string(),
        transition: result
            .transition
            .map(|transition| transition.as_str().to_string()),
        decision: entry.decision.map(|decision| decision.as_str().to_string()),
        // Why there is no decision: the plan's error, or why it was skipped.
        error: result.error.clone(),
        report: entry.report.clone(),
        lint: entry
            .lint
            .iter()
            .map(|link| sdk::PreviewLintLink {
                address: link.address.clone(),
                rule: link.rule.clone(),
                attribute: link.attribute.clone(),
            })
            .collect(),
        started_at: result.started_at.map(rfc3339),
        finished_at: result.finished_at.map(rfc3339),
    }
}

/// A create's estimate as the wire carries it.
pub(crate) fn estimate_view(
    estimate: &abode_control::create_estimate::CreateEstimate,
) -> abode_sdk::CreateEstimate {
    abode_sdk::CreateEstimate {
        template: estimate.template.clone(),
        version: estimate.version,
        preset: estimate.preset.clone(),
        source: estimate.source.as_str().to_string(),
        daily_cost: estimate.daily_cost,
        items: estimate
            .items
            .iter()
            .map(|item| abode_sdk::CostItem {
                metadata: item.metadata.clone(),
                resource: item.resource.clone(),
                daily_cost: i64::try_from(item.daily_cost).unwrap_or(i64::MAX),
            })
            .collect(),
        unknown: estimate.unknown.clone(),
        enforced: estimate.enforced,
        budget: estimate.budget,
        spent: estimate.spent,
        remaining: estimate.remaining(),
        fits: estimate.fits(),
    }
}

/// A build's timings as the API shows them (`GET .../builds/{n}/timings`):
/// offsets from the first stage's start, lengths to the microsecond.
pub fn timings_view(build: &Build, timings: &abode_store::BuildTimings) -> sdk::BuildTimings {
    let first = timings
        .stages
        .iter()
        .map(|stage| stage.started_us)
        .chain(timings.resources.iter().map(|resource| resource.started_us))
        .min()
        .unwrap_or(0);
    let seconds = |from: i64, to: i64| (to - from) as f64 / 1e6;
    let at = |us: i64| rfc3339(us.div_euclid(1000));
    let run = |job: &str| match job.strip_prefix("agent:") {
        Some(name) => ("agent".to_string(), Some(name.to_string())),
        None => (job.to_string(), None),
    };
    sdk::BuildTimings {
        workspace: format!("{}/{}", build.owner_name, build.workspace_name),
        build: build.number,
        status: build.status,
        stages: timings
            .stages
            .iter()
            .map(|stage| {
                let (run, agent) = run(&stage.job);
                sdk::StageTiming {
                    stage: stage.stage.clone(),
                    run,
                    agent,
                    started_at: at(stage.started_us),
                    ended_at: stage.ended_us.map(at),
                    offset_seconds: seconds(first, stage.started_us),
                    seconds: stage.ended_us.map(|ended| seconds(stage.started_us, ended)),
                }
            })
            .collect(),
        resources: timings
            .resources
            .iter()
            .map(|resource| sdk::ResourceTiming {
                run: resource.job.clone(),
                phase: resource.phase.clone(),
                address: resource.address.clone(),
                action: resource.action.clone(),
                started_at: at(resource.started_us),
                ended_at: at(resource.ended_us),
                offset_seconds: seconds(first, resource.started_us),
                seconds: seconds(resource.started_us, resource.ended_us),
            })
            .collect(),
    }
}
