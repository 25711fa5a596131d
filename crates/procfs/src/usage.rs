//! What a tree of processes uses: CPU time and resident memory, from
//! `/proc/<pid>/stat` and `/proc/<pid>/status`, and which processes descend
//! from one (every process's parent, read in one pass over `/proc`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use crate::Identity;

/// The kernel's `USER_HZ`: the unit of the CPU times in `/proc/<pid>/stat`,
/// fixed at 100 on every architecture Linux exposes to user space.
pub const TICKS_PER_SECOND: u64 = 100;

/// What one process uses now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub identity: Identity,
    /// User plus system CPU time, in ticks ([`TICKS_PER_SECOND`]).
    pub cpu_ticks: u64,
    /// Resident memory (`VmRSS`), in bytes.
    pub rss_bytes: u64,
}

/// Parses `/proc/<pid>/stat`'s user and system times and start time.
fn parse_times(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields counted from the state (field 3 of stat(5)): utime is 14,
    // stime 15, starttime 22.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let start: u64 = fields.get(19)?.parse().ok()?;
    Some((utime + stime, start))
}

/// `VmRSS` of `/proc/<pid>/status`, in bytes (a kernel thread has none: 0).
fn parse_rss(status: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// What `pid` uses now; `None` when there is no such process (or it is a
/// zombie).
pub fn usage(pid: i32) -> Option<Usage> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    if !crate::parse_stat(&stat)?.running() {
        return None;
    }
    let (cpu_ticks, start_ticks) = parse_times(&stat)?;
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    Some(Usage {
        identity: Identity { pid, start_ticks },
        cpu_ticks,
        rss_bytes: parse_rss(&status),
    })
}

/// `root` and every process descending from it, as `/proc` says now.
pub fn tree(root: i32) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(stat) = crate::stat(pid) {
                children.entry(stat.parent).or_default().push(pid);
            }
        }
    }
    let mut found = BTreeSet::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        if found.insert(pid) {
            queue.extend(children.get(&pid).into_iter().flatten().copied());
        }
    }
    found.into_iter().collect()
}

/// What `root`'s tree uses now, process by process.
pub fn tree_usage(root: i32) -> Vec<Usage> {
    tree(root).into_iter().filter_map(usage).collect()
}

/// The CPU ticks the processes of `now` spent since `before`: each process
/// counted only against itself (a process that began in between counts
/// whole, one that ended is gone from both).
pub fn ticks_between(before: &[Usage], now: &[Usage]) -> u64 {
    now.iter()
        .map(|usage| {
            let earlier = before
                .iter()
                .find(|old| old.identity == usage.identity)
                .map_or(0, |old| old.cpu_ticks);
            usage.cpu_ticks.saturating_sub(earlier)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn times_come_from_after_the_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 555 1000 10";
        assert_eq!(parse_times(stat), Some((10, 555)));
        assert_eq!(parse_times("nonsense"), None);
    }

    #[test]
    fn rss_is_read_in_kibibytes() {
        assert_eq!(parse_rss("Name:\tx\nVmRSS:\t  2048 kB\n"), 2048 * 1024);
        assert_eq!(parse_rss("Name:\tkthreadd\n"), 0);
    }

    #[test]
    fn this_process_is_in_its_own_tree_and_uses_memory() {
        let me = i32::try_from(std::process::id()).unwrap();
        let tree = tree(me);
        assert!(tree.contains(&me));
        let usage = usage(me).unwrap();
        assert!(usage.rss_bytes > 0);
        assert_eq!(ticks_between(&[usage], &[usage]), 0);
    }
}
