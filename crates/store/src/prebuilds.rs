//! Prebuilt workspaces: the snapshot the reconciliation decides on, the
//! claim that hands a ready prebuild to a person, and the two pieces of
//! shared state around them (platform settings such as `prebuilds.paused`,
//! and leases, so that one server at a time reconciles).
//!
//! The snapshot is read in one transaction, three queries whose cost does
//! not grow with the number of presets: the decision (`abode-prebuilds`)
//! must see the pools, their workspaces and their failures as of one moment.
//! The claim is one write transaction: pick a ready prebuild (`SKIP LOCKED`
//! on PostgreSQL, so concurrent claimants on several servers never wait on
//! or share one), give it to the claimant under the name they asked for and
//! queue its claim build. With quotas enforced, the same transaction first
//! checks that the prebuild's cost fits the claimant's budget (the
//! claimant's account row locked, as a build's reservation does): a claim
//! that would not fit takes nothing, and the prebuild stays in its pool.

use crate::quotas::{GroupAllowance, QuotaUsage, WorkspaceCost};
use crate::records::{Build, BuildStatus, Transition};

from_row! {
    /// A template version that offers presets: the active version of every
    /// template, and inactive ones that still have prebuilt workspaces.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct VersionPresets {
        pub template_id: String,
        pub template_name: String,
        pub version_id: String,
        pub version_number: i64,
        pub active: bool,
        /// Whether its template is deprecated (its pools stop growing).
        pub deprecated: bool,
        /// JSON array of `abode_contract::presets::PresetDefinition`.
        pub presets: String,
    }
}

from_row! {
    /// A prebuilt workspace (owned by the `prebuilds` system user) and its
    /// newest build.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PrebuildRow {
        pub workspace_id: String,
        pub name: String,
        pub version_id: String,
        pub preset_name: Option<String>,
        pub created_at: i64,
        pub build_id: String,
        pub build_transition: Transition,
        pub build_status: BuildStatus,
        /// The build's job is still queued: no worker has started it.
        pub build_queued: bool,
        pub agents: i64,
        /// Agents that are ready and heard from since the snapshot's cutoff.
        pub agents_ready: i64,
    }
}

from_row! {
    /// The prebuild start builds of one pool (a version and a preset) since its
    /// last success. Only pools of active versions: the others create nothing,
    /// and their history must not make every round read every build a pool ever
    /// ran.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PoolFailures {
        pub version_id: String,
        pub preset_name: String,
        /// Failed prebuild start builds after the pool's newest succeeded one.
        pub consecutive_failures: i64,
        /// When the newest failed one finished (Unix ms).
        pub last_failure_at: Option<i64>,
    }
}

from_row! {
    /// The last known daily cost of one pool (of an active version): that of
    /// the plan of its newest prebuild `start` build whose plan was costed,
    /// reserved (`daily_cost`) or refused by quota (`refused_cost`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PoolCost {
        pub version_id: String,
        pub preset_name: String,
        pub daily_cost: i64,
    }
}

from_row! {
    /// A preset whose pool the prebuilds budget holds below its desired count,
    /// and template admins were told so (`prebuild_quota_episodes`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QuotaEpisode {
        pub template_id: String,
        pub preset_name: String,
        /// When it was told (Unix ms).
        pub since: i64,
    }
}

/// What the reconciliation decides on, read in one transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrebuildSnapshot {
    pub versions: Vec<VersionPresets>,
    pub workspaces: Vec<PrebuildRow>,
    pub failures: Vec<PoolFailures>,
    pub paused: bool,
    /// The pool owner's budget: its groups' allowances.
    pub allowances: Vec<GroupAllowance>,
    /// The counted cost of each of the pool owner's workspaces that has one
    /// (`quotas.rs` says which build counts).
    pub costs: Vec<WorkspaceCost>,
    /// Each pool's last known cost.
    pub pool_costs: Vec<PoolCost>,
    /// Open budget episodes.
    pub quota_episodes: Vec<QuotaEpisode>,
}

