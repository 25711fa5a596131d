//! What a run and its host say to each other: the [`BuildHost`] a run is
//! written against (log, judge, keep state, applied, lease, release), the
//! job's inputs, the verdict, what became of a state, and how a run ended.
//! The embedded worker's host is the server's control plane; a daemon's is
//! an HTTP client of the server speaking `abode-protocol`.

use std::future::Future;

use abode_contract::{BuildContext, Transition};
use sha2::{Digest, Sha256};

use crate::state_backend::StateBackend;

/// What a job does: the contract's, named as it is stored and on the
/// daemons' wire.
pub use abode_contract::{JobKind, UnknownJobKind};

/// The saved binary plan of a build the guard held. Secret: it leaves the
/// machine only for the server that judged it.
#[derive(Clone, PartialEq, Eq)]
pub struct HeldPlan {
    pub plan: Vec<u8>,
    /// SHA-256 of `plan`.
    pub digest: String,
    /// SHA-256 of the workspace state the plan was made from.
    pub state_digest: String,
}

impl std::fmt::Debug for HeldPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldPlan")
            .field("digest", &self.digest)
            .field("state_digest", &self.state_digest)
            .finish_non_exhaustive()
    }
}

/// What became of a state a run offered its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateKept {
    /// The work dir has no state file (nothing was ever written).
    Missing,
    /// The stored state is byte for byte the same.
    Unchanged,
    Saved,
    /// Not stored, with the reason: unreadable, or not a successor of the
    /// stored state (another lineage, an older serial).
    Refused(String),
    /// Not stored now (the host could not store it): worth offering again.
    Unavailable(String),
}

/// Lowercase hex SHA-256 of `bytes`: how plans and states are named.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub use abode_contract::log::{LogLevel, LogStage};

/// Where a build's log lines go.
pub trait LogSink: Send + Sync {
    fn log(&self, stage: &LogStage, level: LogLevel, text: &str)
        -> impl Future<Output = ()> + Send;
}

/// The side of a build that keeps its records and makes its decisions.
pub trait BuildHost: LogSink {
    /// The guard's verdict on the saved plan (`plan_json` is `terraform show
    /// -json` of it, `plan` the binary plan file).
    fn judge(
        &self,
        plan_json: Vec<u8>,
        plan: Vec<u8>,
    ) -> impl Future<Output = Result<Verdict, Failure>> + Send;
    /// Offers a state Terraform could not hand to the state backend (its
    /// `errored.tfstate`, written when the server stayed unreachable).
    /// `secret` is the run's: the state is stored only while the run holds
    /// the workspace's state lock.
    fn keep_state(
        &self,
        state: Vec<u8>,
        last: bool,
        secret: &str,
    ) -> impl Future<Output = StateKept> + Send;
    /// The apply succeeded and Terraform stored its state through the
    /// backend: record what it made (protections remembered, agents, a
    /// deleted workspace) from the stored state.
    fn applied(&self) -> impl Future<Output = Result<(), Failure>> + Send;
    /// Whether this provisioner still holds the build's lease: looked at
    /// before the plan is judged and before it is applied, so that a holder
    /// that was frozen and woke up after another took the build over does
    /// neither.
    fn holds_lease(&self) -> impl Future<Output = bool> + Send {
        std::future::ready(true)
    }
    /// Before a stop, restart or delete is applied: one step of the agents'
    /// shutdown scripts (asked, waited for up to their timeout); true once
    /// they all ended and the apply may go on. A failure of its own answers
    /// true: a shutdown script never holds a build.
    fn agents_shut_down(&self) -> impl Future<Output = bool> + Send {
        std::future::ready(true)
    }
    /// Before a confirmed plan is applied: archives the volume of `order`
    /// (its directory `volume` on this machine) and has the server keep it
    /// as a retained record of kind `snapshot`; `scratch` is a path in the
    /// run's private work dir the host may write. An error fails the run
    /// with nothing applied. Only a daemon's runs get orders: the server
    /// takes its own runs' snapshots before it hands them out.
    fn keep_snapshot(
        &self,
        order: &SnapshotOrder,
        volume: std::path::PathBuf,
        scratch: std::path::PathBuf,
    ) -> impl Future<Output = Result<(), Failure>> + Send {
        let _ = (volume, scratch);
        std::future::ready(Err(Failure::failed(format!(
            "this provisioner cannot archive {}; nothing was applied",
            order.address
        ))))
    }
    /// What the run measured of its stages and resources, told once at its
    /// end, before its state lock is given back.
    fn timings(&self, timings: crate::timings::RunTimings) -> impl Future<Output = ()> + Send {
        let _ = timings;
        std::future::ready(())
    }
    /// The run's Terraform ended: the workspace's state lock, taken for this
    /// run, is given back (`state_backend.rs`).
    fn release_state_lock(&self, backend: &StateBackend) -> impl Future<Output = ()> + Send;
}

