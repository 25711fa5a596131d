//! The in-app inbox: a person's own messages, newest first, and their read
//! flag. Nobody reads another person's inbox.

use abode_store::{InboxFilter, Notification, Page};

use super::Notifications;
use crate::authz::Action;
use crate::error::or_not_found;
use crate::{Caller, ControlError};

impl Notifications {
    /// One page of the caller's inbox (`unread_only`: unread messages only).
    pub async fn inbox(
        &self,
        caller: &Caller,
        unread_only: bool,
        after: Option<String>,
        limit: Option<i64>,
    ) -> Result<Page<Notification>, ControlError> {
        caller.authorize(Action::NotificationRead, Some(&caller.user.id))?;
        Ok(self
            .store
            .list_inbox_page(&InboxFilter {
                recipient_id: caller.user.id.clone(),
                unread_only,
                after,
                limit: abode_store::page_size(limit),
            })
            .await?)
    }

    /// Marks one of the caller's messages read.
    pub async fn read(&self, caller: &Caller, id: &str) -> Result<Notification, ControlError> {
        caller.authorize(Action::NotificationRead, Some(&caller.user.id))?;
        or_not_found(
            self.store.mark_notification_read(&caller.user.id, id).await,
            || format!("there is no notification {id} in your inbox"),
        )
    }

    /// Marks all the caller's messages read; how many were unread.
    pub async fn read_all(&self, caller: &Caller) -> Result<u64, ControlError> {
        caller.authorize(Action::NotificationRead, Some(&caller.user.id))?;
        Ok(self
            .store
            .mark_all_notifications_read(&caller.user.id)
            .await?)
    }
}
