//! The connection log (issue 49): each connection into a workspace, written
//! when it opens by the server holding the agent's tunnel and completed
//! when it closes; a page of it, newest first, with filters. A server
//! killed mid-connection leaves rows without an end: it marks its own
//! `server_lost` at its next start (`end_lost_connections`).

/// A connection as it opens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewConnectionLogEntry {
    /// The server that carries it (the one holding the agent's tunnel).
    pub server_id: String,
    pub user_id: String,
    pub user_name: String,
    /// The API token's name, when the person connected with one.
    pub token_name: Option<String>,
    pub workspace_id: String,
    /// `owner/name` at open.
    pub workspace_name: String,
    /// `ssh`, `port-forward`, `pty` or `app`.
    pub kind: String,
    /// The app's slug (`app`, or a `pty` that runs an app's command).
    pub app: Option<String>,
    /// The port (`port-forward`, or an app on a port).
    pub port: Option<i64>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
}

from_row! {
    /// A connection in the log; `closed_at`, `end_reason` unset while it is
    /// open (or its server was lost and has not started again).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConnectionLogEntry {
        pub id: String,
        pub server_id: String,
        pub user_id: String,
        pub user_name: String,
        pub token_name: Option<String>,
        pub workspace_id: String,
        pub workspace_name: String,
        pub kind: String,
        pub app: Option<String>,
        pub port: Option<i64>,
        pub client_ip: Option<String>,
        pub user_agent: Option<String>,
        pub opened_at: i64,
        pub closed_at: Option<i64>,
        pub bytes_to_workspace: i64,
        pub bytes_from_workspace: i64,
        pub end_reason: Option<String>,
    }
}

/// Which connections a page shows, newest first.
#[derive(Debug, Clone, Default)]
pub struct ConnectionLogFilter {
    /// Only connections into this workspace (by id).
    pub workspace_id: Option<String>,
    /// Only connections into workspaces this user (an id) owns now, or
    /// made by them (a member's own view).
    pub visible_to: Option<String>,
    /// Only connections by the person of this username.
    pub user: Option<String>,
    /// Only connections opened at or after this time (Unix ms).
    pub since: Option<i64>,
    pub after: Option<String>,
    pub limit: i64,
}

pub(crate) const CONNECTION_CURSOR: &str = "c1";

/// The connection log's methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! connection_log_queries {
    () => {
        pub(crate) async fn open_connection_log(
            &self,
            entry: &crate::connection_log::NewConnectionLogEntry,
        ) -> Result<String, StoreError> {
            let id = new_id();
            sqlx::query(&sql(
                "INSERT INTO connection_log (id, server_id, user_id, user_name, token_name, \
                 workspace_id, workspace_name, kind, app, port, client_ip, user_agent, opened_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ))
            .bind(&id)
            .bind(&entry.server_id)
            .bind(&entry.user_id)
            .bind(&entry.user_name)
            .bind(&entry.token_name)
            .bind(&entry.workspace_id)
            .bind(&entry.workspace_name)
            .bind(&entry.kind)
            .bind(&entry.app)
            .bind(entry.port)
            .bind(&entry.client_ip)
            .bind(&entry.user_agent)
            .bind(self.now_ms())
            .execute(&self.pool)
            .await
            .map_err(db_error("connection"))?;
            Ok(id)
        }

        pub(crate) async fn close_connection_log(
            &self,
            id: &str,
            bytes_to_workspace: i64,
            bytes_from_workspace: i64,
            end_reason: &str,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE connection_log SET closed_at = ?, bytes_to_workspace = ?, \
                 bytes_from_workspace = ?, end_reason = ? WHERE id = ? AND closed_at IS NULL",
            ))
            .bind(self.now_ms())
            .bind(bytes_to_workspace)
            .bind(bytes_from_workspace)
            .bind(end_reason)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db_error("connection"))?;
            Ok(done.rows_affected() == 1)
        }

        pub(crate) async fn end_lost_connections(
            &self,
            server_id: &str,
        ) -> Result<u64, StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE connection_log SET closed_at = ?, end_reason = 'server_lost' \
                 WHERE server_id = ? AND closed_at IS NULL",
            ))
            .bind(self.now_ms())
            .bind(server_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("connection"))?;
            Ok(done.rows_affected())
        }

        pub(crate) async fn list_connection_log_page(
            &self,
            filter: &crate::connection_log::ConnectionLogFilter,
        ) -> Result<Page<crate::connection_log::ConnectionLogEntry>, StoreError> {
            use crate::connection_log::CONNECTION_CURSOR;
            let before = filter
                .after
                .as_deref()
                .map(|cursor| {
                    decode_cursor(CONNECTION_CURSOR, cursor, 2)
                        .and_then(|key| Ok((parse_i64(&key[0])?, key[1].clone())))
                })
                .transpose()?;
            let (before_at, before_id) = before.unzip();
            let rows: Vec<crate::connection_log::ConnectionLogEntry> = sqlx::query_as(&sql(
                "SELECT c.id, c.server_id, c.user_id, c.user_name, c.token_name, c.workspace_id, \
                 c.workspace_name, c.kind, c.app, c.port, c.client_ip, c.user_agent, c.opened_at, \
                 c.closed_at, c.bytes_to_workspace, c.bytes_from_workspace, c.end_reason \
                 FROM connection_log c LEFT JOIN workspaces w ON w.id = c.workspace_id \
                 WHERE (?1 IS NULL OR c.workspace_id = ?1) \
                 AND (?2 IS NULL OR w.owner_id = ?2 OR c.user_id = ?2) \
                 AND (?3 IS NULL OR c.user_name = ?3) \
                 AND (?4 IS NULL OR c.opened_at >= ?4) \
                 AND (?5 IS NULL OR c.opened_at < ?5 OR (c.opened_at = ?5 AND c.id < ?6)) \
                 ORDER BY c.opened_at DESC, c.id DESC LIMIT ?7",
            ))
            .bind(&filter.workspace_id)
            .bind(&filter.visible_to)
            .bind(&filter.user)
            .bind(filter.since)
            .bind(before_at)
            .bind(before_id)
            .bind(filter.limit + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("connection"))?;
            Ok(paged(rows, filter.limit, |entry| {
                encode_cursor(
                    CONNECTION_CURSOR,
                    &[&entry.opened_at.to_string(), &entry.id],
                )
            }))
        }
    };
}

pub(crate) use connection_log_queries;
