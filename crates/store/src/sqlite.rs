//! The SQLite backend: one database file under the data dir, WAL, foreign keys,
//! a busy timeout so that concurrent writers wait instead of failing.
//!
//! Every write transaction begins with `BEGIN IMMEDIATE`. In WAL mode a deferred
//! transaction that reads first and writes later fails at once with SQLITE_BUSY
//! when another writer committed in between (the busy timeout does not apply to
//! that case); one that takes the write lock up front simply waits for it.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use std::borrow::Cow;

use crate::accounts::*;
use crate::agents::*;
use crate::app_tokens::*;
use crate::audit::*;
use crate::build_timings::*;
use crate::builds::*;
use crate::connection_log::*;
use crate::error::{db_error, BadCursor, StoreError};
use crate::external_auth::*;
use crate::groups::*;
use crate::held::*;
use crate::host_keys::*;
use crate::ids::new_id;
use crate::job_leases::*;
use crate::notifications::*;
use crate::oidc::*;
use crate::pages::*;
use crate::platform::*;
use crate::port_shares::*;
use crate::prebuilds::*;
use crate::previews::*;
use crate::provisioner_keys::*;
use crate::provisioners::*;
use crate::quotas::*;
use crate::records::*;
use crate::retained::*;
use crate::roles::*;
use crate::schedule_settings::*;
use crate::scheduler_tick::*;
use crate::scripts::*;
use crate::server_instances::*;
use crate::shares::*;
use crate::shutdowns::*;
use crate::state_locks::*;
use crate::templates::*;
use crate::tokens::*;
use crate::unsaved::*;
use crate::users::*;
use crate::workspace_uids::*;
use crate::workspaces::*;
use abode_clock::Clock;

/// The newest migration this binary knows (what `abode server check`
/// compares a database's schema with).
pub(crate) fn newest_migration() -> i64 {
    crate::migrations::SQLITE.newest()
}

/// SQLite takes the shared queries as written.
fn sql(text: &str) -> Cow<'_, str> {
    Cow::Borrowed(text)
}

/// SQLite serialises writers: no lock needed for the first user.
const FIRST_USER_LOCK: Option<&str> = None;

/// Write transactions take SQLite's write lock up front, so a writer that has to
/// wait does so in the busy handler instead of failing with SQLITE_BUSY when
/// another writer commits between its first read and its first write.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

#[derive(Clone)]
pub(crate) struct SqliteBackend {
    pool: SqlitePool,
    /// Where every stored time comes from (see `Store::with_clock`).
    pub(crate) clock: Clock,
}

