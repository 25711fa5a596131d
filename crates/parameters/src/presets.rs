//! A template version's presets: reading the `abode_workspace_preset`s of a
//! template-import plan at push (checked against the version's parameters,
//! so a preset can never name a value a build would refuse), reading the
//! stored ones back, and choosing the preset a new workspace is created with.
//!
//! The provider already refuses an invalid preset (bad cron, time zone, ttl)
//! while planning, with its own message; what only the platform can check is
//! here: names unique in the version, parameters declared, values valid.

use std::collections::BTreeMap;

use abode_contract::parameters::{check_parameter_value, shown, ParameterDefinition};
pub use abode_contract::presets::{
    PrebuildSchedule, PrebuildScheduling, PrebuildSettings, PresetDefinition,
};
use abode_store::TemplateVersion;
use serde::Deserialize;
use serde_json::Value;

use crate::plan::{DeclarationError, ImportPlan};

/// Why a preset could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PresetError {
    /// The request does not fit the version's presets (the caller's fault).
    #[error("{0}")]
    Refused(String),
    /// What the version stored cannot be read (the server's fault).
    #[error("{0}")]
    Unreadable(String),
}

const PRESET_TYPE: &str = "abode_workspace_preset";

/// What a deferred `abode_workspace_preset` would have had to know at plan time.
const PRESET_NEEDS: &str =
    "a preset's name, parameters and prebuilds must be known when the template is planned";

/// The most preset names an "unknown preset" message lists.
const LISTED_PRESETS: usize = 10;

/// A nested block as Terraform's JSON gives it: a list of one (or none), or
/// for a single-nested block an object; absent or null is none.
#[derive(Deserialize)]
#[serde(untagged)]
enum Block<T> {
    Many(Vec<T>),
    One(T),
}

impl<T> Block<T> {
    fn first(self) -> Option<T> {
        match self {
            Block::Many(items) => items.into_iter().next(),
            Block::One(item) => Some(item),
        }
    }

    fn all(self) -> Vec<T> {
        match self {
            Block::Many(items) => items,
            Block::One(item) => vec![item],
        }
    }
}

/// The attributes of a read `abode_workspace_preset` (its schema,
/// docs/provider.md).
#[derive(Deserialize)]
struct PresetValues {
    name: String,
    parameters: Option<BTreeMap<String, Option<String>>>,
    prebuilds: Option<Block<PrebuildsValues>>,
}

#[derive(Deserialize)]
struct PrebuildsValues {
    instances: i64,
    expiration_policy: Option<Block<ExpirationValues>>,
    scheduling: Option<Block<SchedulingValues>>,
}

#[derive(Deserialize)]
struct ExpirationValues {
    ttl: Option<i64>,
}

#[derive(Deserialize)]
struct SchedulingValues {
    timezone: String,
    schedule: Option<Block<ScheduleValues>>,
}

#[derive(Deserialize)]
struct ScheduleValues {
    cron: String,
    instances: i64,
}

impl PresetValues {
    fn definition(self, address: &str) -> Result<PresetDefinition, DeclarationError> {
        abode_contract::text::check_name_text("preset", &self.name).map_err(|message| {
            DeclarationError::Invalid {
                address: address.to_string(),
                message,
            }
        })?;
        let mut parameters = BTreeMap::new();
        for (name, value) in self.parameters.unwrap_or_default() {
            let value = value.ok_or_else(|| DeclarationError::Invalid {
                address: address.to_string(),
                message: format!(
                    "preset `{}`: parameter `{}` is null; give it a value or leave it out",
                    shown(&self.name),
                    shown(&name)
                ),
            })?;
            parameters.insert(name, value);
        }
        let prebuilds = self
            .prebuilds
            .and_then(Block::first)
            .map(|prebuilds| PrebuildSettings {
                instances: prebuilds.instances,
                ttl_seconds: prebuilds
                    .expiration_policy
                    .and_then(Block::first)
                    .and_then(|policy| policy.ttl)
                    .unwrap_or(0),
                scheduling: prebuilds
                    .scheduling
                    .and_then(Block::first)
                    .map(|scheduling| PrebuildScheduling {
                        timezone: scheduling.timezone,
                        schedules: scheduling
                            .schedule
                            .map(Block::all)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|schedule| PrebuildSchedule {
                                cron: schedule.cron,
                                instances: schedule.instances,
                            })
                            .collect(),
                    }),
            });
        Ok(PresetDefinition {
            name: self.name,
            parameters,
            prebuilds,
        })
    }
}

