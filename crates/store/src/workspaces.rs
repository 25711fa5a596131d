//! Workspaces: creating one with its first build, finding, listing and
//! deleting them, and the workspace page: one statement per page
//! (`workspace_page_sql`) whose rows (`WorkspacePageRow`, one per workspace and
//! agent) fold into one `WorkspaceSummary` per workspace.

use crate::pages::{SettledBuild, WorkspaceFilter, WorkspaceSummary};
use crate::records::{
    Agent, AgentLifecycle, Build, BuildReason, BuildStatus, Transition, Workspace,
};

pub(crate) const WORKSPACE_SELECT: &str =
    "SELECT w.id, w.name, w.owner_id, u.username AS owner_name, \
     u.email AS owner_email, w.template_id, t.name AS template_name, w.template_version_id, \
     v.number AS template_version, w.parameters, w.preset_name, w.deleted, w.created_at, w.updated_at, \
     w.host \
     FROM workspaces w \
     JOIN users u ON u.id = w.owner_id \
     JOIN templates t ON t.id = w.template_id \
     JOIN template_versions v ON v.id = w.template_version_id";

from_row! {
    /// A workspace as [`WORKSPACE_SELECT`] reads it, its parameters still text;
    /// it becomes a [`Workspace`] only when they read.
    pub(crate) struct WorkspaceRow {
        id: String,
        name: String,
        owner_id: String,
        owner_name: String,
        owner_email: String,
        template_id: String,
        template_name: String,
        template_version_id: String,
        template_version: i64,
        /// The parameters' JSON text: only `stored::parameters` reads it.
        parameters_json: String = "parameters",
        preset_name: Option<String>,
        deleted: bool,
        created_at: i64,
        updated_at: i64,
        host: Option<String>,
    }
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for Workspace
where
    WorkspaceRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Workspace, sqlx::Error> {
        let row = WorkspaceRow::from_row(row)?;
        let parameters =
            crate::stored::parameters(|| format!("workspace {}", row.id), &row.parameters_json)?;
        Ok(Workspace {
            id: row.id,
            name: row.name,
            owner_id: row.owner_id,
            owner_name: row.owner_name,
            owner_email: row.owner_email,
            template_id: row.template_id,
            template_name: row.template_name,
            template_version_id: row.template_version_id,
            template_version: row.template_version,
            parameters,
            preset_name: row.preset_name,
            deleted: row.deleted,
            created_at: row.created_at,
            updated_at: row.updated_at,
            host: row.host,
        })
    }
}

from_row! {
    /// One row of a workspace page: the workspace, its latest build (columns
    /// `b_*`), its newest finished build (`s_*`) and one of its agents (`a_*`,
    /// absent when it has none); a workspace with several agents spans as many
    /// consecutive rows.
    pub(crate) struct WorkspacePageRow {
        pub(crate) workspace: Workspace = flatten,
        pub(crate) b_id: String,
        pub(crate) b_number: i64,
        pub(crate) b_transition: Transition,
        pub(crate) b_status: BuildStatus,
        pub(crate) b_template_version_id: String,
        pub(crate) b_template_version: i64,
        pub(crate) b_initiator_id: String,
        pub(crate) b_initiator_name: String,
        pub(crate) b_reason: BuildReason,
        /// The parameters' JSON text: only `stored::build_parameters` reads it.
        pub(crate) b_parameters_json: Option<String> = "b_parameters",
        pub(crate) b_error: Option<String>,
        /// The report's JSON text: only `stored::guard_report` reads it.
        pub(crate) b_report_json: Option<String> = "b_guard_report",
        pub(crate) b_created_at: i64,
        pub(crate) b_started_at: Option<i64>,
        pub(crate) b_finished_at: Option<i64>,
        pub(crate) b_plan_digest: Option<String>,
        pub(crate) b_expires_at: Option<i64>,
        pub(crate) b_confirmed_by: Option<String>,
        pub(crate) b_confirmed_at: Option<i64>,
        pub(crate) b_daily_cost: Option<i64>,
        pub(crate) b_refusal: Option<String>,
        pub(crate) b_rename_to: Option<String>,
        pub(crate) b_then_start: bool,
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
        pub(crate) l_build_number: Option<i64>,
        pub(crate) l_holder: Option<String>,
        pub(crate) l_taken_at: Option<i64>,
        pub(crate) l_lost_at: Option<i64>,
    }
}

