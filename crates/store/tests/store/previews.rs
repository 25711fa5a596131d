//! Fleet previews: the workspaces a preview covers (the live ones of the
//! template not on the version, or the named ones, in owner and name
//! order), their results as a queue of their own, claimed once under a
//! lease and taken again when the lease runs out, and the counts.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

/// A second version of the seeded template and three more workspaces: one
/// of another owner, one deleted, one already on the new version.
async fn fleet(store: &Store) -> (User, Workspace, TemplateVersion, Vec<String>) {
    let (alice, dev, _) = seeded(store).await;
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    let (_, v2) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![4],
            archive_sha256: "def".into(),
            message: "second".into(),
            created_by: alice.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: None,
            presets: None,
            activate: false,
        })
        .await
        .unwrap();
    let mut ids = Vec::new();
    for (owner, name, version) in [
        (&bob, "aaa", &dev.template_version_id),
        (&alice, "gone", &dev.template_version_id),
        (&alice, "current", &v2.id),
    ] {
        let workspace_id = new_id();
        store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: owner.id.clone(),
                    name: name.into(),
                    template_id: dev.template_id.clone(),
                    template_version_id: version.clone(),
                    parameters: Parameters::new(),
                    preset_name: None,
                },
                &NewBuild {
                    workspace_id: workspace_id.clone(),
                    template_version_id: version.clone(),
                    ..next_build(&dev, owner, "start")
                },
            )
            .await
            .unwrap();
        ids.push(workspace_id);
    }
    store.mark_workspace_deleted(&ids[1]).await.unwrap();
    (alice, dev, v2, ids)
}

/// A preview of `v2` on every live workspace of the template not on it.
async fn preview_all(store: &Store, by: &User, dev: &Workspace, v2: &TemplateVersion) -> Preview {
    store
        .create_preview(&NewPreview {
            id: new_id(),
            template_id: dev.template_id.clone(),
            template_version_id: v2.id.clone(),
            requested_by: by.id.clone(),
            workspace_ids: None,
        })
        .await
        .unwrap()
}

async fn a_preview_covers_the_live_workspaces_not_on_its_version(store: Store) {
    let (alice, dev, v2, ids) = fleet(&store).await;
    let preview = preview_all(&store, &alice, &dev, &v2).await;
    assert_eq!((preview.total, preview.pending), (2, 2));
    assert_eq!(
        (preview.template_name.as_str(), preview.version),
        ("base", 2)
    );
    assert_eq!(preview.requested_by, "alice");
    let page = store
        .list_preview_result_page(&preview.id, None, 1)
        .await
        .unwrap();
    // alice/dev before bob/aaa: by owner, then name.
    assert_eq!(page.items[0].workspace_name, "dev");
    assert_eq!(page.items[0].status, PreviewStatus::Queued);
    let rest = store
        .list_preview_result_page(&preview.id, page.next.as_deref(), 10)
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(
        (
            rest.items[0].owner_name.as_str(),
            rest.items[0].workspace_id.as_str()
        ),
        ("bob", ids[0].as_str())
    );
    assert_eq!(rest.next, None);

    // Named workspaces are previewed whatever version they are on; a
    // deleted one is not.
    let named = store
        .create_preview(&NewPreview {
            id: new_id(),
            template_id: dev.template_id.clone(),
            template_version_id: v2.id.clone(),
            requested_by: alice.id.clone(),
            workspace_ids: Some(vec![ids[1].clone(), ids[2].clone()]),
        })
        .await
        .unwrap();
    assert_eq!(named.total, 1);
}

async fn preview_results_are_claimed_once_and_again_after_their_lease(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (alice, dev, v2, _) = fleet(&store).await;
    let preview = preview_all(&store, &alice, &dev, &v2).await;
    let first = store
        .claim_preview("w", "a", 10_000, &[])
        .await
        .unwrap()
        .unwrap();
    let second = store
        .claim_preview("w", "b", 10_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first.result_id, second.result_id);
    assert_eq!(first.preview_id, preview.id);
    assert_eq!(
        store.claim_preview("w", "c", 10_000, &[]).await.unwrap(),
        None
    );

    let planned = PreviewOutcome {
        status: PreviewStatus::Planned,
        transition: Some(Transition::Start),
        decision: Some("confirm"),
        report: Some("{}".into()),
        error: None,
    };
    assert!(store
        .finish_preview(&first.result_id, "a", &planned)
        .await
        .unwrap());
    // Only the holder records the end, once.
    assert!(!store
        .finish_preview(&first.result_id, "a", &planned)
        .await
        .unwrap());
    assert!(!store
        .finish_preview(&second.result_id, "a", &planned)
        .await
        .unwrap());

    // b died: its result is taken again once its lease has run out.
    hand.advance(Duration::from_secs(11));
    let again = store
        .claim_preview("w", "c", 10_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.result_id, second.result_id);
    assert!(!store
        .finish_preview(&second.result_id, "b", &planned)
        .await
        .unwrap());
    let failed = PreviewOutcome {
        status: PreviewStatus::Failed,
        transition: Some(Transition::Stop),
        decision: None,
        report: None,
        error: Some("terraform plan failed".into()),
    };
    assert!(store
        .finish_preview(&second.result_id, "c", &failed)
        .await
        .unwrap());

    let done = store.latest_preview(&v2.id, false).await.unwrap().unwrap();
    assert_eq!(
        (
            done.total,
            done.pending,
            done.held,
            done.failed,
            done.allowed
        ),
        (2, 0, 1, 1, 0)
    );
    assert_eq!(done.finished_at, Some(start + 11_000));
    let results = store
        .list_preview_result_page(&preview.id, None, 10)
        .await
        .unwrap();
    assert_eq!(results.items[1].transition, Some(Transition::Stop));
    assert_eq!(
        results.items[1].error.as_deref(),
        Some("terraform plan failed")
    );
    assert_eq!(
        store
            .latest_preview(&dev.template_version_id, false)
            .await
            .unwrap(),
        None
    );
}

