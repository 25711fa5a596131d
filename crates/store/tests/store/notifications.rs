//! The notification outbox (`notifications.rs`): messages written in the
//! transaction of the change that causes them, deduplicated, claimed with a
//! lease, retried or given up, and the inbox's read flag.

use abode_store::*;

use crate::common::*;

fn notice(recipient: &str, channel: Channel, kind: NotificationKind, key: &str) -> NewNotification {
    NewNotification {
        id: new_id(),
        kind,
        recipient_id: recipient.into(),
        channel,
        payload: format!(r#"{{"key":"{key}"}}"#),
        dedupe_key: format!("{key}|{recipient}|{channel}"),
    }
}

fn plan() -> SavedPlan {
    SavedPlan {
        plan: b"binary plan".to_vec(),
        digest: "d1".into(),
        state_digest: "s1".into(),
    }
}

async fn messages_are_written_with_the_change_that_causes_them(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    let held = [
        notice(
            &user.id,
            Channel::Inbox,
            NotificationKind::BuildHeld,
            "held",
        ),
        notice(
            &user.id,
            Channel::Webhook,
            NotificationKind::BuildHeld,
            "held",
        ),
    ];
    // Not running yet: no hold, and no message either.
    assert!(!store
        .hold_build_notifying(&first.id, &plan(), i64::MAX, &held)
        .await
        .unwrap());
    assert!(matches!(
        store.notification_by_id(&held[0].id).await,
        Err(StoreError::NotFound("notification"))
    ));
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .hold_build_notifying(&first.id, &plan(), 5_000, &held)
        .await
        .unwrap());
    let inbox = store.notification_by_id(&held[0].id).await.unwrap();
    let webhook = store.notification_by_id(&held[1].id).await.unwrap();
    assert_eq!(
        (inbox.status, inbox.sent_at.is_some(), inbox.kind),
        (NotificationStatus::Sent, true, NotificationKind::BuildHeld),
        "the inbox is delivered by the write"
    );
    assert_eq!(
        (webhook.status, webhook.attempts, webhook.payload.as_str()),
        (NotificationStatus::Pending, 0, r#"{"key":"held"}"#)
    );

    // Identical messages (same key) are written once.
    let repeat = notice(
        &user.id,
        Channel::Inbox,
        NotificationKind::BuildHeld,
        "held",
    );
    store
        .enqueue_notifications(std::slice::from_ref(&repeat))
        .await
        .unwrap();
    assert!(store.notification_by_id(&repeat.id).await.is_err());

    // Expiry: the build is due, ends canceled with its message.
    assert_eq!(
        store
            .held_builds_expiring(4_999)
            .await
            .unwrap()
            .into_iter()
            .map(|b| b.id)
            .collect::<Vec<_>>(),
        Vec::<String>::new()
    );
    assert_eq!(store.held_builds_expiring(5_000).await.unwrap().len(), 1);
    let expired = [notice(
        &user.id,
        Channel::Inbox,
        NotificationKind::HeldBuildExpired,
        "expired",
    )];
    assert!(!store
        .expire_held_build(&first.id, 4_999, "expired", &expired)
        .await
        .unwrap());
    assert!(store.notification_by_id(&expired[0].id).await.is_err());
    assert!(store
        .expire_held_build(&first.id, 5_000, "expired", &expired)
        .await
        .unwrap());
    assert_eq!(
        store.build_by_id(&first.id).await.unwrap().status,
        BuildStatus::Canceled
    );
    assert!(store.saved_plan(&first.id).await.unwrap().is_none());
    assert!(store.notification_by_id(&expired[0].id).await.is_ok());

    // A build's end carries its message only when it does end there.
    let second = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    store
        .claim_job("w", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    let failed = [notice(
        &user.id,
        Channel::Inbox,
        NotificationKind::BuildFailed,
        "failed",
    )];
    assert!(store
        .finish_build_notifying(&second.id, BuildStatus::Failed, Some("boom"), &failed)
        .await
        .unwrap());
    let again = [notice(
        &user.id,
        Channel::Inbox,
        NotificationKind::BuildFailed,
        "failed-again",
    )];
    assert!(!store
        .finish_build_notifying(&second.id, BuildStatus::Failed, Some("boom"), &again)
        .await
        .unwrap());
    assert!(store.notification_by_id(&failed[0].id).await.is_ok());
    assert!(store.notification_by_id(&again[0].id).await.is_err());
}

async fn deliveries_are_claimed_with_a_lease_retried_and_given_up(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let messages = [
        notice(
            &user.id,
            Channel::Webhook,
            NotificationKind::BuildFailed,
            "a",
        ),
        notice(&user.id, Channel::Inbox, NotificationKind::BuildFailed, "a"),
    ];
    store.enqueue_notifications(&messages).await.unwrap();
    let id = messages[0].id.clone();
    let now = store.clock().now_ms();

    // The inbox is never claimed; the webhook message once per lease.
    let claimed = store
        .claim_notifications("one", now, now + 1_000, 10)
        .await
        .unwrap();
    assert_eq!(
        claimed
            .iter()
            .map(|m| (m.id.clone(), m.attempts))
            .collect::<Vec<_>>(),
        vec![(id.clone(), 1)]
    );
    assert!(store
        .claim_notifications("two", now + 999, now + 2_000, 10)
        .await
        .unwrap()
        .is_empty());
    // A dispatcher that died: its lease runs out and another claims it.
    let reclaimed = store
        .claim_notifications("two", now + 1_000, now + 2_000, 10)
        .await
        .unwrap();
    assert_eq!(reclaimed.len(), 1);
    assert_eq!(reclaimed[0].attempts, 2);
    assert!(
        !store.notification_sent(&id, "one").await.unwrap(),
        "a lost lease cannot settle the message"
    );

    // A failed attempt: pending again at its retry time.
    assert!(store
        .notification_attempt_failed(&id, "two", "connection refused", Some(now + 5_000))
        .await
        .unwrap());
    let pending = store.notification_by_id(&id).await.unwrap();
    assert_eq!(
        (
            pending.status,
            pending.last_error.as_deref(),
            pending.next_attempt_at
        ),
        (
            NotificationStatus::Pending,
            Some("connection refused"),
            now + 5_000
        )
    );
    assert!(store
        .claim_notifications("two", now + 4_999, now + 9_000, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .claim_notifications("two", now + 5_000, now + 9_000, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    // Given up: failed, with the last error, never claimed again.
    assert!(store
        .notification_attempt_failed(&id, "two", "HTTP 500", None)
        .await
        .unwrap());
    let failed = store.notification_by_id(&id).await.unwrap();
    assert_eq!(
        (failed.status, failed.last_error.as_deref(), failed.attempts),
        (NotificationStatus::Failed, Some("HTTP 500"), 3)
    );
    assert!(store
        .claim_notifications("two", i64::MAX / 2, i64::MAX / 2, 10)
        .await
        .unwrap()
        .is_empty());
    let failed_page = store.list_failed_notification_page(None, 10).await.unwrap();
    assert_eq!(
        (
            failed_page.items.len(),
            failed_page.items[0].notification.id.as_str(),
            failed_page.items[0].recipient_name.as_str(),
            failed_page.next
        ),
        (1, id.as_str(), "alice", None)
    );

    // And one that succeeds.
    let ok = [notice(
        &user.id,
        Channel::Webhook,
        NotificationKind::BuildHeld,
        "b",
    )];
    store.enqueue_notifications(&ok).await.unwrap();
    let now = store.clock().now_ms();
    let claimed = store
        .claim_notifications("one", now, now + 1_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(store.notification_sent(&ok[0].id, "one").await.unwrap());
    let sent = store.notification_by_id(&ok[0].id).await.unwrap();
    assert_eq!(
        (sent.status, sent.sent_at.is_some(), sent.lease_owner),
        (NotificationStatus::Sent, true, None)
    );
}

async fn concurrent_dispatchers_never_share_a_message(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let messages: Vec<NewNotification> = (0..40)
        .map(|n| {
            notice(
                &user.id,
                Channel::Webhook,
                NotificationKind::BuildFailed,
                &format!("c{n}"),
            )
        })
        .collect();
    store.enqueue_notifications(&messages).await.unwrap();
    let now = store.clock().now_ms();
    let dispatchers = (0..6).map(|index| {
        let store = store.clone();
        tokio::spawn(async move {
            let owner = format!("d{index}");
            let mut mine = Vec::new();
            loop {
                let claimed = store
                    .claim_notifications(&owner, now, now + 60_000, 3)
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    break;
                }
                for message in claimed {
                    assert!(store.notification_sent(&message.id, &owner).await.unwrap());
                    mine.push(message.id);
                }
            }
            mine
        })
    });
    let mut claimed = Vec::new();
    for dispatcher in dispatchers {
        claimed.extend(dispatcher.await.unwrap());
    }
    let mut expected: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
    claimed.sort();
    expected.sort();
    assert_eq!(claimed, expected, "every message claimed exactly once");
}

async fn the_inbox_is_paged_and_read_by_its_owner_only(store: Store) {
    let (alice, _, _) = seeded(&store).await;
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    let mine: Vec<NewNotification> = (0..5)
        .map(|n| {
            notice(
                &alice.id,
                Channel::Inbox,
                NotificationKind::BuildFailed,
                &format!("m{n}"),
            )
        })
        .collect();
    store.enqueue_notifications(&mine).await.unwrap();
    store
        .enqueue_notifications(&[notice(
            &bob.id,
            Channel::Inbox,
            NotificationKind::BuildFailed,
            "theirs",
        )])
        .await
        .unwrap();
    let page = |unread_only: bool, after: Option<String>| {
        let store = store.clone();
        let alice = alice.id.clone();
        async move {
            store
                .list_inbox_page(&InboxFilter {
                    recipient_id: alice,
                    unread_only,
                    after,
                    limit: 2,
                })
                .await
                .unwrap()
        }
    };
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let current = page(false, after).await;
        seen.extend(current.items.iter().map(|m| m.id.clone()));
        match current.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let mut expected: Vec<String> = mine.iter().map(|m| m.id.clone()).collect();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected, "every message once, none of bob's");

    let read = store
        .mark_notification_read(&alice.id, &mine[0].id)
        .await
        .unwrap();
    assert!(read.read_at.is_some());
    assert!(matches!(
        store.mark_notification_read(&bob.id, &mine[1].id).await,
        Err(StoreError::NotFound("notification"))
    ));
    let unread = page(true, None).await;
    assert!(unread.items.iter().all(|m| m.id != mine[0].id));
    assert_eq!(
        store.mark_all_notifications_read(&alice.id).await.unwrap(),
        4
    );
    assert!(page(true, None).await.items.is_empty());
    assert_eq!(store.mark_all_notifications_read(&bob.id).await.unwrap(), 1);
}

async fn people_with_any_of_some_roles_are_found_by_username(store: Store) {
    let (alice, _, _) = seeded(&store).await;
    let roles = [
        ("bob", Roles::from([Role::TemplateAdmin])),
        ("carol", Roles::from([Role::Member])),
        ("dave", Roles::from([Role::Auditor, Role::Member])),
    ];
    for (name, roles) in roles {
        store
            .create_user(&NewUser {
                roles,
                ..new_user(name)
            })
            .await
            .unwrap();
    }
    store.ensure_system_users().await.unwrap();
    let names = |roles: &'static [Role]| {
        let store = store.clone();
        async move {
            store
                .users_with_any_role(roles)
                .await
                .unwrap()
                .into_iter()
                .map(|u| u.username)
                .collect::<Vec<String>>()
        }
    };
    assert_eq!(
        names(&[Role::Owner, Role::TemplateAdmin]).await,
        vec![alice.username.clone(), "bob".to_string()]
    );
    assert_eq!(names(&[Role::Auditor]).await, vec!["dave".to_string()]);
    assert!(names(&[]).await.is_empty());
}

async fn people_opt_out_of_kinds_unless_they_are_mandatory(store: Store) {
    let (alice, _, _) = seeded(&store).await;
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    let held = NotificationKind::BuildHeld;
    let failed = NotificationKind::BuildFailed;
    for (user, kind) in [(&alice, held), (&alice, failed), (&bob, held), (&bob, held)] {
        store
            .set_notification_opt_out(&user.id, kind, true)
            .await
            .unwrap();
    }
    assert_eq!(
        store.notification_opt_outs(&alice.id).await.unwrap(),
        vec![failed, held]
    );
    let mut both = vec![alice.id.clone(), bob.id.clone()];
    both.sort();
    assert_eq!(store.opted_out_of(held).await.unwrap(), both);
    store
        .set_notification_kind_mandatory(held, true)
        .await
        .unwrap();
    store
        .set_notification_kind_mandatory(held, true)
        .await
        .unwrap();
    assert_eq!(
        store.mandatory_notification_kinds().await.unwrap(),
        vec![held]
    );
    assert!(store.opted_out_of(held).await.unwrap().is_empty());
    assert_eq!(
        store.opted_out_of(failed).await.unwrap(),
        vec![alice.id.clone()]
    );
    store
        .set_notification_kind_mandatory(held, false)
        .await
        .unwrap();
    store
        .set_notification_opt_out(&bob.id, held, false)
        .await
        .unwrap();
    assert_eq!(
        store.opted_out_of(held).await.unwrap(),
        vec![alice.id.clone()]
    );
}

#[test]
fn kinds_channels_and_statuses_are_stored_by_name() {
    for kind in NotificationKind::ALL {
        assert_eq!(kind.as_str().parse::<NotificationKind>(), Ok(kind));
    }
    for channel in Channel::ALL {
        assert_eq!(channel.as_str().parse::<Channel>(), Ok(channel));
    }
    for status in NotificationStatus::ALL {
        assert_eq!(status.as_str().parse::<NotificationStatus>(), Ok(status));
    }
    assert_eq!(
        "build_exploded"
            .parse::<NotificationKind>()
            .unwrap_err()
            .to_string(),
        "unknown notification kind `build_exploded`"
    );
}

#[tokio::test]
async fn an_unknown_stored_kind_fails_the_read_naming_it() {
    let (dir, store) = open().await;
    let (user, _, _) = seeded(&store).await;
    let message = notice(&user.id, Channel::Inbox, NotificationKind::BuildHeld, "k");
    store
        .enqueue_notifications(std::slice::from_ref(&message))
        .await
        .unwrap();
    use sqlx::Connection;
    let mut connection = sqlx::SqliteConnection::connect(&format!(
        "sqlite://{}",
        dir.path().join("abode.db").display()
    ))
    .await
    .unwrap();
    sqlx::query("UPDATE notifications SET kind = 'build_exploded'")
        .execute(&mut connection)
        .await
        .unwrap();
    let error = store
        .notification_by_id(&message.id)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("`build_exploded`"), "{error}");
}

/// A key written "until released" blocks its repeats until its prefix is
/// released; keys of another prefix stay, and an empty prefix releases
/// nothing.
async fn released_keys_let_their_message_be_written_again(store: Store) {
    let (user, _, _) = seeded(&store).await;
    let keyed = |key: &str| NewNotification {
        dedupe_key: key.into(),
        ..notice(
            &user.id,
            Channel::Inbox,
            NotificationKind::PresetHardLimited,
            key,
        )
    };
    let first = [
        keyed("limited:a:1"),
        keyed("limited:a:2"),
        keyed("limited:b:1"),
    ];
    store.enqueue_notifications(&first).await.unwrap();
    // (prefix released, how many, which of a repeat of `first` are written)
    let cases: [(&str, u64, [bool; 3]); 4] = [
        ("", 0, [false, false, false]),
        ("limited:c:", 0, [false, false, false]),
        ("limited:a:", 2, [true, true, false]),
        ("limited:a:", 2, [true, true, false]),
    ];
    for (prefix, released, written) in cases {
        assert_eq!(
            store.release_notification_dedupe(prefix).await.unwrap(),
            released,
            "{prefix}"
        );
        let repeat = [
            keyed("limited:a:1"),
            keyed("limited:a:2"),
            keyed("limited:b:1"),
        ];
        store.enqueue_notifications(&repeat).await.unwrap();
        for (message, expected) in repeat.iter().zip(written) {
            assert_eq!(
                store.notification_by_id(&message.id).await.is_ok(),
                expected,
                "{prefix} {}",
                message.dedupe_key
            );
        }
    }
    // The first messages are still there, keys released or not.
    for message in &first {
        store.notification_by_id(&message.id).await.unwrap();
    }
}

on_every_backend!(
    messages_are_written_with_the_change_that_causes_them,
    deliveries_are_claimed_with_a_lease_retried_and_given_up,
    concurrent_dispatchers_never_share_a_message,
    the_inbox_is_paged_and_read_by_its_owner_only,
    people_with_any_of_some_roles_are_found_by_username,
    people_opt_out_of_kinds_unless_they_are_mandatory,
    released_keys_let_their_message_be_written_again,
);
