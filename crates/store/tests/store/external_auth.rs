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

async fn a_refresh_replaces_only_the_link_it_read(store: Store) {
    let (user, _, _) = seeded(&store).await;
    store
        .put_external_auth_link(&link(&user.id, "github", "v1:k1:aa", 1))
        .await
        .unwrap();
    let mut refreshed = link(&user.id, "github", "v1:k1:new", 1);
    refreshed.refreshed_at = 50;
    assert!(store
        .refresh_external_auth_link(&refreshed, 1)
        .await
        .unwrap());
    // Refreshed by another server meanwhile: this one's write is lost.
    let mut again = link(&user.id, "github", "v1:k1:again", 1);
    again.refreshed_at = 51;
    assert!(!store.refresh_external_auth_link(&again, 1).await.unwrap());
    let links = store.external_auth_links_of(&user.id).await.unwrap();
    assert_eq!(
        (links[0].access_token.as_str(), links[0].refreshed_at),
        ("v1:k1:new", 50)
    );
    // Linked again meanwhile (a newer linked_at): the older refresh is lost.
    store
        .put_external_auth_link(&link(&user.id, "github", "v1:k1:relinked", 7))
        .await
        .unwrap();
    assert!(!store
        .refresh_external_auth_link(&refreshed, 1)
        .await
        .unwrap());
    // Unlinked meanwhile: a refresh does not bring it back.
    store
        .delete_external_auth_link(&user.id, "github")
        .await
        .unwrap();
    let mut late = link(&user.id, "github", "v1:k1:late", 7);
    late.refreshed_at = 60;
    assert!(!store.refresh_external_auth_link(&late, 7).await.unwrap());
    assert!(store
        .external_auth_links_of(&user.id)
        .await
        .unwrap()
        .is_empty());
}

async fn closed_accounts_links_are_found_and_reseal_is_all_or_nothing(store: Store) {
    let (alice, _, _) = seeded(&store).await;
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    let carol = store.create_user(&new_user("carol")).await.unwrap();
    for user in [&alice, &bob, &carol] {
        store
            .put_external_auth_link(&link(&user.id, "github", "v1:k1:aa", 1))
            .await
            .unwrap();
    }
    store
        .set_account_status(&bob.id, AccountStatus::Suspended, 5)
        .await
        .unwrap()
        .unwrap();
    store
        .set_account_status(&carol.id, AccountStatus::Dormant, 5)
        .await
        .unwrap()
        .unwrap();
    let closed = store
        .external_auth_links_of_closed_accounts()
        .await
        .unwrap();
    assert_eq!(
        closed
            .iter()
            .map(|l| l.user_id.as_str())
            .collect::<Vec<_>>(),
        [bob.id.as_str()]
    );

    store
        .create_external_auth_pending(
            "hash-1",
            &PendingExternalAuth {
                user_id: alice.id.clone(),
                provider_id: "github".into(),
                verifier: "v1:k1:dd".into(),
            },
            i64::MAX / 2,
        )
        .await
        .unwrap();
    // One refusal leaves every link as it was.
    let refused = store
        .reseal_external_auth_links(&|link: &ExternalAuthLink| {
            if link.user_id == carol.id {
                Err("does not open".to_string())
            } else {
                Ok(ExternalAuthLink {
                    access_token: "v1:k2:zz".into(),
                    key_id: "k2".into(),
                    ..link.clone()
                })
            }
        })
        .await
        .unwrap();
    assert_eq!(refused, Err("does not open".to_string()));
    let keys = |links: Vec<ExternalAuthLink>| -> Vec<String> {
        links.into_iter().map(|l| l.key_id).collect()
    };
    assert_eq!(
        keys(store.external_auth_links_of(&alice.id).await.unwrap()),
        ["k1"]
    );
    let resealed = store
        .reseal_external_auth_links(&|link: &ExternalAuthLink| {
            Ok(ExternalAuthLink {
                access_token: "v1:k2:zz".into(),
                refresh_token: None,
                key_id: "k2".into(),
                ..link.clone()
            })
        })
        .await
        .unwrap();
    assert_eq!(resealed, Ok(3));
    for user in [&alice, &bob, &carol] {
        let links = store.external_auth_links_of(&user.id).await.unwrap();
        assert_eq!(
            (
                links[0].key_id.as_str(),
                links[0].access_token.as_str(),
                links[0].refresh_token.clone()
            ),
            ("k2", "v1:k2:zz", None)
        );
    }
    // Links under way held a verifier sealed under the old key.
    assert_eq!(
        store.take_external_auth_pending("hash-1").await.unwrap(),
        None
    );
}

on_every_backend!(
    a_refresh_replaces_only_the_link_it_read,
    closed_accounts_links_are_found_and_reseal_is_all_or_nothing,
    links_are_one_per_person_and_provider,
    a_link_under_way_is_taken_once_and_not_after_it_expired,
);
