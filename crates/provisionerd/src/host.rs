//! A daemon's [`BuildHost`]: the runner's questions sent to the server.
//!
//! The server decides (the guard's verdict), records (log, state, end) and
//! may be briefly unreachable: a restart, a network cut. Each call says how
//! long it is worth waiting for. A log line is worth a few seconds; a plan's
//! verdict a few minutes (nothing has been applied, so giving up is safe);
//! the state after Terraform has run is worth waiting for without end, since
//! it is the one thing that would be lost.

use std::path::{Path, PathBuf};
use std::time::Duration;

use abode_protocol::{
    self, DaemonHello, HeartbeatAnswer, JudgeRequest, LogLineWire, LogUpload, ReleaseRequest,
    SnapshotAnswer, StateAnswer, StateUpload, VerdictWire,
};
use abode_runner::SnapshotOrder;
use abode_runner::StateBackend;
use abode_runner::{BuildHost, LogLevel, LogSink, LogStage, Verdict};
use abode_runner::{Failure, StateKept};

use crate::client::{CallError, ServerClient};

/// How long a plan's verdict is waited for while the server is unreachable.
const JUDGE_PATIENCE: Duration = Duration::from_secs(300);
/// How long a snapshot's upload is tried while the server is unreachable
/// (nothing has been applied, so giving up is safe).
const SNAPSHOT_PATIENCE: Duration = Duration::from_secs(300);
/// How long a log line is.
const LOG_PATIENCE: Duration = Duration::from_secs(5);
/// The longest pause between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Lines are sent in batches: when this many wait, or at the next tick of
/// [`RemoteHost::flush_now_and_then`], and before anything that must follow
/// them in the log (the guard's verdict, the end).
const LOG_BATCH: usize = 100;
const LOG_TICK: Duration = Duration::from_millis(200);

/// One job's host on the daemon.
pub(crate) struct RemoteHost {
    pub(crate) client: ServerClient,
    pub(crate) build_id: String,
    pub(crate) hello: DaemonHello,
    /// Lines not sent yet.
    pending: std::sync::Mutex<Vec<LogLineWire>>,
    /// Held while a batch is sent, so that batches arrive in order.
    sending: tokio::sync::Mutex<()>,
    /// What the run measured, told with its end, and when it was told.
    timings: std::sync::Mutex<Option<(abode_runner::RunTimings, std::time::Instant)>>,
}

impl RemoteHost {
    pub(crate) fn new(client: ServerClient, build_id: String, hello: DaemonHello) -> RemoteHost {
        RemoteHost {
            client,
            build_id,
            hello,
            pending: std::sync::Mutex::new(Vec::new()),
            sending: tokio::sync::Mutex::new(()),
            timings: std::sync::Mutex::new(None),
        }
    }

