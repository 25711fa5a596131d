//! The dispatcher: claims due messages with a lease, delivers each on its
//! channel, and records the outcome (sent; pending again after a backoff;
//! failed for good after the configured attempts, with the last error).
//! A dispatcher that dies mid-delivery loses its lease and the message is
//! delivered again: at least once, never lost.

use rand::Rng;
use tokio::sync::watch;

use abode_store::{new_id, Channel, Notification};

use super::{backoff, email, webhook};
use crate::Control;

/// Messages claimed at once.
const BATCH: i64 = 16;

/// Delivers due messages until shutdown.
pub(crate) async fn dispatcher(control: Control, mut shutdown: watch::Receiver<bool>) {
    let owner = format!("dispatcher-{}", new_id());
    loop {
        if *shutdown.borrow() {
            break;
        }
        let delivered = control.deliver_due_notifications(&owner).await;
        control.background_pass(abode_metrics::PASS_NOTIFICATIONS);
        if delivered > 0 {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(control.inner.config.notifications.poll) => {}
            _ = shutdown.changed() => {}
        }
    }
}

impl Control {
    /// One round: claims up to a batch of due messages as `owner` and
    /// delivers them; how many were claimed.
    pub async fn deliver_due_notifications(&self, owner: &str) -> usize {
        let config = &self.inner.config.notifications;
        let now = self.now_ms();
        let lease = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX / 4);
        let claimed = match self
            .inner
            .store
            .claim_notifications(owner, now, now.saturating_add(lease), BATCH)
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::error!(%error, "cannot claim notifications");
                return 0;
            }
        };
        let count = claimed.len();
        for message in claimed {
            let outcome = self.deliver(&message).await;
            let metrics = &self.inner.config.metrics;
            let channel = message.channel.to_string();
            let recorded = match outcome {
                Ok(()) => {
                    metrics.notification_attempt(&channel, abode_metrics::NOTIFICATION_SENT);
                    self.inner.store.notification_sent(&message.id, owner).await
                }
                Err(error) => {
                    let attempts = u32::try_from(message.attempts).unwrap_or(u32::MAX);
                    let retry_at = (attempts < config.max_attempts).then(|| {
                        let jitter = rand::thread_rng().gen_range(0.0..=1.0);
                        let delay = backoff(attempts, config.retry_base, config.retry_max, jitter);
                        self.now_ms().saturating_add(
                            i64::try_from(delay.as_millis()).unwrap_or(i64::MAX / 4),
                        )
                    });
                    metrics.notification_attempt(
                        &channel,
                        if retry_at.is_none() {
                            abode_metrics::NOTIFICATION_FAILED
                        } else {
                            abode_metrics::NOTIFICATION_RETRY
                        },
                    );
                    if retry_at.is_none() {
                        tracing::warn!(notification = %message.id, kind = %message.kind, channel = %message.channel, %error, "notification failed for good");
                    } else {
                        tracing::info!(notification = %message.id, channel = %message.channel, %error, "notification delivery failed; will retry");
                    }
                    self.inner
                        .store
                        .notification_attempt_failed(&message.id, owner, &error, retry_at)
                        .await
                }
            };
            match recorded {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(notification = %message.id, "a notification's lease ran out during its delivery; it will be delivered again")
                }
                Err(error) => {
                    tracing::error!(notification = %message.id, %error, "cannot record a notification's delivery")
                }
            }
        }
        count
    }

    async fn deliver(&self, message: &Notification) -> Result<(), String> {
        let recipient = self
            .inner
            .store
            .user_by_id(&message.recipient_id)
            .await
            .map_err(|error| format!("cannot read the recipient: {error}"))?;
        match message.channel {
            Channel::Webhook => match &self.inner.config.notifications.webhook {
                Some(config) => webhook::deliver(config, message, &recipient).await,
                None => Err("no webhook is configured on this server".to_string()),
            },
            Channel::Email => match &self.inner.config.notifications.email {
                Some(config) => email::deliver(config, message, &recipient).await,
                None => Err("no email smarthost is configured on this server".to_string()),
            },
            // Delivered by being stored; never claimed.
            Channel::Inbox => Ok(()),
        }
    }
}
