//! The events of the features that follow notifications (prebuilds and the
//! lifecycle scheduler), ready for them to send: each has a function that
//! builds its messages (for a caller that writes them in its own change)
//! and one that writes them to the outbox. Recipients, payloads and dedupe
//! follow `events.rs`; what is particular to each kind is said on it.

use serde_json::{json, Value};

use abode_store::{NewNotification, NotificationKind, SystemActor, Template, User, Workspace};

use super::events::Once;
use super::template_admin_roles;
use super::Notifications;
use crate::times::utc_text as utc;
use crate::ControlError;

/// A resource a prebuild claim replaced, with the attribute paths that
/// forced the replacement (no values: they may be secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplacedResource {
    /// The Terraform address, e.g. `docker_volume.home`.
    pub address: String,
    pub paths: Vec<String>,
}

/// The prefix of every `preset_hard_limited` key of one preset: released
/// when the preset recovers. Hex of a hash, so a template or preset name
/// cannot make it match another preset's keys.
fn preset_prefix(template_id: &str, preset: &str) -> String {
    let scope = crate::secrets::sha256_hex(format!("{template_id}\n{preset}").as_bytes());
    format!("preset_hard_limited:{scope}:")
}

/// The preset is no longer hard limited: the next `preset_hard_limited` of
/// it is sent again. The messages already written stay as they are. Free of
/// `Control`: a push (`Templates`) tells it too.
pub(crate) async fn preset_recovered(
    store: &abode_store::Store,
    template: &Template,
    preset: &str,
) -> Result<(), ControlError> {
    let prefix = preset_prefix(&template.id, preset);
    store.release_notification_dedupe(&prefix).await?;
    Ok(())
}

/// A home volume past a threshold, as `disk_full_warning` tells it.
#[derive(Debug, Clone, Copy)]
pub struct DiskWarning<'a> {
    pub agent: &'a str,
    pub threshold: i64,
    pub used_percent: u64,
    pub used_bytes: u64,
    pub total_bytes: u64,
    /// When it counts as told (Unix ms): its dedupe key.
    pub told_at: i64,
}

/// A resource monitor past its threshold, as `workspace_resource_high`
/// tells it.
#[derive(Debug, Clone, Copy)]
pub struct ResourceHigh<'a> {
    pub agent: &'a str,
    /// `memory`, or the volume's path.
    pub monitor: &'a str,
    pub threshold: u64,
    pub used_percent: f64,
    /// When it crossed (Unix ms): its dedupe key.
    pub crossed_at: i64,
}

/// What the workspace events say about their workspace.
fn workspace_payload(workspace: &Workspace) -> Value {
    json!({
        "workspace": format!("{}/{}", workspace.owner_name, workspace.name),
        "workspace_id": workspace.id,
        "owner": workspace.owner_name,
        "template": workspace.template_name,
        "template_id": workspace.template_id,
    })
}

/// A time as Unix ms and as UTC text, under `name` and `name_utc`.
fn put_time(payload: &mut Value, name: &str, ms: Option<i64>) {
    payload[name] = json!(ms);
    payload[format!("{name}_utc")] = json!(ms.map(utc));
}

impl Notifications {
    /// Template admins (owners and template-admins; never a system actor).
    async fn template_admin_ids(&self) -> Vec<String> {
        match self
            .store
            .users_with_any_role(&template_admin_roles())
            .await
        {
            Ok(admins) => admins.into_iter().map(|user| user.id).collect(),
            Err(error) => {
                tracing::error!(%error, "cannot read the template admins to notify");
                Vec::new()
            }
        }
    }

    /// The workspace's owner, unless a system actor owns it (a prebuild
    /// pool's workspace reads nothing).
    fn person_owning(workspace: &Workspace) -> Vec<String> {
        if SystemActor::by_user_id(&workspace.owner_id).is_some() {
            Vec::new()
        } else {
            vec![workspace.owner_id.clone()]
        }
    }

