//! Retain on delete in a build (issue 32): which resources a workspace
//! delete forgets instead of destroying, the records written for them when
//! its plan is judged and settled when it ends, and the retained resources
//! a workspace's start imports (`abode create --adopt`).

use abode_guard::{Address, Mode, Origin, RememberedProtection, Rule};
use abode_runner::retention::ImportTarget;
use abode_store::{
    Build, DeleteRetention, NewRetained, RetainedResource, RetainedStatus, Transition, Workspace,
};
use serde_json::Value;

use super::run::storage;
use crate::room::Host;
use abode_control::retention::adopt_key;
use abode_runner::{Failure, LogStage};

/// What the value of a sensitive attribute is shown as.
const HIDDEN: &str = "(sensitive value)";

/// The remembered protections a delete retains, with their rules.
pub(super) async fn retained_by_delete(
    host: &Host,
    build: &Build,
) -> Result<Vec<RememberedProtection>, Failure> {
    if build.transition != Transition::Delete {
        return Ok(Vec::new());
    }
    let retention = host
        .inner
        .store
        .build_retention(&build.id)
        .await
        .map_err(storage)?
        .unwrap_or_default();
    let memory = host
        .held()
        .remembered(&build.workspace_id)
        .await
        .map_err(super::run::internal)?;
    Ok(match retention {
        DeleteRetention::Nothing => Vec::new(),
        DeleteRetention::All => memory,
        DeleteRetention::Rules => memory.into_iter().filter(|m| m.retain.is_some()).collect(),
    })
}

/// The retained resources a start of `workspace` imports.
pub(super) async fn to_adopt(
    host: &Host,
    build: &Build,
    workspace: &Workspace,
) -> Result<Vec<RetainedResource>, Failure> {
    if build.transition != Transition::Start {
        return Ok(Vec::new());
    }
    host.inner
        .store
        .retained_to_adopt(&adopt_key(&workspace.owner_id, &workspace.name))
        .await
        .map_err(storage)
}

pub(super) fn import_targets(records: &[RetainedResource]) -> Vec<ImportTarget> {
    records
        .iter()
        .map(|record| ImportTarget {
            address: record.address.clone(),
            id: record.import_id.clone(),
        })
        .collect()
}

/// An adopted resource is protected in the build that imports it: a plan
/// that would import and then replace it waits for a person.
pub(super) fn adoption_rules(records: &[RetainedResource]) -> Vec<Rule> {
    records
        .iter()
        .filter_map(|record| Address::parse(&record.address).ok())
        .map(|address| Rule::address(address, Mode::Confirm, Origin::Retained))
        .collect()
}

pub(super) fn addresses(retained: &[RememberedProtection]) -> Vec<Address> {
    retained
        .iter()
        .filter_map(|m| Address::parse(&m.address).ok())
        .collect()
}

/// The records of what a judged delete plan forgets: each forgotten
/// instance of a retained resource with its provider, import id and
/// attributes (sensitive values hidden), expiring as its rule says.
pub(super) fn new_records(
    plan_json: &[u8],
    report: &abode_guard::Report,
    retained: &[RememberedProtection],
    state: Option<&[u8]>,
    now_ms: i64,
) -> Vec<NewRetained> {
    let state: Value = state
        .and_then(|state| serde_json::from_slice(state).ok())
        .unwrap_or(Value::Null);
    let plan: Value = match serde_json::from_slice(plan_json) {
        Ok(plan) => plan,
        Err(_) => Value::Null,
    };
    let changes = plan
        .get("resource_changes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    report
        .retained
        .iter()
        .map(|kept| {
            let change = changes
                .iter()
                .find(|c| c.get("address").and_then(Value::as_str) == Some(&kept.address));
            let text = |field: &str| {
                change
                    .and_then(|c| c.get(field))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let before = change
                .and_then(|c| c.pointer("/change/before"))
                .cloned()
                .unwrap_or(Value::Null);
            let sensitive = change
                .and_then(|c| c.pointer("/change/before_sensitive"))
                .cloned()
                .unwrap_or(Value::Null);
            let attributes = hide_sensitive(before, &sensitive);
            let import_id = import_id(&kept.resource_type, &attributes);
            let rule = rule_for(&kept.address, retained);
            let expires_at = rule
                .and_then(|r| r.retain_for_secs)
                .and_then(|secs| i64::try_from(secs).ok())
                .map(|secs| now_ms.saturating_add(secs.saturating_mul(1000)));
            NewRetained {
                state_fragment: fragment(&state, &kept.address).map(|f| f.to_string()),
                address: kept.address.clone(),
                resource_type: kept.resource_type.clone(),
                provider: text("provider_name"),
                import_id,
                attributes: attributes.to_string(),
                expires_at,
                expire_action: rule
                    .map(|r| r.expire)
                    .unwrap_or_default()
                    .as_str()
                    .to_string(),
            }
        })
        .collect()
}

/// The resource object of `state` holding the instance at `address`, with
/// that instance alone.
fn fragment(state: &Value, address: &str) -> Option<Value> {
    let instance = abode_control::state::managed_instances(state)
        .into_iter()
        .find(|instance| instance.address() == address)?;
    let mut one = instance.resource.clone();
    one["instances"] = Value::Array(vec![instance.object.clone()]);
    Some(one)
}

/// The rule of the remembered protection covering `address` (its resource).
fn rule_for(address: &str, retained: &[RememberedProtection]) -> Option<abode_guard::RetainRule> {
    let resource = Address::parse(address).ok()?.resource();
    retained
        .iter()
        .filter(|m| {
            Address::parse(&m.address)
                .ok()
                .is_some_and(|a| a.resource() == resource)
        })
        .filter_map(|m| m.retain)
        .reduce(abode_guard::RetainRule::keeping_longest)
}

/// What a provider imports a resource by: a volume by its name (its
/// directory), anything else by its `id`.
fn import_id(resource_type: &str, attributes: &Value) -> String {
    let field = if resource_type == "abode_volume" {
        "name"
    } else {
        "id"
    };
    attributes
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `value` with every part `marks` says is sensitive replaced.
pub(super) fn hide_sensitive(value: Value, marks: &Value) -> Value {
    match (value, marks) {
        (_, Value::Bool(true)) => Value::String(HIDDEN.into()),
        (Value::Object(map), Value::Object(marks)) => Value::Object(
            map.into_iter()
                .map(|(key, inner)| {
                    let mark = marks.get(&key).cloned().unwrap_or(Value::Null);
                    (key, hide_sensitive(inner, &mark))
                })
                .collect(),
        ),
        (Value::Array(items), Value::Array(marks)) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, inner)| hide_sensitive(inner, marks.get(i).unwrap_or(&Value::Null)))
                .collect(),
        ),
        (value, _) => value,
    }
}

