//! Account status: suspending, activating and deleting a person (never the
//! last owner, never someone who still owns workspaces), the dormancy
//! sweep, and when a person was last seen. Each change is checked and
//! written in one transaction that role changes also wait for, so two
//! admins suspending the last two owners at once leave one.

use crate::records::AccountStatus;

/// Why a status change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusRefusal {
    #[error("the last owner cannot be suspended or deleted: make another user an owner first")]
    LastOwner,
    #[error("the user owns {0} workspace(s): delete them or transfer them first")]
    OwnsWorkspaces(i64),
    #[error("the account was deleted")]
    Deleted,
}

/// What a status change did: the status before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusChange {
    pub before: AccountStatus,
    pub after: AccountStatus,
}

/// The account status methods of [`crate::Store`]; expanded inside each
/// backend's `impl` with its lock that serialises owner counts (the one
/// role changes take).
macro_rules! account_queries {
    ($owners_lock:expr) => {
        pub(crate) async fn set_account_status(
            &self,
            user_id: &str,
            status: AccountStatus,
            now: i64,
        ) -> Result<Result<StatusChange, StatusRefusal>, StoreError> {
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            let owners_lock: Option<&str> = $owners_lock;
            if let Some(lock) = owners_lock {
                sqlx::query(lock)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::Database)?;
            }
            let before: AccountStatus = sqlx::query_scalar(&sql(
                "SELECT status FROM users WHERE id = ? AND system = FALSE",
            ))
            .bind(user_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error("user"))?;
            if before == AccountStatus::Deleted {
                return Ok(Err(StatusRefusal::Deleted));
            }
            if !status.may_sign_in() {
                // Owners who can still act, other than this user.
                let other_owners: i64 = sqlx::query_scalar(&sql(
                    "SELECT COUNT(*) FROM user_roles r JOIN users u ON u.id = r.user_id \
                     WHERE r.role = 'owner' AND u.id <> ? \
                     AND u.status IN ('active', 'dormant')",
                ))
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error("user roles"))?;
                let is_owner: i64 = sqlx::query_scalar(&sql(
                    "SELECT COUNT(*) FROM user_roles WHERE user_id = ? AND role = 'owner'",
                ))
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error("user roles"))?;
                if is_owner > 0 && other_owners == 0 {
                    return Ok(Err(StatusRefusal::LastOwner));
                }
            }
            if status == AccountStatus::Deleted {
                let workspaces: i64 = sqlx::query_scalar(&sql(
                    "SELECT COUNT(*) FROM workspaces WHERE owner_id = ? AND deleted = FALSE",
                ))
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error("workspaces"))?;
                if workspaces > 0 {
                    return Ok(Err(StatusRefusal::OwnsWorkspaces(workspaces)));
                }
                // A deleted account keeps no way in.
                sqlx::query(&sql(
                    "UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
                ))
                .bind(now)
                .bind(user_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("token"))?;
            }
            // An activated account counts as seen now: the dormancy sweep
            // does not put it back to sleep at its next tick.
            let seen = (status == AccountStatus::Active).then_some(now);
            sqlx::query(&sql(
                "UPDATE users SET status = ?, last_seen_at = COALESCE(?, last_seen_at) WHERE id = ?",
            ))
            .bind(status.as_str())
            .bind(seen)
            .bind(user_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("user"))?;
            tx.commit().await.map_err(StoreError::Database)?;
            Ok(Ok(StatusChange {
                before,
                after: status,
            }))
        }

        /// Records that the person was seen at `now`, unless already seen
        /// since `not_since`; a dormant account becomes active. Whether it
        /// woke a dormant account.
        pub(crate) async fn mark_seen(
            &self,
            user_id: &str,
            now: i64,
            not_since: i64,
        ) -> Result<bool, StoreError> {
            let woke = sqlx::query(&sql(
                "UPDATE users SET status = 'active', last_seen_at = ? \
                 WHERE id = ? AND status = 'dormant'",
            ))
            .bind(now)
            .bind(user_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("user"))?;
            if woke.rows_affected() > 0 {
                return Ok(true);
            }
            sqlx::query(&sql(
                "UPDATE users SET last_seen_at = ? WHERE id = ? AND status = 'active' \
                 AND (last_seen_at IS NULL OR last_seen_at < ?)",
            ))
            .bind(now)
            .bind(user_id)
            .bind(not_since)
            .execute(&self.pool)
            .await
            .map_err(db_error("user"))?;
            Ok(false)
        }

        /// The ids of accounts that may not act (suspended or deleted):
        /// nothing is sent to them.
        pub(crate) async fn accounts_that_may_not_act(&self) -> Result<Vec<String>, StoreError> {
            sqlx::query_scalar(&sql(
                "SELECT id FROM users WHERE status IN ('suspended', 'deleted')",
            ))
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("user"))
        }

        /// Makes every active person not seen since `unseen_since` (their
        /// creation when never) dormant; the usernames it changed.
        pub(crate) async fn mark_accounts_dormant(
            &self,
            unseen_since: i64,
        ) -> Result<Vec<String>, StoreError> {
            sqlx::query_scalar(&sql(
                "UPDATE users SET status = 'dormant' WHERE status = 'active' AND system = FALSE \
                 AND COALESCE(last_seen_at, created_at) < ? RETURNING username",
            ))
            .bind(unseen_since)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("user"))
        }
    };
}

pub(crate) use account_queries;
