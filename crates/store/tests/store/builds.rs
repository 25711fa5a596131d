//! Builds (`builds.rs`, and the job claim of each backend): one active
//! build per workspace, the atomic claim, cancel, logs, plan JSON, and typed
//! build state.

use std::collections::HashSet;

use abode_guard::Decision;
use abode_store::*;

use crate::common::*;

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
            parameters: None,
            presets: None,
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
                    parameters: Parameters::new(),
                    preset_name: None,
                },
                &NewBuild {
                    id: build_id,
                    workspace_id,
                    transition: Transition::Start,
                    template_version_id: version.id.clone(),
                    initiator_id: user.id.clone(),
                    reason: BuildReason::Initiator,
                    parameters: None,
                    workspace_parameters: None,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await
            .unwrap();
    }
    let claimers = (0..6).map(|worker| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(job) = store
                .claim_job(&format!("w{worker}"), "server", 60_000)
                .await
                .unwrap()
            {
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
    assert_eq!(store.claim_job("w", "server", 60_000).await.unwrap(), None);
    let second = store
        .create_build(&next_build(&workspace, &user, "start"))
        .await
        .unwrap();
    let job = store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
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
        store.running_builds_of("server").await.unwrap(),
        vec![second.id.clone()]
    );
    assert!(store
        .finish_build(&second.id, BuildStatus::Failed, Some("server died"))
        .await
        .unwrap());
    assert!(store.running_builds_of("server").await.unwrap().is_empty());
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
                    stage: LogStage::PLAN,
                    level: LogLevel::Info,
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
                    stage: LogStage::APPLY,
                    level: LogLevel::Info,
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

/// Plan JSON is kept for the newest builds of a workspace and every build
/// that still needs it (held, or pending/running the apply of a held plan).
async fn plan_json_is_kept_for_the_newest_builds_and_held_ones(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    let mut ids = vec![first.id.clone()];
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    store
        .set_build_plan(&first.id, "{\"n\":1}", &report(Decision::Allow))
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
        store
            .claim_job("w", "server", 60_000)
            .await
            .unwrap()
            .unwrap();
        store
            .set_build_plan(
                &build.id,
                &format!("{{\"n\":{n}}}"),
                &report(Decision::Confirm),
            )
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

/// A log line's stage and level are read typed: one stored that does not
/// parse (a level the code does not know, a stage with a control character)
/// fails the read of the log, naming the value; it is never shown as
/// something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreadable_log_lines_fail_the_read_naming_the_value() {
    let (dir, store) = open().await;
    let (_, _, build) = seeded(&store).await;
    store
        .append_log(
            &build.id,
            &NewLogLine {
                stage: LogStage::PLAN,
                level: LogLevel::Warn,
                text: "planning".into(),
            },
        )
        .await
        .unwrap();
    let lines = store.logs_after(&build.id, 0, 10).await.unwrap();
    assert_eq!(
        (lines[0].stage.clone(), lines[0].level),
        (LogStage::PLAN, LogLevel::Warn)
    );
    use sqlx::Connection;
    let mut connection = sqlx::SqliteConnection::connect(&format!(
        "sqlite://{}",
        dir.path().join("abode.db").display()
    ))
    .await
    .unwrap();
    for (column, value, named) in [
        ("level", "fatal", "`fatal`"),
        ("stage", "pl\u{1b}an", "pl\\u{1b}an"),
    ] {
        sqlx::query(&format!("UPDATE build_logs SET {column} = ?"))
            .bind(value)
            .execute(&mut connection)
            .await
            .unwrap();
        let error = store
            .logs_after(&build.id, 0, 10)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(named), "{error}");
        let original = if column == "level" { "warn" } else { "plan" };
        sqlx::query(&format!("UPDATE build_logs SET {column} = ?"))
            .bind(original)
            .execute(&mut connection)
            .await
            .unwrap();
    }
    assert!(store.logs_after(&build.id, 0, 10).await.is_ok());
}

/// A guard report is stored as the guard's JSON report and read back as the
/// same report, wherever a build is read.
async fn a_guard_report_reads_back_as_it_was_written(store: Store) {
    let (_, workspace, build) = seeded(&store).await;
    assert_eq!(
        store.build_by_id(&build.id).await.unwrap().guard_report,
        None
    );
    let mut written = report(Decision::Block);
    written.initiator = abode_guard::Initiator::System;
    written.summary.delete = 2;
    store
        .set_build_plan(&build.id, "{}", &written)
        .await
        .unwrap();
    let read = store.build_by_id(&build.id).await.unwrap();
    assert_eq!(read.guard_report.as_ref(), Some(&written));
    let page = store
        .list_workspace_page(&WorkspaceFilter {
            limit: 50,
            ..WorkspaceFilter::default()
        })
        .await
        .unwrap();
    let summary = page
        .items
        .iter()
        .find(|summary| summary.workspace.id == workspace.id)
        .unwrap();
    assert_eq!(summary.latest_build.guard_report.as_ref(), Some(&written));
}

