//! The agent's `abode_script`s (issue 48, item 1), each with its own log,
//! and its `startup_script` as one script among them.
//!
//! - Start scripts (`run_on_start`) run in parallel with each other and the
//!   startup script. The agent reports `ready` once the startup script and
//!   every `start_blocks_login` script ended, `start_error` when one of those
//!   failed; a failing script that does not block login is only a failed
//!   script. While blocking scripts run, the agent's tunnel waits: a
//!   connection is refused as not connected yet, and `abode ssh` waits.
//! - Cron scripts run on their six-field schedule (UTC) until the agent
//!   stops; a run still going (from its cron or its start) is not started
//!   again.
//! - Stop scripts (`run_on_stop`) run beside the shutdown script when a
//!   stop, restart or delete asks for it, each up to its own timeout.
//!
//! Each run is reported (`POST /agent/scripts`) when it starts, every few
//! seconds while its output grows, and when it ends, with the end of its
//! output; `abode scripts` reads them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use abode_client::Client;
use abode_contract::script::{file_safe, ScriptCron, ScriptDefinition};
use abode_sdk::requests::AgentScriptReport;
use abode_sdk::AgentMe;

use crate::run::{expand_home, log_tail, run_script, Startup};

const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(5);

fn log(message: &str) {
    eprintln!("abode agent: {message}");
}

/// How much of a run's output is sent.
const LOG_BYTES: u64 = 64 * 1024;
/// How often a running script's output is sent while it grows.
const PROGRESS: Duration = Duration::from_secs(2);

/// The name the startup script has among the scripts.
pub(crate) const STARTUP_SCRIPT: &str = "startup_script";

/// Runs scripts and reports their runs; cheap to clone onto a thread.
#[derive(Clone)]
pub(crate) struct Runner {
    client: Client,
    stop: Arc<AtomicBool>,
    log_dir: PathBuf,
    /// Owner, workspace and agent, as a file name's part.
    label: String,
    dir: Option<PathBuf>,
    env: BTreeMap<String, String>,
    /// Each script's count of runs.
    runs: Arc<Mutex<BTreeMap<String, i64>>>,
    /// The scripts running now.
    running: Arc<Mutex<BTreeSet<String>>>,
}

impl Runner {
    pub(crate) fn new(
        client: Client,
        stop: Arc<AtomicBool>,
        log_dir: PathBuf,
        me: &AgentMe,
    ) -> Runner {
        Runner {
            client,
            stop,
            log_dir,
            label: file_safe(&format!("{}-{}-{}", me.owner, me.workspace, me.agent)),
            dir: me.dir.as_deref().map(expand_home),
            env: me.env.clone(),
            runs: Arc::default(),
            running: Arc::default(),
        }
    }

    /// Where a script's output goes.
    pub(crate) fn log_path(&self, script: &ScriptDefinition) -> PathBuf {
        match script.log_path.as_deref() {
            Some(path) => self.log_dir.join(expand_home(path)),
            None => self.log_dir.join(format!(
                "abode-script-{}-{}.log",
                self.label,
                file_safe(&script.display_name)
            )),
        }
    }

