//! The fence of each workspace's Terraform state: which build's run may
//! write it, and which Terraform lock it holds under that build.
//!
//! A lease says who *should* run a build; this row says whose Terraform may
//! touch the state. It is taken when a run starts (with a secret that only
//! that run's Terraform knows, kept as its SHA-256), released when the run
//! reports that its Terraform ended, dropped when a build whose plan was
//! never judged goes back to the queue, marked lost (and kept) when a build
//! is failed because its holder stopped renewing its lease, and removed by
//! a person's unlock. Every state write is checked against it in the
//! statement's own transaction, so a write that passed the check cannot
//! land after an unlock.

from_row! {
    /// A workspace's state lock as the control plane sees it. Times are Unix ms.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct StateLock {
        pub workspace_id: String,
        pub build_id: String,
        /// The build's number, joined in.
        pub build_number: i64,
        /// The lease holder whose run took it (a server id, or
        /// `provisioner:KEY_ID/KEY/ID`).
        pub holder: String,
        /// SHA-256 of the run's secret, hex.
        pub secret_hash: String,
        /// The ID of the Terraform lock held under it, while a Terraform
        /// command of the run holds one.
        pub terraform_lock_id: Option<String>,
        /// Terraform's lock information (JSON) as it sent it.
        pub terraform_lock_info: Option<String>,
        pub taken_at: i64,
        /// When its holder was found gone (its build failed by another server);
        /// `None` while the build is its holder's.
        pub lost_at: Option<i64>,
    }
}

impl StateLock {
    /// The lock as a list shows it, when its holder was lost.
    pub fn lost(&self) -> Option<crate::LostLock> {
        Some(crate::LostLock {
            build_number: self.build_number,
            holder: self.holder.clone(),
            taken_at: self.taken_at,
            lost_at: self.lost_at?,
        })
    }
}

/// The lock a state is written under: the run's (the SHA-256 of its
/// secret) and, when Terraform names one, its Terraform lock.
#[derive(Debug, Clone, Copy)]
pub struct StateFence<'a> {
    pub secret_hash: &'a str,
    pub terraform_lock_id: Option<&'a str>,
}

/// What a fenced state write came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedWrite {
    Written,
    /// The run does not hold the workspace's lock (or not the Terraform
    /// lock it named): nothing written.
    Fenced,
    /// The stored state is not the `previous` the caller compared with.
    Raced,
}

pub(crate) const STATE_LOCK_SELECT: &str =
    "SELECT l.workspace_id, l.build_id, b.number AS build_number, l.holder, l.secret_hash, \
     l.terraform_lock_id, l.terraform_lock_info, l.taken_at, l.lost_at \
     FROM state_locks l JOIN builds b ON b.id = l.build_id";

