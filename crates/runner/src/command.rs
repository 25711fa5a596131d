//! The pieces a build's run and a preview's plan share: the work dir laid
//! out, one Terraform command with its output logged, `terraform show` of a
//! saved plan, the environment contract, and how a run that did not succeed
//! is told.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use abode_contract::BuildContext;
use abode_terraform::isolation::Isolation;
use abode_terraform::run::{self, Invocation, Outcome, OutputLine};
use abode_terraform::supervise::{self, RunRecord};
use tokio::sync::{mpsc, watch};

use crate::archive;
use crate::host::{Failure, FailureKind, LogSink, LogStage};
use crate::output::log_output;
use crate::timings::Stopwatch;
use crate::workdir::{self, PLAN_JSON_FILE, STATE_FILE, TEMPLATE_SUBDIR};
use abode_contract::timings::ResourcePhase;

/// What a build's (or a preview's) work dir is made of, laid out off the
/// async runtime.
pub struct WorkDirLayout {
    pub base: PathBuf,
    /// The work dir's name under `base`.
    pub build_id: String,
    pub archive: Vec<u8>,
    pub state: Option<Vec<u8>>,
    pub provider_mirror: Option<PathBuf>,
    /// The sandbox Terraform will run in: the work dir is handed to its user.
    pub isolation: Option<Arc<Isolation>>,
}

impl WorkDirLayout {
    /// The private work dir with the unpacked template, the stored state, the
    /// CLI configuration and a complete provider lock (so that `terraform
    /// init` neither warns about nor re-hashes the mirrored provider); returns
    /// the work dir and the CLI configuration's path.
    pub fn lay_out(self) -> Result<(PathBuf, PathBuf), Failure> {
        let work_dir = workdir::create(&self.base, &self.build_id)
            .map_err(|error| Failure::failed(format!("cannot create the work dir: {error}")))?;
        let template_dir = work_dir.join(TEMPLATE_SUBDIR);
        archive::unpack(&self.archive, &template_dir)
            .map_err(|error| Failure::failed(format!("cannot unpack the template: {error}")))?;
        if let Some(state) = &self.state {
            workdir::write_private(&template_dir.join(STATE_FILE), state)
                .map_err(|error| Failure::failed(format!("cannot write the state: {error}")))?;
        }
        let cli_config = workdir::write_cli_config(&work_dir, self.provider_mirror.as_deref())
            .map_err(Failure::failed)?;
        workdir::write_provider_lock(&template_dir, self.provider_mirror.as_deref())
            .map_err(Failure::failed)?;
        hand_over(self.isolation.as_ref(), &work_dir)?;
        Ok((work_dir, cli_config))
    }

    /// [`WorkDirLayout::lay_out`] on a blocking thread: unpacking up to
    /// 64 MiB and hashing the provider are blocking work.
    pub async fn lay_out_off_runtime(self) -> Result<(PathBuf, PathBuf), Failure> {
        tokio::task::spawn_blocking(move || self.lay_out())
            .await
            .map_err(|error| Failure::failed(format!("preparing the work dir failed: {error}")))?
    }
}

/// Gives `path` (and what is in it) to the sandbox's user, who runs
/// Terraform there; nothing without a sandbox or a user of its own.
pub fn hand_over(isolation: Option<&Arc<Isolation>>, path: &Path) -> Result<(), Failure> {
    match isolation {
        Some(isolation) => isolation
            .hand_over(path)
            .map_err(|error| Failure::failed(error.to_string())),
        None => Ok(()),
    }
}

/// One Terraform command of a build or a preview, in the template dir of
/// `work_dir`, its lines written to the build's log (a preview keeps only
/// the last error), stopped by `cancel`.
pub struct TerraformCommand<'a, S> {
    /// Where its lines go; none for a preview's plan, which has no log.
    pub sink: Option<&'a S>,
    /// How long Terraform has to stop after an interrupt.
    pub grace: std::time::Duration,
    pub work_dir: &'a Path,
    pub env: &'a [(String, String)],
    pub cancel: watch::Receiver<bool>,
    /// The sandbox it runs in, if any.
    pub isolation: Option<&'a Arc<Isolation>>,
    /// Where each resource's time (from Terraform's events) is written.
    pub timing: Option<(&'a Stopwatch, ResourcePhase)>,
}

