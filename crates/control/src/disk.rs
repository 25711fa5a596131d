//! Disk-full warnings (issue 47, part 5): what an agent's heartbeat says of
//! its home volume, kept with the agent, and the owner told when it reaches
//! one of the agent's thresholds (`abode_agent.disk_warning_percents`,
//! default 90 and 98): once per crossing, and no more than once a day per
//! workspace and threshold, however many heartbeats say it.

use abode_sdk::requests::HomeDisk;
use abode_sdk::DiskUsage;
use abode_store::{Agent, Store};

use crate::notifications::{DiskWarning, Notifications};
use crate::ControlError;

/// The thresholds of an agent whose state says none (an agent made before
/// there were any).
pub const DEFAULT_PERCENTS: [i64; 2] = [90, 98];

/// How long a threshold, once told, stays quiet.
const QUIET_MS: i64 = 24 * 3600 * 1000;

/// How full a volume is, as `df` says it: used over what the user could
/// have (used + available), rounded up; 0 for an empty report.
pub fn used_percent(used: u64, available: u64) -> u64 {
    let whole = u128::from(used) + u128::from(available);
    if whole == 0 {
        return 0;
    }
    let percent = (u128::from(used) * 100).div_ceil(whole);
    u64::try_from(percent).unwrap_or(100)
}

/// The stored thresholds (`"90,98"`), ascending; the defaults when there
/// are none.
fn thresholds(stored: Option<&str>) -> Vec<i64> {
    let mut percents: Vec<i64> = stored
        .unwrap_or_default()
        .split(',')
        .filter_map(|part| part.trim().parse().ok())
        .filter(|percent| (1..=100).contains(percent))
        .collect();
    if stored.is_none() {
        percents = DEFAULT_PERCENTS.to_vec();
    }
    percents.sort_unstable();
    percents.dedup();
    percents
}

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
        )
        .await?;
    let percent = used_percent(disk.used_bytes, disk.available_bytes);
    let reached: Vec<i64> = thresholds(stored.as_deref())
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
            DiskUsage {
                agent: row.agent_name,
                used_bytes: used,
                total_bytes: total,
                used_percent: used_percent(used, total.saturating_sub(used)),
                reported_at: crate::times::utc_text(row.reported_at),
                age_seconds: u64::try_from((now - row.reported_at).max(0) / 1000).unwrap_or(0),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percents_are_df_s_and_thresholds_read_back() {
        assert_eq!(used_percent(0, 0), 0);
        assert_eq!(used_percent(90, 10), 90);
        assert_eq!(used_percent(901, 99), 91, "rounded up, as df does");
        assert_eq!(used_percent(100, 0), 100);
        assert_eq!(thresholds(None), vec![90, 98]);
        assert_eq!(thresholds(Some("98,90,90")), vec![90, 98]);
        assert_eq!(thresholds(Some("")), Vec::<i64>::new(), "none wanted");
        assert_eq!(thresholds(Some("50,x,101")), vec![50]);
    }
}
