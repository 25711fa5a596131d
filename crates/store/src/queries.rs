//! The queries every SQL backend shares. The text is written once, in a
//! portable dialect (`?` placeholders, `TRUE`/`FALSE`, `RETURNING`,
//! `ON CONFLICT`), and each backend's `sql()` adapts it (PostgreSQL numbers
//! its placeholders). Backend-specific statements (opening, migrations, the
//! job claim) stay in the backend's own module.

use crate::pages::*;
use crate::records::*;

pub(crate) const USER_COLUMNS: &str = "id, username, email, role, password_hash, created_at";

pub(crate) const TEMPLATE_SELECT: &str =
    "SELECT t.id, t.name, t.active_version_id, v.number AS active_version, \
     t.created_at, t.updated_at \
     FROM templates t LEFT JOIN template_versions v ON v.id = t.active_version_id";

pub(crate) const VERSION_SELECT: &str =
    "SELECT v.id, v.template_id, t.name AS template_name, v.number, \
     COALESCE(t.active_version_id = v.id, FALSE) AS active, v.message, u.username AS created_by, \
     v.archive_sha256, v.validation_ok, v.validation_message, v.created_at \
     FROM template_versions v \
     JOIN templates t ON t.id = v.template_id \
     JOIN users u ON u.id = v.created_by";

pub(crate) const WORKSPACE_SELECT: &str =
    "SELECT w.id, w.name, w.owner_id, u.username AS owner_name, \
     u.email AS owner_email, w.template_id, t.name AS template_name, w.template_version_id, \
     v.number AS template_version, w.parameters, w.deleted, w.created_at, w.updated_at \
     FROM workspaces w \
     JOIN users u ON u.id = w.owner_id \
     JOIN templates t ON t.id = w.template_id \
     JOIN template_versions v ON v.id = w.template_version_id";

pub(crate) const BUILD_SELECT: &str = "SELECT b.id, b.workspace_id, w.name AS workspace_name, \
     o.username AS owner_name, b.number, b.transition, b.status, b.template_version_id, \
     v.number AS template_version, b.initiator_id, i.username AS initiator_name, b.reason, \
     b.error, b.guard_report, b.created_at, b.started_at, b.finished_at, b.plan_digest, \
     b.expires_at, c.username AS confirmed_by, b.confirmed_at \
     FROM builds b \
     JOIN workspaces w ON w.id = b.workspace_id \
     JOIN users o ON o.id = w.owner_id \
     JOIN template_versions v ON v.id = b.template_version_id \
     JOIN users i ON i.id = b.initiator_id \
     LEFT JOIN users c ON c.id = b.confirmed_by";

pub(crate) const AGENT_COLUMNS: &str =
    "id, workspace_id, build_id, name, lifecycle, connected_at, last_heartbeat_at, created_at, \
     startup_script, dir, env, exit_status";

/// What an agent reported, carried over when a start build keeps the agent.
#[derive(sqlx::FromRow)]
pub(crate) struct AgentConnection {
    pub(crate) token_hash: String,
    pub(crate) lifecycle: Option<String>,
    pub(crate) connected_at: Option<i64>,
    pub(crate) last_heartbeat_at: Option<i64>,
    pub(crate) exit_status: Option<i64>,
}

/// One row of a workspace page: the workspace, its latest build (columns
/// `b_*`), its newest finished build (`s_*`) and one of its agents (`a_*`,
/// absent when it has none); a workspace with several agents spans as many
/// consecutive rows.
#[derive(sqlx::FromRow)]
pub(crate) struct WorkspacePageRow {
    #[sqlx(flatten)]
    pub(crate) workspace: Workspace,
    pub(crate) b_id: String,
    pub(crate) b_number: i64,
    pub(crate) b_transition: Transition,
    pub(crate) b_status: BuildStatus,
    pub(crate) b_template_version_id: String,
    pub(crate) b_template_version: i64,
    pub(crate) b_initiator_id: String,
    pub(crate) b_initiator_name: String,
    pub(crate) b_reason: String,
    pub(crate) b_error: Option<String>,
    pub(crate) b_guard_report: Option<String>,
    pub(crate) b_created_at: i64,
    pub(crate) b_started_at: Option<i64>,
    pub(crate) b_finished_at: Option<i64>,
    pub(crate) b_plan_digest: Option<String>,
    pub(crate) b_expires_at: Option<i64>,
    pub(crate) b_confirmed_by: Option<String>,
    pub(crate) b_confirmed_at: Option<i64>,
    pub(crate) s_status: Option<BuildStatus>,
    pub(crate) s_transition: Option<Transition>,
    pub(crate) s_finished_at: Option<i64>,
    pub(crate) a_id: Option<String>,
    pub(crate) a_build_id: Option<String>,
    pub(crate) a_name: Option<String>,
    pub(crate) a_lifecycle: Option<AgentLifecycle>,
    pub(crate) a_connected_at: Option<i64>,
    pub(crate) a_last_heartbeat_at: Option<i64>,
    pub(crate) a_created_at: Option<i64>,
    pub(crate) a_startup_script: Option<String>,
    pub(crate) a_dir: Option<String>,
    pub(crate) a_env: Option<String>,
    pub(crate) a_exit_status: Option<i64>,
}

