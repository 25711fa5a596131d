//! Sessions and API tokens (`tokens.rs`), and the upgrade of tokens made
//! before either existed.

use abode_store::*;

use crate::common::*;

async fn sessions_and_api_tokens_are_found_touched_and_revoked(store: Store) {
    let alice = store.create_first_user(&new_user("alice")).await.unwrap();
    let bob = store.create_user(&new_user("bob")).await.unwrap();

    // A session: found by its hash, with no name and no stored expiry.
    store.create_token(&alice.id, "session-hash").await.unwrap();
    let session = store.token_by_hash("session-hash").await.unwrap();
    assert_eq!(session.kind, TokenKind::Session);
    assert_eq!(session.user_id, alice.id);
    assert_eq!((session.name.clone(), session.expires_at), (None, None));
    assert_eq!(session.last_used_at, None);

    // A use is recorded only when the last one is older than `not_since`.
    store.touch_token(&session.id, 5_000, 4_000).await.unwrap();
    store.touch_token(&session.id, 6_000, 4_500).await.unwrap();
    assert_eq!(
        store
            .token_by_hash("session-hash")
            .await
            .unwrap()
            .last_used_at,
        Some(5_000)
    );
    store.touch_token(&session.id, 7_000, 6_000).await.unwrap();
    assert_eq!(
        store
            .token_by_hash("session-hash")
            .await
            .unwrap()
            .last_used_at,
        Some(7_000)
    );

    // Revoking marks the row once; the lookup still finds it, marked.
    assert!(store.revoke_token(&session.id, 8_000).await.unwrap());
    assert!(!store.revoke_token(&session.id, 9_000).await.unwrap());
    assert_eq!(
        store
            .token_by_hash("session-hash")
            .await
            .unwrap()
            .revoked_at,
        Some(8_000)
    );
    assert!(matches!(
        store.token_by_hash("no-such-hash").await,
        Err(StoreError::NotFound("token"))
    ));

    // API tokens: named, unique per user among live ones.
    let api = |user: &User, name: &str, hash: &str| NewApiToken {
        user_id: user.id.clone(),
        name: name.into(),
        token_hash: hash.into(),
        expires_at: 1_000_000,
        scope: "read;workspace:build=w1".parse().unwrap(),
    };
    let ci = store
        .create_api_token(&api(&alice, "ci", "h-ci"))
        .await
        .unwrap();
    assert_eq!(ci.kind, TokenKind::Api);
    assert_eq!(ci.name.as_deref(), Some("ci"));
    assert_eq!(ci.expires_at, Some(1_000_000));
    // The scope reads back typed, from the row and through the credential.
    assert_eq!(ci.scope.to_string(), "read;workspace:build=w1");
    let credential = store.credential_by_hash("h-ci").await.unwrap();
    assert_eq!(credential.token.scope, ci.scope);
    assert!(matches!(
        store.create_api_token(&api(&alice, "ci", "h-ci-2")).await,
        Err(StoreError::Conflict("token name"))
    ));
    // Another user may use the same name; the same hash twice is refused.
    store
        .create_api_token(&api(&bob, "ci", "h-bob"))
        .await
        .unwrap();
    assert!(store
        .create_api_token(&api(&alice, "deploy", "h-ci"))
        .await
        .is_err());
    store
        .create_api_token(&api(&alice, "backup", "h-backup"))
        .await
        .unwrap();

    let names = |tokens: Page<TokenRecord>| -> Vec<String> {
        tokens
            .items
            .into_iter()
            .filter_map(|token| token.name)
            .collect()
    };
    let all = |user_id: String| {
        let store = store.clone();
        async move { store.list_api_token_page(&user_id, None, 50).await }
    };
    // Sessions are not listed; the list is by name, a page at a time.
    assert_eq!(
        names(all(alice.id.clone()).await.unwrap()),
        ["backup", "ci"]
    );
    let first = store.list_api_token_page(&alice.id, None, 1).await.unwrap();
    let next = first.next.clone().expect("a second page");
    assert_eq!(names(first), ["backup"]);
    let second = store
        .list_api_token_page(&alice.id, Some(&next), 1)
        .await
        .unwrap();
    assert_eq!(second.next, None);
    assert_eq!(names(second), ["ci"]);
    assert!(store
        .list_api_token_page(&alice.id, Some("not-a-cursor"), 1)
        .await
        .is_err());

    // Revoking by name: only the caller's own, once; the name is then free.
    let revoked = store
        .revoke_api_token(&alice.id, "ci", 10_000)
        .await
        .unwrap();
    assert_eq!(
        (revoked.id.clone(), revoked.revoked_at),
        (ci.id.clone(), Some(10_000))
    );
    assert!(matches!(
        store.revoke_api_token(&alice.id, "ci", 11_000).await,
        Err(StoreError::NotFound("token"))
    ));
    assert_eq!(names(all(alice.id.clone()).await.unwrap()), ["backup"]);
    assert_eq!(names(all(bob.id.clone()).await.unwrap()), ["ci"]);
    assert_eq!(
        store.token_by_hash("h-ci").await.unwrap().revoked_at,
        Some(10_000)
    );
    store
        .create_api_token(&api(&alice, "ci", "h-ci-3"))
        .await
        .unwrap();
}