/// Folds a page's rows (one per workspace and agent, in page order) into
/// one summary per workspace; `Corrupt` when a latest build's guard report
/// does not read.
pub(crate) fn workspace_summaries(
    rows: Vec<WorkspacePageRow>,
) -> Result<Vec<WorkspaceSummary>, crate::Corrupt> {
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
        let lost_lock = match (
            row.l_build_number,
            row.l_holder,
            row.l_taken_at,
            row.l_lost_at,
        ) {
            (Some(build_number), Some(holder), Some(taken_at), Some(lost_at)) => {
                Some(crate::LostLock {
                    build_number,
                    holder,
                    taken_at,
                    lost_at,
                })
            }
            _ => None,
        };
        let workspace = row.workspace;
        let guard_report = crate::stored::guard_report(&row.b_id, row.b_report_json)?;
        let parameters = crate::stored::build_parameters(&row.b_id, row.b_parameters_json)?;
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
            parameters,
            error: row.b_error,
            guard_report,
            created_at: row.b_created_at,
            started_at: row.b_started_at,
            finished_at: row.b_finished_at,
            plan_digest: row.b_plan_digest,
            expires_at: row.b_expires_at,
            confirmed_by: row.b_confirmed_by,
            confirmed_at: row.b_confirmed_at,
            daily_cost: row.b_daily_cost,
            refusal: row.b_refusal,
            rename_to: row.b_rename_to,
            then_start: row.b_then_start,
            // A page does not say why a build waits; one build's read does.
            waiting: None,
        };
        summaries.push(WorkspaceSummary {
            workspace,
            latest_build,
            settled,
            agents: agent.into_iter().collect(),
            lost_lock,
        });
    }
    Ok(summaries)
}

/// Which form of the page statement a backend runs (see
/// [`workspace_page_sql`]); it follows from the pool's type, so that the
/// shared query macro needs no argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageDialect {
    Sqlite,
    Postgres,
}

/// The page dialect of a backend's pool.
pub(crate) trait PagePool {
    const DIALECT: PageDialect;
}

impl PagePool for sqlx::SqlitePool {
    const DIALECT: PageDialect = PageDialect::Sqlite;
}

impl PagePool for sqlx::PgPool {
    const DIALECT: PageDialect = PageDialect::Postgres;
}

/// The dialect of the pool given (the backends call it with `&self.pool`).
pub(crate) fn page_dialect<P: PagePool>(_pool: &P) -> PageDialect {
    P::DIALECT
}

