//! The build log: the lines a build writes as it goes, and those who follow
//! them (`abode logs -f`, the dashboard's build page, a daemon's uploads).
//!
//! A service of its own (`Control::build_log()`), cheap to clone, so that
//! every other part (the door, the provisioners, held builds, recovery,
//! leases) writes a line and wakes followers through one handle instead of
//! reaching the store and two fields of the control plane. It holds the
//! store and the lines the database did not take yet (`log_backlog.rs`);
//! reading a log for a person goes through the door's authorization first
//! (`Control::build_logs`), then here.

use std::sync::Arc;
use std::time::Duration;

use abode_runner::{LogLevel, LogStage};
use abode_store::{BuildStatus, LogLine, NewLogLine, Store, StoreError};
use tokio::sync::Notify;

use crate::log_backlog::LogBacklog;

/// A page of build log lines.
#[derive(Debug, Clone)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    pub status: BuildStatus,
    pub done: bool,
}

/// How many lines a page holds at most.
const PAGE_LINES: i64 = 1000;

/// The build log; cheap to clone.
#[derive(Clone)]
pub struct BuildLog {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    /// Lines the database did not take yet, in order.
    backlog: LogBacklog,
    /// Wakes followers when a line is written or a build ends.
    written: Notify,
}

impl BuildLog {
    pub(crate) fn new(store: Store) -> BuildLog {
        BuildLog {
            inner: Arc::new(Inner {
                store,
                backlog: LogBacklog::default(),
                written: Notify::new(),
            }),
        }
    }

    /// Writes a build log line; one the database does not take now (it is
    /// unreachable, or its disk is full) is kept in order with the lines
    /// after it and written when it takes them again (`log_backlog.rs`).
    pub async fn note(&self, build_id: &str, stage: &LogStage, level: LogLevel, text: &str) {
        let line = NewLogLine {
            stage: stage.clone(),
            level,
            text: text.into(),
        };
        self.inner
            .backlog
            .write(&self.inner.store, build_id, line)
            .await;
        self.inner.written.notify_waiters();
    }

    /// Writes the lines that wait for the database, as far as it takes them.
    pub async fn flush(&self) {
        self.inner.backlog.flush(&self.inner.store).await;
    }

    /// Wakes the followers: lines were written another way (a daemon's
    /// upload, a batch of Terraform's output) or a build ended.
    pub fn written(&self) {
        self.inner.written.notify_waiters();
    }

    /// The lines of `build_id` after `after`; with `wait`, holds until a
    /// line arrives, the build ends or the wait is over. The caller has
    /// checked who may read it.
    pub(crate) async fn page(
        &self,
        build_id: &str,
        after: i64,
        wait: Duration,
    ) -> Result<LogPage, StoreError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Register interest before reading, so a line written in between
            // still wakes this follower.
            let notified = self.inner.written.notified();
            let status = self.inner.store.build_by_id(build_id).await?.status;
            let lines = self
                .inner
                .store
                .logs_after(build_id, after, PAGE_LINES)
                .await?;
            // A held build writes nothing more until someone confirms it.
            let done = status.is_at_rest() && (lines.len() as i64) < PAGE_LINES;
            if !lines.is_empty() || done || tokio::time::Instant::now() >= deadline {
                return Ok(LogPage {
                    lines,
                    status,
                    done,
                });
            }
            // Followers poll the database at least every second, in case a line
            // was written by another process.
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)),
                notified,
            )
            .await;
        }
    }
}
