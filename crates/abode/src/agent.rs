//! `abode agent`: the process inside a workspace that tells the platform the
//! workspace is usable.
//!
//! `abode_agent.init_script` starts it with `--url` and the token in
//! `ABODE_AGENT_TOKEN` (never on the command line, never printed). It reports
//! lifecycle `starting`, then `ready`, then heartbeats until SIGTERM or SIGINT.
//! The server may not know the token yet when the agent starts (it learns it
//! from the Terraform state once the apply that started the agent finished),
//! and it may be down or restarting: every call is retried with a capped
//! exponential backoff instead of giving up.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abode_client::{Client, ClientError};
use anyhow::Context;
use clap::Args;

const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(5);
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The server's URL as the workspace reaches it (the template's ABODE_AGENT_URL).
    #[arg(long, env = "ABODE_AGENT_URL")]
    pub url: String,
    /// Heartbeat interval (`5`, `5s` or `500ms`); by default the server's.
    #[arg(long, value_parser = parse_duration)]
    pub heartbeat_interval: Option<Duration>,
}

/// Parses `N` (seconds), `Ns` or `Nms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit_ms) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1000)
    } else {
        (text, 1000)
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("expected a duration like 5, 5s or 500ms, got {text:?}"))?;
    if value == 0 {
        return Err("the duration must be greater than zero".into());
    }
    Ok(Duration::from_millis(value.saturating_mul(unit_ms)))
}

/// Runs the agent until it is told to stop.
pub fn run(args: AgentArgs) -> ExitCode {
    match run_agent(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("abode agent: error: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn run_agent(args: AgentArgs) -> anyhow::Result<()> {
    let token = std::env::var(abode_contract::AGENT_TOKEN)
        .ok()
        .filter(|token| !token.trim().is_empty())
        .with_context(|| {
            format!(
                "{} is not set: the agent needs the abode_agent token",
                abode_contract::AGENT_TOKEN
            )
        })?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
    }
    let client = Client::new(&args.url, Some(token));
    let agent = Agent {
        client,
        stop,
        url: args.url,
    };
    agent.run(args.heartbeat_interval);
    log("stopping");
    Ok(())
}

fn log(message: &str) {
    eprintln!("abode agent: {message}");
}

struct Agent {
    client: Client,
    stop: Arc<AtomicBool>,
    url: String,
}

impl Agent {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps up to `duration`; false when a stop signal came meanwhile.
    fn pause(&self, duration: Duration) -> bool {
        let deadline = Instant::now() + duration;
        while !self.stopped() {
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
        }
        false
    }

    /// Calls `call` until it succeeds or the agent is stopped; false when stopped.
    fn retry(&self, what: &str, call: impl Fn(&Client) -> Result<(), ClientError>) -> bool {
        let mut delay = FIRST_RETRY;
        let mut last_error = String::new();
        while !self.stopped() {
            match call(&self.client) {
                Ok(()) => return true,
                Err(err) => {
                    let text = describe(&err);
                    // The same failure every 5 s would drown the output.
                    if text != last_error {
                        log(&format!("{what} failed, retrying: {text}"));
                        last_error = text;
                    }
                }
            }
            if !self.pause(delay) {
                return false;
            }
            delay = (delay * 2).min(MAX_RETRY);
        }
        false
    }

    fn run(&self, interval_override: Option<Duration>) {
        log(&format!("connecting to {}", self.url));
        if !self.retry("reporting lifecycle starting", |c| {
            c.agent_lifecycle("starting")
        }) {
            return;
        }
        let me = self.client.agent_me().ok();
        log(&format!("connected as agent {}", me_label(me.as_ref())));
        let interval = interval_override
            .or_else(|| {
                me.as_ref()
                    .and_then(|me| me.heartbeat_interval_seconds)
                    .filter(|seconds| *seconds > 0)
                    .map(Duration::from_secs)
            })
            .unwrap_or(DEFAULT_HEARTBEAT);
        if !self.retry("reporting lifecycle ready", |c| c.agent_lifecycle("ready")) {
            return;
        }
        log(&format!(
            "ready; heartbeat every {} ms",
            interval.as_millis()
        ));
        let mut failing = false;
        while self.pause(interval) {
            match self.client.agent_heartbeat() {
                Ok(()) if failing => {
                    log("heartbeats go through again");
                    failing = false;
                }
                Ok(()) => {}
                Err(err) if !failing => {
                    log(&format!(
                        "heartbeat failed, will keep trying: {}",
                        describe(&err)
                    ));
                    failing = true;
                }
                Err(_) => {}
            }
        }
    }
}

fn me_label(me: Option<&abode_client::types::AgentMe>) -> String {
    match me {
        Some(me) if !me.workspace.is_empty() => {
            format!("{} of workspace {}/{}", me.agent, me.owner, me.workspace)
        }
        _ => "(workspace not known yet)".to_string(),
    }
}

/// One line about a failed call; the token is never part of it.
fn describe(err: &ClientError) -> String {
    match err.status() {
        Some(401) => format!("the server does not accept this agent's token (yet): {err}"),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        let cases = [
            ("5", Some(5000)),
            ("5s", Some(5000)),
            ("500ms", Some(500)),
            ("0", None),
            ("abc", None),
            ("-1", None),
        ];
        for (input, expected) in cases {
            let got = parse_duration(input).ok().map(|d| d.as_millis() as u64);
            assert_eq!(got, expected, "{input}");
        }
    }
}
