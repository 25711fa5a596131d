//! The rules of a workspace's life, as pure functions: what status a
//! workspace is in, which build may start now, and whether its agent is
//! healthy. Kept free of I/O so that the rules are tested on their own.

use std::time::Duration;

use abode_store::{Agent, AgentLifecycle, Build, BuildStatus, Transition, Workspace};
use serde::Serialize;

use crate::ControlError;

/// A workspace's status, read from its latest build (see docs/api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceStatus {
    Pending,
    Starting,
    Stopping,
    Deleting,
    Running,
    Stopped,
    Deleted,
    /// The latest build is held by the guard until someone confirms its plan.
    AwaitingConfirmation,
    Failed,
    Canceled,
}

impl WorkspaceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceStatus::Pending => "pending",
            WorkspaceStatus::Starting => "starting",
            WorkspaceStatus::Stopping => "stopping",
            WorkspaceStatus::Deleting => "deleting",
            WorkspaceStatus::Running => "running",
            WorkspaceStatus::Stopped => "stopped",
            WorkspaceStatus::Deleted => "deleted",
            WorkspaceStatus::AwaitingConfirmation => "awaiting_confirmation",
            WorkspaceStatus::Failed => "failed",
            WorkspaceStatus::Canceled => "canceled",
        }
    }
}

pub fn workspace_status(latest: &Build) -> WorkspaceStatus {
    status_of(latest.status, latest.transition)
}

/// The workspace status a latest build of this status and transition means.
pub fn status_of(status: BuildStatus, transition: Transition) -> WorkspaceStatus {
    match (status, transition) {
        (BuildStatus::Pending, _) => WorkspaceStatus::Pending,
        (BuildStatus::Running, Transition::Start) => WorkspaceStatus::Starting,
        (BuildStatus::Running, Transition::Stop) => WorkspaceStatus::Stopping,
        (BuildStatus::Running, Transition::Delete) => WorkspaceStatus::Deleting,
        (BuildStatus::Succeeded, Transition::Start) => WorkspaceStatus::Running,
        (BuildStatus::Succeeded, Transition::Stop) => WorkspaceStatus::Stopped,
        (BuildStatus::Succeeded, Transition::Delete) => WorkspaceStatus::Deleted,
        (BuildStatus::AwaitingConfirmation, _) => WorkspaceStatus::AwaitingConfirmation,
        (BuildStatus::Failed, _) => WorkspaceStatus::Failed,
        (BuildStatus::Canceled, _) => WorkspaceStatus::Canceled,
    }
}

/// The latest builds that put a workspace in `status`: a build status and,
/// where it matters, a transition (the inverse of [`status_of`]), so that a
/// list filters by status in its query.
pub fn latest_build_for(status: WorkspaceStatus) -> (BuildStatus, Option<Transition>) {
    match status {
        WorkspaceStatus::Pending => (BuildStatus::Pending, None),
        WorkspaceStatus::Starting => (BuildStatus::Running, Some(Transition::Start)),
        WorkspaceStatus::Stopping => (BuildStatus::Running, Some(Transition::Stop)),
        WorkspaceStatus::Deleting => (BuildStatus::Running, Some(Transition::Delete)),
        WorkspaceStatus::Running => (BuildStatus::Succeeded, Some(Transition::Start)),
        WorkspaceStatus::Stopped => (BuildStatus::Succeeded, Some(Transition::Stop)),
        WorkspaceStatus::Deleted => (BuildStatus::Succeeded, Some(Transition::Delete)),
        WorkspaceStatus::AwaitingConfirmation => (BuildStatus::AwaitingConfirmation, None),
        WorkspaceStatus::Failed => (BuildStatus::Failed, None),
        WorkspaceStatus::Canceled => (BuildStatus::Canceled, None),
    }
}

impl std::str::FromStr for WorkspaceStatus {
    type Err = ControlError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        const ALL: [WorkspaceStatus; 10] = [
            WorkspaceStatus::Pending,
            WorkspaceStatus::Starting,
            WorkspaceStatus::Stopping,
            WorkspaceStatus::Deleting,
            WorkspaceStatus::Running,
            WorkspaceStatus::Stopped,
            WorkspaceStatus::Deleted,
            WorkspaceStatus::AwaitingConfirmation,
            WorkspaceStatus::Failed,
            WorkspaceStatus::Canceled,
        ];
        ALL.into_iter()
            .find(|status| status.as_str() == value)
            .ok_or_else(|| {
                ControlError::BadRequest(format!(
                    "unknown workspace status \"{}\" (one of: {})",
                    value.escape_debug(),
                    ALL.map(WorkspaceStatus::as_str).join(", ")
                ))
            })
    }
}

