//! The messages of each event: who receives them, on which channels, what
//! they say, and what makes two of them "the same" (the dedupe key: an
//! identical message to one person and channel goes out at most once a
//! day). They are handed to the store with the change that causes them.

use serde_json::{json, Value};

use abode_store::{
    new_id, Build, BuildReason, BuildStatus, Channel, NewNotification, NotificationKind,
    SystemActor,
};

use crate::secrets::sha256_hex;
use crate::Control;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Who receives an event.
enum Recipients {
    /// The workspace's owner (a person; a system actor reads nothing).
    Owner,
    /// The owner and the template admins (owners and template-admins).
    OwnerAndTemplateAdmins,
}

impl Control {
    /// `build_held`: the build awaits confirmation until `expires_at`.
    pub(crate) async fn held_notices(
        &self,
        build: &Build,
        expires_at: i64,
        digest: &str,
    ) -> Vec<NewNotification> {
        let mut payload = build_payload(build);
        payload["expires_at"] = json!(expires_at);
        payload["plan_digest"] = json!(digest);
        payload["confirm_command"] = json!(confirm_command(build, digest));
        payload["protected_changes"] = protected_changes(build);
        self.notices(
            NotificationKind::BuildHeld,
            build,
            Recipients::OwnerAndTemplateAdmins,
            payload,
            None,
        )
        .await
    }

    /// `build_blocked` or `build_failed` for a build that ends `status`:
    /// to its owner when someone else or the system started it; a failed
    /// automated build of a workspace no person owns (a prebuild) goes to
    /// the template admins.
    pub(crate) async fn end_notices(
        &self,
        build: &Build,
        status: BuildStatus,
        error: Option<&str>,
    ) -> Vec<NewNotification> {
        if status != BuildStatus::Failed {
            return Vec::new();
        }
        let blocked =
            crate::held::guard_decision(build).ok().flatten() == Some(abode_guard::Decision::Block);
        let kind = if blocked {
            NotificationKind::BuildBlocked
        } else {
            NotificationKind::BuildFailed
        };
        let automated = build.reason != BuildReason::Initiator
            || SystemActor::by_user_id(&build.initiator_id).is_some();
        let owner_id = self.owner_id(build).await;
        let started_by_owner = owner_id.as_deref() == Some(build.initiator_id.as_str());
        if started_by_owner && !automated {
            return Vec::new();
        }
        let owned_by_system = owner_id
            .as_deref()
            .is_none_or(|id| SystemActor::by_user_id(id).is_some());
        let recipients = if automated && owned_by_system {
            Recipients::OwnerAndTemplateAdmins
        } else {
            Recipients::Owner
        };
        let mut payload = build_payload(build);
        payload["error"] = json!(error);
        if blocked {
            payload["protected_changes"] = protected_changes(build);
        }
        self.notices(kind, build, recipients, payload, None).await
    }