/// Every preset a template-import plan declares, in plan order, each checked
/// against the version's `parameters`: a name used twice, a parameter the
/// version does not declare or a value its declaration refuses is an error
/// naming the preset (and the parameter).
pub(crate) fn presets_of(
    plan: &ImportPlan,
    parameters: &[ParameterDefinition],
) -> Result<Vec<PresetDefinition>, DeclarationError> {
    let mut presets: Vec<PresetDefinition> = Vec::new();
    let mut declared_at: BTreeMap<String, String> = BTreeMap::new();
    for resource in plan.data_sources(PRESET_TYPE, PRESET_NEEDS)? {
        let address = resource.address;
        let values: PresetValues = serde_json::from_value(resource.values).map_err(|error| {
            DeclarationError::Unreadable {
                address: address.clone(),
                reason: error.to_string(),
            }
        })?;
        let preset = values.definition(&address)?;
        if let Some(first) = declared_at.get(&preset.name) {
            return Err(DeclarationError::PresetTwice {
                name: shown(&preset.name),
                first: first.clone(),
                second: address,
            });
        }
        check_against(&preset, parameters).map_err(|message| DeclarationError::Invalid {
            address: address.clone(),
            message,
        })?;
        declared_at.insert(preset.name.clone(), address);
        presets.push(preset);
    }
    Ok(presets)
}

/// Whether every value of `preset` is a declared parameter's valid value.
fn check_against(
    preset: &PresetDefinition,
    parameters: &[ParameterDefinition],
) -> Result<(), String> {
    for (name, value) in &preset.parameters {
        let Some(declaration) = parameters.iter().find(|p| &p.name == name) else {
            let declared: Vec<String> = parameters
                .iter()
                .map(|p| format!("`{}`", shown(&p.name)))
                .collect();
            return Err(format!(
                "preset `{}` sets parameter `{}`, which the template does not declare ({})",
                shown(&preset.name),
                shown(name),
                if declared.is_empty() {
                    "it declares none".to_string()
                } else {
                    format!("declared: {}", declared.join(", "))
                }
            ));
        };
        check_parameter_value(declaration, value).map_err(|reason| {
            format!(
                "preset `{}` sets parameter `{}`: {reason}",
                shown(&preset.name),
                shown(name)
            )
        })?;
    }
    Ok(())
}

/// The presets a version keeps; none for a version pushed before presets
/// were read.
pub fn stored_presets(version: &TemplateVersion) -> Result<Vec<PresetDefinition>, PresetError> {
    match version.presets.as_deref() {
        None => Ok(Vec::new()),
        Some(json) => serde_json::from_str(json).map_err(|error| {
            PresetError::Unreadable(format!(
                "the stored presets of version {} of template \"{}\" are unreadable: {error}",
                version.number, version.template_name
            ))
        }),
    }
}

/// The preset named `name` among a version's, or a one-line refusal naming
/// the ones it has.
pub fn named_preset<'a>(
    version: &TemplateVersion,
    presets: &'a [PresetDefinition],
    name: &str,
) -> Result<&'a PresetDefinition, PresetError> {
    if let Some(preset) = presets.iter().find(|preset| preset.name == name) {
        return Ok(preset);
    }
    let mut names: Vec<String> = presets
        .iter()
        .take(LISTED_PRESETS)
        .map(|preset| format!("\"{}\"", shown(&preset.name)))
        .collect();
    if presets.len() > LISTED_PRESETS {
        names.push(format!("and {} more", presets.len() - LISTED_PRESETS));
    }
    Err(PresetError::Refused(format!(
        "template \"{}\" (version {}) has no preset \"{}\"; {}",
        version.template_name,
        version.number,
        shown(name),
        if names.is_empty() {
            "it has no presets".to_string()
        } else {
            format!("its presets: {}", names.join(", "))
        }
    )))
}

/// The request's values with the preset's added: a value given for a
/// parameter the preset sets must be the preset's (in its text form), else
/// the request contradicts the preset.
pub fn with_preset(
    preset: &PresetDefinition,
    given: &BTreeMap<String, Value>,
) -> Result<BTreeMap<String, Value>, PresetError> {
    let mut values = given.clone();
    for (name, value) in &preset.parameters {
        match given.get(name) {
            None => {
                values.insert(name.clone(), Value::String(value.clone()));
            }
            Some(given) => {
                let text = match given {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                if &text != value {
                    return Err(PresetError::Refused(format!(
                        "parameter `{}` is given as `{}`, but preset \"{}\" sets it to `{}`: \
                         leave it out, or create without the preset",
                        shown(name),
                        shown(&text),
                        shown(&preset.name),
                        shown(value)
                    )));
                }
            }
        }
    }
    Ok(values)
}

/// Among `candidates` (each preset with the values it builds alone: its own
/// and the defaults), the one whose values are exactly `values`: the one setting the
/// most parameters, the first declared on a tie.
pub fn matching_preset<'a>(
    candidates: impl IntoIterator<Item = (&'a PresetDefinition, BTreeMap<String, String>)>,
    values: &BTreeMap<String, String>,
) -> Option<&'a PresetDefinition> {
    let mut best: Option<&PresetDefinition> = None;
    for (preset, resolved) in candidates {
        if &resolved != values {
            continue;
        }
        if best.is_none_or(|best| preset.parameters.len() > best.parameters.len()) {
            best = Some(preset);
        }
    }
    best
}

