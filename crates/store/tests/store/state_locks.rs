//! The fence of each workspace's state (`state_locks.rs`): one run holds a
//! workspace's lock; a state is written only by the run holding it (and the
//! Terraform lock it names), in the write's own transaction; a job of a
//! workspace another build keeps locked is not claimed.

use abode_store::*;

use crate::common::*;

fn state(serial: u64) -> Vec<u8> {
    format!(r#"{{"version":4,"serial":{serial},"lineage":"l","resources":[]}}"#).into_bytes()
}

/// A state write: the run's secret, the Terraform lock it names, the state
/// it compares with, what it comes to.
type WriteCase = (
    &'static str,
    Option<&'static str>,
    Option<Vec<u8>>,
    FencedWrite,
);

async fn only_the_run_holding_the_lock_writes_the_state(store: Store) {
    let (_, workspace, build) = seeded(&store).await;
    let (ws, id) = (workspace.id.as_str(), build.id.as_str());
    assert!(store
        .take_state_lock(ws, id, "server-a", "run-1")
        .await
        .unwrap());
    // One lock per workspace.
    assert!(!store
        .take_state_lock(ws, id, "server-b", "run-2")
        .await
        .unwrap());
    let lock = store.state_lock_of_workspace(ws).await.unwrap().unwrap();
    assert_eq!(
        (lock.build_number, lock.holder.as_str(), lock.lost_at),
        (build.number, "server-a", None)
    );

    // Terraform's lock, under the run's: another secret or another lock id
    // is refused.
    assert!(!store
        .set_terraform_lock(id, "run-2", "tf-1", "{}")
        .await
        .unwrap());
    assert!(store
        .set_terraform_lock(id, "run-1", "tf-1", "{}")
        .await
        .unwrap());
    assert!(!store
        .set_terraform_lock(id, "run-1", "tf-2", "{}")
        .await
        .unwrap());

    let cases: [WriteCase; 5] = [
        ("run-2", None, None, FencedWrite::Fenced),
        ("run-1", Some("tf-2"), None, FencedWrite::Fenced),
        ("run-1", Some("tf-1"), None, FencedWrite::Written),
        // Compared with a state that is no longer the stored one.
        ("run-1", Some("tf-1"), Some(state(0)), FencedWrite::Raced),
        ("run-1", None, Some(state(3)), FencedWrite::Written),
    ];
    for (serial, (secret, tf_lock, previous, expected)) in cases.into_iter().enumerate() {
        let written = store
            .put_state_fenced(
                ws,
                id,
                &StateFence {
                    secret_hash: secret,
                    terraform_lock_id: tf_lock,
                },
                &state(serial as u64 + 1),
                previous.as_deref(),
                Placement::Nowhere,
            )
            .await
            .unwrap();
        assert_eq!(written, expected, "case {serial}");
    }
    assert_eq!(store.state(ws).await.unwrap(), Some(state(5)));

    assert!(!store
        .clear_terraform_lock(id, "run-1", "tf-2")
        .await
        .unwrap());
    assert!(store
        .clear_terraform_lock(id, "run-1", "tf-1")
        .await
        .unwrap());
    // A person's unlock: the run's secret opens nothing any more.
    assert!(store.force_release_state_lock(ws, id).await.unwrap());
    assert_eq!(
        store
            .put_state_fenced(
                ws,
                id,
                &StateFence {
                    secret_hash: "run-1",
                    terraform_lock_id: None
                },
                &state(9),
                Some(&state(5)),
                Placement::Nowhere
            )
            .await
            .unwrap(),
        FencedWrite::Fenced
    );
    assert!(!store.release_state_lock(id, "run-1").await.unwrap());
    assert!(store.state_lock_of_workspace(ws).await.unwrap().is_none());
}

async fn a_lost_holders_lock_stays_and_keeps_other_builds_waiting(store: Store) {
    let (clock, hand) = abode_clock::Clock::manual(1_000_000_000_000);
    let store = store.with_clock(clock);
    let (user, workspace, build) = seeded(&store).await;
    let claimed = store
        .claim_job("embedded-0", "server-a", 10_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.build_id, build.id);
    assert!(store
        .take_state_lock(&workspace.id, &build.id, "server-a", "run-1")
        .await
        .unwrap());
    // Its apply holds Terraform's lock.
    assert!(store
        .set_terraform_lock(&build.id, "run-1", "tf-apply", "{}")
        .await
        .unwrap());
    // Its plan was judged; its holder stops renewing: the build is failed,
    // the lock kept and marked lost.
    store
        .set_build_plan(&build.id, "{}", &report(abode_guard::Decision::Allow))
        .await
        .unwrap();
    hand.advance(std::time::Duration::from_secs(11));
    let expired = store.expired_job_leases("server-b").await.unwrap();
    assert!(!store.requeue_unjudged_job(&expired[0]).await.unwrap());
    assert!(store.salvage_build(&expired[0], "lost", &[]).await.unwrap());
    let lock = store
        .state_lock_of_workspace(&workspace.id)
        .await
        .unwrap()
        .unwrap();
    assert!(lock.lost_at.is_some());
    // The apply under way still writes under its lock; no new Terraform of
    // the lost run (an apply about to start when it froze) takes one.
    assert_eq!(
        store
            .put_state_fenced(
                &workspace.id,
                &build.id,
                &StateFence {
                    secret_hash: "run-1",
                    terraform_lock_id: Some("tf-apply")
                },
                &state(1),
                None,
                Placement::Nowhere,
            )
            .await
            .unwrap(),
        FencedWrite::Written
    );
    assert!(store
        .clear_terraform_lock(&build.id, "run-1", "tf-apply")
        .await
        .unwrap());
    assert!(!store
        .set_terraform_lock(&build.id, "run-1", "tf-late", "{}")
        .await
        .unwrap());

    // The next build of the workspace waits while that lock is there.
    let next = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    assert!(store
        .claim_job("embedded-0", "server-b", 10_000)
        .await
        .unwrap()
        .is_none());
    // Its holder reports its Terraform ended: the next build is claimed.
    assert!(store.release_state_lock(&build.id, "run-1").await.unwrap());
    let claimed = store
        .claim_job("embedded-0", "server-b", 10_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.build_id, next.id);
}

async fn a_requeued_builds_lock_goes_with_it(store: Store) {
    let (clock, hand) = abode_clock::Clock::manual(1_000_000_000_000);
    let store = store.with_clock(clock);
    let (_, workspace, build) = seeded(&store).await;
    store
        .claim_job("embedded-0", "server-a", 10_000)
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .take_state_lock(&workspace.id, &build.id, "server-a", "run-1")
        .await
        .unwrap());
    hand.advance(std::time::Duration::from_secs(11));
    let expired = store.expired_job_leases("server-b").await.unwrap();
    assert!(store.requeue_unjudged_job(&expired[0]).await.unwrap());
    // Nothing of it was applied: the lock is gone, the next run takes its own.
    assert!(store
        .state_lock_of_workspace(&workspace.id)
        .await
        .unwrap()
        .is_none());
    store
        .claim_job("embedded-0", "server-b", 10_000)
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .take_state_lock(&workspace.id, &build.id, "server-b", "run-2")
        .await
        .unwrap());
}

on_every_backend!(
    only_the_run_holding_the_lock_writes_the_state,
    a_lost_holders_lock_stays_and_keeps_other_builds_waiting,
    a_requeued_builds_lock_goes_with_it,
);