    /// Runs `script` once, unless it is running already (None then),
    /// reporting the run; a `timeout` kills it with what it started.
    pub(crate) fn run(
        &self,
        name: &str,
        script: &str,
        log_path: &Path,
        timeout: Option<Duration>,
    ) -> Option<Startup> {
        {
            let Ok(mut running) = self.running.lock() else {
                return None;
            };
            if !running.insert(name.to_string()) {
                return None;
            }
        }
        let run = match self.runs.lock() {
            Ok(mut runs) => {
                let count = runs.entry(name.to_string()).or_insert(0);
                *count += 1;
                *count
            }
            Err(_) => 1,
        };
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        let done = AtomicBool::new(false);
        let outcome = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let outcome = run_script(
                    script,
                    self.dir.as_deref(),
                    &self.env,
                    log_path,
                    &self.stop,
                    deadline,
                );
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                outcome
            });
            // What it wrote so far, now and then, while it runs.
            self.report(name, "running", None, run, "");
            let mut sent = 0;
            let mut next = Instant::now() + PROGRESS;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                if Instant::now() >= next {
                    next = Instant::now() + PROGRESS;
                    let length = std::fs::metadata(log_path)
                        .map(|meta| meta.len())
                        .unwrap_or(0);
                    if length != sent {
                        sent = length;
                        self.report(name, "running", None, run, &log_tail(log_path, LOG_BYTES));
                    }
                }
            }
            worker.join().unwrap_or(Startup::NotRun)
        });
        if let Ok(mut running) = self.running.lock() {
            running.remove(name);
        }
        let (state, exit_status) = match outcome {
            Startup::Succeeded => ("succeeded", None),
            Startup::Failed(code) => ("failed", Some(i64::from(code))),
            Startup::TimedOut => ("timed_out", None),
            Startup::NotRun => ("not_run", None),
            // The agent is stopping: nothing more is said.
            Startup::Interrupted => return Some(outcome),
        };
        let output = log_tail(log_path, LOG_BYTES);
        // The end of a run is worth a few tries.
        let mut delay = FIRST_RETRY;
        for _ in 0..5 {
            if self.report(name, state, exit_status, run, &output) {
                break;
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(MAX_RETRY);
        }
        Some(outcome)
    }

    /// One report; false when it did not go through (and may be tried again).
    fn report(
        &self,
        name: &str,
        state: &str,
        exit_status: Option<i64>,
        run: i64,
        log_text: &str,
    ) -> bool {
        let report = AgentScriptReport {
            display_name: name.to_string(),
            state: state.to_string(),
            exit_status,
            run,
            log: log_text.to_string(),
        };
        match self.client.agent_script_run(&report) {
            Ok(()) => true,
            // An older server, or a script it does not know: nothing to retry.
            Err(err) if matches!(err.status(), Some(404 | 400)) => true,
            Err(err) => {
                log(&format!("the run of script {name} was not reported: {err}"));
                false
            }
        }
    }

    /// Runs a defined script once (see [`Runner::run`]), saying how it ended.
    pub(crate) fn run_defined(
        &self,
        script: &ScriptDefinition,
        default_timeout: Option<i64>,
    ) -> Option<Startup> {
        let timeout = script
            .timeout_seconds
            .or(default_timeout)
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map(Duration::from_secs);
        let log_path = self.log_path(script);
        let name = &script.display_name;
        let outcome = self.run(name, &script.script, &log_path, timeout);
        match &outcome {
            None => log(&format!(
                "script {name} is still running; this run is skipped"
            )),
            Some(Startup::Succeeded) => log(&format!("script {name} succeeded")),
            Some(Startup::Failed(code)) => log(&format!(
                "script {name} exited with status {code}; see {}",
                log_path.display()
            )),
            Some(Startup::TimedOut) => log(&format!(
                "script {name} ran past its timeout and was stopped"
            )),
            Some(Startup::NotRun) => log(&format!("script {name} could not be started")),
            Some(Startup::Interrupted) => {}
        }
        outcome
    }

    /// Runs the start scripts in parallel; returns at once with the threads
    /// of those that block login, which the caller waits for.
    pub(crate) fn start(
        &self,
        scripts: &[ScriptDefinition],
    ) -> Vec<(String, std::thread::JoinHandle<Option<Startup>>)> {
        let mut blocking = Vec::new();
        for script in scripts.iter().filter(|script| script.run_on_start) {
            let runner = self.clone();
            let owned = script.clone();
            let handle = std::thread::spawn(move || runner.run_defined(&owned, None));
            if script.start_blocks_login {
                blocking.push((script.display_name.clone(), handle));
            }
        }
        blocking
    }

    /// Runs the cron scripts on their schedules until the agent stops.
    pub(crate) fn crons(&self, scripts: &[ScriptDefinition]) {
        let crons: Vec<(ScriptCron, &ScriptDefinition)> = scripts
            .iter()
            .filter_map(|script| Some((ScriptCron::parse(script.cron.as_deref()?).ok()?, script)))
            .collect();
        if crons.is_empty() {
            return;
        }
        log(&format!("running {} script(s) on their cron", crons.len()));
        let mut checked = unix_seconds();
        while !self.stopped() {
            // Wakes just past each second; a late wake-up checks the
            // seconds it missed (at most a minute of them).
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let to_next = Duration::from_millis(1000 - u64::from(now.subsec_millis()) + 5);
            std::thread::sleep(to_next.min(Duration::from_millis(200)));
            let now = unix_seconds();
            for second in (checked + 1).max(now - 60)..=now {
                for (cron, script) in &crons {
                    if cron.matches_unix(second) && !self.is_running(&script.display_name) {
                        let runner = self.clone();
                        let owned = (*script).clone();
                        std::thread::spawn(move || runner.run_defined(&owned, None));
                    }
                }
            }
            checked = checked.max(now);
        }
    }

    fn is_running(&self, name: &str) -> bool {
        self.running
            .lock()
            .map(|running| running.contains(name))
            .unwrap_or(true)
    }

    fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs the stop scripts in parallel, each up to its timeout (300 s
    /// unless it says), and says how they ended: the first that did not
    /// succeed, and the end of each one's output.
    pub(crate) fn stop_scripts(&self, scripts: &[ScriptDefinition]) -> (Startup, String) {
        let handles: Vec<_> = scripts
            .iter()
            .filter(|script| script.run_on_stop)
            .map(|script| {
                let runner = self.clone();
                let owned = script.clone();
                let handle = std::thread::spawn(move || {
                    runner.run_defined(
                        &owned,
                        Some(abode_contract::script::DEFAULT_STOP_TIMEOUT_SECONDS),
                    )
                });
                (script.clone(), handle)
            })
            .collect();
        let mut outcome = Startup::Succeeded;
        let mut output = String::new();
        for (script, handle) in handles {
            let ended = handle.join().ok().flatten().unwrap_or(Startup::NotRun);
            let tail = log_tail(&self.log_path(&script), 2048);
            output.push_str(&format!(
                "[{}] {}\n",
                script.display_name,
                state_word(&ended)
            ));
            for line in tail.lines() {
                output.push_str(&format!("[{}] {line}\n", script.display_name));
            }
            if outcome == Startup::Succeeded {
                outcome = ended;
            }
        }
        (outcome, output)
    }
}

