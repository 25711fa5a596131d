//! Disk-full warnings (issue 47, part 5): what an agent's heartbeat says of
//! its home volume, kept with the agent, and the owner told when it reaches
//! one of the agent's thresholds (`abode_agent.disk_warning_percents`,
//! default 90 and 98): once per crossing, and no more than once a day per
//! workspace and threshold, however many heartbeats say it.

use abode_contract::disk::{used_percent, warning_percents};
use abode_sdk::requests::HomeDisk;
use abode_sdk::DiskUsage;
use abode_store::{Agent, Store};

use crate::notifications::{DiskWarning, Notifications};
use crate::ControlError;

/// How long a threshold, once told, stays quiet.
const QUIET_MS: i64 = 24 * 3600 * 1000;

/// Keeps what the agent said of its home volume and tells the owner of a
/// threshold reached: the highest one reached, once, when any reached
/// threshold was not told within a day (each counts as told now).
pub(crate) async fn record(
    store: &Store,
    clock: &abode_clock::Clock,
    notifications: &Notifications,
    agent: &Agent,
    disk: HomeDisk,
) -> Result<(), ControlError> {
    let as_stored = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
    let stored = store
        .put_agent_disk(
            &agent.id,
            as_stored(disk.used_bytes),
            as_stored(disk.total_bytes),
            as_stored(disk.available_bytes),
        )
        .await?;
    let percent = used_percent(disk.used_bytes, disk.available_bytes);
    let reached: Vec<i64> = warning_percents(stored.as_deref())
        .into_iter()
        .filter(|threshold| u64::try_from(*threshold).is_ok_and(|t| percent >= t))
        .collect();
    let Some(highest) = reached.last().copied() else {
        return Ok(());
    };
    let mut newly = false;
    for threshold in &reached {
        newly |= store
            .claim_disk_warning(&agent.workspace_id, *threshold, QUIET_MS)
            .await?;
    }
    if !newly {
        return Ok(());
    }
    let workspace = store.workspace_by_id(&agent.workspace_id).await?;
    tracing::info!(workspace = %workspace.id, agent = %agent.name, percent, threshold = highest,
        "a home volume reached a disk warning threshold");
    notifications
        .notify_disk_full_warning(
            &workspace,
            &DiskWarning {
                agent: &agent.name,
                threshold: highest,
                used_percent: percent,
                used_bytes: disk.used_bytes,
                total_bytes: disk.total_bytes,
                told_at: clock.now_ms(),
            },
        )
        .await
}

/// What the workspace's agents last said of their home volume, with its
/// age now.
pub(crate) async fn usage(
    store: &Store,
    clock: &abode_clock::Clock,
    workspace_id: &str,
) -> Result<Vec<DiskUsage>, ControlError> {
    let now = clock.now_ms();
    Ok(store
        .workspace_disks(workspace_id)
        .await?
        .into_iter()
        .map(|row| {
            let used = u64::try_from(row.used_bytes).unwrap_or(0);
            let total = u64::try_from(row.total_bytes).unwrap_or(0);
            // As `df` and the warnings count it: blocks reserved for root
            // are neither used nor available.
            let available = row
                .available_bytes
                .and_then(|bytes| u64::try_from(bytes).ok())
                .unwrap_or_else(|| total.saturating_sub(used));
            DiskUsage {
                agent: row.agent_name,
                used_bytes: used,
                total_bytes: total,
                used_percent: used_percent(used, available),
                reported_at: crate::times::utc_text(row.reported_at),
                age_seconds: u64::try_from((now - row.reported_at).max(0) / 1000).unwrap_or(0),
            }
        })
        .collect())
}
