//! Groups and template access lists: groups and their members (the
//! built-in `Everyone` has no member rows: every person is in it), the group
//! sync of single sign-on (a person's memberships of `oidc` groups set in
//! one transaction), and each template's list of users and groups with a
//! [`TemplateRole`]. What a role allows is `abode-authz`'s; the store reads
//! which role a person holds on a template, and filters the template page
//! by it, in the query.

/// The id of the built-in `Everyone` group (written by migration 0025).
pub const EVERYONE_GROUP_ID: &str = "everyone";
/// The name of the built-in group every person is in.
pub const EVERYONE_GROUP: &str = "Everyone";

/// Who keeps a group's membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupSource {
    /// People, with `abode groups members`.
    Manual,
    /// Single sign-on's group sync, at each sign-in.
    Oidc,
}

/// A group source none of [`GroupSource`] spells.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown group source `{}` (one of: manual, oidc)", .0.escape_debug())]
pub struct UnknownGroupSource(pub String);

crate::named!(GroupSource, UnknownGroupSource, {
    Manual => "manual",
    Oidc => "oidc",
});

/// What an entry of a template's access list grants; `Admin` includes
/// `Use` (the order is the order of what they allow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TemplateRole {
    /// See the template and create workspaces from it.
    Use,
    /// Also push and activate its versions and edit its access list.
    Admin,
}

/// A template role none of [`TemplateRole`] spells.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown template role `{}` (one of: use, admin)", .0.escape_debug())]
pub struct UnknownTemplateRole(pub String);

crate::named!(TemplateRole, UnknownTemplateRole, {
    Use => "use",
    Admin => "admin",
});

from_row! {
    /// A group with its member count. Times are Unix ms.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Group {
        pub id: String,
        pub name: String,
        pub display_name: String,
        pub source: GroupSource,
        /// For the quotas that follow; 0: none.
        pub quota_allowance: i64,
        pub created_at: i64,
        /// Members (for `Everyone`: every person).
        pub members: i64,
    }
}

impl Group {
    /// Whether this is the built-in `Everyone`.
    pub fn is_everyone(&self) -> bool {
        self.id == EVERYONE_GROUP_ID
    }
}

/// A new group, or a group's new settings.
#[derive(Debug, Clone)]
pub struct NewGroup {
    pub name: String,
    pub display_name: String,
    pub source: GroupSource,
    pub quota_allowance: i64,
}

from_row! {
    /// A member of a group.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GroupMember {
        pub user_id: String,
        pub username: String,
        pub email: String,
        /// A system actor's account (`prebuilds`).
        pub system: bool,
    }
}

/// What a group sync changed: the person's `oidc` groups before and after,
/// and the groups it created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSync {
    pub before: Vec<String>,
    pub after: Vec<String>,
    pub created: Vec<String>,
}

/// Whom an entry of a template's access list names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessSubject {
    /// A user, by id.
    User(String),
    /// A group, by id.
    Group(String),
}

from_row! {
    /// One entry of a template's access list, with the name of whom it names.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TemplateAccessEntry {
        /// `user` or `group`.
        pub kind: String,
        pub name: String,
        pub role: TemplateRole,
    }
}

pub(crate) const GROUP_CURSOR: &str = "groups";
pub(crate) const GROUP_MEMBER_CURSOR: &str = "group-members";

/// The columns of [`Group`], from `groups g`; `Everyone` counts every
/// person whose account is not deleted (system actors are in a group only
/// by a row).
pub(crate) const GROUP_SELECT: &str =
    "SELECT g.id, g.name, g.display_name, g.source, g.quota_allowance, g.created_at, \
     CASE WHEN g.id = 'everyone' THEN (SELECT COUNT(*) FROM users p WHERE p.system = FALSE AND p.status <> 'deleted') \
     ELSE (SELECT COUNT(*) FROM group_members m WHERE m.group_id = g.id) END AS members \
     FROM groups g";

/// The condition that user `?{n}` holds an entry of template `t`'s access
/// list (by name, through a group, or through `Everyone`), optionally of
/// at least `admin`.
pub(crate) fn may_use_clause(n: usize, admin_only: bool) -> String {
    let role = if admin_only {
        "AND a.role = 'admin'"
    } else {
        ""
    };
    format!(
        "EXISTS (SELECT 1 FROM template_access a WHERE a.template_id = t.id {role} AND \
         (a.user_id = ?{n} \
          OR a.group_id IN (SELECT m.group_id FROM group_members m WHERE m.user_id = ?{n}) \
          OR (a.group_id = 'everyone' AND EXISTS \
              (SELECT 1 FROM users p WHERE p.id = ?{n} AND p.system = FALSE AND p.status <> 'deleted'))))"
    )
}

