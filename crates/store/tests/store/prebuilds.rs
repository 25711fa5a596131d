//! Prebuilt workspaces (`prebuilds.rs`): the reconciliation's snapshot in
//! one transaction, the claim of a ready prebuild (one claimant each, also
//! when several ask at once), platform settings and leases.

use std::time::Duration;

use abode_clock::{Clock, ManualClock};
use abode_store::*;

use crate::common::*;

const PRESETS: &str =
    r#"[{"name":"small","parameters":{},"prebuilds":{"instances":2,"ttl_seconds":0}}]"#;

/// A template whose active version offers the `small` preset, its owner,
/// and the store on a manual clock: each prebuild added is a second younger
/// than the one before (the snapshot orders and counts failures by time).
struct Pool {
    store: Store,
    hand: ManualClock,
    owner: User,
    template: Template,
    version: TemplateVersion,
}

/// Where a prebuild's first build ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Succeeded, its agent ready.
    Ready,
    /// Succeeded, its agent not ready yet.
    Starting,
    Failed,
    /// Not picked up by a worker yet.
    Pending,
}

impl Pool {
    async fn new(store: Store) -> Pool {
        let (clock, hand) = Clock::manual(1_700_000_000_000);
        let store = store.with_clock(clock);
        let owner = store.create_first_user(&new_user("alice")).await.unwrap();
        store.ensure_system_users().await.unwrap();
        let (template, version) = store
            .create_template_version(&NewTemplateVersion {
                template_name: "base".into(),
                archive: vec![1],
                archive_sha256: "abc".into(),
                message: "first".into(),
                created_by: owner.id.clone(),
                validation_ok: true,
                validation_message: "ok".into(),
                parameters: Some(Vec::new()),
                presets: Some(PRESETS.into()),
                activate: true,
            })
            .await
            .unwrap();
        Pool {
            store,
            hand,
            owner,
            template,
            version,
        }
    }

    /// A prebuilt workspace of `small` whose first build ended as `end`
    /// (with one agent when it succeeded).
    async fn add(&self, name: &str, end: End) -> (Workspace, Build) {
        self.add_costing(name, end, None).await
    }

    /// [`Pool::add`], its first build costing `cost` a day when it has one.
    async fn add_costing(&self, name: &str, end: End, cost: Option<i64>) -> (Workspace, Build) {
        let store = &self.store;
        self.hand.advance(Duration::from_secs(1));
        let workspace_id = new_id();
        let (workspace, build) = store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: pool_owner(),
                    name: name.into(),
                    template_id: self.template.id.clone(),
                    template_version_id: self.version.id.clone(),
                    parameters: Parameters::new(),
                    preset_name: Some("small".into()),
                },
                &NewBuild {
                    id: new_id(),
                    workspace_id,
                    transition: Transition::Start,
                    template_version_id: self.version.id.clone(),
                    initiator_id: pool_owner(),
                    reason: BuildReason::Prebuild,
                    parameters: None,
                    workspace_parameters: None,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await
            .unwrap();
        if end == End::Pending {
            return (workspace, build);
        }
        store.claim_job("worker", "server", 60_000).await.unwrap();
        if let Some(cost) = cost {
            let reserved = store
                .reserve_build_cost(&build.id, "server", cost, false)
                .await
                .unwrap();
            assert_eq!(reserved, Reservation::Reserved);
        }
        let status = if end == End::Failed {
            BuildStatus::Failed
        } else {
            BuildStatus::Succeeded
        };
        assert!(store.finish_build(&build.id, status, None).await.unwrap());
        if status == BuildStatus::Succeeded {
            let hash = format!("hash-{name}");
            store
                .replace_agents(
                    &workspace.id,
                    &build.id,
                    &[NewAgent {
                        name: "main".into(),
                        token_hash: hash.clone(),
                        startup_script: None,
                        claim_script: None,
                        settings: Default::default(),
                        dir: None,
                        env: "{}".into(),
                        apps: Vec::new(),
                    }],
                )
                .await
                .unwrap();
            if end == End::Ready {
                let agent = store.agent_by_token_hash(&hash).await.unwrap();
                store
                    .agent_heartbeat(&agent.id, Some(AgentLifecycle::Ready))
                    .await
                    .unwrap();
            }
        }
        (workspace, build)
    }

    /// A claim of a `small` prebuild by the owner, as `name`.
    fn claim(&self, name: &str) -> PrebuildClaim {
        PrebuildClaim {
            pool_owner_id: pool_owner(),
            version_id: self.version.id.clone(),
            preset_name: "small".into(),
            claimant_id: self.owner.id.clone(),
            name: name.into(),
            initiator_id: self.owner.id.clone(),
            heartbeat_before: 0,
            created_after: i64::MIN,
            build_id: new_id(),
            enforce_quota: false,
        }
    }
}

