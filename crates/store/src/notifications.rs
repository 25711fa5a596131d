//! The notification outbox: messages written in the transaction of the
//! change that causes them (a held, blocked, failed or expired build), one
//! row per recipient and channel, then delivered at least once by a
//! dispatcher that claims due rows with a lease (a single `UPDATE ...
//! RETURNING`, `SKIP LOCKED` on PostgreSQL, like the job claim). A claim
//! whose lease ran out (a server that died mid-delivery) is claimed again:
//! nothing is lost, and each message keeps its id so that receivers can drop
//! repeats. Inbox rows are delivered by being stored and carry the read flag.

/// What a notification is about. Stored by name; a name this release does
/// not know fails the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationKind {
    /// A build awaits confirmation of its plan.
    BuildHeld,
    /// The guard blocked a build.
    BuildBlocked,
    /// A build failed.
    BuildFailed,
    /// A held build expires within the hour.
    HeldBuildExpiring,
    /// A held build expired unconfirmed.
    HeldBuildExpired,
    /// A prebuild claim replaced resources.
    PrebuildResourceReplaced,
    /// A preset's pool hit its hard limit.
    PresetHardLimited,
    /// A workspace became dormant.
    WorkspaceDormant,
    /// A workspace's deletion is scheduled.
    WorkspaceDeletionScheduled,
    /// A workspace delete retained one of the owner's resources.
    ResourceRetained,
    /// A retained resource's record expires within a week.
    RetainedExpiring,
    /// A retained resource's record expired.
    RetainedExpired,
    /// The prebuilds budget holds a preset's pool below its desired count.
    PresetQuotaLimited,
    /// The prebuilds budget no longer holds a preset's pool back.
    PresetQuotaRecovered,
    /// The scheduler held a workspace's automatic delete: its last report
    /// shows unsaved work.
    DeleteHeldUnsaved,
    /// A workspace's home volume reached one of its agent's thresholds.
    DiskFullWarning,
    /// A workspace's memory or a volume crossed its agent's monitor threshold.
    WorkspaceResourceHigh,
}

/// A notification kind none of [`NotificationKind`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown notification kind `{0}`")]
pub struct UnknownNotificationKind(pub String);

crate::named!(NotificationKind, UnknownNotificationKind, {
    BuildHeld => "build_held",
    BuildBlocked => "build_blocked",
    BuildFailed => "build_failed",
    HeldBuildExpiring => "held_build_expiring",
    HeldBuildExpired => "held_build_expired",
    PrebuildResourceReplaced => "prebuild_resource_replaced",
    PresetHardLimited => "preset_hard_limited",
    WorkspaceDormant => "workspace_dormant",
    WorkspaceDeletionScheduled => "workspace_deletion_scheduled",
    ResourceRetained => "resource_retained",
    RetainedExpiring => "retained_expiring",
    RetainedExpired => "retained_expired",
    PresetQuotaLimited => "preset_quota_limited",
    PresetQuotaRecovered => "preset_quota_recovered",
    DeleteHeldUnsaved => "delete_held_unsaved",
    DiskFullWarning => "disk_full_warning",
    WorkspaceResourceHigh => "workspace_resource_high",
});

/// Where a notification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// The person's in-app inbox: delivered by being stored.
    Inbox,
    /// The server's webhook.
    Webhook,
    /// The person's email address.
    Email,
}

/// A channel none of [`Channel`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown notification channel `{0}`")]
pub struct UnknownChannel(pub String);

crate::named!(Channel, UnknownChannel, {
    Inbox => "inbox",
    Webhook => "webhook",
    Email => "email",
});

/// Where a message is in its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationStatus {
    /// Waiting for its next attempt.
    Pending,
    /// Claimed by a dispatcher until its lease expires.
    Delivering,
    Sent,
    /// Gave up after the configured attempts; `last_error` says why.
    Failed,
}

/// A delivery status none of [`NotificationStatus`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown notification status `{0}`")]
pub struct UnknownNotificationStatus(pub String);

crate::named!(NotificationStatus, UnknownNotificationStatus, {
    Pending => "pending",
    Delivering => "delivering",
    Sent => "sent",
    Failed => "failed",
});

