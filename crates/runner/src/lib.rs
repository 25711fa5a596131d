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

pub mod archive;
pub mod command;
mod host;
mod job;
pub mod output;
pub mod retention;
pub mod state_backend;
mod turns;
pub mod workdir;

pub use host::{
    sha256_hex, BuildHost, Ended, Failure, FailureKind, HeldPlan, JobInputs, JobKind, LogLevel,
    LogSink, LogStage, StateKept, UnknownJobKind, Verdict,
};
pub use job::{run_job, Interrupts, RunnerConfig, LEASE_LOST, STALE_PLAN_MESSAGE};
pub use state_backend::StateBackend;