/// Decides whether a new build with `transition` on `version_id` may start
/// now; the refusal says why in one line.
pub fn check_new_build(
    workspace: &Workspace,
    latest: &Build,
    transition: Transition,
    version_id: &str,
) -> Result<(), ControlError> {
    check_idle(workspace, latest)?;
    let name = &workspace.name;
    match (transition, workspace_status(latest)) {
        (Transition::Start, WorkspaceStatus::Running)
            if latest.template_version_id == version_id =>
        {
            Err(ControlError::Conflict(format!(
                "workspace \"{name}\" is already running (version {})",
                latest.template_version
            )))
        }
        (Transition::Stop, WorkspaceStatus::Stopped) => Err(ControlError::Conflict(format!(
            "workspace \"{name}\" is already stopped"
        ))),
        _ => Ok(()),
    }
}

/// Decides whether the workspace may be renamed now, and which transition
/// its rename build runs: the one its last succeeded build left it in (a
/// running workspace is started again, a stopped one stopped again, also
/// after a canceled or failed build since), so that the plan shows only
/// what the new name changes.
pub fn check_rename_build(
    workspace: &Workspace,
    latest: &Build,
    last_succeeded: Option<&Build>,
) -> Result<Transition, ControlError> {
    check_idle(workspace, latest)?;
    match last_succeeded.map(|build| build.transition) {
        Some(Transition::Start) => Ok(Transition::Start),
        Some(Transition::Stop) => Ok(Transition::Stop),
        _ => Err(ControlError::Conflict(format!(
            "workspace \"{}\" has never been built: delete it or start it before renaming it",
            workspace.name
        ))),
    }
}

/// A workspace that is not deleted and has no build pending, running or held.
fn check_idle(workspace: &Workspace, latest: &Build) -> Result<(), ControlError> {
    let name = &workspace.name;
    if workspace.deleted {
        return Err(ControlError::Conflict(format!(
            "workspace \"{name}\" was deleted"
        )));
    }
    if latest.status == BuildStatus::AwaitingConfirmation {
        return Err(ControlError::Conflict(format!(
            "workspace \"{name}\" has build #{} ({}) awaiting confirmation; confirm or cancel it first",
            latest.number, latest.transition
        )));
    }
    if !latest.status.is_final() {
        return Err(ControlError::Conflict(format!(
            "workspace \"{name}\" already has build #{} ({}) {}; wait for it or cancel it",
            latest.number, latest.transition, latest.status
        )));
    }
    Ok(())
}

/// The agent's status as users see it, told apart from the build status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    None,
    Connecting,
    Starting,
    Ready,
    /// The agent connected but its startup script failed.
    StartError,
    Unhealthy,
    Disconnected,
}

