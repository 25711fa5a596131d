//! Behaviour of the store: migrations, typed errors, the one-build-at-a-time
//! rule, the atomic job claim, held builds, protections and the audit log.
//! Every behaviour runs on SQLite (a temporary file) and, when
//! ABODE_TEST_POSTGRES_URL is set, on PostgreSQL (a fresh schema per test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use abode_store::*;

async fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("abode.db"))
        .await
        .unwrap();
    (dir, store)
}

fn new_user(name: &str) -> NewUser {
    NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        role: "owner".into(),
        password_hash: "x".into(),
    }
}

/// A user, a template with one version and a workspace whose build #1 is queued.
async fn seeded(store: &Store) -> (User, Workspace, Build) {
    let user = store.create_first_user(&new_user("alice")).await.unwrap();
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![1, 2, 3],
            archive_sha256: "abc".into(),
            message: "first".into(),
            created_by: user.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            activate: false,
        })
        .await
        .unwrap();
    let workspace_id = new_id();
    let (workspace, build) = store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id.clone(),
                owner_id: user.id.clone(),
                name: "dev".into(),
                template_id: template.id.clone(),
                template_version_id: version.id.clone(),
                parameters: "{}".into(),
            },
            &NewBuild {
                id: new_id(),
                workspace_id,
                transition: Transition::Start,
                template_version_id: version.id.clone(),
                initiator_id: user.id.clone(),
                reason: "create".into(),
            },
        )
        .await
        .unwrap();
    (user, workspace, build)
}

fn next_build(workspace: &Workspace, user: &User, transition: &str) -> NewBuild {
    NewBuild {
        id: new_id(),
        workspace_id: workspace.id.clone(),
        transition: transition.parse().unwrap(),
        template_version_id: workspace.template_version_id.clone(),
        initiator_id: user.id.clone(),
        reason: transition.into(),
    }
}

#[tokio::test]
async fn migrations_apply_twice_and_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/abode.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    store.create_first_user(&new_user("alice")).await.unwrap();
    store.close().await;
    let store = Store::open_sqlite(&path).await.unwrap();
    assert_eq!(
        store.user_by_name("alice").await.unwrap().email,
        "alice@example.com"
    );
}

async fn missing_rows_are_typed_not_found(store: Store) {
    let checks: Vec<(&str, Result<(), StoreError>)> = vec![
        ("user", store.user_by_name("nobody").await.map(drop)),
        ("template", store.template_by_name("none").await.map(drop)),
        ("workspace", store.workspace_by_id("none").await.map(drop)),
        ("build", store.build_by_id("none").await.map(drop)),
        ("token", store.token_by_hash("none").await.map(drop)),
        ("agent", store.agent_by_token_hash("none").await.map(drop)),
    ];
    for (what, result) in checks {
        match result {
            Err(StoreError::NotFound(found)) => assert_eq!(found, what),
            other => panic!("{what}: expected NotFound, got {other:?}"),
        }
    }
}

async fn first_user_only_once_and_usernames_unique(store: Store) {
    store.create_first_user(&new_user("alice")).await.unwrap();
    assert!(matches!(
        store.create_first_user(&new_user("bob")).await,
        Err(StoreError::Conflict("first user"))
    ));
    assert!(matches!(
        store.create_user(&new_user("alice")).await,
        Err(StoreError::Conflict("username"))
    ));
}

async fn concurrent_first_users_make_exactly_one(store: Store) {
    let attempts = (0..6).map(|index| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .create_first_user(&new_user(&format!("user{index}")))
                .await
        })
    });
    let mut created = 0;
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(_) => created += 1,
            Err(StoreError::Conflict("first user")) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(created, 1);
}

async fn first_template_version_is_active_and_later_ones_on_request(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let push = |activate| NewTemplateVersion {
        template_name: "base".into(),
        archive: vec![9],
        archive_sha256: "def".into(),
        message: "next".into(),
        created_by: user.id.clone(),
        validation_ok: true,
        validation_message: "ok".into(),
        activate,
    };
    let (template, v2) = store.create_template_version(&push(false)).await.unwrap();
    assert_eq!(
        (v2.number, v2.active, template.active_version),
        (2, false, Some(1))
    );
    let (template, v3) = store.create_template_version(&push(true)).await.unwrap();
    assert_eq!(
        (v3.number, v3.active, template.active_version),
        (3, true, Some(3))
    );
    store
        .activate_template_version(&template.id, &v2.id)
        .await
        .unwrap();
    let versions = store.list_template_versions(&template.id).await.unwrap();
    let active: Vec<i64> = versions
        .iter()
        .filter(|v| v.active)
        .map(|v| v.number)
        .collect();
    assert_eq!(active, vec![2]);
    assert_eq!(
        store.template_version_archive(&v2.id).await.unwrap(),
        vec![9]
    );
}

