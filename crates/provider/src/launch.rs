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
    #[error("usage: {LAUNCH_FLAG} TERRAFORM [ARGS...]")]
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
    let Some((terraform, terraform_args)) = args.split_first() else {
        return Err(LaunchError::Usage);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LaunchError::Runtime)?;
    runtime.block_on(launch(PathBuf::from(terraform), terraform_args))
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

async fn launch(terraform: PathBuf, args: &[OsString]) -> Result<u8, LaunchError> {
    let _caught = outlive_signals()?;
    let bound = tf_provider::BoundSocket::bind();
    let mut command = Command::new(&terraform);
    command.args(args);
    crate::backtrace::silence();
    if crate::backtrace::silenced() {
        // The provider's own setting, not Terraform's.
        command.env_remove(crate::backtrace::LIB_BACKTRACE);
    }
    let socket = match bound {
        Ok(socket) => {
            command.env(REATTACH_ENV, reattach_config(socket.path()));
            Some(socket)
        }
        Err(reason) => {
            eprintln!(
                "abode provider: not served ahead of Terraform ({reason:#}); Terraform starts it itself"
            );
            None
        }
    };
    let mut child = command.spawn().map_err(|source| LaunchError::Terraform {
        program: terraform,
        source,
    })?;
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
    // Terraform is waited for whatever arrives: see the module's doc.
    let status = child.wait().await.map_err(LaunchError::Wait);
    let _ = stop.send(());
    if let Some(serving) = serving {
        // Terraform is gone, and its connections with it: nothing is left
        // to answer, only the socket to remove.
        let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, serving).await;
    }
    Ok(exit_status_of(status?))
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