fn state_word(outcome: &Startup) -> String {
    match outcome {
        Startup::Succeeded => "succeeded".into(),
        Startup::Failed(code) => format!("exited with status {code}"),
        Startup::TimedOut => "ran past its timeout and was stopped".into(),
        Startup::NotRun => "could not be run".into(),
        Startup::Interrupted => "was interrupted".into(),
    }
}

fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn me() -> AgentMe {
        AgentMe {
            workspace: "dev".into(),
            owner: "alice".into(),
            agent: "main".into(),
            heartbeat_interval_seconds: None,
            unsaved_scan_interval_seconds: None,
            startup_script: None,
            claim_script: None,
            dir: None,
            env: BTreeMap::new(),
            apps: Vec::new(),
            scripts: Vec::new(),
            watch: Default::default(),
        }
    }

    fn script(name: &str, body: &str) -> ScriptDefinition {
        ScriptDefinition {
            display_name: name.into(),
            script: body.into(),
            run_on_start: false,
            run_on_stop: true,
            cron: None,
            start_blocks_login: false,
            timeout_seconds: None,
            log_path: None,
        }
    }

    #[test]
    fn a_script_runs_once_at_a_time_and_stop_scripts_say_how_each_ended() {
        let dir = tempfile::tempdir().unwrap();
        // No server answers: reports fail quickly and are dropped.
        let client = Client::new("http://127.0.0.1:9", None);
        let runner = Runner::new(
            client,
            Arc::new(AtomicBool::new(false)),
            dir.path().into(),
            &me(),
        );
        assert_eq!(
            runner.log_path(&script("a b/c", "true")),
            dir.path().join("abode-script-alice-dev-main-a_b_c.log")
        );
        let mut custom = script("x", "true");
        custom.log_path = Some("logs/x.log".into());
        assert_eq!(runner.log_path(&custom), dir.path().join("logs/x.log"));

        runner.running.lock().unwrap().insert("busy".into());
        assert_eq!(
            runner.run("busy", "true", &dir.path().join("busy.log"), None),
            None
        );

        let mut slow = script("slow", "echo begun; sleep 30");
        slow.timeout_seconds = Some(1);
        let (outcome, output) = runner.stop_scripts(&[
            script("ok", "echo fine"),
            script("bad", "echo oops; exit 4"),
            slow,
        ]);
        assert_eq!(outcome, Startup::Failed(4));
        assert!(output.contains("[ok] fine\n"), "{output}");
        assert!(
            output.contains("[bad] exited with status 4\n[bad] oops\n"),
            "{output}"
        );
        assert!(output.contains("[slow] ran past its timeout"), "{output}");
    }
}
