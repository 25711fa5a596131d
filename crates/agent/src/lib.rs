//! The workspace agent (`abode agent`): the process inside a workspace that
//! tells the platform the workspace is usable, and through which people
//! reach it.
//!
//! It is a crate of its own because it runs somewhere else than the rest of
//! Abode: inside a workspace, as the workspace's user, on a machine that
//! trusts nothing but the server it was told of. It talks to that server as
//! a client only (`abode-client` over HTTP, a WebSocket for its tunnel) and
//! links no part of the server. The `abode` binary parses `abode agent`'s
//! arguments and calls [`run`] or [`report_activity`]; Git's askpass and
//! `abode external-auth access-token` ask it through [`git_auth`], and
//! `abode ssh` and `abode port-forward` dial with [`wsdial`].
//!
//! `abode_agent.init_script` starts it with `--url` and the token in
//! `ABODE_AGENT_TOKEN` (never on the command line, never printed). It reports
//! lifecycle `starting`, runs the agent's `startup_script` (if any), then
//! reports `ready`, or `start_error` with the script's exit status, and
//! heartbeats until SIGTERM or SIGINT. Each heartbeat says how full the home
//! volume is; an answer that asks for the `shutdown_script` (a stop, restart
//! or delete waits for it) runs it once per build, killed at its timeout,
//! and reports how it ended. Heartbeats run on their own thread from
//! the first contact, so a startup script that runs long never makes the
//! workspace look disconnected.
//! The server may not know the token yet when the agent starts (it learns it
//! from the Terraform state once the apply that started the agent finished),
//! and it may be down or restarting: every call is retried with a capped
//! exponential backoff instead of giving up.
//!
//! Its `abode_script`s (`scripts.rs`) run beside the startup script: start
//! scripts in parallel (`ready` and the tunnel wait for those that block
//! login), cron scripts once it is ready, stop scripts beside the shutdown
//! script; every script runs through `run.rs`.
//!
//! Once it knows its settings, the agent also keeps its tunnel to the server
//! (`tunnel.rs`), through which people reach the workspace with
//! `abode ssh`, OpenSSH and `abode port-forward` (docs/ssh.md): its SSH
//! server (`ssh.rs`), its web terminals (`pty.rs`), port forwards, and the
//! connections it dials back for an app's bytes (`dial_back.rs`). It checks
//! its apps' health (`apps.rs`) and answers Git's credential prompts
//! (`git_auth.rs`).
//!
//! What it keeps:
//!
//! - The agent's token never leaves the agent. It is read from the
//!   environment, sent only to the server (as a bearer header, never in a
//!   URL), removed from the environment of everything the agent runs
//!   (scripts, SSH sessions, terminals), and never written to a file or a
//!   log line. Git's credentials are asked for over a Unix socket in a
//!   directory only the agent's user may enter.
//! - The agent listens on no port. Every stream reaches it through the
//!   tunnel it dialed itself with its token, or on a connection it dials
//!   back for a stream's ticket (64 hex digits, checked before it is sent);
//!   the SSH server accepts its client as is because the server
//!   authenticated and authorized the person before opening the stream.
//! - Nothing the server or a network does makes it give up: every call and
//!   the tunnel are retried with a capped backoff, a dial-back that fails
//!   falls back to the tunnel after saying so on the stream, and a failure
//!   is logged once until it changes.
//! - A script's log is the owner's alone (mode 0600, created exclusively,
//!   never through a planted link), one per workspace and agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abode_client::{Client, ClientError};
use abode_sdk::{AgentHeartbeat, AgentMe};

use crate::run::{expand_home, log_tail, run_script, Startup};

mod apps;
mod dial_back;
pub mod git_auth;
mod pty;
mod report_stream;
mod run;
mod scripts;
mod ssh;
pub mod stat;
mod tunnel;
pub mod unsaved;
mod watch;
pub mod wsdial;

const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(5);
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// How often the home is scanned for unsaved work when the server does not say.
const DEFAULT_UNSAVED_SCAN: Duration = Duration::from_secs(5 * 60);

