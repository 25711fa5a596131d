//! The connection log (issue 49, docs/connections.md): each connection into
//! a workspace written when it opens, on the server that holds the agent's
//! tunnel (a relayed connection is opened there, so it is recorded once),
//! and completed when it ends with its bytes each way and how it ended.
//! The bytes are counted on the relay's path with two relaxed atomic adds
//! per message, no lock; the row is written off the connection's path (its
//! insert runs beside the stream's opening, its update after the end).
//!
//! Who may read it: owners and auditors everyone's entries (`audit.read`
//! on everyone's), others those on the workspaces they own and their own
//! connections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use abode_control::{Caller, ControlError, Workspaces};
use abode_metrics::Metrics;
use abode_store::{
    page_size, ConnectionLogEntry, ConnectionLogFilter, NewConnectionLogEntry, Page, Store,
};
use tokio::task::JoinHandle;

/// Turns the connection log off, for `benches/connection-log.sh` only (it
/// measures what logging costs); never documented as a setting.
const BENCH_OFF: &str = "ABODE_BENCH_NO_CONNECTION_LOG";

/// Where a connection came from, as the API saw its request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionClient {
    /// The client's address (the `ClientAddress` the API resolved; for a
    /// relayed connection, the address the relaying server named and the
    /// one it came from: `A via B`).
    pub ip: Option<String>,
    pub user_agent: Option<String>,
}

/// How a connection ended, as the log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The person's side closed it (or both sides finished).
    ClientClosed,
    /// The agent's tunnel went away.
    AgentGone,
    /// The person's side stayed silent past the limit.
    Idle,
    /// The credential it was opened with stopped holding (logged out,
    /// revoked, expired, suspended).
    Refused,
    /// The server stopped carrying it (its shutdown, or an upgrade that
    /// never completed).
    Interrupted,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::ClientClosed => "client_closed",
            EndReason::AgentGone => "agent_gone",
            EndReason::Idle => "idle",
            EndReason::Refused => "refused",
            EndReason::Interrupted => "interrupted",
        }
    }
}

/// The bytes a connection carried, counted as they pass.
#[derive(Debug, Default)]
pub struct ByteCounts {
    to_workspace: AtomicU64,
    from_workspace: AtomicU64,
}

impl ByteCounts {
    pub fn to_workspace(&self, bytes: usize) {
        self.to_workspace.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn from_workspace(&self, bytes: usize) {
        self.from_workspace
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn totals(&self) -> (i64, i64) {
        let read = |counter: &AtomicU64| {
            i64::try_from(counter.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
        };
        (read(&self.to_workspace), read(&self.from_workspace))
    }
}

/// The log of this server's connections; cheap to clone.
#[derive(Clone)]
pub struct ConnectionLog {
    store: Store,
    workspaces: Workspaces,
    server_id: String,
    metrics: Metrics,
    enabled: bool,
}

/// One connection's entry while it is open: written on a task, completed
/// once by [`LogEntry::close`].
pub(crate) struct LogEntry {
    log: ConnectionLog,
    kind: String,
    written: Option<JoinHandle<Option<String>>>,
    pub(crate) bytes: Arc<ByteCounts>,
}

impl LogEntry {
    /// Completes the entry: its end now, its bytes, `why`.
    pub(crate) fn close(
        mut self,
        why: EndReason,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let written = self.written.take();
        let (up, down) = self.bytes.totals();
        let log = self.log.clone();
        let kind = std::mem::take(&mut self.kind);
        async move {
            let Some(written) = written else { return };
            log.metrics.connection_closed(&kind);
            let Ok(Some(id)) = written.await else { return };
            if let Err(error) = log
                .store
                .close_connection_log(&id, up, down, why.as_str())
                .await
            {
                tracing::warn!(%error, connection = %id, "cannot record a connection's end");
            }
        }
    }
}

impl ConnectionLog {
    pub(crate) fn new(
        store: Store,
        workspaces: Workspaces,
        server_id: String,
        metrics: Metrics,
    ) -> ConnectionLog {
        ConnectionLog {
            store,
            workspaces,
            server_id,
            metrics,
            enabled: std::env::var_os(BENCH_OFF).is_none(),
        }
    }

    /// Starts the entry of a connection opening now (written on a task:
    /// the connection does not wait for it).
    pub(crate) fn opened(&self, entry: NewConnectionLogEntry) -> LogEntry {
        let bytes = Arc::new(ByteCounts::default());
        if !self.enabled {
            return LogEntry {
                log: self.clone(),
                kind: String::new(),
                written: None,
                bytes,
            };
        }
        self.metrics.connection_opened(&entry.kind);
        let store = self.store.clone();
        let kind = entry.kind.clone();
        let entry = NewConnectionLogEntry {
            server_id: self.server_id.clone(),
            ..entry
        };
        let written = tokio::spawn(async move {
            match store.open_connection_log(&entry).await {
                Ok(id) => Some(id),
                Err(error) => {
                    tracing::warn!(%error, workspace = %entry.workspace_id, "cannot record a connection");
                    None
                }
            }
        });
        LogEntry {
            log: self.clone(),
            kind,
            written: Some(written),
            bytes,
        }
    }

    /// Marks `server_lost` the entries this server left open when it was
    /// killed (at its start, before it carries any connection).
    pub async fn end_lost(&self) -> Result<u64, ControlError> {
        Ok(self.store.end_lost_connections(&self.server_id).await?)
    }

    /// A page of the log as `caller` may see it, newest first.
    pub async fn entries(
        &self,
        caller: &Caller,
        query: &ConnectionLogQuery,
    ) -> Result<Page<ConnectionLogEntry>, ControlError> {
        let (workspace_id, visible_to) = abode_control::audit_log::log_reach(
            &self.workspaces,
            caller,
            query.workspace.as_deref(),
        )
        .await?;
        Ok(self
            .store
            .list_connection_log_page(&ConnectionLogFilter {
                workspace_id,
                visible_to,
                user: query.user.clone(),
                since: query.since,
                after: query.after.clone(),
                limit: page_size(query.limit),
            })
            .await?)
    }
}

/// Which entries a page of the log shows (docs/api.md, `GET /connections`).
#[derive(Debug, Clone, Default)]
pub struct ConnectionLogQuery {
    /// A workspace reference (`name` or `owner/name`), resolved as the caller sees it.
    pub workspace: Option<String>,
    /// A person's username.
    pub user: Option<String>,
    /// Unix ms, inclusive.
    pub since: Option<i64>,
    pub after: Option<String>,
    pub limit: Option<i64>,
}