/// A database made before sessions and API tokens (SQLite up to migration
/// 0003) upgrades: its tokens become sessions.
#[tokio::test]
async fn an_existing_sqlite_database_upgrades_its_tokens_to_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abode.db");
    let pool = sqlite_pool(&path).await;
    let old = migrations_before("sqlite", 4).await;
    old.run(&pool).await.unwrap();
    pool.insert_old_user_and_token().await;
    pool.close().await;

    let store = Store::open_sqlite(&path).await.unwrap();
    let token = store.token_by_hash("old-hash").await.unwrap();
    assert_eq!(token.kind, TokenKind::Session);
    assert_eq!((token.created_at, token.last_used_at), (1_000, Some(2_000)));
    assert_eq!((token.expires_at, token.revoked_at), (None, None));
}

/// The same upgrade on PostgreSQL (its migrations up to 0002).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_existing_postgres_database_upgrades_its_tokens_to_sessions() {
    let url = postgres_schema_url().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let old = migrations_before("postgres", 3).await;
    old.run(&pool).await.unwrap();
    pool.insert_old_user_and_token().await;
    pool.close().await;

    let store = Store::open_postgres(&url).await.unwrap();
    let token = store.token_by_hash("old-hash").await.unwrap();
    assert_eq!(token.kind, TokenKind::Session);
    assert_eq!((token.created_at, token.last_used_at), (1_000, Some(2_000)));
}

trait OldRows {
    async fn insert_old_user_and_token(&self);
}

/// A user and a token as the schema before 0004 (SQLite) / 0003
/// (PostgreSQL) had them.
const OLD_ROWS: [&str; 2] = [
    "INSERT INTO users (id, username, email, role, password_hash, created_at) \
     VALUES ('u1', 'alice', 'alice@example.com', 'owner', 'x', 1000)",
    "INSERT INTO api_tokens (id, user_id, token_hash, created_at, last_used_at) \
     VALUES ('t1', 'u1', 'old-hash', 1000, 2000)",
];

impl OldRows for sqlx::SqlitePool {
    async fn insert_old_user_and_token(&self) {
        for statement in OLD_ROWS {
            sqlx::query(statement).execute(self).await.unwrap();
        }
    }
}

impl OldRows for sqlx::PgPool {
    async fn insert_old_user_and_token(&self) {
        for statement in OLD_ROWS {
            sqlx::query(statement).execute(self).await.unwrap();
        }
    }
}

on_every_backend!(sessions_and_api_tokens_are_found_touched_and_revoked,);