/// The state lock methods of [`crate::Store`]; expanded inside each
/// backend's `impl` with the backend's row lock (`FOR UPDATE` on
/// PostgreSQL; SQLite's write transactions are serial).
macro_rules! state_lock_queries {
    ($for_update:expr) => {
        pub(crate) async fn take_state_lock(
            &self,
            workspace_id: &str,
            build_id: &str,
            holder: &str,
            secret_hash: &str,
        ) -> Result<bool, StoreError> {
            let taken = sqlx::query(&sql(
                "INSERT INTO state_locks (workspace_id, build_id, holder, secret_hash, taken_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace_id) DO NOTHING",
            ))
            .bind(workspace_id)
            .bind(build_id)
            .bind(holder)
            .bind(secret_hash)
            .bind(self.now_ms())
            .execute(&self.pool)
            .await
            .map_err(db_error("state lock"))?;
            Ok(taken.rows_affected() > 0)
        }

        pub(crate) async fn state_lock_of_workspace(
            &self,
            workspace_id: &str,
        ) -> Result<Option<StateLock>, StoreError> {
            sqlx::query_as(&sql(&format!(
                "{STATE_LOCK_SELECT} WHERE l.workspace_id = ?"
            )))
            .bind(workspace_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("state lock"))
        }

        pub(crate) async fn state_lock_of_build(
            &self,
            build_id: &str,
        ) -> Result<Option<StateLock>, StoreError> {
            sqlx::query_as(&sql(&format!("{STATE_LOCK_SELECT} WHERE l.build_id = ?")))
                .bind(build_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error("state lock"))
        }

        pub(crate) async fn set_terraform_lock(
            &self,
            build_id: &str,
            secret_hash: &str,
            lock_id: &str,
            info: &str,
        ) -> Result<bool, StoreError> {
            // A lost holder's lock lets the Terraform that holds it finish and
            // write, but no new Terraform (an apply about to start when its
            // holder froze) takes it.
            let set = sqlx::query(&sql(
                "UPDATE state_locks SET terraform_lock_id = ?, terraform_lock_info = ? \
             WHERE build_id = ? AND secret_hash = ? AND lost_at IS NULL \
             AND (terraform_lock_id IS NULL OR terraform_lock_id = ?)",
            ))
            .bind(lock_id)
            .bind(info)
            .bind(build_id)
            .bind(secret_hash)
            .bind(lock_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("state lock"))?;
            Ok(set.rows_affected() > 0)
        }

        pub(crate) async fn clear_terraform_lock(
            &self,
            build_id: &str,
            secret_hash: &str,
            lock_id: &str,
        ) -> Result<bool, StoreError> {
            let cleared = sqlx::query(&sql(
                "UPDATE state_locks SET terraform_lock_id = NULL, terraform_lock_info = NULL \
             WHERE build_id = ? AND secret_hash = ? AND terraform_lock_id = ?",
            ))
            .bind(build_id)
            .bind(secret_hash)
            .bind(lock_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("state lock"))?;
            Ok(cleared.rows_affected() > 0)
        }

        pub(crate) async fn release_state_lock(
            &self,
            build_id: &str,
            secret_hash: &str,
        ) -> Result<bool, StoreError> {
            self.delete_state_lock("build_id", build_id, "secret_hash", secret_hash)
                .await
        }

        pub(crate) async fn state_locks_of_holder(
            &self,
            holder: &str,
        ) -> Result<Vec<StateLock>, StoreError> {
            // A page at a time: the keeper takes the rest at its next round.
            sqlx::query_as(&sql(&format!(
                "{STATE_LOCK_SELECT} WHERE l.holder = ? ORDER BY l.taken_at LIMIT {}",
                crate::MAX_PAGE_SIZE
            )))
            .bind(holder)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("state lock"))
        }

        pub(crate) async fn release_state_lock_of_holder(
            &self,
            build_id: &str,
            holder: &str,
        ) -> Result<bool, StoreError> {
            self.delete_state_lock("build_id", build_id, "holder", holder)
                .await
        }

        pub(crate) async fn force_release_state_lock(
            &self,
            workspace_id: &str,
            build_id: &str,
        ) -> Result<bool, StoreError> {
            self.delete_state_lock("workspace_id", workspace_id, "build_id", build_id)
                .await
        }

        /// Deletes the lock row whose two columns (names from this file, never
        /// input) have these values; whether there was one.
        async fn delete_state_lock(
            &self,
            first: &str,
            first_value: &str,
            second: &str,
            second_value: &str,
        ) -> Result<bool, StoreError> {
            let released = sqlx::query(&sql(&format!(
                "DELETE FROM state_locks WHERE {first} = ? AND {second} = ?"
            )))
            .bind(first_value)
            .bind(second_value)
            .execute(&self.pool)
            .await
            .map_err(db_error("state lock"))?;
            Ok(released.rows_affected() > 0)
        }

        pub(crate) async fn put_state_fenced(
            &self,
            workspace_id: &str,
            build_id: &str,
            fence: &StateFence<'_>,
            state: &[u8],
            previous: Option<&[u8]>,
            placement: Placement,
        ) -> Result<FencedWrite, StoreError> {
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            // The lock row is held until the write commits: an unlock waits
            // for it, and a write after the unlock finds no row.
            let holds: Option<Option<String>> = sqlx::query_scalar(&sql(&format!(
                "SELECT terraform_lock_id FROM state_locks \
             WHERE workspace_id = ? AND build_id = ? AND secret_hash = ?{}",
                $for_update
            )))
            .bind(workspace_id)
            .bind(build_id)
            .bind(fence.secret_hash)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error("state lock"))?;
            let fenced = match (holds, fence.terraform_lock_id) {
                (None, _) => true,
                (Some(held), Some(named)) => held.as_deref() != Some(named),
                (Some(_), None) => false,
            };
            if fenced {
                tx.rollback().await.map_err(StoreError::Database)?;
                return Ok(FencedWrite::Fenced);
            }
            let written = self
                .write_state_on(&mut tx, workspace_id, build_id, state, previous, placement)
                .await?;
            if !written {
                tx.rollback().await.map_err(StoreError::Database)?;
                return Ok(FencedWrite::Raced);
            }
            tx.commit().await.map_err(StoreError::Database)?;
            Ok(FencedWrite::Written)
        }
    };
}

pub(crate) use state_lock_queries;