/// How long agents get before they count as unhealthy or disconnected.
#[derive(Debug, Clone, Copy)]
pub struct AgentTimeouts {
    pub connect: Duration,
    pub heartbeat: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentHealth {
    pub status: AgentStatus,
    pub lifecycle: Option<String>,
    pub connected_at: Option<i64>,
    pub last_heartbeat_at: Option<i64>,
    /// One line saying why the agent is not usable, when the status alone
    /// does not say it (a failed startup script).
    pub reason: Option<String>,
}

/// The one-line reason of a failed start, from the script's exit status
/// (`None`: the script could not be run at all).
pub fn start_error_reason(exit_status: Option<i64>) -> String {
    match exit_status {
        Some(status) => format!("startup script exited with status {status}"),
        None => "startup script could not be run".to_string(),
    }
}

/// The health of a workspace's agents at `now` (Unix ms). With several
/// agents, the worst one speaks for the workspace.
pub fn agent_health(
    latest: &Build,
    agents: &[Agent],
    now: i64,
    timeouts: AgentTimeouts,
) -> AgentHealth {
    agent_health_after(
        workspace_status(latest),
        latest.finished_at,
        agents,
        now,
        timeouts,
    )
}

/// [`agent_health`] from what it reads of the settled build: the status it
/// left the workspace in and when it finished. Lists read only these.
pub fn agent_health_after(
    settled: WorkspaceStatus,
    finished_at: Option<i64>,
    agents: &[Agent],
    now: i64,
    timeouts: AgentTimeouts,
) -> AgentHealth {
    let none = AgentHealth {
        status: AgentStatus::None,
        lifecycle: None,
        connected_at: None,
        last_heartbeat_at: None,
        reason: None,
    };
    if settled != WorkspaceStatus::Running {
        return none;
    }
    let since_build = now - finished_at.unwrap_or(now);
    let rank = |status: AgentStatus| match status {
        AgentStatus::Unhealthy => 6,
        AgentStatus::StartError => 5,
        AgentStatus::Disconnected => 4,
        AgentStatus::Connecting => 3,
        AgentStatus::Starting => 2,
        AgentStatus::Ready => 1,
        AgentStatus::None => 0,
    };
    agents
        .iter()
        .map(|agent| {
            let status = match agent.last_heartbeat_at {
                None if since_build > millis(timeouts.connect) => AgentStatus::Unhealthy,
                None => AgentStatus::Connecting,
                Some(beat) if now - beat > millis(timeouts.heartbeat) => AgentStatus::Disconnected,
                Some(_) => match agent.lifecycle {
                    Some(AgentLifecycle::Ready) => AgentStatus::Ready,
                    Some(AgentLifecycle::StartError) => AgentStatus::StartError,
                    Some(AgentLifecycle::Starting) | None => AgentStatus::Starting,
                },
            };
            AgentHealth {
                status,
                lifecycle: agent.lifecycle.map(|l| l.as_str().to_string()),
                connected_at: agent.connected_at,
                last_heartbeat_at: agent.last_heartbeat_at,
                reason: (status == AgentStatus::StartError)
                    .then(|| start_error_reason(agent.exit_status)),
            }
        })
        .max_by_key(|health| rank(health.status))
        .unwrap_or(none)
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn build(transition: &str, status: &str, version: &str) -> Build {
        Build {
            id: "b".into(),
            workspace_id: "w".into(),
            workspace_name: "dev".into(),
            owner_name: "alice".into(),
            number: 4,
            transition: transition.parse().unwrap(),
            status: status.parse().unwrap(),
            template_version_id: version.into(),
            template_version: 1,
            initiator_id: "u".into(),
            initiator_name: "alice".into(),
            reason: abode_store::BuildReason::Initiator,
            parameters: None,
            error: None,
            guard_report: None,
            created_at: 0,
            started_at: Some(0),
            finished_at: Some(1_000),
            plan_digest: None,
            expires_at: None,
            confirmed_by: None,
            confirmed_at: None,
            daily_cost: None,
            refusal: None,
            rename_to: None,
            then_start: false,
            waiting: None,
        }
    }

    fn workspace(deleted: bool) -> Workspace {
        Workspace {
            id: "w".into(),
            name: "dev".into(),
            owner_id: "u".into(),
            owner_name: "alice".into(),
            owner_email: "a@x".into(),
            template_id: "t".into(),
            template_name: "base".into(),
            template_version_id: "v1".into(),
            template_version: 1,
            parameters: abode_store::Parameters::new(),
            preset_name: None,
            deleted,
            created_at: 0,
            updated_at: 0,
            host: None,
        }
    }

    /// (latest transition, latest status, requested transition, version, expected: Ok or error kind)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        Result<(), &'static str>,
    );

    #[test]
    fn which_builds_may_start() {
        let cases: &[Case] = &[
            ("start", "succeeded", "start", "v1", Err("conflict")),
            ("start", "succeeded", "start", "v2", Ok(())),
            ("start", "succeeded", "stop", "v1", Ok(())),
            ("start", "succeeded", "delete", "v1", Ok(())),
            ("stop", "succeeded", "stop", "v1", Err("conflict")),
            ("stop", "succeeded", "start", "v1", Ok(())),
            ("start", "failed", "start", "v1", Ok(())),
            ("start", "failed", "stop", "v1", Ok(())),
            ("start", "canceled", "start", "v1", Ok(())),
            ("start", "pending", "stop", "v1", Err("conflict")),
            ("start", "running", "delete", "v1", Err("conflict")),
            (
                "stop",
                "awaiting_confirmation",
                "start",
                "v1",
                Err("conflict"),
            ),
            (
                "start",
                "awaiting_confirmation",
                "delete",
                "v1",
                Err("conflict"),
            ),
        ];
        for (last_transition, last_status, transition, version, expected) in cases {
            let latest = build(last_transition, last_status, "v1");
            let requested = transition.parse().unwrap();
            let result = check_new_build(&workspace(false), &latest, requested, version)
                .map_err(|error| error.code());
            assert_eq!(
                result, *expected,
                "{last_transition}/{last_status} then {transition} on {version}"
            );
        }
        let deleted = check_new_build(
            &workspace(true),
            &build("delete", "succeeded", "v1"),
            Transition::Start,
            "v1",
        );
        assert_eq!(
            deleted.map_err(|e| e.to_string()),
            Err("workspace \"dev\" was deleted".into())
        );
    }

    #[test]
    fn status_follows_the_latest_build() {
        let cases = [
            ("start", "pending", "pending"),
            ("start", "running", "starting"),
            ("stop", "running", "stopping"),
            ("delete", "running", "deleting"),
            ("start", "succeeded", "running"),
            ("stop", "succeeded", "stopped"),
            ("delete", "succeeded", "deleted"),
            ("stop", "failed", "failed"),
            ("start", "canceled", "canceled"),
            ("stop", "awaiting_confirmation", "awaiting_confirmation"),
        ];
        for (transition, status, expected) in cases {
            assert_eq!(
                workspace_status(&build(transition, status, "v1")).as_str(),
                expected
            );
        }
    }

