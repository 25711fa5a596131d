//! Prebuilt workspaces (`prebuilds.rs`): the reconciliation's snapshot in
//! one transaction, the claim of a ready prebuild (one claimant each, also
//! when several ask at once), platform settings and leases.

use std::time::Duration;

use abode_clock::{Clock, ManualClock};
use abode_store::*;

use crate::common::*;

/// The store on a manual clock, so that each prebuild is a second younger
/// than the one before (the snapshot orders and counts failures by time).
fn on_manual_clock(store: Store) -> (Store, ManualClock) {
    let (clock, hand) = Clock::manual(1_700_000_000_000);
    (store.with_clock(clock), hand)
}

const PRESETS: &str =
    r#"[{"name":"small","parameters":{},"prebuilds":{"instances":2,"ttl_seconds":0}}]"#;

/// An owner, a template whose active version offers the `small` preset,
/// and the `prebuilds` system user.
async fn pool(store: &Store) -> (User, Template, TemplateVersion) {
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
            parameters: Some("[]".into()),
            presets: Some(PRESETS.into()),
            activate: true,
        })
        .await
        .unwrap();
    (owner, template, version)
}

fn pool_owner() -> String {
    SystemActor::Prebuilds.user_id().to_string()
}

/// A prebuilt workspace of `small` whose first build ended `status`, with
/// one agent that is ready (heartbeat now) when `ready`.
async fn prebuild(
    (store, hand): (&Store, &ManualClock),
    template: &Template,
    version: &TemplateVersion,
    name: &str,
    status: Option<BuildStatus>,
    ready: bool,
) -> (Workspace, Build) {
    hand.advance(Duration::from_secs(1));
    let workspace_id = new_id();
    let (workspace, build) = store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id.clone(),
                owner_id: pool_owner(),
                name: name.into(),
                template_id: template.id.clone(),
                template_version_id: version.id.clone(),
                parameters: "{}".into(),
                preset_name: Some("small".into()),
            },
            &NewBuild {
                id: new_id(),
                workspace_id,
                transition: Transition::Start,
                template_version_id: version.id.clone(),
                initiator_id: pool_owner(),
                reason: BuildReason::Prebuild,
                parameters: None,
                workspace_parameters: None,
            },
        )
        .await
        .unwrap();
    if let Some(status) = status {
        store.claim_job("worker").await.unwrap();
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
                        dir: None,
                        env: "{}".into(),
                    }],
                )
                .await
                .unwrap();
            if ready {
                let agent = store.agent_by_token_hash(&hash).await.unwrap();
                store
                    .agent_heartbeat(&agent.id, Some(AgentLifecycle::Ready))
                    .await
                    .unwrap();
            }
        }
    }
    (workspace, build)
}

async fn the_snapshot_reads_pools_workspaces_failures_and_the_pause(store: Store) {
    let (store, hand) = on_manual_clock(store);
    let (_, template, version) = pool(&store).await;
    let (ready, _) = prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-ready",
        Some(BuildStatus::Succeeded),
        true,
    )
    .await;
    let (starting, _) = prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-starting",
        Some(BuildStatus::Succeeded),
        false,
    )
    .await;
    prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-failed",
        Some(BuildStatus::Failed),
        false,
    )
    .await;
    let (pending, pending_build) = prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-pending",
        None,
        false,
    )
    .await;

    let snapshot = store.prebuild_snapshot(&pool_owner(), 0).await.unwrap();
    assert_eq!(
        snapshot.versions,
        vec![VersionPresets {
            template_id: template.id.clone(),
            template_name: "base".into(),
            version_id: version.id.clone(),
            version_number: 1,
            active: true,
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
}

async fn a_claim_takes_the_oldest_ready_prebuild_once(store: Store) {
    let (store, hand) = on_manual_clock(store);
    let (owner, template, version) = pool(&store).await;
    prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-starting",
        Some(BuildStatus::Succeeded),
        false,
    )
    .await;
    let (first, _) = prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-first",
        Some(BuildStatus::Succeeded),
        true,
    )
    .await;
    let (second, _) = prebuild(
        (&store, &hand),
        &template,
        &version,
        "p-second",
        Some(BuildStatus::Succeeded),
        true,
    )
    .await;
    let claim = |name: &str| PrebuildClaim {
        pool_owner_id: pool_owner(),
        version_id: version.id.clone(),
        preset_name: "small".into(),
        claimant_id: owner.id.clone(),
        name: name.into(),
        initiator_id: owner.id.clone(),
        heartbeat_before: 0,
        created_after: i64::MIN,
        build_id: new_id(),
    };

    // Prebuilds created at or before the ttl's cutoff have expired.
    let expired = PrebuildClaim {
        created_after: second.created_at,
        ..claim("late")
    };
    assert!(store.claim_prebuild(&expired).await.unwrap().is_none());

    let build = store.claim_prebuild(&claim("mine")).await.unwrap().unwrap();
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
        .unwrap();
    assert_eq!(build.workspace_id, second.id);
    // Only a prebuild whose agent is not ready is left: none to claim.
    assert!(store
        .claim_prebuild(&claim("third"))
        .await
        .unwrap()
        .is_none());
}

async fn concurrent_claims_get_different_prebuilds(store: Store) {
    let (store, hand) = on_manual_clock(store);
    let (owner, template, version) = pool(&store).await;
    for index in 0..4 {
        prebuild(
            (&store, &hand),
            &template,
            &version,
            &format!("p-{index}"),
            Some(BuildStatus::Succeeded),
            true,
        )
        .await;
    }
    let claims: Vec<_> = (0..6)
        .map(|index| {
            let store = store.clone();
            let claim = PrebuildClaim {
                pool_owner_id: pool_owner(),
                version_id: version.id.clone(),
                preset_name: "small".into(),
                claimant_id: owner.id.clone(),
                name: format!("mine-{index}"),
                initiator_id: owner.id.clone(),
                heartbeat_before: 0,
                created_after: i64::MIN,
                build_id: new_id(),
            };
            tokio::spawn(async move { store.claim_prebuild(&claim).await })
        })
        .collect();
    let mut claimed = Vec::new();
    for claim in claims {
        if let Some(build) = claim.await.unwrap().unwrap() {
            claimed.push(build.workspace_id);
        }
    }
    claimed.sort();
    let before = claimed.len();
    claimed.dedup();
    assert_eq!(claimed.len(), before, "a prebuild went to two claimants");
    assert_eq!(claimed.len(), 4, "every ready prebuild was claimed once");
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
    a_lease_is_held_by_one_holder_until_it_expires,
);