/// A message to write into the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotification {
    /// The stable id receivers see (`X-Abode-Delivery`).
    pub id: String,
    pub kind: NotificationKind,
    pub recipient_id: String,
    pub channel: Channel,
    /// A JSON object.
    pub payload: String,
    /// Messages with the same key are written once: the writer makes it
    /// from what makes two messages "the same" (kind, recipient, channel,
    /// payload, and the day for "at most once a day").
    pub dedupe_key: String,
}

from_row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Notification {
        pub id: String,
        pub kind: NotificationKind,
        pub recipient_id: String,
        pub channel: Channel,
        pub payload: String,
        pub status: NotificationStatus,
        pub attempts: i64,
        pub next_attempt_at: i64,
        pub lease_owner: Option<String>,
        pub lease_expires_at: Option<i64>,
        pub last_error: Option<String>,
        pub read_at: Option<i64>,
        pub created_at: i64,
        pub sent_at: Option<i64>,
    }
}

from_row! {
    /// A message given up on, with whom it was for.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct FailedNotification {
        pub notification: Notification = flatten,
        pub recipient_name: String,
    }
}

/// Which of a person's inbox messages to list.
#[derive(Debug, Clone, Default)]
pub struct InboxFilter {
    pub recipient_id: String,
    pub unread_only: bool,
    /// The cursor of the previous page.
    pub after: Option<String>,
    pub limit: i64,
}

pub(crate) const NOTIFICATION_COLUMNS: &str = "id, kind, recipient_id, channel, payload, status, \
     attempts, next_attempt_at, lease_owner, lease_expires_at, last_error, read_at, created_at, sent_at";

/// [`NOTIFICATION_COLUMNS`] of `notifications n`, for joins.
pub(crate) const NOTIFICATION_COLUMNS_N: &str = "n.id, n.kind, n.recipient_id, n.channel, \
     n.payload, n.status, n.attempts, n.next_attempt_at, n.lease_owner, n.lease_expires_at, \
     n.last_error, n.read_at, n.created_at, n.sent_at";

pub(crate) const INBOX_CURSOR: &str = "n1";
pub(crate) const FAILED_CURSOR: &str = "nf1";

