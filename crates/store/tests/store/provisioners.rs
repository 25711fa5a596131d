//! Provisioners' heartbeats: each server's workers listed with the job each
//! holds now (a build's, or a preview's plan), a stopping server's rows
//! removed, a dead server's forgotten once a day old.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

async fn provisioners_are_listed_with_the_job_they_hold(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (_, _, build) = seeded(&store).await;
    let workers = ["embedded-0".to_string(), "embedded-1".to_string()];
    store
        .beat_provisioners(
            &ProvisionerBeat {
                server_id: "server-a",
                host: "server-a",
                kind: ProvisionerKind::Embedded,
                tags: r#"{"cloud":"a"}"#,
                version: "0.1.0",
            },
            &workers,
            0,
        )
        .await
        .unwrap();
    store
        .beat_provisioners(
            &ProvisionerBeat {
                server_id: "server-b",
                host: "server-b",
                kind: ProvisionerKind::Embedded,
                tags: "{}",
                version: "0.1.0",
            },
            &workers[..1],
            0,
        )
        .await
        .unwrap();
    store
        .claim_job("embedded-1", "server-a", 60_000)
        .await
        .unwrap()
        .unwrap();

    let first = store.list_provisioner_page(None, 2).await.unwrap();
    let names: Vec<(&str, &str)> = first
        .items
        .iter()
        .map(|row| (row.server_id.as_str(), row.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [("server-a", "embedded-0"), ("server-a", "embedded-1")]
    );
    assert_eq!(first.items[0].build_number, None);
    assert_eq!(first.items[1].build_number, Some(build.number));
    assert_eq!(first.items[1].build_workspace.as_deref(), Some("alice/dev"));
    assert_eq!(first.items[1].kind, ProvisionerKind::Embedded);
    assert_eq!(first.items[1].tags, r#"{"cloud":"a"}"#);
    let rest = store
        .list_provisioner_page(first.next.as_deref(), 10)
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.items[0].server_id, "server-b");
    assert_eq!(rest.next, None);

    // A later heartbeat moves only the time; server-b, silent for a day, is
    // forgotten; a stopping server removes its own.
    hand.advance(Duration::from_secs(86_401));
    let now = start + 86_401_000;
    store
        .beat_provisioners(
            &ProvisionerBeat {
                server_id: "server-a",
                host: "server-a",
                kind: ProvisionerKind::Embedded,
                tags: "{}",
                version: "0.2.0",
            },
            &workers,
            now - 86_400_000,
        )
        .await
        .unwrap();
    let all = store.list_provisioner_page(None, 10).await.unwrap().items;
    assert_eq!(all.len(), 2);
    assert!(all
        .iter()
        .all(|row| row.version == "0.2.0" && row.last_beat_at == now && row.started_at == start));
    store.forget_provisioners("server-a").await.unwrap();
    assert!(store
        .list_provisioner_page(None, 10)
        .await
        .unwrap()
        .items
        .is_empty());
}

async fn a_job_goes_only_to_a_provisioner_with_every_tag_of_its_version(store: Store) {
    let (alice, dev, first) = seeded(&store).await;
    let (_, tagged) = store
        .create_linted_template_version(
            &NewTemplateVersion {
                template_name: "tagged".into(),
                archive: vec![1],
                archive_sha256: "t".into(),
                message: "".into(),
                created_by: alice.id.clone(),
                validation_ok: true,
                validation_message: "ok".into(),
                parameters: None,
                presets: None,
                activate: true,
            },
            None,
            &["cloud=a".into(), "zone=1".into()],
            true,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        store.template_version_tags(&tagged.id).await.unwrap(),
        ["cloud=a", "zone=1"]
    );
    let workspace_id = new_id();
    let (_, build) = store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id.clone(),
                owner_id: alice.id.clone(),
                name: "tagged".into(),
                template_id: tagged.template_id.clone(),
                template_version_id: tagged.id.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                workspace_id,
                template_version_id: tagged.id.clone(),
                ..next_build(&dev, &alice, "start")
            },
        )
        .await
        .unwrap();
    let claim = |tags: &'static [&'static str]| {
        let store = store.clone();
        async move {
            let tags: Vec<String> = tags.iter().map(|tag| tag.to_string()).collect();
            store
                .claim_tagged_job("w", "server", "server", 60_000, &tags)
                .await
                .unwrap()
                .map(|job| job.build_id)
        }
    };
    // The untagged build goes to anyone; the tagged one only to a
    // provisioner with both of its tags (more are fine).
    assert_eq!(claim(&["cloud=b"]).await, Some(first.id.clone()));
    assert_eq!(store.claim_job("w", "server", 60_000).await.unwrap(), None);
    assert_eq!(claim(&["cloud=a"]).await, None);
    assert_eq!(claim(&["cloud=a", "zone=2"]).await, None);
    assert_eq!(claim(&["x=y", "zone=1", "cloud=a"]).await, Some(build.id));
}

