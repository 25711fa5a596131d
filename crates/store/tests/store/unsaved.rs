//! Unsaved work reports (`unsaved.rs`): the last report of a workspace
//! replaces the one before, is stamped by the store's clock, and an
//! automatic delete's hold is marked once per digest.

use abode_store::*;

use crate::common::*;

async fn the_last_report_is_kept_and_a_hold_marked_once_per_digest(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let id = &workspace.id;
    assert_eq!(store.unsaved_report(id).await.unwrap(), None);
    // No report: nothing to mark.
    assert!(!store.mark_unsaved_hold(id, "d1").await.unwrap());
    store.put_unsaved_report(id, "{\"a\":1}").await.unwrap();
    store.put_unsaved_report(id, "{\"b\":2}").await.unwrap();
    let row = store.unsaved_report(id).await.unwrap().unwrap();
    assert_eq!(row.report, "{\"b\":2}");
    assert!(row.made_at > 0);
    assert!(store.mark_unsaved_hold(id, "d1").await.unwrap());
    assert!(!store.mark_unsaved_hold(id, "d1").await.unwrap());
    // A new report of the same work keeps the mark; another digest is new.
    store.put_unsaved_report(id, "{\"b\":2}").await.unwrap();
    assert!(!store.mark_unsaved_hold(id, "d1").await.unwrap());
    assert!(store.mark_unsaved_hold(id, "d2").await.unwrap());
}

async fn a_scan_request_is_pending_until_a_report_comes(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let id = &workspace.id;
    assert!(!store.unsaved_scan_requested(id).await.unwrap());
    store.request_unsaved_scan(id).await.unwrap();
    assert!(store.unsaved_scan_requested(id).await.unwrap());
    store.put_unsaved_report(id, "{}").await.unwrap();
    assert!(!store.unsaved_scan_requested(id).await.unwrap());
}

on_every_backend!(
    the_last_report_is_kept_and_a_hold_marked_once_per_digest,
    a_scan_request_is_pending_until_a_report_comes
);
