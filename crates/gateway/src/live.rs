//! Live metadata and resource monitors (issue 48, items 3 and 5): the
//! latest value of each agent's `metadata` blocks and its monitors'
//! readings, kept in this server's memory only (never in the database), as
//! the agent's reports reach it. On a deployment of several servers, each
//! holds what the agents reporting to it said: another server may show
//! nothing. A change wakes the dashboard's live views.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use abode_contract::watch::{cut_value, AgentWatch};
use abode_sdk::requests::AgentMetadataReport;
use abode_sdk::AgentMetadata;
use tokio::sync::broadcast;

/// An agent not heard from for this long is forgotten (its workspace was
/// stopped or rebuilt with another agent).
const FORGET_MS: i64 = 10 * 60 * 1000;
/// Readings below the threshold in a row before a monitor may tell again.
const REARM_READINGS: u32 = 3;
/// How long what an agent declares is taken as read.
const DECLARED_MS: i64 = 30 * 1000;
/// How long an agent token checked against the database is taken as valid
/// for reports. An agent reports once a second; checking its token each time
/// was most of a report's cost. A stopped workspace's agent may so be heard
/// for this long after its stop, into this memory only.
const REPORTER_MS: i64 = 5 * 1000;
/// Checked tokens kept before the stale ones are swept (a sweep per insert
/// would cost a whole map walk per agent every few seconds).
const REPORTERS_BEFORE_SWEEP: usize = 4096;

#[derive(Debug, Clone)]
struct Entry {
    display_name: String,
    value: String,
    error: Option<String>,
    collected_at: i64,
}

/// One monitor's latest reading and where it stands.
#[derive(Debug, Clone, Default)]
struct Gauge {
    used_percent: f64,
    threshold: u64,
    /// Told of its crossing; quiet until it has been below again.
    high: bool,
    below: u32,
}

impl Gauge {
    /// Takes a reading: true when it crosses the threshold (once per
    /// crossing: it must stay below for [`REARM_READINGS`] readings before
    /// another crossing counts).
    fn read(&mut self, used_percent: f64, threshold: u64) -> bool {
        self.used_percent = used_percent;
        self.threshold = threshold;
        if used_percent >= threshold as f64 {
            self.below = 0;
            if !self.high {
                self.high = true;
                return true;
            }
        } else if self.high {
            self.below += 1;
            if self.below >= REARM_READINGS {
                self.high = false;
            }
        }
        false
    }
}

#[derive(Debug, Clone, Default)]
struct AgentLive {
    workspace_id: String,
    workspace: String,
    agent: String,
    heard_at: i64,
    values: BTreeMap<String, Entry>,
    memory: Option<Gauge>,
    volumes: BTreeMap<String, Gauge>,
}

/// A monitor that crossed its threshold with this report: its owner is told.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    /// `memory`, or the volume's path.
    pub monitor: String,
    pub threshold_percent: u64,
    pub used_percent: f64,
}

/// One monitor's latest reading, for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugeReading {
    pub workspace: String,
    pub agent: String,
    /// None: memory; else the volume's path.
    pub path: Option<String>,
    pub used_percent: f64,
}

/// The agents' live values held by this server.
#[derive(Debug, Clone)]
pub struct LiveMetadata {
    agents: Arc<Mutex<HashMap<String, AgentLive>>>,
    /// What each reporting agent declares and its workspace's `owner/name`,
    /// read from the database at most every [`DECLARED_MS`].
    declared: Arc<Mutex<HashMap<String, Declared>>>,
    /// Agents by their token's hash, with when the token was last checked.
    reporters: Arc<Mutex<HashMap<String, (i64, abode_store::Agent)>>>,
    /// When the quiet agents were last forgotten (Unix ms).
    pruned_at: Arc<AtomicI64>,
    /// The workspace id of each change.
    changes: broadcast::Sender<String>,
}

impl Default for LiveMetadata {
    fn default() -> Self {
        LiveMetadata {
            agents: Arc::default(),
            declared: Arc::default(),
            reporters: Arc::default(),
            pruned_at: Arc::default(),
            changes: broadcast::channel(256).0,
        }
    }
}

/// What an agent declares, when it was read, and its workspace's
/// `owner/name`.
type Declared = (i64, Arc<AgentWatch>, String);

/// Who reports.
#[derive(Debug, Clone, Copy)]
pub struct Reporter<'a> {
    pub agent_id: &'a str,
    pub agent: &'a str,
    pub workspace_id: &'a str,
    /// `owner/name`.
    pub workspace: &'a str,
}

impl LiveMetadata {
    /// The agent whose token hashes to `token_hash`, if its token was
    /// checked within [`REPORTER_MS`] of `now_ms`.
    pub fn reporter(&self, token_hash: &str, now_ms: i64) -> Option<abode_store::Agent> {
        let reporters = self
            .reporters
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        reporters
            .get(token_hash)
            .filter(|(checked_at, _)| (0..REPORTER_MS).contains(&(now_ms - checked_at)))
            .map(|(_, agent)| agent.clone())
    }

