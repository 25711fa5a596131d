//! Where a domain service writes its audit events: the store and nothing
//! else, so that a service audits without reaching into the control plane.
//! Identity writes its own (logins, accounts, tokens); the control plane's
//! services write theirs through the same writer.

use std::cell::Cell;
use std::future::Future;

use abode_store::{NewAuditEvent, Store, User};

use crate::actors::Actor;

tokio::task_local! {
    /// Whether the request this task serves recorded an audit event: the
    /// API completes those events (client, user agent, status) and leaves
    /// every other request alone.
    static RECORDED: Cell<bool>;
}

/// Runs `future` (a request's handling) and says whether it recorded an
/// audit event.
pub async fn recording<F: Future>(future: F) -> (F::Output, bool) {
    RECORDED
        .scope(Cell::new(false), async move {
            let output = future.await;
            let recorded = RECORDED.try_with(Cell::get).unwrap_or(false);
            (output, recorded)
        })
        .await
}

/// Notes that this task's request recorded an audit event (written by the
/// store inside another write's transaction); outside a request, nothing.
pub fn mark_recorded() {
    let _ = RECORDED.try_with(|recorded| recorded.set(true));
}

#[derive(Clone)]
pub struct Audit {
    store: Store,
}

impl Audit {
    pub fn new(store: Store) -> Audit {
        Audit { store }
    }

    /// Records `event`; a failure to record is logged, not fatal, so that
    /// the action the user asked for is not undone by bookkeeping.
    pub async fn record(&self, event: &NewAuditEvent) {
        mark_recorded();
        if let Err(error) = self.store.record_audit(event).await {
            tracing::error!(%error, action = %event.action, "cannot record an audit event");
        }
    }

    /// Records `event` as done by `actor` (a person or a system actor).
    pub async fn record_as(&self, actor: &Actor, mut event: NewAuditEvent) {
        event.actor_id = Some(actor.id().to_string());
        event.actor_name = Some(actor.name().to_string());
        self.record(&event).await;
    }
}

/// One audit event, as [`Audit::record`] records it (and as a store
/// transaction that must not happen unaudited records it with its write).
#[allow(clippy::too_many_arguments)]
pub fn audit_event(
    actor: Option<&User>,
    request_id: Option<String>,
    action: &str,
    target_type: &str,
    target: &str,
    outcome: &str,
    details: Option<String>,
) -> NewAuditEvent {
    NewAuditEvent {
        actor_id: actor.map(|user| user.id.clone()),
        actor_name: actor.map(|user| user.username.clone()),
        action: action.into(),
        target_type: target_type.into(),
        target: target.into(),
        outcome: outcome.into(),
        request_id,
        details,
        workspace_id: None,
    }
}