/// A stored guard report that does not read as a report (written by hand,
/// damaged, or by a release with another schema) fails every read of its
/// build with an error naming it and the build; it is never read as none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_guard_report_fails_the_read_naming_it() {
    let (dir, store) = open().await;
    let (_, workspace, build) = seeded(&store).await;
    use sqlx::Connection;
    let mut connection = sqlx::SqliteConnection::connect(&format!(
        "sqlite://{}",
        dir.path().join("abode.db").display()
    ))
    .await
    .unwrap();
    for text in ["not json", "{\"decision\": \"maybe\"}"] {
        sqlx::query("UPDATE builds SET guard_report = ?, status = 'failed'")
            .bind(text)
            .execute(&mut connection)
            .await
            .unwrap();
        let errors = [
            store.build_by_id(&build.id).await.map(drop),
            store.list_builds(&workspace.id).await.map(drop),
            store
                .list_workspace_page(&WorkspaceFilter {
                    limit: 50,
                    ..WorkspaceFilter::default()
                })
                .await
                .map(drop),
            store.scheduler_tick_snapshot().await.map(drop),
        ];
        for error in errors {
            let Err(StoreError::Corrupt(corrupt)) = error else {
                panic!("{text}: {error:?}");
            };
            assert_eq!(corrupt.what, "guard report");
            assert_eq!(corrupt.of, format!("build {}", build.id));
            let message = corrupt.to_string();
            assert!(message.contains("guard report"), "{message}");
        }
    }
}

/// Stored parameters that are not an object of strings, and declarations
/// that are not a list of declarations, fail the read of their workspace,
/// build or version with an error naming them and the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreadable_parameters_fail_the_read_naming_them() {
    let (dir, store) = open().await;
    let (_, workspace, build) = seeded(&store).await;
    use sqlx::Connection;
    let mut connection = sqlx::SqliteConnection::connect(&format!(
        "sqlite://{}",
        dir.path().join("abode.db").display()
    ))
    .await
    .unwrap();
    let corrupt = |error: Result<(), StoreError>| match error {
        Err(StoreError::Corrupt(corrupt)) => corrupt,
        other => panic!("{other:?}"),
    };
    sqlx::query("UPDATE builds SET parameters = '{\"size\": 9}'")
        .execute(&mut connection)
        .await
        .unwrap();
    let error = corrupt(store.build_by_id(&build.id).await.map(drop));
    assert_eq!(
        (error.what, error.of),
        ("parameters", format!("build {}", build.id))
    );
    sqlx::query("UPDATE builds SET parameters = NULL")
        .execute(&mut connection)
        .await
        .unwrap();
    assert_eq!(store.build_by_id(&build.id).await.unwrap().parameters, None);
    sqlx::query("UPDATE workspaces SET parameters = '[]'")
        .execute(&mut connection)
        .await
        .unwrap();
    for error in [
        store.workspace_by_id(&workspace.id).await.map(drop),
        store
            .list_workspace_page(&WorkspaceFilter {
                limit: 50,
                ..WorkspaceFilter::default()
            })
            .await
            .map(drop),
    ] {
        let error = corrupt(error);
        assert_eq!(
            (error.what, error.of),
            ("parameters", format!("workspace {}", workspace.id))
        );
    }
    sqlx::query("UPDATE template_versions SET parameters = '[{\"name\": 1}]'")
        .execute(&mut connection)
        .await
        .unwrap();
    let version = &workspace.template_version_id;
    let error = corrupt(store.template_version_by_id(version).await.map(drop));
    assert_eq!(
        (error.what, error.of),
        (
            "parameter declarations",
            format!("template version {version}")
        )
    );
}

/// A state is written over exactly the one it was compared with.
async fn a_state_replaces_only_the_one_it_was_compared_with(store: Store) {
    let (_, workspace, build) = seeded(&store).await;
    let put = |state: &'static [u8], previous: Option<&'static [u8]>| {
        let store = store.clone();
        let (workspace, build) = (workspace.id.clone(), build.id.clone());
        async move {
            store
                .put_state_replacing(&workspace, &build, state, previous, Placement::Nowhere)
                .await
                .unwrap()
        }
    };
    assert!(put(b"one", None).await);
    assert!(!put(b"two", None).await, "there is one already");
    assert!(!put(b"two", Some(b"zero")).await, "not the stored one");
    assert_eq!(store.state(&workspace.id).await.unwrap().unwrap(), b"one");
    assert!(put(b"two", Some(b"one")).await);
    assert!(
        !put(b"three", Some(b"one")).await,
        "another write came first"
    );
    assert_eq!(store.state(&workspace.id).await.unwrap().unwrap(), b"two");
}