/// Folds a page's rows (one per workspace and agent, in page order) into
/// one summary per workspace.
pub(crate) fn workspace_summaries(rows: Vec<WorkspacePageRow>) -> Vec<WorkspaceSummary> {
    let mut summaries: Vec<WorkspaceSummary> = Vec::new();
    for row in rows {
        let agent = match (row.a_id, row.a_build_id, row.a_name, row.a_created_at) {
            (Some(id), Some(build_id), Some(name), Some(created_at)) => Some(Agent {
                id,
                workspace_id: row.workspace.id.clone(),
                build_id,
                name,
                lifecycle: row.a_lifecycle,
                connected_at: row.a_connected_at,
                last_heartbeat_at: row.a_last_heartbeat_at,
                created_at,
                startup_script: row.a_startup_script,
                dir: row.a_dir,
                env: row.a_env.unwrap_or_default(),
                exit_status: row.a_exit_status,
            }),
            _ => None,
        };
        if let Some(last) = summaries.last_mut() {
            if last.workspace.id == row.workspace.id {
                last.agents.extend(agent);
                continue;
            }
        }
        let settled = match (row.s_status, row.s_transition) {
            (Some(status), Some(transition)) => Some(SettledBuild {
                status,
                transition,
                finished_at: row.s_finished_at,
            }),
            _ => None,
        };
        let workspace = row.workspace;
        let latest_build = Build {
            id: row.b_id,
            workspace_id: workspace.id.clone(),
            workspace_name: workspace.name.clone(),
            owner_name: workspace.owner_name.clone(),
            number: row.b_number,
            transition: row.b_transition,
            status: row.b_status,
            template_version_id: row.b_template_version_id,
            template_version: row.b_template_version,
            initiator_id: row.b_initiator_id,
            initiator_name: row.b_initiator_name,
            reason: row.b_reason,
            error: row.b_error,
            guard_report: row.b_guard_report,
            created_at: row.b_created_at,
            started_at: row.b_started_at,
            finished_at: row.b_finished_at,
            plan_digest: row.b_plan_digest,
            expires_at: row.b_expires_at,
            confirmed_by: row.b_confirmed_by,
            confirmed_at: row.b_confirmed_at,
        };
        summaries.push(WorkspaceSummary {
            workspace,
            latest_build,
            settled,
            agents: agent.into_iter().collect(),
        });
    }
    summaries
}

