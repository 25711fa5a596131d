//! Notifications: every event that needs a person (a held, blocked, failed
//! or expiring build) reaches them, at least once and never lost.
//!
//! The events are written into the store's outbox in the transaction of the
//! change that causes them (`events.rs` builds the messages: recipients,
//! channels, payload, dedupe key); `abode-delivery` delivers them (a
//! dispatcher with leases, retries with backoff, the webhook and email
//! channels), reaching nothing of the store but the outbox. The in-app inbox
//! (`inbox.rs`) is a channel delivered by the write itself. `later.rs` holds the events the prebuild and
//! scheduler features send, ready for them. Time comes from the injected clock: a test moves it
//! to skip a backoff or a lease.

mod events;
#[cfg(test)]
mod fixture;
mod inbox;
mod later;
mod retained;
mod settings;

pub use abode_delivery::{
    signature, EmailConfig, EmailConfigError, NotificationsConfig, WebhookConfig,
    WebhookConfigError, WEBHOOK_SCHEMA_VERSION,
};
pub(crate) use later::preset_recovered;
pub use later::{DiskWarning, ReplacedResource, ResourceHigh};
pub use settings::{parse_kind, KindSetting};

use abode_store::{Channel, Store};

use crate::Clock;

/// The notifications service (`Control::notifications()`): the messages of
/// each event, a person's inbox and preferences, and the owners' policy.
/// It holds the store (the outbox and the tables of people's settings), the
/// clock and the channels this server delivers on, and nothing of the rest
/// of the control plane: a change that causes an event asks it for the
/// messages and writes them in its own transaction.
#[derive(Clone)]
pub struct Notifications {
    store: Store,
    clock: Clock,
    /// The inbox always; the webhook and email when configured.
    channels: Vec<Channel>,
}

impl Notifications {
    pub(crate) fn new(store: Store, clock: Clock, config: &NotificationsConfig) -> Notifications {
        let mut channels = vec![Channel::Inbox];
        if config.webhook.is_some() {
            channels.push(Channel::Webhook);
        }
        if config.email.is_some() {
            channels.push(Channel::Email);
        }
        Notifications {
            store,
            clock,
            channels,
        }
    }
}

/// Who is told, beside a workspace's owner, of what template admins act on:
/// whoever may push templates, by the policy table (owners and
/// template-admins today); nothing here names a role.
pub(crate) fn template_admin_roles() -> Vec<crate::authz::Role> {
    crate::authz::roles_granted_any(crate::authz::Action::TemplatePush)
}
