//! Stop scripts and disk-full warnings (`shutdowns.rs`): a build asks an
//! agent once, the agent's report ends it once, its log is written once; an
//! agent's home volume report comes back with its thresholds; a threshold is
//! told at most once per quiet period, by the store's clock.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

async fn with_agent(store: &Store, settings: AgentSettings) -> (Workspace, Build, Agent) {
    let (_, workspace, build) = seeded(store).await;
    let agent = NewAgent {
        name: "main[0]".into(),
        token_hash: "hash-main".into(),
        startup_script: None,
        claim_script: None,
        settings,
        dir: None,
        env: "{}".into(),
        apps: Vec::new(),
    };
    store
        .replace_agents(&workspace.id, &build.id, &[agent])
        .await
        .unwrap();
    let agent = store.agent_by_token_hash("hash-main").await.unwrap();
    (workspace, build, agent)
}

async fn a_shutdown_is_asked_once_ended_once_and_logged_once(store: Store) {
    let (workspace, build, agent) = with_agent(
        &store,
        AgentSettings {
            shutdown_script: Some("sync".into()),
            shutdown_timeout_seconds: Some(7),
            disk_warning_percents: vec![90, 98],
            scripts: Vec::new(),
            watch: Default::default(),
        },
    )
    .await;
    let targets = store.agents_to_shut_down(&workspace.id).await.unwrap();
    assert_eq!(targets.len(), 1);
    assert_eq!(
        (targets[0].script.as_str(), targets[0].timeout_seconds),
        ("sync", Some(7))
    );
    assert_eq!(store.pending_agent_shutdown(&agent.id).await.unwrap(), None);
    let asked = NewAgentShutdown {
        build_id: build.id.clone(),
        workspace_id: workspace.id.clone(),
        agent_id: agent.id.clone(),
        agent_name: agent.name.clone(),
        script: "sync".into(),
        timeout_seconds: 7,
        deadline: i64::MAX,
        outcome: None,
    };
    assert!(store.insert_agent_shutdown(&asked).await.unwrap());
    assert!(
        !store.insert_agent_shutdown(&asked).await.unwrap(),
        "asked once"
    );
    let pending = store
        .pending_agent_shutdown(&agent.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (pending.build_id.as_str(), pending.timeout_seconds),
        (build.id.as_str(), 7)
    );
    assert!(
        !store
            .mark_agent_shutdown_logged(&build.id, &agent.id)
            .await
            .unwrap(),
        "not ended"
    );
    assert!(store
        .end_agent_shutdown(&build.id, &agent.id, "failed", Some(3), Some("oops\n"))
        .await
        .unwrap());
    assert!(
        !store
            .end_agent_shutdown(&build.id, &agent.id, "no_answer", None, None)
            .await
            .unwrap(),
        "ended once"
    );
    assert_eq!(store.pending_agent_shutdown(&agent.id).await.unwrap(), None);
    let rows = store.agent_shutdowns(&build.id).await.unwrap();
    assert_eq!(
        (
            rows[0].outcome.as_deref(),
            rows[0].exit_status,
            rows[0].output.as_deref()
        ),
        (Some("failed"), Some(3), Some("oops\n"))
    );
    assert!(store
        .mark_agent_shutdown_logged(&build.id, &agent.id)
        .await
        .unwrap());
    assert!(!store
        .mark_agent_shutdown_logged(&build.id, &agent.id)
        .await
        .unwrap());
}

async fn a_disk_threshold_is_told_once_a_day(store: Store) {
    let (clock, hand) = Clock::manual(1_000_000_000_000);
    let store = store.with_clock(clock);
    let (workspace, _, agent) = with_agent(
        &store,
        AgentSettings {
            disk_warning_percents: vec![80, 95],
            ..Default::default()
        },
    )
    .await;
    assert!(store
        .workspace_disks(&workspace.id)
        .await
        .unwrap()
        .is_empty());
    let percents = store.put_agent_disk(&agent.id, 90, 100, 5).await.unwrap();
    assert_eq!(percents.as_deref(), Some("80,95"));
    let disks = store.workspace_disks(&workspace.id).await.unwrap();
    assert_eq!(
        (
            disks[0].used_bytes,
            disks[0].total_bytes,
            disks[0].available_bytes,
            disks[0].reported_at
        ),
        (90, 100, Some(5), 1_000_000_000_000)
    );
    let day = 24 * 3600 * 1000;
    assert!(store
        .claim_disk_warning(&workspace.id, 80, day)
        .await
        .unwrap());
    assert!(!store
        .claim_disk_warning(&workspace.id, 80, day)
        .await
        .unwrap());
    assert!(
        store
            .claim_disk_warning(&workspace.id, 95, day)
            .await
            .unwrap(),
        "each threshold"
    );
    hand.advance(Duration::from_secs(23 * 3600));
    assert!(!store
        .claim_disk_warning(&workspace.id, 80, day)
        .await
        .unwrap());
    hand.advance(Duration::from_secs(3600));
    assert!(store
        .claim_disk_warning(&workspace.id, 80, day)
        .await
        .unwrap());
    assert!(!store
        .claim_disk_warning(&workspace.id, 80, day)
        .await
        .unwrap());
}

