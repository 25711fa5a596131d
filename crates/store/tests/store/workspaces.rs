//! Workspaces (`workspaces.rs`): deletion and the workspace page.

use abode_store::*;

use crate::common::*;

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

async fn a_workspace_moves_to_another_owner_with_its_history_and_next_build(store: Store) {
    let (alice, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    store
        .record_audit(&NewAuditEvent {
            actor_id: Some(alice.id.clone()),
            actor_name: Some("alice".into()),
            action: "build.start".into(),
            target_type: "workspace".into(),
            target: "alice/dev".into(),
            outcome: "success".into(),
            workspace_id: Some(workspace.id.clone()),
            ..NewAuditEvent::default()
        })
        .await
        .unwrap();
    // Bob already has a live "mine": the transfer is refused, nothing moves.
    another_workspace(&store, &bob, &workspace, "mine").await;
    assert!(matches!(
        store
            .transfer_workspace(&workspace.id, &bob.id, "mine", None)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.workspace_by_id(&workspace.id).await.unwrap().owner_id,
        alice.id
    );

    let claim = NewBuild {
        initiator_id: bob.id.clone(),
        reason: BuildReason::PrebuildClaim,
        ..next_build(&workspace, &alice, "start")
    };
    let (moved, build) = store
        .transfer_workspace(&workspace.id, &bob.id, "claimed", Some(&claim))
        .await
        .unwrap();
    assert_eq!(
        (moved.owner_name.as_str(), moved.name.as_str()),
        ("bob", "claimed")
    );
    let build = build.unwrap();
    assert_eq!(
        (build.number, build.reason),
        (2, BuildReason::PrebuildClaim)
    );
    assert_eq!(build.owner_name, "bob");
    // The history follows the workspace and shows its name of now.
    let events = store
        .list_audit(&AuditFilter {
            workspace_id: Some(workspace.id.clone()),
            limit: 10,
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(events.items.len(), 1);
    assert_eq!(events.items[0].target, "bob/claimed");
    // Bob sees it as his; Alice no longer does.
    for (viewer, seen) in [(&bob.id, 1), (&alice.id, 0)] {
        let visible = store
            .list_audit(&AuditFilter {
                visible_to: Some(viewer.clone()),
                limit: 10,
                ..AuditFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(visible.items.len(), seen);
    }
    // One active build at a time holds across a transfer too.
    assert!(matches!(
        store
            .transfer_workspace(
                &workspace.id,
                &alice.id,
                "back",
                Some(&next_build(&workspace, &alice, "stop"))
            )
            .await,
        Err(StoreError::Conflict(_))
    ));
}

async fn a_workspace_moves_to_a_version_only_when_a_build_of_it_succeeds(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let (template, _) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![4, 5, 6],
            archive_sha256: "def".into(),
            message: "second".into(),
            created_by: user.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: None,
            presets: None,
            activate: true,
        })
        .await
        .unwrap();
    let second = template.active_version_id.clone().unwrap();
    let size_9 = Parameters::from([("size".to_string(), "9".to_string())]);
    let update = |parameters: &Parameters| NewBuild {
        template_version_id: second.clone(),
        parameters: Some(parameters.clone()),
        ..next_build(&workspace, &user, "start")
    };
    for (end, moves) in [
        (BuildStatus::Canceled, false),
        (BuildStatus::Failed, false),
        (BuildStatus::Succeeded, true),
    ] {
        let build = store.create_build(&update(&size_9)).await.unwrap();
        let queued = store.workspace_by_id(&workspace.id).await.unwrap();
        assert_eq!(queued.template_version_id, workspace.template_version_id);
        store.finish_build(&build.id, end, None).await.unwrap();
        let after = store.workspace_by_id(&workspace.id).await.unwrap();
        assert_eq!(after.template_version_id == second, moves, "{end}");
        assert_eq!(after.parameters == size_9, moves, "{end}");
    }
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
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                id: new_id(),
                workspace_id: id,
                transition: Transition::Start,
                template_version_id: like.template_version_id.clone(),
                initiator_id: owner.id.clone(),
                reason: BuildReason::Initiator,
                parameters: None,
                workspace_parameters: None,
                retention: None,
                rename_to: None,
                then_start: false,
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
    let job = store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    let build = store.build_by_id(&job.build_id).await.unwrap();
    store
        .finish_build(&build.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let agent = |name: &str| NewAgent {
        name: name.into(),
        token_hash: format!("hash-{name}-{}", build.id),
        startup_script: None,
        claim_script: None,
        settings: Default::default(),
        dir: None,
        env: "{}".into(),
        apps: Vec::new(),
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

/// A workspace keeps the preset it was created with, and every read of it
/// (by id, by name, in a page) says which.
async fn a_workspace_keeps_its_preset(store: Store) {
    let (user, workspace, _) = seeded(&store).await;
    assert_eq!(workspace.preset_name, None);
    let id = new_id();
    let (created, _) = store
        .create_workspace(
            &NewWorkspace {
                id: id.clone(),
                preset_name: Some("big box".into()),
                name: "preset".into(),
                ..new_workspace_like(&workspace, &user)
            },
            &NewBuild {
                workspace_id: id.clone(),
                ..next_build(&workspace, &user, "start")
            },
        )
        .await
        .unwrap();
    assert_eq!(created.preset_name.as_deref(), Some("big box"));
    let by_name = store
        .workspace_by_owner_and_name(&user.id, "preset")
        .await
        .unwrap();
    assert_eq!(by_name.preset_name.as_deref(), Some("big box"));
    let page = store
        .list_workspace_page(&WorkspaceFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let presets: Vec<(String, Option<String>)> = page
        .items
        .iter()
        .map(|summary| {
            (
                summary.workspace.name.clone(),
                summary.workspace.preset_name.clone(),
            )
        })
        .collect();
    assert_eq!(
        presets,
        vec![
            ("dev".to_string(), None),
            ("preset".to_string(), Some("big box".to_string()))
        ]
    );
}

/// The fields of a new workspace of `owner` on the template and version of `like`.
fn new_workspace_like(like: &Workspace, owner: &User) -> NewWorkspace {
    NewWorkspace {
        id: new_id(),
        owner_id: owner.id.clone(),
        name: "other".into(),
        template_id: like.template_id.clone(),
        template_version_id: like.template_version_id.clone(),
        parameters: Parameters::new(),
        preset_name: None,
    }
}

on_every_backend!(
    deleted_workspace_frees_its_name_and_stays_readable,
    a_workspace_keeps_its_preset,
    workspace_pages_follow_their_cursor_and_filters,
    a_workspace_moves_to_another_owner_with_its_history_and_next_build,
    a_workspace_moves_to_a_version_only_when_a_build_of_it_succeeds,
);
