//! `abode_process`: the local stand-in for a workspace's container or VM, a
//! detached process started on create and stopped on destroy.
//!
//! The process gets its own process group and writes to a log file, so that it
//! outlives the provider (Terraform stops the provider after each run) and
//! Terraform never waits on its output. Its identity is its pid *and* its start
//! time in /proc, because after it dies the pid can be reused by anything.
//!
//! When the platform runs Terraform in a sandbox, a process forked here would
//! die with the sandbox's PID namespace at the end of the apply: the build
//! then names the machine's process supervisor (`ABODE_PROCESS_SUPERVISOR`),
//! which starts, watches and stops the process in a sandbox of its own
//! (`abode_contract::supervisor`). By hand, the provider starts it itself.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abode_contract::supervisor::{self, Reply, Request};
use async_trait::async_trait;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

use crate::backtrace;
use crate::plumbing::ResourceType;
use crate::schema::{
    attribute_error, block, build_context, computed, known, known_list, known_map, number,
    optional, required, string, string_list, string_map, with_default, StringList, StringMap,
};

const DEFAULT_STOP_TIMEOUT_SECONDS: i64 = 10;
/// Environment prefixes of Terraform, its plugin protocol and the build contract:
/// they describe the build, not the workspace, and may carry secrets.
const HIDDEN_ENV_PREFIXES: [&str; 4] = ["ABODE_", "TF_", "PLUGIN_", "CHECKPOINT_"];
/// How long after starting a process a non-zero exit counts as a failed create.
const STARTUP_CHECK: Duration = Duration::from_millis(200);
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ProcessState {
    id: Value<String>,
    command: StringList,
    env: StringMap,
    dir: Value<String>,
    stop_timeout: Value<i64>,
    pid: Value<i64>,
    log_path: Value<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ProcessResource;

/// What a process gets of the provider's environment (Terraform's) before
/// its own `env`: everything but the build's and Terraform's variables.
fn inherited_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| !HIDDEN_ENV_PREFIXES.iter().any(|p| name.starts_with(p)))
        .filter(|(name, _)| !(name == backtrace::LIB_BACKTRACE && backtrace::silenced()))
        .collect()
}

/// One call to the process supervisor, off the async runtime.
pub(crate) async fn ask(
    socket: std::path::PathBuf,
    request: Request,
    timeout: Duration,
) -> Result<Reply, String> {
    tokio::task::spawn_blocking(move || supervisor::call(&socket, &request, timeout))
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| error.to_string())
}

/// A supervisor's refusal or an unexpected answer, as the resource's error.
pub(crate) fn supervisor_error(diags: &mut Diagnostics, reply: Result<Reply, String>) {
    let message = match reply {
        Ok(Reply::Error { message }) => message,
        Ok(other) => format!("unexpected answer from the process supervisor: {other:?}"),
        Err(message) => message,
    };
    diags.root_error("The process supervisor refused", message);
}

/// Is any process of the group still running?
fn group_running(group: i32) -> bool {
    abode_procfs::group_running(group)
}