async fn one_active_build_per_workspace(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    assert!(matches!(
        store
            .create_build(&next_build(&workspace, &user, "stop"))
            .await,
        Err(StoreError::Conflict("active build"))
    ));
    assert!(store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap());
    // Finishing twice is refused: a final status is final.
    assert!(!store
        .finish_build(&first.id, BuildStatus::Failed, Some("late"))
        .await
        .unwrap());
    let second = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    assert_eq!((second.number, second.status.as_str()), (2, "pending"));
}

async fn concurrent_build_creation_accepts_exactly_one(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let attempts = (0..8).map(|_| {
        let store = store.clone();
        let build = next_build(&workspace, &user, "stop");
        tokio::spawn(async move { store.create_build(&build).await })
    });
    let mut accepted = 0;
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(_) => accepted += 1,
            Err(StoreError::Conflict("active build")) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(accepted, 1);
}

async fn concurrent_claimers_never_share_a_job(store: Store) {
    let user = store.create_first_user(&new_user("alice")).await.unwrap();
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![],
            archive_sha256: "abc".into(),
            message: String::new(),
            created_by: user.id.clone(),
            validation_ok: true,
            validation_message: String::new(),
            activate: true,
        })
        .await
        .unwrap();
    let mut expected = HashSet::new();
    for index in 0..20 {
        let workspace_id = new_id();
        let build_id = new_id();
        expected.insert(build_id.clone());
        store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: user.id.clone(),
                    name: format!("ws{index}"),
                    template_id: template.id.clone(),
                    template_version_id: version.id.clone(),
                    parameters: "{}".into(),
                },
                &NewBuild {
                    id: build_id,
                    workspace_id,
                    transition: Transition::Start,
                    template_version_id: version.id.clone(),
                    initiator_id: user.id.clone(),
                    reason: "create".into(),
                },
            )
            .await
            .unwrap();
    }
    let claimers = (0..6).map(|worker| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(job) = store.claim_job(&format!("w{worker}")).await.unwrap() {
                mine.push(job.build_id);
            }
            mine
        })
    });
    let mut claimed = Vec::new();
    for claimer in claimers {
        claimed.extend(claimer.await.unwrap());
    }
    assert_eq!(claimed.len(), 20, "every job claimed exactly once");
    assert_eq!(claimed.iter().cloned().collect::<HashSet<_>>(), expected);
    for build_id in &claimed {
        let build = store.build_by_id(build_id).await.unwrap();
        assert_eq!(build.status.as_str(), "running");
    }
}

async fn cancel_of_pending_build_removes_its_job_and_restart_fails_running_ones(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    assert!(store
        .cancel_pending_build(&first.id, "canceled")
        .await
        .unwrap());
    assert_eq!(store.claim_job("w").await.unwrap(), None);
    let second = store
        .create_build(&next_build(&workspace, &user, "start"))
        .await
        .unwrap();
    let job = store.claim_job("w").await.unwrap().unwrap();
    assert_eq!(job.build_id, second.id);
    assert!(!store
        .cancel_pending_build(&second.id, "late")
        .await
        .unwrap());
    store
        .put_state(&workspace.id, &second.id, b"{}")
        .await
        .unwrap();
    assert_eq!(
        store.running_builds().await.unwrap(),
        vec![second.id.clone()]
    );
    assert!(store
        .finish_build(&second.id, BuildStatus::Failed, Some("server died"))
        .await
        .unwrap());
    assert!(store.running_builds().await.unwrap().is_empty());
    let build = store.build_by_id(&second.id).await.unwrap();
    assert_eq!(
        (build.status.as_str(), build.error.as_deref()),
        ("failed", Some("server died"))
    );
    assert_eq!(store.state(&workspace.id).await.unwrap().unwrap(), b"{}");
}

async fn log_lines_are_numbered_per_build(store: Store) {
    let (_, _, build) = seeded(&store).await;
    for text in ["one", "two", "three"] {
        store
            .append_log(
                &build.id,
                &NewLogLine {
                    stage: "plan".into(),
                    level: "info".into(),
                    text: text.into(),
                },
            )
            .await
            .unwrap();
    }
    let lines = store.logs_after(&build.id, 1, 100).await.unwrap();
    let seen: Vec<(i64, &str)> = lines.iter().map(|l| (l.seq, l.text.as_str())).collect();
    assert_eq!(seen, vec![(2, "two"), (3, "three")]);
}

async fn concurrent_log_writers_get_distinct_sequence_numbers(store: Store) {
    let (_, _, build) = seeded(&store).await;
    let writers = (0..4).map(|writer| {
        let store = store.clone();
        let build_id = build.id.clone();
        tokio::spawn(async move {
            for index in 0..25 {
                let line = NewLogLine {
                    stage: "apply".into(),
                    level: "info".into(),
                    text: format!("{writer}-{index}"),
                };
                store.append_log(&build_id, &line).await.unwrap();
            }
        })
    });
    for writer in writers {
        writer.await.unwrap();
    }
    let lines = store.logs_after(&build.id, 0, 1000).await.unwrap();
    let seqs: Vec<i64> = lines.iter().map(|line| line.seq).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<i64>>());
}