/// How the agent runs (`abode agent`'s flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// The server's URL as the workspace reaches it (the template's
    /// `ABODE_AGENT_URL`).
    pub url: String,
    /// The heartbeat interval; by default the server's.
    pub heartbeat_interval: Option<Duration>,
    /// Where the startup and claim scripts' output is written; by default
    /// the system's temporary directory.
    pub log_dir: Option<PathBuf>,
}

/// Why the agent could not run, or a report did not go through.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(
        "{} is not set: the agent needs the abode_agent token",
        abode_contract::AGENT_TOKEN
    )]
    NoToken,
    #[error("cannot install the signal handler")]
    Signals(#[source] std::io::Error),
    #[error("activity not reported")]
    Activity(#[source] ClientError),
}

/// `abode agent activity`: one report, no retries (a hook may call it
/// often; the next call reports again).
pub fn report_activity(url: &str) -> Result<(), AgentError> {
    let client = Client::new(url, Some(agent_token()?));
    client.agent_activity().map_err(AgentError::Activity)?;
    Ok(())
}

/// The agent's token, from the environment contract.
fn agent_token() -> Result<String, AgentError> {
    std::env::var(abode_contract::AGENT_TOKEN)
        .ok()
        .filter(|token| !token.trim().is_empty())
        .ok_or(AgentError::NoToken)
}

/// Runs the agent until SIGTERM or SIGINT.
pub fn run(options: Options) -> Result<(), AgentError> {
    let token = agent_token()?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(AgentError::Signals)?;
    }
    let client = Client::new(&options.url, Some(token.clone()));
    let agent = Agent {
        client,
        stop,
        scan_unsaved: AtomicBool::new(false),
        token,
        url: options.url,
        log_dir: options.log_dir.unwrap_or_else(std::env::temp_dir),
    };
    agent.run(options.heartbeat_interval);
    log("stopping");
    Ok(())
}

fn log(message: &str) {
    eprintln!("abode agent: {message}");
}

