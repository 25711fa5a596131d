//! Quotas (issue 31): what each of a person's workspaces costs a day, what
//! their groups allow, and the reservation of a build's cost.
//!
//! A workspace costs the `daily_cost` of its newest build that has one and
//! did not fail or get canceled: a succeeded build is what the workspace
//! now is, a pending or running one (or one held for confirmation) has
//! reserved its cost. A budget is the sum of the `quota_allowance` of the
//! person's groups (`Everyone` included for a person).
//!
//! [`reserve_build_cost`](crate::Store::reserve_build_cost) checks the
//! budget and records the cost in one write transaction that first locks
//! the owner's account row: two builds of the same owner racing for the
//! last of a budget are judged one after the other, the second seeing the
//! first's reservation.

from_row! {
    /// One workspace's part of a budget.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WorkspaceCost {
        pub workspace_id: String,
        pub workspace_name: String,
        /// The build whose cost counts.
        pub build_number: i64,
        pub daily_cost: i64,
        /// Whether that build is still pending or running (reserved, not yet
        /// applied).
        pub reserved: bool,
    }
}

from_row! {
    /// One group's part of a budget.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GroupAllowance {
        pub group: String,
        pub allowance: i64,
    }
}

/// A person's budget and what uses it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuotaUsage {
    pub allowances: Vec<GroupAllowance>,
    pub workspaces: Vec<WorkspaceCost>,
}

impl QuotaUsage {
    /// The sum of the allowances (saturating: an allowance is at most
    /// `i64::MAX`).
    pub fn budget(&self) -> i64 {
        self.allowances
            .iter()
            .fold(0i64, |sum, group| sum.saturating_add(group.allowance))
    }

    pub fn spent(&self) -> i64 {
        self.workspaces.iter().fold(0i64, |sum, workspace| {
            sum.saturating_add(workspace.daily_cost)
        })
    }
}

/// What [`reserve_build_cost`](crate::Store::reserve_build_cost) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// The cost is recorded on the build.
    Reserved,
    /// Refused: the owner's other workspaces and this cost exceed the
    /// budget. Only the refusal (`refusal = 'quota'`, and the cost it was
    /// refused for in `refused_cost`) was recorded.
    OverBudget { usage: QuotaUsage, cost: i64 },
    /// The holder no longer runs the build: nothing was recorded.
    NotHolder,
}

/// The workspaces of an owner with their counted costs (see the module
/// doc), by name. `?1`: the owner's id.
pub(crate) const WORKSPACE_COSTS: &str = "SELECT w.id AS workspace_id, w.name AS workspace_name, \
     b.number AS build_number, b.daily_cost AS daily_cost, \
     (b.status IN ('pending', 'running', 'awaiting_confirmation')) AS reserved \
     FROM workspaces w JOIN builds b ON b.workspace_id = w.id \
     WHERE w.owner_id = ?1 AND w.deleted = FALSE \
     AND b.number = (SELECT MAX(cb.number) FROM builds cb WHERE cb.workspace_id = w.id \
          AND cb.daily_cost IS NOT NULL AND cb.status NOT IN ('failed', 'canceled')) \
     ORDER BY w.name";

/// The groups that give the user an allowance, by name. `?1`: the user's id.
pub(crate) const ALLOWANCES: &str = "SELECT g.name AS \"group\", g.quota_allowance AS allowance \
     FROM groups g \
     WHERE (g.id = 'everyone' AND EXISTS \
            (SELECT 1 FROM users p WHERE p.id = ?1 AND p.system = FALSE AND p.status <> 'deleted')) \
     OR EXISTS (SELECT 1 FROM group_members m WHERE m.group_id = g.id AND m.user_id = ?1) \
     ORDER BY g.name";

/// The quota methods of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! quota_queries {
    () => {
    pub(crate) async fn quota_usage(&self, user_id: &str) -> Result<QuotaUsage, StoreError> {
        let allowances = sqlx::query_as(&sql(ALLOWANCES))
            .bind(user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("group"))?;
        let workspaces = sqlx::query_as(&sql(WORKSPACE_COSTS))
            .bind(user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
        Ok(QuotaUsage { allowances, workspaces })
    }

    pub(crate) async fn reserve_build_cost(
        &self,
        build_id: &str,
        holder: &str,
        cost: i64,
        enforce: bool,
    ) -> Result<Reservation, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let owner: Option<(String, String)> = sqlx::query_as(&sql(
            "SELECT w.owner_id, w.id FROM builds b JOIN workspaces w ON w.id = b.workspace_id \
             WHERE b.id = ?",
        ))
        .bind(build_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        let Some((owner_id, workspace_id)) = owner else {
            return Err(StoreError::NotFound("build"));
        };
        // Lock the owner's row: every reservation of this owner waits here
        // for the one before it to commit (SQLite's write lock does the
        // same for the whole database).
        sqlx::query(&sql("UPDATE users SET status = status WHERE id = ?"))
            .bind(&owner_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("user"))?;
        let holds: Option<(String,)> = sqlx::query_as(&sql(
            "SELECT j.build_id FROM jobs j WHERE j.build_id = ? AND j.status = 'claimed' AND j.lease_holder = ?",
        ))
        .bind(build_id)
        .bind(holder)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("job"))?;
        if holds.is_none() {
            return Ok(Reservation::NotHolder);
        }
        if enforce {
            let allowances: Vec<GroupAllowance> = sqlx::query_as(&sql(ALLOWANCES))
                .bind(&owner_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error("group"))?;
            let mut workspaces: Vec<WorkspaceCost> = sqlx::query_as(&sql(WORKSPACE_COSTS))
                .bind(&owner_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error("workspace"))?;
            // This workspace is charged what this build leaves, not what
            // it costs now.
            workspaces.retain(|workspace| workspace.workspace_id != workspace_id);
            let usage = QuotaUsage { allowances, workspaces };
            if usage.spent().saturating_add(cost) > usage.budget() {
                sqlx::query(&sql(
                    "UPDATE builds SET refusal = 'quota', refused_cost = ? WHERE id = ?",
                ))
                .bind(cost)
                .bind(build_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error("build"))?;
                tx.commit().await.map_err(StoreError::Database)?;
                return Ok(Reservation::OverBudget { usage, cost });
            }
        }
        sqlx::query(&sql("UPDATE builds SET daily_cost = ? WHERE id = ?"))
            .bind(cost)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("build"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(Reservation::Reserved)
    }
    };
}

pub(crate) use quota_queries;