fn pool_owner() -> String {
    SystemActor::Prebuilds.user_id().to_string()
}

async fn the_snapshot_reads_pools_workspaces_failures_and_the_pause(store: Store) {
    let pool = Pool::new(store).await;
    let (store, template, version) = (&pool.store, &pool.template, &pool.version);
    let (ready, _) = pool.add("p-ready", End::Ready).await;
    let (starting, _) = pool.add("p-starting", End::Starting).await;
    pool.add("p-failed", End::Failed).await;
    let (pending, pending_build) = pool.add("p-pending", End::Pending).await;

    let snapshot = store.prebuild_snapshot(&pool_owner(), 0).await.unwrap();
    assert_eq!(
        snapshot.versions,
        vec![VersionPresets {
            template_id: template.id.clone(),
            template_name: "base".into(),
            version_id: version.id.clone(),
            version_number: 1,
            active: true,
            deprecated: false,
            presets: PRESETS.into(),
        }]
    );
    let seen: Vec<(&str, BuildStatus, bool, i64, i64)> = snapshot
        .workspaces
        .iter()
        .map(|row| {
            (
                row.name.as_str(),
                row.build_status,
                row.build_queued,
                row.agents,
                row.agents_ready,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("p-ready", BuildStatus::Succeeded, false, 1, 1),
            ("p-starting", BuildStatus::Succeeded, false, 1, 0),
            ("p-failed", BuildStatus::Failed, false, 0, 0),
            ("p-pending", BuildStatus::Pending, true, 0, 0),
        ]
    );
    assert_eq!(snapshot.workspaces[3].build_id, pending_build.id);
    assert_eq!(snapshot.workspaces[0].workspace_id, ready.id);
    assert_eq!(snapshot.workspaces[1].workspace_id, starting.id);
    assert_eq!(snapshot.workspaces[3].workspace_id, pending.id);
    // The failed start came after the pool's last success (p-starting's).
    assert_eq!(snapshot.failures.len(), 1, "{:?}", snapshot.failures);
    assert_eq!(snapshot.failures[0].preset_name, "small");
    assert_eq!(snapshot.failures[0].consecutive_failures, 1);
    assert!(snapshot.failures[0].last_failure_at.is_some());
    assert!(!snapshot.paused);

    // A heartbeat older than the cutoff is not ready.
    let later = store
        .prebuild_snapshot(&pool_owner(), i64::MAX)
        .await
        .unwrap();
    assert_eq!(later.workspaces[0].agents_ready, 0);

    store
        .set_platform_setting(PREBUILDS_PAUSED, "true")
        .await
        .unwrap();
    assert!(
        store
            .prebuild_snapshot(&pool_owner(), 0)
            .await
            .unwrap()
            .paused
    );
    assert_eq!(
        store
            .platform_setting(PREBUILDS_PAUSED)
            .await
            .unwrap()
            .as_deref(),
        Some("true")
    );
    store
        .set_platform_setting(PREBUILDS_PAUSED, "false")
        .await
        .unwrap();
    assert!(
        !store
            .prebuild_snapshot(&pool_owner(), 0)
            .await
            .unwrap()
            .paused
    );
    // A value nobody writes is an error naming it, never "not paused".
    store
        .set_platform_setting(PREBUILDS_PAUSED, "yes")
        .await
        .unwrap();
    let error = store
        .prebuild_snapshot(&pool_owner(), 0)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("\"yes\""), "{error}");
}

async fn a_claim_takes_the_oldest_ready_prebuild_once(store: Store) {
    let pool = Pool::new(store).await;
    let (store, owner) = (&pool.store, &pool.owner);
    pool.add("p-starting", End::Starting).await;
    let (first, _) = pool.add("p-first", End::Ready).await;
    let (second, _) = pool.add("p-second", End::Ready).await;
    let claim = |name: &str| pool.claim(name);

    // Prebuilds created at or before the ttl's cutoff have expired.
    let expired = PrebuildClaim {
        created_after: second.created_at,
        ..claim("late")
    };
    assert!(store
        .claim_prebuild(&expired)
        .await
        .unwrap()
        .into_build()
        .is_none());

    let build = store
        .claim_prebuild(&claim("mine"))
        .await
        .unwrap()
        .into_build()
        .unwrap();
    assert_eq!(build.workspace_id, first.id, "the oldest ready one");
    assert_eq!(build.reason, BuildReason::PrebuildClaim);
    assert_eq!(build.transition, Transition::Start);
    assert_eq!(build.number, 2);
    let claimed = store.workspace_by_id(&first.id).await.unwrap();
    assert_eq!(
        (claimed.owner_id.as_str(), claimed.name.as_str()),
        (owner.id.as_str(), "mine")
    );

    // The claimant's names are theirs: a second "mine" is a conflict and
    // leaves the pool as it was.
    let taken = store.claim_prebuild(&claim("mine")).await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert_eq!(
        store.workspace_by_id(&second.id).await.unwrap().owner_id,
        pool_owner()
    );

    let build = store
        .claim_prebuild(&claim("other"))
        .await
        .unwrap()
        .into_build()
        .unwrap();
    assert_eq!(build.workspace_id, second.id);
    // Only a prebuild whose agent is not ready is left: none to claim.
    assert!(store
        .claim_prebuild(&claim("third"))
        .await
        .unwrap()
        .into_build()
        .is_none());
}