    #[test]
    fn status_filters_invert_workspace_status() {
        for status in [
            "pending",
            "running",
            "awaiting_confirmation",
            "succeeded",
            "failed",
            "canceled",
        ] {
            for transition in ["start", "stop", "delete"] {
                let latest = build(transition, status, "v");
                let shown = workspace_status(&latest);
                let (want_status, want_transition) = latest_build_for(shown);
                assert_eq!(want_status, latest.status);
                assert!(want_transition.is_none_or(|t| t == latest.transition));
                assert_eq!(shown.as_str().parse::<WorkspaceStatus>().unwrap(), shown);
            }
        }
        assert!("sleeping".parse::<WorkspaceStatus>().is_err());
    }

    #[test]
    fn agent_health_tells_connecting_ready_unhealthy_disconnected() {
        let timeouts = AgentTimeouts {
            connect: Duration::from_secs(30),
            heartbeat: Duration::from_secs(15),
        };
        let agent = |lifecycle: Option<&str>, beat: Option<i64>| Agent {
            id: "a".into(),
            workspace_id: "w".into(),
            build_id: "b".into(),
            name: "main".into(),
            lifecycle: lifecycle.map(|l| l.parse().unwrap()),
            connected_at: beat,
            last_heartbeat_at: beat,
            created_at: 0,
            startup_script: None,
            dir: None,
            env: "{}".into(),
            exit_status: lifecycle.filter(|l| *l == "start_error").map(|_| 3),
        };
        let running = build("start", "succeeded", "v1"); // finished at 1 s
        let cases = [
            (agent(None, None), 10_000, AgentStatus::Connecting),
            (agent(None, None), 40_000, AgentStatus::Unhealthy),
            (
                agent(Some("starting"), Some(5_000)),
                10_000,
                AgentStatus::Starting,
            ),
            (
                agent(Some("ready"), Some(5_000)),
                10_000,
                AgentStatus::Ready,
            ),
            (
                agent(Some("ready"), Some(5_000)),
                30_000,
                AgentStatus::Disconnected,
            ),
            (
                agent(Some("start_error"), Some(5_000)),
                10_000,
                AgentStatus::StartError,
            ),
            (
                agent(Some("start_error"), Some(5_000)),
                30_000,
                AgentStatus::Disconnected,
            ),
        ];
        for (agent, now, expected) in cases {
            assert_eq!(
                agent_health(&running, &[agent], now, timeouts).status,
                expected
            );
        }
        assert_eq!(
            agent_health(&running, &[], 10_000, timeouts).status,
            AgentStatus::None
        );
        let stopped = build("stop", "succeeded", "v1");
        let ready = agent(Some("ready"), Some(5_000));
        assert_eq!(
            agent_health(&stopped, std::slice::from_ref(&ready), 10_000, timeouts).status,
            AgentStatus::None
        );
        let failed = agent(Some("start_error"), Some(5_000));
        let health = agent_health(&running, &[ready.clone(), failed.clone()], 10_000, timeouts);
        assert_eq!(
            (health.status, health.reason.as_deref()),
            (
                AgentStatus::StartError,
                Some("startup script exited with status 3")
            ),
            "a failed startup script outranks a ready agent, with its reason"
        );
        assert_eq!(
            agent_health(&running, std::slice::from_ref(&ready), 10_000, timeouts).reason,
            None
        );
        let never = agent(None, None);
        assert_eq!(
            agent_health(&running, &[ready, failed, never], 40_000, timeouts).status,
            AgentStatus::Unhealthy,
            "the worst agent speaks for the workspace"
        );
    }

    #[test]
    fn a_rename_rebuilds_what_the_last_succeeded_build_left() {
        let ws = workspace(false);
        let started = build("start", "succeeded", "v1");
        let stopped = build("stop", "succeeded", "v1");
        let canceled = build("start", "canceled", "v1");
        let held = build("start", "awaiting_confirmation", "v1");
        let rename = |latest: &Build, settled: Option<&Build>| {
            check_rename_build(&ws, latest, settled).map_err(|error| error.to_string())
        };
        assert_eq!(rename(&started, Some(&started)), Ok(Transition::Start));
        assert_eq!(rename(&stopped, Some(&stopped)), Ok(Transition::Stop));
        // A canceled rename leaves the workspace as it was: it can be asked again.
        assert_eq!(rename(&canceled, Some(&started)), Ok(Transition::Start));
        assert!(rename(&held, Some(&started))
            .unwrap_err()
            .contains("awaiting confirmation"));
        assert!(rename(&canceled, None)
            .unwrap_err()
            .contains("never been built"));
    }
}
