//! Agents (`agents.rs`): what a start build keeps, heartbeats meanwhile.

use abode_store::*;

use crate::common::*;

async fn agents_keep_their_startup_script_and_the_exit_status_of_a_failed_start(store: Store) {
    let (_user, workspace, build) = seeded(&store).await;
    let agent = |name: &str, script: Option<&str>| NewAgent {
        name: name.into(),
        token_hash: format!("hash-{name}"),
        startup_script: script.map(String::from),
        claim_script: None,
        dir: script.map(|_| "/home/dev".to_string()),
        env: if script.is_some() {
            r#"{"GREETING":"hi"}"#.into()
        } else {
            "{}".into()
        },
    };
    store
        .replace_agents(
            &workspace.id,
            &build.id,
            &[agent("main", Some("echo hi")), agent("plain", None)],
        )
        .await
        .unwrap();
    let main = store.agent_by_token_hash("hash-main").await.unwrap();
    assert_eq!(
        (
            main.startup_script.as_deref(),
            main.dir.as_deref(),
            main.env.as_str(),
            main.exit_status
        ),
        (
            Some("echo hi"),
            Some("/home/dev"),
            r#"{"GREETING":"hi"}"#,
            None
        )
    );
    let plain = store.agent_by_token_hash("hash-plain").await.unwrap();
    assert_eq!(
        (plain.startup_script, plain.dir, plain.env.as_str()),
        (None, None, "{}")
    );

    store
        .agent_lifecycle(&main.id, AgentLifecycle::StartError, Some(3))
        .await
        .unwrap();
    store.agent_heartbeat(&main.id, None).await.unwrap();
    let failed = store.agent_by_token_hash("hash-main").await.unwrap();
    assert_eq!(
        (
            failed.lifecycle.map(AgentLifecycle::as_str),
            failed.exit_status
        ),
        (Some("start_error"), Some(3)),
        "a heartbeat keeps the failed start"
    );
    assert!(failed.connected_at.is_some() && failed.last_heartbeat_at.is_some());
    store
        .agent_lifecycle(&main.id, AgentLifecycle::Ready, None)
        .await
        .unwrap();
    let ready = store.agent_by_token_hash("hash-main").await.unwrap();
    assert_eq!(
        (
            ready.lifecycle.map(AgentLifecycle::as_str),
            ready.exit_status
        ),
        (Some("ready"), None)
    );
    store
        .agent_lifecycle(&plain.id, AgentLifecycle::StartError, Some(1))
        .await
        .unwrap();

    // The next start keeps `main` (same token, updated in place) and replaces
    // `plain` by a new agent: only the kept one keeps what it reported.
    let mut updated = agent("main", Some("echo changed"));
    updated.env = "{}".into();
    store
        .replace_agents(&workspace.id, &build.id, &[updated, agent("fresh", None)])
        .await
        .unwrap();
    let kept = store.agent_by_token_hash("hash-main").await.unwrap();
    assert_eq!(
        (
            kept.lifecycle.map(AgentLifecycle::as_str),
            kept.connected_at,
            kept.last_heartbeat_at,
            kept.startup_script.as_deref(),
            kept.env.as_str()
        ),
        (
            Some("ready"),
            ready.connected_at,
            ready.last_heartbeat_at,
            Some("echo changed"),
            "{}"
        )
    );
    let fresh = store.agent_by_token_hash("hash-fresh").await.unwrap();
    assert_eq!(
        (fresh.lifecycle, fresh.last_heartbeat_at, fresh.exit_status),
        (None, None, None)
    );
    assert!(matches!(
        store.agent_by_token_hash("hash-plain").await,
        Err(StoreError::NotFound(_))
    ));
}

/// A start build replaces the agents (reading which to keep, then writing) while
/// those agents send heartbeats: neither side may fail with "database is locked".
async fn agents_are_replaced_while_they_send_heartbeats(store: Store) {
    let (_user, workspace, build) = seeded(&store).await;
    let agents: Vec<NewAgent> = (0..4)
        .map(|i| NewAgent {
            name: format!("agent{i}"),
            token_hash: format!("hash-{i}"),
            startup_script: None,
            claim_script: None,
            dir: None,
            env: "{}".into(),
        })
        .collect();
    store
        .replace_agents(&workspace.id, &build.id, &agents)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..40 {
                let agent = store.agent_by_token_hash(&format!("hash-{i}")).await?;
                store
                    .agent_heartbeat(&agent.id, Some(AgentLifecycle::Ready))
                    .await?;
            }
            Ok::<(), abode_store::StoreError>(())
        }));
    }
    for _ in 0..40 {
        store
            .replace_agents(&workspace.id, &build.id, &agents)
            .await
            .unwrap();
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

on_every_backend!(
    agents_keep_their_startup_script_and_the_exit_status_of_a_failed_start,
    agents_are_replaced_while_they_send_heartbeats,
);