    /// `prebuild_resource_replaced` to the template admins: `claimant`
    /// claimed `workspace` from a prebuild pool and the claim's build
    /// replaced `replaced`. Identical messages go out once a day at most.
    pub async fn prebuild_resource_replaced_notices(
        &self,
        workspace: &Workspace,
        claimant: &User,
        replaced: &[ReplacedResource],
    ) -> Vec<NewNotification> {
        let mut payload = workspace_payload(workspace);
        payload["claimant"] = json!({ "name": claimant.username, "id": claimant.id });
        payload["replaced"] = replaced
            .iter()
            .map(|resource| json!({ "address": resource.address, "paths": resource.paths }))
            .collect();
        let people = self.template_admin_ids().await;
        self.notices_to(
            NotificationKind::PrebuildResourceReplaced,
            people,
            payload,
            None,
        )
        .await
    }

    /// Writes [`Notifications::prebuild_resource_replaced_notices`] to the outbox.
    pub async fn notify_prebuild_resource_replaced(
        &self,
        workspace: &Workspace,
        claimant: &User,
        replaced: &[ReplacedResource],
    ) -> Result<(), ControlError> {
        let notices = self
            .prebuild_resource_replaced_notices(workspace, claimant, replaced)
            .await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }

    /// `preset_hard_limited` to the template admins: the pool of `preset`
    /// of `template` hit its hard limit for `reason`. Sent once per preset
    /// and person until [`preset_recovered`] clears it, however
    /// often it is called meanwhile.
    pub async fn preset_hard_limited_notices(
        &self,
        template: &Template,
        preset: &str,
        reason: &str,
    ) -> Vec<NewNotification> {
        let payload = json!({
            "template": template.name,
            "template_id": template.id,
            "preset": preset,
            "reason": reason,
        });
        let people = self.template_admin_ids().await;
        let once = Once::UntilReleased(preset_prefix(&template.id, preset));
        self.notices_to(
            NotificationKind::PresetHardLimited,
            people,
            payload,
            Some(once),
        )
        .await
    }

    /// Writes [`Notifications::preset_hard_limited_notices`] to the outbox.
    pub async fn notify_preset_hard_limited(
        &self,
        template: &Template,
        preset: &str,
        reason: &str,
    ) -> Result<(), ControlError> {
        let notices = self
            .preset_hard_limited_notices(template, preset, reason)
            .await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }

    /// `preset_quota_limited` (`limited`) or `preset_quota_recovered` to the
    /// template admins: the `prebuilds` budget holds the pool of `preset`
    /// below its `desired` count (`present` running or building, one more
    /// expected to cost `cost` a day), or no longer does. Not deduplicated
    /// here: the caller writes them with the episode's change
    /// (`set_prebuild_quota_episode`), which happens once per episode.
    pub async fn preset_quota_notices(
        &self,
        template: &Template,
        preset: &str,
        limited: bool,
        desired: usize,
        present: usize,
        cost: Option<i64>,
    ) -> Vec<NewNotification> {
        let (kind, reason) = if limited {
            (
                NotificationKind::PresetQuotaLimited,
                match cost {
                    Some(cost) => format!(
                        "the prebuilds budget has no room for another prebuild at {cost} a day \
                         ({present} of {desired}); raise the allowance of a group of the \
                         prebuilds actor (abode quota show prebuilds)"
                    ),
                    None => {
                        format!("the prebuilds budget holds the pool at {present} of {desired}")
                    }
                },
            )
        } else {
            (
                NotificationKind::PresetQuotaRecovered,
                "the prebuilds budget no longer holds the pool back".to_string(),
            )
        };
        let payload = json!({
            "template": template.name,
            "template_id": template.id,
            "preset": preset,
            "desired": desired,
            "present": present,
            "daily_cost": cost,
            "reason": reason,
        });
        let people = self.template_admin_ids().await;
        // A key of its own: the episode's row is what makes it once.
        let once = Once::Key(abode_store::new_id());
        self.notices_to(kind, people, payload, Some(once)).await
    }

    /// `workspace_dormant` to the workspace's owner: dormant since
    /// `dormant_since`, deleted at `delete_at` if the template deletes
    /// dormant workspaces. Once per workspace and `dormant_since` (one
    /// dormancy), however often the scheduler calls it.
    pub async fn workspace_dormant_notices(
        &self,
        workspace: &Workspace,
        dormant_since: i64,
        delete_at: Option<i64>,
    ) -> Vec<NewNotification> {
        let mut payload = workspace_payload(workspace);
        put_time(&mut payload, "dormant_since", Some(dormant_since));
        put_time(&mut payload, "delete_at", delete_at);
        let once = Once::Key(format!("{}\n{dormant_since}", workspace.id));
        self.notices_to(
            NotificationKind::WorkspaceDormant,
            Self::person_owning(workspace),
            payload,
            Some(once),
        )
        .await
    }