/// A page of workspaces in one statement, its text built for the filters
/// present (`workspace_page_sql`). First the page's keys, from users and
/// workspaces alone (filters, cursor, limit): SQLite walks users in
/// username order (`CROSS JOIN` fixes its join order; PostgreSQL plans it as
/// an inner join) and each one's workspaces by `workspaces_owner_list`, and
/// stops after `limit` rows; PostgreSQL sorts the keys. Only then are the
/// page's rows joined with names, their latest build, their newest finished
/// build and their agents, the keys leading (`CROSS JOIN` again: SQLite
/// 3.46 otherwise flattens the CTEs and scans every workspace). (At 10,000 workspaces, joining first and sorting
/// after took 80 ms on SQLite and 100 ms on PostgreSQL.)
///
/// The rows are joined in each backend's own form (the results are the
/// same): SQLite's keys are bare ids ([`WORKSPACE_PAGE_ROWS`]);
/// PostgreSQL's carry the workspace and owner columns they have read
/// anyway and find each latest build with one backward index step
/// ([`WORKSPACE_PAGE_ROWS_POSTGRES`]). Index descents are most of what a
/// page costs PostgreSQL: there it is 6 per workspace instead of 11.
///
/// The text holds only the conditions of the filters given, never
/// `? IS NULL OR ...`: PostgreSQL can then keep one generic plan per
/// combination and limit (a prepared statement whose every execution it
/// planned anew cost 3-5 ms of planning a page, more than running it), and
/// each plan uses the indexes its real predicates allow. Placeholders are
/// bound in the order they appear.
pub(crate) fn workspace_page_sql(
    filter: &WorkspaceFilter,
    cursor: bool,
    limit: i64,
    dialect: PageDialect,
) -> String {
    let mut text = String::with_capacity(4_000);
    text.push_str(match dialect {
        PageDialect::Sqlite => "WITH keys AS (SELECT w.id AS key_id",
        PageDialect::Postgres => {
            "WITH keys AS (SELECT w.id, w.name, w.owner_id, u.username AS owner_name, \
             u.email AS owner_email, w.template_id, w.template_version_id, w.parameters, \
             w.preset_name, w.deleted, w.created_at, w.updated_at, w.host"
        }
    });
    text.push_str(" FROM users u CROSS JOIN workspaces w WHERE w.owner_id = u.id");
    if filter.owner_id.is_some() {
        if filter.include_shared {
            text.push_str(" AND (w.owner_id = ? OR ");
            text.push_str(SHARED_WITH);
            text.push(')');
        } else {
            text.push_str(" AND w.owner_id = ?");
        }
    }
    if !filter.include_deleted {
        text.push_str(" AND w.deleted = FALSE");
    }
    if filter.owner_name.is_some() {
        text.push_str(" AND u.username = ?");
    }
    if filter.exclude_system_owners {
        text.push_str(" AND u.system = FALSE");
    }
    if filter.template.is_some() {
        text.push_str(
            " AND EXISTS (SELECT 1 FROM templates ft \
             WHERE ft.id = w.template_id AND ft.name = ?)",
        );
    }
    if let Some((_, transition)) = filter.latest_build {
        text.push_str(
            " AND EXISTS (SELECT 1 FROM builds fb WHERE fb.workspace_id = w.id \
             AND fb.number = (SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
             AND fb.status = ?",
        );
        if transition.is_some() {
            text.push_str(" AND fb.transition = ?");
        }
        text.push(')');
    }
    if cursor {
        // The username bound alone lets the walk over users start at the
        // cursor's owner instead of the first user.
        text.push_str(
            " AND u.username >= ? \
             AND (u.username, w.name, w.created_at, w.id) > (?, ?, ?, ?)",
        );
    }
    // The limit is written into the text (an integer, page_size() bounds
    // it): bound, it would make PostgreSQL's generic plan assume a tenth of
    // the table and keep planning every execution.
    text.push_str(" ORDER BY u.username, w.name, w.created_at, w.id LIMIT ");
    text.push_str(&limit.to_string());
    text.push_str("), ");
    text.push_str(match dialect {
        PageDialect::Sqlite => WORKSPACE_PAGE_ROWS,
        PageDialect::Postgres => WORKSPACE_PAGE_ROWS_POSTGRES,
    });
    text
}

/// The condition that the user bound (three times) holds an entry of
/// workspace `w`'s share list: by name, through a group, or `Everyone`.
const SHARED_WITH: &str =
    "EXISTS (SELECT 1 FROM workspace_shares s WHERE s.workspace_id = w.id AND \
     (s.user_id = ? \
      OR s.group_id IN (SELECT m.group_id FROM group_members m WHERE m.user_id = ?) \
      OR (s.group_id = 'everyone' AND EXISTS \
          (SELECT 1 FROM users p WHERE p.id = ? AND p.system = FALSE AND p.status <> 'deleted'))))";

