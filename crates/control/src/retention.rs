//! Retain on delete's pieces that several parts of the control plane use:
//! the key a `create --adopt` reserves records under, the state a retained
//! destroy puts back, and the settling of a delete's records however the
//! delete ended (a run, a restarted server's recovery, a cancel, an expired
//! hold). The build's side is `provisioner/retain_step.rs`; people's side
//! is `retained.rs`.

use abode_store::{RetainedStatus, Transition};
use serde_json::Value;

use abode_store::Store;

use crate::{BuildLog, Notifications};

/// `OWNER_ID/NAME`: the workspace a `create --adopt` reserved records for
/// (the workspace does not exist yet when they are reserved).
pub fn adopt_key(owner_id: &str, workspace_name: &str) -> String {
    format!("{owner_id}/{workspace_name}")
}

/// A state holding only `fragment` (a resource object), a successor of
/// `stored` (its lineage, the next serial) so the backend takes it and the
/// build's Terraform writes after it.
pub fn state_of_one(stored: Option<&[u8]>, fragment: &str) -> Result<Vec<u8>, String> {
    let fragment: Value = serde_json::from_str(fragment)
        .map_err(|error| format!("a retained resource's state is unreadable: {error}"))?;
    let stored: Value = stored
        .and_then(|bytes| serde_json::from_slice(bytes).ok())
        .unwrap_or(Value::Null);
    let lineage = stored
        .get("lineage")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(abode_store::new_id);
    let serial = stored.get("serial").and_then(Value::as_i64).unwrap_or(0) + 1;
    let terraform_version = stored
        .get("terraform_version")
        .cloned()
        .unwrap_or_else(|| Value::String("1.5.0".into()));
    serde_json::to_vec(&serde_json::json!({
        "version": 4,
        "terraform_version": terraform_version,
        "serial": serial,
        "lineage": lineage,
        "outputs": {},
        "resources": [fragment],
        "check_results": null,
    }))
    .map_err(|error| error.to_string())
}

/// Settles the pending records of the delete `build_id` against the state
/// it left, and says in its build log what was retained: how every end of
/// a delete (a run's, or a restarted server's for a run a dead one left)
/// leaves each retained resource in a state or in an open record.
pub async fn settle(
    store: &Store,
    build_log: &BuildLog,
    notifications: &Notifications,
    build_id: &str,
) {
    let build = match store.build_by_id(build_id).await {
        Ok(build) if build.transition == Transition::Delete => build,
        Ok(_) => return,
        Err(error) => {
            tracing::error!(build = %build_id, %error, "cannot read a delete to settle what it retained; its records stay pending");
            return;
        }
    };
    let state = match store.state(&build.workspace_id).await {
        Ok(state) => state.unwrap_or_default(),
        Err(error) => {
            tracing::error!(build = %build_id, %error, "cannot read the state a delete left; its records stay pending");
            return;
        }
    };
    let still: Vec<String> = match serde_json::from_slice::<Value>(&state) {
        Ok(state) => crate::state::managed_instances(&state)
            .iter()
            .map(|instance| instance.address())
            .collect(),
        // No state (a workspace whose state is gone) holds nothing.
        Err(_) => Vec::new(),
    };
    match store.settle_retained(build_id, &still).await {
        Ok(settled) => {
            for record in settled {
                let text = match (record.status, record.expires_at) {
                    (RetainedStatus::Open, Some(at)) => format!(
                        "retained: {} (until {}); record {}: abode retained show {}",
                        record.address,
                        crate::times::utc_text(at),
                        record.id,
                        record.id
                    ),
                    (RetainedStatus::Open, None) => format!(
                        "retained: {} (until someone adopts or destroys it); record {}: abode retained show {}",
                        record.address, record.id, record.id
                    ),
                    _ => format!(
                        "not retained: {} is still in the workspace's state (the delete did not forget it)",
                        record.address
                    ),
                };
                build_log
                    .note(
                        build_id,
                        &abode_runner::LogStage::CLEANUP,
                        abode_runner::LogLevel::Info,
                        &text,
                    )
                    .await;
                if record.status == RetainedStatus::Open {
                    notifications.notify_retained(&record).await;
                }
            }
        }
        Err(error) => {
            tracing::error!(build = %build_id, %error, "cannot settle a delete's retained resources; they stay pending");
        }
    }
}
