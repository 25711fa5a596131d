//! The platform's counts for metrics (`platform.rs`): one query over held
//! builds, the job queue and agents, with the caller's cutoffs.

use abode_store::*;

use crate::common::*;

async fn platform_counts_count_the_queue_and_agents_by_status(store: Store) {
    let empty = store
        .platform_counts(AgentCutoffs {
            connect_before: 0,
            heartbeat_before: 0,
        })
        .await
        .unwrap();
    assert_eq!(empty, PlatformCounts::default());

    let (user, workspace, build) = seeded(&store).await;
    let queued = store
        .platform_counts(AgentCutoffs {
            connect_before: 0,
            heartbeat_before: 0,
        })
        .await
        .unwrap();
    assert_eq!((queued.builds_held, queued.jobs_pending), (0, 1));
    let oldest = queued.oldest_pending_job_at.expect("a job is queued");
    assert!(oldest >= build.created_at, "the queued job's time");
    assert!(
        queued.agents.is_empty(),
        "agents count once their workspace runs"
    );
    assert!(store
        .finish_build(&build.id, BuildStatus::Succeeded, None)
        .await
        .unwrap());
    let agent = |name: &str| NewAgent {
        name: name.into(),
        token_hash: format!("hash-{name}"),
        startup_script: None,
        claim_script: None,
        settings: Default::default(),
        dir: None,
        env: "{}".into(),
        apps: Vec::new(),
    };
    store
        .replace_agents(
            &workspace.id,
            &build.id,
            &[agent("silent"), agent("ready"), agent("failed")],
        )
        .await
        .unwrap();
    let ready = store.agent_by_token_hash("hash-ready").await.unwrap();
    store
        .agent_heartbeat(&ready.id, Some(AgentLifecycle::Ready))
        .await
        .unwrap();
    let failed = store.agent_by_token_hash("hash-failed").await.unwrap();
    store
        .agent_lifecycle(&failed.id, AgentLifecycle::StartError, Some(1))
        .await
        .unwrap();

    let far_past = 0;
    let far_future = i64::MAX;
    let pairs = |list: &[(&str, i64)]| -> Vec<(String, i64)> {
        list.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    };
    let cases = [
        (
            "nothing is late yet",
            far_past,
            far_past,
            pairs(&[("connecting", 1), ("ready", 1), ("start_error", 1)]),
        ),
        (
            "the silent agent's workspace started before the connect timeout",
            far_future,
            far_past,
            pairs(&[("ready", 1), ("start_error", 1), ("unhealthy", 1)]),
        ),
        (
            "the heartbeats are too old",
            far_past,
            far_future,
            pairs(&[("connecting", 1), ("disconnected", 2)]),
        ),
    ];
    for (case, connect_before, heartbeat_before, agents) in cases {
        let counts = store
            .platform_counts(AgentCutoffs {
                connect_before,
                heartbeat_before,
            })
            .await
            .unwrap();
        assert_eq!(
            (
                counts.builds_held,
                counts.jobs_pending,
                counts.oldest_pending_job_at,
                counts.agents
            ),
            (0, 0, None, agents),
            "{case}"
        );
    }

    // A stopped workspace keeps its agent rows, but no agent runs.
    let stop = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    assert!(store
        .finish_build(&stop.id, BuildStatus::Succeeded, None)
        .await
        .unwrap());
    let stopped = store
        .platform_counts(AgentCutoffs {
            connect_before: far_past,
            heartbeat_before: far_past,
        })
        .await
        .unwrap();
    assert_eq!(stopped, PlatformCounts::default());
}

on_every_backend!(platform_counts_count_the_queue_and_agents_by_status);
