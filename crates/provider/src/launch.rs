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
//! for one command: it starts this executable as the provider, exactly as
//! Terraform would (its magic cookie, protocol 6, the command's environment,
//! the socket in `PLUGIN_UNIX_SOCKET_DIR`), reads the handshake, runs
//! `TERRAFORM ARGS` with the reattach configuration naming it, stops the
//! provider once Terraform has exited and exits with Terraform's status.
//! Abode runs every Terraform command but `init` this way (`abode-terraform`'s
//! `Isolation`), in the command's sandbox, so the provider has the same view
//! and user as before.
//!
//! Signals are not forwarded: Terraform runs in the launcher's process group,
//! so a terminal's Ctrl-C reaches it directly, and Abode interrupts a run by
//! signalling the process named `terraform`. A second SIGINT would make
//! Terraform abandon an apply. A signal that reaches the launcher before
//! Terraform is started ends the launch (status 128 + the signal).
//!
//! When the provider cannot be started ahead of Terraform, the command runs as
//! it would without the launcher (Terraform starts the provider itself and
//! reports what goes wrong), after one line on standard error.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::signal::unix::{signal, SignalKind};

pub use abode_contract::launch::LAUNCH_FLAG;

/// The provider's address as Terraform knows it (`source = "abode/abode"`).
pub const PROVIDER_ADDRESS: &str = "registry.terraform.io/abode/abode";

/// go-plugin's cookie for Terraform's plugins; the provider refuses to serve
/// without it.
const COOKIE_NAME: &str = "TF_PLUGIN_MAGIC_COOKIE";
const COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

const REATTACH_ENV: &str = "TF_REATTACH_PROVIDERS";

/// How long the provider has to print its handshake (it takes 2-4 ms).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// The number of the first of SIGINT, SIGTERM and SIGHUP to arrive. Once
/// listened to, they no longer kill the launcher (Terraform, whose handlers
/// are reset by its exec, still gets its own).
async fn first_stop() -> i32 {
    async fn one(kind: SignalKind, number: Signal) -> i32 {
        match signal(kind) {
            Ok(mut signals) => {
                signals.recv().await;
                number as i32
            }
            Err(_) => std::future::pending().await,
        }
    }
    tokio::select! {
        number = one(SignalKind::interrupt(), Signal::SIGINT) => number,
        number = one(SignalKind::terminate(), Signal::SIGTERM) => number,
        number = one(SignalKind::hangup(), Signal::SIGHUP) => number,
    }
}

async fn launch(terraform: PathBuf, args: &[OsString]) -> Result<u8, LaunchError> {
    let started = tokio::select! {
        started = start_provider() => started,
        number = first_stop() => return Ok(status_for_signal(number)),
    };
    let mut command = Command::new(&terraform);
    command.args(args);
    let provider = match started {
        Ok(provider) => {
            command.env(REATTACH_ENV, provider.reattach_config());
            Some(provider)
        }
        Err(reason) => {
            eprintln!(
                "abode provider: not started ahead of Terraform ({reason}); Terraform starts it itself"
            );
            None
        }
    };
    // Terraform is waited for whatever arrives: see the module's doc.
    let status = match command.spawn() {
        Ok(mut child) => child.wait().await.map_err(LaunchError::Wait),
        Err(source) => Err(LaunchError::Terraform {
            program: terraform,
            source,
        }),
    };
    if let Some(provider) = provider {
        provider.stop().await;
    }
    Ok(exit_status_of(status?))
}

/// The provider, started by the launcher and serving.
struct RunningProvider {
    child: Child,
    pid: u32,
    socket: PathBuf,
    /// Held open so the provider never writes into a closed pipe.
    _stdout: ChildStdout,
}