struct Agent {
    client: Client,
    stop: Arc<AtomicBool>,
    /// A heartbeat's answer asked for a fresh report of unsaved work.
    scan_unsaved: AtomicBool,
    url: String,
    token: String,
    log_dir: PathBuf,
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
        self.retry_value(what, call).is_some()
    }

    /// Calls `call` until it succeeds (its answer) or the agent is stopped (None).
    fn retry_value<T>(
        &self,
        what: &str,
        call: impl Fn(&Client) -> Result<T, ClientError>,
    ) -> Option<T> {
        let mut delay = FIRST_RETRY;
        let mut last_error = String::new();
        while !self.stopped() {
            match call(&self.client) {
                Ok(value) => return Some(value),
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
                return None;
            }
            delay = (delay * 2).min(MAX_RETRY);
        }
        None
    }

    fn run(&self, interval_override: Option<Duration>) {
        log(&format!("connecting to {}", self.url));
        if !self.retry("reporting lifecycle starting", |c| {
            c.agent_lifecycle("starting", None)
        }) {
            return;
        }
        // The startup script comes with the agent's settings: without them
        // the agent cannot tell whether it is ready.
        let Some(mut me) = self.retry_value("reading the agent's settings", Client::agent_me)
        else {
            return;
        };
        self.offer_git_credentials(&mut me);
        put_self_on_path(&mut me);
        log(&format!("connected as agent {}", me_label(Some(&me))));
        let interval = interval_override
            .or_else(|| {
                me.heartbeat_interval_seconds
                    .filter(|seconds| *seconds > 0)
                    .map(Duration::from_secs)
            })
            .unwrap_or(DEFAULT_HEARTBEAT);
        log(&format!("heartbeat every {} ms", interval.as_millis()));
        let runner = crate::scripts::Runner::new(
            self.client.clone(),
            Arc::clone(&self.stop),
            self.log_dir.clone(),
            &me,
        );
        // Scripts that block login hold the tunnel back until they end.
        let blocks_login = me
            .scripts
            .iter()
            .any(|script| script.run_on_start && script.start_blocks_login);
        if !blocks_login {
            self.open_tunnel(&me);
        }
        std::thread::scope(|scope| {
            scope.spawn(|| self.heartbeats(interval, &me, &runner));
            scope.spawn(|| self.report_unsaved(&me));
            if !me.apps.is_empty() {
                scope.spawn(|| self.check_apps(&me));
            }
            if !me.watch.is_empty() {
                scope.spawn(|| {
                    crate::watch::Watcher {
                        client: &self.client,
                        url: &self.url,
                        token: &self.token,
                        stop: &self.stop,
                        dir: me.dir.as_deref().map(expand_home),
                        env: me.env.clone(),
                        log_dir: self.log_dir.clone(),
                    }
                    .run(&me.watch)
                });
            }
            let blocking = runner.start(&me.scripts);
            let mut outcome = self.startup(&me, &runner);
            for (name, handle) in blocking {
                let ended = handle.join().ok().flatten().unwrap_or(Startup::NotRun);
                if ended != Startup::Succeeded && outcome == Startup::Succeeded {
                    log(&format!("script {name} blocks login and did not succeed"));
                    outcome = ended;
                }
            }
            if blocks_login && !self.stopped() {
                self.open_tunnel(&me);
            }
            let (state, exit_status) = match outcome {
                Startup::Succeeded => ("ready", None),
                Startup::Failed(code) => ("start_error", Some(code)),
                Startup::NotRun | Startup::TimedOut => ("start_error", None),
                Startup::Interrupted => return,
            };
            if self.retry(&format!("reporting lifecycle {state}"), |c| {
                c.agent_lifecycle(state, exit_status)
            }) {
                log(state);
            }
            // Cron scripts run until the agent is stopped; the scope waits
            // for the heartbeat thread too.
            runner.crons(&me.scripts);
        });
    }

    /// Starts the tunnel through which people reach the workspace.
    fn open_tunnel(&self, me: &AgentMe) {
        let settings = crate::ssh::SessionSettings {
            dir: me.dir.as_deref().map(expand_home),
            env: me.env.clone(),
        };
        if let Err(error) = crate::tunnel::spawn(
            self.url.clone(),
            self.token.clone(),
            settings,
            Arc::clone(&self.stop),
        ) {
            log(&format!(
                "cannot start the tunnel; the workspace accepts no connections: {error}"
            ));
        }
    }

    /// Starts answering Git's credential prompts (`git_auth`) and
    /// names the socket and the askpass program in what the agent runs
    /// (scripts and sessions); a template's own `GIT_ASKPASS` stays.
    fn offer_git_credentials(&self, me: &mut AgentMe) {
        let socket = match crate::git_auth::serve(self.client.clone(), Arc::clone(&self.stop)) {
            Ok(socket) => socket,
            Err(error) => {
                log(&format!(
                    "cannot offer Git credentials; git asks for them as usual: {error}"
                ));
                return;
            }
        };
        me.env.insert(
            abode_contract::AGENT_AUTH_SOCKET.into(),
            socket.display().to_string(),
        );
        match std::env::current_exe() {
            Ok(exe) => {
                me.env
                    .entry("GIT_ASKPASS".into())
                    .or_insert_with(|| exe.display().to_string());
            }
            Err(error) => log(&format!(
                "cannot name this binary as Git's askpass; git asks for credentials as usual: {error}"
            )),
        }
    }

    /// Heartbeats until the agent is stopped. Each answer says who owns the
    /// workspace now: when that changes (a prebuilt workspace was claimed),
    /// the claim script runs, once per new owner, beside the heartbeats.
    fn heartbeats(&self, interval: Duration, me: &AgentMe, runner: &crate::scripts::Runner) {
        let mut failing = false;
        let mut owner = me.owner.clone();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut shut_down_for = String::new();
        while self.pause(interval) {
            let report = abode_sdk::requests::AgentHeartbeatReport {
                home_disk: home.as_deref().and_then(home_disk),
            };
            let answer = self.client.agent_heartbeat(&report);
            if let Ok(now) = &answer {
                if now.scan_unsaved {
                    self.scan_unsaved.store(true, Ordering::SeqCst);
                }
                if let Some(asked) = now
                    .shutdown
                    .as_ref()
                    .filter(|asked| asked.build != shut_down_for)
                {
                    shut_down_for = asked.build.clone();
                    self.shut_down(me, asked.clone(), runner);
                }
                if !now.owner.is_empty() && now.owner != owner {
                    owner = now.owner.clone();
                    log(&format!("the workspace was claimed by {owner}"));
                    self.claimed(me, now);
                }
            }
            match answer {
                Ok(_) if failing => {
                    log("heartbeats go through again");
                    failing = false;
                }
                Ok(_) => {}
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

    /// Scans the home for unsaved work (`unsaved.rs`) once now and then at
    /// the server's interval, or at once when a heartbeat's answer asks for
    /// it, until the agent is stopped, and sends each report: the server
    /// holds a delete that would lose what it lists.
    fn report_unsaved(&self, me: &AgentMe) {
        let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
            log("HOME is not set: no unsaved work is reported");
            return;
        };
        let interval = me
            .unsaved_scan_interval_seconds
            .filter(|seconds| *seconds > 0)
            .map_or(DEFAULT_UNSAVED_SCAN, Duration::from_secs);
        let mut failing = false;
        loop {
            let report = crate::unsaved::scan(&home, crate::unsaved::Limits::default());
            match self.client.agent_unsaved(&report) {
                Ok(()) if failing => {
                    log("reports of unsaved work go through again");
                    failing = false;
                }
                Ok(()) => {}
                Err(err) if !failing => {
                    log(&format!(
                        "the report of unsaved work was not sent, will scan and send again: {}",
                        describe(&err)
                    ));
                    failing = true;
                }
                Err(_) => {}
            }
            // The next scan: at the interval, or at once when asked for.
            let next = Instant::now() + interval;
            while !self.scan_unsaved.swap(false, Ordering::SeqCst) {
                let left = next.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                if !self.pause(left.min(Duration::from_millis(200))) {
                    return;
                }
            }
            if self.stopped() {
                return;
            }
        }
    }

    /// Checks the agent's apps until it is stopped (`apps`), and
    /// tells the server each change of their health.
    fn check_apps(&self, me: &AgentMe) {
        let now = Instant::now();
        let mut checks: Vec<crate::apps::AppCheck> = me
            .apps
            .iter()
            .map(|app| crate::apps::AppCheck::new(app.clone(), now))
            .collect();
        log(&format!("checking the health of {} app(s)", checks.len()));
        loop {
            let Some(next) = checks.iter().map(crate::apps::AppCheck::due).min() else {
                return;
            };
            if !self.pause(next.saturating_duration_since(Instant::now())) {
                return;
            }
            let now = Instant::now();
            for check in checks.iter_mut().filter(|check| check.due() <= now) {
                let healthy = check.probe();
                if let Some(health) = check.observe(healthy, Instant::now()) {
                    match self.client.agent_app_health(check.slug(), health) {
                        Ok(()) => {
                            log(&format!("app {} is {}", check.slug(), health.as_str()));
                            check.reported(health);
                        }
                        Err(err) => log(&format!(
                            "the health of app {} was not reported, will say it again: {}",
                            check.slug(),
                            describe(&err)
                        )),
                    }
                }
            }
        }
    }

    /// Runs the claim script, if the agent has one, on a thread of its own:
    /// the heartbeats go on meanwhile.
    fn claimed(&self, me: &AgentMe, now: &AgentHeartbeat) {
        let Some(script) = me
            .claim_script
            .clone()
            .filter(|script| !script.trim().is_empty())
        else {
            return;
        };
        let mut claimed = me.clone();
        claimed.owner = now.owner.clone();
        claimed.workspace = now.workspace.clone();
        claimed.env.insert(
            abode_contract::WORKSPACE_OWNER_NAME.into(),
            now.owner.clone(),
        );
        claimed
            .env
            .insert(abode_contract::WORKSPACE_NAME.into(), now.workspace.clone());
        let log_path = self.log_dir.join(script_log_name("claim", &claimed));
        let stop = Arc::clone(&self.stop);
        log(&format!(
            "running the claim script; its output goes to {}",
            log_path.display()
        ));
        std::thread::spawn(move || {
            let dir = claimed.dir.as_deref().map(expand_home);
            match run_startup_script(&script, dir.as_deref(), &claimed.env, &log_path, &stop) {
                Startup::Succeeded => log("the claim script succeeded"),
                Startup::Failed(code) => log(&format!(
                    "the claim script exited with status {code}; see {}",
                    log_path.display()
                )),
                Startup::NotRun => log("the claim script could not be started"),
                Startup::Interrupted | Startup::TimedOut => {}
            }
        });
    }

    /// Runs the shutdown script a stop, restart or delete asked for, on a
    /// thread of its own (heartbeats go on), up to its timeout, its output
    /// in the shutdown log; then tells the server how it ended.
    fn shut_down(
        &self,
        me: &AgentMe,
        asked: abode_sdk::AgentShutdown,
        runner: &crate::scripts::Runner,
    ) {
        let log_path = self.log_dir.join(script_log_name("shutdown", me));
        log(&format!(
            "running the shutdown and stop scripts (up to {} s); the shutdown script's output goes to {}",
            asked.timeout_seconds,
            log_path.display()
        ));
        let dir = me.dir.as_deref().map(expand_home);
        let env = me.env.clone();
        let client = self.client.clone();
        let stop = Arc::clone(&self.stop);
        let runner = runner.clone();
        let scripts = me.scripts.clone();
        std::thread::spawn(move || {
            // The stop scripts (`abode_script` run_on_stop) run beside it,
            // each up to its own timeout.
            let stops = std::thread::spawn(move || runner.stop_scripts(&scripts));
            let deadline = Instant::now() + Duration::from_secs(asked.timeout_seconds);
            let mut outcome = if asked.script.trim().is_empty() {
                Startup::Succeeded
            } else {
                run_script(
                    &asked.script,
                    dir.as_deref(),
                    &env,
                    &log_path,
                    &stop,
                    Some(deadline),
                )
            };
            let (stopped, stop_output) = stops.join().unwrap_or((Startup::NotRun, String::new()));
            if outcome == Startup::Succeeded {
                outcome = stopped;
            }
            let (name, exit_status) = match outcome {
                Startup::Succeeded => ("succeeded", None),
                Startup::Failed(code) => ("failed", Some(i64::from(code))),
                Startup::TimedOut => ("timed_out", None),
                Startup::NotRun | Startup::Interrupted => ("not_run", None),
            };
            log(&format!(
                "the shutdown script ended: {name}; see {}",
                log_path.display()
            ));
            let report = abode_sdk::requests::AgentShutdownReport {
                build: asked.build,
                outcome: name.to_string(),
                exit_status,
                output: {
                    let mut output = if asked.script.trim().is_empty() {
                        String::new()
                    } else {
                        log_tail(&log_path, 4096)
                    };
                    output.push_str(&stop_output);
                    output
                },
            };
            // A few tries: the build stops waiting at its own deadline.
            let mut delay = FIRST_RETRY;
            for _ in 0..8 {
                match client.agent_shutdown(&report) {
                    Ok(()) => return,
                    Err(err) if err.status() == Some(404) => return,
                    Err(err) => log(&format!(
                        "the shutdown script's end was not reported, retrying: {}",
                        describe(&err)
                    )),
                }
                std::thread::sleep(delay);
                delay = (delay * 2).min(MAX_RETRY);
            }
        });
    }

    /// Runs the agent's startup script, if it has one (reported as the
    /// script `startup_script`).
    fn startup(&self, me: &AgentMe, runner: &crate::scripts::Runner) -> Startup {
        let Some(script) = me
            .startup_script
            .as_deref()
            .filter(|script| !script.trim().is_empty())
        else {
            return Startup::Succeeded;
        };
        let log_path = self.log_dir.join(script_log_name("startup", me));
        log(&format!(
            "running the startup script; its output goes to {}",
            log_path.display()
        ));
        let outcome = runner
            .run(crate::scripts::STARTUP_SCRIPT, script, &log_path, None)
            .unwrap_or(Startup::NotRun);
        match outcome {
            Startup::Succeeded => log("the startup script succeeded"),
            Startup::Failed(code) => log(&format!(
                "the startup script exited with status {code}; see {}",
                log_path.display()
            )),
            Startup::NotRun | Startup::Interrupted | Startup::TimedOut => {}
        }
        outcome
    }
}

/// Puts the agent's own directory at the end of the `PATH` of everything
/// it runs (shadowing nothing), so that `abode stat`, `abode
/// external-auth access-token` and the rest work in a workspace where
/// `abode` is not installed; and names the agent's pid
/// (`ABODE_AGENT_PID`), whose processes `abode stat` measures.
fn put_self_on_path(me: &mut AgentMe) {
    me.env.insert(
        abode_contract::AGENT_PID.into(),
        std::process::id().to_string(),
    );
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            log(&format!(
                "cannot put this binary on the PATH of what the agent runs: {error}"
            ));
            return;
        }
    };
    if let Some(dir) = exe.parent().map(|dir| dir.display().to_string()) {
        let path = me
            .env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        me.env.insert("PATH".into(), with_dir_last(&path, &dir));
    }
}

