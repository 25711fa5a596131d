//! Account status in the store: suspending, activating and deleting people
//! (never the last owner who can act, never someone who owns a workspace,
//! never a deleted account back), the dormancy sweep and the sighting that
//! wakes a dormant account. On SQLite and PostgreSQL.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

fn new_user(name: &str, roles: &[Role]) -> NewUser {
    NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        roles: roles.iter().copied().collect(),
        password_hash: "x".into(),
    }
}

async fn status_of(store: &Store, name: &str) -> AccountStatus {
    store.user_by_name(name).await.unwrap().status
}

/// One step: (who, to what, what the store answers, their status after).
type Step = (
    &'static str,
    AccountStatus,
    Result<(), StatusRefusal>,
    AccountStatus,
);

async fn status_changes_keep_an_owner_and_the_history(store: Store) {
    let alice = store
        .create_first_user(&new_user("alice", &[Role::Owner]))
        .await
        .unwrap();
    store
        .create_user(&new_user("bob", &[Role::Owner, Role::Member]))
        .await
        .unwrap();
    store
        .create_user(&new_user("carol", &[Role::Member]))
        .await
        .unwrap();
    assert_eq!(alice.status, AccountStatus::Active);
    use AccountStatus::*;
    let steps: [Step; 8] = [
        ("carol", Suspended, Ok(()), Suspended),
        ("carol", Active, Ok(()), Active),
        // Two owners: one may be suspended...
        ("bob", Suspended, Ok(()), Suspended),
        // ...but not the other, who is now the last one who can act.
        ("alice", Suspended, Err(StatusRefusal::LastOwner), Active),
        ("alice", Deleted, Err(StatusRefusal::LastOwner), Active),
        ("bob", Active, Ok(()), Active),
        ("carol", Deleted, Ok(()), Deleted),
        // A deleted account stays deleted.
        ("carol", Active, Err(StatusRefusal::Deleted), Deleted),
    ];
    for (name, to, expected, after) in steps {
        let user = store.user_by_name(name).await.unwrap();
        let answer = store
            .set_account_status(&user.id, to, store.clock().now_ms())
            .await
            .unwrap()
            .map(|change| assert_eq!(change.after, to));
        assert_eq!(answer, expected, "{name} -> {to}");
        assert_eq!(status_of(&store, name).await, after, "{name} -> {to}");
    }
    // Deleted accounts leave the list unless asked for, and keep no token.
    let names = |page: Page<UserEntry>| -> Vec<String> {
        page.items
            .into_iter()
            .map(|entry| entry.user.username)
            .collect()
    };
    assert_eq!(
        names(store.list_user_page(None, 10, false).await.unwrap()),
        ["alice", "bob"]
    );
    assert_eq!(
        names(store.list_user_page(None, 10, true).await.unwrap()),
        ["alice", "bob", "carol"]
    );
    // A system actor's account has no status to change.
    let system = SystemActor::Prebuilds.user_id().to_string();
    store.ensure_system_users().await.unwrap();
    assert!(matches!(
        store.set_account_status(&system, Suspended, 0).await,
        Err(StoreError::NotFound("user"))
    ));
}

async fn concurrent_suspensions_of_the_last_two_owners_leave_one(store: Store) {
    store
        .create_first_user(&new_user("alice", &[Role::Owner]))
        .await
        .unwrap();
    store
        .create_user(&new_user("bob", &[Role::Owner]))
        .await
        .unwrap();
    for _ in 0..5 {
        let alice = store.user_by_name("alice").await.unwrap().id;
        let bob = store.user_by_name("bob").await.unwrap().id;
        let (a, b) = tokio::join!(
            store.set_account_status(&alice, AccountStatus::Suspended, 0),
            store.set_account_status(&bob, AccountStatus::Suspended, 0),
        );
        let passed = [a.unwrap(), b.unwrap()]
            .iter()
            .filter(|answer| answer.is_ok())
            .count();
        assert_eq!(passed, 1);
        for id in [alice, bob] {
            store
                .set_account_status(&id, AccountStatus::Active, 0)
                .await
                .unwrap()
                .unwrap();
        }
    }
}

async fn unseen_people_fall_dormant_and_wake_when_seen(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    store
        .create_first_user(&new_user("alice", &[Role::Owner]))
        .await
        .unwrap();
    let bob = store
        .create_user(&new_user("bob", &[Role::Member]))
        .await
        .unwrap();
    store.ensure_system_users().await.unwrap();
    let day = Duration::from_secs(86_400).as_millis() as i64;
    // Alice is seen on day 10; Bob never (his creation counts).
    hand.advance(Duration::from_secs(10 * 86_400));
    let alice = store.user_by_name("alice").await.unwrap();
    assert!(!store
        .mark_seen(&alice.id, start + 10 * day, start)
        .await
        .unwrap());
    // Seen within the interval: nothing written.
    assert!(!store
        .mark_seen(&alice.id, start + 10 * day + 1, start + 10 * day - 1)
        .await
        .unwrap());
    assert_eq!(
        store.user_by_name("alice").await.unwrap().last_seen_at,
        Some(start + 10 * day)
    );
    // Unseen for more than 5 days on day 12: Bob only (never the system).
    let slept = store.mark_accounts_dormant(start + 7 * day).await.unwrap();
    assert_eq!(slept, ["bob"]);
    assert_eq!(status_of(&store, "bob").await, AccountStatus::Dormant);
    assert_eq!(status_of(&store, "alice").await, AccountStatus::Active);
    // Asleep twice is once.
    assert!(store
        .mark_accounts_dormant(start + 7 * day)
        .await
        .unwrap()
        .is_empty());
    // Bob signs in: awake, seen now.
    assert!(store
        .mark_seen(&bob.id, start + 12 * day, start)
        .await
        .unwrap());
    let bob = store.user_by_name("bob").await.unwrap();
    assert_eq!(
        (bob.status, bob.last_seen_at),
        (AccountStatus::Active, Some(start + 12 * day))
    );
    // A suspended account is neither woken nor put to sleep.
    store
        .set_account_status(&bob.id, AccountStatus::Suspended, 0)
        .await
        .unwrap()
        .unwrap();
    assert!(!store
        .mark_seen(&bob.id, start + 13 * day, start)
        .await
        .unwrap());
    assert!(store
        .mark_accounts_dormant(start + 100 * day)
        .await
        .unwrap()
        .iter()
        .all(|name| name != "bob"));
    assert_eq!(status_of(&store, "bob").await, AccountStatus::Suspended);
    assert_eq!(store.accounts_that_may_not_act().await.unwrap(), [bob.id]);
}

on_every_backend!(
    status_changes_keep_an_owner_and_the_history,
    concurrent_suspensions_of_the_last_two_owners_leave_one,
    unseen_people_fall_dormant_and_wake_when_seen,
);
