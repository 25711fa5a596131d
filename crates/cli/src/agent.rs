//! `abode agent` and Git's askpass inside a workspace: their arguments,
//! handed to the agent's crate (`abode-agent`), which does the work.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use abode_agent::git_auth::Prompt;
use clap::Args;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The server's URL as the workspace reaches it (the template's ABODE_AGENT_URL).
    #[arg(long, env = "ABODE_AGENT_URL")]
    pub url: String,
    /// Heartbeat interval (`5`, `5s` or `500ms`); by default the server's.
    #[arg(long, value_parser = parse_duration)]
    pub heartbeat_interval: Option<Duration>,
    /// Where the startup script's output is written (default: the system's
    /// temporary directory).
    #[arg(long, env = "ABODE_AGENT_LOG_DIR")]
    pub log_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<AgentCommand>,
}

/// What a process inside the workspace asks the agent's server (with the
/// agent's token and URL from the environment), instead of running the agent.
#[derive(Debug, clap::Subcommand)]
pub enum AgentCommand {
    /// Report that the workspace is in use: it counts as used now and its
    /// autostop deadline is pushed by the template's activity bump.
    Activity,
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

/// Runs the agent until it is told to stop (or, with a subcommand, does
/// that once).
pub fn run(args: AgentArgs) -> ExitCode {
    let result = match args.command {
        Some(AgentCommand::Activity) => abode_agent::report_activity(&args.url),
        None => abode_agent::run(abode_agent::Options {
            url: args.url,
            heartbeat_interval: args.heartbeat_interval,
            log_dir: args.log_dir,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("abode agent: error: {:#}", anyhow::Error::new(err));
            ExitCode::from(crate::exit::FAILURE)
        }
    }
}

/// Answers Git's prompt on standard output; a non-zero exit (nothing
/// linked, no provider serving the URL) lets Git say it could not read the
/// credentials.
pub fn askpass(socket: &Path, prompt: Prompt) -> ExitCode {
    match abode_agent::git_auth::askpass(socket, prompt) {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("abode: {error}");
            ExitCode::from(crate::exit::FAILURE)
        }
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