/// A rename build's workspace takes the new name only when the build
/// succeeds; a canceled or failed one leaves the old name, and a name
/// another workspace took meanwhile fails the build instead.
async fn a_rename_takes_effect_only_when_its_build_succeeds(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let rename = |name: &str| NewBuild {
        reason: BuildReason::Rename,
        rename_to: Some(name.into()),
        ..next_build(&workspace, &user, "start")
    };
    // Asked, the name is reserved for this workspace's rename.
    let failed = store.create_build(&rename("work")).await.unwrap();
    assert_eq!(failed.rename_to.as_deref(), Some("work"));
    assert!(store
        .workspace_name_in_use(&user.id, "work", "another-workspace")
        .await
        .unwrap());
    assert!(!store
        .workspace_name_in_use(&user.id, "work", &workspace.id)
        .await
        .unwrap());
    store
        .finish_build(&failed.id, BuildStatus::Failed, Some("boom"))
        .await
        .unwrap();
    assert_eq!(
        store.workspace_by_id(&workspace.id).await.unwrap().name,
        "dev"
    );
    assert!(!store
        .workspace_name_in_use(&user.id, "work", "another-workspace")
        .await
        .unwrap());

    let succeeded = store.create_build(&rename("work")).await.unwrap();
    assert!(store
        .finish_build(&succeeded.id, BuildStatus::Succeeded, None)
        .await
        .unwrap());
    assert_eq!(
        store.workspace_by_id(&workspace.id).await.unwrap().name,
        "work"
    );
    assert_eq!(
        store
            .build_by_id(&succeeded.id)
            .await
            .unwrap()
            .workspace_name,
        "work"
    );

    // Another workspace took the name while the rename ran: it keeps it.
    let clashing = store.create_build(&rename("taken")).await.unwrap();
    let other = NewWorkspace {
        id: new_id(),
        owner_id: user.id.clone(),
        name: "taken".into(),
        template_id: workspace.template_id.clone(),
        template_version_id: workspace.template_version_id.clone(),
        parameters: Parameters::new(),
        preset_name: None,
    };
    let other_build = NewBuild {
        workspace_id: other.id.clone(),
        ..next_build(&workspace, &user, "start")
    };
    store.create_workspace(&other, &other_build).await.unwrap();
    assert!(store
        .finish_build(&clashing.id, BuildStatus::Succeeded, None)
        .await
        .unwrap());
    let ended = store.build_by_id(&clashing.id).await.unwrap();
    assert_eq!(ended.status, BuildStatus::Failed);
    assert!(ended.error.unwrap().contains("\"taken\""));
    assert_eq!(
        store.workspace_by_id(&workspace.id).await.unwrap().name,
        "work"
    );
}

/// A restart's stop that succeeded waits for its start until a newer build
/// of the workspace exists; a failed one never does.
async fn a_succeeded_restart_stop_waits_for_its_start(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let restart = || NewBuild {
        reason: BuildReason::Restart,
        then_start: true,
        ..next_build(&workspace, &user, "stop")
    };
    let failed = store.create_build(&restart()).await.unwrap();
    assert!(failed.then_start);
    store
        .finish_build(&failed.id, BuildStatus::Failed, Some("boom"))
        .await
        .unwrap();
    assert!(store.restarts_to_continue().await.unwrap().is_empty());
    let stop = store.create_build(&restart()).await.unwrap();
    assert!(store.restarts_to_continue().await.unwrap().is_empty());
    store
        .finish_build(&stop.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let waiting: Vec<String> = store
        .restarts_to_continue()
        .await
        .unwrap()
        .into_iter()
        .map(|build| build.id)
        .collect();
    assert_eq!(waiting, vec![stop.id.clone()]);
    store
        .create_build(&next_build(&workspace, &user, "start"))
        .await
        .unwrap();
    assert!(store.restarts_to_continue().await.unwrap().is_empty());
}

on_every_backend!(
    a_rename_takes_effect_only_when_its_build_succeeds,
    a_succeeded_restart_stop_waits_for_its_start,
    a_guard_report_reads_back_as_it_was_written,
    a_state_replaces_only_the_one_it_was_compared_with,
    plan_json_is_kept_for_the_newest_builds_and_held_ones,
    one_active_build_per_workspace,
    concurrent_build_creation_accepts_exactly_one,
    concurrent_claimers_never_share_a_job,
    cancel_of_pending_build_removes_its_job_and_restart_fails_running_ones,
    log_lines_are_numbered_per_build,
    concurrent_log_writers_get_distinct_sequence_numbers,
);
