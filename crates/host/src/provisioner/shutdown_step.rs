//! The agents' shutdown scripts (issue 47, part 4): before a stop, restart
//! or delete is applied (its apply would end the agent's process), each
//! connected agent with a `shutdown_script` or stop scripts (`abode_script`
//! with `run_on_stop`) is asked to run them, and the build waits for them
//! up to the longest of their timeouts. An agent that is not
//! connected, a script that fails or runs past its time, an agent that never
//! answers: each is logged, and the stop goes on.
//!
//! The request is a row of the store: the agent's heartbeat answer carries it
//! (whichever server the agent talks to), its report ends it; the build, on
//! this server or a daemon's call, looks at the rows one step at a time, so
//! that a cancel is heard between steps. The agent's token stays valid while
//! it runs: the workspace's latest succeeded build is still its start.

use abode_runner::{Failure, LogLevel, LogStage};
use abode_store::{AgentShutdownRow, NewAgentShutdown, Transition};

use super::on_server::ServerJob;
use super::run::storage;

/// How long a shutdown script may run when its agent's state says nothing.
const DEFAULT_TIMEOUT_SECONDS: i64 = 300;
/// Beyond the script's timeout and two heartbeats, what the build allows
/// for the agent's report to come.
const GRACE_MS: i64 = 15_000;
/// The most lines of a script's output the build log repeats.
const OUTPUT_LINES: usize = 40;

fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl ServerJob {
    /// One step: asks what is still to be asked, ends what ran past its
    /// deadline, writes how each ended (once); true once every agent's
    /// shutdown has ended (or the build's transition has none).
    pub async fn shut_down_agents(&self) -> Result<bool, Failure> {
        let build = self.build();
        if !matches!(build.transition, Transition::Stop | Transition::Delete) {
            return Ok(true);
        }
        let host = self.host();
        let store = &host.inner.store;
        let config = &host.inner.config;
        let now = config.clock.now_ms();
        let targets = store
            .agents_to_shut_down(&build.workspace_id)
            .await
            .map_err(storage)?;
        for target in targets {
            // The shutdown script and the stop scripts run side by side:
            // the build waits for the longest.
            let script_timeout = if target.script.trim().is_empty() {
                0
            } else {
                target.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            };
            let timeout = script_timeout
                .max(target.stop_timeout_seconds.unwrap_or(0))
                .max(0);
            let what = match (target.script.trim().is_empty(), target.stop_timeout_seconds) {
                (false, Some(_)) => "its shutdown and stop scripts",
                (true, Some(_)) => "its stop scripts",
                _ => "its shutdown script",
            };
            let connected = target
                .last_heartbeat_at
                .is_some_and(|beat| now - beat <= millis(config.agent_timeouts.heartbeat));
            let asked = NewAgentShutdown {
                build_id: build.id.clone(),
                workspace_id: build.workspace_id.clone(),
                agent_id: target.agent_id,
                agent_name: target.agent_name.clone(),
                script: target.script,
                timeout_seconds: timeout,
                deadline: now
                    .saturating_add(timeout.saturating_mul(1000))
                    .saturating_add(2 * millis(config.agent_heartbeat_interval))
                    .saturating_add(GRACE_MS),
                outcome: (!connected).then(|| "not_connected".to_string()),
            };
            if store.insert_agent_shutdown(&asked).await.map_err(storage)? && connected {
                self.note(
                    &LogStage::SHUTDOWN,
                    LogLevel::Info,
                    &format!(
                        "asking agent {} to run {what} (up to {timeout} s)",
                        target.agent_name
                    ),
                )
                .await;
            }
        }
        for row in store.agent_shutdowns(&build.id).await.map_err(storage)? {
            if row.ended_at.is_none() && now >= row.deadline {
                store
                    .end_agent_shutdown(&build.id, &row.agent_id, "no_answer", None, None)
                    .await
                    .map_err(storage)?;
            }
        }
        let mut done = true;
        for row in store.agent_shutdowns(&build.id).await.map_err(storage)? {
            if row.ended_at.is_none() {
                done = false;
            } else if store
                .mark_agent_shutdown_logged(&build.id, &row.agent_id)
                .await
                .map_err(storage)?
            {
                self.log_shutdown(&row).await;
            }
        }
        Ok(done)
    }

    /// How one agent's shutdown ended, and the end of its output.
    async fn log_shutdown(&self, row: &AgentShutdownRow) {
        let agent = &row.agent_name;
        if row.script.trim().is_empty() {
            // Stop scripts only: each one's end is in the output.
            let ended = match row.outcome.as_deref().unwrap_or_default() {
                "succeeded" => "ended",
                "not_connected" => "did not run: the agent is not connected",
                "no_answer" => "did not say how they ended in time",
                _ => "did not all succeed",
            };
            let level = if ended == "ended" {
                LogLevel::Info
            } else {
                LogLevel::Warn
            };
            self.note(
                &LogStage::SHUTDOWN,
                level,
                &format!("agent {agent}: the stop scripts {ended}; the build goes on"),
            )
            .await;
            self.log_output(row).await;
            return;
        }
        let (level, line) = match row.outcome.as_deref().unwrap_or_default() {
            "succeeded" => (
                LogLevel::Info,
                format!("agent {agent}: the shutdown script succeeded"),
            ),
            "failed" => (
                LogLevel::Warn,
                format!(
                    "agent {agent}: the shutdown script exited with status {}; the build goes on",
                    row.exit_status.unwrap_or(1)
                ),
            ),
            "timed_out" => (
                LogLevel::Warn,
                format!(
                    "agent {agent}: the shutdown script ran past its shutdown_timeout of {} s and was stopped; the build goes on",
                    row.timeout_seconds
                ),
            ),
            "not_connected" => (
                LogLevel::Warn,
                format!(
                    "agent {agent} is not connected: its shutdown script does not run; the build goes on"
                ),
            ),
            "no_answer" => (
                LogLevel::Warn,
                format!(
                    "agent {agent} did not say how its shutdown script ended in time; the build goes on"
                ),
            ),
            _ => (
                LogLevel::Warn,
                format!("agent {agent}: the shutdown script could not be run; the build goes on"),
            ),
        };
        self.note(&LogStage::SHUTDOWN, level, &line).await;
        self.log_output(row).await;
    }

    /// The end of a shutdown's output, each line after its agent's name.
    async fn log_output(&self, row: &AgentShutdownRow) {
        let agent = &row.agent_name;
        let output = row.output.as_deref().unwrap_or_default();
        let lines: Vec<&str> = output.lines().collect();
        for text in &lines[lines.len().saturating_sub(OUTPUT_LINES)..] {
            self.note(
                &LogStage::SHUTDOWN,
                LogLevel::Info,
                &format!("{agent} | {text}"),
            )
            .await;
        }
    }
}