/// `path` with `dir` at its end, unless it holds it already.
fn with_dir_last(path: &str, dir: &str) -> String {
    if path.split(':').any(|entry| entry == dir) {
        path.to_string()
    } else if path.is_empty() {
        dir.to_string()
    } else {
        format!("{path}:{dir}")
    }
}

/// A script's log file name (`kind`: startup or claim): one per workspace
/// and agent, so that agents of several workspaces on one machine never
/// share a log.
fn script_log_name(kind: &str, me: &AgentMe) -> String {
    let label = format!("{}-{}-{}", me.owner, me.workspace, me.agent);
    let safe: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("abode-{kind}-{safe}.log")
}

/// Runs `script` with `sh -c` in `dir` (else the agent's own directory), with
/// `env` added to the agent's environment minus the agent token, writing its
/// output to `log_path` (replaced, mode 0600). A stop request kills it.
fn run_startup_script(
    script: &str,
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    log_path: &Path,
    stop: &AtomicBool,
) -> Startup {
    run_script(script, dir, env, log_path, stop, None)
}

/// What `statvfs` says of the volume holding `home`, as `df` counts it.
// The counts are u64 here and narrower on some targets: the conversions stay.
#[allow(clippy::useless_conversion)]
fn home_disk(home: &Path) -> Option<abode_sdk::requests::HomeDisk> {
    let stats = nix::sys::statvfs::statvfs(home).ok()?;
    let unit = u64::from(stats.fragment_size());
    let total = u64::from(stats.blocks()).saturating_mul(unit);
    let free = u64::from(stats.blocks_free()).saturating_mul(unit);
    let available = u64::from(stats.blocks_available()).saturating_mul(unit);
    Some(abode_sdk::requests::HomeDisk {
        total_bytes: total,
        used_bytes: total.saturating_sub(free),
        available_bytes: available,
    })
}