/// A person's claim of a ready prebuild of one pool.
#[derive(Debug, Clone)]
pub struct PrebuildClaim {
    /// The `prebuilds` system user: who owns the pool's workspaces.
    pub pool_owner_id: String,
    pub version_id: String,
    pub preset_name: String,
    /// Who claims it (the workspace's new owner), and the name it takes.
    pub claimant_id: String,
    pub name: String,
    /// Who asked (the claimant, or an owner creating for them).
    pub initiator_id: String,
    /// An agent heard from before this (Unix ms) is not ready.
    pub heartbeat_before: i64,
    /// Only prebuilds created after this (Unix ms): older ones have
    /// expired (the preset's ttl) and are the reconciliation's to replace.
    pub created_after: i64,
    /// The claim build's id.
    pub build_id: String,
    /// `--quota-enforce`: the prebuild's cost (what its newest costed
    /// build counts) must fit the claimant's budget.
    pub enforce_quota: bool,
}

/// What [`claim_prebuild`](crate::Store::claim_prebuild) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrebuildClaimed {
    /// The prebuild is the claimant's, its claim build queued.
    Claimed(Box<Build>),
    /// No prebuild of the pool is ready (or unexpired).
    NoneReady,
    /// A ready prebuild costs `cost` a day, which the claimant's other
    /// workspaces (`usage`) leave no room for: nothing was changed, the
    /// prebuild stays in its pool.
    OverBudget { usage: QuotaUsage, cost: i64 },
}

impl PrebuildClaimed {
    /// The claim build, if the claim took a prebuild.
    pub fn into_build(self) -> Option<Build> {
        match self {
            PrebuildClaimed::Claimed(build) => Some(*build),
            PrebuildClaimed::NoneReady | PrebuildClaimed::OverBudget { .. } => None,
        }
    }
}

/// The setting that pauses the reconciliation (`true` or `false`).
pub const PREBUILDS_PAUSED: &str = "prebuilds.paused";

pub(crate) const SNAPSHOT_VERSIONS: &str = "SELECT t.id AS template_id, t.name AS template_name, \
     v.id AS version_id, v.number AS version_number, \
     CASE WHEN t.active_version_id = v.id THEN TRUE ELSE FALSE END AS active, \
     CASE WHEN t.deprecation_message IS NULL THEN FALSE ELSE TRUE END AS deprecated, v.presets \
     FROM template_versions v JOIN templates t ON t.id = v.template_id \
     WHERE v.presets IS NOT NULL AND (t.active_version_id = v.id OR v.id IN ( \
         SELECT w.template_version_id FROM workspaces w \
         WHERE w.owner_id = ? AND w.deleted = FALSE)) \
     ORDER BY t.name, v.number";

pub(crate) const SNAPSHOT_WORKSPACES: &str = "SELECT w.id AS workspace_id, w.name, \
     w.template_version_id AS version_id, w.preset_name, w.created_at, \
     lb.id AS build_id, lb.transition AS build_transition, lb.status AS build_status, \
     CASE WHEN j.status = 'queued' THEN TRUE ELSE FALSE END AS build_queued, \
     (SELECT COUNT(*) FROM agents a WHERE a.workspace_id = w.id) AS agents, \
     (SELECT COUNT(*) FROM agents a WHERE a.workspace_id = w.id AND a.lifecycle = 'ready' \
         AND a.last_heartbeat_at >= ?) AS agents_ready \
     FROM workspaces w \
     JOIN builds lb ON lb.workspace_id = w.id AND lb.number = ( \
         SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
     LEFT JOIN jobs j ON j.build_id = lb.id \
     WHERE w.owner_id = ? AND w.deleted = FALSE \
     ORDER BY w.created_at, w.id";

pub(crate) const SNAPSHOT_FAILURES: &str = "SELECT b.template_version_id AS version_id, \
     w.preset_name AS preset_name, \
     SUM(CASE WHEN b.status = 'failed' AND b.refusal IS NULL \
         AND b.created_at > COALESCE(ok.last_ok, -1) THEN 1 ELSE 0 END) AS consecutive_failures, \
     MAX(CASE WHEN b.status = 'failed' AND b.refusal IS NULL \
         AND b.created_at > COALESCE(ok.last_ok, -1) THEN b.finished_at END) AS last_failure_at \
     FROM builds b JOIN workspaces w ON w.id = b.workspace_id \
     LEFT JOIN ( \
         SELECT sb.template_version_id AS version_id, sw.preset_name AS preset_name, \
             MAX(sb.created_at) AS last_ok \
         FROM builds sb JOIN workspaces sw ON sw.id = sb.workspace_id \
         WHERE sb.initiator_id = ? AND sb.reason = 'prebuild' AND sb.transition = 'start' \
             AND sb.status = 'succeeded' AND sb.template_version_id IN ( \
                 SELECT at.active_version_id FROM templates at) \
         GROUP BY sb.template_version_id, sw.preset_name) ok \
       ON ok.version_id = b.template_version_id AND ok.preset_name = w.preset_name \
     WHERE b.initiator_id = ? AND b.reason = 'prebuild' AND b.transition = 'start' \
         AND w.preset_name IS NOT NULL AND b.template_version_id IN ( \
             SELECT at.active_version_id FROM templates at) \
     GROUP BY b.template_version_id, w.preset_name \
     ORDER BY b.template_version_id, w.preset_name";

