//! Opening a store: migrations, the database file's permissions, and
//! missing rows as typed errors.

use abode_store::*;

use crate::common::*;

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

on_every_backend!(missing_rows_are_typed_not_found,);