    /// Writes [`Notifications::workspace_dormant_notices`] to the outbox.
    pub async fn notify_workspace_dormant(
        &self,
        workspace: &Workspace,
        dormant_since: i64,
        delete_at: Option<i64>,
    ) -> Result<(), ControlError> {
        let notices = self
            .workspace_dormant_notices(workspace, dormant_since, delete_at)
            .await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }

    /// `workspace_deletion_scheduled` to the workspace's owner: it will be
    /// deleted at `delete_at`. Once per workspace and `delete_at` (a new
    /// date is a new message).
    pub async fn workspace_deletion_scheduled_notices(
        &self,
        workspace: &Workspace,
        delete_at: i64,
    ) -> Vec<NewNotification> {
        let mut payload = workspace_payload(workspace);
        put_time(&mut payload, "delete_at", Some(delete_at));
        let once = Once::Key(format!("{}\n{delete_at}", workspace.id));
        self.notices_to(
            NotificationKind::WorkspaceDeletionScheduled,
            Self::person_owning(workspace),
            payload,
            Some(once),
        )
        .await
    }

    /// `delete_held_unsaved` to the workspace's owner and the template
    /// admins: the scheduler held its automatic delete because the last
    /// report shows unsaved work. Once per workspace and report digest.
    pub async fn delete_held_unsaved_notices(
        &self,
        workspace: &Workspace,
        report: &abode_sdk::UnsavedReport,
    ) -> Vec<NewNotification> {
        let mut payload = workspace_payload(workspace);
        payload["digest"] = json!(report.digest);
        payload["report_age_seconds"] = json!(report.age_seconds);
        payload["repositories"] = report
            .repositories
            .iter()
            .take(50)
            .map(|repository| json!({ "path": repository.path, "kinds": repository.kinds }))
            .collect();
        let mut people = Self::person_owning(workspace);
        for admin in self.template_admin_ids().await {
            if !people.contains(&admin) {
                people.push(admin);
            }
        }
        let once = Once::Key(format!("{}\n{}", workspace.id, report.digest));
        self.notices_to(
            NotificationKind::DeleteHeldUnsaved,
            people,
            payload,
            Some(once),
        )
        .await
    }

    /// Writes [`Notifications::delete_held_unsaved_notices`] to the outbox.
    pub async fn notify_delete_held_unsaved(
        &self,
        workspace: &Workspace,
        report: &abode_sdk::UnsavedReport,
    ) -> Result<(), ControlError> {
        let notices = self.delete_held_unsaved_notices(workspace, report).await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }

    /// `disk_full_warning` to the workspace's owner: its agent's home volume
    /// is `used_percent` full, at or past `threshold`. The caller tells it
    /// at most once a day per workspace and threshold (`disk.rs`); `once`
    /// names that telling.
    pub async fn notify_disk_full_warning(
        &self,
        workspace: &Workspace,
        warning: &DiskWarning<'_>,
    ) -> Result<(), ControlError> {
        let mut payload = workspace_payload(workspace);
        payload["agent"] = json!(warning.agent);
        payload["threshold_percent"] = json!(warning.threshold);
        payload["used_percent"] = json!(warning.used_percent);
        payload["used_bytes"] = json!(warning.used_bytes);
        payload["total_bytes"] = json!(warning.total_bytes);
        let once = Once::Key(format!(
            "disk_full_warning\n{}\n{}\n{}",
            workspace.id, warning.threshold, warning.told_at
        ));
        let notices = self
            .notices_to(
                NotificationKind::DiskFullWarning,
                Self::person_owning(workspace),
                payload,
                Some(once),
            )
            .await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }

    /// `workspace_resource_high` to the workspace's owner: a resource
    /// monitor of its agent crossed its threshold. The caller tells it once
    /// per crossing (`abode_gateway::LiveMetadata`).
    pub async fn notify_workspace_resource_high(
        &self,
        workspace: &Workspace,
        high: &ResourceHigh<'_>,
    ) -> Result<(), ControlError> {
        let mut payload = workspace_payload(workspace);
        payload["agent"] = json!(high.agent);
        payload["monitor"] = json!(high.monitor);
        payload["threshold_percent"] = json!(high.threshold);
        payload["used_percent"] = json!((high.used_percent * 10.0).round() / 10.0);
        let once = Once::Key(format!(
            "workspace_resource_high\n{}\n{}\n{}\n{}",
            workspace.id, high.agent, high.monitor, high.crossed_at
        ));
        let notices = self
            .notices_to(
                NotificationKind::WorkspaceResourceHigh,
                Self::person_owning(workspace),
                payload,
                Some(once),
            )
            .await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }

