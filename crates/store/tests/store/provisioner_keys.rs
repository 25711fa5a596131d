//! Provisioner keys: stored by the hash of their secret only, unique by
//! name, listed by name one page at a time, found by hash until deleted.

use abode_store::*;

use crate::common::*;

fn key(name: &str, hash: &str, tags: &str, created_by: &str) -> NewProvisionerKey {
    NewProvisionerKey {
        name: name.into(),
        secret_hash: hash.into(),
        tags: tags.into(),
        created_by: created_by.into(),
    }
}

async fn keys_are_unique_by_name_listed_by_name_and_found_by_hash(store: Store) {
    let alice = store.create_first_user(&new_user("alice")).await.unwrap();
    let created = store
        .create_provisioner_key(&key("west", "hash-w", r#"{"cloud":"aws"}"#, &alice.id))
        .await
        .unwrap();
    assert_eq!(created.name, "west");
    assert_eq!(created.tags, r#"{"cloud":"aws"}"#);
    assert_eq!(created.created_by, alice.id);
    assert_eq!(created.created_by_name, "alice");
    for (name, hash) in [("east", "hash-e"), ("north", "hash-n")] {
        store
            .create_provisioner_key(&key(name, hash, "{}", &alice.id))
            .await
            .unwrap();
    }

    // The name is unique; so is the hash.
    let refused = [
        key("west", "hash-other", "{}", &alice.id),
        key("south", "hash-w", "{}", &alice.id),
    ];
    for new in refused {
        assert!(
            matches!(
                store.create_provisioner_key(&new).await,
                Err(StoreError::Conflict("provisioner key name"))
            ),
            "{new:?}"
        );
    }

    let first = store.list_provisioner_key_page(None, 2).await.unwrap();
    let names: Vec<&str> = first.items.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["east", "north"]);
    let rest = store
        .list_provisioner_key_page(first.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(rest.items, std::slice::from_ref(&created));
    assert_eq!(rest.next, None);
    assert!(matches!(
        store.list_provisioner_key_page(Some("bogus"), 2).await,
        Err(StoreError::BadCursor(_))
    ));

    assert_eq!(
        store.provisioner_key_by_hash("hash-w").await.unwrap(),
        created
    );
    assert!(matches!(
        store.provisioner_key_by_hash("hash-unknown").await,
        Err(StoreError::NotFound("provisioner key"))
    ));

    // Deleted: its hash finds nothing, its name is free again.
    assert_eq!(store.delete_provisioner_key("west").await.unwrap(), created);
    assert!(matches!(
        store.provisioner_key_by_hash("hash-w").await,
        Err(StoreError::NotFound("provisioner key"))
    ));
    assert!(matches!(
        store.delete_provisioner_key("west").await,
        Err(StoreError::NotFound("provisioner key"))
    ));
    store
        .create_provisioner_key(&key("west", "hash-w2", "{}", &alice.id))
        .await
        .unwrap();
    let names: Vec<String> = store
        .list_provisioner_key_page(None, 10)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|k| k.name)
        .collect();
    assert_eq!(names, ["east", "north", "west"]);
}

on_every_backend!(keys_are_unique_by_name_listed_by_name_and_found_by_hash);
