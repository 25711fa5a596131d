//! What a retained resource's owner is told: that a delete retained it,
//! a week before its record expires, and when it has expired. Each once per
//! record (and expiry), however often the scheduler looks.

use serde_json::json;

use abode_store::{NewNotification, NotificationKind, RetainedResource, SystemActor};

use super::events::Once;
use super::Notifications;
use crate::times::utc_text as utc;

fn payload(record: &RetainedResource) -> serde_json::Value {
    json!({
        "retained_id": record.id,
        "address": record.address,
        "resource_type": record.resource_type,
        "workspace": format!("{}/{}", record.owner_name, record.workspace_name),
        "owner": record.owner_name,
        "template": record.template_name,
        "retained_by": record.retained_by,
        "expires_at": record.expires_at,
        "expires_at_utc": record.expires_at.map(utc),
        "expire_action": record.expire_action,
        "show_command": format!("abode retained show {}", record.id),
        "adopt_command": format!("abode create NEW --template {} --adopt {}", record.template_name, record.id),
    })
}

fn owner(record: &RetainedResource) -> Vec<String> {
    if SystemActor::by_user_id(&record.owner_id).is_some() {
        Vec::new()
    } else {
        vec![record.owner_id.clone()]
    }
}

impl Notifications {
    /// `resource_retained` to the owner: once per record.
    pub(crate) async fn notify_retained(&self, record: &RetainedResource) {
        let notices = self
            .notices_to(
                NotificationKind::ResourceRetained,
                owner(record),
                payload(record),
                Some(Once::Key(record.id.clone())),
            )
            .await;
        if let Err(error) = self.store.enqueue_notifications(&notices).await {
            tracing::error!(retained = %record.id, %error, "cannot notify that a resource was retained");
        }
    }

    /// `retained_expired` (when it has expired by `now`) or
    /// `retained_expiring` to the owner: once per record and expiry time,
    /// so a record kept longer is told again.
    pub(crate) async fn retained_expiry_notices(
        &self,
        record: &RetainedResource,
        expires_at: i64,
        now: i64,
    ) -> Vec<NewNotification> {
        let kind = if expires_at <= now {
            NotificationKind::RetainedExpired
        } else {
            NotificationKind::RetainedExpiring
        };
        self.notices_to(
            kind,
            owner(record),
            payload(record),
            Some(Once::Key(format!("{}\n{expires_at}", record.id))),
        )
        .await
    }
}