async fn deleted_workspace_frees_its_name_and_stays_readable(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    store.mark_workspace_deleted(&workspace.id).await.unwrap();
    let found = store
        .workspace_by_owner_and_name(&user.id, "dev")
        .await
        .unwrap();
    assert!(found.deleted);
    assert!(matches!(
        store
            .create_build(&next_build(&workspace, &user, "start"))
            .await,
        Err(StoreError::NotFound("workspace"))
    ));
    assert!(store
        .list_workspaces(Some(&user.id), false)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn database_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _store) = open().await;
    let mode = std::fs::metadata(dir.path().join("abode.db"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "mode {mode:o}");
}

async fn a_held_build_is_confirmed_once_with_its_digest_and_expires_otherwise(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store.claim_job("w").await.unwrap().unwrap();
    let plan = SavedPlan {
        plan: b"binary plan".to_vec(),
        digest: "d1".into(),
        state_digest: "s1".into(),
    };
    assert!(store.hold_build(&first.id, &plan, i64::MAX).await.unwrap());
    let held = store.build_by_id(&first.id).await.unwrap();
    assert_eq!(
        (held.status.as_str(), held.plan_digest.as_deref()),
        ("awaiting_confirmation", Some("d1"))
    );
    // A held build holds the workspace.
    assert!(matches!(
        store
            .create_build(&next_build(&workspace, &user, "stop"))
            .await,
        Err(StoreError::Conflict("active build"))
    ));
    let audit = NewAuditEvent {
        actor_id: Some(user.id.clone()),
        actor_name: Some(user.username.clone()),
        action: "build.confirm".into(),
        target_type: "workspace".into(),
        target: "alice/dev".into(),
        outcome: "success".into(),
        request_id: None,
        details: Some("digest=d1".into()),
    };
    let confirmations = || async {
        store
            .list_audit(&AuditFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|event| event.action == "build.confirm")
            .count()
    };
    assert!(!store
        .confirm_build(&first.id, "other", &user.id, &audit)
        .await
        .unwrap());
    assert_eq!(
        confirmations().await,
        0,
        "nothing confirmed, nothing audited"
    );
    assert!(store
        .confirm_build(&first.id, "d1", &user.id, &audit)
        .await
        .unwrap());
    assert_eq!(confirmations().await, 1, "audited with the confirmation");
    assert!(
        !store
            .confirm_build(&first.id, "d1", &user.id, &audit)
            .await
            .unwrap(),
        "single use"
    );
    let job = store.claim_job("w").await.unwrap().unwrap();
    assert_eq!(
        (job.build_id.as_str(), job.kind),
        (first.id.as_str(), JobKind::ApplySavedPlan)
    );
    let confirmed = store.build_by_id(&first.id).await.unwrap();
    assert_eq!(
        (confirmed.status.as_str(), confirmed.confirmed_by.as_deref()),
        ("running", Some("alice"))
    );
    assert_eq!(
        store.saved_plan(&first.id).await.unwrap().unwrap().plan,
        b"binary plan"
    );
    store.delete_saved_plan(&first.id).await.unwrap();
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();

    let second = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    store.claim_job("w").await.unwrap().unwrap();
    assert!(store.hold_build(&second.id, &plan, 1_000).await.unwrap());
    assert_eq!(
        store.expire_held_builds(999, "expired").await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.expire_held_builds(1_000, "expired").await.unwrap(),
        vec![second.id.clone()]
    );
    assert!(store.saved_plan(&second.id).await.unwrap().is_none());
    assert_eq!(
        store.build_by_id(&second.id).await.unwrap().status.as_str(),
        "canceled"
    );
}

async fn protections_are_replaced_and_released_and_audit_is_filtered(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    let protections = [
        NewProtection {
            address: "a.b".into(),
            mode: "confirm".into(),
        },
        NewProtection {
            address: "c.d[0]".into(),
            mode: "block".into(),
        },
    ];
    store
        .replace_protections(&workspace.id, &first.id, &protections)
        .await
        .unwrap();
    let listed: Vec<(String, String)> = store
        .protections(&workspace.id)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.address, p.mode))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("a.b".into(), "confirm".into()),
            ("c.d[0]".into(), "block".into())
        ]
    );
    assert_eq!(
        store
            .release_protection(&workspace.id, "a.b")
            .await
            .unwrap()
            .mode,
        "confirm"
    );
    assert!(matches!(
        store.release_protection(&workspace.id, "a.b").await,
        Err(StoreError::NotFound("protection"))
    ));

    let event = |target_type: &str, target: &str, actor: Option<&str>| NewAuditEvent {
        actor_id: actor.map(String::from),
        action: "x".into(),
        target_type: target_type.into(),
        target: target.into(),
        outcome: "success".into(),
        ..Default::default()
    };
    store
        .record_audit(&event("workspace", "alice/dev", None))
        .await
        .unwrap();
    store
        .record_audit(&event("workspace", "bob/dev", None))
        .await
        .unwrap();
    store
        .record_audit(&event("user", "alice", Some(&user.id)))
        .await
        .unwrap();
    store
        .record_audit(&event("user", "bob", Some("bob-id")))
        .await
        .unwrap();
    let targets = |filter: AuditFilter| {
        let store = store.clone();
        async move {
            store
                .list_audit(&filter)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|e| e.target)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        targets(AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .await,
        vec!["bob", "alice", "bob/dev", "alice/dev"]
    );
    assert_eq!(
        targets(AuditFilter {
            visible_to: Some(("alice/".into(), user.id.clone())),
            limit: 10,
            ..Default::default()
        })
        .await,
        vec!["alice", "alice/dev"]
    );
    assert_eq!(
        targets(AuditFilter {
            target: Some("bob/dev".into()),
            limit: 10,
            ..Default::default()
        })
        .await,
        vec!["bob/dev"]
    );
}