/// Why a queued job waits is noted once per change, read with the build,
/// and cleared; the connected provisioners are read grouped.
async fn an_unserved_job_is_noted_once_per_change(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (_, _, build) = seeded(&store).await;
    for (server, worker) in [("server-a", "embedded-0"), ("server-a", "embedded-1")] {
        store
            .beat_provisioners(
                &ProvisionerBeat {
                    server_id: server,
                    host: "host-a",
                    kind: ProvisionerKind::Embedded,
                    tags: r#"{"cloud":"a"}"#,
                    version: "0.1.0",
                },
                &[worker.to_string()],
                0,
            )
            .await
            .unwrap();
    }
    assert_eq!(
        store.live_provisioner_groups(start - 1).await.unwrap(),
        [(
            "host-a".to_string(),
            ProvisionerKind::Embedded,
            r#"{"cloud":"a"}"#.to_string(),
            2
        )]
    );
    hand.advance(Duration::from_secs(5));
    assert!(store
        .live_provisioner_groups(start + 1)
        .await
        .unwrap()
        .is_empty());
    assert!(store.unserved_candidates(start).await.unwrap().is_empty());
    let queued_before = start + 5_000;
    assert_eq!(
        store.unserved_candidates(queued_before).await.unwrap(),
        [(build.id.clone(), None, None)]
    );
    assert!(store.note_unserved(&build.id, Some("why")).await.unwrap());
    assert!(!store.note_unserved(&build.id, Some("why")).await.unwrap());
    assert_eq!(
        store
            .build_by_id(&build.id)
            .await
            .unwrap()
            .waiting
            .as_deref(),
        Some("why")
    );
    assert_eq!(
        store.unserved_candidates(queued_before).await.unwrap(),
        [(build.id.clone(), None, Some("why".to_string()))]
    );
    assert!(store.note_unserved(&build.id, Some("other")).await.unwrap());
    assert!(store.note_unserved(&build.id, None).await.unwrap());
    assert!(!store.note_unserved(&build.id, None).await.unwrap());
    assert_eq!(store.build_by_id(&build.id).await.unwrap().waiting, None);
}

/// A template is deprecated and undeprecated whole; an unknown one is not
/// found.
async fn a_template_is_deprecated_and_undeprecated(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let name = workspace.template_name.as_str();
    let deprecated = store
        .set_template_deprecation(name, Some(("moved", Some("other"))))
        .await
        .unwrap();
    assert_eq!(deprecated.deprecation_message.as_deref(), Some("moved"));
    assert_eq!(deprecated.deprecation_replacement.as_deref(), Some("other"));
    assert_eq!(store.template_by_name(name).await.unwrap(), deprecated);
    let back = store.set_template_deprecation(name, None).await.unwrap();
    assert_eq!(
        (back.deprecation_message, back.deprecation_replacement),
        (None, None)
    );
    assert!(matches!(
        store.set_template_deprecation("nosuch", None).await,
        Err(StoreError::NotFound("template"))
    ));
}

on_every_backend!(
    provisioners_are_listed_with_the_job_they_hold,
    a_job_goes_only_to_a_provisioner_with_every_tag_of_its_version,
    an_unserved_job_is_noted_once_per_change,
    a_template_is_deprecated_and_undeprecated,
);