impl SqliteBackend {
    pub(crate) async fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).map_err(|source| StoreError::Directory {
                    path: parent.display().to_string(),
                    source,
                })?;
            }
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // SQLite rolls a transaction back by itself when a write fails
            // with a full disk or an I/O error; the ROLLBACK sqlx then sends
            // fails, its count of open transactions stays at one, and every
            // later BEGIN on that connection would be refused ("non-zero
            // transaction depth") until a restart. Such a connection is
            // closed when it comes back instead of being handed out again.
            // The ping runs after the rollback a dropped transaction queued.
            .after_release(|conn, _| {
                Box::pin(async move {
                    use sqlx::{Connection, TransactionManager};
                    conn.ping().await?;
                    Ok(
                        <sqlx::Sqlite as sqlx::Database>::TransactionManager::get_transaction_depth(
                            conn,
                        ) == 0,
                    )
                })
            })
            .connect_with(options)
            .await
            .map_err(StoreError::Database)?;
        let migrator = crate::migrations::SQLITE.migrator().await?;
        migrator
            .run(&pool)
            .await
            .map_err(|error| crate::error::migration_error(&migrator, error))?;
        restrict_permissions(path)?;
        Ok(SqliteBackend {
            pool,
            clock: Clock::system(),
        })
    }

    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }

    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(StoreError::Database)
    }

    /// Now, by the store's clock: every time the queries write.
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    // The shared queries, one macro per domain (see each file).
    user_queries!();
    account_queries!(None);
    token_queries!();
    template_queries!();
    workspace_queries!();
    build_queries!(sqlx::Sqlite);
    held_queries!();
    notification_queries!(sqlx::Sqlite, "");
    agent_queries!();
    app_token_queries!();
    port_share_queries!();
    workspace_uid_queries!();
    unsaved_queries!();
    connection_log_queries!();
    build_timing_queries!();
    shutdown_queries!();
    script_queries!();
    external_auth_queries!();
    host_key_queries!();
    oidc_queries!();
    platform_queries!();
    job_lease_queries!();
    prebuild_queries!(sqlx::Sqlite, "");
    preview_queries!();
    provisioner_queries!();
    provisioner_key_queries!();
    group_queries!();
    share_queries!();
    quota_queries!();
    retained_queries!();
    lifecycle_queries!();
    scheduler_tick_queries!();
    server_instance_queries!();
    state_lock_queries!("");
    audit_queries!(sqlx::Sqlite);
    role_queries!(sqlx::Sqlite, None);

    // ---- the job queue ----

    pub(crate) async fn claim_tagged_job(
        &self,
        worker: &str,
        holder: &str,
        host: &str,
        lease_ms: i64,
        tags: &[String],
    ) -> Result<Option<ClaimedJob>, StoreError> {
        let now = self.now_ms();
        let mut tx = self
            .pool
            .begin_with(BEGIN_WRITE)
            .await
            .map_err(StoreError::Database)?;
        let statement = format!(
            "UPDATE jobs SET status = 'claimed', worker = ?, claimed_at = ?, lease_holder = ?, \
             lease_expires_at = ?, host = ? \
             WHERE status = 'queued' AND id = (SELECT j.id FROM jobs j \
             JOIN builds b ON b.id = j.build_id JOIN users u ON u.id = b.initiator_id \
             JOIN workspaces w ON w.id = b.workspace_id \
             WHERE j.status = 'queued' AND (w.host IS NULL OR w.host = ?) AND {} \
             AND NOT EXISTS (SELECT 1 FROM state_locks l \
             WHERE l.workspace_id = b.workspace_id AND l.build_id <> b.id) \
             ORDER BY u.system, j.created_at, j.rowid LIMIT 1) \
             RETURNING id AS job_id, build_id, kind",
            tags_covered(tags.len())
        );
        let mut claim = sqlx::query_as(&statement)
            .bind(worker)
            .bind(now)
            .bind(holder)
            .bind(now.saturating_add(lease_ms))
            .bind(host)
            .bind(host);
        for tag in tags {
            claim = claim.bind(tag);
        }
        let claimed: Option<ClaimedJob> = claim
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        if let Some(job) = &claimed {
            sqlx::query(
                &sql("UPDATE builds SET status = 'running', started_at = ? WHERE id = ? AND status = 'pending'"),
            )
            .bind(now)
            .bind(&job.build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("build"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(claimed)
    }
}

impl SqliteBackend {
    /// See [`crate::Store::place_on_this_server`]: the database is this data
    /// dir's own, so every earlier id of its server is this server.
    pub(crate) async fn place_on_this_server(&self, server_id: &str) -> Result<u64, StoreError> {
        let mut tx = self
            .pool
            .begin_with(BEGIN_WRITE)
            .await
            .map_err(StoreError::Database)?;
        let previous: Option<String> =
            sqlx::query_scalar("SELECT value FROM platform_settings WHERE name = ?")
                .bind(SERVER_HOST_SETTING)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error("platform setting"))?;
        let moved = match previous.as_deref() {
            Some(previous) if previous == server_id => 0,
            Some(previous) => sqlx::query("UPDATE workspaces SET host = ? WHERE host = ?")
                .bind(server_id)
                .bind(previous)
                .execute(&mut *tx)
                .await
                .map_err(db_error("workspace"))?
                .rows_affected(),
            // The first start that records it (a database of a release
            // before hosts): the servers that held jobs were this one.
            None => sqlx::query(
                "UPDATE workspaces SET host = ? WHERE host IS NOT NULL AND host <> ? \
                 AND host IN (SELECT lease_holder FROM jobs WHERE lease_holder IS NOT NULL \
                 AND lease_holder NOT LIKE 'provisioner:%')",
            )
            .bind(server_id)
            .bind(server_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("workspace"))?
            .rows_affected(),
        };
        sqlx::query(
            "INSERT INTO platform_settings (name, value, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(SERVER_HOST_SETTING)
        .bind(server_id)
        .bind(self.now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db_error("platform setting"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(moved)
    }
}

/// The platform setting that names the server id this SQLite database's
/// server last ran as.
const SERVER_HOST_SETTING: &str = "server_host";

/// The database holds Terraform states, plans and saved plans, which can carry
/// secrets: its files are readable by the server's user only.
fn restrict_permissions(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => {}
            // The WAL files come and go with the connections.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && !suffix.is_empty() => {}
            // The database holds every secret Abode keeps: never leave it readable.
            Err(source) => {
                return Err(StoreError::Directory {
                    path: std::path::PathBuf::from(file).display().to_string(),
                    source,
                })
            }
        }
    }
    Ok(())
}
