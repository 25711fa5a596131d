//! Delivering the notification outbox: the one part of notifications that
//! talks to the outside world.
//!
//! The control plane writes each message into the store's outbox in the
//! transaction of the change that causes it; this crate only delivers what
//! is there. The dispatcher claims due messages with a lease
//! ([`dispatcher`]), posts them to the signed webhook ([`webhook`]) or mails
//! them through the smarthost ([`email`]), and records the outcome: sent,
//! pending again after an exponential backoff with jitter, or failed for
//! good after the configured attempts with the last error. A dispatcher that
//! dies mid-delivery loses its lease and the message goes out again: at
//! least once, never lost. It reaches the store through [`Outbox`] only.
//!
//! The dispatcher is started with the provisioners; email bodies are rendered
//! from `crates/delivery/templates/email/`. docs/notifications.md says what is
//! sent when. It links no control plane (`crates/abode/tests/house.rs`).

mod dispatcher;
pub mod email;
pub mod webhook;

use std::time::Duration;

pub use dispatcher::{Dispatcher, Outbox};
pub use email::{EmailConfig, EmailConfigError};
pub use webhook::{signature, WebhookConfig, WebhookConfigError, WEBHOOK_SCHEMA_VERSION};

/// How notifications are delivered; everything but the channels has a
/// default fit for one server.
#[derive(Debug, Clone)]
pub struct NotificationsConfig {
    /// The webhook every message is also posted to, if any.
    pub webhook: Option<WebhookConfig>,
    /// The smarthost every message is also mailed through, to the
    /// recipient's address, if any.
    pub email: Option<EmailConfig>,
    /// Attempts after which a message is marked failed.
    pub max_attempts: u32,
    /// The delay before the second attempt; it doubles with each attempt...
    pub retry_base: Duration,
    /// ...up to this (each delay is then jittered down by up to half).
    pub retry_max: Duration,
    /// How long a claimed message is the claimer's: after that, another
    /// dispatcher (or this one after a restart) delivers it again. Longer
    /// than any one delivery (the webhook's timeout).
    pub lease: Duration,
    /// How often the dispatcher looks for due messages.
    pub poll: Duration,
    /// How long before a held build expires its `held_build_expiring` goes out.
    pub expiry_warning: Duration,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            webhook: None,
            email: None,
            max_attempts: 8,
            retry_base: Duration::from_secs(10),
            retry_max: Duration::from_secs(60 * 60),
            lease: Duration::from_secs(60),
            poll: Duration::from_secs(1),
            expiry_warning: Duration::from_secs(60 * 60),
        }
    }
}

/// The delay before the attempt after `attempts` failed ones: `base`
/// doubled per attempt, capped at `max`, then jittered down by up to half
/// (`jitter` in `0.0..=1.0`) so that messages failed together do not retry
/// together.
pub fn backoff(attempts: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let doublings = attempts.saturating_sub(1).min(30);
    let delay = base.saturating_mul(1u32 << doublings).min(max);
    delay.saturating_sub(delay.mul_f64(jitter.clamp(0.0, 1.0) / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitters_down_by_at_most_half() {
        let base = Duration::from_secs(10);
        let max = Duration::from_secs(100);
        let cases = [
            (1, 0.0, 10),
            (2, 0.0, 20),
            (3, 0.0, 40),
            (4, 0.0, 80),
            (5, 0.0, 100),
            (40, 0.0, 100),
            (1, 1.0, 5),
            (5, 1.0, 50),
            (3, 0.5, 30),
        ];
        for (attempts, jitter, seconds) in cases {
            assert_eq!(
                backoff(attempts, base, max, jitter),
                Duration::from_secs(seconds),
                "attempts={attempts} jitter={jitter}"
            );
        }
    }
}