fn wait_until_gone(group: i32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if !group_running(group) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Stops a process group: SIGTERM, then SIGKILL once `grace` is over.
pub(crate) fn stop_group(group: i32, grace: Duration) -> Result<(), String> {
    if !group_running(group) {
        return Ok(());
    }
    // ESRCH: it ended between the check and the signal, which is what we want.
    let _ = killpg(Pid::from_raw(group), Signal::SIGTERM);
    if wait_until_gone(group, grace) {
        return Ok(());
    }
    let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    if wait_until_gone(group, Duration::from_secs(5)) {
        Ok(())
    } else {
        Err(format!(
            "process group {group} is still running after SIGTERM and SIGKILL"
        ))
    }
}

/// A destroyed process leaves nothing behind, its log included.
fn remove_log(state: &ProcessState) {
    if let Some(path) = known(&state.log_path) {
        let _ = std::fs::remove_file(path);
    }
}

#[async_trait]
impl ResourceType for ProcessResource {
    type State = ProcessState;

    fn block(&self) -> Block {
        block(
            "A detached local process, the stand-in for a workspace's container or VM. \
             Created: the process is started in its own process group with stdout and \
             stderr appended to `log_path`. Destroyed: SIGTERM to the group, then SIGKILL \
             after `stop_timeout`. A process that died reads as gone, so the next plan \
             starts it again. Changing `command`, `env` or `dir` replaces (restarts) it.",
            vec![
                (
                    "id",
                    computed(
                        string(),
                        "`<pid>-<start time in clock ticks>`: identifies this run of the \
                         process even after its pid is reused.",
                    ),
                ),
                (
                    "command",
                    required(
                        string_list(),
                        "The program and its arguments, run without a shell, e.g. \
                         [\"sh\", \"-c\", abode_agent.main.init_script].",
                    ),
                ),
                (
                    "env",
                    optional(
                        string_map(),
                        "Extra environment variables. The process inherits Terraform's \
                         environment except variables starting with ABODE_, TF_, PLUGIN_ or \
                         CHECKPOINT_.",
                    ),
                ),
                (
                    "dir",
                    optional(
                        string(),
                        "Working directory (default: $HOME, or / without it).",
                    ),
                ),
                (
                    "stop_timeout",
                    with_default(
                        number(),
                        "Seconds between SIGTERM and SIGKILL on destroy (default 10).",
                    ),
                ),
                (
                    "pid",
                    computed(number(), "The process id (also its process group id)."),
                ),
                (
                    "log_path",
                    computed(
                        string(),
                        "The file receiving the process's stdout and stderr, under \
                         ABODE_PROCESS_LOGS_DIR.",
                    ),
                ),
            ],
        )
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        if let Some(command) = known(&state.command) {
            if command.is_empty()
                || command
                    .first()
                    .and_then(known)
                    .is_some_and(String::is_empty)
            {
                attribute_error(
                    diags,
                    "command",
                    "abode_process command must name a program: [\"program\", \"arg\", ...]".into(),
                );
            }
        }
        if let Some(timeout) = known(&state.stop_timeout) {
            if *timeout < 0 {
                attribute_error(
                    diags,
                    "stop_timeout",
                    format!("abode_process stop_timeout must be 0 or more seconds, not {timeout}"),
                );
            }
        }
    }

    fn defaults(&self, state: &mut Self::State, config: &Self::State) {
        if config.stop_timeout.is_null() {
            state.stop_timeout = DEFAULT_STOP_TIMEOUT_SECONDS.into();
        }
    }

    fn plan_create(&self, _diags: &mut Diagnostics, state: &mut Self::State) -> Option<()> {
        state.pid = Value::Unknown;
        state.log_path = Value::Unknown;
        Some(())
    }

    fn plan_update(
        &self,
        _diags: &mut Diagnostics,
        prior: &Self::State,
        state: &mut Self::State,
    ) -> Option<Vec<AttributePath>> {
        let mut replace = vec![];
        for (name, changed) in [
            ("command", state.command != prior.command),
            ("env", state.env != prior.env),
            ("dir", state.dir != prior.dir),
        ] {
            if changed {
                replace.push(AttributePath::new(name));
            }
        }
        if replace.is_empty() {
            state.pid = prior.pid;
            state.log_path = prior.log_path.clone();
        } else {
            state.pid = Value::Unknown;
            state.log_path = Value::Unknown;
        }
        Some(replace)
    }

    async fn read(&self, diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        let id = known(&state.id)?.clone();
        if let Some(socket) = build_context(diags)?.process_supervisor {
            let reply = ask(socket, Request::Status { id }, Duration::from_secs(30)).await;
            return match reply {
                Ok(Reply::Status { running: true }) => Some(state),
                Ok(Reply::Status { running: false }) => None,
                other => {
                    supervisor_error(diags, other);
                    None
                }
            };
        }
        let identity = abode_procfs::Identity::parse(&id)?;
        if identity.is_running() {
            Some(state)
        } else {
            None
        }
    }

    async fn create(&self, diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        let mut state = state;
        let context = build_context(diags)?;
        let (Some(command), Some(env)) = (known_list(&state.command), known_map(&state.env)) else {
            diags.root_error_short("abode_process command and env must be known when applying");
            return None;
        };
        let Some((program, args)) = command.split_first() else {
            attribute_error(diags, "command", "abode_process command is empty".into());
            return None;
        };
        if let Some(socket) = context.process_supervisor.clone() {
            let dir = known(&state.dir).cloned().unwrap_or_default();
            let mut full_env = inherited_env();
            full_env.extend(
                env.iter()
                    .map(|(name, value)| (name.clone(), value.clone())),
            );
            let request = Request::Start {
                command: command.to_vec(),
                env: full_env,
                dir,
            };
            return match ask(socket, request, Duration::from_secs(60)).await {
                Ok(Reply::Started { id, pid, log_path }) => {
                    state.id = id.into();
                    state.pid = pid.into();
                    state.log_path = log_path.into();
                    Some(state)
                }
                other => {
                    supervisor_error(diags, other);
                    None
                }
            };
        }
        if let Err(err) = std::fs::create_dir_all(&context.process_logs_dir) {
            diags.root_error(
                "Cannot create the process logs directory",
                format!("{}: {err}", context.process_logs_dir.display()),
            );
            return None;
        }
        let log_path = context
            .process_logs_dir
            .join(format!("{}.log", uuid::Uuid::new_v4()));
        let log = match OpenOptions::new().create(true).append(true).open(&log_path) {
            Ok(file) => file,
            Err(err) => {
                diags.root_error(
                    "Cannot create the process log",
                    format!("{}: {err}", log_path.display()),
                );
                return None;
            }
        };
        let log_for_stderr = match log.try_clone() {
            Ok(file) => file,
            Err(err) => {
                diags.root_error("Cannot share the process log", err.to_string());
                return None;
            }
        };
        let dir = known(&state.dir)
            .cloned()
            .or_else(|| std::env::var("HOME").ok())
            .unwrap_or_else(|| "/".into());

        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_for_stderr)
            .process_group(0);
        for (name, _) in std::env::vars_os() {
            let hidden = name
                .to_str()
                .is_none_or(|name| HIDDEN_ENV_PREFIXES.iter().any(|p| name.starts_with(p)));
            if hidden {
                cmd.env_remove(&name);
            }
        }
        if backtrace::silenced() {
            cmd.env_remove(backtrace::LIB_BACKTRACE);
        }
        cmd.envs(env);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(err) => {
                diags.root_error(
                    "Cannot start the process",
                    format!("`{program}` in {dir}: {err}"),
                );
                return None;
            }
        };
        let pid = child.id() as i32;
        let identity = abode_procfs::Identity::of(pid);

        // A command that fails at once (a typo, a missing file) should fail the
        // apply, not show up as drift on the next plan.
        tokio::time::sleep(STARTUP_CHECK).await;
        if let Ok(Some(status)) = child.try_wait() {
            if !status.success() {
                diags.root_error(
                    "The process exited right after starting",
                    // The log's lines are the workspace's output and may hold
                    // secrets; the build log names the file instead.
                    format!(
                        "`{program}` exited with {status}; its output is in {}",
                        log_path.display()
                    ),
                );
                return None;
            }
        }
        let Some(identity) = identity else {
            diags.root_error_short(format!(
                "The process {pid} ended before its start time could be read"
            ));
            return None;
        };
        state.id = identity.to_text().into();
        state.pid = i64::from(pid).into();
        state.log_path = log_path.display().to_string().into();
        Some(state)
    }

    async fn destroy(&self, diags: &mut Diagnostics, prior_state: Self::State) -> Option<()> {
        let grace_seconds = known(&prior_state.stop_timeout)
            .copied()
            .unwrap_or(DEFAULT_STOP_TIMEOUT_SECONDS)
            .max(0);
        if let (Some(socket), Some(id)) = (
            build_context(diags)?.process_supervisor,
            known(&prior_state.id).cloned(),
        ) {
            let grace_seconds = u64::try_from(grace_seconds).unwrap_or(0);
            let request = Request::Stop { id, grace_seconds };
            let timeout = Duration::from_secs(grace_seconds + 30);
            return match ask(socket, request, timeout).await {
                Ok(Reply::Stopped) => Some(()),
                other => {
                    supervisor_error(diags, other);
                    None
                }
            };
        }
        let Some(identity) =
            known(&prior_state.id).and_then(|id| abode_procfs::Identity::parse(id))
        else {
            remove_log(&prior_state);
            return Some(());
        };
        let pid = identity.pid;
        // A different process now owning the pid (or its group) is not ours to kill.
        if !identity.is_running() && identity.pid_reused() {
            remove_log(&prior_state);
            return Some(());
        }
        let grace = known(&prior_state.stop_timeout)
            .copied()
            .unwrap_or(DEFAULT_STOP_TIMEOUT_SECONDS)
            .max(0);
        let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        match tokio::task::spawn_blocking(move || stop_group(pid, grace)).await {
            Ok(Ok(())) => {
                remove_log(&prior_state);
                Some(())
            }
            Ok(Err(message)) => {
                diags.root_error_short(message);
                None
            }
            Err(err) => {
                diags.root_error_short(format!("stopping the process failed: {err}"));
                None
            }
        }
    }
}