/// The page's rows once its keys are chosen (see [`workspace_page_sql`]).
/// An agent's startup script, dir and env are served only to the agent: a
/// page leaves them out (they can be large, and no view shows them).
const WORKSPACE_PAGE_ROWS: &str = "page AS (\
     SELECT w.id, w.name, w.owner_id, u.username AS owner_name, u.email AS owner_email, \
     w.template_id, t.name AS template_name, w.template_version_id, v.number AS template_version, \
     w.parameters, w.preset_name, w.deleted, w.created_at, w.updated_at, w.host, \
     lb.id AS b_id, lb.number AS b_number, lb.transition AS b_transition, lb.status AS b_status, \
     lb.template_version_id AS b_template_version_id, bv.number AS b_template_version, \
     lb.initiator_id AS b_initiator_id, i.username AS b_initiator_name, lb.reason AS b_reason, lb.parameters AS b_parameters, \
     lb.error AS b_error, lb.guard_report AS b_guard_report, lb.created_at AS b_created_at, \
     lb.started_at AS b_started_at, lb.finished_at AS b_finished_at, \
     lb.plan_digest AS b_plan_digest, lb.expires_at AS b_expires_at, \
     c.username AS b_confirmed_by, lb.confirmed_at AS b_confirmed_at, lb.daily_cost AS b_daily_cost, lb.refusal AS b_refusal, \
     lb.rename_to AS b_rename_to, lb.then_start AS b_then_start \
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
     NULL AS a_startup_script, NULL AS a_dir, '{}' AS a_env, \
     a.exit_status AS a_exit_status, \
     lb2.number AS l_build_number, sl.holder AS l_holder, sl.taken_at AS l_taken_at, \
     sl.lost_at AS l_lost_at \
     FROM page \
     LEFT JOIN state_locks sl ON sl.workspace_id = page.id AND sl.lost_at IS NOT NULL \
     LEFT JOIN builds lb2 ON lb2.id = sl.build_id \
     LEFT JOIN builds s ON s.workspace_id = page.id AND s.number = (SELECT MAX(sb.number) \
          FROM builds sb WHERE sb.workspace_id = page.id \
          AND sb.status IN ('succeeded', 'failed', 'canceled')) \
     LEFT JOIN agents a ON a.workspace_id = page.id \
     ORDER BY page.owner_name, page.name, page.created_at, page.id, a.name";

