//! The store's clock (`Store::with_clock`): every time the store writes
//! (created, started, finished, logged, audited) is the clock's, so that a
//! test that moves the clock sees it in the records.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

async fn every_stored_time_comes_from_the_stores_clock(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    assert_eq!(store.clock().now_ms(), start);

    let (user, workspace, build) = seeded(&store).await;
    assert_eq!(user.created_at, start);
    assert_eq!((workspace.created_at, build.created_at), (start, start));

    hand.advance(Duration::from_secs(60));
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    store
        .append_log(
            &build.id,
            &NewLogLine {
                stage: LogStage::PLAN,
                level: LogLevel::Info,
                text: "planning".into(),
            },
        )
        .await
        .unwrap();
    hand.advance(Duration::from_secs(60));
    store
        .finish_build(&build.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    store
        .record_audit(&NewAuditEvent {
            actor_id: Some(user.id.clone()),
            actor_name: Some(user.username.clone()),
            action: "login".into(),
            target_type: "user".into(),
            target: user.username.clone(),
            outcome: "success".into(),
            request_id: None,
            details: None,
            workspace_id: None,
        })
        .await
        .unwrap();

    let build = store.build_by_id(&build.id).await.unwrap();
    assert_eq!(
        (build.started_at, build.finished_at),
        (Some(start + 60_000), Some(start + 120_000))
    );
    let logs = store.logs_after(&build.id, 0, 10).await.unwrap();
    assert_eq!(
        logs.iter().map(|line| line.time).collect::<Vec<_>>(),
        [start + 60_000]
    );
    let audit = store
        .list_audit(&AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        audit
            .items
            .iter()
            .map(|event| event.time)
            .collect::<Vec<_>>(),
        [start + 120_000]
    );
}

on_every_backend!(every_stored_time_comes_from_the_stores_clock);
