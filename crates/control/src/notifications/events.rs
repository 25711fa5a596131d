//! The messages of each event: who receives them, on which channels, what
//! they say, and what makes two of them "the same" (the dedupe key: an
//! identical message to one person and channel goes out at most once a
//! day). They are handed to the store with the change that causes them.

use serde_json::{json, Value};

use abode_store::{
    new_id, Build, BuildReason, BuildStatus, NewNotification, NotificationKind, SystemActor,
};

use super::template_admin_roles;
use super::Notifications;
use crate::secrets::sha256_hex;
use crate::times::utc_text as utc;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What makes a message written once rather than once a day.
pub(crate) enum Once {
    /// Once ever for this key (an event that happens once per build).
    Key(String),
    /// Once until the keys that start with this prefix are released (a
    /// preset limited until it recovers).
    UntilReleased(String),
}

/// Who receives an event.
enum Recipients {
    /// The workspace's owner (a person; a system actor reads nothing).
    Owner,
    /// The owner and the template admins (owners and template-admins).
    OwnerAndTemplateAdmins,
}

impl Notifications {
    /// `build_held`: the build awaits confirmation until `expires_at`.
    pub async fn held_notices(
        &self,
        build: &Build,
        expires_at: i64,
        digest: &str,
    ) -> Vec<NewNotification> {
        let mut payload = build_payload(build);
        payload["expires_at"] = json!(expires_at);
        payload["expires_at_utc"] = json!(utc(expires_at));
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
    pub async fn end_notices(
        &self,
        build: &Build,
        status: BuildStatus,
        error: Option<&str>,
    ) -> Vec<NewNotification> {
        if status != BuildStatus::Failed {
            return Vec::new();
        }
        // A prebuild refused by the prebuilds budget is told as the pool's
        // budget episode (`preset_quota_limited`), not as a failure.
        if build.reason == BuildReason::Prebuild && build.refusal.is_some() {
            return Vec::new();
        }
        let blocked = build.guard_report.as_ref().map(|report| report.decision)
            == Some(abode_guard::Decision::Block);
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

    /// [`Notifications::end_notices`] of the build with this id (none if it
    /// cannot be read: the build's end is recorded regardless).
    pub async fn end_notices_of(
        &self,
        build_id: &str,
        status: BuildStatus,
        error: Option<&str>,
    ) -> Vec<NewNotification> {
        if status != BuildStatus::Failed {
            return Vec::new();
        }
        match self.store.build_by_id(build_id).await {
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
        payload["expires_at_utc"] = json!(build.expires_at.map(utc));
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
        payload["expires_at_utc"] = json!(build.expires_at.map(utc));
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
        match self.store.workspace_by_id(&build.workspace_id).await {
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
        let once = once.map(Once::Key);
        let mut people: Vec<String> = Vec::new();
        if let Some(owner) = self.owner_id(build).await {
            if SystemActor::by_user_id(&owner).is_none() {
                people.push(owner);
            }
        }
        if matches!(recipients, Recipients::OwnerAndTemplateAdmins) {
            match self
                .store
                .users_with_any_role(&template_admin_roles())
                .await
            {
                Ok(admins) => people.extend(admins.into_iter().map(|user| user.id)),
                Err(error) => {
                    tracing::error!(%error, "cannot read the template admins to notify")
                }
            }
        }
        self.notices_to(kind, people, payload, once).await
    }

    /// One message per person (system actors already left out) and
    /// channel, for the people who did not disable `kind`. `once` makes
    /// the key independent of the day; a key that starts with `prefix:`
    /// can later be released by that prefix (see
    /// `release_notification_dedupe`).
    pub(crate) async fn notices_to(
        &self,
        kind: NotificationKind,
        mut people: Vec<String>,
        payload: Value,
        once: Option<Once>,
    ) -> Vec<NewNotification> {
        people.sort();
        people.dedup();
        // A suspended or deleted account is told nothing.
        match self.store.accounts_that_may_not_act().await {
            Ok(silent) => people.retain(|person| !silent.contains(person)),
            Err(error) => tracing::error!(%error, "cannot read which accounts are suspended"),
        }
        // A person's preference, unless the owners made the kind mandatory.
        match self.store.opted_out_of(kind).await {
            Ok(opted_out) => people.retain(|person| !opted_out.contains(person)),
            Err(error) => tracing::error!(%error, "cannot read notification preferences"),
        }
        let payload = payload.to_string();
        let day = self.clock.now_ms().div_euclid(DAY_MS);
        let mut notices = Vec::new();
        for person in &people {
            for channel in &self.channels {
                let dedupe_key = match &once {
                    Some(Once::Key(key)) => {
                        sha256_hex(format!("{kind}\n{person}\n{channel}\nonce\n{key}").as_bytes())
                    }
                    Some(Once::UntilReleased(prefix)) => format!(
                        "{prefix}{}",
                        sha256_hex(format!("{kind}\n{person}\n{channel}").as_bytes())
                    ),
                    None => sha256_hex(
                        format!("{kind}\n{person}\n{channel}\n{day}\n{payload}").as_bytes(),
                    ),
                };
                notices.push(NewNotification {
                    id: new_id(),
                    kind,
                    recipient_id: person.clone(),
                    channel: *channel,
                    payload: payload.clone(),
                    dedupe_key,
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
    let changes = build
        .guard_report
        .iter()
        .flat_map(|report| &report.protected_changes)
        .map(|change| {
            let paths: Vec<&str> = change
                .replace_paths
                .iter()
                .map(|path| path.path.as_str())
                .collect();
            json!({
                "address": change.address,
                "action": change.action,
                "outcome": change.outcome,
                "reason": change.reason,
                "paths": paths,
            })
        })
        .collect();
    Value::Array(changes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use abode_store::*;

    use crate::{Config, Control};

    async fn store_user(control: &Control, name: &str) -> String {
        control.store().user_by_name(name).await.unwrap().id
    }

    /// (build, initiator, reason, status, guard report, recipients, kind)
    type Case<'a> = (
        &'a Build,
        &'a str,
        BuildReason,
        BuildStatus,
        Option<&'a abode_guard::Report>,
        &'a [&'a str],
        &'a str,
    );

    /// Who is told of a failed or blocked build, by who started it, why,
    /// and who owns the workspace.
    #[tokio::test]
    async fn failed_builds_go_to_the_owner_unless_they_started_them_and_prebuilds_to_template_admins(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let super::super::fixture::Platform {
            store,
            alice,
            bob,
            bobs: (_, bobs),
            pooled: (_, pooled),
            ..
        } = super::super::fixture::platform(dir.path()).await;
        let prebuilds = SystemActor::Prebuilds.user_id();
        let control = Control::new(
            store,
            Config::new(dir.path().to_path_buf(), "http://127.0.0.1:1".into()),
        );
        let blocked_report: abode_guard::Report = serde_json::from_str(r#"{"schema_version":1,"decision":"block","transition":"start","protected_changes":[{"address":"abode_volume.home","resource_type":"abode_volume","action":"replace","outcome":"block","reason":"name changed","replace_paths":[{"path":"name","before":"a","after":"b"}]}]}"#).unwrap();
        let scheduler = SystemActor::Scheduler.user_id();
        let cases: [Case; 9] = [
            (
                &bobs,
                &bob.id,
                BuildReason::Initiator,
                BuildStatus::Failed,
                None,
                &[],
                "-",
            ),
            (
                &bobs,
                &alice.id,
                BuildReason::Initiator,
                BuildStatus::Failed,
                None,
                &["bob"],
                "build_failed",
            ),
            (
                &bobs,
                scheduler,
                BuildReason::Autostop,
                BuildStatus::Failed,
                None,
                &["bob"],
                "build_failed",
            ),
            (
                &bobs,
                &bob.id,
                BuildReason::Autostart,
                BuildStatus::Failed,
                None,
                &["bob"],
                "build_failed",
            ),
            (
                &bobs,
                &alice.id,
                BuildReason::Initiator,
                BuildStatus::Failed,
                Some(&blocked_report),
                &["bob"],
                "build_blocked",
            ),
            (
                &bobs,
                &bob.id,
                BuildReason::Initiator,
                BuildStatus::Failed,
                Some(&blocked_report),
                &[],
                "-",
            ),
            (
                &pooled,
                prebuilds,
                BuildReason::Prebuild,
                BuildStatus::Failed,
                None,
                &["alice", "carol"],
                "build_failed",
            ),
            (
                &bobs,
                &alice.id,
                BuildReason::Initiator,
                BuildStatus::Succeeded,
                None,
                &[],
                "-",
            ),
            (
                &bobs,
                scheduler,
                BuildReason::Autostop,
                BuildStatus::Canceled,
                None,
                &[],
                "-",
            ),
        ];
        for (build, initiator, reason, status, report, expected, kind) in cases {
            let build = Build {
                initiator_id: initiator.to_string(),
                reason,
                guard_report: report.cloned(),
                ..build.clone()
            };
            let notices = control
                .notifications()
                .end_notices(&build, status, Some("boom"))
                .await;
            let mut names = Vec::new();
            for notice in &notices {
                assert_eq!(
                    notice.channel,
                    Channel::Inbox,
                    "no other channel configured"
                );
                assert_eq!(notice.kind.as_str(), kind);
                let payload: serde_json::Value = serde_json::from_str(&notice.payload).unwrap();
                assert_eq!(payload["error"], "boom");
                assert_eq!(
                    payload["initiator"]["system"],
                    SystemActor::by_user_id(initiator).is_some()
                );
                if kind == "build_blocked" {
                    assert_eq!(payload["protected_changes"][0]["paths"][0], "name");
                }
                names.push(
                    control
                        .store()
                        .user_by_id(&notice.recipient_id)
                        .await
                        .unwrap()
                        .username,
                );
            }
            names.sort();
            assert_eq!(names, expected, "{initiator} {reason} {status} {kind}");
        }
        // Suspended people are told nothing: bob of his own workspace,
        // carol as a template admin of a failed prebuild.
        let carol = store_user(&control, "carol").await;
        for user in [&bob.id, &carol] {
            control
                .store()
                .set_account_status(user, AccountStatus::Suspended, 0)
                .await
                .unwrap()
                .unwrap();
        }
        let told = |notices: Vec<NewNotification>| -> Vec<String> {
            notices
                .into_iter()
                .map(|notice| notice.recipient_id)
                .collect()
        };
        let failed_by_alice = Build {
            initiator_id: alice.id.clone(),
            ..bobs.clone()
        };
        assert!(told(
            control
                .notifications()
                .end_notices(&failed_by_alice, BuildStatus::Failed, Some("boom"))
                .await
        )
        .is_empty());
        let prebuild = Build {
            initiator_id: prebuilds.to_string(),
            reason: BuildReason::Prebuild,
            ..pooled.clone()
        };
        let recipients = told(
            control
                .notifications()
                .end_notices(&prebuild, BuildStatus::Failed, Some("boom"))
                .await,
        );
        assert!(!recipients.is_empty());
        assert!(
            recipients.iter().all(|id| id == &alice.id),
            "{recipients:?}"
        );
    }

    #[test]
    fn times_are_shown_in_utc() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400_000, "2000-02-29T00:00:00Z"),
            (1_767_225_599_999, "2025-12-31T23:59:59Z"),
            (-1_000, "1969-12-31T23:59:59Z"),
        ];
        for (ms, expected) in cases {
            assert_eq!(crate::times::utc_text(ms), expected);
        }
    }
}