async fn agents_keep_their_startup_script_and_the_exit_status_of_a_failed_start(store: Store) {
    let (_user, workspace, build) = seeded(&store).await;
    let agent = |name: &str, script: Option<&str>| NewAgent {
        name: name.into(),
        token_hash: format!("hash-{name}"),
        startup_script: script.map(String::from),
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

async fn sessions_and_api_tokens_are_found_touched_and_revoked(store: Store) {
    let alice = store.create_first_user(&new_user("alice")).await.unwrap();
    let bob = store.create_user(&new_user("bob")).await.unwrap();

    // A session: found by its hash, with no name and no stored expiry.
    store.create_token(&alice.id, "session-hash").await.unwrap();
    let session = store.token_by_hash("session-hash").await.unwrap();
    assert_eq!(session.kind, TokenKind::Session);
    assert_eq!(session.user_id, alice.id);
    assert_eq!((session.name.clone(), session.expires_at), (None, None));
    assert_eq!(session.last_used_at, None);

    // A use is recorded only when the last one is older than `not_since`.
    store.touch_token(&session.id, 5_000, 4_000).await.unwrap();
    store.touch_token(&session.id, 6_000, 4_500).await.unwrap();
    assert_eq!(
        store
            .token_by_hash("session-hash")
            .await
            .unwrap()
            .last_used_at,
        Some(5_000)
    );
    store.touch_token(&session.id, 7_000, 6_000).await.unwrap();
    assert_eq!(
        store
            .token_by_hash("session-hash")
            .await
            .unwrap()
            .last_used_at,
        Some(7_000)
    );

    // Revoking marks the row once; the lookup still finds it, marked.
    assert!(store.revoke_token(&session.id, 8_000).await.unwrap());
    assert!(!store.revoke_token(&session.id, 9_000).await.unwrap());
    assert_eq!(
        store
            .token_by_hash("session-hash")
            .await
            .unwrap()
            .revoked_at,
        Some(8_000)
    );
    assert!(matches!(
        store.token_by_hash("no-such-hash").await,
        Err(StoreError::NotFound("token"))
    ));

    // API tokens: named, unique per user among live ones.
    let api = |user: &User, name: &str, hash: &str| NewApiToken {
        user_id: user.id.clone(),
        name: name.into(),
        token_hash: hash.into(),
        expires_at: 1_000_000,
    };
    let ci = store
        .create_api_token(&api(&alice, "ci", "h-ci"))
        .await
        .unwrap();
    assert_eq!(ci.kind, TokenKind::Api);
    assert_eq!(ci.name.as_deref(), Some("ci"));
    assert_eq!(ci.expires_at, Some(1_000_000));
    assert!(matches!(
        store.create_api_token(&api(&alice, "ci", "h-ci-2")).await,
        Err(StoreError::Conflict("token name"))
    ));
    // Another user may use the same name; the same hash twice is refused.
    store
        .create_api_token(&api(&bob, "ci", "h-bob"))
        .await
        .unwrap();
    assert!(store
        .create_api_token(&api(&alice, "deploy", "h-ci"))
        .await
        .is_err());
    store
        .create_api_token(&api(&alice, "backup", "h-backup"))
        .await
        .unwrap();

    let names = |tokens: Vec<TokenRecord>| -> Vec<String> {
        tokens.into_iter().filter_map(|token| token.name).collect()
    };
    // Sessions are not listed; the list is by name.
    assert_eq!(
        names(store.list_api_tokens(&alice.id).await.unwrap()),
        ["backup", "ci"]
    );

    // Revoking by name: only the caller's own, once; the name is then free.
    let revoked = store
        .revoke_api_token(&alice.id, "ci", 10_000)
        .await
        .unwrap();
    assert_eq!(
        (revoked.id.clone(), revoked.revoked_at),
        (ci.id.clone(), Some(10_000))
    );
    assert!(matches!(
        store.revoke_api_token(&alice.id, "ci", 11_000).await,
        Err(StoreError::NotFound("token"))
    ));
    assert_eq!(
        names(store.list_api_tokens(&alice.id).await.unwrap()),
        ["backup"]
    );
    assert_eq!(names(store.list_api_tokens(&bob.id).await.unwrap()), ["ci"]);
    assert_eq!(
        store.token_by_hash("h-ci").await.unwrap().revoked_at,
        Some(10_000)
    );
    store
        .create_api_token(&api(&alice, "ci", "h-ci-3"))
        .await
        .unwrap();
}

/// A database made before sessions and API tokens (SQLite up to migration
/// 0003) upgrades: its tokens become sessions.
#[tokio::test]
async fn an_existing_sqlite_database_upgrades_its_tokens_to_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abode.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .foreign_keys(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let old = migrations_before("sqlite", 4).await;
    old.run(&pool).await.unwrap();
    pool.insert_old_user_and_token().await;
    pool.close().await;

    let store = Store::open_sqlite(&path).await.unwrap();
    let token = store.token_by_hash("old-hash").await.unwrap();
    assert_eq!(token.kind, TokenKind::Session);
    assert_eq!((token.created_at, token.last_used_at), (1_000, Some(2_000)));
    assert_eq!((token.expires_at, token.revoked_at), (None, None));
}

/// The same upgrade on PostgreSQL (its migrations up to 0002).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_existing_postgres_database_upgrades_its_tokens_to_sessions() {
    let url = postgres_schema_url().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let old = migrations_before("postgres", 3).await;
    old.run(&pool).await.unwrap();
    pool.insert_old_user_and_token().await;
    pool.close().await;

    let store = Store::open_postgres(&url).await.unwrap();
    let token = store.token_by_hash("old-hash").await.unwrap();
    assert_eq!(token.kind, TokenKind::Session);
    assert_eq!((token.created_at, token.last_used_at), (1_000, Some(2_000)));
}

/// The backend's migrations with a version below `version`, as an older
/// server shipped them.
async fn migrations_before(backend: &str, version: i64) -> sqlx::migrate::Migrator {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut migrator = sqlx::migrate::Migrator::new(dir).await.unwrap();
    let kept: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|migration| migration.version < version)
        .cloned()
        .collect();
    assert!(!kept.is_empty());
    migrator.migrations = std::borrow::Cow::Owned(kept);
    migrator
}