/// Each pool's last known cost (see [`PoolCost`]); pools of active
/// versions only, like the failures. `?1`, `?2`: the pool owner's id.
pub(crate) const SNAPSHOT_POOL_COSTS: &str = "SELECT b.template_version_id AS version_id, \
     w.preset_name AS preset_name, MAX(COALESCE(b.daily_cost, b.refused_cost)) AS daily_cost \
     FROM builds b JOIN workspaces w ON w.id = b.workspace_id \
     JOIN ( \
         SELECT sb.template_version_id AS version_id, sw.preset_name AS preset_name, \
             MAX(sb.created_at) AS newest \
         FROM builds sb JOIN workspaces sw ON sw.id = sb.workspace_id \
         WHERE sb.initiator_id = ? AND sb.reason = 'prebuild' AND sb.transition = 'start' \
             AND (sb.daily_cost IS NOT NULL OR sb.refused_cost IS NOT NULL) \
             AND sw.preset_name IS NOT NULL AND sb.template_version_id IN ( \
                 SELECT at.active_version_id FROM templates at) \
         GROUP BY sb.template_version_id, sw.preset_name) n \
       ON n.version_id = b.template_version_id AND n.preset_name = w.preset_name \
         AND n.newest = b.created_at \
     WHERE b.initiator_id = ? AND b.reason = 'prebuild' AND b.transition = 'start' \
         AND (b.daily_cost IS NOT NULL OR b.refused_cost IS NOT NULL) \
     GROUP BY b.template_version_id, w.preset_name \
     ORDER BY b.template_version_id, w.preset_name";