    /// [`Control::end_notices`] of the build with this id (none if it
    /// cannot be read: the build's end is recorded regardless).
    pub(crate) async fn end_notices_of(
        &self,
        build_id: &str,
        status: BuildStatus,
        error: Option<&str>,
    ) -> Vec<NewNotification> {
        if status != BuildStatus::Failed {
            return Vec::new();
        }
        match self.inner.store.build_by_id(build_id).await {
            Ok(build) => self.end_notices(&build, status, error).await,
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot read a build to notify of its end");
                Vec::new()
            }
        }
    }

    /// `held_build_expiring`: once per held build.
    pub(crate) async fn expiring_notices(&self, build: &Build) -> Vec<NewNotification> {
        let mut payload = build_payload(build);
        payload["expires_at"] = json!(build.expires_at);
        if let Some(digest) = &build.plan_digest {
            payload["plan_digest"] = json!(digest);
            payload["confirm_command"] = json!(confirm_command(build, digest));
        }
        self.notices(
            NotificationKind::HeldBuildExpiring,
            build,
            Recipients::OwnerAndTemplateAdmins,
            payload,
            Some(build.id.clone()),
        )
        .await
    }

    /// `held_build_expired`: nobody confirmed it in time.
    pub(crate) async fn expired_notices(
        &self,
        build: &Build,
        message: &str,
    ) -> Vec<NewNotification> {
        let mut payload = build_payload(build);
        payload["expires_at"] = json!(build.expires_at);
        payload["error"] = json!(message);
        self.notices(
            NotificationKind::HeldBuildExpired,
            build,
            Recipients::OwnerAndTemplateAdmins,
            payload,
            Some(build.id.clone()),
        )
        .await
    }

    async fn owner_id(&self, build: &Build) -> Option<String> {
        match self.inner.store.workspace_by_id(&build.workspace_id).await {
            Ok(workspace) => Some(workspace.owner_id),
            Err(error) => {
                tracing::error!(build = %build.id, %error, "cannot read the owner of a workspace to notify");
                None
            }
        }
    }

    /// One message per recipient and channel. `once` makes the key
    /// independent of the day (an event that happens once per build).
    async fn notices(
        &self,
        kind: NotificationKind,
        build: &Build,
        recipients: Recipients,
        payload: Value,
        once: Option<String>,
    ) -> Vec<NewNotification> {
        let mut people: Vec<String> = Vec::new();
        if let Some(owner) = self.owner_id(build).await {
            if SystemActor::by_user_id(&owner).is_none() {
                people.push(owner);
            }
        }
        if matches!(recipients, Recipients::OwnerAndTemplateAdmins) {
            match self.inner.store.template_admins().await {
                Ok(admins) => people.extend(admins.into_iter().map(|user| user.id)),
                Err(error) => {
                    tracing::error!(%error, "cannot read the template admins to notify")
                }
            }
        }
        people.sort();
        people.dedup();
        let payload = payload.to_string();
        let day = self.now_ms().div_euclid(DAY_MS);
        let mut channels = vec![Channel::Inbox];
        if self.inner.config.notifications.webhook.is_some() {
            channels.push(Channel::Webhook);
        }
        let mut notices = Vec::new();
        for person in &people {
            for channel in &channels {
                let same = match &once {
                    Some(key) => format!("{kind}\n{person}\n{channel}\nonce\n{key}"),
                    None => format!("{kind}\n{person}\n{channel}\n{day}\n{payload}"),
                };
                notices.push(NewNotification {
                    id: new_id(),
                    kind,
                    recipient_id: person.clone(),
                    channel: *channel,
                    payload: payload.clone(),
                    dedupe_key: sha256_hex(same.as_bytes()),
                });
            }
        }
        notices
    }
}

/// What every build event says about its build.
fn build_payload(build: &Build) -> Value {
    json!({
        "workspace": format!("{}/{}", build.owner_name, build.workspace_name),
        "workspace_id": build.workspace_id,
        "owner": build.owner_name,
        "build_id": build.id,
        "build_number": build.number,
        "transition": build.transition.as_str(),
        "reason": build.reason.as_str(),
        "initiator": {
            "name": build.initiator_name,
            "system": SystemActor::by_user_id(&build.initiator_id).is_some(),
        },
    })
}

/// The exact command that applies the held plan.
fn confirm_command(build: &Build, digest: &str) -> String {
    format!(
        "abode builds confirm {}/{} {} --digest {digest}",
        build.owner_name, build.workspace_name, build.number
    )
}

/// Each protected change of the build's guard report with its reason and
/// the attribute paths that force it (no values: they may be secrets).
fn protected_changes(build: &Build) -> Value {
    let report: Value = build
        .guard_report
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    let changes = report
        .get("protected_changes")
        .and_then(Value::as_array)
        .map(|changes| {
            changes
                .iter()
                .map(|change| {
                    let paths: Vec<Value> = change
                        .get("replace_paths")
                        .and_then(Value::as_array)
                        .map(|paths| {
                            paths
                                .iter()
                                .filter_map(|p| p.get("path").cloned())
                                .collect()
                        })
                        .unwrap_or_default();
                    json!({
                        "address": change.get("address"),
                        "action": change.get("action"),
                        "outcome": change.get("outcome"),
                        "reason": change.get("reason"),
                        "paths": paths,
                    })
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    Value::Array(changes)
}