/// The outbox methods of [`crate::Store`]; expanded inside each backend's
/// `impl` with its database type and the row lock its claim takes (`FOR
/// UPDATE SKIP LOCKED` where writers do not serialise).
macro_rules! notification_queries {
    ($db:ty, $claim_lock:expr) => {
    /// Writes `notices` inside the caller's transaction; a message whose
    /// dedupe key was already written is dropped.
    async fn insert_notifications(
        &self,
        tx: &mut sqlx::Transaction<'_, $db>,
        notices: &[NewNotification],
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        for notice in notices {
            // The inbox is delivered by the write itself.
            let (status, sent_at) = if notice.channel == Channel::Inbox {
                (NotificationStatus::Sent, Some(now))
            } else {
                (NotificationStatus::Pending, None)
            };
            sqlx::query(&sql(
                "INSERT INTO notifications (id, kind, recipient_id, channel, payload, dedupe_key, \
                 status, attempts, next_attempt_at, created_at, sent_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) ON CONFLICT (dedupe_key) DO NOTHING",
            ))
            .bind(&notice.id)
            .bind(notice.kind.as_str())
            .bind(&notice.recipient_id)
            .bind(notice.channel.as_str())
            .bind(&notice.payload)
            .bind(&notice.dedupe_key)
            .bind(status.as_str())
            .bind(now)
            .bind(now)
            .bind(sent_at)
            .execute(&mut **tx)
            .await
            .map_err(db_error("notification"))?;
        }
        Ok(())
    }

    pub(crate) async fn enqueue_notifications(
        &self,
        notices: &[NewNotification],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        self.insert_notifications(&mut tx, notices).await?;
        tx.commit().await.map_err(StoreError::Database)
    }

    pub(crate) async fn release_notification_dedupe(
        &self,
        prefix: &str,
    ) -> Result<u64, StoreError> {
        if prefix.is_empty() {
            // Would release every key: a caller's mistake, not a request.
            return Ok(0);
        }
        // `substr` rather than `LIKE`: the prefix is matched as it is, with
        // no wildcard to escape. Each released key becomes unique by the
        // message's own id.
        let length = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
        let result = sqlx::query(&sql(
            "UPDATE notifications SET dedupe_key = 'released:' || id \
             WHERE substr(dedupe_key, 1, ?) = ?",
        ))
        .bind(length)
        .bind(prefix)
        .execute(&self.pool)
        .await
        .map_err(db_error("notification"))?;
        Ok(result.rows_affected())
    }

    pub(crate) async fn users_with_any_role(
        &self,
        roles: &[crate::Role],
    ) -> Result<Vec<User>, StoreError> {
        if roles.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = vec!["?"; roles.len()].join(", ");
        let text = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE system = FALSE AND status IN ('active', 'dormant') AND id IN \
             (SELECT user_id FROM user_roles WHERE role IN ({placeholders})) \
             ORDER BY username"
        );
        let text = sql(&text);
        let mut query = sqlx::query_as(&text);
        for role in roles {
            query = query.bind(role.as_str());
        }
        query
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("user"))
    }

    pub(crate) async fn notification_by_id(&self, id: &str) -> Result<Notification, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {NOTIFICATION_COLUMNS} FROM notifications WHERE id = ?"
        )))
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("notification"))
    }

    pub(crate) async fn claim_notifications(
        &self,
        owner: &str,
        now: i64,
        lease_until: i64,
        limit: i64,
    ) -> Result<Vec<Notification>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "UPDATE notifications SET status = 'delivering', lease_owner = ?1, \
             lease_expires_at = ?2, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM notifications WHERE channel != 'inbox' AND \
             ((status = 'pending' AND next_attempt_at <= ?3) \
              OR (status = 'delivering' AND lease_expires_at <= ?3)) \
             ORDER BY next_attempt_at, id LIMIT ?4 {}) \
             RETURNING {NOTIFICATION_COLUMNS}",
            $claim_lock
        )))
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification"))
    }

    pub(crate) async fn notification_sent(
        &self,
        id: &str,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let result = sqlx::query(&sql(
            "UPDATE notifications SET status = 'sent', sent_at = ?, lease_owner = NULL, \
             lease_expires_at = NULL, last_error = NULL \
             WHERE id = ? AND status = 'delivering' AND lease_owner = ?",
        ))
        .bind(self.now_ms())
        .bind(id)
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(db_error("notification"))?;
        Ok(result.rows_affected() > 0)
    }

    pub(crate) async fn notification_attempt_failed(
        &self,
        id: &str,
        owner: &str,
        error: &str,
        retry_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        let status = if retry_at.is_some() {
            NotificationStatus::Pending
        } else {
            NotificationStatus::Failed
        };
        let result = sqlx::query(&sql(
            "UPDATE notifications SET status = ?, next_attempt_at = COALESCE(?, next_attempt_at), \
             last_error = ?, lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND status = 'delivering' AND lease_owner = ?",
        ))
        .bind(status.as_str())
        .bind(retry_at)
        .bind(error)
        .bind(id)
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(db_error("notification"))?;
        Ok(result.rows_affected() > 0)
    }

    pub(crate) async fn list_inbox_page(
        &self,
        filter: &InboxFilter,
    ) -> Result<Page<Notification>, StoreError> {
        let before = filter
            .after
            .as_deref()
            .map(|cursor| {
                decode_cursor(INBOX_CURSOR, cursor, 2)
                    .and_then(|key| Ok((parse_i64(&key[0])?, key[1].clone())))
            })
            .transpose()?;
        let (before_time, before_id) = match before {
            Some((time, id)) => (Some(time), Some(id)),
            None => (None, None),
        };
        let rows: Vec<Notification> = sqlx::query_as(&sql(&format!(
            "SELECT {NOTIFICATION_COLUMNS} FROM notifications \
             WHERE recipient_id = ?1 AND channel = 'inbox' \
             AND (?2 = FALSE OR read_at IS NULL) \
             AND (?3 IS NULL OR created_at < ?3 OR (created_at = ?3 AND id < ?4)) \
             ORDER BY created_at DESC, id DESC LIMIT ?5"
        )))
        .bind(&filter.recipient_id)
        .bind(filter.unread_only)
        .bind(before_time)
        .bind(before_id)
        .bind(filter.limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification"))?;
        Ok(paged(rows, filter.limit, |row| {
            encode_cursor(INBOX_CURSOR, &[&row.created_at.to_string(), &row.id])
        }))
    }

    pub(crate) async fn mark_notification_read(
        &self,
        recipient_id: &str,
        id: &str,
    ) -> Result<Notification, StoreError> {
        sqlx::query_as(&sql(&format!(
            "UPDATE notifications SET read_at = COALESCE(read_at, ?) \
             WHERE id = ? AND recipient_id = ? AND channel = 'inbox' \
             RETURNING {NOTIFICATION_COLUMNS}"
        )))
        .bind(self.now_ms())
        .bind(id)
        .bind(recipient_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification"))
        .and_then(|rows| crate::error::returned_row(rows, "notification"))
    }

    pub(crate) async fn mark_all_notifications_read(
        &self,
        recipient_id: &str,
    ) -> Result<u64, StoreError> {
        let result = sqlx::query(&sql(
            "UPDATE notifications SET read_at = ? \
             WHERE recipient_id = ? AND channel = 'inbox' AND read_at IS NULL",
        ))
        .bind(self.now_ms())
        .bind(recipient_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("notification"))?;
        Ok(result.rows_affected())
    }

    pub(crate) async fn notification_opt_outs(
        &self,
        user_id: &str,
    ) -> Result<Vec<NotificationKind>, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT kind FROM notification_opt_outs WHERE user_id = ? ORDER BY kind",
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification preference"))
    }

    pub(crate) async fn set_notification_opt_out(
        &self,
        user_id: &str,
        kind: NotificationKind,
        opted_out: bool,
    ) -> Result<(), StoreError> {
        let statement = if opted_out {
            "INSERT INTO notification_opt_outs (user_id, kind) VALUES (?, ?) \
             ON CONFLICT (user_id, kind) DO NOTHING"
        } else {
            "DELETE FROM notification_opt_outs WHERE user_id = ? AND kind = ?"
        };
        sqlx::query(&sql(statement))
            .bind(user_id)
            .bind(kind.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error("notification preference"))?;
        Ok(())
    }

    pub(crate) async fn mandatory_notification_kinds(
        &self,
    ) -> Result<Vec<NotificationKind>, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT kind FROM notification_mandatory_kinds ORDER BY kind",
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification preference"))
    }

    pub(crate) async fn set_notification_kind_mandatory(
        &self,
        kind: NotificationKind,
        mandatory: bool,
    ) -> Result<(), StoreError> {
        let statement = if mandatory {
            "INSERT INTO notification_mandatory_kinds (kind) VALUES (?) \
             ON CONFLICT (kind) DO NOTHING"
        } else {
            "DELETE FROM notification_mandatory_kinds WHERE kind = ?"
        };
        sqlx::query(&sql(statement))
            .bind(kind.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error("notification preference"))?;
        Ok(())
    }

    pub(crate) async fn opted_out_of(
        &self,
        kind: NotificationKind,
    ) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT user_id FROM notification_opt_outs WHERE kind = ?1 \
             AND NOT EXISTS (SELECT 1 FROM notification_mandatory_kinds m WHERE m.kind = ?1) \
             ORDER BY user_id",
        ))
        .bind(kind.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification preference"))
    }

    pub(crate) async fn list_failed_notification_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<FailedNotification>, StoreError> {
        let before = after
            .map(|cursor| {
                decode_cursor(FAILED_CURSOR, cursor, 2)
                    .and_then(|key| Ok((parse_i64(&key[0])?, key[1].clone())))
            })
            .transpose()?;
        let (before_time, before_id) = match before {
            Some((time, id)) => (Some(time), Some(id)),
            None => (None, None),
        };
        let rows: Vec<FailedNotification> = sqlx::query_as(&sql(&format!(
            "SELECT {NOTIFICATION_COLUMNS_N}, u.username AS recipient_name \
             FROM notifications n JOIN users u ON u.id = n.recipient_id \
             WHERE n.status = 'failed' \
             AND (?1 IS NULL OR n.created_at < ?1 OR (n.created_at = ?1 AND n.id < ?2)) \
             ORDER BY n.created_at DESC, n.id DESC LIMIT ?3"
        )))
        .bind(before_time)
        .bind(before_id)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("notification"))?;
        Ok(paged(rows, limit, |row| {
            encode_cursor(
                FAILED_CURSOR,
                &[&row.notification.created_at.to_string(), &row.notification.id],
            )
        }))
    }
    };
}

pub(crate) use notification_queries;
