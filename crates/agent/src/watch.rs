//! Live metadata and resource monitors (issue 48, items 3 and 5). Each
//! `metadata` block runs in a thread of its own, every `interval` seconds,
//! killed past its `timeout` (a slow or failing block shows its error and
//! never holds back the others; a run still going is never started again);
//! the monitors read the workspace's memory (as `abode stat` does) and each
//! volume's statvfs every 10 s. One sender sends what changed, at most once
//! a second, on the reports' socket (`report_stream.rs`), or else with
//! `POST /agent/metadata`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use abode_client::Client;
use abode_contract::watch::{cut_value, AgentWatch, MetadataDefinition, MONITOR_INTERVAL_SECONDS};
use abode_sdk::requests::{AgentMetadataReport, MetadataResult, VolumeReading};

use crate::run::{run_script, Startup};

/// The fewest milliseconds between two reports.
const REPORT_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Latest {
    results: BTreeMap<String, (String, Option<String>, Instant)>,
    memory: Option<f64>,
    volumes: Vec<VolumeReading>,
    changed: bool,
}

/// Where a block runs: the agent's `dir` and `env`, its output kept in
/// `log_dir`.
pub(crate) struct Watcher<'a> {
    pub client: &'a Client,
    /// The server's URL and the agent's token, for the reports' socket.
    pub url: &'a str,
    pub token: &'a str,
    pub stop: &'a AtomicBool,
    pub dir: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub log_dir: PathBuf,
}

/// Sleeps up to `duration` in small steps; false when stopped meanwhile.
fn pause(stop: &AtomicBool, duration: Duration) -> bool {
    let deadline = Instant::now() + duration;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
    false
}

/// Runs one block once: its output, or why it failed.
fn run_block(
    block: &MetadataDefinition,
    out: &Path,
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    stop: &AtomicBool,
) -> (String, Option<String>) {
    let timeout = Duration::from_secs(block.timeout_seconds.max(1));
    let ended = run_script(
        &block.script,
        dir,
        env,
        out,
        stop,
        Some(Instant::now() + timeout),
    );
    let output = std::fs::read_to_string(out).unwrap_or_default();
    let output = cut_value(output.trim());
    match ended {
        Startup::Succeeded => (output, None),
        Startup::Failed(code) => (
            String::new(),
            Some(cut_value(
                format!("exit status {code}: {output}").trim_end_matches([':', ' ']),
            )),
        ),
        Startup::TimedOut => (
            String::new(),
            Some(format!("timed out after {} s", timeout.as_secs())),
        ),
        Startup::NotRun => (String::new(), Some(format!("could not run: {output}"))),
        Startup::Interrupted => (String::new(), Some("interrupted".into())),
    }
}

/// A volume's use in percent, as `df` counts it.
fn volume_percent(path: &Path) -> Option<f64> {
    let disk = crate::stat::disk(path)?;
    let whole = disk.used_bytes.saturating_add(disk.available_bytes);
    (whole > 0).then(|| disk.used_bytes as f64 * 100.0 / whole as f64)
}

impl Watcher<'_> {
    /// Runs the blocks and monitors of `watch` until the agent stops.
    pub(crate) fn run(&self, watch: &AgentWatch) {
        if watch.is_empty() {
            return;
        }
        let latest = Arc::new(Mutex::new(Latest::default()));
        let mark_changed = |latest: &Mutex<Latest>| {
            // A panicking block leaves values that are still values.
            latest
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .changed = true;
        };
        std::thread::scope(|scope| {
            for (index, block) in watch.metadata.iter().enumerate() {
                let latest = Arc::clone(&latest);
                scope.spawn(move || {
                    let out = self.log_dir.join(format!("metadata-{index}.out"));
                    loop {
                        let started = Instant::now();
                        let (value, error) =
                            run_block(block, &out, self.dir.as_deref(), &self.env, self.stop);
                        if self.stop.load(Ordering::SeqCst) {
                            return;
                        }
                        {
                            let mut latest = latest.lock().unwrap_or_else(PoisonError::into_inner);
                            latest
                                .results
                                .insert(block.key.clone(), (value, error, Instant::now()));
                            latest.changed = true;
                        }
                        let interval = Duration::from_secs(block.interval_seconds.max(1));
                        if !pause(self.stop, interval.saturating_sub(started.elapsed())) {
                            return;
                        }
                    }
                });
            }
            if watch.memory_threshold_percent.is_some() || !watch.volumes.is_empty() {
                let latest = Arc::clone(&latest);
                scope.spawn(move || loop {
                    let memory = watch.memory_threshold_percent.map(|_| {
                        let memory = crate::stat::memory(std::process::id() as i32);
                        match memory.limit_bytes {
                            0 => 0.0,
                            limit => memory.used_bytes as f64 * 100.0 / limit as f64,
                        }
                    });
                    let volumes = watch
                        .volumes
                        .iter()
                        .filter_map(|volume| {
                            Some(VolumeReading {
                                path: volume.path.clone(),
                                used_percent: volume_percent(&crate::run::expand_home(
                                    &volume.path,
                                ))?,
                            })
                        })
                        .collect();
                    {
                        let mut latest = latest.lock().unwrap_or_else(PoisonError::into_inner);
                        latest.memory = memory;
                        latest.volumes = volumes;
                    }
                    mark_changed(&latest);
                    if !pause(self.stop, Duration::from_secs(MONITOR_INTERVAL_SECONDS)) {
                        return;
                    }
                });
            }
            let mut failing = false;
            let mut stream = crate::report_stream::ReportStream::new(self.url, self.token);
            while pause(self.stop, REPORT_EVERY) {
                let report = {
                    let mut latest = latest.lock().unwrap_or_else(PoisonError::into_inner);
                    if !latest.changed {
                        continue;
                    }
                    latest.changed = false;
                    let latest = &*latest;
                    AgentMetadataReport {
                        metadata: latest
                            .results
                            .iter()
                            .map(|(key, (value, error, at))| MetadataResult {
                                key: key.clone(),
                                value: value.clone(),
                                error: error.clone(),
                                age_ms: u64::try_from(at.elapsed().as_millis()).unwrap_or(0),
                            })
                            .collect(),
                        memory_used_percent: latest.memory,
                        volumes: latest.volumes.clone(),
                    }
                };
                if stream.send(&report) {
                    failing = false;
                    continue;
                }
                match self.client.agent_metadata(&report) {
                    Ok(()) => failing = false,
                    Err(err) => {
                        if !failing {
                            eprintln!(
                                "abode agent: reporting metadata failed, will keep trying: {err}"
                            );
                        }
                        failing = true;
                        // Sent again with the next change, or now.
                        mark_changed(&latest);
                    }
                }
            }
        });
    }
}