/// A page of workspaces in one statement. First the page's keys, from
/// users and workspaces alone (filters, cursor, limit): SQLite walks users in
/// username order (`CROSS JOIN` fixes its join order; PostgreSQL plans it as
/// an inner join) and each one's workspaces by `workspaces_owner_list`, and
/// stops after `limit` rows; PostgreSQL sorts bare keys. Only then are the
/// page's rows joined with names, their latest build, their newest finished
/// build and their agents, the keys leading (`CROSS JOIN` again: SQLite
/// 3.46 otherwise flattens the CTEs and scans every workspace). (At 10,000 workspaces, joining first and sorting
/// after took 80 ms on SQLite and 100 ms on PostgreSQL.) `?N`: 1 owner id,
/// 2 include deleted, 3 owner name, 4 template name, 5 latest build status,
/// 6 its transition, 7-10 the cursor's key, 11 the limit.
pub(crate) const WORKSPACE_PAGE: &str = "WITH keys AS (\
     SELECT w.id AS key_id FROM users u CROSS JOIN workspaces w \
     WHERE w.owner_id = u.id \
     AND (?1 IS NULL OR w.owner_id = ?1) AND (?2 OR w.deleted = FALSE) \
     AND (?3 IS NULL OR u.username = ?3) \
     AND (?4 IS NULL OR EXISTS (SELECT 1 FROM templates ft \
          WHERE ft.id = w.template_id AND ft.name = ?4)) \
     AND (?5 IS NULL OR EXISTS (SELECT 1 FROM builds fb WHERE fb.workspace_id = w.id \
          AND fb.number = (SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
          AND fb.status = ?5 AND (?6 IS NULL OR fb.transition = ?6))) \
     AND (?7 IS NULL OR u.username > ?7 OR (u.username = ?7 AND (w.name > ?8 \
          OR (w.name = ?8 AND (w.created_at > ?9 OR (w.created_at = ?9 AND w.id > ?10)))))) \
     ORDER BY u.username, w.name, w.created_at, w.id \
     LIMIT ?11), \
     page AS (\
     SELECT w.id, w.name, w.owner_id, u.username AS owner_name, u.email AS owner_email, \
     w.template_id, t.name AS template_name, w.template_version_id, v.number AS template_version, \
     w.parameters, w.deleted, w.created_at, w.updated_at, \
     lb.id AS b_id, lb.number AS b_number, lb.transition AS b_transition, lb.status AS b_status, \
     lb.template_version_id AS b_template_version_id, bv.number AS b_template_version, \
     lb.initiator_id AS b_initiator_id, i.username AS b_initiator_name, lb.reason AS b_reason, \
     lb.error AS b_error, lb.guard_report AS b_guard_report, lb.created_at AS b_created_at, \
     lb.started_at AS b_started_at, lb.finished_at AS b_finished_at, \
     lb.plan_digest AS b_plan_digest, lb.expires_at AS b_expires_at, \
     c.username AS b_confirmed_by, lb.confirmed_at AS b_confirmed_at \
     FROM keys CROSS JOIN workspaces w CROSS JOIN users u CROSS JOIN templates t \
     CROSS JOIN template_versions v CROSS JOIN builds lb CROSS JOIN template_versions bv \
     CROSS JOIN users i \
     LEFT JOIN users c ON c.id = lb.confirmed_by \
     WHERE w.id = keys.key_id AND u.id = w.owner_id AND t.id = w.template_id \
     AND v.id = w.template_version_id AND lb.workspace_id = w.id \
     AND lb.number = (SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
     AND bv.id = lb.template_version_id AND i.id = lb.initiator_id) \
     SELECT page.*, s.status AS s_status, s.transition AS s_transition, \
     s.finished_at AS s_finished_at, a.id AS a_id, a.build_id AS a_build_id, a.name AS a_name, \
     a.lifecycle AS a_lifecycle, a.connected_at AS a_connected_at, \
     a.last_heartbeat_at AS a_last_heartbeat_at, a.created_at AS a_created_at, \
     a.startup_script AS a_startup_script, a.dir AS a_dir, a.env AS a_env, \
     a.exit_status AS a_exit_status \
     FROM page \
     LEFT JOIN builds s ON s.workspace_id = page.id AND s.number = (SELECT MAX(sb.number) \
          FROM builds sb WHERE sb.workspace_id = page.id \
          AND sb.status IN ('succeeded', 'failed', 'canceled')) \
     LEFT JOIN agents a ON a.workspace_id = page.id \
     ORDER BY page.owner_name, page.name, page.created_at, page.id, a.name";

/// The methods of [`crate::Store`] whose SQL is the same on every backend;
/// expanded inside each backend's `impl` with its database type.
macro_rules! shared_queries {
    ($db:ty) => {
    // ---- users and tokens ----

    pub(crate) async fn create_first_user(&self, user: &NewUser) -> Result<User, StoreError> {
        let id = new_id();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // "No user yet" must still hold when the row is written: backends whose
        // writers do not serialise lock the table first.
        if let Some(lock) = FIRST_USER_LOCK {
            sqlx::query(lock)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::Database)?;
        }
        let result = sqlx::query(
            &sql("INSERT INTO users (id, username, email, role, password_hash, created_at) \
             SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM users)"),
        )
        .bind(&id)
        .bind(&user.username)
        .bind(&user.email)
        .bind(&user.role)
        .bind(&user.password_hash)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db_error("first user"))?;
        if result.rows_affected() == 0 {
            return Err(StoreError::Conflict("first user"));
        }
        tx.commit().await.map_err(StoreError::Database)?;
        self.user_by_id(&id).await
    }

    pub(crate) async fn create_user(&self, user: &NewUser) -> Result<User, StoreError> {
        let id = new_id();
        sqlx::query(
            &sql("INSERT INTO users (id, username, email, role, password_hash, created_at) \
             VALUES (?, ?, ?, ?, ?, ?)"),
        )
        .bind(&id)
        .bind(&user.username)
        .bind(&user.email)
        .bind(&user.role)
        .bind(&user.password_hash)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("username"))?;
        self.user_by_id(&id).await
    }

    pub(crate) async fn user_by_name(&self, username: &str) -> Result<User, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE username = ?"
        )))
        .bind(username)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("user"))
    }

    pub(crate) async fn user_by_id(&self, id: &str) -> Result<User, StoreError> {
        sqlx::query_as(&sql(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = ?")))
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("user"))
    }

    pub(crate) async fn create_token(
        &self,
        user_id: &str,
        token_hash: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO api_tokens (id, user_id, token_hash, created_at) VALUES (?, ?, ?, ?)"),
        )
        .bind(new_id())
        .bind(user_id)
        .bind(token_hash)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("token"))?;
        Ok(())
    }

    // ---- templates ----

    pub(crate) async fn template_by_name(&self, name: &str) -> Result<Template, StoreError> {
        sqlx::query_as(&sql(&format!("{TEMPLATE_SELECT} WHERE t.name = ?")))
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template"))
    }

    pub(crate) async fn list_templates(&self) -> Result<Vec<Template>, StoreError> {
        sqlx::query_as(&sql(&format!("{TEMPLATE_SELECT} ORDER BY t.name")))
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("template"))
    }

    pub(crate) async fn create_template_version(
        &self,
        version: &NewTemplateVersion,
    ) -> Result<(Template, TemplateVersion), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // The upsert comes first: it takes the write lock (see the module doc).
        let template_id: String = sqlx::query(
            &sql("INSERT INTO templates (id, name, created_at, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at RETURNING id"),
        )
        .bind(new_id())
        .bind(&version.template_name)
        .bind(now)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error("template"))?
        .try_get("id")
        .map_err(StoreError::Database)?;
        let number: i64 = sqlx::query(
            &sql("SELECT COALESCE(MAX(number), 0) + 1 AS next FROM template_versions WHERE template_id = ?"),
        )
        .bind(&template_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error("template version"))?
        .try_get("next")
        .map_err(StoreError::Database)?;
        let version_id = new_id();
        sqlx::query(
            &sql("INSERT INTO template_versions (id, template_id, number, archive, archive_sha256, \
             message, created_by, validation_ok, validation_message, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        )
        .bind(&version_id)
        .bind(&template_id)
        .bind(number)
        .bind(&version.archive)
        .bind(&version.archive_sha256)
        .bind(&version.message)
        .bind(&version.created_by)
        .bind(version.validation_ok)
        .bind(&version.validation_message)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("template version"))?;
        if version.activate || number == 1 {
            sqlx::query(&sql("UPDATE templates SET active_version_id = ? WHERE id = ?"))
                .bind(&version_id)
                .bind(&template_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("template"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        let template = self.template_by_name(&version.template_name).await?;
        let stored = self.template_version_by_id(&version_id).await?;
        Ok((template, stored))
    }

    pub(crate) async fn list_template_versions(
        &self,
        template_id: &str,
    ) -> Result<Vec<TemplateVersion>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{VERSION_SELECT} WHERE v.template_id = ? ORDER BY v.number"
        )))
        .bind(template_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template version"))
    }

    pub(crate) async fn template_version(
        &self,
        template_id: &str,
        number: i64,
    ) -> Result<TemplateVersion, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{VERSION_SELECT} WHERE v.template_id = ? AND v.number = ?"
        )))
        .bind(template_id)
        .bind(number)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("template version"))
    }

    pub(crate) async fn template_version_by_id(
        &self,
        version_id: &str,
    ) -> Result<TemplateVersion, StoreError> {
        sqlx::query_as(&sql(&format!("{VERSION_SELECT} WHERE v.id = ?")))
            .bind(version_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template version"))
    }

    pub(crate) async fn template_version_archive(
        &self,
        version_id: &str,
    ) -> Result<Vec<u8>, StoreError> {
        sqlx::query(&sql("SELECT archive FROM template_versions WHERE id = ?"))
            .bind(version_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template version"))?
            .try_get("archive")
            .map_err(StoreError::Database)
    }

    pub(crate) async fn activate_template_version(
        &self,
        template_id: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let result = sqlx::query(
            &sql("UPDATE templates SET active_version_id = ?, updated_at = ? WHERE id = ? \
             AND EXISTS (SELECT 1 FROM template_versions WHERE id = ? AND template_id = ?)"),
        )
        .bind(version_id)
        .bind(now_ms())
        .bind(template_id)
        .bind(version_id)
        .bind(template_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("template"))?;
        if result.rows_affected() == 0 {
            return Err(StoreError::NotFound("template version"));
        }
        Ok(())
    }

    // ---- workspaces ----

    pub(crate) async fn create_workspace(
        &self,
        workspace: &NewWorkspace,
        build: &NewBuild,
    ) -> Result<(Workspace, Build), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        sqlx::query(
            &sql("INSERT INTO workspaces (id, owner_id, name, template_id, template_version_id, \
             parameters, deleted, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, FALSE, ?, ?)"),
        )
        .bind(&workspace.id)
        .bind(&workspace.owner_id)
        .bind(&workspace.name)
        .bind(&workspace.template_id)
        .bind(&workspace.template_version_id)
        .bind(&workspace.parameters)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("workspace name"))?;
        Self::insert_build(&mut tx, build, 1, now).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok((
            self.workspace_by_id(&workspace.id).await?,
            self.build_by_id(&build.id).await?,
        ))
    }

    pub(crate) async fn workspace_by_owner_and_name(
        &self,
        owner_id: &str,
        name: &str,
    ) -> Result<Workspace, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{WORKSPACE_SELECT} WHERE w.owner_id = ? AND w.name = ? \
             ORDER BY w.deleted ASC, w.updated_at DESC LIMIT 1"
        )))
        .bind(owner_id)
        .bind(name)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("workspace"))
    }

    pub(crate) async fn workspace_by_id(&self, id: &str) -> Result<Workspace, StoreError> {
        sqlx::query_as(&sql(&format!("{WORKSPACE_SELECT} WHERE w.id = ?")))
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("workspace"))
    }

    pub(crate) async fn list_workspaces(
        &self,
        owner_id: Option<&str>,
        include_deleted: bool,
    ) -> Result<Vec<Workspace>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{WORKSPACE_SELECT} WHERE (? IS NULL OR w.owner_id = ?) AND (? OR w.deleted = FALSE) \
             ORDER BY u.username, w.name, w.created_at"
        )))
        .bind(owner_id)
        .bind(owner_id)
        .bind(include_deleted)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("workspace"))
    }

    pub(crate) async fn mark_workspace_deleted(
        &self,
        workspace_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE workspaces SET deleted = TRUE, updated_at = ? WHERE id = ?"))
            .bind(now_ms())
            .bind(workspace_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
        Ok(())
    }

    // ---- builds ----

    pub(crate) async fn create_build(&self, build: &NewBuild) -> Result<Build, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // Writing first takes the write lock (see the module doc).
        let moved = sqlx::query(
            &sql("UPDATE workspaces SET template_version_id = ?, updated_at = ? WHERE id = ? AND deleted = FALSE"),
        )
        .bind(&build.template_version_id)
        .bind(now)
        .bind(&build.workspace_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("workspace"))?;
        if moved.rows_affected() == 0 {
            return Err(StoreError::NotFound("workspace"));
        }
        let number: i64 = sqlx::query(
            &sql("SELECT COALESCE(MAX(number), 0) + 1 AS next FROM builds WHERE workspace_id = ?"),
        )
        .bind(&build.workspace_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error("build"))?
        .try_get("next")
        .map_err(StoreError::Database)?;
        Self::insert_build(&mut tx, build, number, now).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        self.build_by_id(&build.id).await
    }

    pub(crate) async fn build_by_id(&self, id: &str) -> Result<Build, StoreError> {
        sqlx::query_as(&sql(&format!("{BUILD_SELECT} WHERE b.id = ?")))
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("build"))
    }

    pub(crate) async fn build_by_number(
        &self,
        workspace_id: &str,
        number: i64,
    ) -> Result<Build, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? AND b.number = ?"
        )))
        .bind(workspace_id)
        .bind(number)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn latest_build(&self, workspace_id: &str) -> Result<Build, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? ORDER BY b.number DESC LIMIT 1"
        )))
        .bind(workspace_id)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn latest_succeeded_build(
        &self,
        workspace_id: &str,
    ) -> Result<Option<Build>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? AND b.status = 'succeeded' \
             ORDER BY b.number DESC LIMIT 1"
        )))
        .bind(workspace_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn list_builds(&self, workspace_id: &str) -> Result<Vec<Build>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? ORDER BY b.number DESC"
        )))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn set_build_plan(
        &self,
        build_id: &str,
        plan_json: &str,
        guard_report: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE builds SET plan_json = ?, guard_report = ? WHERE id = ?"))
            .bind(plan_json)
            .bind(guard_report)
            .bind(build_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("build"))?;
        Ok(())
    }

    pub(crate) async fn prune_plan_json(
        &self,
        workspace_id: &str,
        keep: i64,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(&sql(
            "UPDATE builds SET plan_json = NULL \
             WHERE workspace_id = ? AND plan_json IS NOT NULL \
             AND status IN ('succeeded', 'failed', 'canceled') \
             AND number <= (SELECT number FROM builds WHERE workspace_id = ? \
                            ORDER BY number DESC LIMIT 1 OFFSET ?) \
             RETURNING id",
        ))
        .bind(workspace_id)
        .bind(workspace_id)
        .bind(keep)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))?;
        rows.iter()
            .map(|row| row.try_get("id").map_err(StoreError::Database))
            .collect()
    }

    pub(crate) async fn build_plan_json(
        &self,
        build_id: &str,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query(&sql("SELECT plan_json FROM builds WHERE id = ?"))
            .bind(build_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("build"))?
            .try_get("plan_json")
            .map_err(StoreError::Database)
    }

    pub(crate) async fn finish_build(
        &self,
        build_id: &str,
        status: BuildStatus,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = ?, error = ?, finished_at = ? \
             WHERE id = ? AND status IN ('pending', 'running')"),
        )
        .bind(status.as_str())
        .bind(error)
        .bind(now)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        sqlx::query(&sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ? AND status != 'done'"))
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(result.rows_affected() > 0)
    }

    pub(crate) async fn cancel_pending_build(
        &self,
        build_id: &str,
        error: &str,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'canceled', error = ?, finished_at = ? \
             WHERE id = ? AND status IN ('pending', 'awaiting_confirmation')"),
        )
        .bind(error)
        .bind(now)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() > 0 {
            sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
                .bind(build_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("saved plan"))?;
            sqlx::query(
                &sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ? AND status = 'queued'"),
            )
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(result.rows_affected() > 0)
    }

    pub(crate) async fn running_builds(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(&sql("SELECT id FROM builds WHERE status = 'running' ORDER BY created_at"))
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("build"))?;
        rows.iter()
            .map(|row| row.try_get("id").map_err(StoreError::Database))
            .collect()
    }

    // ---- the job queue ----

    pub(crate) async fn request_cancel(&self, build_id: &str) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE jobs SET cancel_requested = TRUE WHERE build_id = ?"))
            .bind(build_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("job"))?;
        Ok(())
    }

    pub(crate) async fn cancel_requested(&self, build_id: &str) -> Result<bool, StoreError> {
        sqlx::query(&sql("SELECT cancel_requested FROM jobs WHERE build_id = ?"))
            .bind(build_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("job"))?
            .try_get("cancel_requested")
            .map_err(StoreError::Database)
    }

    // ---- build logs ----

    pub(crate) async fn append_log(
        &self,
        build_id: &str,
        line: &NewLogLine,
    ) -> Result<i64, StoreError> {
        // Two writers of one build's log (the provisioner and a cancel) can
        // pick the same next `seq` where writes are not serialised
        // (PostgreSQL): the loser simply takes the next one.
        let mut attempts = 0;
        loop {
            let inserted = sqlx::query(
                &sql("INSERT INTO build_logs (build_id, seq, time, stage, level, text) VALUES \
                 (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM build_logs WHERE build_id = ?1), ?2, ?3, ?4, ?5) \
                 RETURNING seq"),
            )
            .bind(build_id)
            .bind(now_ms())
            .bind(&line.stage)
            .bind(&line.level)
            .bind(&line.text)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("build log"));
            match inserted {
                Err(StoreError::Conflict(_)) if attempts < 20 => attempts += 1,
                other => return other?.try_get("seq").map_err(StoreError::Database),
            }
        }
    }

    pub(crate) async fn logs_after(
        &self,
        build_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<LogLine>, StoreError> {
        sqlx::query_as(
            &sql("SELECT seq, time, stage, level, text FROM build_logs \
             WHERE build_id = ? AND seq > ? ORDER BY seq LIMIT ?"),
        )
        .bind(build_id)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build log"))
    }

    // ---- workspace state ----

    pub(crate) async fn put_state(
        &self,
        workspace_id: &str,
        build_id: &str,
        state: &[u8],
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO workspace_states (workspace_id, build_id, state, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (workspace_id) DO UPDATE SET build_id = excluded.build_id, \
             state = excluded.state, updated_at = excluded.updated_at"),
        )
        .bind(workspace_id)
        .bind(build_id)
        .bind(state)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("workspace state"))?;
        Ok(())
    }

    pub(crate) async fn state(&self, workspace_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(&sql("SELECT state FROM workspace_states WHERE workspace_id = ?"))
            .bind(workspace_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("workspace state"))?;
        row.map(|row| row.try_get("state").map_err(StoreError::Database))
            .transpose()
    }

    // ---- agents ----

    pub(crate) async fn replace_agents(
        &self,
        workspace_id: &str,
        build_id: &str,
        agents: &[NewAgent],
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // An agent the build kept (same token: updated in place, its process
        // still running) keeps what it reported; it does not start again.
        let kept: Vec<AgentConnection> = sqlx::query_as(&sql(
            "SELECT token_hash, lifecycle, connected_at, last_heartbeat_at, exit_status \
             FROM agents WHERE workspace_id = ?",
        ))
        .bind(workspace_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("agent"))?;
        sqlx::query(&sql("DELETE FROM agents WHERE workspace_id = ?"))
            .bind(workspace_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("agent"))?;
        for agent in agents {
            let before = kept.iter().find(|old| old.token_hash == agent.token_hash);
            sqlx::query(
                &sql("INSERT INTO agents (id, workspace_id, build_id, name, token_hash, created_at, \
                 startup_script, dir, env, lifecycle, connected_at, last_heartbeat_at, exit_status) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            )
            .bind(new_id())
            .bind(workspace_id)
            .bind(build_id)
            .bind(&agent.name)
            .bind(&agent.token_hash)
            .bind(now)
            .bind(&agent.startup_script)
            .bind(&agent.dir)
            .bind(&agent.env)
            .bind(before.and_then(|old| old.lifecycle.clone()))
            .bind(before.and_then(|old| old.connected_at))
            .bind(before.and_then(|old| old.last_heartbeat_at))
            .bind(before.and_then(|old| old.exit_status))
            .execute(&mut *tx)
            .await
            .map_err(db_error("agent token"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn agents_of_workspace(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Agent>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = ? ORDER BY name"
        )))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("agent"))
    }

    pub(crate) async fn agent_by_token_hash(&self, token_hash: &str) -> Result<Agent, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE token_hash = ?"
        )))
        .bind(token_hash)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("agent"))
    }

    pub(crate) async fn agent_heartbeat(
        &self,
        agent_id: &str,
        lifecycle: Option<AgentLifecycle>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            &sql("UPDATE agents SET lifecycle = COALESCE(?, lifecycle), \
             connected_at = COALESCE(connected_at, ?), last_heartbeat_at = ? WHERE id = ?"),
        )
        .bind(lifecycle.map(AgentLifecycle::as_str))
        .bind(now)
        .bind(now)
        .bind(agent_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("agent"))?;
        Ok(())
    }

    pub(crate) async fn agent_lifecycle(
        &self,
        agent_id: &str,
        lifecycle: AgentLifecycle,
        exit_status: Option<i64>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            &sql("UPDATE agents SET lifecycle = ?, exit_status = ?, \
             connected_at = COALESCE(connected_at, ?), last_heartbeat_at = ? WHERE id = ?"),
        )
        .bind(lifecycle.as_str())
        .bind(exit_status)
        .bind(now)
        .bind(now)
        .bind(agent_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("agent"))?;
        Ok(())
    }

    // ---- audit ----

    pub(crate) async fn record_audit(&self, event: &NewAuditEvent) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        Self::insert_audit(&mut tx, event).await?;
        tx.commit().await.map_err(StoreError::Database)
    }

    pub(crate) async fn list_audit(
        &self,
        filter: &AuditFilter,
    ) -> Result<Page<AuditEvent>, StoreError> {
        let (prefix, actor) = match &filter.visible_to {
            Some((prefix, actor)) => (Some(format!("{prefix}%")), Some(actor.clone())),
            None => (None, None),
        };
        let before = filter
            .after
            .as_deref()
            .map(|cursor| decode_cursor(AUDIT_CURSOR, cursor, 1).and_then(|key| parse_i64(&key[0])))
            .transpose()?;
        let rows: Vec<AuditEvent> = sqlx::query_as(
            &sql("SELECT id, time, actor_id, actor_name, action, target_type, target, outcome, \
             request_id, details FROM audit_events \
             WHERE (?1 IS NULL OR (target_type = 'workspace' AND target = ?1)) \
             AND (?2 IS NULL OR (target_type = 'workspace' AND target LIKE ?2) \
                  OR (target_type != 'workspace' AND actor_id = ?3)) \
             AND (?4 IS NULL OR target = ?4) AND (?5 IS NULL OR actor_name = ?5) \
             AND (?6 IS NULL OR action = ?6) AND (?7 IS NULL OR time >= ?7) \
             AND (?8 IS NULL OR time < ?8) AND (?9 IS NULL OR id < ?9) \
             ORDER BY id DESC LIMIT ?10"),
        )
        .bind(&filter.target)
        .bind(prefix)
        .bind(actor)
        .bind(&filter.any_target)
        .bind(&filter.actor)
        .bind(&filter.action)
        .bind(filter.since)
        .bind(filter.until)
        .bind(before)
        .bind(filter.limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("audit event"))?;
        Ok(paged(rows, filter.limit, |event| {
            encode_cursor(AUDIT_CURSOR, &[&event.id.to_string()])
        }))
    }

    // ---- lists: one query per page (pages.rs) ----

    pub(crate) async fn list_workspace_page(
        &self,
        filter: &WorkspaceFilter,
    ) -> Result<Page<WorkspaceSummary>, StoreError> {
        let after = filter
            .after
            .as_deref()
            .map(|cursor| decode_cursor(WORKSPACE_CURSOR, cursor, 4))
            .transpose()?;
        let (owner, name, created, id) = match &after {
            Some(key) => (
                Some(key[0].as_str()),
                Some(key[1].as_str()),
                Some(parse_i64(&key[2])?),
                Some(key[3].as_str()),
            ),
            None => (None, None, None, None),
        };
        let (status, transition) = match filter.latest_build {
            Some((status, transition)) => (Some(status.as_str()), transition.map(|t| t.as_str())),
            None => (None, None),
        };
        let rows: Vec<WorkspacePageRow> = sqlx::query_as(&sql(WORKSPACE_PAGE))
            .bind(filter.owner_id.as_deref())
            .bind(filter.include_deleted)
            .bind(filter.owner_name.as_deref())
            .bind(filter.template.as_deref())
            .bind(status)
            .bind(transition)
            .bind(owner)
            .bind(name)
            .bind(created)
            .bind(id)
            // One more than asked: whether a next page exists.
            .bind(filter.limit + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
        Ok(paged(workspace_summaries(rows), filter.limit, workspace_cursor))
    }

    pub(crate) async fn list_build_page(
        &self,
        workspace_id: &str,
        status: Option<BuildStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<Build>, StoreError> {
        let before = after
            .map(|cursor| decode_cursor(BUILD_CURSOR, cursor, 1).and_then(|key| parse_i64(&key[0])))
            .transpose()?;
        let rows: Vec<Build> = sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ?1 AND (?2 IS NULL OR b.status = ?2) \
             AND (?3 IS NULL OR b.number < ?3) ORDER BY b.number DESC LIMIT ?4"
        )))
        .bind(workspace_id)
        .bind(status.map(BuildStatus::as_str))
        .bind(before)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))?;
        Ok(paged(rows, limit, |build| {
            encode_cursor(BUILD_CURSOR, &[&build.number.to_string()])
        }))
    }

    pub(crate) async fn list_template_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<Template>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(TEMPLATE_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let rows: Vec<Template> = sqlx::query_as(&sql(&format!(
            "{TEMPLATE_SELECT} WHERE (?1 IS NULL OR t.name > ?1) ORDER BY t.name LIMIT ?2"
        )))
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template"))?;
        Ok(paged(rows, limit, |template| {
            encode_cursor(TEMPLATE_CURSOR, &[&template.name])
        }))
    }

    pub(crate) async fn list_user_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<User>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(USER_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let rows: Vec<User> = sqlx::query_as(&sql(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE (?1 IS NULL OR username > ?1) \
             ORDER BY username LIMIT ?2"
        )))
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("user"))?;
        Ok(paged(rows, limit, |user| encode_cursor(USER_CURSOR, &[&user.username])))
    }

    // ---- guarded builds ----

    pub(crate) async fn hold_build(
        &self,
        build_id: &str,
        plan: &SavedPlan,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'awaiting_confirmation', plan_digest = ?, expires_at = ? \
             WHERE id = ? AND status = 'running'"),
        )
        .bind(&plan.digest)
        .bind(expires_at)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            &sql("INSERT INTO saved_plans (build_id, plan, digest, state_digest, created_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (build_id) DO UPDATE SET plan = excluded.plan, \
             digest = excluded.digest, state_digest = excluded.state_digest"),
        )
        .bind(build_id)
        .bind(&plan.plan)
        .bind(&plan.digest)
        .bind(&plan.state_digest)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("saved plan"))?;
        sqlx::query(&sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ?"))
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn confirm_build(
        &self,
        build_id: &str,
        digest: &str,
        confirmer_id: &str,
        audit: &NewAuditEvent,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'pending', confirmed_by = ?, confirmed_at = ?, expires_at = NULL \
             WHERE id = ? AND status = 'awaiting_confirmation' AND plan_digest = ?"),
        )
        .bind(confirmer_id)
        .bind(now)
        .bind(build_id)
        .bind(digest)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            &sql("UPDATE jobs SET status = 'queued', kind = 'apply_saved_plan', worker = NULL, \
             claimed_at = NULL, finished_at = NULL, created_at = ? WHERE build_id = ?"),
        )
        .bind(now)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("job"))?;
        Self::insert_audit(&mut tx, audit).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn saved_plan(&self, build_id: &str) -> Result<Option<SavedPlan>, StoreError> {
        sqlx::query_as(&sql("SELECT plan, digest, state_digest FROM saved_plans WHERE build_id = ?"))
            .bind(build_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("saved plan"))
    }

    pub(crate) async fn delete_saved_plan(&self, build_id: &str) -> Result<(), StoreError> {
        sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
            .bind(build_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("saved plan"))?;
        Ok(())
    }

    pub(crate) async fn expire_held_builds(
        &self,
        now: i64,
        error: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let rows = sqlx::query(
            &sql("UPDATE builds SET status = 'canceled', error = ?, finished_at = ? \
             WHERE status = 'awaiting_confirmation' AND expires_at IS NOT NULL AND expires_at <= ? \
             RETURNING id"),
        )
        .bind(error)
        .bind(now)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        let ids: Vec<String> = rows
            .iter()
            .map(|row| row.try_get("id").map_err(StoreError::Database))
            .collect::<Result<_, _>>()?;
        for id in &ids {
            sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("saved plan"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(ids)
    }

    pub(crate) async fn protections(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Protection>, StoreError> {
        sqlx::query_as(
            &sql("SELECT address, mode, build_id, updated_at FROM workspace_protections \
             WHERE workspace_id = ? ORDER BY address"),
        )
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("protection"))
    }

    pub(crate) async fn replace_protections(
        &self,
        workspace_id: &str,
        build_id: &str,
        protections: &[NewProtection],
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        sqlx::query(&sql("DELETE FROM workspace_protections WHERE workspace_id = ?"))
            .bind(workspace_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("protection"))?;
        for protection in protections {
            sqlx::query(
                &sql("INSERT INTO workspace_protections (workspace_id, address, mode, build_id, updated_at) \
                 VALUES (?, ?, ?, ?, ?)"),
            )
            .bind(workspace_id)
            .bind(&protection.address)
            .bind(&protection.mode)
            .bind(build_id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error("protection"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn release_protection(
        &self,
        workspace_id: &str,
        address: &str,
    ) -> Result<Protection, StoreError> {
        sqlx::query_as(
            &sql("DELETE FROM workspace_protections WHERE workspace_id = ? AND address = ? \
             RETURNING address, mode, build_id, updated_at"),
        )
        .bind(workspace_id)
        .bind(address)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("protection"))
    }
    /// Inserts an audit event inside the caller's transaction.
    async fn insert_audit(
        tx: &mut sqlx::Transaction<'_, $db>,
        event: &NewAuditEvent,
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO audit_events (time, actor_id, actor_name, action, target_type, target, \
             outcome, request_id, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        )
        .bind(now_ms())
        .bind(&event.actor_id)
        .bind(&event.actor_name)
        .bind(&event.action)
        .bind(&event.target_type)
        .bind(&event.target)
        .bind(&event.outcome)
        .bind(&event.request_id)
        .bind(&event.details)
        .execute(&mut **tx)
        .await
        .map_err(db_error("audit event"))?;
        Ok(())
    }

    /// Inserts a pending build and its queued job inside the caller's transaction.
    async fn insert_build(
        tx: &mut sqlx::Transaction<'_, $db>,
        build: &NewBuild,
        number: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO builds (id, workspace_id, number, transition, status, template_version_id, \
             initiator_id, reason, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)"),
        )
        .bind(&build.id)
        .bind(&build.workspace_id)
        .bind(number)
        .bind(build.transition.as_str())
        .bind(&build.template_version_id)
        .bind(&build.initiator_id)
        .bind(&build.reason)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(db_error("active build"))?;
        sqlx::query(&sql("INSERT INTO jobs (id, build_id, status, created_at) VALUES (?, ?, 'queued', ?)"))
            .bind(new_id())
            .bind(&build.id)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error("job"))?;
        Ok(())
    }
    };
}

pub(crate) use shared_queries;
