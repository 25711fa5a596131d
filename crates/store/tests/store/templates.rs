//! Templates and their versions (`templates.rs`).

use abode_store::*;

use crate::common::*;

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
        parameters: None,
        presets: None,
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

/// A version keeps the presets read at push; one pushed without them has none.
async fn a_version_keeps_its_presets(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let presets = r#"[{"name":"small","parameters":{"cpus":"1"}}]"#;
    let push = |presets: Option<&str>| NewTemplateVersion {
        template_name: "base".into(),
        archive: vec![1],
        archive_sha256: "abc".into(),
        message: String::new(),
        created_by: user.id.clone(),
        validation_ok: true,
        validation_message: "ok".into(),
        parameters: Some(Vec::new()),
        presets: presets.map(str::to_string),
        activate: false,
    };
    let (template, with) = store
        .create_template_version(&push(Some(presets)))
        .await
        .unwrap();
    let (_, without) = store.create_template_version(&push(None)).await.unwrap();
    assert_eq!(with.presets.as_deref(), Some(presets));
    assert_eq!(without.presets, None);
    let read = store
        .template_version(&template.id, with.number)
        .await
        .unwrap();
    assert_eq!(read.presets.as_deref(), Some(presets));
}

/// A version keeps the lint's findings given at push; one pushed without
/// them (before the lint existed) reads as never linted, not as clean.
async fn a_version_keeps_its_lint(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let push = NewTemplateVersion {
        template_name: "base".into(),
        archive: vec![1],
        archive_sha256: "abc".into(),
        message: String::new(),
        created_by: user.id.clone(),
        validation_ok: true,
        validation_message: "ok".into(),
        parameters: Some(Vec::new()),
        presets: None,
        activate: false,
    };
    let lint = r#"{"schema_version":1,"errors":0,"warnings":0,"findings":[],"note":"é"}"#;
    let (_, linted) = store
        .create_linted_template_version(&push, Some(lint), &[], true, &[])
        .await
        .unwrap();
    let (_, unlinted) = store.create_template_version(&push).await.unwrap();
    assert_eq!(
        store
            .template_version_lint(&linted.id)
            .await
            .unwrap()
            .as_deref(),
        Some(lint)
    );
    assert_eq!(
        store.template_version_lint(&unlinted.id).await.unwrap(),
        None
    );
    assert!(matches!(
        store.template_version_lint("no-such-version").await,
        Err(StoreError::NotFound(_))
    ));
}

on_every_backend!(
    first_template_version_is_active_and_later_ones_on_request,
    a_version_keeps_its_presets,
    a_version_keeps_its_lint,
);