/// The prebuild queries of [`crate::Store`]; expanded inside each backend's
/// `impl` with its lock clause for the claim's pick (`FOR UPDATE OF w SKIP
/// LOCKED` on PostgreSQL; SQLite's write transaction already excludes other
/// writers).
macro_rules! prebuild_queries {
    ($db:ty, $claim_lock:expr) => {
    pub(crate) async fn prebuild_snapshot(
        &self,
        pool_owner_id: &str,
        heartbeat_before: i64,
    ) -> Result<PrebuildSnapshot, StoreError> {
        use $crate::prebuilds::{SNAPSHOT_FAILURES, SNAPSHOT_VERSIONS, SNAPSHOT_WORKSPACES};
        let mut tx = self.pool.begin().await.map_err(StoreError::Database)?;
        let versions = sqlx::query_as(&sql(SNAPSHOT_VERSIONS))
            .bind(pool_owner_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("prebuild snapshot"))?;
        let workspaces = sqlx::query_as(&sql(SNAPSHOT_WORKSPACES))
            .bind(heartbeat_before)
            .bind(pool_owner_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("prebuild snapshot"))?;
        let failures = sqlx::query_as(&sql(SNAPSHOT_FAILURES))
            .bind(pool_owner_id)
            .bind(pool_owner_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("prebuild snapshot"))?;
        let paused: Option<String> =
            sqlx::query_scalar(&sql("SELECT value FROM platform_settings WHERE name = ?"))
                .bind($crate::prebuilds::PREBUILDS_PAUSED)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error("platform setting"))?;
        let allowances = sqlx::query_as(&sql($crate::quotas::ALLOWANCES))
            .bind(pool_owner_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("group"))?;
        let costs = sqlx::query_as(&sql($crate::quotas::WORKSPACE_COSTS))
            .bind(pool_owner_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("workspace"))?;
        let pool_costs = sqlx::query_as(&sql($crate::prebuilds::SNAPSHOT_POOL_COSTS))
            .bind(pool_owner_id)
            .bind(pool_owner_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("prebuild snapshot"))?;
        let quota_episodes = sqlx::query_as(&sql(
            "SELECT template_id, preset_name, since FROM prebuild_quota_episodes \
             ORDER BY template_id, preset_name",
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("prebuild snapshot"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        // Typed at the boundary: a value nobody wrote is an error, not "not paused".
        let paused = match paused.as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(StoreError::Database(sqlx::Error::Decode(
                    format!(
                        "platform setting {} is {other:?}, neither \"true\" nor \"false\"",
                        $crate::prebuilds::PREBUILDS_PAUSED
                    )
                    .into(),
                )))
            }
        };
        Ok(PrebuildSnapshot {
            versions,
            workspaces,
            failures,
            paused,
            allowances,
            costs,
            pool_costs,
            quota_episodes,
        })
    }

    pub(crate) async fn prebuild_pool_cost(
        &self,
        pool_owner_id: &str,
        version_id: &str,
        preset_name: &str,
    ) -> Result<Option<i64>, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT COALESCE(b.daily_cost, b.refused_cost) FROM builds b \
             JOIN workspaces w ON w.id = b.workspace_id \
             WHERE b.initiator_id = ? AND b.reason = 'prebuild' AND b.transition = 'start' \
                 AND b.template_version_id = ? AND w.preset_name = ? \
                 AND (b.daily_cost IS NOT NULL OR b.refused_cost IS NOT NULL) \
             ORDER BY b.created_at DESC, COALESCE(b.daily_cost, b.refused_cost) DESC LIMIT 1",
        ))
        .bind(pool_owner_id)
        .bind(version_id)
        .bind(preset_name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn set_prebuild_quota_episode(
        &self,
        template_id: &str,
        preset_name: &str,
        open: bool,
        notices: &[NewNotification],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let changed = if open {
            sqlx::query(&sql(
                "INSERT INTO prebuild_quota_episodes (template_id, preset_name, since) \
                 VALUES (?, ?, ?) ON CONFLICT (template_id, preset_name) DO NOTHING",
            ))
            .bind(template_id)
            .bind(preset_name)
            .bind(self.now_ms())
            .execute(&mut *tx)
            .await
        } else {
            sqlx::query(&sql(
                "DELETE FROM prebuild_quota_episodes WHERE template_id = ? AND preset_name = ?",
            ))
            .bind(template_id)
            .bind(preset_name)
            .execute(&mut *tx)
            .await
        }
        .map_err(db_error("prebuild quota episode"))?
        .rows_affected()
            == 1;
        if changed {
            self.insert_notifications(&mut tx, notices).await?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(changed)
    }

    pub(crate) async fn claim_prebuild(
        &self,
        claim: &PrebuildClaim,
    ) -> Result<PrebuildClaimed, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let picked: Option<String> = sqlx::query_scalar(&sql(&format!(
            "SELECT w.id FROM workspaces w \
             JOIN builds lb ON lb.workspace_id = w.id AND lb.number = ( \
                 SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
             WHERE w.owner_id = ? AND w.template_version_id = ? AND w.preset_name = ? \
                 AND w.deleted = FALSE AND w.created_at > ? \
                 AND lb.status = 'succeeded' AND lb.transition = 'start' \
                 AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.workspace_id = w.id \
                     AND (a.lifecycle IS NULL OR a.lifecycle <> 'ready' \
                          OR a.last_heartbeat_at IS NULL OR a.last_heartbeat_at < ?)) \
             ORDER BY w.created_at, w.id LIMIT 1 {}",
            $claim_lock
        )))
        .bind(&claim.pool_owner_id)
        .bind(&claim.version_id)
        .bind(&claim.preset_name)
        .bind(claim.created_after)
        .bind(claim.heartbeat_before)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("prebuilt workspace"))?;
        let Some(workspace_id) = picked else {
            return Ok(PrebuildClaimed::NoneReady);
        };
        if claim.enforce_quota {
            match self.claim_fits_budget(&mut tx, claim, &workspace_id).await {
                Ok(None) => {}
                Ok(Some(over)) => {
                    // Nothing was written: the pick's lock goes back now.
                    let _ = tx.rollback().await;
                    return Ok(over);
                }
                Err(error) => {
                    let _ = tx.rollback().await;
                    return Err(error);
                }
            }
        }
        let renamed = sqlx::query(&sql(
            "UPDATE workspaces SET owner_id = ?, name = ?, updated_at = ? \
             WHERE id = ? AND owner_id = ? AND deleted = FALSE",
        ))
        .bind(&claim.claimant_id)
        .bind(&claim.name)
        .bind(now)
        .bind(&workspace_id)
        .bind(&claim.pool_owner_id)
        .execute(&mut *tx)
        .await;
        if let Err(error) = renamed {
            // The picked row is given back now: a dropped transaction is
            // rolled back only when its connection is next used, and until
            // then another claim skips the row it still locks.
            let _ = tx.rollback().await;
            return Err(db_error("workspace name")(error));
        }
        let build = NewBuild {
            id: claim.build_id.clone(),
            workspace_id: workspace_id.clone(),
            transition: Transition::Start,
            template_version_id: claim.version_id.clone(),
            initiator_id: claim.initiator_id.clone(),
            reason: BuildReason::PrebuildClaim,
            parameters: None,
            workspace_parameters: None,
            retention: None,
            rename_to: None,
            then_start: false,
        };
        if let Err(error) = Self::insert_next_build(&mut tx, &build, now).await {
            let _ = tx.rollback().await;
            return Err(error);
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(PrebuildClaimed::Claimed(Box::new(
            self.build_by_id(&build.id).await?,
        )))
    }

    /// Within the claim's transaction: `None` when the picked prebuild's
    /// counted cost fits the claimant's budget (or is not known: the claim
    /// build's own plan is judged then), else the refusal. Locks the
    /// claimant's row first, as `reserve_build_cost` does, so a claim and a
    /// build of the same person are judged one after the other.
    async fn claim_fits_budget(
        &self,
        tx: &mut sqlx::Transaction<'_, $db>,
        claim: &PrebuildClaim,
        workspace_id: &str,
    ) -> Result<Option<PrebuildClaimed>, StoreError> {
        use $crate::quotas::{GroupAllowance, WorkspaceCost, ALLOWANCES, WORKSPACE_COSTS};
        sqlx::query(&sql("UPDATE users SET status = status WHERE id = ?"))
            .bind(&claim.claimant_id)
            .execute(&mut **tx)
            .await
            .map_err(db_error("user"))?;
        let cost: Option<i64> = sqlx::query_scalar(&sql(
            "SELECT b.daily_cost FROM builds b WHERE b.workspace_id = ? \
             AND b.daily_cost IS NOT NULL AND b.status NOT IN ('failed', 'canceled') \
             ORDER BY b.number DESC LIMIT 1",
        ))
        .bind(workspace_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error("build"))?;
        let Some(cost) = cost else {
            return Ok(None);
        };
        let allowances: Vec<GroupAllowance> = sqlx::query_as(&sql(ALLOWANCES))
            .bind(&claim.claimant_id)
            .fetch_all(&mut **tx)
            .await
            .map_err(db_error("group"))?;
        let workspaces: Vec<WorkspaceCost> = sqlx::query_as(&sql(WORKSPACE_COSTS))
            .bind(&claim.claimant_id)
            .fetch_all(&mut **tx)
            .await
            .map_err(db_error("workspace"))?;
        let usage = QuotaUsage { allowances, workspaces };
        if usage.spent().saturating_add(cost) > usage.budget() {
            return Ok(Some(PrebuildClaimed::OverBudget { usage, cost }));
        }
        Ok(None)
    }

    pub(crate) async fn platform_setting(&self, name: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar(&sql("SELECT value FROM platform_settings WHERE name = ?"))
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("platform setting"))
    }

    pub(crate) async fn set_platform_setting(
        &self,
        name: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "INSERT INTO platform_settings (name, value, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        ))
        .bind(name)
        .bind(value)
        .bind(self.now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("platform setting"))?;
        Ok(())
    }

    pub(crate) async fn try_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let taken = sqlx::query(&sql(
            "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
             expires_at = excluded.expires_at \
             WHERE leases.holder = excluded.holder OR leases.expires_at < ?",
        ))
        .bind(name)
        .bind(holder)
        .bind(now.saturating_add(ttl_ms))
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_error("lease"))?;
        Ok(taken.rows_affected() == 1)
    }
    };
}

pub(crate) use prebuild_queries;
