//! Which slot claimed each job this daemon runs, on disk beside the work
//! dirs.
//!
//! The server holds a job for the slot that claimed it, not for the daemon
//! as a whole: a build queued again can be claimed by another slot of this
//! same daemon while the run that lost it winds down, and that run's calls
//! must not pass for the new claim's. A daemon killed in the middle of an
//! apply and started again speaks for its leftover run (renews its lease,
//! tells its end), so it must know which slot claimed it: that is this
//! file, written when a run starts and removed when it has told its end.

use std::path::{Path, PathBuf};

/// `<data dir>/claims/<build id>`, holding the slot's name.
pub(crate) struct Claims {
    dir: PathBuf,
}

impl Claims {
    pub(crate) fn in_data_dir(data_dir: &Path) -> Claims {
        Claims {
            dir: data_dir.join("claims"),
        }
    }

    /// Notes that `slot` claimed `build_id`; a failure is told and costs
    /// only the precise end of a run killed with its daemon.
    pub(crate) fn record(&self, build_id: &str, slot: &str) {
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(self.dir.join(build_id), slot));
        if let Err(error) = written {
            tracing::warn!(build = %build_id, dir = %self.dir.display(), %error,
                "cannot note which slot claimed this job");
        }
    }

    /// The slot that claimed `build_id`, if noted.
    pub(crate) fn slot_of(&self, build_id: &str) -> Option<String> {
        let slot = std::fs::read_to_string(self.dir.join(build_id)).ok()?;
        let slot = slot.trim();
        (!slot.is_empty()).then(|| slot.to_string())
    }

    /// Forgets `build_id`'s claim if `slot` is still the one noted (another
    /// slot may have claimed the build again since).
    pub(crate) fn forget(&self, build_id: &str, slot: &str) {
        if self.slot_of(build_id).as_deref() == Some(slot) {
            let _ = std::fs::remove_file(self.dir.join(build_id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_noted_read_and_forgotten_only_by_its_slot() {
        let data = tempfile::tempdir().unwrap();
        let claims = Claims::in_data_dir(data.path());
        assert_eq!(claims.slot_of("build-a"), None);
        claims.record("build-a", "d-1");
        assert_eq!(claims.slot_of("build-a").as_deref(), Some("d-1"));
        // Claimed again by slot 2 while slot 1's run winds down: slot 1's
        // end does not forget slot 2's claim.
        claims.record("build-a", "d-2");
        claims.forget("build-a", "d-1");
        assert_eq!(claims.slot_of("build-a").as_deref(), Some("d-2"));
        claims.forget("build-a", "d-2");
        assert_eq!(claims.slot_of("build-a"), None);
    }
}
