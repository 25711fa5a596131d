//! The everyday write of a workspace's Terraform state: only ever a
//! successor of the stored one (a whole state of the same lineage, serial not
//! lower), compared and written as one step, under the run's state lock when
//! the run has one. Terraform's own writes through the state backend
//! (`state_backend.rs`), a state a run left in its work dir (the runner's
//! host, a restarted server's follower, a daemon's upload) all go through
//! [`write_successor`], which also places the workspace on the host of the
//! run that wrote it when the state holds host-local resources
//! (`placement.rs`), in the write's transaction.

use std::path::Path;

use abode_runner::workdir::{ERRORED_STATE_FILE, STATE_FILE, TEMPLATE_SUBDIR};
use abode_runner::{StateBackend, StateKept};
use serde::Deserialize;

use crate::placement::{placement_of, StateResource};
use crate::room::Host;
use abode_store::Placement;

/// The two fields that say whether one Terraform state follows another.
#[derive(Deserialize)]
struct StateHeader {
    lineage: String,
    serial: u64,
}

/// A state to be stored, read once: whether it follows the stored one, and
/// where it puts its workspace.
#[derive(Deserialize)]
struct NewState {
    lineage: String,
    serial: u64,
    #[serde(default)]
    resources: Vec<StateResource>,
}

/// Stores the Terraform state in a build's work dir as the workspace's state,
/// if it can only be newer: a state file cut short by a crash, or one from
/// another lineage, never replaces a good stored state.
pub(crate) async fn keep_state(host: &Host, build_id: &str, work_dir: &Path) -> StateKept {
    // The state backend has what Terraform handed it; what it could not
    // hand over is in `errored.tfstate` (a work dir of a release before the
    // backend has its state in `terraform.tfstate`).
    let template = work_dir.join(TEMPLATE_SUBDIR);
    let errored = template.join(ERRORED_STATE_FILE);
    let path = if errored.exists() {
        errored
    } else {
        template.join(STATE_FILE)
    };
    let read = tokio::task::spawn_blocking(move || std::fs::read(path)).await;
    let state = match read {
        Ok(Ok(state)) => state,
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            return StateKept::Missing
        }
        Ok(Err(error)) => return StateKept::Refused(format!("cannot read it: {error}")),
        Err(error) => return StateKept::Refused(format!("cannot read it: {error}")),
    };
    let secret = StateBackend::secret_in(work_dir);
    keep_state_bytes(host, build_id, state, secret.as_deref()).await
}

/// Stores `state`, written by a run of `build_id`, as its workspace's state
/// if it can only be newer (see [`keep_state`]). A run of the state backend
/// (`secret`) stores it only while it still holds the workspace's state lock,
/// in the write's own transaction: after a person's unlock, what a lost
/// holder's Terraform left is kept in its work dir, never stored. A run of
/// an older release (no secret) is judged by the builds that came after it.
pub(crate) async fn keep_state_bytes(
    host: &Host,
    build_id: &str,
    state: Vec<u8>,
    secret: Option<&str>,
) -> StateKept {
    let store = &host.inner.store;
    let build = match store.build_by_id(build_id).await {
        Ok(build) => build,
        Err(error) => return StateKept::Unavailable(format!("storage error: {error}")),
    };
    // A build that ended without this server (another one failed it when its
    // lease ran out) may have been followed by newer builds: their state is
    // the workspace's now, and this one's is kept aside, never stored over it.
    match store.latest_build(&build.workspace_id).await {
        Ok(latest) if latest.number > build.number => {
            return StateKept::Refused(format!(
                "build #{} of this workspace came after this one; its state is not replaced by this build's",
                latest.number
            ))
        }
        Ok(_) => {}
        Err(error) => return StateKept::Unavailable(format!("storage error: {error}")),
    }
    let fence = secret.map(|secret| Fence {
        secret_hash: abode_credentials::secrets::token_hash(secret),
        terraform_lock_id: None,
    });
    match write_successor(host, &build.workspace_id, build_id, &state, fence.as_ref()).await {
        Written::Saved => StateKept::Saved,
        Written::Unchanged => StateKept::Unchanged,
        Written::NotSuccessor(reason) => StateKept::Refused(reason),
        Written::Fenced => StateKept::Refused(
            "this run no longer holds the workspace's state lock (it was unlocked)".into(),
        ),
        Written::Failed(error) => StateKept::Unavailable(format!("storage error: {error}")),
        Written::KeptChanging => StateKept::Unavailable(
            "the stored state kept changing while this one was compared".into(),
        ),
    }
}

