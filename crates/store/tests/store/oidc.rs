//! OpenID Connect's rows (`oidc.rs`): an account is found by its link, made
//! with it in one transaction, and pending entries are taken once.

use abode_store::*;

use crate::common::*;

async fn an_account_is_found_by_its_issuer_and_subject(store: Store) {
    let user = store
        .create_oidc_user(
            &NewUser {
                password_hash: String::new(),
                ..new_user("ann")
            },
            "https://id.example.com",
            "sub-1",
        )
        .await
        .unwrap();
    let found = store
        .user_by_oidc_subject("https://id.example.com", "sub-1")
        .await
        .unwrap();
    assert_eq!(found.id, user.id);
    assert!(found.password_hash.is_empty());
    assert!(matches!(
        store
            .user_by_oidc_subject("https://other.example.com", "sub-1")
            .await,
        Err(StoreError::NotFound("user"))
    ));
    // The same subject twice, or a taken name: nothing half-made.
    assert!(matches!(
        store
            .create_oidc_user(&new_user("bo"), "https://id.example.com", "sub-1")
            .await,
        Err(StoreError::Conflict("oidc link"))
    ));
    assert!(matches!(
        store.user_by_name("bo").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .create_oidc_user(&new_user("ann"), "https://id.example.com", "sub-2")
            .await,
        Err(StoreError::Conflict("username"))
    ));
    store
        .set_user_email(&user.id, "ann@new.example.com")
        .await
        .unwrap();
    assert_eq!(
        store.user_by_id(&user.id).await.unwrap().email,
        "ann@new.example.com"
    );
    store.create_token(&user.id, "h1").await.unwrap();
    assert_eq!(store.end_user_tokens(&user.id, 5).await.unwrap(), 1);
    assert_eq!(store.end_user_tokens(&user.id, 6).await.unwrap(), 0);
}

async fn a_pending_entry_is_taken_once_before_it_expires(store: Store) {
    store.put_oidc_pending("k1", "p1", 100, 0).await.unwrap();
    store.put_oidc_pending("k2", "p2", 100, 0).await.unwrap();
    assert_eq!(
        store.take_oidc_pending("k1", 50).await.unwrap().as_deref(),
        Some("p1")
    );
    assert_eq!(store.take_oidc_pending("k1", 50).await.unwrap(), None);
    assert_eq!(
        store.take_oidc_pending("k2", 100).await.unwrap(),
        None,
        "expired"
    );
    // Expired entries go with the next put.
    store.put_oidc_pending("k3", "p3", 100, 0).await.unwrap();
    store.put_oidc_pending("k4", "p4", 300, 200).await.unwrap();
    assert_eq!(store.take_oidc_pending("k3", 0).await.unwrap(), None);
    assert_eq!(
        store.take_oidc_pending("k4", 250).await.unwrap().as_deref(),
        Some("p4")
    );
}

on_every_backend!(
    an_account_is_found_by_its_issuer_and_subject,
    a_pending_entry_is_taken_once_before_it_expires,
);