async fn concurrent_claims_get_different_prebuilds(store: Store) {
    let pool = Pool::new(store).await;
    for index in 0..4 {
        pool.add(&format!("p-{index}"), End::Ready).await;
    }
    let claims: Vec<_> = (0..6)
        .map(|index| {
            let store = pool.store.clone();
            let claim = pool.claim(&format!("mine-{index}"));
            tokio::spawn(async move { store.claim_prebuild(&claim).await })
        })
        .collect();
    let mut claimed = Vec::new();
    for claim in claims {
        if let Some(build) = claim.await.unwrap().unwrap().into_build() {
            claimed.push(build.workspace_id);
        }
    }
    claimed.sort();
    let before = claimed.len();
    claimed.dedup();
    assert_eq!(claimed.len(), before, "a prebuild went to two claimants");
    assert_eq!(claimed.len(), 4, "every ready prebuild was claimed once");
}

/// Quotas enforced: a claim whose prebuild would take the claimant past
/// their budget changes nothing (the prebuild stays the pool's, under its
/// name, with no new build); with room, the same prebuild is claimed; a
/// prebuild whose cost is not known is claimed, for its claim build's plan
/// to be judged.
async fn a_claim_over_the_claimants_budget_leaves_the_prebuild_in_its_pool(store: Store) {
    let pool = Pool::new(store).await;
    let (store, owner) = (&pool.store, &pool.owner);
    let (costly, first) = pool.add_costing("p-costly", End::Ready, Some(5)).await;
    let (unknown, _) = pool.add("p-unknown", End::Ready).await;
    let payers = store
        .create_group(&NewGroup {
            name: "payers".into(),
            display_name: String::new(),
            source: GroupSource::Manual,
            quota_allowance: 4,
        })
        .await
        .unwrap();
    store
        .change_group_members(&payers.id, std::slice::from_ref(&owner.id), &[])
        .await
        .unwrap();
    let enforced = |name: &str| PrebuildClaim {
        enforce_quota: true,
        ..pool.claim(name)
    };

    match store.claim_prebuild(&enforced("mine")).await.unwrap() {
        PrebuildClaimed::OverBudget { usage, cost } => {
            assert_eq!((cost, usage.spent(), usage.budget()), (5, 0, 4));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let kept = store.workspace_by_id(&costly.id).await.unwrap();
    assert_eq!(
        (kept.owner_id.as_str(), kept.name.as_str()),
        (pool_owner().as_str(), "p-costly")
    );
    let latest = store.latest_build(&costly.id).await.unwrap();
    assert_eq!(latest.id, first.id, "no claim build was queued");
    assert!(store
        .quota_usage(&owner.id)
        .await
        .unwrap()
        .workspaces
        .is_empty());

    // Not enforced, or with room: the same (oldest) prebuild is claimed.
    store
        .update_group(
            &payers.id,
            &NewGroup {
                name: "payers".into(),
                display_name: String::new(),
                source: GroupSource::Manual,
                quota_allowance: 5,
            },
        )
        .await
        .unwrap();
    let build = store
        .claim_prebuild(&enforced("mine"))
        .await
        .unwrap()
        .into_build()
        .expect("claimed");
    assert_eq!(build.workspace_id, costly.id);
    assert_eq!(store.quota_usage(&owner.id).await.unwrap().spent(), 5);

    // The budget is used up, but a prebuild of unknown cost is claimed:
    // its claim build's own plan is what the quota step judges.
    let build = store
        .claim_prebuild(&enforced("next"))
        .await
        .unwrap()
        .into_build()
        .expect("claimed");
    assert_eq!(build.workspace_id, unknown.id);
}

/// The budget facts of the snapshot: the pool owner's allowances, its
/// workspaces' counted costs, each pool's last known cost (a refused plan's
/// included), and the open episodes; a build refused by quota is no
/// failure of the pool.
async fn the_snapshot_reads_the_pools_budget_and_a_refusal_is_no_failure(store: Store) {
    let pool = Pool::new(store).await;
    let (store, template) = (&pool.store, &pool.template);
    let group = store
        .create_group(&NewGroup {
            name: "pool".into(),
            display_name: String::new(),
            source: GroupSource::Manual,
            quota_allowance: 7,
        })
        .await
        .unwrap();
    store
        .change_group_members(&group.id, &[pool_owner()], &[])
        .await
        .unwrap();
    let (costly, _) = pool.add_costing("p-a", End::Ready, Some(5)).await;
    let (refused, build) = pool.add("p-b", End::Pending).await;
    store.claim_job("worker", "server", 60_000).await.unwrap();
    match store
        .reserve_build_cost(&build.id, "server", 6, true)
        .await
        .unwrap()
    {
        Reservation::OverBudget { usage, cost } => {
            assert_eq!((usage.spent(), usage.budget(), cost), (5, 7, 6))
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(store
        .finish_build(&build.id, BuildStatus::Failed, Some("refused by quota"))
        .await
        .unwrap());
    let refused_build = store.build_by_id(&build.id).await.unwrap();
    assert_eq!(
        (refused_build.daily_cost, refused_build.refusal.as_deref()),
        (None, Some("quota"))
    );

    let snapshot = store.prebuild_snapshot(&pool_owner(), 0).await.unwrap();
    let allowances: Vec<(&str, i64)> = snapshot
        .allowances
        .iter()
        .map(|group| (group.group.as_str(), group.allowance))
        .collect();
    assert_eq!(allowances, [("pool", 7)], "no Everyone for a system actor");
    let costs: Vec<(&str, i64)> = snapshot
        .costs
        .iter()
        .map(|cost| (cost.workspace_id.as_str(), cost.daily_cost))
        .collect();
    assert_eq!(
        costs,
        [(costly.id.as_str(), 5)],
        "the refused one costs nothing"
    );
    assert_ne!(refused.id, costly.id);
    assert_eq!(
        snapshot.pool_costs,
        [PoolCost {
            version_id: pool.version.id.clone(),
            preset_name: "small".into(),
            daily_cost: 6,
        }],
        "the newest costed plan: the refused one's"
    );
    assert!(
        snapshot
            .failures
            .iter()
            .all(|pool| pool.consecutive_failures == 0 && pool.last_failure_at.is_none()),
        "{:?}",
        snapshot.failures
    );
    assert!(snapshot.quota_episodes.is_empty());

    // An episode opens once and ends once; its notices are written only
    // with the change.
    let told = |kind| NewNotification {
        id: new_id(),
        kind,
        recipient_id: pool.owner.id.clone(),
        channel: Channel::Inbox,
        payload: "{}".into(),
        dedupe_key: new_id(),
    };
    for (open, changed) in [(true, true), (true, false), (false, true), (false, false)] {
        let kind = if open {
            NotificationKind::PresetQuotaLimited
        } else {
            NotificationKind::PresetQuotaRecovered
        };
        let notice = told(kind);
        assert_eq!(
            store
                .set_prebuild_quota_episode(
                    &template.id,
                    "small",
                    open,
                    std::slice::from_ref(&notice)
                )
                .await
                .unwrap(),
            changed,
            "open {open}"
        );
        assert_eq!(
            store.notification_by_id(&notice.id).await.is_ok(),
            changed,
            "open {open}"
        );
        let episodes = store
            .prebuild_snapshot(&pool_owner(), 0)
            .await
            .unwrap()
            .quota_episodes;
        let open_now: Vec<(&str, &str)> = episodes
            .iter()
            .map(|episode| (episode.template_id.as_str(), episode.preset_name.as_str()))
            .collect();
        if open {
            assert_eq!(open_now, [(template.id.as_str(), "small")]);
        } else {
            assert!(open_now.is_empty());
        }
    }
}

async fn a_lease_is_held_by_one_holder_until_it_expires(store: Store) {
    assert!(store.try_lease("work", "server-a", 60_000).await.unwrap());
    assert!(
        store.try_lease("work", "server-a", 60_000).await.unwrap(),
        "renewed"
    );
    assert!(!store.try_lease("work", "server-b", 60_000).await.unwrap());
    assert!(store.try_lease("other", "server-b", 60_000).await.unwrap());
    // An expired lease (a negative time-to-live ends it at once) is taken over.
    assert!(store.try_lease("work", "server-a", -1).await.unwrap());
    assert!(store.try_lease("work", "server-b", 60_000).await.unwrap());
    assert!(!store.try_lease("work", "server-a", 60_000).await.unwrap());
}

on_every_backend!(
    the_snapshot_reads_pools_workspaces_failures_and_the_pause,
    a_claim_takes_the_oldest_ready_prebuild_once,
    concurrent_claims_get_different_prebuilds,
    a_claim_over_the_claimants_budget_leaves_the_prebuild_in_its_pool,
    the_snapshot_reads_the_pools_budget_and_a_refusal_is_no_failure,
    a_lease_is_held_by_one_holder_until_it_expires,
);
