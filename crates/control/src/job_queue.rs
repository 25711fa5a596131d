//! The job queue's wake-ups: idle provisioners here sleep until a job may be
//! theirs, and other servers sharing the database are told (the store's
//! announcements) so that theirs wake too.
//!
//! A service of its own (`Control::jobs()`), so that the door, previews,
//! state unlocks and the lease keeper wake provisioners through one handle.
//! The queue itself is the store's `jobs` table; what is woken claims from it.

use std::sync::Arc;

use abode_store::Store;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The job queue's wake-ups; cheap to clone.
#[derive(Clone)]
pub struct JobQueue {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    /// Wakes idle provisioners (and daemons' long-polls) of this process.
    queued: Notify,
}

impl JobQueue {
    pub(crate) fn new(store: Store) -> JobQueue {
        JobQueue {
            inner: Arc::new(Inner {
                store,
                queued: Notify::new(),
            }),
        }
    }

    /// A job was queued: wakes an idle worker here and tells the other servers.
    pub(crate) async fn queued(&self) {
        self.inner.queued.notify_one();
        self.announce("a queued job").await;
    }

    /// Jobs that waited may run now (a workspace's state was unlocked):
    /// wakes every idle worker here and tells the other servers.
    pub async fn freed(&self) {
        self.inner.queued.notify_waiters();
        self.announce("an unlocked workspace").await;
    }

    /// Wakes every idle worker of this process (the data dir has space
    /// again, a build went back to the queue, a preview any worker may take).
    pub fn wake_all(&self) {
        self.inner.queued.notify_waiters();
    }

    /// Wakes one idle worker of this process: another server announced a job.
    pub fn wake_one(&self) {
        self.inner.queued.notify_one();
    }

    /// Resolves when a worker here is woken; register before looking at the
    /// queue, so that a job queued in between is not missed.
    pub fn woken(&self) -> Notified<'_> {
        self.inner.queued.notified()
    }

    async fn announce(&self, what: &str) {
        if let Err(error) = self.inner.store.announce_job_queued().await {
            tracing::warn!(%error, "cannot tell other servers of {what} (their workers look every 2 s)");
        }
    }
}