trait OldRows {
    async fn insert_old_user_and_token(&self);
}

/// A user and a token as the schema before 0004 (SQLite) / 0003
/// (PostgreSQL) had them.
const OLD_ROWS: [&str; 2] = [
    "INSERT INTO users (id, username, email, role, password_hash, created_at) \
     VALUES ('u1', 'alice', 'alice@example.com', 'owner', 'x', 1000)",
    "INSERT INTO api_tokens (id, user_id, token_hash, created_at, last_used_at) \
     VALUES ('t1', 'u1', 'old-hash', 1000, 2000)",
];

impl OldRows for sqlx::SqlitePool {
    async fn insert_old_user_and_token(&self) {
        for statement in OLD_ROWS {
            sqlx::query(statement).execute(self).await.unwrap();
        }
    }
}

impl OldRows for sqlx::PgPool {
    async fn insert_old_user_and_token(&self) {
        for statement in OLD_ROWS {
            sqlx::query(statement).execute(self).await.unwrap();
        }
    }
}

/// A fresh PostgreSQL schema of the database at ABODE_TEST_POSTGRES_URL, or
/// None (with a note) when the variable is not set.
async fn open_postgres() -> Option<Store> {
    Some(
        Store::open_postgres(&postgres_schema_url().await)
            .await
            .unwrap(),
    )
}

