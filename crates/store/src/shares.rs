//! Workspace sharing (issue 49): each workspace's list of users and groups
//! with a [`ShareRole`]. What a role allows is `abode-authz`'s; the store
//! reads which role a person holds on a workspace (by name or through a
//! group, `Everyone` included), and the workspace page lists the workspaces
//! shared with a person in its one query (`workspaces.rs`).

use crate::groups::AccessSubject;

/// What an entry of a workspace's share list grants; `Admin` includes
/// `Use` (the order is the order of what they allow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShareRole {
    /// Connect: SSH, port forwards, the terminal, `owner` apps.
    Use,
    /// Also start, stop, restart and update the workspace.
    Admin,
}

/// A share role none of [`ShareRole`] spells.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown share role `{}` (one of: use, admin)", .0.escape_debug())]
pub struct UnknownShareRole(pub String);

crate::named!(ShareRole, UnknownShareRole, {
    Use => "use",
    Admin => "admin",
});

from_row! {
    /// One entry of a workspace's share list, with the name of whom it names.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ShareEntry {
        /// `user` or `group`.
        pub kind: String,
        pub name: String,
        pub role: ShareRole,
        pub created_at: i64,
    }
}

/// Whom a share names: the same as a template access list's entry.
pub type ShareSubject = AccessSubject;

/// The share queries of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! share_queries {
    () => {
    pub(crate) async fn workspace_shares(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<ShareEntry>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT 'group' AS kind, g.name AS name, s.role, s.created_at FROM workspace_shares s \
             JOIN groups g ON g.id = s.group_id WHERE s.workspace_id = ?1 \
             UNION ALL \
             SELECT 'user' AS kind, u.username AS name, s.role, s.created_at FROM workspace_shares s \
             JOIN users u ON u.id = s.user_id WHERE s.workspace_id = ?1 \
             ORDER BY kind, name",
        ))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("workspace share"))
    }

    pub(crate) async fn set_workspace_share(
        &self,
        workspace_id: &str,
        subject: &AccessSubject,
        role: Option<ShareRole>,
    ) -> Result<Option<ShareRole>, StoreError> {
        let (column, id) = match subject {
            AccessSubject::User(id) => ("user_id", id),
            AccessSubject::Group(id) => ("group_id", id),
        };
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let before: Option<(ShareRole,)> = sqlx::query_as(&sql(&format!(
            "SELECT role FROM workspace_shares WHERE workspace_id = ? AND {column} = ?"
        )))
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("workspace share"))?;
        sqlx::query(&sql(&format!(
            "DELETE FROM workspace_shares WHERE workspace_id = ? AND {column} = ?"
        )))
        .bind(workspace_id)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("workspace share"))?;
        if let Some(role) = role {
            sqlx::query(&sql(&format!(
                "INSERT INTO workspace_shares (workspace_id, {column}, role, created_at) \
                 VALUES (?, ?, ?, ?)"
            )))
            .bind(workspace_id)
            .bind(id)
            .bind(role.as_str())
            .bind(self.now_ms())
            .execute(&mut *tx)
            .await
            .map_err(db_error("workspace share"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(before.map(|(role,)| role))
    }

    pub(crate) async fn share_role_of(
        &self,
        workspace_id: &str,
        user_id: &str,
    ) -> Result<Option<ShareRole>, StoreError> {
        let roles: Vec<(ShareRole,)> = sqlx::query_as(&sql(
            "SELECT s.role FROM workspace_shares s WHERE s.workspace_id = ?1 AND \
             (s.user_id = ?2 \
              OR s.group_id IN (SELECT m.group_id FROM group_members m WHERE m.user_id = ?2) \
              OR (s.group_id = 'everyone' AND EXISTS \
                  (SELECT 1 FROM users p WHERE p.id = ?2 AND p.system = FALSE AND p.status <> 'deleted')))",
        ))
        .bind(workspace_id)
        .bind(user_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("workspace share"))?;
        Ok(roles.into_iter().map(|(role,)| role).max())
    }

    pub(crate) async fn template_allows_sharing(
        &self,
        template_id: &str,
    ) -> Result<bool, StoreError> {
        let row: (bool,) = sqlx::query_as(&sql("SELECT allow_sharing FROM templates WHERE id = ?"))
            .bind(template_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template"))?;
        Ok(row.0)
    }
    };
}

pub(crate) use share_queries;