/// `abode_script`s (`scripts.rs`): kept with their agent, a stop-only
/// agent is one to shut down (its longest stop timeout), each run's latest
/// state and log kept, a new run number a new start; a kept agent keeps its
/// runs, a new one starts with none.
async fn scripts_and_their_latest_runs_are_kept(store: Store) {
    let (clock, hand) = Clock::manual(1_000_000_000_000);
    let store = store.with_clock(clock);
    let stop = |name: &str, timeout: Option<i64>| abode_contract::script::ScriptDefinition {
        display_name: name.into(),
        script: "sync".into(),
        run_on_start: false,
        run_on_stop: true,
        cron: None,
        start_blocks_login: false,
        timeout_seconds: timeout,
        log_path: None,
    };
    let settings = AgentSettings {
        scripts: vec![stop("a", Some(20)), stop("b", None)],
        ..Default::default()
    };
    let (workspace, build, agent) = with_agent(&store, settings.clone()).await;
    let targets = store.agents_to_shut_down(&workspace.id).await.unwrap();
    assert_eq!(
        (targets[0].script.as_str(), targets[0].stop_timeout_seconds),
        ("", Some(300))
    );
    let scripts = store.agent_scripts(&agent.id).await.unwrap().unwrap();
    assert!(scripts.contains("\"display_name\":\"a\""), "{scripts}");
    let report = |state: &'static str, run: i64, log: &'static str| ScriptRunReport {
        workspace_id: &workspace.id,
        agent_name: "main[0]",
        display_name: "a",
        state,
        exit_status: (state == "failed").then_some(3),
        run,
        log,
    };
    store
        .put_script_run(&report("running", 1, ""))
        .await
        .unwrap();
    hand.advance(Duration::from_secs(5));
    store
        .put_script_run(&report("failed", 1, "oops\n"))
        .await
        .unwrap();
    let runs = store.script_runs(&workspace.id).await.unwrap();
    assert_eq!(
        (runs[0].state.as_str(), runs[0].exit_status, runs[0].runs),
        ("failed", Some(3), 1)
    );
    assert_eq!(runs[0].started_at, 1_000_000_000_000);
    assert_eq!(runs[0].ended_at, Some(1_000_000_005_000));
    store
        .put_script_run(&report("running", 2, ""))
        .await
        .unwrap();
    let runs = store.script_runs(&workspace.id).await.unwrap();
    assert_eq!(
        (runs[0].started_at, runs[0].ended_at),
        (1_000_000_005_000, None)
    );
    assert_eq!(
        store
            .script_run_log(&workspace.id, "main[0]", "a")
            .await
            .unwrap()
            .as_deref(),
        Some("")
    );
    // The agent kept (same token): its runs stay; a new one starts afresh.
    let again = |token: &str| NewAgent {
        name: "main[0]".into(),
        token_hash: token.into(),
        startup_script: None,
        claim_script: None,
        settings: settings.clone(),
        dir: None,
        env: "{}".into(),
        apps: Vec::new(),
    };
    store
        .replace_agents(&workspace.id, &build.id, &[again("hash-main")])
        .await
        .unwrap();
    assert_eq!(store.script_runs(&workspace.id).await.unwrap().len(), 1);
    store
        .replace_agents(&workspace.id, &build.id, &[again("hash-new")])
        .await
        .unwrap();
    assert!(store.script_runs(&workspace.id).await.unwrap().is_empty());
}

on_every_backend!(
    a_shutdown_is_asked_once_ended_once_and_logged_once,
    a_disk_threshold_is_told_once_a_day,
    scripts_and_their_latest_runs_are_kept
);