/// The URL of a fresh, empty schema of the database at ABODE_TEST_POSTGRES_URL.
async fn postgres_schema_url() -> String {
    let Ok(url) = std::env::var("ABODE_TEST_POSTGRES_URL") else {
        panic!(
            "ABODE_TEST_POSTGRES_URL is not set: the PostgreSQL variants need a server \
             (scripts/run-tests starts one; by hand: source scripts/postgres.sh; abode_start_postgres)"
        );
    };
    let schema = format!("abode_test_{}", new_id().replace('-', ""));
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

/// Each behaviour as a test on SQLite and one on PostgreSQL.
/// A workspace named `name` of `owner` on the template of `like`, whose
/// build #1 is queued.
async fn another_workspace(store: &Store, owner: &User, like: &Workspace, name: &str) -> Workspace {
    let id = new_id();
    store
        .create_workspace(
            &NewWorkspace {
                id: id.clone(),
                owner_id: owner.id.clone(),
                name: name.into(),
                template_id: like.template_id.clone(),
                template_version_id: like.template_version_id.clone(),
                parameters: "{}".into(),
            },
            &NewBuild {
                id: new_id(),
                workspace_id: id,
                transition: Transition::Start,
                template_version_id: like.template_version_id.clone(),
                initiator_id: owner.id.clone(),
                reason: "create".into(),
            },
        )
        .await
        .unwrap()
        .0
}

/// Follows a workspace list to its end, page by page.
async fn all_pages(store: &Store, filter: WorkspaceFilter) -> Vec<String> {
    let mut filter = filter;
    let mut names = Vec::new();
    loop {
        let page = store.list_workspace_page(&filter).await.unwrap();
        assert!(page.items.len() as i64 <= filter.limit);
        names.extend(
            page.items
                .iter()
                .map(|s| format!("{}/{}", s.workspace.owner_name, s.workspace.name)),
        );
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return names,
        }
    }
}

