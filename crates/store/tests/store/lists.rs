//! The other pages (builds, audit events, templates, users; the workspace
//! page is in `workspaces`): one page at a time by cursor, with filters.

use abode_store::*;

use crate::common::*;

/// Builds, audit events, templates and users: newest (or first by name)
/// first, one page at a time, with their filters.
async fn other_lists_page_by_cursor(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    store
        .finish_build(&first.id, BuildStatus::Failed, Some("x"))
        .await
        .unwrap();
    for _ in 2..=5 {
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
    let now = store.clock().now_ms();
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
    let users = store.list_user_page(None, 2, false).await.unwrap();
    assert_eq!(
        users
            .items
            .iter()
            .map(|entry| entry.user.username.as_str())
            .collect::<Vec<_>>(),
        ["alice", "bob"]
    );
    let rest = store
        .list_user_page(users.next.as_deref(), 2, false)
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.next, None);
    let templates = store.list_template_page(None, 1, None).await.unwrap();
    assert_eq!(templates.items.len(), 1);
    assert_eq!(templates.next, None);
}

on_every_backend!(other_lists_page_by_cursor,);
