//! Build log lines the database did not take when they were written.
//!
//! A build's log is what a person reads to learn what happened to their
//! workspace; a line lost while the database was unreachable (a PostgreSQL
//! restart, a full disk) is a hole in it exactly when something went wrong.
//! A line that cannot be written is kept here, with every line after it (of
//! any build, so that each build's lines stay in order), and the whole
//! backlog is written in order as soon as the database takes a line again:
//! at the next line, or at the lease keeper's next round.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use abode_store::{NewLogLine, Store};

/// How many lines are kept at most while the database is away; beyond it
/// the oldest go (and the server's log says so).
const MAX_BACKLOG: usize = 100_000;

#[derive(Default)]
pub(crate) struct LogBacklog {
    /// Set while lines wait: every new line then queues behind them.
    waiting: AtomicBool,
    lines: tokio::sync::Mutex<VecDeque<(String, NewLogLine)>>,
}

impl LogBacklog {
    /// Writes the line, or keeps it behind those that wait.
    pub(crate) async fn write(&self, store: &Store, build_id: &str, line: NewLogLine) {
        let mut why = None;
        if !self.waiting.load(Ordering::SeqCst) {
            match store.append_log(build_id, &line).await {
                Ok(_) => return,
                Err(error) if !error.is_transient() => {
                    tracing::error!(build = %build_id, %error, "cannot write a build log line");
                    return;
                }
                Err(error) => {
                    tracing::warn!(build = %build_id, %error, "cannot write a build log line now; it is kept and written when the database takes it");
                    why = Some(if error.is_disk_full() {
                        "disk full"
                    } else {
                        "the database was unreachable"
                    });
                }
            }
        }
        let mut lines = self.lines.lock().await;
        // Where the gap began, the log says why (written with the lines).
        let first_of_build = !lines.iter().any(|(id, _)| id == build_id);
        if first_of_build {
            let why = why.unwrap_or("the database was unreachable");
            lines.push_back((
                build_id.to_string(),
                NewLogLine {
                    stage: line.stage.clone(),
                    level: abode_runner::LogLevel::Warn,
                    text: format!(
                        "{why}: the server could not write this log from here; the lines below were \
                         kept and written once it could"
                    ),
                },
            ));
        }
        if lines.len() >= MAX_BACKLOG {
            lines.pop_front();
            tracing::error!("the build log backlog is full: its oldest line was dropped");
        }
        lines.push_back((build_id.to_string(), line));
        self.waiting.store(true, Ordering::SeqCst);
        flush(store, &mut lines, &self.waiting).await;
    }

    /// Writes what waits, in order, as far as the database takes it.
    pub(crate) async fn flush(&self, store: &Store) {
        if !self.waiting.load(Ordering::SeqCst) {
            return;
        }
        let mut lines = self.lines.lock().await;
        flush(store, &mut lines, &self.waiting).await;
    }
}

async fn flush(store: &Store, lines: &mut VecDeque<(String, NewLogLine)>, waiting: &AtomicBool) {
    while let Some((build_id, line)) = lines.front() {
        match store.append_log(build_id, line).await {
            Ok(_) => {
                lines.pop_front();
            }
            Err(error) if error.is_transient() => return,
            // Refused for what it is (a build that is gone, a text the
            // database does not take): never worth trying again.
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot write a build log line");
                lines.pop_front();
            }
        }
    }
    waiting.store(false, Ordering::SeqCst);
}