/// Workspace pages: sorted by owner and name, continued by cursor without
/// repeats or gaps (also when rows are added behind the cursor), filtered by
/// owner, template and latest build, with each row's latest build, settled
/// build and agents read in.
async fn workspace_pages_follow_their_cursor_and_filters(store: Store) {
    let (alice, dev, _) = seeded(&store).await;
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    for name in ["b", "a", "c", "e", "d"] {
        another_workspace(&store, &bob, &dev, name).await;
    }
    for name in ["x", "y"] {
        another_workspace(&store, &alice, &dev, name).await;
    }
    let everyone = WorkspaceFilter {
        limit: 2,
        ..Default::default()
    };
    let expected = [
        "alice/dev",
        "alice/x",
        "alice/y",
        "bob/a",
        "bob/b",
        "bob/c",
        "bob/d",
        "bob/e",
    ];
    assert_eq!(all_pages(&store, everyone.clone()).await, expected);
    assert_eq!(
        all_pages(
            &store,
            WorkspaceFilter {
                limit: 200,
                ..everyone.clone()
            }
        )
        .await,
        expected
    );

    // A row added before the cursor is not seen, one after it is; none repeats.
    let first = store.list_workspace_page(&everyone).await.unwrap();
    assert_eq!(first.items.len(), 2);
    another_workspace(&store, &alice, &dev, "a0").await;
    another_workspace(&store, &bob, &dev, "f").await;
    let rest = all_pages(
        &store,
        WorkspaceFilter {
            after: first.next.clone(),
            ..everyone.clone()
        },
    )
    .await;
    assert_eq!(
        rest,
        ["alice/y", "bob/a", "bob/b", "bob/c", "bob/d", "bob/e", "bob/f"]
    );

    // A member's view: their own only, whatever the other filters say.
    let own = WorkspaceFilter {
        owner_id: Some(alice.id.clone()),
        limit: 50,
        ..Default::default()
    };
    assert_eq!(
        all_pages(&store, own.clone()).await,
        ["alice/a0", "alice/dev", "alice/x", "alice/y"]
    );
    assert!(all_pages(
        &store,
        WorkspaceFilter {
            owner_name: Some("bob".into()),
            ..own.clone()
        }
    )
    .await
    .is_empty());
    assert_eq!(
        all_pages(
            &store,
            WorkspaceFilter {
                owner_name: Some("bob".into()),
                limit: 50,
                ..Default::default()
            }
        )
        .await
        .len(),
        6
    );
    assert!(all_pages(
        &store,
        WorkspaceFilter {
            template: Some("other".into()),
            limit: 50,
            ..Default::default()
        }
    )
    .await
    .is_empty());

    // The latest build, the settled one and the agents come with the row.
    let job = store.claim_job("w").await.unwrap().unwrap();
    let build = store.build_by_id(&job.build_id).await.unwrap();
    store
        .finish_build(&build.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let agent = |name: &str| NewAgent {
        name: name.into(),
        token_hash: format!("hash-{name}-{}", build.id),
        startup_script: None,
        dir: None,
        env: "{}".into(),
    };
    store
        .replace_agents(
            &build.workspace_id,
            &build.id,
            &[agent("two"), agent("one")],
        )
        .await
        .unwrap();
    let stop = store
        .create_build(&NewBuild {
            transition: Transition::Stop,
            ..next_build(
                &store.workspace_by_id(&build.workspace_id).await.unwrap(),
                &alice,
                "stop",
            )
        })
        .await
        .unwrap();
    let running = |status, transition| WorkspaceFilter {
        latest_build: Some((status, transition)),
        limit: 50,
        ..Default::default()
    };
    let page = store
        .list_workspace_page(&running(BuildStatus::Pending, None))
        .await
        .unwrap();
    let summary = page
        .items
        .iter()
        .find(|s| s.workspace.id == build.workspace_id)
        .unwrap();
    assert_eq!(
        summary.latest_build,
        store.build_by_id(&stop.id).await.unwrap()
    );
    assert_eq!(
        summary.settled.map(|s| (s.status, s.transition)),
        Some((BuildStatus::Succeeded, Transition::Start))
    );
    assert_eq!(
        summary.agents,
        store
            .agents_of_workspace(&build.workspace_id)
            .await
            .unwrap()
    );
    assert_eq!(summary.agents.len(), 2);
    // The other workspaces' first builds are pending too; none has an agent.
    assert_eq!(page.items.len(), 10);
    assert!(store
        .list_workspace_page(&running(BuildStatus::Succeeded, Some(Transition::Start)))
        .await
        .unwrap()
        .items
        .is_empty());

    // Limits and cursors: the store holds to the limit it is given; a cursor
    // it did not hand out, or another list's, is refused.
    let page = store
        .list_workspace_page(&WorkspaceFilter {
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    for bad in ["nonsense", "", "YjE"] {
        assert!(matches!(
            store
                .list_workspace_page(&WorkspaceFilter {
                    after: Some(bad.into()),
                    limit: 1,
                    ..Default::default()
                })
                .await,
            Err(StoreError::BadCursor(_))
        ));
    }
    assert_eq!(page_size(Some(1_000_000)), MAX_PAGE_SIZE);
}

/// Builds, audit events, templates and users: newest (or first by name)
/// first, one page at a time, with their filters.
async fn other_lists_page_by_cursor(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store.claim_job("w").await.unwrap().unwrap();
    store
        .finish_build(&first.id, BuildStatus::Failed, Some("x"))
        .await
        .unwrap();
    for _ in 2..=5 {
        let build = store
            .create_build(&next_build(&workspace, &user, "start"))
            .await
            .unwrap();
        store.claim_job("w").await.unwrap().unwrap();
        store
            .finish_build(&build.id, BuildStatus::Succeeded, None)
            .await
            .unwrap();
    }
    let mut numbers = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_build_page(&workspace.id, None, after.as_deref(), 2)
            .await
            .unwrap();
        numbers.extend(page.items.iter().map(|b| b.number));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(numbers, [5, 4, 3, 2, 1]);
    let failed = store
        .list_build_page(&workspace.id, Some(BuildStatus::Failed), None, 50)
        .await
        .unwrap();
    assert_eq!(
        failed.items.iter().map(|b| b.number).collect::<Vec<_>>(),
        [1]
    );
    assert_eq!(failed.next, None);
    assert!(store
        .list_build_page(&workspace.id, None, Some("bm90IGEgY3Vyc29y"), 2)
        .await
        .is_err());

    for (action, actor) in [
        ("login", "alice"),
        ("build.start", "alice"),
        ("login", "bob"),
    ] {
        store
            .record_audit(&NewAuditEvent {
                actor_name: Some(actor.into()),
                action: action.into(),
                target_type: "user".into(),
                target: actor.into(),
                outcome: "success".into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let audit = |filter: AuditFilter| {
        let store = store.clone();
        async move {
            let mut filter = filter;
            let mut seen = Vec::new();
            loop {
                let page = store.list_audit(&filter).await.unwrap();
                seen.extend(
                    page.items
                        .into_iter()
                        .map(|e| format!("{} {}", e.action, e.target)),
                );
                match page.next {
                    Some(next) => filter.after = Some(next),
                    None => return seen,
                }
            }
        }
    };
    assert_eq!(
        audit(AuditFilter {
            limit: 1,
            ..Default::default()
        })
        .await,
        ["login bob", "build.start alice", "login alice"]
    );
    assert_eq!(
        audit(AuditFilter {
            actor: Some("alice".into()),
            action: Some("login".into()),
            limit: 1,
            ..Default::default()
        })
        .await,
        ["login alice"]
    );
    assert_eq!(
        audit(AuditFilter {
            any_target: Some("bob".into()),
            limit: 5,
            ..Default::default()
        })
        .await,
        ["login bob"]
    );
    let now = now_ms();
    assert!(audit(AuditFilter {
        since: Some(now + 60_000),
        limit: 5,
        ..Default::default()
    })
    .await
    .is_empty());
    assert_eq!(
        audit(AuditFilter {
            until: Some(now + 60_000),
            since: Some(now - 60_000),
            limit: 5,
            ..Default::default()
        })
        .await
        .len(),
        3
    );

    store.create_user(&new_user("carol")).await.unwrap();
    store.create_user(&new_user("bob")).await.unwrap();
    let users = store.list_user_page(None, 2).await.unwrap();
    assert_eq!(
        users
            .items
            .iter()
            .map(|u| u.username.as_str())
            .collect::<Vec<_>>(),
        ["alice", "bob"]
    );
    let rest = store
        .list_user_page(users.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.next, None);
    let templates = store.list_template_page(None, 1).await.unwrap();
    assert_eq!(templates.items.len(), 1);
    assert_eq!(templates.next, None);
}

macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let (_dir, store) = super::open().await;
                    super::$name(store).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    if let Some(store) = super::open_postgres().await {
                        super::$name(store).await;
                    }
                }
            )*
        }
    };
}

/// Plan JSON is kept for the newest builds of a workspace and every build
/// that still needs it (held, or pending/running the apply of a held plan).
async fn plan_json_is_kept_for_the_newest_builds_and_held_ones(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    let mut ids = vec![first.id.clone()];
    store.claim_job("w").await.unwrap().unwrap();
    store
        .set_build_plan(&first.id, "{\"n\":1}", "{}")
        .await
        .unwrap();
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    for n in 2..=5 {
        let build = store
            .create_build(&next_build(&workspace, &user, "start"))
            .await
            .unwrap();
        store.claim_job("w").await.unwrap().unwrap();
        store
            .set_build_plan(&build.id, &format!("{{\"n\":{n}}}"), "{}")
            .await
            .unwrap();
        if n == 5 {
            let plan = SavedPlan {
                plan: vec![1],
                digest: "d".into(),
                state_digest: "s".into(),
            };
            assert!(store.hold_build(&build.id, &plan, i64::MAX).await.unwrap());
        } else {
            store
                .finish_build(&build.id, BuildStatus::Failed, Some("x"))
                .await
                .unwrap();
        }
        ids.push(build.id);
    }
    let mut pruned = store.prune_plan_json(&workspace.id, 2).await.unwrap();
    pruned.sort();
    let mut expected = ids[..3].to_vec();
    expected.sort();
    assert_eq!(
        pruned, expected,
        "builds 1 to 3 are older than the newest 2"
    );
    for (index, id) in ids.iter().enumerate() {
        let kept = store.build_plan_json(id).await.unwrap().is_some();
        assert_eq!(kept, index >= 3, "build {}", index + 1);
    }
    // Nothing is older than the newest 0 builds but the held one keeps its plan.
    store.prune_plan_json(&workspace.id, 0).await.unwrap();
    assert!(store.build_plan_json(&ids[4]).await.unwrap().is_some());
    assert!(store.build_plan_json(&ids[3]).await.unwrap().is_none());
}

on_every_backend!(
    plan_json_is_kept_for_the_newest_builds_and_held_ones,
    missing_rows_are_typed_not_found,
    first_user_only_once_and_usernames_unique,
    concurrent_first_users_make_exactly_one,
    first_template_version_is_active_and_later_ones_on_request,
    one_active_build_per_workspace,
    concurrent_build_creation_accepts_exactly_one,
    concurrent_claimers_never_share_a_job,
    cancel_of_pending_build_removes_its_job_and_restart_fails_running_ones,
    log_lines_are_numbered_per_build,
    deleted_workspace_frees_its_name_and_stays_readable,
    concurrent_log_writers_get_distinct_sequence_numbers,
    a_held_build_is_confirmed_once_with_its_digest_and_expires_otherwise,
    protections_are_replaced_and_released_and_audit_is_filtered,
    agents_keep_their_startup_script_and_the_exit_status_of_a_failed_start,
    agents_are_replaced_while_they_send_heartbeats,
    sessions_and_api_tokens_are_found_touched_and_revoked,
    workspace_pages_follow_their_cursor_and_filters,
    other_lists_page_by_cursor,
);

/// A status or transition the code does not know (written by a newer server,
/// or by hand) fails the read and names the value; it is never read as
/// something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_stored_states_fail_the_read_naming_the_value() {
    let (dir, store) = open().await;
    let (_, _, build) = seeded(&store).await;
    use sqlx::Connection;
    let mut connection = sqlx::SqliteConnection::connect(&format!(
        "sqlite://{}",
        dir.path().join("abode.db").display()
    ))
    .await
    .unwrap();
    for (column, value) in [("status", "exploded"), ("transition", "reboot")] {
        let original: String = sqlx::query_scalar(&format!("SELECT {column} FROM builds"))
            .fetch_one(&mut connection)
            .await
            .unwrap();
        // The CHECK on transition would refuse it; a newer schema may not have one.
        sqlx::query("PRAGMA ignore_check_constraints = ON")
            .execute(&mut connection)
            .await
            .unwrap();
        sqlx::query(&format!("UPDATE builds SET {column} = ?"))
            .bind(value)
            .execute(&mut connection)
            .await
            .unwrap();
        let error = store.build_by_id(&build.id).await.unwrap_err().to_string();
        assert!(error.contains(&format!("`{value}`")), "{error}");
        sqlx::query(&format!("UPDATE builds SET {column} = ?"))
            .bind(original)
            .execute(&mut connection)
            .await
            .unwrap();
    }
    assert!(store.build_by_id(&build.id).await.is_ok());
}