/// Whether the build destroys a retained resource.
pub(super) fn destroys_retained(build: &Build) -> bool {
    matches!(
        build.reason,
        abode_store::BuildReason::RetainedDestroy | abode_store::BuildReason::RetainedExpired
    )
}

/// The record a retained destroy destroys, and the rule the guard judges it
/// by: held for a person unless it expired under `expire = "destroy"`.
pub(super) async fn destroy_rules(host: &Host, build: &Build) -> Result<Vec<Rule>, Failure> {
    if !destroys_retained(build) {
        return Ok(Vec::new());
    }
    let record = host
        .inner
        .store
        .retained_destroyed_by(&build.id)
        .await
        .map_err(storage)?
        .ok_or_else(|| Failure::failed("the retained resource this build destroys is gone"))?;
    let unattended = build.reason == abode_store::BuildReason::RetainedExpired
        && record.expire_action == "destroy";
    if unattended {
        return Ok(Vec::new());
    }
    Ok(Address::parse(&record.address)
        .ok()
        .map(|address| Rule::address(address, Mode::Confirm, Origin::Retained))
        .into_iter()
        .collect())
}

/// Closes the record a successful retained destroy destroyed.
pub(super) async fn close_destroyed(job: &super::ServerJob, build: &Build) {
    if !destroys_retained(build) {
        return;
    }
    let Ok(Some(record)) = job
        .host()
        .inner
        .store
        .retained_destroyed_by(&build.id)
        .await
    else {
        tracing::error!(build = %build.id, "cannot find the retained resource a destroy destroyed");
        return;
    };
    close(job, build, &record, RetainedStatus::Destroyed).await;
}

/// Closes the records a successful start imported.
pub(super) async fn close_adopted(job: &super::ServerJob, build: &Build, workspace: &Workspace) {
    let records = match to_adopt(job.host(), build, workspace).await {
        Ok(records) => records,
        Err(failure) => {
            tracing::error!(build = %build.id, error = %failure.message, "cannot read the retained resources a build adopted");
            return;
        }
    };
    for record in records {
        close(job, build, &record, RetainedStatus::Adopted).await;
    }
}

/// Closes an open record as `status` by `build`, and says so in its log.
async fn close(
    job: &super::ServerJob,
    build: &Build,
    record: &RetainedResource,
    status: RetainedStatus,
) {
    match job
        .host()
        .inner
        .store
        .close_retained(&record.id, status, &build.initiator_name, Some(&build.id))
        .await
    {
        Ok(true) => {
            job.note(
                &LogStage::APPLY,
                abode_runner::LogLevel::Info,
                &format!(
                    "{status}: {} (retained record {} is closed)",
                    record.address, record.id
                ),
            )
            .await;
        }
        Ok(false) => {}
        Err(error) => {
            tracing::error!(build = %build.id, %error, "cannot close a retained resource as {status}");
        }
    }
}
