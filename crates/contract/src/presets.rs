//! Preset declarations, as the platform keeps them.
//!
//! A template declares presets with the `abode_workspace_preset` data source:
//! a named set of parameter values, and optionally a pool of prebuilt
//! workspaces of it. The provider validates a declaration at plan time; the
//! platform reads the declarations out of the template-import plan at push and
//! stores them with the version as JSON (the serde form of
//! [`PresetDefinition`]), so they live here, beside the parameters, in the
//! contract both sides share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A preset, free of Terraform's null/unknown wrappers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresetDefinition {
    pub name: String,
    /// Parameter values by parameter name, in `ABODE_PARAMETERS`' spelling.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// The pool of prebuilt workspaces, if the preset asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prebuilds: Option<PrebuildSettings>,
}

/// How many prebuilt workspaces of a preset to keep, when, and for how long.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrebuildSettings {
    /// Instances to keep when no schedule matches the hour.
    pub instances: i64,
    /// Seconds an unclaimed prebuilt workspace lives; 0: forever.
    #[serde(default)]
    pub ttl_seconds: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<PrebuildScheduling>,
}

/// Hours of the week with another number of instances, in a time zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrebuildScheduling {
    /// An IANA time zone name, e.g. `Europe/Paris`.
    pub timezone: String,
    #[serde(default)]
    pub schedules: Vec<PrebuildSchedule>,
}

/// During the hours `cron` matches (five fields, minute `*`), keep `instances`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrebuildSchedule {
    pub cron: String,
    pub instances: i64,
}
