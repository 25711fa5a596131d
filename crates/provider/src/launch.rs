//! One provider process for a whole Terraform command.
//!
//! Terraform 1.11 starts a provider three times for a plan (its schema, the
//! validate walk, the plan walk), once for `show -json` and two or three times
//! for an apply, and hashes its whole executable before each command: with
//! the abode provider that was a third of a plan's time, most of it
//! Terraform's own handling of the plugin processes (docs/benchmarks.md).
//! Terraform can instead be pointed at a provider that already runs
//! (`TF_REATTACH_PROVIDERS`, `"Test": true`): it then neither starts, hashes
//! nor stops it, and every provider instance of the command talks to that one
//! process.
//!
//! `terraform-provider-abode --launch-terraform TERRAFORM ARGS...` does that
//! for one command, in one process: it binds the provider's private socket
//! (as the provider would: in `PLUGIN_UNIX_SOCKET_DIR`, 0600 in a 0700
//! directory), runs `TERRAFORM ARGS` with the reattach configuration naming
//! itself and that socket, serves the provider there (in-process, with the
//! command's environment, `tf_provider::serve_bound`) until Terraform exits,
//! removes the socket and exits with Terraform's status. Abode runs every
//! Terraform command but `init` this way (`abode-terraform`'s `Isolation`),
//! in the command's sandbox, so the provider has the same view and user as
//! when Terraform started it.
//!
//! Signals are caught and not forwarded: Terraform runs in the launcher's
//! process group, so a terminal's Ctrl-C reaches it directly, and Abode
//! interrupts a run by signalling the process named `terraform`; a second
//! SIGINT would make Terraform abandon an apply, and a launcher killed by the
//! first would take the provider from under Terraform's clean stop.
//!
//! When the socket cannot be bound, the command runs as
//! it would without the launcher (Terraform starts the provider itself and
//! reports what goes wrong), after one line on standard error.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use abode_contract::launch::Launch;
use nix::sys::prctl::set_child_subreaper;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

pub use abode_contract::launch::LAUNCH_FLAG;

/// The provider's address as Terraform knows it (`source = "abode/abode"`).
pub const PROVIDER_ADDRESS: &str = "registry.terraform.io/abode/abode";

const REATTACH_ENV: &str = "TF_REATTACH_PROVIDERS";

