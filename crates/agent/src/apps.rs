//! The agent's checks of its apps (docs/apps.md): each `abode_app` with a
//! `healthcheck` is asked for its health URL every `interval` seconds; a
//! 2xx or 3xx answer is healthy, `threshold` failures in a row unhealthy.
//! Only a change is reported to the server, and a report that did not go
//! through is sent again at the next check.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use abode_contract::apps::{app_target, AppHealth};
use abode_sdk::AgentApp;

/// How long one check may take (connect, send, first line of the answer).
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// One app's checks and what they found.
pub(crate) struct AppCheck {
    app: AgentApp,
    failures: u32,
    health: AppHealth,
    /// What the server was last told (`None`: nothing yet).
    reported: Option<AppHealth>,
    due: Instant,
}

impl AppCheck {
    pub(crate) fn new(app: AgentApp, now: Instant) -> AppCheck {
        AppCheck {
            app,
            failures: 0,
            health: AppHealth::Initializing,
            reported: Some(AppHealth::Initializing),
            due: now,
        }
    }

    pub(crate) fn slug(&self) -> &str {
        &self.app.slug
    }

    pub(crate) fn due(&self) -> Instant {
        self.due
    }

    /// Records one check's outcome; the health to report when it changed
    /// (or was not yet taken by the server).
    pub(crate) fn observe(&mut self, healthy: bool, now: Instant) -> Option<AppHealth> {
        self.due = now + Duration::from_secs(u64::from(self.app.healthcheck.interval.max(1)));
        if healthy {
            self.failures = 0;
            self.health = AppHealth::Healthy;
        } else {
            self.failures = self.failures.saturating_add(1);
            if self.failures >= self.app.healthcheck.threshold.max(1) {
                self.health = AppHealth::Unhealthy;
            }
        }
        (self.reported != Some(self.health)).then_some(self.health)
    }

    /// The server took `health`.
    pub(crate) fn reported(&mut self, health: AppHealth) {
        self.reported = Some(health);
    }

    /// Asks the app's health URL once.
    pub(crate) fn probe(&self) -> bool {
        probe(&self.app.healthcheck.url)
    }
}

/// One `GET` of `url`: a 2xx or 3xx answer within [`CHECK_TIMEOUT`].
fn probe(url: &str) -> bool {
    let Ok(target) = app_target(url) else {
        return false;
    };
    let Ok(mut addresses) = (target.host.as_str(), target.port).to_socket_addrs() else {
        return false;
    };
    let Some(address) = addresses.next() else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&address, CHECK_TIMEOUT) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(CHECK_TIMEOUT));
    let _ = stream.set_write_timeout(Some(CHECK_TIMEOUT));
    let host = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: abode-agent\r\nConnection: close\r\n\r\n",
        target.path
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    // `HTTP/1.1 200`
    let status = std::str::from_utf8(&head[..read])
        .ok()
        .and_then(|line| line.get(9..12))
        .and_then(|code| code.parse::<u16>().ok());
    status.is_some_and(|status| (200..400).contains(&status))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use abode_contract::apps::AppHealthcheck;
    use std::net::TcpListener;

    fn check(threshold: u32) -> AppCheck {
        AppCheck::new(
            AgentApp {
                slug: "web".into(),
                healthcheck: AppHealthcheck {
                    url: "http://127.0.0.1:1/".into(),
                    interval: 1,
                    threshold,
                },
            },
            Instant::now(),
        )
    }

    #[test]
    fn health_changes_after_the_threshold_and_is_reported_once() {
        let now = Instant::now();
        let mut app = check(3);
        assert_eq!(app.observe(false, now), None, "still initializing");
        assert_eq!(app.observe(false, now), None);
        assert_eq!(app.observe(false, now), Some(AppHealth::Unhealthy));
        app.reported(AppHealth::Unhealthy);
        assert_eq!(app.observe(false, now), None);
        assert_eq!(app.observe(true, now), Some(AppHealth::Healthy));
        // Not taken by the server: said again at the next check.
        assert_eq!(app.observe(true, now), Some(AppHealth::Healthy));
        app.reported(AppHealth::Healthy);
        assert_eq!(app.observe(true, now), None);
        assert_eq!(app.observe(false, now), None, "one failure is not enough");
        assert!(app.due() > now);
    }

    /// A one-shot HTTP server answering `status`.
    fn answering(status: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes(),
                );
            }
        });
        format!("http://127.0.0.1:{port}/health")
    }

    #[test]
    fn probes_take_2xx_and_3xx_only() {
        assert!(probe(&answering("200 OK")));
        assert!(probe(&answering("302 Found")));
        assert!(!probe(&answering("503 Service Unavailable")));
        assert!(!probe("http://127.0.0.1:1/"));
        assert!(!probe("not a url"));
    }
}
