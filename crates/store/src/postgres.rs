//! The PostgreSQL backend, for installations that outgrow one machine's
//! SQLite file. It runs the shared queries with numbered placeholders and has
//! its own migrations folder; only the job claim differs in substance
//! (`FOR UPDATE SKIP LOCKED`, so that concurrent claimers under READ COMMITTED
//! neither share a job nor wait on each other).

use std::borrow::Cow;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool, Row};

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

/// The shared queries with `?` / `?N` placeholders rewritten as `$N`. The
/// shared SQL never has a `?` inside a string literal.
pub(crate) fn sql(text: &str) -> Cow<'_, str> {
    if !text.contains('?') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut next = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '?' {
            out.push(c);
            continue;
        }
        out.push('$');
        if chars.peek().is_some_and(|c| c.is_ascii_digit()) {
            while let Some(digit) = chars.next_if(|c| c.is_ascii_digit()) {
                out.push(digit);
            }
        } else {
            out.push_str(&next.to_string());
            next += 1;
        }
    }
    Cow::Owned(out)
}

/// Two concurrent first-user requests must not both find the table empty.
const FIRST_USER_LOCK: Option<&str> = Some("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE");

/// PostgreSQL's row locks make a plain BEGIN enough.
const BEGIN_WRITE: &str = "BEGIN";

/// A pooled connection idle at least this long is pinged before it is
/// handed out. sqlx pings every connection at every acquire by default: one
/// more round trip to the server per query, which on a list page (token,
/// then page) was two of its four. A connection in steady use has just
/// answered; one that sat idle may have been dropped by a restart or a
/// proxy's idle timeout, and is replaced instead of failing a request.
const PING_IDLE_AFTER: Duration = Duration::from_secs(10);

/// Connections in the pool: two per core of this machine, 4 to 32. A
/// query is CPU work for a PostgreSQL backend (on one machine, the same
/// cores as the server's); more backends than cores only take turns, and a
/// request that waits in sqlx's queue (first come, first served) waits less
/// than one preempted inside PostgreSQL. Measured on 2 cores with 32
/// concurrent workspace pages: 8 connections p99 51 ms, 4 connections 44 ms,
/// 16 connections 63 ms, at the same rate. The store never holds two
/// connections in one call, so a small pool cannot deadlock it.
fn pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    u32::try_from(cores.saturating_mul(2)).map_or(32, |n| n.clamp(4, 32))
}

#[derive(Clone)]
pub(crate) struct PostgresBackend {
    pool: PgPool,
    /// Where every stored time comes from (see `Store::with_clock`).
    pub(crate) clock: Clock,
}

impl PostgresBackend {
    pub(crate) async fn open(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size())
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_IDLE_AFTER {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect(url)
            .await
            .map_err(StoreError::Database)?;
        let migrator = crate::migrations::POSTGRES.migrator().await?;
        migrator
            .run(&pool)
            .await
            .map_err(|error| crate::error::migration_error(&migrator, error))?;
        Ok(PostgresBackend {
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
    account_queries!(Some("LOCK TABLE user_roles IN SHARE ROW EXCLUSIVE MODE"));
    token_queries!();
    template_queries!();
    workspace_queries!();
    build_queries!(sqlx::Postgres);
    held_queries!();
    notification_queries!(sqlx::Postgres, "FOR UPDATE SKIP LOCKED");
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
    prebuild_queries!(sqlx::Postgres, "FOR UPDATE OF w SKIP LOCKED");
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
    state_lock_queries!(" FOR UPDATE");
    audit_queries!(sqlx::Postgres);
    // Role changes wait for each other: each counts the owners left.
    role_queries!(
        sqlx::Postgres,
        Some("LOCK TABLE user_roles IN SHARE ROW EXCLUSIVE MODE")
    );

    // ---- the job queue ----

    pub(crate) async fn announce_job_queued(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(JOB_CHANNEL)
            .execute(&self.pool)
            .await
            .map_err(db_error("job"))?;
        Ok(())
    }

    pub(crate) async fn job_announcements(&self) -> Result<JobAnnouncements, StoreError> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(StoreError::Database)?;
        listener
            .listen(JOB_CHANNEL)
            .await
            .map_err(StoreError::Database)?;
        Ok(JobAnnouncements { listener })
    }

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
        let statement = sql(&format!(
            "UPDATE jobs SET status = 'claimed', worker = ?, claimed_at = ?, lease_holder = ?, \
             lease_expires_at = ?, host = ? \
             WHERE id = (SELECT j.id FROM jobs j \
             JOIN builds b ON b.id = j.build_id JOIN users u ON u.id = b.initiator_id \
             JOIN workspaces w ON w.id = b.workspace_id \
             WHERE j.status = 'queued' AND (w.host IS NULL OR w.host = ?) AND {} \
             AND NOT EXISTS (SELECT 1 FROM state_locks l \
             WHERE l.workspace_id = b.workspace_id AND l.build_id <> b.id) \
             ORDER BY u.system, j.created_at, j.id LIMIT 1 \
             FOR UPDATE OF j SKIP LOCKED) \
             RETURNING id AS job_id, build_id, kind",
            tags_covered(tags.len())
        ))
        .into_owned();
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
                "UPDATE builds SET status = 'running', started_at = $1 WHERE id = $2 AND status = 'pending'",
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

#[cfg(test)]
mod tests {
    use super::sql;

    #[test]
    fn placeholders_are_numbered() {
        let cases = [
            ("SELECT 1", "SELECT 1"),
            ("a = ? AND b = ?", "a = $1 AND b = $2"),
            ("(?1, ?2, ?1)", "($1, $2, $1)"),
            ("? IS NULL OR x = ?", "$1 IS NULL OR x = $2"),
        ];
        for (input, expected) in cases {
            assert_eq!(sql(input), expected);
        }
    }
}
