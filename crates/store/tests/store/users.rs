//! Users (`users.rs`): the first user, unique usernames.

use abode_store::*;

use crate::common::*;

async fn first_user_only_once_and_usernames_unique(store: Store) {
    store.create_first_user(&new_user("alice")).await.unwrap();
    assert!(matches!(
        store.create_first_user(&new_user("bob")).await,
        Err(StoreError::Conflict("first user"))
    ));
    assert!(matches!(
        store.create_user(&new_user("alice")).await,
        Err(StoreError::Conflict("username"))
    ));
}

async fn concurrent_first_users_make_exactly_one(store: Store) {
    let attempts = (0..6).map(|index| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .create_first_user(&new_user(&format!("user{index}")))
                .await
        })
    });
    let mut created = 0;
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(_) => created += 1,
            Err(StoreError::Conflict("first user")) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(created, 1);
}

on_every_backend!(
    first_user_only_once_and_usernames_unique,
    concurrent_first_users_make_exactly_one,
);
