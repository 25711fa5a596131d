//! The uid each workspace's processes run as (`--workspace-uids`): given
//! once from the operator's range, kept with the workspace, never given to
//! another (a retained volume may still be owned by it).

/// The workspace uid methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! workspace_uid_queries {
    () => {
        /// The uid of `workspace_id`, given now (the lowest never given in
        /// `first..=last`) when it has none; `Conflict("workspace uids")` when
        /// the range is used up.
        pub(crate) async fn workspace_uid(
            &self,
            workspace_id: &str,
            first: u32,
            last: u32,
        ) -> Result<u32, StoreError> {
            let read = |uid: i64| {
                u32::try_from(uid).map_err(|_| {
                    StoreError::Corrupt(crate::Corrupt {
                        what: "uid",
                        of: format!("workspace {workspace_id}"),
                        reason: format!("{uid} is not a uid"),
                    })
                })
            };
            // Two servers may give at once: the loser of the primary key tries the next.
            for _ in 0..8 {
                let given: Option<i64> = sqlx::query_scalar(&sql(
                    "SELECT uid FROM workspace_uids WHERE workspace_id = ?",
                ))
                .bind(workspace_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error("workspace uid"))?;
                if let Some(uid) = given {
                    return read(uid);
                }
                let highest: Option<i64> = sqlx::query_scalar(&sql(
                    "SELECT MAX(uid) FROM workspace_uids WHERE uid >= ? AND uid <= ?",
                ))
                .bind(i64::from(first))
                .bind(i64::from(last))
                .fetch_one(&self.pool)
                .await
                .map_err(db_error("workspace uid"))?;
                let next = highest.map_or(i64::from(first), |uid| uid + 1);
                if next > i64::from(last) {
                    return Err(StoreError::Conflict("workspace uids"));
                }
                let inserted = sqlx::query(&sql(
                    "INSERT INTO workspace_uids (uid, workspace_id, given_at) VALUES (?, ?, ?) \
                 ON CONFLICT DO NOTHING",
                ))
                .bind(next)
                .bind(workspace_id)
                .bind(self.now_ms())
                .execute(&self.pool)
                .await
                .map_err(db_error("workspace uid"))?;
                if inserted.rows_affected() == 1 {
                    return read(next);
                }
            }
            Err(StoreError::Conflict("workspace uids"))
        }

        /// Every uid given so far, lowest first (to check a range against).
        pub(crate) async fn given_workspace_uids(&self) -> Result<Vec<u32>, StoreError> {
            let uids: Vec<i64> =
                sqlx::query_scalar(&sql("SELECT uid FROM workspace_uids ORDER BY uid"))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error("workspace uid"))?;
            Ok(uids
                .into_iter()
                .filter_map(|uid| u32::try_from(uid).ok())
                .collect())
        }
    };
}

pub(crate) use workspace_uid_queries;