    /// Writes [`Notifications::workspace_deletion_scheduled_notices`] to the outbox.
    pub async fn notify_workspace_deletion_scheduled(
        &self,
        workspace: &Workspace,
        delete_at: i64,
    ) -> Result<(), ControlError> {
        let notices = self
            .workspace_deletion_scheduled_notices(workspace, delete_at)
            .await;
        Ok(self.store.enqueue_notifications(&notices).await?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use abode_store::*;
    use serde_json::Value;

    use super::{preset_recovered, ReplacedResource};
    use crate::{Clock, Config, Control};

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    /// One call of a later event.
    #[derive(Clone, Copy, Debug)]
    enum Call {
        Replaced(&'static str),
        Limited(&'static str),
        Recovered,
        Dormant(i64),
        Deletion(i64),
        /// The clock moves a day on.
        NextDay,
    }

    struct World {
        control: Control,
        clock: crate::ManualClock,
        template: Template,
        bobs: Workspace,
        pooled: Workspace,
        bob: User,
    }

    async fn world(dir: &std::path::Path) -> World {
        let super::super::fixture::Platform {
            store,
            bob,
            template,
            bobs: (bobs, _),
            pooled: (pooled, _),
            ..
        } = super::super::fixture::platform(dir).await;
        let (clock, hand) = Clock::manual(1_767_225_600_000);
        let mut config = Config::new(dir.to_path_buf(), "http://127.0.0.1:1".into());
        config.clock = clock;
        World {
            control: Control::new(store, config),
            clock: hand,
            template,
            bobs,
            pooled,
            bob,
        }
    }

    /// Writes the call's messages and returns, for each written (not
    /// deduplicated) one, its recipient's name and its payload.
    async fn run(world: &World, workspace: &Workspace, call: Call) -> Vec<(String, Value)> {
        let control = &world.control;
        let notifications = control.notifications();
        let notices = match call {
            Call::Replaced(path) => {
                let replaced = [ReplacedResource {
                    address: "docker_volume.home".into(),
                    paths: vec![path.into()],
                }];
                notifications
                    .prebuild_resource_replaced_notices(workspace, &world.bob, &replaced)
                    .await
            }
            Call::Limited(reason) => {
                notifications
                    .preset_hard_limited_notices(&world.template, "small", reason)
                    .await
            }
            Call::Recovered => {
                preset_recovered(control.store(), &world.template, "small")
                    .await
                    .unwrap();
                Vec::new()
            }
            Call::Dormant(since) => {
                notifications
                    .workspace_dormant_notices(workspace, since, Some(since + 7))
                    .await
            }
            Call::Deletion(at) => {
                notifications
                    .workspace_deletion_scheduled_notices(workspace, at)
                    .await
            }
            Call::NextDay => {
                world.clock.advance(DAY);
                Vec::new()
            }
        };
        control
            .store()
            .enqueue_notifications(&notices)
            .await
            .unwrap();
        let mut written = Vec::new();
        for notice in &notices {
            assert_eq!(
                notice.channel,
                Channel::Inbox,
                "no other channel configured"
            );
            if control
                .store()
                .notification_by_id(&notice.id)
                .await
                .is_err()
            {
                continue;
            }
            let name = control
                .store()
                .user_by_id(&notice.recipient_id)
                .await
                .unwrap()
                .username;
            written.push((name, serde_json::from_str(&notice.payload).unwrap()));
        }
        written.sort_by(|a, b| a.0.cmp(&b.0));
        written
    }

    /// Each later event: who receives it, what it says, and when a repeat
    /// is written again. Each case starts from an empty outbox.
    #[tokio::test]
    async fn later_events_reach_their_recipients_once_as_documented() {
        // (calls in order, whether on the pooled workspace, for each call
        // the recipients written, the kind, payload fields of the first)
        type Case = (
            &'static [Call],
            bool,
            &'static [&'static [&'static str]],
            NotificationKind,
            &'static [(&'static str, &'static str)],
        );
        let cases: [Case; 7] = [
            (
                &[
                    Call::Replaced("image"),
                    Call::Replaced("image"),
                    Call::Replaced("name"),
                    Call::NextDay,
                    Call::Replaced("image"),
                ],
                false,
                &[
                    &["alice", "carol"],
                    &[],
                    &["alice", "carol"],
                    &[],
                    &["alice", "carol"],
                ],
                NotificationKind::PrebuildResourceReplaced,
                &[
                    ("/workspace", "bob/dev"),
                    ("/template", "base"),
                    ("/claimant/name", "bob"),
                    ("/replaced/0/address", "docker_volume.home"),
                    ("/replaced/0/paths/0", "image"),
                ],
            ),
            (
                &[
                    Call::Limited("quota"),
                    Call::Limited("other"),
                    Call::NextDay,
                    Call::Limited("quota"),
                    Call::Recovered,
                    Call::Limited("quota"),
                    Call::Limited("quota"),
                ],
                false,
                &[
                    &["alice", "carol"],
                    &[],
                    &[],
                    &[],
                    &[],
                    &["alice", "carol"],
                    &[],
                ],
                NotificationKind::PresetHardLimited,
                &[
                    ("/template", "base"),
                    ("/preset", "small"),
                    ("/reason", "quota"),
                ],
            ),
            (
                &[
                    Call::Dormant(1_000),
                    Call::NextDay,
                    Call::Dormant(1_000),
                    Call::Dormant(2_000),
                ],
                false,
                &[&["bob"], &[], &[], &["bob"]],
                NotificationKind::WorkspaceDormant,
                &[
                    ("/workspace", "bob/dev"),
                    ("/owner", "bob"),
                    ("/dormant_since_utc", "1970-01-01T00:00:01Z"),
                    ("/delete_at_utc", "1970-01-01T00:00:01Z"),
                ],
            ),
            (
                &[Call::Dormant(1_000)],
                true,
                &[&[]],
                NotificationKind::WorkspaceDormant,
                &[],
            ),
            (
                &[
                    Call::Deletion(86_400_000),
                    Call::NextDay,
                    Call::Deletion(86_400_000),
                    Call::Deletion(172_800_000),
                ],
                false,
                &[&["bob"], &[], &[], &["bob"]],
                NotificationKind::WorkspaceDeletionScheduled,
                &[
                    ("/workspace", "bob/dev"),
                    ("/template", "base"),
                    ("/delete_at_utc", "1970-01-02T00:00:00Z"),
                ],
            ),
            (
                &[Call::Deletion(86_400_000)],
                true,
                &[&[]],
                NotificationKind::WorkspaceDeletionScheduled,
                &[],
            ),
            (
                &[Call::Replaced("image")],
                true,
                &[&["alice", "carol"]],
                NotificationKind::PrebuildResourceReplaced,
                &[("/workspace", "prebuilds/pool-1")],
            ),
        ];
        for (calls, pooled, expected, kind, fields) in cases {
            let dir = tempfile::tempdir().unwrap();
            let world = world(dir.path()).await;
            let workspace = if pooled { &world.pooled } else { &world.bobs };
            let mut first = None;
            for (call, expected) in calls.iter().zip(expected) {
                let written = run(&world, workspace, *call).await;
                let names: Vec<&str> = written.iter().map(|(name, _)| name.as_str()).collect();
                assert_eq!(&names, expected, "{kind} {call:?} in {calls:?}");
                if first.is_none() {
                    first = written.into_iter().next().map(|(_, payload)| payload);
                }
            }
            for (pointer, value) in fields {
                let payload = first.as_ref().expect("a first message");
                assert_eq!(
                    payload.pointer(pointer),
                    Some(&Value::from(*value)),
                    "{kind} {pointer}"
                );
            }
            // Every message of the case is of its kind.
            let inbox = world
                .control
                .store()
                .list_inbox_page(&InboxFilter {
                    recipient_id: world.bob.id.clone(),
                    unread_only: false,
                    after: None,
                    limit: 100,
                })
                .await
                .unwrap();
            assert!(inbox.items.iter().all(|n| n.kind == kind), "{kind}");
        }
    }
}
