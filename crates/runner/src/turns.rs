//! Runs of one build in one process take turns at its work dir.
//!
//! A work dir is named by its build's id, so that a run killed with its
//! process is found again at the next start. That same name is a trap while
//! the process lives: a build whose lease ran out before its plan was judged
//! goes back to the queue, and this very process (a daemon or a server that
//! was paused) can take it again while the run that lost it still winds
//! down in the dir of that name. The new run would lay its template over the
//! old one's files, and the old one, ending, would remove the dir under the
//! new one's Terraform. So a run waits for its turn: the one before it ends
//! (and cleans up) first.
//!
//! The turns are the process's, not a config's: the embedded provisioners
//! build a runner config per job, and a work dir is a place on this machine
//! whoever names it. Two processes on one data dir are not told apart here
//! (see ARCHITECTURE.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::OwnedMutexGuard;

type Turns = Mutex<HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>>;

fn turns() -> &'static Turns {
    static TURNS: OnceLock<Turns> = OnceLock::new();
    TURNS.get_or_init(Turns::default)
}

/// The work dir is this run's while this lives.
#[must_use = "the turn ends when this is dropped"]
pub struct WorkDirTurn {
    _held: OwnedMutexGuard<()>,
}

/// The lock of `work_dir`, shared by every run that asks for it while one
/// holds or waits for it.
fn lock_of(work_dir: &Path) -> Arc<tokio::sync::Mutex<()>> {
    // A poisoned map only means another run panicked while inserting; the
    // map itself is still whole.
    let mut turns = turns()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    turns.retain(|_, lock| lock.strong_count() > 0);
    if let Some(lock) = turns.get(work_dir).and_then(Weak::upgrade) {
        return lock;
    }
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    turns.insert(work_dir.to_path_buf(), Arc::downgrade(&lock));
    lock
}

/// Whether another run of this process holds `work_dir` now (said in the
/// build's log before waiting, so that a wait is never silent).
pub fn is_taken(work_dir: &Path) -> bool {
    lock_of(work_dir).try_lock().is_err()
}

/// Waits until no other run of this process holds `work_dir`, then holds it.
pub async fn take(work_dir: &Path) -> WorkDirTurn {
    WorkDirTurn {
        _held: lock_of(work_dir).lock_owned().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_second_run_of_a_work_dir_waits_for_the_first_to_end() {
        let dir = PathBuf::from("/nonexistent/turns-test/build-a");
        let first = take(&dir).await;
        assert!(is_taken(&dir));
        let (started, mut second_started) = tokio::sync::watch::channel(false);
        let second = tokio::spawn({
            let dir = dir.clone();
            async move {
                let turn = take(&dir).await;
                let _ = started.send(true);
                turn
            }
        });
        // The second run is parked on the lock (observed: it is queued on
        // it and has not said it started).
        tokio::task::yield_now().await;
        assert!(!*second_started.borrow());
        drop(first);
        tokio::time::timeout(Duration::from_secs(10), second_started.wait_for(|s| *s))
            .await
            .expect("the second run got its turn")
            .expect("the second run is alive");
        let second = second.await.expect("the second run did not panic");
        assert!(is_taken(&dir));
        drop(second);
        assert!(!is_taken(&dir));
    }

    #[tokio::test]
    async fn runs_of_different_work_dirs_do_not_wait_for_each_other() {
        let one = take(Path::new("/nonexistent/turns-test/build-b")).await;
        let other = tokio::time::timeout(
            Duration::from_secs(10),
            take(Path::new("/nonexistent/turns-test/build-c")),
        )
        .await
        .expect("another build's run never waits");
        drop((one, other));
    }
}
