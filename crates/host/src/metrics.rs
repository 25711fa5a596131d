//! The background refresh of the metrics that need the database (held
//! builds, the job queue, agents by status, the prebuild pools): a few store
//! queries per interval,
//! so that a Prometheus scrape only encodes what is in memory and never
//! queries, however often it comes.

use std::time::Duration;

use abode_metrics::PlatformGauges;
use abode_store::{AgentCutoffs, PlatformCounts};
use tokio::sync::watch;

use crate::room::Host;
use abode_control::AgentStatus;
use abode_control::ControlError;

/// Every agent status a workspace's agent can be counted in (`None` is a
/// workspace without a running agent, not an agent's status).
const AGENT_STATUSES: [AgentStatus; 6] = [
    AgentStatus::Connecting,
    AgentStatus::Starting,
    AgentStatus::Ready,
    AgentStatus::StartError,
    AgentStatus::Unhealthy,
    AgentStatus::Disconnected,
];

fn status_name(status: AgentStatus) -> &'static str {
    match status {
        AgentStatus::None => "none",
        AgentStatus::Connecting => "connecting",
        AgentStatus::Starting => "starting",
        AgentStatus::Ready => "ready",
        AgentStatus::StartError => "start_error",
        AgentStatus::Unhealthy => "unhealthy",
        AgentStatus::Disconnected => "disconnected",
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The gauges one refresh sets from what the store counted at `now_ms`.
fn gauges(counts: PlatformCounts, now_ms: i64) -> PlatformGauges {
    let agents = AGENT_STATUSES
        .iter()
        .map(|status| {
            let name = status_name(*status);
            let count = counts
                .agents
                .iter()
                .find(|(counted, _)| counted == name)
                .map_or(0, |(_, count)| *count);
            (name.to_string(), count)
        })
        .collect();
    let oldest_ms = counts
        .oldest_pending_job_at
        .map_or(0, |queued| (now_ms - queued).max(0));
    PlatformGauges {
        builds_held: counts.builds_held,
        jobs_pending: counts.jobs_pending,
        job_queue_oldest_seconds: oldest_ms as f64 / 1000.0,
        agents,
        notifications_pending: counts.notifications_pending,
        updated_at_seconds: now_ms as f64 / 1000.0,
    }
}

impl Host {
    /// One pass of the background loop `task` ended
    /// (`abode_background_passes_total`): what shows that a loop ran, in a
    /// scrape and to the tests that prove it did nothing.
    pub(crate) fn background_pass(&self, task: &str) {
        self.inner.config.metrics.background_pass(task);
    }

    /// Reads the platform's counts once and sets the refreshed gauges.
    pub async fn refresh_metrics(&self) -> Result<(), ControlError> {
        let config = &self.inner.config;
        let now = self.now_ms();
        // The same judgement as a workspace view's agent health
        // (`workspace_status::agent_health`): the store counts the agents of
        // running workspaces against these moments.
        let cutoffs = AgentCutoffs {
            connect_before: now.saturating_sub(millis(config.agent_timeouts.connect)),
            heartbeat_before: now.saturating_sub(millis(config.agent_timeouts.heartbeat)),
        };
        let counts = self.inner.store.platform_counts(cutoffs).await?;
        // The pools first: the update time set with the platform's counts
        // then covers both.
        self.prebuilds().refresh_pool_gauges().await?;
        config.metrics.set_platform(&gauges(counts, now));
        Ok(())
    }

    /// Refreshes the database gauges now and every `interval` until
    /// `shutdown` turns true. A failed refresh is logged and the gauges
    /// keep their last values (`abode_metrics_last_updated_seconds` tells
    /// how old they are).
    pub fn start_metrics_refresh(
        &self,
        interval: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let host = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(100)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                if *shutdown.borrow() {
                    break;
                }
                tokio::select! {
                    _ = ticks.tick() => {
                        if let Err(error) = host.refresh_metrics().await {
                            tracing::warn!(%error, "cannot refresh the metrics from the database");
                        }
                    }
                    _ = shutdown.changed() => {}
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_agent_status_gets_a_value_and_the_queue_age_is_in_seconds() {
        let counts = PlatformCounts {
            builds_held: 2,
            jobs_pending: 3,
            oldest_pending_job_at: Some(10_000),
            agents: vec![("ready".into(), 4), ("unhealthy".into(), 1)],
            notifications_pending: 7,
        };
        let gauges = gauges(counts, 12_500);
        assert_eq!((gauges.builds_held, gauges.jobs_pending), (2, 3));
        assert_eq!(gauges.notifications_pending, 7);
        assert_eq!(gauges.job_queue_oldest_seconds, 2.5);
        assert_eq!(gauges.updated_at_seconds, 12.5);
        let agents: Vec<(&str, i64)> = gauges
            .agents
            .iter()
            .map(|(status, count)| (status.as_str(), *count))
            .collect();
        assert_eq!(
            agents,
            [
                ("connecting", 0),
                ("starting", 0),
                ("ready", 4),
                ("start_error", 0),
                ("unhealthy", 1),
                ("disconnected", 0)
            ]
        );
    }

    #[test]
    fn an_empty_queue_is_zero_seconds_old() {
        let gauges = gauges(PlatformCounts::default(), 12_500);
        assert_eq!(gauges.job_queue_oldest_seconds, 0.0);
    }
}