#[allow(clippy::unwrap_used)]
#[cfg(test)]
mod tests {
    use super::*;
    use abode_contract::parameters::ParameterKind;

    const PLAN: &[u8] = include_bytes!("../tests/fixtures/template-import/plan.json");

    fn plan_with(presets: &[(&str, Value)], parameters: &[ParameterDefinition]) -> String {
        let plan: Vec<Value> = presets
            .iter()
            .map(|(address, values)| {
                serde_json::json!({
                    "address": address, "mode": "data", "type": PRESET_TYPE,
                    "name": "p", "values": values,
                })
            })
            .collect();
        let bytes = serde_json::json!({
            "format_version": "1.2",
            "prior_state": {"values": {"root_module": {"resources": plan}}},
        })
        .to_string();
        match presets_of(&ImportPlan::parse(bytes.as_bytes()).unwrap(), parameters) {
            Ok(presets) => serde_json::to_string(&presets).unwrap(),
            Err(error) => error.to_string(),
        }
    }

    fn cpus() -> ParameterDefinition {
        ParameterDefinition {
            name: "cpus".into(),
            kind: ParameterKind::Number,
            default: Some("2".into()),
            min: Some(1),
            max: Some(8),
            ..Default::default()
        }
    }

    #[test]
    fn a_real_import_plan_declares_every_preset() {
        let plan = ImportPlan::parse(PLAN).unwrap();
        let parameters = crate::declarations_from_plan(PLAN).unwrap();
        let presets = presets_of(&plan, &parameters).unwrap();
        // Terraform orders a module's resources by address.
        let expected = vec![
            PresetDefinition {
                name: "office hours".into(),
                parameters: [
                    ("project", "demo"),
                    ("cpus", "4"),
                    ("region", "us"),
                    ("replicas", "1"),
                ]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
                prebuilds: Some(PrebuildSettings {
                    instances: 1,
                    ttl_seconds: 86400,
                    scheduling: Some(PrebuildScheduling {
                        timezone: "Europe/Paris".into(),
                        schedules: vec![
                            PrebuildSchedule {
                                cron: "* 8-18 * * 1-5".into(),
                                instances: 3,
                            },
                            PrebuildSchedule {
                                cron: "* 19-23 * * 1-5".into(),
                                instances: 0,
                            },
                        ],
                    }),
                }),
            },
            PresetDefinition {
                name: "small".into(),
                parameters: [("project", "demo"), ("cpus", "2"), ("replicas", "1")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
                prebuilds: None,
            },
            PresetDefinition {
                name: "module disk".into(),
                parameters: [("disk_size", "20")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
                prebuilds: Some(PrebuildSettings {
                    instances: 2,
                    ttl_seconds: 0,
                    scheduling: None,
                }),
            },
        ];
        assert_eq!(presets, expected);
    }

    #[test]
    fn presets_the_platform_refuses() {
        let small = serde_json::json!({"name": "small", "parameters": {"cpus": "1"}});
        let cases: Vec<(Vec<(&str, Value)>, &str)> = vec![
            (
                vec![("data.abode_workspace_preset.a", small.clone()), ("module.m.data.abode_workspace_preset.b", small.clone())],
                "preset `small` is declared twice (data.abode_workspace_preset.a and module.m.data.abode_workspace_preset.b); preset names must be unique",
            ),
            (
                vec![("data.abode_workspace_preset.a", serde_json::json!({"name": "big", "parameters": {"gpus": "1"}}))],
                "data.abode_workspace_preset.a: preset `big` sets parameter `gpus`, which the template does not declare (declared: `cpus`)",
            ),
            (
                vec![("data.abode_workspace_preset.a", serde_json::json!({"name": "big", "parameters": {"cpus": "12"}}))],
                "data.abode_workspace_preset.a: preset `big` sets parameter `cpus`: ",
            ),
            (
                vec![("data.abode_workspace_preset.a", serde_json::json!({"name": "big", "parameters": {"cpus": null}}))],
                "data.abode_workspace_preset.a: preset `big`: parameter `cpus` is null",
            ),
            (
                vec![("data.abode_workspace_preset.a", serde_json::json!({"parameters": {}}))],
                "data.abode_workspace_preset.a: the declaration cannot be read: missing field `name`",
            ),
        ];
        for (presets, expected) in cases {
            let message = plan_with(&presets, &[cpus()]);
            assert!(message.starts_with(expected), "{message}");
        }
        let deferred = serde_json::json!({
            "format_version": "1.2",
            "resource_changes": [{"address": "data.abode_workspace_preset.late", "mode": "data",
                "type": PRESET_TYPE, "change": {"actions": ["read"]}}],
        })
        .to_string();
        let message = presets_of(&ImportPlan::parse(deferred.as_bytes()).unwrap(), &[])
            .unwrap_err()
            .to_string();
        assert_eq!(message, "data.abode_workspace_preset.late: the declaration depends on values known only after apply; a preset's name, parameters and prebuilds must be known when the template is planned");
    }

    #[test]
    fn blocks_may_be_lists_or_objects() {
        let preset = serde_json::json!({
            "name": "pool", "parameters": null,
            "prebuilds": {"instances": 3, "expiration_policy": [], "scheduling": null},
        });
        assert_eq!(
            plan_with(&[("data.abode_workspace_preset.a", preset)], &[]),
            r#"[{"name":"pool","parameters":{},"prebuilds":{"instances":3,"ttl_seconds":0}}]"#
        );
    }

    fn version(presets: &[PresetDefinition]) -> TemplateVersion {
        TemplateVersion {
            id: "v".into(),
            template_id: "t".into(),
            template_name: "base".into(),
            number: 2,
            active: true,
            message: String::new(),
            created_by: "u".into(),
            archive_sha256: String::new(),
            validation_ok: true,
            validation_message: String::new(),
            parameters: None,
            presets: Some(serde_json::to_string(presets).unwrap()),
            created_at: 0,
        }
    }

    fn preset(name: &str, values: &[(&str, &str)]) -> PresetDefinition {
        PresetDefinition {
            name: name.into(),
            parameters: values
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            prebuilds: None,
        }
    }

    #[test]
    fn choosing_a_preset_by_name() {
        let presets = vec![preset("small", &[("cpus", "1")]), preset("big", &[])];
        let version = version(&presets);
        assert_eq!(stored_presets(&version).unwrap(), presets);
        assert_eq!(named_preset(&version, &presets, "big").unwrap().name, "big");
        let cases: Vec<(&[PresetDefinition], &str)> = vec![
            (&presets, "template \"base\" (version 2) has no preset \"huge\"; its presets: \"small\", \"big\""),
            (&[], "template \"base\" (version 2) has no preset \"huge\"; it has no presets"),
        ];
        for (presets, expected) in cases {
            let message = named_preset(&version, presets, "huge")
                .unwrap_err()
                .to_string();
            assert!(message.ends_with(expected), "{message}");
        }
        let legacy = TemplateVersion {
            presets: None,
            ..version.clone()
        };
        assert_eq!(stored_presets(&legacy).unwrap(), vec![]);
    }

    #[test]
    fn given_values_join_a_preset_s_unless_they_contradict_it() {
        let small = preset("small", &[("cpus", "1"), ("debug", "true")]);
        let given = |pairs: &[(&str, Value)]| -> BTreeMap<String, Value> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        let joined = with_preset(
            &small,
            &given(&[("region", Value::from("us")), ("cpus", Value::from(1))]),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&joined).unwrap(),
            r#"{"cpus":1,"debug":"true","region":"us"}"#
        );
        assert_eq!(
            with_preset(&small, &given(&[("debug", Value::from(true))]))
                .unwrap()
                .len(),
            2
        );
        let message = with_preset(&small, &given(&[("cpus", Value::from("4"))]))
            .unwrap_err()
            .to_string();
        assert!(
            message.ends_with("parameter `cpus` is given as `4`, but preset \"small\" sets it to `1`: leave it out, or create without the preset"),
            "{message}"
        );
    }

    /// A preset and the values a create with it would build.
    type Candidate<'a> = (&'a PresetDefinition, BTreeMap<String, String>);

    #[test]
    fn the_matching_preset_builds_exactly_the_requested_values() {
        let values = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let empty = preset("defaults", &[]);
        let one = preset("one cpu", &[("cpus", "1")]);
        let also_one = preset("also one cpu", &[("cpus", "1")]);
        let both = preset("one cpu in us", &[("cpus", "1"), ("region", "us")]);
        let requested = values(&[("cpus", "1"), ("region", "us")]);
        let cases: Vec<(Vec<Candidate>, Option<&str>)> = vec![
            (vec![], None),
            (
                vec![(&empty, values(&[("cpus", "2"), ("region", "us")]))],
                None,
            ),
            (vec![(&empty, requested.clone())], Some("defaults")),
            (
                vec![
                    (&one, requested.clone()),
                    (&both, requested.clone()),
                    (&empty, requested.clone()),
                ],
                Some("one cpu in us"),
            ),
            (
                vec![(&one, requested.clone()), (&also_one, requested.clone())],
                Some("one cpu"),
            ),
        ];
        for (candidates, expected) in cases {
            assert_eq!(
                matching_preset(candidates, &requested).map(|p| p.name.as_str()),
                expected
            );
        }
    }
}