    /// Keeps `agent`, whose token hashes to `token_hash`, as checked at
    /// `now_ms`; forgets the tokens checked too long ago.
    pub fn remember_reporter(&self, token_hash: &str, agent: abode_store::Agent, now_ms: i64) {
        let mut reporters = self
            .reporters
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if reporters.len() >= REPORTERS_BEFORE_SWEEP {
            reporters
                .retain(|_, (checked_at, _)| (0..REPORTER_MS).contains(&(now_ms - *checked_at)));
        }
        reporters.insert(token_hash.to_string(), (now_ms, agent));
    }

    /// What `agent_id` declares and its workspace, when read within
    /// [`DECLARED_MS`] of `now_ms`.
    pub fn declared(&self, agent_id: &str, now_ms: i64) -> Option<(Arc<AgentWatch>, String)> {
        let declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        declared
            .get(agent_id)
            .filter(|(read_at, _, _)| now_ms - read_at < DECLARED_MS)
            .map(|(_, watch, workspace)| (Arc::clone(watch), workspace.clone()))
    }

    /// Keeps what `agent_id` declares, read at `now_ms`.
    pub fn declare(&self, agent_id: &str, watch: Arc<AgentWatch>, workspace: String, now_ms: i64) {
        let mut declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        declared.retain(|_, (read_at, _, _)| now_ms - *read_at < FORGET_MS);
        declared.insert(agent_id.to_string(), (now_ms, watch, workspace));
    }

    /// Keeps what an agent reports (of the blocks and monitors `watch`
    /// declares; the rest is ignored) at `now_ms`; answers the monitors it
    /// made cross their threshold.
    pub fn report(
        &self,
        who: Reporter<'_>,
        watch: &AgentWatch,
        report: &AgentMetadataReport,
        now_ms: i64,
    ) -> Vec<Crossing> {
        let mut crossings = Vec::new();
        {
            let mut agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
            // The quiet are forgotten, looked for once a minute.
            if now_ms - self.pruned_at.load(Ordering::Relaxed) >= 60_000 {
                self.pruned_at.store(now_ms, Ordering::Relaxed);
                agents.retain(|_, live| now_ms - live.heard_at < FORGET_MS);
            }
            let live = agents.entry(who.agent_id.to_string()).or_default();
            live.workspace_id = who.workspace_id.to_string();
            live.workspace = who.workspace.to_string();
            live.agent = who.agent.to_string();
            live.heard_at = now_ms;
            live.values
                .retain(|key, _| watch.metadata.iter().any(|block| &block.key == key));
            for result in &report.metadata {
                let Some(block) = watch.metadata.iter().find(|block| block.key == result.key)
                else {
                    continue;
                };
                let age = i64::try_from(result.age_ms).unwrap_or(i64::MAX);
                live.values.insert(
                    block.key.clone(),
                    Entry {
                        display_name: block.display_name.clone(),
                        value: cut_value(&result.value),
                        error: result.error.as_deref().map(cut_value),
                        collected_at: now_ms.saturating_sub(age),
                    },
                );
            }
            if watch.memory_threshold_percent.is_none() {
                live.memory = None;
            }
            if let (Some(threshold), Some(used)) =
                (watch.memory_threshold_percent, report.memory_used_percent)
            {
                if live
                    .memory
                    .get_or_insert_with(Gauge::default)
                    .read(used, threshold)
                {
                    crossings.push(Crossing {
                        monitor: "memory".into(),
                        threshold_percent: threshold,
                        used_percent: used,
                    });
                }
            }
            live.volumes
                .retain(|path, _| watch.volumes.iter().any(|volume| &volume.path == path));
            for reading in &report.volumes {
                let Some(volume) = watch
                    .volumes
                    .iter()
                    .find(|volume| volume.path == reading.path)
                else {
                    continue;
                };
                let gauge = live.volumes.entry(volume.path.clone()).or_default();
                if gauge.read(reading.used_percent, volume.threshold_percent) {
                    crossings.push(Crossing {
                        monitor: volume.path.clone(),
                        threshold_percent: volume.threshold_percent,
                        used_percent: reading.used_percent,
                    });
                }
            }
        }
        // No one watching is no error.
        let _ = self.changes.send(who.workspace_id.to_string());
        crossings
    }