/// How long the provider has to stop serving once Terraform has exited.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a launch could not run Terraform at all.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("usage: {LAUNCH_FLAG} [--then-show-json PLAN OUTPUT] TERRAFORM [ARGS...]")]
    Usage,
    #[error("cannot start the launcher's async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot run {}: {source}", program.display())]
    Terraform {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot catch signals: {0}")]
    Signals(#[source] std::io::Error),
    #[error("cannot remove the plan's JSON: {0}")]
    Output(#[source] std::io::Error),
    #[error("waiting for terraform failed: {0}")]
    Wait(#[source] std::io::Error),
}

/// [`launch_terraform`] as a program's main: its error on one line, status 2.
pub fn main(args: &[OsString]) -> std::process::ExitCode {
    match launch_terraform(args) {
        Ok(status) => std::process::ExitCode::from(status),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Runs `args` (`TERRAFORM ARGS...`) with this executable serving the
/// provider, and returns the exit status the launcher should exit with.
pub fn launch_terraform(args: &[OsString]) -> Result<u8, LaunchError> {
    let Some(launch) = Launch::parse(args) else {
        return Err(LaunchError::Usage);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LaunchError::Runtime)?;
    runtime.block_on(run(launch))
}

/// Catches SIGINT, SIGTERM and SIGHUP for the rest of the launch: the
/// launcher serves the provider Terraform is talking to, and must outlive
/// Terraform's own handling of them. Terraform's exec resets the handlers.
fn outlive_signals() -> Result<Vec<tokio::signal::unix::Signal>, LaunchError> {
    [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ]
    .into_iter()
    .map(|kind| signal(kind).map_err(LaunchError::Signals))
    .collect()
}

async fn run(launch: Launch) -> Result<u8, LaunchError> {
    let _caught = outlive_signals()?;
    // Never a JSON left from before, nor one the plan's own code wrote.
    if let Some((_, output)) = &launch.then_show {
        remove_if_there(output).map_err(LaunchError::Output)?;
    }
    // Orphans of the plan's processes become the launcher's children, to be
    // killed before the plan is shown.
    let reaping = launch.then_show.is_some() && set_child_subreaper(true).is_ok();
    crate::backtrace::silence();
    let socket = match tf_provider::BoundSocket::bind() {
        Ok(socket) => Some(socket),
        Err(reason) => {
            eprintln!(
                "abode provider: not served ahead of Terraform ({reason:#}); Terraform starts it itself"
            );
            None
        }
    };
    let reattach = socket.as_ref().map(|socket| reattach_config(socket.path()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = socket.map(|socket| {
        tokio::spawn(tf_provider::serve_bound(
            crate::PROVIDER_NAME,
            crate::AbodeProvider,
            socket,
            async move {
                let _ = stopped.await;
            },
        ))
    });
    let terraform = PathBuf::from(&launch.terraform);
    // Terraform is waited for whatever arrives: see the module's doc.
    let status = run_terraform(&terraform, &launch.args, reattach.as_deref(), None).await;
    // A JSON that is not this plan's and could not be removed.
    let mut left = None;
    if let (Ok(status), Some((plan, output))) = (&status, &launch.then_show) {
        // Killed whether or not the plan succeeded: a plan's leftovers have
        // nothing left to do.
        let alone = reaping && kill_descendants();
        let shown = status.success()
            && alone
            && show_plan_json(&terraform, reattach.as_deref(), plan, output)
                .await
                .is_ok();
        if !shown {
            // The caller shows the plan itself when this file is missing.
            left = remove_if_there(output).err();
        }
    }
    let _ = stop.send(());
    if let Some(serving) = serving {
        // Terraform is gone, and its connections with it: nothing is left
        // to answer, only the socket to remove.
        let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, serving).await;
    }
    let status = exit_status_of(status?);
    match left {
        Some(error) => Err(LaunchError::Output(error)),
        None => Ok(status),
    }
}

/// Runs Terraform to its end, its standard output to `stdout` if given.
async fn run_terraform(
    terraform: &Path,
    args: &[OsString],
    reattach: Option<&str>,
    stdout: Option<std::fs::File>,
) -> Result<ExitStatus, LaunchError> {
    let mut command = Command::new(terraform);
    command.args(args);
    if crate::backtrace::silenced() {
        // The provider's own setting, not Terraform's.
        command.env_remove(crate::backtrace::LIB_BACKTRACE);
    }
    if let Some(reattach) = reattach {
        command.env(REATTACH_ENV, reattach);
    }
    if let Some(stdout) = stdout {
        // Its errors are the caller's to meet: it shows the plan itself then.
        command.stdout(stdout).stderr(std::process::Stdio::null());
    }
    match command.spawn() {
        Ok(mut child) => child.wait().await.map_err(LaunchError::Wait),
        Err(source) => Err(LaunchError::Terraform {
            program: terraform.to_path_buf(),
            source,
        }),
    }
}

/// `terraform show -json -no-color PLAN` into `output`, renamed there only
/// when Terraform succeeded.
async fn show_plan_json(
    terraform: &Path,
    reattach: Option<&str>,
    plan: &Path,
    output: &Path,
) -> std::io::Result<()> {
    let mut partial = output.as_os_str().to_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    remove_if_there(&partial)?;
    // A new file, never through a link.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?
    };
    let args = [
        OsString::from("show"),
        "-json".into(),
        "-no-color".into(),
        plan.as_os_str().to_os_string(),
    ];
    let shown = run_terraform(terraform, &args, reattach, Some(file)).await;
    if !shown.is_ok_and(|status| status.success()) {
        remove_if_there(&partial)?;
        return Err(std::io::Error::other("terraform show failed"));
    }
    std::fs::rename(&partial, output)
}

/// Kills every descendant of this process (orphans are its children: it is
/// their subreaper) and reaps them; whether none is left.
fn kill_descendants() -> bool {
    for _ in 0..1000 {
        let Some(children) = children() else {
            return false;
        };
        if children.is_empty() {
            return true;
        }
        for pid in children {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// This process's children, from every thread's `children` in `/proc`.
fn children() -> Option<Vec<i32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
        for pid in text.split_whitespace() {
            pids.push(pid.parse().ok()?);
        }
    }
    Some(pids)
}

/// Removes `path` if it is there.
fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// `TF_REATTACH_PROVIDERS` naming this process as the provider on `socket`,
/// added to what the environment already reattaches.
fn reattach_config(socket: &Path) -> String {
    let mut providers = std::env::var(REATTACH_ENV)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Map<_, _>>(&text).ok())
        .unwrap_or_default();
    providers.insert(
        PROVIDER_ADDRESS.to_string(),
        serde_json::json!({
            "Protocol": "grpc",
            "ProtocolVersion": 6,
            "Pid": std::process::id(),
            "Test": true,
            "Addr": { "Network": "unix", "String": socket.to_string_lossy() },
        }),
    );
    serde_json::Value::Object(providers).to_string()
}

fn exit_status_of(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(number)) => status_for_signal(number),
        (None, None) => 1,
    }
}

fn status_for_signal(number: i32) -> u8 {
    u8::try_from(128 + number).unwrap_or(1)
}
