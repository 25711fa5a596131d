//! `abode stat`: what a workspace uses, CPU, memory and its home's disk
//! (docs/cli.md). Read from the workspace's cgroup v2 where it has one (a
//! container's, or a unit's: the agent's cgroup when the system mounts only
//! the unified hierarchy and that cgroup is not the root), else from `/proc`
//! for the agent and every process it started, and `statvfs` of the home.
//! Inside a workspace the CLI measures it itself, with the agent's pid from
//! its environment; from outside the agent measures it when asked through
//! its SSH server (the `abode-stat` subsystem, reached through the server).

use std::path::{Path, PathBuf};
use std::time::Duration;

use abode_sdk::{StatCpu, StatDisk, StatMemory, WorkspaceStat};

/// The SSH subsystem that answers a [`WorkspaceStat`] as JSON.
pub const SUBSYSTEM: &str = "abode-stat";

/// How long the CPU is watched for its rate.
pub const CPU_SAMPLE: Duration = Duration::from_millis(500);

/// Where the cgroup v2 hierarchy is mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup v2 directory of `pid`, when it has one of its own: a single
/// `0::PATH` line in `/proc/<pid>/cgroup` (the unified hierarchy alone) and
/// a directory that accounts memory (the root cgroup does not).
fn cgroup_dir(pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mut lines = text.lines().filter(|line| !line.is_empty());
    let path = lines.next()?.strip_prefix("0::")?;
    if lines.next().is_some() {
        return None;
    }
    let dir = Path::new(CGROUP_ROOT).join(path.trim_start_matches('/'));
    dir.join("memory.current").is_file().then_some(dir)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A `KEY VALUE` line of a cgroup file such as `cpu.stat`.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

fn cgroup_cpu_usec(dir: &Path) -> Option<u64> {
    keyed(
        &std::fs::read_to_string(dir.join("cpu.stat")).ok()?,
        "usage_usec",
    )
}

/// `cpu.max`'s quota over its period, in cores; `None` when unlimited.
fn cgroup_cpu_limit(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("cpu.max")).ok()?;
    let mut words = text.split_whitespace();
    let quota: f64 = words.next()?.parse().ok()?;
    let period: f64 = words.next()?.parse().ok()?;
    (period > 0.0).then_some(quota / period)
}

/// The machine's memory (`MemTotal`), in bytes.
fn mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// The filesystem of `path` (the home volume), by `statvfs`.
pub fn disk(path: &Path) -> Option<StatDisk> {
    let stat = rustix::fs::statvfs(path).ok()?;
    let unit = stat.f_frsize.max(1);
    let total = stat.f_blocks.saturating_mul(unit);
    let free = stat.f_bfree.saturating_mul(unit);
    Some(StatDisk {
        path: path.display().to_string(),
        total_bytes: total,
        used_bytes: total.saturating_sub(free),
        available_bytes: stat.f_bavail.saturating_mul(unit),
    })
}

/// What the workspace whose agent is `agent_pid` uses, its home being
/// `home`: the CPU over [`CPU_SAMPLE`].
pub fn measure(agent_pid: i32, home: Option<&Path>) -> WorkspaceStat {
    let disk = home.and_then(disk);
    if let Some(dir) = cgroup_dir(agent_pid) {
        if let Some(before) = cgroup_cpu_usec(&dir) {
            std::thread::sleep(CPU_SAMPLE);
            let after = cgroup_cpu_usec(&dir).unwrap_or(before);
            return WorkspaceStat {
                source: "cgroup".into(),
                cpu: StatCpu {
                    used_cores: round(
                        after.saturating_sub(before) as f64 / CPU_SAMPLE.as_micros() as f64,
                    ),
                    limit_cores: round(cgroup_cpu_limit(&dir).unwrap_or_else(cores)),
                },
                memory: cgroup_memory(&dir),
                disk,
            };
        }
    }
    let before = abode_procfs::usage::tree_usage(agent_pid);
    std::thread::sleep(CPU_SAMPLE);
    let now = abode_procfs::usage::tree_usage(agent_pid);
    let ticks = abode_procfs::usage::ticks_between(&before, &now);
    WorkspaceStat {
        source: "proc".into(),
        cpu: StatCpu {
            used_cores: round(
                ticks as f64
                    / abode_procfs::usage::TICKS_PER_SECOND as f64
                    / CPU_SAMPLE.as_secs_f64(),
            ),
            limit_cores: round(cores()),
        },
        memory: proc_memory(&now),
        disk,
    }
}