impl RunningProvider {
    /// `TF_REATTACH_PROVIDERS` naming this provider, added to what the
    /// environment already reattaches.
    fn reattach_config(&self) -> String {
        let mut providers = std::env::var(REATTACH_ENV)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Map<_, _>>(&text).ok())
            .unwrap_or_default();
        providers.insert(
            PROVIDER_ADDRESS.to_string(),
            serde_json::json!({
                "Protocol": "grpc",
                "ProtocolVersion": 6,
                "Pid": self.pid,
                "Test": true,
                "Addr": { "Network": "unix", "String": self.socket.to_string_lossy() },
            }),
        );
        serde_json::Value::Object(providers).to_string()
    }

    /// Kills it (it keeps nothing: the provider is stateless, and the
    /// processes it started belong to the supervisor) and removes its
    /// socket's private directory, which its own shutdown would have removed.
    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        if let Some(dir) = private_socket_dir(&self.socket) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The directory tf-provider made for the socket, if the socket is in one.
fn private_socket_dir(socket: &Path) -> Option<&Path> {
    let dir = socket.parent()?;
    let name = dir.file_name()?.to_str()?;
    name.starts_with("tf-provider-").then_some(dir)
}

/// Starts this executable as the provider and reads its handshake.
async fn start_provider() -> Result<RunningProvider, String> {
    // This very file, even if the mirror's copy was replaced since.
    let executable = Path::new("/proc/self/exe");
    // Its own file name: the `abode` binary serves the provider only when
    // started under the provider's name, with no arguments.
    let arg0 = std::env::args_os()
        .next()
        .unwrap_or_else(|| executable.as_os_str().to_os_string());
    let mut child = Command::new(executable)
        .arg0(arg0)
        .env(COOKIE_NAME, COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "6")
        .env_remove("PLUGIN_CLIENT_CERT")
        .env_remove(REATTACH_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", executable.display()))?;
    let pid = child.id().ok_or("it exited at once")?;
    let stdout = child.stdout.take().ok_or("no standard output")?;
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    let read = tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.read_line(&mut line)).await;
    let socket = match read {
        Ok(Ok(n)) if n > 0 => parse_handshake(&line)?,
        Ok(Ok(_)) => return Err("it exited before its handshake".into()),
        Ok(Err(error)) => return Err(format!("reading its handshake failed: {error}")),
        Err(_) => {
            return Err(format!(
                "no handshake within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            ))
        }
    };
    Ok(RunningProvider {
        child,
        pid,
        socket,
        _stdout: reader.into_inner(),
    })
}

/// go-plugin's handshake line, `CORE|APP|NETWORK|ADDRESS|PROTOCOL|CERT`: the
/// socket of a protocol 6 gRPC provider on a unix socket without TLS.
fn parse_handshake(line: &str) -> Result<PathBuf, String> {
    let fields: Vec<&str> = line.trim_end().split('|').collect();
    match fields.as_slice() {
        ["1", "6", "unix", address, "grpc", cert] if !address.is_empty() && cert.is_empty() => {
            Ok(PathBuf::from(address))
        }
        _ => Err(format!(
            "an unexpected handshake: {}",
            line.trim_end().chars().take(120).collect::<String>()
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_are_read_strictly() {
        assert_eq!(
            parse_handshake("1|6|unix|/tmp/tf-provider-1-a-0/plugin.sock|grpc|\n"),
            Ok(PathBuf::from("/tmp/tf-provider-1-a-0/plugin.sock"))
        );
        for refused in [
            "",
            "1|5|unix|/tmp/p.sock|grpc|\n",
            "1|6|tcp|127.0.0.1:1234|grpc|\n",
            "1|6|unix||grpc|\n",
            "1|6|unix|/tmp/p.sock|netrpc|\n",
            "1|6|unix|/tmp/p.sock|grpc|MIIBCERT\n",
            "1|6|unix|/tmp/p.sock|grpc\n",
            "hello\n",
        ] {
            assert!(parse_handshake(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn only_tf_providers_own_directory_is_removed() {
        assert_eq!(
            private_socket_dir(Path::new("/tmp/tf-provider-9-ff-0/plugin.sock")),
            Some(Path::new("/tmp/tf-provider-9-ff-0"))
        );
        assert_eq!(private_socket_dir(Path::new("/tmp/plugin.sock")), None);
        assert_eq!(private_socket_dir(Path::new("/plugin.sock")), None);
    }
}
