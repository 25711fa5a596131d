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
        settings: Default::default(),
        dir: script.map(|_| "/home/dev".to_string()),
        env: if script.is_some() {
            r#"{"GREETING":"hi"}"#.into()
        } else {
            "{}".into()
        },
        apps: Vec::new(),
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
            settings: Default::default(),
            dir: None,
            env: "{}".into(),
            apps: Vec::new(),
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

async fn apps_follow_their_agents_and_keep_their_health_while_the_agent_is_kept(store: Store) {
    use abode_contract::apps::{AppDefinition, AppHealth, AppShare};
    let (_user, workspace, build) = seeded(&store).await;
    let app = |slug: &str, checked: bool| {
        AppDefinition::from_attributes(&serde_json::json!({
            "slug": slug,
            "url": "http://localhost:3000",
            "share": "public",
            "healthcheck": if checked {
                serde_json::json!([{"url": "http://localhost:3000", "interval": 1, "threshold": 2}])
            } else {
                serde_json::json!([])
            },
        }))
        .unwrap()
    };
    let agent = |token: &str| NewAgent {
        name: "main".into(),
        token_hash: token.into(),
        startup_script: None,
        claim_script: None,
        settings: Default::default(),
        dir: None,
        env: "{}".into(),
        apps: vec![app("web", true), app("docs", false)],
    };
    store
        .replace_agents(&workspace.id, &build.id, &[agent("token-1")])
        .await
        .unwrap();
    let apps = store.apps_of_workspace(&workspace.id).await.unwrap();
    let health: Vec<(&str, AppHealth)> = apps
        .iter()
        .map(|app| (app.definition.slug.as_str(), app.health))
        .collect();
    assert_eq!(
        health,
        [
            ("docs", AppHealth::Disabled),
            ("web", AppHealth::Initializing)
        ]
    );
    assert_eq!(apps[1].definition.share, AppShare::Public);
    let agent_id = &apps[1].agent_id;
    assert!(store
        .set_app_health(agent_id, "web", AppHealth::Healthy)
        .await
        .unwrap());
    assert!(!store
        .set_app_health(agent_id, "web", AppHealth::Healthy)
        .await
        .unwrap());
    assert!(!store
        .set_app_health(agent_id, "nothing", AppHealth::Healthy)
        .await
        .unwrap());
    // The same agent kept by a build: its app keeps what it reported.
    store
        .replace_agents(&workspace.id, &build.id, &[agent("token-1")])
        .await
        .unwrap();
    let apps = store.apps_of_workspace(&workspace.id).await.unwrap();
    assert_eq!(apps[1].health, AppHealth::Healthy);
    // A new agent starts over; a stop's build leaves no app.
    store
        .replace_agents(&workspace.id, &build.id, &[agent("token-2")])
        .await
        .unwrap();
    let apps = store.apps_of_workspace(&workspace.id).await.unwrap();
    assert_eq!(apps[1].health, AppHealth::Initializing);
    store
        .replace_agents(&workspace.id, &build.id, &[])
        .await
        .unwrap();
    assert!(store
        .apps_of_workspace(&workspace.id)
        .await
        .unwrap()
        .is_empty());
}

on_every_backend!(
    apps_follow_their_agents_and_keep_their_health_while_the_agent_is_kept,
    agents_keep_their_startup_script_and_the_exit_status_of_a_failed_start,
    agents_are_replaced_while_they_send_heartbeats,
);
