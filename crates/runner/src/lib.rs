//! The machine side of a build: everything that happens where Terraform
//! runs, whoever handed out the job.
//!
//! The embedded provisioners of a server and the external daemons (`abode
//! provisioner start`) run a build with this one sequence ([`run_job`]), so
//! that a build is the same wherever it runs: the same work dir
//! ([`workdir`]), template unpacked by the same rules ([`archive`]), the same
//! environment contract and provider mirror, the same Terraform commands
//! ([`command`]), the same state backend settings ([`state_backend`]) and the
//! same log lines ([`output`]). What differs is where the job's records live
//! and who judges its plan: the [`BuildHost`], which for an embedded worker
//! is the server's control plane and for a daemon an HTTP client of the
//! server. This crate knows neither: it depends on no database and no
//! domain rule, so a daemon links none.
//!
//! # Modules
//!
//! `job.rs` is `run_job`, the sequence: work dir, `init`, the backend checked,
//! `plan -out`, `show -json`, the host's verdict, `apply`; or `init` and
//! `apply` of a confirmed plan; whatever happened, what Terraform could not
//! hand to the state backend offered, the state lock given back, the work dir
//! removed by its own run. `host.rs` is `BuildHost` (log lines with a typed
//! `LogLevel`, judge, keep state, applied, lease, release) and the values it
//! passes: the job's inputs, the verdict, what became of a state, how a run
//! ended. `command.rs` is what a build and a preview share (work dir layout,
//! one Terraform command with its lines logged, `terraform show`, the
//! environment contract, `Failure`); `workdir.rs` the private work dir (0700;
//! the CLI configuration, the provider lock); `archive.rs` safe unpacking of a
//! template archive (relative paths, no link out of the root, capped entries
//! and bytes); `state_backend.rs` the run's side of Abode's state backend (the
//! override file, the `TF_HTTP_*` settings, the secret kept in the work dir);
//! `output.rs` Terraform's `-json` lines as log lines; `turns.rs` makes runs of
//! one build in one process take turns at its work dir. `retention.rs` writes
//! what a delete that retains and a build that adopts need into that build's
//! work dir only: the template's settings alone (`terraform`, `provider`,
//! `variable` blocks and the locals they use, parsed with `hcl-edit`) with a
//! `removed { destroy = false }` block per retained resource, planned without
//! `-destroy` (which ignores `removed` blocks), and `import` blocks for adopted
//! resources. `snapshot.rs` is what a confirmed destroy needs before its apply
//! on the machine of the volume: its `snapshot_command`s run, its volume
//! handed to the host to archive (issue 47). `timings.rs` is what a run
//! measures of its own time (its stages, and each resource's plan and apply
//! from Terraform's `-json` events), told to the host at the run's end.
//!
//! # What it keeps
//!
//! - One run of a build at a time in a work dir. A work dir is named by its
//!   build (so that a run killed with its process is found again), and a build
//!   queued again can come back to the very process whose run lost it while
//!   that run winds down: the new run waits until the old one has ended and
//!   cleaned up (`turns.rs`).
//! - Every Terraform run of a build or a preview goes through
//!   `RunnerConfig::isolation` (the sandbox, or none only when the operator
//!   said `off`), and whatever is written into a work dir for Terraform (the
//!   layout, the backend settings, a confirmed plan) is handed to the sandbox's
//!   user before Terraform runs. A sandboxed build names the process supervisor
//!   in its contract; a preview does too (its plan reads `abode_process`es).
//! - It depends on `abode-terraform` and `abode-contract` only
//!   (`crates/abode/tests/house.rs` checks the trees).

pub mod archive;
pub mod command;
mod host;
mod job;
pub mod output;
pub mod retention;
pub mod snapshot;
pub mod state_backend;
pub mod timings;
mod turns;
pub mod workdir;

pub use host::{
    sha256_hex, ArchiveOrder, BuildHost, Ended, Failure, FailureKind, HeldPlan, JobInputs, JobKind,
    LogLevel, LogSink, LogStage, SnapshotOrder, StateKept, UnknownJobKind, Verdict,
};
pub use job::{run_job, Interrupts, RunnerConfig, LEASE_LOST, STALE_PLAN_MESSAGE};
pub use state_backend::StateBackend;
pub use timings::{ResourceSpan, RunTimings, StageSpan, Stopwatch};
