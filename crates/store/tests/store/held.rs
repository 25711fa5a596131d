//! Held builds and protections (`held.rs`): confirmation, expiry, saved
//! plans, protections, and the audit events they leave.

use abode_store::*;

use crate::common::*;

async fn a_held_build_is_confirmed_once_with_its_digest_and_expires_otherwise(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
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
        workspace_id: Some(workspace.id.clone()),
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
    let job = store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
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
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
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
            retain_expire: None,
            retain_for_secs: None,
        },
        NewProtection {
            address: "c.d[0]".into(),
            mode: "block".into(),
            retain_expire: None,
            retain_for_secs: None,
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
        .record_audit(&NewAuditEvent {
            workspace_id: Some(workspace.id.clone()),
            ..event("workspace", "alice/dev", None)
        })
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
            visible_to: Some(user.id.clone()),
            limit: 10,
            ..Default::default()
        })
        .await,
        vec!["alice", "alice/dev"]
    );
    assert_eq!(
        targets(AuditFilter {
            any_target: Some("bob/dev".into()),
            limit: 10,
            ..Default::default()
        })
        .await,
        vec!["bob/dev"]
    );
    assert_eq!(
        targets(AuditFilter {
            workspace_id: Some(workspace.id.clone()),
            limit: 10,
            ..Default::default()
        })
        .await,
        vec!["alice/dev"]
    );
}

on_every_backend!(
    a_held_build_is_confirmed_once_with_its_digest_and_expires_otherwise,
    protections_are_replaced_and_released_and_audit_is_filtered,
);
