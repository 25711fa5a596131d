//! What an agent watches while it runs (issue 48, items 3 and 5): its live
//! `metadata` blocks (a script run every `interval` seconds, its latest
//! output shown with the workspace) and its `resources_monitoring` (memory
//! and volumes checked against a threshold in percent). Read from the
//! `abode_agent`'s state, kept with the agent as JSON, handed to the agent.

use serde::{Deserialize, Serialize};

/// Seconds between two checks of the resource monitors.
pub const MONITOR_INTERVAL_SECONDS: u64 = 10;
/// The most of a value or error kept and shown, in bytes.
pub const MAX_VALUE_BYTES: usize = 1024;

/// One `metadata` block of an `abode_agent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataDefinition {
    pub key: String,
    pub display_name: String,
    pub script: String,
    pub interval_seconds: u64,
    pub timeout_seconds: u64,
}

/// A volume's monitor: the threshold, in percent used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMonitor {
    pub path: String,
    pub threshold_percent: u64,
}

/// An agent's `metadata` blocks and `resources_monitoring`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentWatch {
    #[serde(default)]
    pub metadata: Vec<MetadataDefinition>,
    /// The memory threshold in percent, when its monitor is enabled.
    #[serde(default)]
    pub memory_threshold_percent: Option<u64>,
    #[serde(default)]
    pub volumes: Vec<VolumeMonitor>,
}

impl AgentWatch {
    pub fn is_empty(&self) -> bool {
        self.metadata.is_empty()
            && self.memory_threshold_percent.is_none()
            && self.volumes.is_empty()
    }

    /// What an `abode_agent`'s state attributes say (checked at plan time
    /// by the provider; what is out of range here is left out).
    pub fn from_attributes(attributes: &serde_json::Value) -> AgentWatch {
        let list = |value: Option<&serde_json::Value>| -> Vec<serde_json::Value> {
            value
                .and_then(serde_json::Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let text = |value: &serde_json::Value, name: &str| {
            value
                .get(name)
                .and_then(serde_json::Value::as_str)
                .map(String::from)
        };
        let number = |value: &serde_json::Value, name: &str| {
            value.get(name).and_then(serde_json::Value::as_u64)
        };
        let metadata = list(attributes.get("metadata"))
            .iter()
            .filter_map(|block| {
                let key = text(block, "key")?;
                Some(MetadataDefinition {
                    display_name: text(block, "display_name")
                        .filter(|name| !name.is_empty())
                        .unwrap_or_else(|| key.clone()),
                    key,
                    script: text(block, "script")?,
                    interval_seconds: number(block, "interval")?.max(1),
                    timeout_seconds: number(block, "timeout")
                        .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
                        .max(1),
                })
            })
            .collect();
        let monitoring = list(attributes.get("resources_monitoring"));
        let monitoring = monitoring.first();
        let memory_threshold_percent = monitoring
            .map(|m| list(m.get("memory")))
            .unwrap_or_default()
            .first()
            .filter(|memory| {
                memory.get("enabled").and_then(serde_json::Value::as_bool) != Some(false)
            })
            .and_then(|memory| number(memory, "threshold"))
            .filter(|percent| (1..=100).contains(percent));
        let volumes = monitoring
            .map(|m| list(m.get("volume")))
            .unwrap_or_default()
            .iter()
            .filter_map(|volume| {
                Some(VolumeMonitor {
                    path: text(volume, "path")?,
                    threshold_percent: number(volume, "threshold")
                        .filter(|percent| (1..=100).contains(percent))?,
                })
            })
            .collect();
        AgentWatch {
            metadata,
            memory_threshold_percent,
            volumes,
        }
    }
}

/// A metadata block's timeout when the template does not say.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 5;

/// Cuts a value or error to [`MAX_VALUE_BYTES`] at a character boundary,
/// without its trailing newlines.
pub fn cut_value(text: &str) -> String {
    let text = text.trim_end_matches(['\n', '\r']);
    let mut end = text.len().min(MAX_VALUE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn watch_is_read_from_the_agent_state() {
        let attributes = serde_json::json!({
            "metadata": [
                {"key": "cpu", "display_name": "CPU", "script": "echo 1", "interval": 10, "timeout": 2},
                {"key": "disk", "display_name": "", "script": "echo 2", "interval": 0, "timeout": null}
            ],
            "resources_monitoring": [{
                "memory": [{"threshold": 80, "enabled": true}],
                "volume": [{"path": "/home", "threshold": 90}, {"path": "/x", "threshold": 0}]
            }]
        });
        let watch = AgentWatch::from_attributes(&attributes);
        assert_eq!(watch.metadata.len(), 2);
        assert_eq!(watch.metadata[1].display_name, "disk");
        assert_eq!(watch.metadata[1].interval_seconds, 1);
        assert_eq!(watch.metadata[1].timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
        assert_eq!(watch.memory_threshold_percent, Some(80));
        assert_eq!(watch.volumes.len(), 1);
        assert!(AgentWatch::from_attributes(&serde_json::json!({})).is_empty());
        assert_eq!(cut_value("héllo\n"), "héllo");
    }
}