    /// The run's timings, their `elapsed_us` as of now (they go with the
    /// run's end: `complete`).
    pub(crate) fn timings_now(&self) -> Option<abode_runner::RunTimings> {
        let told = self
            .timings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        told.map(|(mut timings, at)| {
            let since = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
            timings.elapsed_us = timings.elapsed_us.saturating_add(since);
            timings
        })
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<LogLineWire>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends the lines written so far.
    pub(crate) async fn flush(&self) {
        let _sending = self.sending.lock().await;
        let lines = std::mem::take(&mut *self.pending());
        if lines.is_empty() {
            return;
        }
        let upload = LogUpload {
            hello: self.hello.clone(),
            lines,
        };
        if let Err(error) = self
            .call::<_, serde_json::Value>("logs", &upload, Some(LOG_PATIENCE))
            .await
        {
            tracing::warn!(build = %self.build_id, %error, lines = upload.lines.len(), "build log lines were not delivered");
        }
    }

    /// Sends waiting lines every tick, so that a line printed alone reaches
    /// the server's log followers at once; runs until dropped.
    pub(crate) async fn flush_now_and_then(&self) {
        loop {
            tokio::time::sleep(LOG_TICK).await;
            self.flush().await;
        }
    }
    fn path(&self, call: &str) -> String {
        format!("jobs/{}/{call}", self.build_id)
    }

    /// Calls until the server answers, for at most `patience` (`None`:
    /// without end) while it cannot be reached.
    pub(crate) async fn call<B, T>(
        &self,
        call: &str,
        body: &B,
        patience: Option<Duration>,
    ) -> Result<Option<T>, CallError>
    where
        B: serde::Serialize + ?Sized,
        T: serde::de::DeserializeOwned + Send + 'static,
    {
        let path = self.path(call);
        patiently(patience, || self.client.post(&path, body)).await
    }

    async fn upload_state(&self, state: &[u8], last: bool, secret: &str) -> StateKept {
        let upload = StateUpload {
            hello: self.hello.clone(),
            state: abode_protocol::encode(state),
            last,
            secret: Some(secret.to_string()),
        };
        // A state written halfway is offered once; the next one follows.
        let patience = if last { None } else { Some(Duration::ZERO) };
        match self
            .call::<_, StateAnswer>("state", &upload, patience)
            .await
        {
            Ok(Some(answer)) => answer.parse().unwrap_or_else(StateKept::Refused),
            Ok(None) => StateKept::Refused("the server said nothing of the state".into()),
            Err(error) => StateKept::Refused(error.to_string()),
        }
    }
}

/// Tries `attempt` until it is answered, pausing longer each time while the
/// server cannot be reached, for at most `patience` (`None`: without end).
pub(crate) async fn patiently<T, F, Fut>(
    patience: Option<Duration>,
    mut attempt: F,
) -> Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CallError>>,
{
    let started = tokio::time::Instant::now();
    let mut backoff = Duration::from_millis(250);
    let mut told = false;
    loop {
        match attempt().await {
            Err(CallError::Unreachable(reason)) => {
                if patience.is_some_and(|patience| started.elapsed() >= patience) {
                    return Err(CallError::Unreachable(reason));
                }
                if !told {
                    tracing::warn!(%reason, "the server cannot be reached; trying again");
                    told = true;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            answered => {
                if told {
                    tracing::info!("the server answers again");
                }
                return answered;
            }
        }
    }
}

impl LogSink for RemoteHost {
    async fn log(&self, stage: &LogStage, level: LogLevel, text: &str) {
        let waiting = {
            let mut pending = self.pending();
            pending.push(LogLineWire {
                stage: stage.as_str().into(),
                level: level.as_str().into(),
                text: text.into(),
            });
            pending.len()
        };
        if waiting >= LOG_BATCH {
            self.flush().await;
        }
    }
}

impl BuildHost for RemoteHost {
    async fn timings(&self, timings: abode_runner::RunTimings) {
        *self
            .timings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((timings, std::time::Instant::now()));
    }

    async fn judge(&self, plan_json: Vec<u8>, plan: Vec<u8>) -> Result<Verdict, Failure> {
        // The plan's lines before the guard's.
        self.flush().await;
        let request = JudgeRequest {
            hello: self.hello.clone(),
            plan_json: abode_protocol::encode(&plan_json),
            plan: abode_protocol::encode(&plan),
        };
        match self
            .call::<_, VerdictWire>("judge", &request, Some(JUDGE_PATIENCE))
            .await
        {
            Ok(Some(verdict)) => verdict.parse().map_err(Failure::failed),
            Ok(None) => Err(Failure::failed("the server gave no verdict on the plan")),
            Err(error) => Err(Failure::failed(format!(
                "no verdict on the plan, so nothing was applied: {error}"
            ))),
        }
    }

    async fn keep_state(&self, state: Vec<u8>, last: bool, secret: &str) -> StateKept {
        if last {
            self.flush().await;
        }
        self.upload_state(&state, last, secret).await
    }

    /// Terraform stored the state through the server's state backend.
    async fn applied(&self) -> Result<(), Failure> {
        self.flush().await;
        self.call::<_, serde_json::Value>("applied", &self.hello, None)
            .await
            .map(|_| ())
            .map_err(|error| Failure::failed(error.to_string()))
    }

    /// Asked of the server before the verdict and before the apply: a
    /// daemon that was frozen past its lease does neither.
    async fn holds_lease(&self) -> bool {
        match self
            .client
            .post::<_, HeartbeatAnswer>(&self.path("heartbeat"), &self.hello)
            .await
        {
            Ok(_) => true,
            // Cut off: the server answers the verdict itself only to the
            // holder, and the state backend only to the lock's run.
            Err(CallError::Unreachable(_)) => true,
            Err(_) => false,
        }
    }

    /// One step of the agents' shutdown scripts, taken by the server (which
    /// asks the agents and writes the log); a server that cannot be reached
    /// does not hold the build.
    async fn agents_shut_down(&self) -> bool {
        self.flush().await;
        match self
            .client
            .post::<_, abode_protocol::ShutdownAnswer>(&self.path("shutdown"), &self.hello)
            .await
        {
            Ok(Some(answer)) => answer.done,
            Ok(None) => true,
            Err(error) => {
                tracing::warn!(%error, "cannot ask the server about the agents' shutdown scripts; the build goes on");
                true
            }
        }
    }

    /// Archives the volume here, in the format of `abode retained
    /// export`, into `scratch` (synced), then streams it to the server,
    /// which checks it against its manifest and keeps it as a retained
    /// record of kind `snapshot`.
    async fn keep_snapshot(
        &self,
        order: &SnapshotOrder,
        volume: PathBuf,
        scratch: PathBuf,
    ) -> Result<(), Failure> {
        let Some(archive) = &order.archive else {
            return Ok(());
        };
        let meta = abode_volume_archive::ExportMeta {
            volume: archive.volume.clone(),
            retained_id: archive.retained_id.clone(),
            workspace: archive.workspace.clone(),
            owner: archive.owner.clone(),
            exported_at: archive.exported_at.clone(),
        };
        // A duration, not a time: how long the archive took is told.
        let started = std::time::Instant::now();
        let written = tokio::task::spawn_blocking({
            let scratch = scratch.clone();
            move || write_archive(&volume, &scratch, &meta)
        })
        .await
        .map_err(|error| error.to_string())
        .and_then(|written| written);
        let summary = written.map_err(|error| {
            Failure::failed(format!(
                "cannot snapshot {} before applying: {error}; nothing was applied (the volume is as it was)",
                order.address
            ))
        })?;
        let archived = started.elapsed().as_secs_f64();
        self.flush().await;
        let path = self.path(&format!("snapshots/{}", order.index));
        let query = [
            ("daemon_id", self.hello.daemon_id.as_str()),
            ("slot", self.hello.slot.as_str()),
            ("version", self.hello.version.as_str()),
        ];
        let answer = patiently(Some(SNAPSHOT_PATIENCE), || {
            self.client
                .put_file::<SnapshotAnswer>(&path, &query, &scratch)
        })
        .await;
        let kept = match answer {
            Ok(Some(kept)) => kept,
            Ok(None) => {
                return Err(Failure::failed(format!(
                    "the server said nothing of the snapshot of {}; nothing was applied",
                    order.address
                )))
            }
            Err(error) => {
                return Err(Failure::failed(format!(
                    "the server did not keep the snapshot of {}: {error}; nothing was applied (the volume is as it was)",
                    order.address
                )))
            }
        };
        self.log(
            &LogStage::APPLY,
            LogLevel::Info,
            &format!(
                "snapshot of {}: {} files, {} bytes archived as retained record {} in {archived:.3} s, then {:.3} s to the server (abode retained restore {} --to WORKSPACE)",
                order.address,
                summary.files,
                summary.bytes,
                kept.id,
                started.elapsed().as_secs_f64() - archived,
                kept.id
            ),
        )
        .await;
        Ok(())
    }

    async fn release_state_lock(&self, backend: &StateBackend) {
        release_state_lock(
            &self.client,
            &self.build_id,
            &self.hello,
            Some(&backend.secret),
        )
        .await;
    }
}

/// Writes the archive of `volume` into `scratch` (a new file, the daemon's
/// own: 0600) and syncs it.
fn write_archive(
    volume: &Path,
    scratch: &Path,
    meta: &abode_volume_archive::ExportMeta,
) -> Result<abode_volume_archive::ExportSummary, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(scratch)
        .map_err(|error| format!("cannot create {}: {error}", scratch.display()))?;
    let summary = abode_volume_archive::export(volume, &file, meta).map_err(|e| e.to_string())?;
    file.sync_all().map_err(|error| error.to_string())?;
    Ok(summary)
}

/// Tells the server that the run's Terraform ended, until it has heard it
/// (the workspace stays locked until then).
pub(crate) async fn release_state_lock(
    client: &ServerClient,
    build_id: &str,
    hello: &DaemonHello,
    secret: Option<&str>,
) {
    let request = ReleaseRequest {
        hello: hello.clone(),
        secret: secret.map(str::to_string),
    };
    let path = format!("jobs/{build_id}/release");
    if let Err(error) = patiently(None, || {
        client.post::<_, abode_protocol::ReleaseAnswer>(&path, &request)
    })
    .await
    {
        tracing::warn!(build = %build_id, %error, "the server did not take back the workspace's state lock");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn unreachable() -> CallError {
        CallError::Unreachable("connection refused".into())
    }

    /// Calls that fail `failures` times without an answer, then answer.
    async fn answered_after(
        failures: u32,
        patience: Option<Duration>,
    ) -> (Result<u32, CallError>, u32) {
        let calls = AtomicU32::new(0);
        let result = patiently(patience, || {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if call < failures {
                    Err(unreachable())
                } else {
                    Ok(call)
                }
            }
        })
        .await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_server_is_tried_again_until_it_answers() {
        let started = tokio::time::Instant::now();
        let (result, calls) = answered_after(6, None).await;
        assert_eq!(result.unwrap(), 6);
        assert_eq!(calls, 7);
        // 0.25 + 0.5 + 1 + 2 + 4 + 8 (capped at 10 s after): backing off.
        assert_eq!(started.elapsed(), Duration::from_millis(15_750));
    }

    #[tokio::test(start_paused = true)]
    async fn patience_ends_and_a_refusal_is_never_tried_again() {
        let (result, calls) = answered_after(u32::MAX, Some(Duration::from_secs(60))).await;
        assert!(matches!(result, Err(CallError::Unreachable(_))));
        assert!(calls > 1 && calls < 20, "{calls}");
        let calls = AtomicU32::new(0);
        let refused = patiently(None, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                Err::<(), _>(CallError::Refused {
                    status: 409,
                    message: "not yours".into(),
                })
            }
        })
        .await;
        assert!(matches!(
            refused,
            Err(CallError::Refused { status: 409, .. })
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
