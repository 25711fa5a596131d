//! External auth (`external_auth.rs`): a link is one row per person and
//! provider, replaced by a new link, answered when deleted; a link under
//! way is taken once, and not after it expired.

use abode_store::*;

use crate::common::*;

fn link(user_id: &str, provider_id: &str, token: &str, linked_at: i64) -> ExternalAuthLink {
    ExternalAuthLink {
        user_id: user_id.into(),
        provider_id: provider_id.into(),
        access_token: token.into(),
        refresh_token: Some(format!("{token}-refresh")),
        expires_at: Some(linked_at + 3_600_000),
        key_id: "k1".into(),
        linked_at,
        refreshed_at: linked_at,
    }
}

async fn links_are_one_per_person_and_provider(store: Store) {
    let (user, _, _) = seeded(&store).await;
    store
        .put_external_auth_link(&link(&user.id, "github", "v1:k1:aa", 1))
        .await
        .unwrap();
    store
        .put_external_auth_link(&link(&user.id, "gitlab", "v1:k1:bb", 2))
        .await
        .unwrap();
    // Linking again replaces the tokens and when it was linked (a refresh
    // gives the first time again).
    store
        .put_external_auth_link(&link(&user.id, "github", "v1:k1:cc", 3))
        .await
        .unwrap();
    let links = store.external_auth_links_of(&user.id).await.unwrap();
    let summary: Vec<(&str, &str, i64)> = links
        .iter()
        .map(|l| (l.provider_id.as_str(), l.access_token.as_str(), l.linked_at))
        .collect();
    assert_eq!(
        summary,
        [("github", "v1:k1:cc", 3), ("gitlab", "v1:k1:bb", 2)]
    );
    assert!(store
        .external_auth_links_of("nobody")
        .await
        .unwrap()
        .is_empty());
    let deleted = store
        .delete_external_auth_link(&user.id, "github")
        .await
        .unwrap();
    assert_eq!(
        deleted.map(|l| l.access_token),
        Some("v1:k1:cc".to_string())
    );
    assert_eq!(
        store
            .delete_external_auth_link(&user.id, "github")
            .await
            .unwrap(),
        None
    );
}

async fn a_link_under_way_is_taken_once_and_not_after_it_expired(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let pending = PendingExternalAuth {
        user_id: user.id.clone(),
        provider_id: "github".into(),
        verifier: "v1:k1:dd".into(),
    };
    let later = i64::MAX / 2;
    store
        .create_external_auth_pending("hash-1", &pending, later)
        .await
        .unwrap();
    store
        .create_external_auth_pending("hash-old", &pending, 0)
        .await
        .unwrap();
    assert_eq!(
        store.take_external_auth_pending("hash-1").await.unwrap(),
        Some(pending.clone())
    );
    assert_eq!(
        store.take_external_auth_pending("hash-1").await.unwrap(),
        None
    );
    assert_eq!(
        store.take_external_auth_pending("hash-old").await.unwrap(),
        None
    );
    assert_eq!(
        store.take_external_auth_pending("never").await.unwrap(),
        None
    );
}

on_every_backend!(
    links_are_one_per_person_and_provider,
    a_link_under_way_is_taken_once_and_not_after_it_expired,
);
