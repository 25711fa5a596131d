//! The dispatcher: claims due messages with a lease, delivers each on its
//! channel, and records the outcome (sent; pending again after a backoff;
//! failed for good after the configured attempts, with the last error).
//! A dispatcher that dies mid-delivery loses its lease and the message is
//! delivered again: at least once, never lost.

use std::future::Future;

use abode_clock::Clock;
use abode_metrics::Metrics;
use abode_store::{new_id, Channel, Notification, Store, StoreError, User};
use rand::Rng;
use tokio::sync::watch;

use crate::{backoff, email, webhook, NotificationsConfig};

/// Messages claimed at once.
const BATCH: i64 = 16;

/// What the dispatcher may do with the store: the outbox and the
/// recipient's address, nothing else of the domain.
pub trait Outbox: Send + Sync {
    /// Claims up to `limit` messages due at `now` for `owner` until
    /// `lease_until`.
    fn claim(
        &self,
        owner: &str,
        now: i64,
        lease_until: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Notification>, StoreError>> + Send;
    /// The message went out; false when `owner`'s lease on it ran out.
    fn sent(&self, id: &str, owner: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// An attempt failed: due again at `retry_at`, or failed for good.
    fn attempt_failed(
        &self,
        id: &str,
        owner: &str,
        error: &str,
        retry_at: Option<i64>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// Who a message is for (the address a channel needs).
    fn recipient(&self, user_id: &str) -> impl Future<Output = Result<User, StoreError>> + Send;
}

impl Outbox for Store {
    async fn claim(
        &self,
        owner: &str,
        now: i64,
        lease_until: i64,
        limit: i64,
    ) -> Result<Vec<Notification>, StoreError> {
        self.claim_notifications(owner, now, lease_until, limit)
            .await
    }

    async fn sent(&self, id: &str, owner: &str) -> Result<bool, StoreError> {
        self.notification_sent(id, owner).await
    }

    async fn attempt_failed(
        &self,
        id: &str,
        owner: &str,
        error: &str,
        retry_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.notification_attempt_failed(id, owner, error, retry_at)
            .await
    }

    async fn recipient(&self, user_id: &str) -> Result<User, StoreError> {
        self.user_by_id(user_id).await
    }
}

/// Delivers the outbox's due messages.
pub struct Dispatcher<O> {
    pub outbox: O,
    pub config: NotificationsConfig,
    pub clock: Clock,
    pub metrics: Metrics,
}

impl<O: Outbox> Dispatcher<O> {
    /// Delivers due messages until shutdown.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let owner = format!("dispatcher-{}", new_id());
        loop {
            if *shutdown.borrow() {
                break;
            }
            let delivered = self.deliver_due(&owner).await;
            self.metrics
                .background_pass(abode_metrics::PASS_NOTIFICATIONS);
            if delivered > 0 {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.poll) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// One round: claims up to a batch of due messages as `owner` and
    /// delivers them; how many were claimed.
    pub async fn deliver_due(&self, owner: &str) -> usize {
        let config = &self.config;
        let now = self.clock.now_ms();
        let lease = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX / 4);
        let claimed = match self
            .outbox
            .claim(owner, now, now.saturating_add(lease), BATCH)
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
            let metrics = &self.metrics;
            let channel = message.channel.to_string();
            let recorded = match outcome {
                Ok(()) => {
                    metrics.notification_attempt(&channel, abode_metrics::NOTIFICATION_SENT);
                    self.outbox.sent(&message.id, owner).await
                }
                Err(error) => {
                    let attempts = u32::try_from(message.attempts).unwrap_or(u32::MAX);
                    let retry_at = (attempts < config.max_attempts).then(|| {
                        let jitter = rand::thread_rng().gen_range(0.0..=1.0);
                        let delay = backoff(attempts, config.retry_base, config.retry_max, jitter);
                        self.clock.now_ms().saturating_add(
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
                    self.outbox
                        .attempt_failed(&message.id, owner, &error, retry_at)
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
            .outbox
            .recipient(&message.recipient_id)
            .await
            .map_err(|error| format!("cannot read the recipient: {error}"))?;
        match message.channel {
            Channel::Webhook => match &self.config.webhook {
                Some(config) => webhook::deliver(config, message, &recipient).await,
                None => Err("no webhook is configured on this server".to_string()),
            },
            Channel::Email => match &self.config.email {
                Some(config) => email::deliver(config, message, &recipient).await,
                None => Err("no email smarthost is configured on this server".to_string()),
            },
            // Delivered by being stored; never claimed.
            Channel::Inbox => Ok(()),
        }
    }
}
