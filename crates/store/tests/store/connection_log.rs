//! The connection log (`connection_log.rs`): an entry written at open and
//! completed once at close; a killed server's open entries ended
//! `server_lost` for its own id only; pages newest first, filtered to what
//! a member may see.

use abode_store::*;

use crate::common::*;

fn entry(server: &str, user: &User, workspace: &Workspace, kind: &str) -> NewConnectionLogEntry {
    NewConnectionLogEntry {
        server_id: server.into(),
        user_id: user.id.clone(),
        user_name: user.username.clone(),
        token_name: None,
        workspace_id: workspace.id.clone(),
        workspace_name: format!("{}/{}", user.username, workspace.name),
        kind: kind.into(),
        app: None,
        port: None,
        client_ip: Some("127.0.0.1".into()),
        user_agent: None,
    }
}

async fn an_entry_is_closed_once_and_a_lost_servers_are_ended(store: Store) {
    let (alice, workspace, _) = seeded(&store).await;
    let first = store
        .open_connection_log(&entry("s1", &alice, &workspace, "ssh"))
        .await
        .unwrap();
    let lost = store
        .open_connection_log(&entry("s1", &alice, &workspace, "pty"))
        .await
        .unwrap();
    let elsewhere = store
        .open_connection_log(&entry("s2", &alice, &workspace, "port-forward"))
        .await
        .unwrap();
    assert!(store
        .close_connection_log(&first, 10, 100_000, "client_closed")
        .await
        .unwrap());
    assert!(!store
        .close_connection_log(&first, 1, 1, "idle")
        .await
        .unwrap());
    assert_eq!(store.end_lost_connections("s1").await.unwrap(), 1);
    let page = store
        .list_connection_log_page(&ConnectionLogFilter {
            limit: 10,
            ..ConnectionLogFilter::default()
        })
        .await
        .unwrap();
    let by_id = |id: &str| page.items.iter().find(|row| row.id == id).unwrap().clone();
    let closed = by_id(&first);
    assert_eq!(closed.bytes_from_workspace, 100_000);
    assert_eq!(closed.end_reason.as_deref(), Some("client_closed"));
    assert!(closed.closed_at.is_some());
    assert_eq!(by_id(&lost).end_reason.as_deref(), Some("server_lost"));
    assert_eq!(by_id(&elsewhere).closed_at, None);
}

async fn pages_are_newest_first_and_a_member_sees_their_own(store: Store) {
    let (alice, workspace, _) = seeded(&store).await;
    let bob = store.create_user(&new_user("bob")).await.unwrap();
    for _ in 0..3 {
        store
            .open_connection_log(&entry("s1", &alice, &workspace, "ssh"))
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_connection_log_page(&ConnectionLogFilter {
                after: after.clone(),
                limit: 2,
                ..ConnectionLogFilter::default()
            })
            .await
            .unwrap();
        ids.extend(page.items.iter().map(|row| (row.opened_at, row.id.clone())));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(ids.len(), 3);
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(ids, sorted);
    // Bob owns none of it and made none of it.
    let bobs = store
        .list_connection_log_page(&ConnectionLogFilter {
            visible_to: Some(bob.id.clone()),
            limit: 10,
            ..ConnectionLogFilter::default()
        })
        .await
        .unwrap();
    assert!(bobs.items.is_empty());
    let alices = store
        .list_connection_log_page(&ConnectionLogFilter {
            visible_to: Some(alice.id.clone()),
            user: Some("alice".into()),
            workspace_id: Some(workspace.id.clone()),
            limit: 10,
            ..ConnectionLogFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(alices.items.len(), 3);
    let later = store
        .list_connection_log_page(&ConnectionLogFilter {
            since: Some(i64::MAX),
            limit: 10,
            ..ConnectionLogFilter::default()
        })
        .await
        .unwrap();
    assert!(later.items.is_empty());
}

on_every_backend!(
    an_entry_is_closed_once_and_a_lost_servers_are_ended,
    pages_are_newest_first_and_a_member_sees_their_own
);
