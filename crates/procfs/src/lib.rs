//! What Linux's /proc says about a process.
//!
//! Abode keeps track of processes it does not (or no longer) own as a parent:
//! a workspace's `abode_process` outlives the provider that started it, and a
//! build's Terraform outlives a server that was killed. A pid alone names
//! nothing once its process has died (the kernel reuses pids), so a process is
//! identified by its pid *and* its start time, both read from /proc. Zombies
//! count as gone: nobody may be left to reap them.

pub mod usage;

use std::fs;
use std::path::{Path, PathBuf};

/// The fields of `/proc/<pid>/stat` Abode needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The one-letter state (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    pub parent: i32,
    pub process_group: i32,
    /// Start time in clock ticks after boot: with the pid, a unique identity.
    pub start_ticks: u64,
}

impl ProcStat {
    /// Running, sleeping or stopped: anything but a zombie or dead.
    pub fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        parent: fields.get(1)?.parse().ok()?,
        process_group: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// What /proc says about `pid` now; `None` when there is no such process.
pub fn stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// One process, told apart from any later process that gets its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub pid: i32,
    pub start_ticks: u64,
}

impl Identity {
    /// The identity of the running process `pid`, if there is one.
    pub fn of(pid: i32) -> Option<Identity> {
        let stat = stat(pid)?;
        Some(Identity {
            pid,
            start_ticks: stat.start_ticks,
        })
    }

    /// Is this exact process (not a later one with its pid) still running?
    pub fn is_running(&self) -> bool {
        stat(self.pid).is_some_and(|stat| stat.running() && stat.start_ticks == self.start_ticks)
    }

    /// Has the pid been taken by another process since this one ended?
    pub fn pid_reused(&self) -> bool {
        stat(self.pid).is_some_and(|stat| stat.start_ticks != self.start_ticks)
    }

    /// `<pid>-<start ticks>`, the form stored in files and Terraform state.
    pub fn to_text(&self) -> String {
        format!("{}-{}", self.pid, self.start_ticks)
    }

    pub fn parse(text: &str) -> Option<Identity> {
        let (pid, ticks) = text.trim().split_once('-')?;
        Some(Identity {
            pid: pid.parse().ok()?,
            start_ticks: ticks.parse().ok()?,
        })
    }
}

/// Every pid in /proc with what its stat says.
fn processes() -> impl Iterator<Item = (i32, ProcStat)> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, stat(pid)?))
        })
}

/// Is any process of the group still running (the leader may be gone while
/// its children live on)?
pub fn group_running(group: i32) -> bool {
    processes().any(|(_, stat)| stat.process_group == group && stat.running())
}

/// The running processes whose parent is `pid`: how the first process of a
/// sandbox's PID namespace is found from the sandbox's outer process.
pub fn children(pid: i32) -> Vec<Identity> {
    processes()
        .filter(|(_, stat)| stat.parent == pid && stat.running())
        .map(|(child, stat)| Identity {
            pid: child,
            start_ticks: stat.start_ticks,
        })
        .collect()
}

/// The running processes of a process group with their command names.
pub fn group_members(group: i32) -> Vec<(Identity, String)> {
    processes()
        .filter(|(_, stat)| stat.process_group == group && stat.running())
        .map(|(pid, stat)| {
            let name = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (
                Identity {
                    pid,
                    start_ticks: stat.start_ticks,
                },
                name.trim().to_string(),
            )
        })
        .collect()
}

/// Running processes whose working directory is `dir` or lies under it, with
/// their command names: how a build's Terraform is found when no record of it
/// was written.
pub fn running_in(dir: &Path) -> Vec<(Identity, String)> {
    processes()
        .filter(|(_, stat)| stat.running())
        .filter_map(|(pid, stat)| {
            let cwd: PathBuf = fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            if !cwd.starts_with(dir) {
                return None;
            }
            let name = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            Some((
                Identity {
                    pid,
                    start_ticks: stat.start_ticks,
                },
                name.trim().to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                state: 'S',
                parent: 1,
                process_group: 4242,
                start_ticks: 987654,
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn identities_round_trip_as_text() {
        let identity = Identity {
            pid: 12,
            start_ticks: 34,
        };
        assert_eq!(Identity::parse(&identity.to_text()), Some(identity));
        assert_eq!(Identity::parse("12"), None);
        assert_eq!(Identity::parse("a-b"), None);
    }

    #[test]
    fn this_process_is_running_and_a_changed_start_time_is_not() {
        let me = Identity::of(i32::try_from(std::process::id()).unwrap()).unwrap();
        assert!(me.is_running());
        assert!(!me.pid_reused());
        let other = Identity {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!other.is_running());
        assert!(other.pid_reused());
    }

    #[test]
    fn processes_are_found_by_working_directory() {
        let dir = std::env::temp_dir().join(format!("abode-procfs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&dir)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let found = running_in(&dir);
        child.kill().unwrap();
        child.wait().unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert!(
            found
                .iter()
                .any(|(identity, name)| identity.pid == pid && name == "sleep"),
            "{found:?}"
        );
    }
}