/// PostgreSQL's page rows once its keys are chosen (see
/// [`workspace_page_sql`]): the keys already hold the workspace and its
/// owner; the latest build and the newest finished one are each one
/// backward step on `(workspace_id, number)` (`LATERAL ... LIMIT 1`, where
/// `number = (SELECT MAX(...))` took a second descent to fetch the row).
/// The `page` CTE is `MATERIALIZED` so that the names are joined to 51
/// rows only once they are chosen: flattened, the planner hashed the users
/// table again for every workspace. Like SQLite's, the page leaves out an
/// agent's startup script, dir and env.
const WORKSPACE_PAGE_ROWS_POSTGRES: &str = "page AS MATERIALIZED (\
     SELECT k.*, lb.id AS b_id, lb.number AS b_number, lb.transition AS b_transition, \
     lb.status AS b_status, lb.template_version_id AS b_template_version_id, \
     lb.initiator_id AS b_initiator_id, lb.reason AS b_reason, lb.parameters AS b_parameters, \
     lb.error AS b_error, lb.guard_report AS b_guard_report, lb.created_at AS b_created_at, \
     lb.started_at AS b_started_at, lb.finished_at AS b_finished_at, \
     lb.plan_digest AS b_plan_digest, lb.expires_at AS b_expires_at, \
     lb.confirmed_by AS b_confirmed_by_id, lb.confirmed_at AS b_confirmed_at, lb.daily_cost AS b_daily_cost, lb.refusal AS b_refusal, \
     lb.rename_to AS b_rename_to, lb.then_start AS b_then_start, \
     s.status AS s_status, s.transition AS s_transition, s.finished_at AS s_finished_at \
     FROM keys k \
     CROSS JOIN LATERAL (SELECT b.id, b.number, b.transition, b.status, b.template_version_id, \
          b.initiator_id, b.reason, b.parameters, b.error, b.guard_report, b.created_at, \
          b.started_at, b.finished_at, b.plan_digest, b.expires_at, b.confirmed_by, \
          b.confirmed_at, b.daily_cost, b.refusal, b.rename_to, b.then_start FROM builds b WHERE b.workspace_id = k.id \
          ORDER BY b.number DESC LIMIT 1) lb \
     LEFT JOIN LATERAL (SELECT sb.status, sb.transition, sb.finished_at FROM builds sb \
          WHERE sb.workspace_id = k.id AND sb.status IN ('succeeded', 'failed', 'canceled') \
          ORDER BY sb.number DESC LIMIT 1) s ON TRUE) \
     SELECT p.id, p.name, p.owner_id, p.owner_name, p.owner_email, p.template_id, \
     t.name AS template_name, p.template_version_id, v.number AS template_version, \
     p.parameters, p.preset_name, p.deleted, p.created_at, p.updated_at, p.host, \
     p.b_id, p.b_number, p.b_transition, p.b_status, p.b_template_version_id, \
     bv.number AS b_template_version, p.b_initiator_id, i.username AS b_initiator_name, \
     p.b_reason, p.b_parameters, p.b_error, p.b_guard_report, p.b_created_at, \
     p.b_started_at, p.b_finished_at, p.b_plan_digest, p.b_expires_at, \
     c.username AS b_confirmed_by, p.b_confirmed_at, p.b_daily_cost, p.b_refusal, \
     p.b_rename_to, p.b_then_start, \
     p.s_status, p.s_transition, p.s_finished_at, \
     a.id AS a_id, a.build_id AS a_build_id, a.name AS a_name, a.lifecycle AS a_lifecycle, \
     a.connected_at AS a_connected_at, a.last_heartbeat_at AS a_last_heartbeat_at, \
     a.created_at AS a_created_at, NULL AS a_startup_script, NULL AS a_dir, '{}' AS a_env, \
     a.exit_status AS a_exit_status, \
     lb2.number AS l_build_number, sl.holder AS l_holder, sl.taken_at AS l_taken_at, \
     sl.lost_at AS l_lost_at \
     FROM page p \
     JOIN templates t ON t.id = p.template_id \
     JOIN template_versions v ON v.id = p.template_version_id \
     JOIN template_versions bv ON bv.id = p.b_template_version_id \
     JOIN users i ON i.id = p.b_initiator_id \
     LEFT JOIN users c ON c.id = p.b_confirmed_by_id \
     LEFT JOIN state_locks sl ON sl.workspace_id = p.id AND sl.lost_at IS NOT NULL \
     LEFT JOIN builds lb2 ON lb2.id = sl.build_id \
     LEFT JOIN agents a ON a.workspace_id = p.id \
     ORDER BY p.owner_name, p.name, p.created_at, p.id, a.name";

