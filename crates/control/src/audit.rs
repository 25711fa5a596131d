//! The audit log: every change a person or the system makes is recorded
//! with who, what, on which target, the outcome and the request id; a member
//! reads only what concerns them.

use abode_store::{Build, NewAuditEvent, SystemActor};

use crate::Actor;
use crate::Caller;
pub use abode_identity::audit::{audit_event, Audit};

/// What the server did to a build of a workspace, on the workspace's
/// record, as the server's system actor.
pub fn system_event(
    action: &str,
    build: &Build,
    details: Option<String>,
) -> (Actor, NewAuditEvent) {
    let mut event = audit_event(
        None,
        None,
        action,
        "workspace",
        &format!("{}/{}", build.owner_name, build.workspace_name),
        "success",
        details,
    );
    event.workspace_id = Some(build.workspace_id.clone());
    (Actor::System(SystemActor::Server), event)
}

/// What a person did to a workspace, referring to it by id (its history
/// follows it through renames and transfers).
pub fn workspace_event(
    caller: &Caller,
    workspace_id: &str,
    action: &str,
    target: &str,
    outcome: &str,
    details: Option<String>,
) -> NewAuditEvent {
    let mut event = audit_event(
        Some(&caller.user),
        caller.request_id.clone(),
        action,
        "workspace",
        target,
        outcome,
        details,
    );
    event.workspace_id = Some(workspace_id.to_string());
    event
}
