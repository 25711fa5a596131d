//! From stored rows to the scheduler decision's facts. The store keeps
//! milliseconds, names and the guard's report; the decision wants
//! durations, times and whether the guard refused a plan (a build's status
//! and reason are the contract's, the same types on both sides).

use std::time::Duration;

use abode_schedule::{
    AutostartSchedule, Dormancy, LatestBuild, OwnerStatus, Snapshot, TemplatePolicy, Weekdays,
    Workspace,
};
use abode_store::{TickRow, TickSnapshot};

use crate::times::utc_datetime as utc;

fn duration(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A template's stored policy. Days that do not parse (a value written by
/// hand) read as every day, with a warning: a policy is never dropped.
pub(crate) fn policy(row: abode_store::TemplatePolicy) -> TemplatePolicy {
    let autostart_days = Weekdays::parse(&row.autostart_days).unwrap_or_else(|error| {
        tracing::warn!(template = %row.template_id, %error, "autostart days unreadable; every day is allowed");
        Weekdays::ALL
    });
    TemplatePolicy {
        template_id: row.template_id,
        default_ttl: duration(row.default_ttl_ms),
        activity_bump: duration(row.activity_bump_ms),
        max_ttl: duration(row.max_ttl_ms),
        autostart_days,
        allow_user_autostart: row.allow_user_autostart,
        allow_user_autostop: row.allow_user_autostop,
        failure_ttl: duration(row.failure_ttl_ms),
        dormancy_threshold: duration(row.dormancy_threshold_ms),
        dormancy_auto_deletion: duration(row.dormancy_auto_deletion_ms),
        require_active_version: row.require_active_version,
    }
}

/// Whether a failed build's guard report says the guard blocked it.
fn blocked(report: Option<&abode_guard::Report>) -> bool {
    report.is_some_and(|report| report.decision == abode_guard::Decision::Block)
}

fn workspace(row: TickRow) -> Workspace {
    let lifecycle = row.lifecycle;
    let autostart = match (lifecycle.autostart_cron, lifecycle.autostart_timezone) {
        (Some(cron), Some(timezone)) => Some(AutostartSchedule { cron, timezone }),
        _ => None,
    };
    Workspace {
        on_active_version: row.active_version_id.as_deref()
            == Some(row.template_version_id.as_str()),
        id: lifecycle.workspace_id,
        template_id: row.template_id,
        owner: if row.owner_status.may_sign_in() {
            OwnerStatus::Active
        } else {
            OwnerStatus::Suspended
        },
        prebuilt: row.system_owner,
        latest_build: Some(LatestBuild {
            transition: row.build_transition,
            status: row.build_status,
            reason: row.build_reason,
            blocked: blocked(row.failed_guard_report.as_ref()),
            created_at: utc(row.build_created_at),
            finished_at: row.build_finished_at.map(utc),
        }),
        autostart,
        ttl: lifecycle.ttl_ms.map(duration),
        deadline: lifecycle.deadline.map(utc),
        max_deadline: lifecycle.max_deadline.map(utc),
        last_used_at: utc(lifecycle.last_used_at.unwrap_or(row.created_at)),
        dormancy: lifecycle.dormant_at.map(|dormant_at| Dormancy {
            dormant_at: utc(dormant_at),
            deleting_at: lifecycle.deleting_at.map(utc),
            deletion_notified_at: lifecycle.deletion_notified_at.map(utc),
        }),
    }
}

/// The decision's snapshot from the store's.
pub(crate) fn snapshot(rows: TickSnapshot) -> Snapshot {
    Snapshot {
        templates: rows.policies.into_iter().map(policy).collect(),
        workspaces: rows.workspaces.into_iter().map(workspace).collect(),
    }
}
