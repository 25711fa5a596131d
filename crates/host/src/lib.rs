//! Abode's machine room: this server as a build host. It runs builds on the
//! server (the embedded workers, `provisioner/`), serves the external
//! daemons their side of a build (`daemon_jobs.rs`), keeps every build's
//! Terraform state through the state backend (`state_backend.rs`,
//! `states.rs`), holds and renews job leases and fails what a dead server
//! left (`job_leases.rs`), takes over a dead server's builds at start
//! (`recovery.rs`), stops taking builds when the disk is nearly full
//! (`free_disk.rs`), keeps this server's identity among those sharing
//! the database (`server_identity.rs`), and builds a workspace whose volumes
//! and processes are on one host only there (`placement.rs`), and says
//! within seconds why a build no connected provisioner can take waits
//! (`unserved.rs`).
//!
//! It is a crate of its own so that the domain's rules (`abode-control`)
//! and the machinery that runs them change for different reasons. It takes
//! the services it needs from the control plane (the door, held builds, the
//! build log, notifications, the job queue, the scheduler, the prebuild
//! pools, workspaces), the store and the config, handed to it by the
//! composition root ([`HostParts`]); never the whole `Control`.
//!
//! # What it keeps
//!
//! - The server decides. Wherever Terraform runs, a plan is applied only
//!   after [`ServerJob`] judged it with the workspace's protections and said
//!   `allow`; a daemon's verdict, state and end go through the same
//!   `ServerJob` methods as an embedded worker's. A build's plan is judged
//!   once, a confirmed plan is not judged again, and a run ends `applied`
//!   only after `allow` (or for a confirmed plan) and `held` only after
//!   `confirm`.
//! - The Terraform state is saved after every apply, whatever its outcome,
//!   and only if it follows the stored one (`states.rs`, the one
//!   compare-and-write of a state). Work dirs are private (0700) and removed
//!   at the end of each build, once no Terraform of it runs.
//! - One Terraform per workspace, ever: every build's Terraform keeps its
//!   state through the state backend under the workspace's state lock, which
//!   a run takes with a secret only it knows; a write, read or lock by a run
//!   that does not hold it is refused, in the transaction that writes.
//! - A server that dies never makes a build apply anything twice
//!   (`recovery.rs`, `e2e_crash`); a running build is only taken over or
//!   failed by the server that claimed it, or by another once its lease ran
//!   out and stayed unrenewed for a round (`job_leases.rs`).
//! - A fleet preview never applies and never writes a workspace's records.
//! - A workspace whose stored state holds host-local resources (a volume,
//!   a process) is built only by a provisioner of the host that wrote it,
//!   or the one a person moved it to; with that host gone, its builds wait.

mod daemon_jobs;
mod free_disk;
mod job_leases;
mod metrics;
mod placement;
mod provisioner;
mod provisioners;
mod recovery;
mod restarts;
mod room;
mod server_identity;
mod start;
mod state_backend;
mod states;
mod unserved;

pub use daemon_jobs::{daemon_holder, AcquiredJob, DaemonCaller, DaemonNeed, MAX_ACQUIRE_WAIT};
pub use placement::Moved;
pub use provisioner::{JudgeError, ServerJob};
pub use provisioners::ProvisionerView;
pub use recovery::Recovered;
pub use room::{Host, HostParts};
pub use state_backend::{LockAnswer, LockView};