/// The memory of a cgroup: its working set, as container runtimes count
/// it (the page cache the kernel may drop at once is not counted).
fn cgroup_memory(dir: &Path) -> StatMemory {
    let stat_text = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let current = read_u64(&dir.join("memory.current")).unwrap_or(0);
    let inactive = keyed(&stat_text, "inactive_file").unwrap_or(0);
    StatMemory {
        used_bytes: current.saturating_sub(inactive),
        limit_bytes: read_u64(&dir.join("memory.max")).unwrap_or_else(mem_total),
    }
}

fn proc_memory(usage: &[abode_procfs::usage::Usage]) -> StatMemory {
    StatMemory {
        used_bytes: usage.iter().map(|usage| usage.rss_bytes).sum(),
        limit_bytes: mem_total(),
    }
}

/// The memory the workspace whose agent is `agent_pid` uses, as
/// [`measure`] counts it, without waiting for a CPU sample (the resource
/// monitors' reading).
pub fn memory(agent_pid: i32) -> StatMemory {
    match cgroup_dir(agent_pid) {
        Some(dir) if dir.join("memory.current").exists() => cgroup_memory(&dir),
        _ => proc_memory(&abode_procfs::usage::tree_usage(agent_pid)),
    }
}

/// Whether `pid` is a running process.
pub fn running(pid: i32) -> bool {
    abode_procfs::Identity::of(pid).is_some_and(|identity| identity.is_running())
}

/// The home a workspace's stat measures: `HOME`, else the agent's `dir`.
pub fn home(dir: Option<&Path>) -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .or_else(|| dir.map(Path::to_path_buf))
}

/// Bytes in a person's units: `512 B`, `1.5 GiB` (`abode stat`, and the
/// disk line of `abode show`).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0}%", part / whole * 100.0)
    } else {
        "-".into()
    }
}

/// `abode stat`'s text.
pub fn text(stat: &WorkspaceStat) -> String {
    let mut out = format!(
        "CPU:     {:.2} of {:.2} cores ({})\nMemory:  {} of {} ({})\n",
        stat.cpu.used_cores,
        stat.cpu.limit_cores,
        percent(stat.cpu.used_cores, stat.cpu.limit_cores),
        size(stat.memory.used_bytes),
        size(stat.memory.limit_bytes),
        percent(
            stat.memory.used_bytes as f64,
            stat.memory.limit_bytes as f64
        ),
    );
    match &stat.disk {
        Some(disk) => out.push_str(&format!(
            "Disk:    {} of {} ({}%), {} free, at {}\n",
            size(disk.used_bytes),
            size(disk.total_bytes),
            // `df`'s: blocks reserved for root are neither used nor free.
            abode_contract::disk::used_percent(disk.used_bytes, disk.available_bytes),
            size(disk.available_bytes),
            disk.path
        )),
        None => out.push_str("Disk:    the home is not known (HOME is not set)\n"),
    }
    out.push_str(&format!(
        "Source:  {}\n",
        if stat.source == "cgroup" {
            "the workspace's cgroup"
        } else {
            "/proc (the agent and the processes it started)"
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cgroup_files_are_read_by_key() {
        let text = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n";
        assert_eq!(keyed(text, "usage_usec"), Some(1500));
        assert_eq!(keyed(text, "nr_periods"), None);
    }

    #[test]
    fn this_process_measures_plausibly() {
        let dir = tempfile::tempdir().unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        let stat = measure(me, Some(dir.path()));
        assert!(stat.memory.used_bytes > 0 && stat.memory.used_bytes <= stat.memory.limit_bytes);
        assert!(stat.cpu.limit_cores >= 1.0 / 1000.0);
        let disk = stat.disk.clone().unwrap();
        assert!(disk.used_bytes <= disk.total_bytes && disk.total_bytes > 0);
        let shown = text(&stat);
        assert!(
            shown.contains("Memory:") && shown.contains("Disk:"),
            "{shown}"
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }
}
