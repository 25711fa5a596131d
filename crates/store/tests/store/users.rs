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

async fn system_actors_have_reserved_accounts_nobody_else_can_hold(store: Store) {
    // A person took "scheduler" before it was reserved.
    let person = store.create_user(&new_user("scheduler")).await.unwrap();
    store
        .create_user(&new_user("scheduler-user"))
        .await
        .unwrap();
    let renamed = store.ensure_system_users().await.unwrap();
    assert_eq!(
        renamed,
        vec![("scheduler".to_string(), "scheduler-user-1".to_string())]
    );
    assert_eq!(
        store.user_by_id(&person.id).await.unwrap().username,
        "scheduler-user-1"
    );
    // Idempotent at every start.
    assert!(store.ensure_system_users().await.unwrap().is_empty());
    for actor in SystemActor::ALL {
        let account = store.user_by_name(actor.username()).await.unwrap();
        assert_eq!(account.id, actor.user_id());
        assert!(account.system && account.password_hash.is_empty());
        assert!(matches!(
            store.create_user(&new_user(actor.username())).await,
            Err(StoreError::Conflict(_))
        ));
    }
    // Not listed, and not "a user" for the first-user check.
    let page = store.list_user_page(None, 50, false).await.unwrap();
    assert!(page.items.iter().all(|entry| !entry.user.system));
}

async fn the_first_user_check_ignores_system_accounts(store: Store) {
    store.ensure_system_users().await.unwrap();
    store.create_first_user(&new_user("alice")).await.unwrap();
    assert!(matches!(
        store.create_first_user(&new_user("bob")).await,
        Err(StoreError::Conflict(_))
    ));
}

on_every_backend!(
    first_user_only_once_and_usernames_unique,
    concurrent_first_users_make_exactly_one,
    system_actors_have_reserved_accounts_nobody_else_can_hold,
    the_first_user_check_ignores_system_accounts,
);