/// The workspace methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! workspace_queries {
    () => {
    pub(crate) async fn create_workspace(
        &self,
        workspace: &NewWorkspace,
        build: &NewBuild,
    ) -> Result<(Workspace, Build), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        sqlx::query(
            &sql("INSERT INTO workspaces (id, owner_id, name, template_id, template_version_id, \
             parameters, preset_name, deleted, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, FALSE, ?, ?)"),
        )
        .bind(&workspace.id)
        .bind(&workspace.owner_id)
        .bind(&workspace.name)
        .bind(&workspace.template_id)
        .bind(&workspace.template_version_id)
        .bind($crate::stored::parameters_text(&workspace.parameters))
        .bind(&workspace.preset_name)
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

    pub(crate) async fn transfer_workspace(
        &self,
        workspace_id: &str,
        owner_id: &str,
        name: &str,
        build: Option<&NewBuild>,
    ) -> Result<(Workspace, Option<Build>), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let moved = sqlx::query(&sql(
            "UPDATE workspaces SET owner_id = ?, name = ?, updated_at = ? \
             WHERE id = ? AND deleted = FALSE",
        ))
        .bind(owner_id)
        .bind(name)
        .bind(now)
        .bind(workspace_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("workspace name"))?;
        if moved.rows_affected() == 0 {
            return Err(StoreError::NotFound("workspace"));
        }
        if let Some(build) = build {
            Self::insert_next_build(&mut tx, build, now).await?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        let build = match build {
            Some(build) => Some(self.build_by_id(&build.id).await?),
            None => None,
        };
        Ok((self.workspace_by_id(workspace_id).await?, build))
    }

    pub(crate) async fn move_workspace(
        &self,
        workspace_id: &str,
        from: Option<&str>,
        to: &str,
    ) -> Result<bool, StoreError> {
        let moved = sqlx::query(&sql(
            "UPDATE workspaces SET host = ? WHERE id = ? AND deleted = FALSE \
             AND COALESCE(host, '') = ? AND NOT EXISTS (SELECT 1 FROM builds b \
             WHERE b.workspace_id = workspaces.id \
             AND b.status IN ('pending', 'running', 'awaiting_confirmation'))",
        ))
        .bind(to)
        .bind(workspace_id)
        .bind(from.unwrap_or(""))
        .execute(&self.pool)
        .await
        .map_err(db_error("workspace"))?;
        Ok(moved.rows_affected() > 0)
    }

    pub(crate) async fn mark_workspace_deleted(
        &self,
        workspace_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE workspaces SET deleted = TRUE, updated_at = ? WHERE id = ?"))
            .bind(self.now_ms())
            .bind(workspace_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
        Ok(())
    }

    // ---- the workspace page (pages.rs) ----

    pub(crate) async fn list_workspace_page(
        &self,
        filter: &WorkspaceFilter,
    ) -> Result<Page<WorkspaceSummary>, StoreError> {
        let after = filter
            .after
            .as_deref()
            .map(|cursor| decode_cursor(WORKSPACE_CURSOR, cursor, 4))
            .transpose()?;
        let after = match &after {
            Some(key) => Some((&key[0], &key[1], parse_i64(&key[2])?, &key[3])),
            None => None,
        };
        let (status, transition) = match filter.latest_build {
            Some((status, transition)) => (Some(status.as_str()), transition.map(|t| t.as_str())),
            None => (None, None),
        };
        // One more than asked: whether a next page exists.
        let text = workspace_page_sql(
            filter,
            after.is_some(),
            filter.limit + 1,
            page_dialect(&self.pool),
        );
        let text = sql(&text);
        let mut query = sqlx::query_as::<_, WorkspacePageRow>(&text);
        // In the order of the text's placeholders.
        if let Some(owner_id) = filter.owner_id.as_deref() {
            query = query.bind(owner_id);
            if filter.include_shared {
                query = query.bind(owner_id).bind(owner_id).bind(owner_id);
            }
        }
        if let Some(owner_name) = filter.owner_name.as_deref() {
            query = query.bind(owner_name);
        }
        if let Some(template) = filter.template.as_deref() {
            query = query.bind(template);
        }
        if let Some(status) = status {
            query = query.bind(status);
        }
        if let Some(transition) = transition {
            query = query.bind(transition);
        }
        if let Some((owner, name, created, id)) = after {
            query = query
                .bind(owner)
                .bind(owner)
                .bind(name)
                .bind(created)
                .bind(id);
        }
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
        Ok(paged(workspace_summaries(rows)?, filter.limit, workspace_cursor))
    }
    };
}

pub(crate) use workspace_queries;