async fn a_stopping_server_gives_its_previews_back(store: Store) {
    let (alice, dev, v2, _) = fleet(&store).await;
    preview_all(&store, &alice, &dev, &v2).await;
    let first = store
        .claim_preview("w", "a", 600_000, &[])
        .await
        .unwrap()
        .unwrap();
    let second = store
        .claim_preview("w", "a", 600_000, &[])
        .await
        .unwrap()
        .unwrap();
    // One result given back, then the rest; another server's are kept.
    assert_eq!(
        store
            .requeue_previews("a", Some(&first.result_id))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.requeue_previews("b", None).await.unwrap(), 0);
    let again = store
        .claim_preview("w", "b", 600_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.result_id, first.result_id);
    assert_eq!(store.requeue_previews("a", None).await.unwrap(), 1);
    let last = store
        .claim_preview("w", "c", 600_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last.result_id, second.result_id);
    let preview = store.latest_preview(&v2.id, false).await.unwrap().unwrap();
    assert_eq!(preview.pending, 2);
}

async fn the_fleet_preview_stands_until_a_newer_fleet_preview(store: Store) {
    let (alice, dev, v2, ids) = fleet(&store).await;
    let whole = preview_all(&store, &alice, &dev, &v2).await;
    assert!(!whole.named);
    let named = store
        .create_preview(&NewPreview {
            id: new_id(),
            template_id: dev.template_id.clone(),
            template_version_id: v2.id.clone(),
            requested_by: alice.id.clone(),
            workspace_ids: Some(vec![ids[0].clone()]),
        })
        .await
        .unwrap();
    assert!(named.named);
    let latest = |fleet| {
        let store = store.clone();
        let version = v2.id.clone();
        async move {
            store
                .latest_preview(&version, fleet)
                .await
                .unwrap()
                .unwrap()
                .id
        }
    };
    assert_eq!(latest(false).await, named.id);
    assert_eq!(latest(true).await, whole.id);
    // A page's cursor belongs to its preview.
    let page = store
        .list_preview_result_page(&whole.id, None, 1)
        .await
        .unwrap();
    let cursor = page.next.unwrap();
    assert!(matches!(
        store
            .list_preview_result_page(&named.id, Some(&cursor), 1)
            .await,
        Err(StoreError::BadCursor(_))
    ));
}

async fn a_preview_s_plans_need_its_version_s_tags(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (alice, dev, _) = seeded(&store).await;
    let (_, tagged) = store
        .create_linted_template_version(
            &NewTemplateVersion {
                template_name: "base".into(),
                archive: vec![5],
                archive_sha256: "tagged".into(),
                message: "".into(),
                created_by: alice.id.clone(),
                validation_ok: true,
                validation_message: "ok".into(),
                parameters: None,
                presets: None,
                activate: false,
            },
            None,
            &["cloud=a".into()],
            true,
            &[],
        )
        .await
        .unwrap();
    preview_all(&store, &alice, &dev, &tagged).await;
    assert_eq!(
        store.claim_preview("w", "s", 10_000, &[]).await.unwrap(),
        None
    );
    let offered = ["cloud=a".to_string()];
    let claimed = store
        .claim_preview("w", "s", 10_000, &offered)
        .await
        .unwrap()
        .unwrap();
    // Renewed while its server lives, it is nobody else's.
    hand.advance(Duration::from_secs(8));
    assert_eq!(store.renew_preview_leases("s", 10_000).await.unwrap(), 1);
    hand.advance(Duration::from_secs(8));
    assert_eq!(
        store
            .claim_preview("w", "t", 10_000, &offered)
            .await
            .unwrap(),
        None
    );
    hand.advance(Duration::from_secs(3));
    assert_eq!(
        store
            .claim_preview("w", "t", 10_000, &offered)
            .await
            .unwrap()
            .map(|again| again.result_id),
        Some(claimed.result_id)
    );
}

on_every_backend!(
    a_preview_covers_the_live_workspaces_not_on_its_version,
    preview_results_are_claimed_once_and_again_after_their_lease,
    a_stopping_server_gives_its_previews_back,
    the_fleet_preview_stands_until_a_newer_fleet_preview,
    a_preview_s_plans_need_its_version_s_tags,
);