/// The group and access list methods of [`crate::Store`]; expanded inside
/// each backend's `impl`.
macro_rules! group_queries {
    () => {
    pub(crate) async fn create_group(&self, group: &NewGroup) -> Result<Group, StoreError> {
        let id = new_id();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        sqlx::query(&sql(
            "INSERT INTO groups (id, name, display_name, source, quota_allowance, created_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        ))
        .bind(&id)
        .bind(&group.name)
        .bind(&group.display_name)
        .bind(group.source.as_str())
        .bind(group.quota_allowance)
        .bind(self.now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db_error("group name"))?;
        let row = sqlx::query_as(&sql(&format!("{GROUP_SELECT} WHERE g.id = ?")))
            .bind(&id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error("group"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(row)
    }

    pub(crate) async fn group_by_name(&self, name: &str) -> Result<Group, StoreError> {
        sqlx::query_as(&sql(&format!("{GROUP_SELECT} WHERE g.name = ?")))
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("group"))
    }

    pub(crate) async fn list_group_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<Group>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(GROUP_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let rows: Vec<Group> = sqlx::query_as(&sql(&format!(
            "{GROUP_SELECT} WHERE (?1 IS NULL OR g.name > ?1) ORDER BY g.name LIMIT ?2"
        )))
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("group"))?;
        Ok(paged(rows, limit, |group| encode_cursor(GROUP_CURSOR, &[&group.name])))
    }

    pub(crate) async fn update_group(
        &self,
        group_id: &str,
        group: &NewGroup,
    ) -> Result<Group, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let changed = sqlx::query(&sql(
            "UPDATE groups SET name = ?, display_name = ?, source = ?, quota_allowance = ? \
             WHERE id = ? AND id <> 'everyone'",
        ))
        .bind(&group.name)
        .bind(&group.display_name)
        .bind(group.source.as_str())
        .bind(group.quota_allowance)
        .bind(group_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("group name"))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound("group"));
        }
        let row = sqlx::query_as(&sql(&format!("{GROUP_SELECT} WHERE g.id = ?")))
            .bind(group_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error("group"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(row)
    }

    pub(crate) async fn delete_group(&self, group_id: &str) -> Result<(), StoreError> {
        let deleted = sqlx::query(&sql("DELETE FROM groups WHERE id = ? AND id <> 'everyone'"))
            .bind(group_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("group"))?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::NotFound("group"));
        }
        Ok(())
    }

    pub(crate) async fn group_member_page(
        &self,
        group_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<GroupMember>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(GROUP_MEMBER_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let rows: Vec<GroupMember> = sqlx::query_as(&sql(
            "SELECT u.id AS user_id, u.username, u.email, u.system FROM users u \
             WHERE u.status <> 'deleted' AND ((?1 = 'everyone' AND u.system = FALSE) \
                    OR EXISTS (SELECT 1 FROM group_members m \
                               WHERE m.group_id = ?1 AND m.user_id = u.id)) \
             AND (?2 IS NULL OR u.username > ?2) ORDER BY u.username LIMIT ?3",
        ))
        .bind(group_id)
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("group member"))?;
        Ok(paged(rows, limit, |member| {
            encode_cursor(GROUP_MEMBER_CURSOR, &[&member.username])
        }))
    }

    pub(crate) async fn change_group_members(
        &self,
        group_id: &str,
        add: &[String],
        remove: &[String],
    ) -> Result<(), StoreError> {
        if group_id == EVERYONE_GROUP_ID {
            return Err(StoreError::NotFound("group"));
        }
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        for user_id in add {
            sqlx::query(&sql(
                "INSERT INTO group_members (group_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            ))
            .bind(group_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("group member"))?;
        }
        for user_id in remove {
            sqlx::query(&sql("DELETE FROM group_members WHERE group_id = ? AND user_id = ?"))
                .bind(group_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("group member"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn user_group_names(&self, user_id: &str) -> Result<Vec<String>, StoreError> {
        let names: Vec<(String,)> = sqlx::query_as(&sql(
            "SELECT g.name FROM groups g \
             WHERE (g.id = 'everyone' AND EXISTS \
                    (SELECT 1 FROM users p WHERE p.id = ?1 AND p.system = FALSE AND p.status <> 'deleted')) \
             OR EXISTS (SELECT 1 FROM group_members m WHERE m.group_id = g.id AND m.user_id = ?1) \
             ORDER BY g.name",
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("group"))?;
        Ok(names.into_iter().map(|(name,)| name).collect())
    }

    pub(crate) async fn sync_user_groups(
        &self,
        user_id: &str,
        names: &[String],
        auto_create: bool,
    ) -> Result<GroupSync, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let before: Vec<(String,)> = sqlx::query_as(&sql(
            "SELECT g.name FROM groups g JOIN group_members m ON m.group_id = g.id \
             WHERE m.user_id = ? AND g.source = 'oidc' ORDER BY g.name",
        ))
        .bind(user_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("group"))?;
        let mut target: Vec<(String, String)> = Vec::new();
        let mut created = Vec::new();
        for name in names {
            if target.iter().any(|(_, known)| known == name) {
                continue;
            }
            let found: Option<(String, GroupSource)> =
                sqlx::query_as(&sql("SELECT id, source FROM groups WHERE name = ?"))
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error("group"))?;
            match found {
                Some((id, GroupSource::Oidc)) => target.push((id, name.clone())),
                // A group people keep (Everyone included) is not sync's.
                Some((_, GroupSource::Manual)) => {}
                None if auto_create => {
                    let id = new_id();
                    sqlx::query(&sql(
                        "INSERT INTO groups (id, name, display_name, source, quota_allowance, \
                         created_at) VALUES (?, ?, '', 'oidc', 0, ?)",
                    ))
                    .bind(&id)
                    .bind(name)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error("group name"))?;
                    created.push(name.clone());
                    target.push((id, name.clone()));
                }
                None => {}
            }
        }
        sqlx::query(&sql(
            "DELETE FROM group_members WHERE user_id = ? \
             AND group_id IN (SELECT id FROM groups WHERE source = 'oidc')",
        ))
        .bind(user_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("group member"))?;
        for (group_id, _) in &target {
            sqlx::query(&sql("INSERT INTO group_members (group_id, user_id) VALUES (?, ?)"))
                .bind(group_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("group member"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        let mut after: Vec<String> = target.into_iter().map(|(_, name)| name).collect();
        after.sort();
        Ok(GroupSync {
            before: before.into_iter().map(|(name,)| name).collect(),
            after,
            created,
        })
    }

    // ---- template access lists ----

    pub(crate) async fn template_access(
        &self,
        template_id: &str,
    ) -> Result<Vec<TemplateAccessEntry>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT 'group' AS kind, g.name AS name, a.role FROM template_access a \
             JOIN groups g ON g.id = a.group_id WHERE a.template_id = ?1 \
             UNION ALL \
             SELECT 'user' AS kind, u.username AS name, a.role FROM template_access a \
             JOIN users u ON u.id = a.user_id WHERE a.template_id = ?1 \
             ORDER BY kind, name",
        ))
        .bind(template_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template access"))
    }

    pub(crate) async fn set_template_access(
        &self,
        template_id: &str,
        subject: &AccessSubject,
        role: Option<TemplateRole>,
    ) -> Result<Option<TemplateRole>, StoreError> {
        let (column, id) = match subject {
            AccessSubject::User(id) => ("user_id", id),
            AccessSubject::Group(id) => ("group_id", id),
        };
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let before: Option<(TemplateRole,)> = sqlx::query_as(&sql(&format!(
            "SELECT role FROM template_access WHERE template_id = ? AND {column} = ?"
        )))
        .bind(template_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("template access"))?;
        sqlx::query(&sql(&format!(
            "DELETE FROM template_access WHERE template_id = ? AND {column} = ?"
        )))
        .bind(template_id)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("template access"))?;
        if let Some(role) = role {
            sqlx::query(&sql(&format!(
                "INSERT INTO template_access (template_id, {column}, role) VALUES (?, ?, ?)"
            )))
            .bind(template_id)
            .bind(id)
            .bind(role.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db_error("template access"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(before.map(|(role,)| role))
    }

    pub(crate) async fn group_template_roles(
        &self,
        group_id: &str,
    ) -> Result<Vec<(String, String, TemplateRole)>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT t.id, t.name, a.role FROM template_access a \
             JOIN templates t ON t.id = a.template_id WHERE a.group_id = ?1 \
             ORDER BY t.name",
        ))
        .bind(group_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template access"))
    }

    pub(crate) async fn template_role_of(
        &self,
        template_id: &str,
        user_id: &str,
    ) -> Result<Option<TemplateRole>, StoreError> {
        let roles: Vec<(TemplateRole,)> = sqlx::query_as(&sql(
            "SELECT a.role FROM template_access a WHERE a.template_id = ?1 AND \
             (a.user_id = ?2 \
              OR a.group_id IN (SELECT m.group_id FROM group_members m WHERE m.user_id = ?2) \
              OR (a.group_id = 'everyone' AND EXISTS \
                  (SELECT 1 FROM users p WHERE p.id = ?2 AND p.system = FALSE AND p.status <> 'deleted')))",
        ))
        .bind(template_id)
        .bind(user_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template access"))?;
        Ok(roles.into_iter().map(|(role,)| role).max())
    }
    };
}

pub(crate) use group_queries;
