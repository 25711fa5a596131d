//! What a retained resource's owner is told: that a delete retained it,
//! a week before its record expires, and when it has expired. Each once per
//! record (and expiry), however often the scheduler looks.

use serde_json::json;

use abode_store::{NotificationKind, RetainedResource, SystemActor};

use super::events::Once;
use crate::times::utc_text as utc;
use crate::{Control, ControlError};

const WEEK_MS: i64 = 7 * 24 * 60 * 60 * 1000;

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

impl Control {
    /// `resource_retained`: a delete retained one of the owner's resources.
    pub(crate) async fn notify_retained(&self, record: &RetainedResource) {
        let notices = self
            .notices_to(
                NotificationKind::ResourceRetained,
                owner(record),
                payload(record),
                Some(Once::Key(record.id.clone())),
            )
            .await;
        if let Err(error) = self.inner.store.enqueue_notifications(&notices).await {
            tracing::error!(retained = %record.id, %error, "cannot notify that a resource was retained");
        }
    }

    /// The expiry sweep of retained records: `retained_expiring` a week
    /// before a record's expiry and `retained_expired` once it is past,
    /// each once per record and expiry (an extension starts over). How
    /// many messages were written.
    pub(crate) async fn retained_expiry_sweep(&self, now: i64) -> Result<usize, ControlError> {
        let mut written = 0;
        let mut after: Option<String> = None;
        loop {
            let page = self
                .inner
                .store
                .retained_expiring(now.saturating_add(WEEK_MS), after.as_deref(), 200)
                .await?;
            for record in &page.items {
                let Some(expires_at) = record.expires_at else {
                    continue;
                };
                let kind = if expires_at <= now {
                    NotificationKind::RetainedExpired
                } else {
                    NotificationKind::RetainedExpiring
                };
                let notices = self
                    .notices_to(
                        kind,
                        owner(record),
                        payload(record),
                        Some(Once::Key(format!("{}\n{expires_at}", record.id))),
                    )
                    .await;
                written += notices.len();
                self.inner.store.enqueue_notifications(&notices).await?;
                if expires_at <= now {
                    self.destroy_expired_retained(record).await;
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(written),
            }
        }
    }
}
