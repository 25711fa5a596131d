//! Job leases: a claimed job is held by one server, renewed while it lives;
//! at start a server finds only the running builds it held, and the builds of
//! a server that stopped renewing show once their lease has run out.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

async fn a_job_is_held_by_the_server_that_claimed_it_until_its_lease_runs_out(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (_, _, build) = seeded(&store).await;
    assert_eq!(store.job_lease_holder(&build.id).await.unwrap(), None);

    store
        .claim_job("embedded-0", "server-a", 30_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.job_lease_holder(&build.id).await.unwrap().as_deref(),
        Some("server-a")
    );
    assert_eq!(
        store.running_builds_of("server-a").await.unwrap(),
        std::slice::from_ref(&build.id)
    );
    assert!(store
        .running_builds_of("server-b")
        .await
        .unwrap()
        .is_empty());

    // Renewed, it never expires; only other servers see it expire.
    hand.advance(Duration::from_secs(20));
    assert_eq!(store.renew_job_leases("server-a", 30_000).await.unwrap(), 1);
    assert_eq!(store.renew_job_leases("server-b", 30_000).await.unwrap(), 0);
    hand.advance(Duration::from_secs(20));
    assert!(store
        .expired_job_leases("server-b")
        .await
        .unwrap()
        .is_empty());
    hand.advance(Duration::from_secs(11));
    let expired = store.expired_job_leases("server-b").await.unwrap();
    assert_eq!(
        expired,
        [ExpiredJobLease {
            build_id: build.id.clone(),
            holder: "server-a".into(),
            expires_at: start + 50_000,
        }]
    );
    assert!(store
        .expired_job_leases("server-a")
        .await
        .unwrap()
        .is_empty());

    // A finished build's job is no longer renewed nor expired.
    store
        .finish_build(&build.id, BuildStatus::Failed, Some("salvaged"))
        .await
        .unwrap();
    assert_eq!(store.renew_job_leases("server-a", 30_000).await.unwrap(), 0);
    assert!(store
        .expired_job_leases("server-b")
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .running_builds_of("server-a")
        .await
        .unwrap()
        .is_empty());
}

/// A job queued through one connection wakes a listener on another (every
/// server, on PostgreSQL); SQLite, with one server, has no announcements.
async fn queued_jobs_are_announced_to_every_listener(store: Store) {
    let Some(mut announcements) = store.job_announcements().await.unwrap() else {
        assert!(store.announce_job_queued().await.is_ok());
        return;
    };
    store.announce_job_queued().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), announcements.next())
        .await
        .expect("announced within 10 s")
        .unwrap();
}

/// People's builds are claimed before the system's, each kind oldest first.
async fn people_s_jobs_are_claimed_before_the_system_s(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    store.ensure_system_users().await.unwrap();
    let (user, workspace, person_first) = seeded(&store).await;
    store
        .cancel_pending_build(&person_first.id, "not this one")
        .await
        .unwrap();
    // Oldest first: the scheduler's, then a person's, then the scheduler's.
    let mut queued = Vec::new();
    for (index, initiator) in [
        SystemActor::Scheduler.user_id(),
        &user.id,
        SystemActor::Scheduler.user_id(),
    ]
    .into_iter()
    .enumerate()
    {
        hand.advance(Duration::from_secs(1));
        let workspace_id = new_id();
        let other = store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: user.id.clone(),
                    name: format!("w{index}"),
                    template_id: workspace.template_id.clone(),
                    template_version_id: workspace.template_version_id.clone(),
                    parameters: Parameters::new(),
                    preset_name: None,
                },
                &NewBuild {
                    workspace_id,
                    initiator_id: initiator.to_owned(),
                    ..next_build(&workspace, &user, "start")
                },
            )
            .await;
        let (_, build) = other.unwrap();
        queued.push(build.id);
    }
    let mut claimed = Vec::new();
    while let Some(job) = store.claim_job("w", "server", 60_000).await.unwrap() {
        claimed.push(job.build_id);
    }
    assert_eq!(
        claimed,
        [queued[1].clone(), queued[0].clone(), queued[2].clone()]
    );
}

