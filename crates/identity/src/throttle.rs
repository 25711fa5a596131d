//! The login throttle: failed logins counted per username and client
//! address, in memory, so that guessing passwords costs time.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use crate::validate_name;

/// How many usernames and addresses the throttle remembers before it drops
/// the ones whose window has ended.
const THROTTLE_PRUNE_AT: usize = 100_000;

/// What failed logins are counted by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum ThrottleKey {
    /// A valid username; every invalid one shares one key (they cannot log
    /// in, and an invalid name may be a password: it is not kept).
    Username(String),
    /// The client's address as the server's socket saw it.
    Address(IpAddr),
}

pub(super) const INVALID_USERNAME: &str = "(not a valid username)";

impl ThrottleKey {
    pub(super) fn username(username: &str) -> ThrottleKey {
        if validate_name("username", username).is_ok() {
            ThrottleKey::Username(username.to_string())
        } else {
            ThrottleKey::Username(INVALID_USERNAME.to_string())
        }
    }
}

#[derive(Debug)]
struct Window {
    /// Unix ms, by the control plane's clock.
    started: i64,
    failures: u32,
    /// The throttling of this window is in the audit log already.
    audited: bool,
}

/// A refusal by the throttle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) key: ThrottleKey,
    pub(crate) retry_after: Duration,
    /// The first refusal of this window: the one to audit.
    pub(crate) first: bool,
}

/// How long from `started` to `now` (Unix ms); never negative, should the
/// clock be set back.
fn since(started: i64, now: i64) -> Duration {
    Duration::from_millis(u64::try_from(now.saturating_sub(started)).unwrap_or(0))
}

/// Counts failed logins per key in fixed windows that start at a key's first
/// failure. Once a key has `limit` failures in its window, logins by that key
/// are refused until the window ends. In memory: a restart forgets it, which
/// costs an attacker a restart per `limit` guesses.
pub(crate) struct LoginThrottle {
    /// 0: no throttling.
    pub(super) limit: u32,
    pub(super) window: Duration,
    entries: Mutex<HashMap<ThrottleKey, Window>>,
}

impl LoginThrottle {
    pub(crate) fn new(limit: u32, window: Duration) -> LoginThrottle {
        LoginThrottle {
            limit,
            window,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<ThrottleKey, Window>> {
        // The map stays consistent whatever a panicking holder did: each
        // update is a single assignment.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether any of `keys` is throttled at `now`.
    pub(crate) fn check(&self, keys: &[ThrottleKey], now: i64) -> Option<Refusal> {
        if self.limit == 0 {
            return None;
        }
        let mut entries = self.entries();
        for key in keys {
            let Some(window) = entries.get_mut(key) else {
                continue;
            };
            let elapsed = since(window.started, now);
            if elapsed < self.window && window.failures >= self.limit {
                let first = !window.audited;
                window.audited = true;
                return Some(Refusal {
                    key: key.clone(),
                    retry_after: self.window - elapsed,
                    first,
                });
            }
        }
        None
    }

    /// Counts a failed login for each of `keys`.
    pub(crate) fn failed(&self, keys: &[ThrottleKey], now: i64) {
        if self.limit == 0 {
            return;
        }
        let mut entries = self.entries();
        if entries.len() >= THROTTLE_PRUNE_AT {
            let window = self.window;
            entries.retain(|_, entry| since(entry.started, now) < window);
        }
        for key in keys {
            let entry = entries.entry(key.clone()).or_insert(Window {
                started: now,
                failures: 0,
                audited: false,
            });
            if since(entry.started, now) >= self.window {
                *entry = Window {
                    started: now,
                    failures: 0,
                    audited: false,
                };
            }
            entry.failures = entry.failures.saturating_add(1);
        }
    }

    /// A successful login clears its username's count (not its address's:
    /// a guesser with an account of their own could clear theirs).
    pub(crate) fn succeeded(&self, username: &str) {
        self.entries().remove(&ThrottleKey::username(username));
    }
}

/// Whole seconds, rounded up, at least 1: a `Retry-After` of 0 invites a
/// retry that is still refused.
pub(super) fn whole_seconds_up(duration: Duration) -> u64 {
    let seconds = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    seconds.max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn secs(n: u64) -> i64 {
        i64::try_from(n * 1000).unwrap()
    }

    fn keys() -> Vec<ThrottleKey> {
        vec![
            ThrottleKey::username("alice"),
            ThrottleKey::Address(IpAddr::from([127, 0, 0, 1])),
        ]
    }

    #[test]
    fn the_eleventh_try_within_the_window_is_refused_once_audited() {
        let throttle = LoginThrottle::new(10, Duration::from_secs(60));
        let start: i64 = 1_000_000;
        for attempt in 0..10 {
            let now = start + secs(attempt);
            assert_eq!(throttle.check(&keys(), now), None, "attempt {attempt}");
            throttle.failed(&keys(), now);
        }
        let at = start + secs(15);
        let refusal = throttle.check(&keys(), at).unwrap();
        assert_eq!(refusal.key, ThrottleKey::username("alice"));
        assert_eq!(refusal.retry_after, Duration::from_secs(45));
        assert!(refusal.first);
        // Audited once per window, however many tries follow.
        assert!(!throttle.check(&keys(), at).unwrap().first);
        // Another name from another address is not concerned.
        let other = [
            ThrottleKey::username("bob"),
            ThrottleKey::Address(IpAddr::from([10, 0, 0, 2])),
        ];
        assert_eq!(throttle.check(&other, at), None);
        // The window ends a minute after its first failure.
        assert_eq!(throttle.check(&keys(), start + secs(60)), None);
        throttle.failed(&keys(), start + secs(61));
        assert_eq!(throttle.check(&keys(), start + secs(62)), None);
    }

    #[test]
    fn an_address_is_throttled_across_usernames_and_success_clears_only_the_name() {
        let throttle = LoginThrottle::new(3, Duration::from_secs(60));
        let now: i64 = 1_000_000;
        let address = ThrottleKey::Address(IpAddr::from([127, 0, 0, 1]));
        for name in ["a", "b", "c"] {
            throttle.failed(&[ThrottleKey::username(name), address.clone()], now);
        }
        let refusal = throttle
            .check(&[ThrottleKey::username("d"), address.clone()], now)
            .unwrap();
        assert_eq!(refusal.key, address);

        for _ in 0..3 {
            throttle.failed(&[ThrottleKey::username("carol")], now);
        }
        assert!(throttle
            .check(&[ThrottleKey::username("carol")], now)
            .is_some());
        throttle.succeeded("carol");
        assert!(throttle
            .check(&[ThrottleKey::username("carol")], now)
            .is_none());
        assert!(throttle.check(&[address], now).is_some());
    }

    #[test]
    fn invalid_usernames_share_one_key_and_zero_turns_it_off() {
        assert_eq!(
            ThrottleKey::username("Hunter2!"),
            ThrottleKey::username("correct horse battery")
        );
        let off = LoginThrottle::new(0, Duration::from_secs(60));
        let now: i64 = 1_000_000;
        for _ in 0..100 {
            off.failed(&keys(), now);
        }
        assert_eq!(off.check(&keys(), now), None);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(whole_seconds_up(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds_up(Duration::from_millis(45_001)), 46);
        assert_eq!(whole_seconds_up(Duration::from_secs(45)), 45);
    }
}