fn me_label(me: Option<&AgentMe>) -> String {
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn startup_scripts_run_in_their_dir_with_their_env_and_log_their_output() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("logs/startup.log");
        let env = BTreeMap::from([("GREETING".to_string(), "hello".to_string())]);
        let stop = AtomicBool::new(false);
        let script = "printf '%s' \"$GREETING\" > marker; echo to-stdout; echo to-stderr >&2";
        let cases = [
            (script.to_string(), Startup::Succeeded),
            (format!("{script}; exit 3"), Startup::Failed(3)),
            (format!("{script}; kill -9 $$"), Startup::Failed(128 + 9)),
        ];
        for (script, expected) in cases {
            let _ = std::fs::remove_file(dir.path().join("marker"));
            let outcome = run_startup_script(&script, Some(dir.path()), &env, &log_path, &stop);
            assert_eq!(outcome, expected, "{script}");
            assert_eq!(
                std::fs::read_to_string(dir.path().join("marker")).unwrap(),
                "hello",
                "{script}"
            );
            let output = std::fs::read_to_string(&log_path).unwrap();
            assert_eq!(
                output, "to-stdout\nto-stderr\n",
                "replaced every run: {script}"
            );
        }
        let mode = std::fs::metadata(&log_path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        std::fs::remove_file(&log_path).unwrap();
        std::os::unix::fs::symlink(&victim, &log_path).unwrap();
        run_startup_script("echo replaced", None, &env, &log_path, &stop);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(std::fs::read_to_string(&log_path).unwrap(), "replaced\n");

        let missing = dir.path().join("no-such-dir");
        assert_eq!(
            run_startup_script("true", Some(&missing), &env, &log_path, &stop),
            Startup::NotRun
        );
        assert!(std::fs::read_to_string(&log_path)
            .unwrap()
            .contains("cannot run the startup script"));
    }

    #[test]
    fn a_stop_request_interrupts_a_long_startup_script() {
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(true);
        let started = Instant::now();
        let outcome = run_startup_script(
            "sleep 30",
            None,
            &BTreeMap::new(),
            &dir.path().join("startup.log"),
            &stop,
        );
        assert_eq!(outcome, Startup::Interrupted);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn the_agents_directory_goes_last_on_the_path_once() {
        assert_eq!(
            with_dir_last("/usr/bin:/bin", "/opt/abode"),
            "/usr/bin:/bin:/opt/abode"
        );
        assert_eq!(
            with_dir_last("/opt/abode:/bin", "/opt/abode"),
            "/opt/abode:/bin"
        );
        assert_eq!(with_dir_last("", "/opt/abode"), "/opt/abode");
    }

    #[test]
    fn a_shutdown_script_past_its_deadline_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("shutdown.log");
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        // A child of the script that would write after the deadline; its
        // pid is noted so that its end is observed, not slept on.
        let outcome = run_script(
            "echo begun; (sleep 3; echo late > late) & echo $! > child.pid; sleep 60",
            Some(dir.path()),
            &BTreeMap::new(),
            &log_path,
            &stop,
            Some(Instant::now() + Duration::from_millis(1000)),
        );
        assert_eq!(outcome, Startup::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10));
        // The child (the subshell that would write `late`) is gone: dead
        // or a zombie, it can write nothing any more.
        let pid = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let alive = std::fs::read_to_string(&stat).is_ok_and(|stat| {
                // The state follows the command's `(name)`.
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            });
            if !alive {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the script's child {} outlived its deadline",
                pid.trim()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !dir.path().join("late").exists(),
            "the whole group was killed"
        );
        assert_eq!(log_tail(&log_path, 4096), "begun\n");
        assert_eq!(log_tail(&log_path, 3), "un\n");
        let disk = home_disk(dir.path()).unwrap();
        assert!(disk.total_bytes > 0 && disk.used_bytes <= disk.total_bytes);
    }

    #[test]
    fn startup_log_names_are_one_safe_file_name_per_workspace_and_agent() {
        let me = |agent: &str| AgentMe {
            workspace: "dev".into(),
            owner: "alice".into(),
            agent: agent.into(),
            heartbeat_interval_seconds: None,
            unsaved_scan_interval_seconds: None,
            startup_script: None,
            claim_script: None,
            dir: None,
            env: BTreeMap::new(),
            apps: Vec::new(),
            scripts: Vec::new(),
            watch: Default::default(),
        };
        assert_eq!(
            script_log_name("startup", &me("main")),
            "abode-startup-alice-dev-main.log"
        );
        assert_eq!(
            script_log_name("startup", &me("module.m.extra[\"a/b\"]")),
            "abode-startup-alice-dev-module.m.extra__a_b__.log"
        );
    }
}