/// What one destroyed or replaced protected resource needs before the
/// apply, taken where the run runs (`snapshot.rs`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotOrder {
    /// Its place among the build's orders, as the server counts them: the
    /// archive is uploaded under it.
    pub index: u32,
    pub address: String,
    /// Its `snapshot_command`s, run in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// What a command gets besides Terraform's environment
    /// (`ABODE_SNAPSHOT_*`, `ABODE_ATTR_*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
    /// The volume to archive (an `abode_volume` whose `snapshot` is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveOrder>,
}

/// A volume to archive, and what the archive's manifest says of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArchiveOrder {
    /// The volume's name: its directory in this machine's volumes dir.
    pub volume: String,
    /// The retained record the server keeps it as.
    pub retained_id: String,
    pub workspace: String,
    pub owner: String,
    /// The server's time of the handout (UTC text).
    pub exported_at: String,
}

/// What the host decided about a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Apply,
    /// Nothing applied; the plan waits for a person's confirmation.
    Hold,
    /// The build fails with this message.
    Block(String),
}

/// Everything a run needs from the job, fetched by the host.
pub struct JobInputs {
    pub build_id: String,
    pub kind: JobKind,
    pub transition: Transition,
    /// The template version's archive.
    pub archive: Vec<u8>,
    /// The workspace's stored state.
    pub state: Option<Vec<u8>>,
    /// The environment contract; its directories and agent binary are the
    /// runner's own ([`RunnerConfig`]).
    pub context: BuildContext,
    /// The confirmed plan of an [`JobKind::ApplySavedPlan`] job.
    pub saved_plan: Option<Vec<u8>>,
    /// How its Terraform reaches the state backend, with the run's secret.
    pub state_backend: StateBackend,
    /// A confirmed plan held before Abode was the state backend: applied
    /// against the stored state laid out in the work dir, as it was planned.
    pub local_state: bool,
    /// A workspace delete's retained resources (instance addresses): the
    /// delete forgets them instead of destroying them (`retention.rs`).
    pub forget: Vec<String>,
    /// Retained resources this build adopts: imported at their addresses.
    pub imports: Vec<crate::retention::ImportTarget>,
    /// The workspace's own uid (`--workspace-uids`), which its processes
    /// run as; `None`: the sandbox's user.
    pub workspace_uid: Option<u32>,
    /// What a confirmed plan needs snapshotted on this machine before its
    /// apply (`snapshot.rs`); none for the server's own runs, whose
    /// snapshots the server took before it handed them out.
    pub snapshots: Vec<SnapshotOrder>,
}

/// Only sizes: a state and a plan may hold secrets.
impl std::fmt::Debug for JobInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobInputs")
            .field("build_id", &self.build_id)
            .field("kind", &self.kind)
            .field("transition", &self.transition)
            .field("archive_bytes", &self.archive.len())
            .field("state_bytes", &self.state.as_ref().map(Vec::len))
            .field("saved_plan_bytes", &self.saved_plan.as_ref().map(Vec::len))
            .field("forget", &self.forget)
            .field("imports", &self.imports.len())
            .field("snapshots", &self.snapshots.len())
            .finish_non_exhaustive()
    }
}

/// How a build that did not succeed ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Failed,
    /// Stopped by a cancel (or a shutdown) before it ended.
    Canceled,
}

impl FailureKind {
    /// Its name: the status the build ends in.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Failed => "failed",
            FailureKind::Canceled => "canceled",
        }
    }

    /// The kind named `name`; none for any other name.
    pub fn named(name: &str) -> Option<FailureKind> {
        [FailureKind::Failed, FailureKind::Canceled]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// Why a build did not succeed: how it ends and the one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    /// The summary of the last error diagnostic Terraform printed, as it
    /// printed it, when a Terraform run failed.
    pub diagnostic: Option<String>,
}

impl Failure {
    pub fn failed(message: impl Into<String>) -> Failure {
        Failure {
            kind: FailureKind::Failed,
            message: message.into(),
            diagnostic: None,
        }
    }
}

/// How a build that did not fail ended.
pub enum Ended {
    Applied,
    /// The guard asks for confirmation: nothing applied, the plan is saved.
    Held(HeldPlan),
}