/// A daemon renews the lease of each of its jobs on its own, and learns
/// the job's kind only while it holds it.
async fn one_job_s_lease_is_renewed_only_by_its_holder(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (_, _, build) = seeded(&store).await;
    let daemon = "provisioner:k/d-1";
    assert_eq!(
        store
            .claimed_job_kind(&build.id, daemon, Some("d-1-1"))
            .await
            .unwrap(),
        None
    );
    assert!(!store
        .renew_job_lease(&build.id, daemon, Some("d-1-1"), 3_000)
        .await
        .unwrap());
    store
        .claim_job("d-1-1", daemon, 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .claimed_job_kind(&build.id, daemon, Some("d-1-1"))
            .await
            .unwrap(),
        Some(JobKind::Build)
    );
    assert_eq!(
        store
            .claimed_job_kind(&build.id, "provisioner:k/other", None)
            .await
            .unwrap(),
        None
    );
    // The same holder through another of its workers (a run of the same
    // build that lost an earlier claim) does not hold this claim; any
    // worker of the holder does, when none is named.
    assert_eq!(
        store
            .claimed_job_kind(&build.id, daemon, Some("d-1-2"))
            .await
            .unwrap(),
        None
    );
    assert!(!store
        .renew_job_lease(&build.id, daemon, Some("d-1-2"), 3_000)
        .await
        .unwrap());
    assert_eq!(
        store
            .claimed_job_kind(&build.id, daemon, None)
            .await
            .unwrap(),
        Some(JobKind::Build)
    );

    hand.advance(Duration::from_secs(2));
    assert!(store
        .renew_job_lease(&build.id, daemon, Some("d-1-1"), 3_000)
        .await
        .unwrap());
    assert!(!store
        .renew_job_lease(&build.id, "provisioner:k/other", None, 3_000)
        .await
        .unwrap());
    hand.advance(Duration::from_secs(2));
    assert!(store
        .expired_job_leases("server-a")
        .await
        .unwrap()
        .is_empty());
    hand.advance(Duration::from_secs(2));
    assert_eq!(
        store.expired_job_leases("server-a").await.unwrap(),
        [ExpiredJobLease {
            build_id: build.id.clone(),
            holder: daemon.into(),
            expires_at: start + 5_000,
        }]
    );

    // Ended, the job is nobody's to renew or read.
    store
        .finish_build(&build.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    assert!(!store
        .renew_job_lease(&build.id, daemon, Some("d-1-1"), 3_000)
        .await
        .unwrap());
    assert_eq!(
        store
            .claimed_job_kind(&build.id, daemon, Some("d-1-1"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.job_lease_holder(&build.id).await.unwrap().as_deref(),
        Some(daemon)
    );
}

/// A build whose holder died before its plan was judged goes back to the
/// queue (nothing of it was applied); once judged, it never does.
async fn an_unjudged_build_of_a_dead_holder_is_queued_again(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (_, _, build) = seeded(&store).await;
    store
        .claim_job("w", "provisioner:k/dead", 3_000)
        .await
        .unwrap()
        .unwrap();
    hand.advance(Duration::from_secs(5));
    let expired = store.expired_job_leases("server-a").await.unwrap();
    assert_eq!(expired.len(), 1);
    assert!(store.requeue_unjudged_job(&expired[0]).await.unwrap());
    let again = store.build_by_id(&build.id).await.unwrap();
    assert_eq!(again.status, BuildStatus::Pending);
    assert_eq!(store.job_lease_holder(&build.id).await.unwrap(), None);
    // The same lease seen again changes nothing.
    assert!(!store.requeue_unjudged_job(&expired[0]).await.unwrap());

    // Claimed again and judged, its holder dying fails it instead.
    let claimed = store
        .claim_job("w", "server-b", 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.build_id, build.id);
    store
        .set_build_plan(&build.id, "{}", &report(abode_guard::Decision::Allow))
        .await
        .unwrap();
    hand.advance(Duration::from_secs(5));
    let expired = store.expired_job_leases("server-a").await.unwrap();
    assert_eq!(expired.len(), 1);
    assert!(!store.requeue_unjudged_job(&expired[0]).await.unwrap());
    assert_eq!(
        store.build_by_id(&build.id).await.unwrap().status,
        BuildStatus::Running
    );
}

on_every_backend!(
    an_unjudged_build_of_a_dead_holder_is_queued_again,
    one_job_s_lease_is_renewed_only_by_its_holder,
    a_job_is_held_by_the_server_that_claimed_it_until_its_lease_runs_out,
    queued_jobs_are_announced_to_every_listener,
    people_s_jobs_are_claimed_before_the_system_s,
);