/// The lock a state write must be made under: the run's (the SHA-256 of its
/// secret) and, when Terraform names one, its Terraform lock.
pub(crate) struct Fence<'a> {
    pub(crate) secret_hash: String,
    pub(crate) terraform_lock_id: Option<&'a str>,
}

/// What writing a state that must follow the stored one came to.
pub(crate) enum Written {
    Saved,
    /// The stored state is byte for byte the same.
    Unchanged,
    /// Not of the stored state's lineage, an older serial, or not a state.
    NotSuccessor(String),
    /// The run does not hold the lock it was to be written under.
    Fenced,
    Failed(abode_store::StoreError),
    /// Other writes kept coming between the comparison and this one.
    KeptChanging,
}

/// Stores `state` as the workspace's if it follows the stored one (a whole
/// state of the same lineage, serial not lower), under `fence` when given.
/// Compared and written as one step: two writes of the same build's state
/// (a half-way one and the last, on two servers) cannot both pass the
/// comparison and leave the older one stored.
pub(crate) async fn write_successor(
    host: &Host,
    workspace_id: &str,
    build_id: &str,
    state: &[u8],
    fence: Option<&Fence<'_>>,
) -> Written {
    let store = &host.inner.store;
    for _ in 0..STATE_WRITE_ATTEMPTS {
        let stored = match store.state(workspace_id).await {
            Ok(stored) => stored,
            Err(error) => return Written::Failed(error),
        };
        let placement = match successor(stored.as_deref(), state) {
            Ok(placement) => placement,
            Err(reason) => return Written::NotSuccessor(reason),
        };
        if stored.as_deref() == Some(state) {
            return Written::Unchanged;
        }
        let written = match fence {
            Some(fence) => store
                .put_state_fenced(
                    workspace_id,
                    build_id,
                    &abode_store::StateFence {
                        secret_hash: &fence.secret_hash,
                        terraform_lock_id: fence.terraform_lock_id,
                    },
                    state,
                    stored.as_deref(),
                    placement,
                )
                .await
                .map(|written| match written {
                    abode_store::FencedWrite::Written => Some(true),
                    abode_store::FencedWrite::Raced => Some(false),
                    abode_store::FencedWrite::Fenced => None,
                }),
            None => store
                .put_state_replacing(workspace_id, build_id, state, stored.as_deref(), placement)
                .await
                .map(Some),
        };
        match written {
            Ok(Some(true)) => return Written::Saved,
            // Another write came first: compared again with it.
            Ok(Some(false)) => continue,
            Ok(None) => return Written::Fenced,
            Err(error) => return Written::Failed(error),
        }
    }
    Written::KeptChanging
}

/// How many times a state is compared again when another write came
/// between its comparison and its own.
const STATE_WRITE_ATTEMPTS: usize = 3;

/// Whether `new` may replace `stored`: a whole state of the same lineage
/// whose serial is not lower; and if so, where it puts its workspace.
fn successor(stored: Option<&[u8]>, new: &[u8]) -> Result<Placement, String> {
    let new: NewState = serde_json::from_slice(new)
        .map_err(|_| "the state file is not a whole Terraform state".to_string())?;
    let placement = placement_of(&new.resources);
    let Some(stored) = stored else {
        return Ok(placement);
    };
    let Ok(stored) = serde_json::from_slice::<StateHeader>(stored) else {
        // The stored one is not a state Abode can compare; the new one is.
        return Ok(placement);
    };
    if stored.lineage != new.lineage {
        return Err(format!(
            "its lineage {} is not the stored state's {}",
            new.lineage, stored.lineage
        ));
    }
    if new.serial < stored.serial {
        return Err(format!(
            "its serial {} is older than the stored state's {}",
            new.serial, stored.serial
        ));
    }
    Ok(placement)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_state_of_the_same_lineage_and_no_older_serial_follows() {
        let state = |lineage: &str, serial: u64| {
            format!(r#"{{"version":4,"serial":{serial},"lineage":"{lineage}","resources":[]}}"#)
                .into_bytes()
        };
        let stored = state("a", 5);
        let stored = Some(stored.as_slice());
        let cut_short = br#"{"version":4,"serial":7,"lin"#.to_vec();
        let cases = [
            (None, state("a", 1), true),
            (stored, state("a", 5), true),
            (stored, state("a", 6), true),
            (stored, state("a", 4), false),
            (stored, state("b", 9), false),
            (stored, cut_short, false),
        ];
        for (stored, new, follows) in cases {
            assert_eq!(
                successor(stored, &new).is_ok(),
                follows,
                "{}",
                String::from_utf8_lossy(&new)
            );
        }
    }
}
