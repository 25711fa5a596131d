//! Lifecycle settings (`lifecycle.rs`): a template's policy, a workspace's
//! schedule and deadlines, throttled use and dormancy.

use abode_store::*;

use crate::common::*;

async fn a_new_template_has_the_default_policy_and_keeps_an_edit(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let policy = store.template_policy(&workspace.template_id).await.unwrap();
    assert_eq!(policy.default_ttl_ms, 0);
    assert_eq!(policy.activity_bump_ms, 3_600_000);
    assert_eq!(policy.autostart_days, "mon,tue,wed,thu,fri,sat,sun");
    assert!(policy.allow_user_autostart && policy.allow_user_autostop);
    assert!(!policy.require_active_version);

    let edited = TemplatePolicy {
        default_ttl_ms: 8 * 3_600_000,
        max_ttl_ms: 24 * 3_600_000,
        autostart_days: "mon,fri".into(),
        allow_user_autostart: false,
        failure_ttl_ms: 60_000,
        dormancy_threshold_ms: 5,
        dormancy_auto_deletion_ms: 6,
        require_active_version: true,
        ..policy
    };
    store.set_template_policy(&edited).await.unwrap();
    assert_eq!(
        store.template_policy(&workspace.template_id).await.unwrap(),
        edited
    );

    let missing = TemplatePolicy {
        template_id: new_id(),
        ..edited
    };
    assert!(matches!(
        store.set_template_policy(&missing).await,
        Err(StoreError::NotFound("template"))
    ));
    assert!(matches!(
        store.template_policy(&missing.template_id).await,
        Err(StoreError::NotFound("template"))
    ));
}

async fn a_workspace_schedule_and_deadlines_are_kept_and_cleared(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let id = &workspace.id;
    let fresh = store.workspace_lifecycle(id).await.unwrap();
    assert_eq!(fresh.autostart_cron, None);
    assert_eq!(fresh.ttl_ms, None);
    assert_eq!(fresh.deadline, None);

    store
        .set_workspace_autostart(id, Some("30 8 * * 1-5"), Some("Europe/Paris"))
        .await
        .unwrap();
    store.set_workspace_ttl(id, Some(7_200_000)).await.unwrap();
    store
        .set_deadlines(id, Some(1_000), Some(5_000))
        .await
        .unwrap();
    let set = store.workspace_lifecycle(id).await.unwrap();
    assert_eq!(set.autostart_cron.as_deref(), Some("30 8 * * 1-5"));
    assert_eq!(set.autostart_timezone.as_deref(), Some("Europe/Paris"));
    assert_eq!(set.ttl_ms, Some(7_200_000));
    assert_eq!((set.deadline, set.max_deadline), (Some(1_000), Some(5_000)));

    // The deadline moves only from the value the caller read.
    assert!(!store
        .push_workspace_deadline(id, Some(999), 2_000)
        .await
        .unwrap());
    assert!(store
        .push_workspace_deadline(id, Some(1_000), 2_000)
        .await
        .unwrap());
    assert_eq!(
        store.workspace_lifecycle(id).await.unwrap().deadline,
        Some(2_000)
    );

    store.set_workspace_autostart(id, None, None).await.unwrap();
    store.set_workspace_ttl(id, None).await.unwrap();
    store.set_deadlines(id, None, None).await.unwrap();
    let cleared = store.workspace_lifecycle(id).await.unwrap();
    assert_eq!(cleared.autostart_cron, None);
    assert_eq!(cleared.ttl_ms, None);
    assert_eq!((cleared.deadline, cleared.max_deadline), (None, None));
    assert!(!store
        .push_workspace_deadline(id, Some(2_000), 3_000)
        .await
        .unwrap());
    assert!(store
        .push_workspace_deadline(id, None, 3_000)
        .await
        .unwrap());
    assert_eq!(
        store.workspace_lifecycle(id).await.unwrap().deadline,
        Some(3_000)
    );

    let unknown = new_id();
    for result in [
        store.set_workspace_ttl(&unknown, None).await,
        store.set_workspace_autostart(&unknown, None, None).await,
    ] {
        assert!(matches!(result, Err(StoreError::NotFound("workspace"))));
    }
}

async fn use_is_recorded_once_per_interval(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let id = &workspace.id;
    // (used at, written when older than, written?, last_used_at after)
    let steps = [
        (10_000, 0, true, 10_000),
        (20_000, 10_000, false, 10_000),
        (70_000, 10_001, true, 70_000),
        (80_000, 20_000, false, 70_000),
    ];
    for (at, older_than, written, after) in steps {
        assert_eq!(
            store
                .record_workspace_use(id, at, older_than)
                .await
                .unwrap(),
            written,
            "use at {at}"
        );
        assert_eq!(
            store.workspace_lifecycle(id).await.unwrap().last_used_at,
            Some(after)
        );
    }
}

async fn a_dormant_workspace_wakes_once(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let id = &workspace.id;
    assert!(!store.wake_workspace(id, 1).await.unwrap());
    assert!(store.mark_dormant(id, 100, Some(900)).await.unwrap());
    assert!(!store.mark_dormant(id, 200, None).await.unwrap());
    let dormant = store.workspace_lifecycle(id).await.unwrap();
    assert_eq!(
        (dormant.dormant_at, dormant.deleting_at),
        (Some(100), Some(900))
    );

    assert!(store.wake_workspace(id, 300).await.unwrap());
    let awake = store.workspace_lifecycle(id).await.unwrap();
    assert_eq!(
        (
            awake.dormant_at,
            awake.deleting_at,
            awake.deletion_notified_at
        ),
        (None, None, None)
    );
    assert_eq!(awake.last_used_at, Some(300));
    assert!(!store.wake_workspace(id, 400).await.unwrap());
}

on_every_backend!(
    a_new_template_has_the_default_policy_and_keeps_an_edit,
    a_workspace_schedule_and_deadlines_are_kept_and_cleared,
    use_is_recorded_once_per_interval,
    a_dormant_workspace_wakes_once,
);
