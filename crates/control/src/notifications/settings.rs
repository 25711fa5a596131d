//! Per-person preferences: each person may disable kinds of notifications
//! (on every channel), except the kinds the owners made mandatory.

use abode_store::NotificationKind;

use super::Notifications;
use crate::audit::audit_event;
use crate::authz::Action;
use crate::{Caller, ControlError};

/// One kind as a person's settings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSetting {
    pub kind: NotificationKind,
    /// Whether it reaches the person (a mandatory kind always does).
    pub enabled: bool,
    pub mandatory: bool,
}

/// A kind named by a person, or a refusal listing the kinds there are.
pub fn parse_kind(name: &str) -> Result<NotificationKind, ControlError> {
    name.parse().map_err(|_| {
        let known: Vec<&str> = NotificationKind::ALL
            .iter()
            .map(|kind| kind.as_str())
            .collect();
        ControlError::BadRequest(format!(
            "unknown notification kind `{}`: use one of {}",
            name.chars().take(64).collect::<String>(),
            known.join(", ")
        ))
    })
}

impl Notifications {
    /// The caller's setting of every kind.
    pub async fn settings(&self, caller: &Caller) -> Result<Vec<KindSetting>, ControlError> {
        caller.authorize(Action::NotificationRead, Some(&caller.user.id))?;
        let disabled = self.store.notification_opt_outs(&caller.user.id).await?;
        let mandatory = self.store.mandatory_notification_kinds().await?;
        Ok(NotificationKind::ALL
            .into_iter()
            .map(|kind| KindSetting {
                kind,
                enabled: mandatory.contains(&kind) || !disabled.contains(&kind),
                mandatory: mandatory.contains(&kind),
            })
            .collect())
    }

    /// Disables and enables kinds for the caller; disabling a mandatory
    /// kind is refused (nothing is changed then).
    pub async fn change_settings(
        &self,
        caller: &Caller,
        disable: &[NotificationKind],
        enable: &[NotificationKind],
    ) -> Result<Vec<KindSetting>, ControlError> {
        caller.authorize(Action::NotificationRead, Some(&caller.user.id))?;
        let mandatory = self.store.mandatory_notification_kinds().await?;
        if let Some(kind) = disable.iter().find(|kind| mandatory.contains(kind)) {
            return Err(ControlError::Conflict(format!(
                "{kind} notifications are mandatory on this server: they cannot be disabled"
            )));
        }
        for kind in disable {
            self.store
                .set_notification_opt_out(&caller.user.id, *kind, true)
                .await?;
        }
        for kind in enable {
            self.store
                .set_notification_opt_out(&caller.user.id, *kind, false)
                .await?;
        }
        self.settings(caller).await
    }

    /// Messages given up on, everyone's, newest first (owners).
    pub async fn failed(
        &self,
        caller: &Caller,
        after: Option<String>,
        limit: Option<i64>,
    ) -> Result<abode_store::Page<abode_store::FailedNotification>, ControlError> {
        caller.authorize(Action::NotificationPolicy, None)?;
        Ok(self
            .store
            .list_failed_notification_page(after.as_deref(), abode_store::page_size(limit))
            .await?)
    }

    /// Whether the caller may make kinds mandatory (asked before a
    /// request's body is read).
    pub fn may_set_policy(&self, caller: &Caller) -> Result<(), ControlError> {
        Ok(caller.authorize(Action::NotificationPolicy, None)?)
    }

    /// Makes a kind mandatory (nobody's preference stops it) or optional
    /// again (`notification.policy`: owners), on the record.
    pub async fn set_kind_mandatory(
        &self,
        caller: &Caller,
        kind: NotificationKind,
        mandatory: bool,
    ) -> Result<(), ControlError> {
        caller.authorize(Action::NotificationPolicy, None)?;
        self.store
            .set_notification_kind_mandatory(kind, mandatory)
            .await?;
        let event = audit_event(
            Some(&caller.user),
            caller.request_id.clone(),
            "notification.policy",
            "notification_kind",
            kind.as_str(),
            "success",
            Some(format!("mandatory={mandatory}")),
        );
        abode_identity::audit::mark_recorded();
        if let Err(error) = self.store.record_audit(&event).await {
            tracing::error!(%error, "cannot record an audit event");
        }
        Ok(())
    }
}
