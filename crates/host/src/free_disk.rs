//! The data dir's free space: a server whose disk fills starts no build.
//!
//! SQLite's database, the build work dirs and local volumes live in the data
//! dir. A build that fills it leaves every other write failing (log lines,
//! states, the end of the build) until space returns. So the keeper reads
//! the free space every round, shows it as a metric, and below
//! `--min-free-disk` this server's workers claim nothing (another server of
//! the database may still run the build) and the builds that wait are told
//! why.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;

use abode_runner::{LogLevel, LogStage};

use crate::room::Host;

/// The free space (for an unprivileged user) of the filesystem holding
/// `dir`, in bytes; `None` when it cannot be read.
pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    let stats = nix::sys::statvfs::statvfs(dir).ok()?;
    #[allow(clippy::useless_conversion)]
    let (available, fragment) = (
        u64::from(stats.blocks_available()),
        u64::from(stats.fragment_size()),
    );
    Some(available.saturating_mul(fragment))
}

fn mib(bytes: u64) -> u64 {
    bytes / (1024 * 1024)
}

impl Host {
    /// Whether this server starts no build now (its data dir is low on space).
    pub(crate) fn low_on_disk(&self) -> bool {
        self.inner.low_on_disk.load(Ordering::SeqCst)
    }

    /// Reads the data dir's free space, records it and says when it falls
    /// below the minimum or comes back; the builds waiting meanwhile are told
    /// once each (`told`).
    pub(crate) async fn check_free_disk(&self, told: &mut HashSet<String>) {
        let minimum = self.inner.config.min_free_disk;
        let dir = self.inner.config.data_dir.clone();
        let Ok(Some(free)) = tokio::task::spawn_blocking(move || free_bytes(&dir)).await else {
            return;
        };
        let low = minimum > 0 && free < minimum;
        self.inner.config.metrics.data_dir_free(free, low);
        let was_low = self.inner.low_on_disk.swap(low, Ordering::SeqCst);
        match (was_low, low) {
            (false, true) => tracing::warn!(
                free_mib = mib(free),
                min_free_mib = mib(minimum),
                data_dir = %self.inner.config.data_dir.display(),
                "the data dir is low on space: this server starts no build until it has --min-free-disk free"
            ),
            (true, false) => {
                told.clear();
                tracing::info!(
                    free_mib = mib(free),
                    "the data dir has space again: builds start"
                );
                self.jobs().wake_all();
            }
            _ => {}
        }
        if !low {
            return;
        }
        let waiting = match self.inner.store.waiting_job_tags(self.now_ms()).await {
            Ok(waiting) => waiting,
            Err(error) => {
                tracing::warn!(%error, "cannot read the builds that wait");
                return;
            }
        };
        let notice = format!(
            "waiting: the server {} starts no build while its data dir has {} MiB free, below \
             --min-free-disk ({} MiB); another server of this database may run it",
            self.inner.config.server_id,
            mib(free),
            mib(minimum)
        );
        for (build_id, _) in waiting {
            if told.insert(build_id.clone()) {
                self.build_log()
                    .note(&build_id, &LogStage::SETUP, LogLevel::Warn, &notice)
                    .await;
            }
        }
    }
}