impl<S: LogSink> TerraformCommand<'_, S> {
    pub async fn run(self, stage: &LogStage, args: &[&str]) -> Result<(), Failure> {
        let mut invocation = Invocation::new(
            self.work_dir.join(TEMPLATE_SUBDIR),
            args.iter().copied(),
            self.env,
        )
        .isolated(self.isolation, self.work_dir);
        // A plan saved to a file is shown by its own launch when it can be
        // ([`show_plan`] reads what it wrote); never a previous plan's JSON.
        let saved_plan = args.iter().find_map(|arg| arg.strip_prefix("-out="));
        if let (Some(&"plan"), Some(plan)) = (args.first(), saved_plan) {
            let shown = self.work_dir.join(PLAN_JSON_FILE);
            remove_if_there(&shown)?;
            invocation = invocation.then_show_json(PathBuf::from(plan), shown);
        }
        let (sender, receiver) = mpsc::unbounded_channel::<OutputLine>();
        let record = RunRecord::in_dir(self.work_dir);
        let runner = supervise::stream(&invocation, &record, sender, self.cancel, self.grace);
        // Each line's resource events read as it arrives, then logged.
        let (forward, logged) = mpsc::unbounded_channel::<OutputLine>();
        let timing = self.timing;
        let reader = async move {
            let mut receiver = receiver;
            let mut events = timing.map(|(watch, phase)| watch.events(phase));
            while let Some(line) = receiver.recv().await {
                if let Some(events) = events.as_mut() {
                    events.line(&line, std::time::Instant::now());
                }
                if forward.send(line).is_err() {
                    break;
                }
            }
        };
        let logger = log_output(self.sink, stage, logged, 0);
        let (outcome, (), last_error) = tokio::join!(runner, reader, logger);
        match outcome {
            Ok(Outcome::Exited { success: true, .. }) => Ok(()),
            Ok(Outcome::Exited { code, .. }) => {
                let reason = match &last_error {
                    Some(error) => error.text.clone(),
                    None => format!(
                        "exit status {}",
                        code.map_or("unknown".into(), |c| c.to_string())
                    ),
                };
                Err(Failure {
                    kind: FailureKind::Failed,
                    message: format!("terraform {stage} failed: {reason}"),
                    diagnostic: last_error.and_then(|error| error.summary),
                })
            }
            Ok(Outcome::Canceled { killed }) => Err(Failure {
                diagnostic: None,
                kind: FailureKind::Canceled,
                message: if killed {
                    format!("canceled during terraform {stage}; Terraform did not stop in time and was killed")
                } else {
                    format!("canceled during terraform {stage}")
                },
            }),
            Err(error) => Err(Failure::failed(error.to_string())),
        }
    }
}

/// The environment of a build's (or a preview's) Terraform runs: the
/// server's Terraform environment, the environment contract and the CLI
/// configuration.
pub fn contract_env(
    terraform_env: &[(String, String)],
    context: BuildContext,
    cli_config: &Path,
) -> Vec<(String, String)> {
    let mut env = terraform_env.to_vec();
    env.extend(
        context
            .to_env()
            .into_iter()
            .map(|(key, value)| (key.to_string(), value)),
    );
    env.push((
        "TF_CLI_CONFIG_FILE".into(),
        cli_config.display().to_string(),
    ));
    env
}

/// Where a run's own process supervisor socket is, in its work dir.
pub const SUPERVISOR_SOCKET: &str = "supervisor.sock";

/// The run's own socket of this machine's process supervisor (at
/// `machine`), for `build` (its workspace, the URL its agent dials, its uid
/// and the volumes it adopts), in `work_dir` (which its sandbox shows):
/// what `ABODE_PROCESS_SUPERVISOR` names while it lives. Every request on
/// it is that workspace's (`abode_contract::supervisor`). `None` without a
/// supervisor (the sandbox off).
pub async fn open_process_supervisor(
    machine: Option<&Path>,
    work_dir: &Path,
    build: abode_contract::supervisor::BuildOf,
) -> Result<Option<abode_contract::supervisor::BuildSocket>, Failure> {
    let Some(machine) = machine else {
        return Ok(None);
    };
    let (machine, socket) = (machine.to_path_buf(), work_dir.join(SUPERVISOR_SOCKET));
    tokio::task::spawn_blocking(move || {
        abode_contract::supervisor::open_build(
            &machine,
            &build,
            &socket,
            std::time::Duration::from_secs(30),
        )
    })
    .await
    .map_err(|error| Failure::failed(error.to_string()))?
    .map(Some)
    .map_err(|error| Failure::failed(error.to_string()))
}

/// `terraform show -json` of the saved plan in `work_dir`'s template dir.
pub async fn show_plan(
    work_dir: &Path,
    env: &[(String, String)],
    plan_file: &Path,
    isolation: Option<&Arc<Isolation>>,
) -> Result<Vec<u8>, Failure> {
    // Written by the plan's own launch once nothing the template started
    // ran any more: the JSON of this very plan, complete.
    let shown = work_dir.join(PLAN_JSON_FILE);
    match read_no_follow(&shown) {
        Ok(json) => {
            remove_if_there(&shown)?;
            return Ok(json);
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(Failure::failed(format!(
                "cannot read the plan's JSON: {error}"
            )))
        }
    }
    let template_dir = work_dir.join(TEMPLATE_SUBDIR);
    let show = Invocation::new(
        template_dir,
        [
            "show",
            "-json",
            "-no-color",
            &plan_file.display().to_string(),
        ],
        env,
    )
    .isolated(isolation, work_dir);
    run::capture(&show)
        .await
        .map_err(|error| Failure::failed(error.to_string()))
}

/// Removes `path` if it is there.
fn remove_if_there(path: &Path) -> Result<(), Failure> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(Failure::failed(
            format!("cannot remove {}: {error}", path.display()),
        )),
        _ => Ok(()),
    }
}

/// A regular file's bytes, never through a link (read once the run's
/// sandbox, and everything in it, is gone: nothing can swap it meanwhile).
fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    if !std::fs::symlink_metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    std::fs::read(path)
}
