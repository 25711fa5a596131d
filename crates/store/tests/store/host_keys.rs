//! SSH host keys (`host_keys.rs`): the first key stored for a workspace is
//! its key for good.

use abode_store::*;

use crate::common::*;

async fn the_first_host_key_is_kept(store: Store) {
    let (_, workspace, _) = seeded(&store).await;
    let id = &workspace.id;
    assert_eq!(store.workspace_host_key(id, "aa").await.unwrap(), "aa");
    assert_eq!(store.workspace_host_key(id, "bb").await.unwrap(), "aa");
}

on_every_backend!(the_first_host_key_is_kept);