    /// The latest values of a workspace's agents (every block its agents
    /// declare in `declared`, by agent name; a block not yet reported
    /// has no value), with their age at `now_ms`.
    pub fn workspace(
        &self,
        workspace_id: &str,
        declared: &[(String, AgentWatch)],
        now_ms: i64,
    ) -> Vec<AgentMetadata> {
        let agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for (agent, watch) in declared {
            let live = agents
                .values()
                .filter(|live| live.workspace_id == workspace_id && &live.agent == agent)
                .max_by_key(|live| live.heard_at);
            for block in &watch.metadata {
                let entry = live.and_then(|live| live.values.get(&block.key));
                out.push(AgentMetadata {
                    agent: agent.clone(),
                    key: block.key.clone(),
                    display_name: entry
                        .map(|entry| entry.display_name.clone())
                        .unwrap_or_else(|| block.display_name.clone()),
                    value: entry.map(|entry| entry.value.clone()).unwrap_or_default(),
                    error: entry.and_then(|entry| entry.error.clone()),
                    collected_at: entry.map(|entry| rfc3339(entry.collected_at)),
                    age_seconds: entry.map(|entry| {
                        u64::try_from((now_ms - entry.collected_at).max(0) / 1000).unwrap_or(0)
                    }),
                });
            }
        }
        out
    }

    /// Each monitor's latest reading, for `/metrics`.
    pub fn gauges(&self) -> Vec<GaugeReading> {
        let agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for live in agents.values() {
            if let Some(memory) = &live.memory {
                out.push(GaugeReading {
                    workspace: live.workspace.clone(),
                    agent: live.agent.clone(),
                    path: None,
                    used_percent: memory.used_percent,
                });
            }
            for (path, gauge) in &live.volumes {
                out.push(GaugeReading {
                    workspace: live.workspace.clone(),
                    agent: live.agent.clone(),
                    path: Some(path.clone()),
                    used_percent: gauge.used_percent,
                });
            }
        }
        out.sort_by(|a, b| {
            (&a.workspace, &a.agent, &a.path).cmp(&(&b.workspace, &b.agent, &b.path))
        });
        out
    }

    /// The workspace id of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }
}

/// Unix ms as `YYYY-MM-DDTHH:MM:SSZ`.
fn rfc3339(ms: i64) -> String {
    abode_control::times::utc_text(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use abode_contract::watch::MetadataDefinition;
    use abode_sdk::requests::{MetadataResult, VolumeReading};

    fn watch() -> AgentWatch {
        AgentWatch {
            metadata: vec![MetadataDefinition {
                key: "cpu".into(),
                display_name: "CPU".into(),
                script: "true".into(),
                interval_seconds: 1,
                timeout_seconds: 1,
            }],
            memory_threshold_percent: Some(50),
            volumes: vec![abode_contract::watch::VolumeMonitor {
                path: "/home".into(),
                threshold_percent: 90,
            }],
        }
    }

    const WHO: Reporter<'static> = Reporter {
        agent_id: "a1",
        agent: "main",
        workspace_id: "w1",
        workspace: "me/ws",
    };

    fn report(value: &str, memory: f64) -> AgentMetadataReport {
        AgentMetadataReport {
            metadata: vec![
                MetadataResult {
                    key: "cpu".into(),
                    value: value.into(),
                    error: None,
                    age_ms: 1000,
                },
                MetadataResult {
                    key: "undeclared".into(),
                    ..Default::default()
                },
            ],
            memory_used_percent: Some(memory),
            volumes: vec![VolumeReading {
                path: "/home".into(),
                used_percent: 10.0,
            }],
        }
    }

    #[test]
    fn the_latest_value_is_kept_and_a_crossing_told_once() {
        let live = LiveMetadata::default();
        let declared = vec![("main".to_string(), watch())];
        assert_eq!(live.workspace("w1", &declared, 0)[0].collected_at, None);
        assert!(live
            .report(WHO, &watch(), &report("1", 10.0), 10_000)
            .is_empty());
        let crossed = live.report(WHO, &watch(), &report("2", 60.0), 11_000);
        assert_eq!(crossed.len(), 1, "{crossed:?}");
        // Still high, then briefly below: no new crossing.
        assert!(live
            .report(WHO, &watch(), &report("3", 70.0), 12_000)
            .is_empty());
        assert!(live
            .report(WHO, &watch(), &report("3", 40.0), 13_000)
            .is_empty());
        assert!(live
            .report(WHO, &watch(), &report("3", 70.0), 14_000)
            .is_empty());
        for at in 15..18 {
            live.report(WHO, &watch(), &report("4", 10.0), at * 1000);
        }
        assert_eq!(
            live.report(WHO, &watch(), &report("5", 90.0), 20_000).len(),
            1
        );
        let shown = live.workspace("w1", &declared, 23_000);
        assert_eq!(shown.len(), 1);
        assert_eq!(
            (shown[0].value.as_str(), shown[0].age_seconds),
            ("5", Some(4))
        );
        assert_eq!(live.gauges().len(), 2);
        // Forgotten once quiet long enough.
        live.report(
            Reporter {
                agent_id: "a2",
                ..WHO
            },
            &watch(),
            &report("x", 1.0),
            20_000 + FORGET_MS,
        );
        assert_eq!(live.gauges().len(), 2);
    }
}
