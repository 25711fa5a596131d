//! Reading `terraform show -json PLANFILE` output into the little the guard needs.
//!
//! Plans get large (tens of megabytes for big workspaces), so the reader streams
//! (see `scan`): it never holds the whole document, skips `planned_values` and
//! `prior_state` without building them (their brackets and strings are checked,
//! not their contents), and for each resource change keeps only its address,
//! actions, reason and, for destructive changes, the already rendered (and
//! redacted) values of the attributes that force replacement. Clear-text secrets
//! in the plan are dropped while reading, never stored in a [`Plan`].

use crate::format::PlanFormat;
use crate::scan::Scanner;
use crate::value::{self, PathStep};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

/// Why a document could not be read as a plan. Messages are one line and say
/// what the user handed over and what Abode expected instead.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("the plan is empty")]
    Empty,
    #[error("not valid JSON: {0}")]
    NotJson(String),
    #[error("the plan JSON is truncated: {0}")]
    Truncated(String),
    #[error("not a Terraform plan: {0}")]
    NotAPlan(String),
    #[error(
        "this is a Terraform state file, not a plan (make one with `terraform plan -out=tfplan`)"
    )]
    StateFile,
    #[error("this is the JSON of a Terraform state (`terraform show -json` without a plan file), not a plan")]
    StateJson,
    #[error(
        "this is Terraform's machine-readable log (`terraform plan -json`), not a plan \
         (save one with `terraform plan -out=tfplan`, then pass `terraform show -json tfplan`)"
    )]
    UiLog,
    #[error(
        "unsupported plan format_version {0:?}: Abode reads formats 0.1 and 0.2 \
         (Terraform 0.12 to 1.0) and 1.x (Terraform 1.1 and later)"
    )]
    UnsupportedFormat(String),
    #[error("could not read the plan: {0}")]
    Read(#[source] std::io::Error),
}

/// Whether a resource is managed by Terraform or only read (`data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceMode {
    Managed,
    Data,
    /// A mode newer than this reader (Terraform 1.10 added `ephemeral`
    /// resources). Such a plan is still read, and a change in an unknown mode
    /// is judged like a managed one.
    #[serde(other)]
    Other,
}

/// An attribute shown in a report, with values already rendered and redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttributeChange {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// One entry of `resource_changes`.
#[derive(Debug, Clone)]
pub struct ResourceChange {
    pub address: String,
    pub previous_address: Option<String>,
    pub mode: ResourceMode,
    pub resource_type: String,
    pub deposed: Option<String>,
    pub actions: Vec<String>,
    pub action_reason: Option<String>,
    /// The attributes in `replace_paths`, before → after.
    pub replace_paths: Vec<AttributeChange>,
    /// For `abode_protect` instances: the planned `mode` attribute, used when
    /// the configuration sets it from an expression rather than a literal.
    pub planned_protect_mode: Option<String>,
    /// For `abode_protect` instances: the ids its `resource_id` holds, before
    /// and after, for annotations whose reference Abode cannot follow.
    pub protected_ids: Vec<String>,
    /// The `id` of the object this change acts on, read only where the values
    /// are (destructive changes), to match those annotations.
    pub before_id: Option<String>,
}

/// One entry of `resource_drift`: what changed outside Terraform since the last apply.
#[derive(Debug, Clone)]
pub struct Drift {
    pub address: String,
    /// The object no longer exists (someone deleted it outside Terraform).
    pub deleted: bool,
    pub attributes: Vec<AttributeChange>,
}

/// A plan, reduced to what the guard decides on.
#[derive(Debug, Clone)]
pub struct Plan {
    pub format_version: String,
    /// The family of `format_version`: older ones lack some explanations.
    pub format: PlanFormat,
    pub terraform_version: Option<String>,
    pub changes: Vec<ResourceChange>,
    pub drift: Vec<Drift>,
    pub configuration: Option<Configuration>,
    /// Terraform marked the plan as errored (incomplete).
    pub errored: bool,
}

/// The plan's `configuration` section: where template annotations live.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Configuration {
    #[serde(default)]
    pub root_module: ConfigModule,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigModule {
    #[serde(default)]
    pub resources: Vec<ConfigResource>,
    #[serde(default)]
    pub module_calls: BTreeMap<String, ModuleCall>,
    #[serde(default)]
    pub outputs: BTreeMap<String, ConfigOutput>,
    #[serde(default)]
    pub variables: BTreeMap<String, ConfigVariable>,
}

/// A variable declaration; only whether it is sensitive matters here.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigVariable {
    #[serde(default)]
    pub sensitive: bool,
}

/// A root variable's value as the plan carries it (in clear, even when sensitive).
#[derive(Deserialize)]
struct PlanVariable {
    #[serde(default)]
    value: Value,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ModuleCall {
    #[serde(default)]
    pub module: ConfigModule,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigOutput {
    #[serde(default)]
    pub expression: Option<Expression>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConfigResource {
    pub address: String,
    #[serde(default = "managed")]
    pub mode: ResourceMode,
    #[serde(rename = "type")]
    pub resource_type: String,
    #[serde(default)]
    pub name: String,
    /// Block-typed arguments appear as arrays of objects, so values stay loose.
    #[serde(default)]
    pub expressions: BTreeMap<String, Value>,
    #[serde(default)]
    pub count_expression: Option<Expression>,
    #[serde(default)]
    pub for_each_expression: Option<Expression>,
}

fn managed() -> ResourceMode {
    ResourceMode::Managed
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Expression {
    #[serde(default)]
    pub references: Vec<String>,
    #[serde(default)]
    pub constant_value: Option<Value>,
}

impl Expression {
    /// Reads an entry of a resource's `expressions` map as a plain expression.
    pub fn from_value(value: &Value) -> Option<Expression> {
        Expression::deserialize(value).ok()
    }
}

/// Reads a plan from any reader (a file, standard input), streaming: memory
/// stays at one resource change plus one read chunk, whatever the plan's size.
pub fn read_plan(reader: impl Read) -> Result<Plan, PlanError> {
    let mut scanner = Scanner::new(reader);
    let raw = read_top_level(&mut scanner)?;
    if raw.ui_log {
        // One JSON object per line: the rest would only be "trailing characters".
        return Err(PlanError::UiLog);
    }
    if scanner.peek_non_ws()?.is_some() {
        return Err(PlanError::NotJson(format!(
            "trailing characters after the plan object {}",
            scanner_position(&scanner)
        )));
    }
    raw.into_plan()
}

/// Reads a plan already in memory (the same reader, over the bytes).
pub fn read_plan_slice(bytes: &[u8]) -> Result<Plan, PlanError> {
    read_plan(bytes)
}

fn scanner_position<R: Read>(scanner: &Scanner<R>) -> String {
    let start = scanner.start();
    format!("at line {} column {}", start.line(), start.column())
}

const NOT_AN_OBJECT: &str =
    "expected a JSON object (the output of `terraform show -json PLANFILE`)";

fn read_top_level<R: Read>(scanner: &mut Scanner<R>) -> Result<RawPlan, PlanError> {
    let not_an_object = |kind: &str, scanner: &Scanner<R>| {
        PlanError::NotAPlan(format!(
            "invalid type: {kind}, {NOT_AN_OBJECT} {}",
            scanner_position(scanner)
        ))
    };
    match scanner.peek_non_ws()? {
        None => return Err(PlanError::Empty),
        Some(b'{') => {}
        Some(b'[') => return Err(not_an_object("sequence", scanner)),
        Some(b'"') => return Err(not_an_object("string", scanner)),
        Some(b'n') => return Err(not_an_object("null", scanner)),
        Some(b't' | b'f') => return Err(not_an_object("boolean", scanner)),
        Some(b'-' | b'0'..=b'9') => return Err(not_an_object("number", scanner)),
        Some(_) => {
            return Err(PlanError::NotJson(format!(
                "expected value {}",
                scanner_position(scanner)
            )))
        }
    }
    scanner.expect(b'{', "`{`")?;
    let mut raw = RawPlan::default();
    let mut scratch = Vec::new();
    if scanner.accept(b'}')? {
        return Ok(raw);
    }
    loop {
        if scanner.peek_non_ws()? != Some(b'"') {
            return Err(match scanner.peek_non_ws()? {
                None => scanner.eof(),
                Some(_) => PlanError::NotJson(format!(
                    "key must be a string {}",
                    scanner_position(scanner)
                )),
            });
        }
        let key: String = scanner.parse(&mut scratch)?;
        scanner.expect(b':', "`:`")?;
        match key.as_str() {
            "format_version" => raw.format_version = scanner.parse(&mut scratch)?,
            "terraform_version" => raw.terraform_version = scanner.parse(&mut scratch)?,
            "errored" => raw.errored = scanner.parse(&mut scratch)?,
            "configuration" => raw.configuration = scanner.parse(&mut scratch)?,
            "variables" => {
                let variables: Option<BTreeMap<String, PlanVariable>> =
                    scanner.parse(&mut scratch)?;
                raw.variables = variables.unwrap_or_default();
            }
            "resource_changes" => raw.resource_changes = read_list(scanner, &mut scratch)?,
            "resource_drift" => {
                let drift: Vec<DriftEntry> = read_list(scanner, &mut scratch)?;
                raw.resource_drift = drift.into_iter().map(|d| d.0).collect();
            }
            other => {
                match other {
                    "planned_values" => raw.planned_values = true,
                    "@level" => raw.ui_log = true,
                    "lineage" | "serial" => raw.state_file = true,
                    "values" => raw.values = true,
                    _ => {}
                }
                scanner.value(None)?;
            }
        }
        if scanner.accept(b',')? {
            continue;
        }
        scanner.expect(b'}', "`,` or `}`")?;
        return Ok(raw);
    }
}

/// Reads a JSON array (or `null`) element by element.
fn read_list<R: Read, T: serde::de::DeserializeOwned>(
    scanner: &mut Scanner<R>,
    scratch: &mut Vec<u8>,
) -> Result<Vec<T>, PlanError> {
    match scanner.peek_non_ws()? {
        Some(b'[') => {}
        Some(b'n') => {
            let _: Option<IgnoredAny> = scanner.parse(scratch)?;
            return Ok(Vec::new());
        }
        Some(_) => {
            let position = scanner_position(scanner);
            let found: Value = scanner.parse(scratch)?;
            let kind = match found {
                Value::Object(_) => "map".to_string(),
                Value::String(s) => format!("string {s:?}"),
                other => other.to_string(),
            };
            return Err(PlanError::NotAPlan(format!(
                "invalid type: {kind}, expected a sequence {position}"
            )));
        }
        None => return Err(scanner.eof()),
    }
    scanner.expect(b'[', "`[`")?;
    let mut items = Vec::new();
    if scanner.accept(b']')? {
        return Ok(items);
    }
    loop {
        items.push(scanner.parse(scratch)?);
        if scanner.accept(b',')? {
            continue;
        }
        scanner.expect(b']', "`,` or `]`")?;
        return Ok(items);
    }
}

#[derive(Default)]
struct RawPlan {
    format_version: Option<String>,
    variables: BTreeMap<String, PlanVariable>,
    terraform_version: Option<String>,
    resource_changes: Vec<ResourceChange>,
    resource_drift: Vec<Drift>,
    configuration: Option<Configuration>,
    planned_values: bool,
    errored: Option<bool>,
    // Markers of the documents people hand over by mistake.
    ui_log: bool,
    state_file: bool,
    values: bool,
}

impl RawPlan {
    fn into_plan(self) -> Result<Plan, PlanError> {
        if self.state_file {
            return Err(PlanError::StateFile);
        }
        let Some(format_version) = self.format_version else {
            return Err(PlanError::NotAPlan("it has no `format_version`".into()));
        };
        let Some(format) = PlanFormat::parse(&format_version) else {
            return Err(PlanError::UnsupportedFormat(format_version));
        };
        if !self.planned_values && self.resource_changes.is_empty() {
            return Err(if self.values {
                PlanError::StateJson
            } else {
                PlanError::NotAPlan("it has neither `planned_values` nor `resource_changes`".into())
            });
        }
        let mut changes = self.resource_changes;
        let mut drift = self.resource_drift;
        let secrets = sensitive_variable_values(&self.variables, self.configuration.as_ref());
        if !secrets.is_empty() {
            let attributes = changes
                .iter_mut()
                .flat_map(|c| c.replace_paths.iter_mut())
                .chain(drift.iter_mut().flat_map(|d| d.attributes.iter_mut()));
            for attribute in attributes {
                for text in [&mut attribute.before, &mut attribute.after] {
                    if value::reveals(text, &secrets) {
                        *text = value::SENSITIVE.to_string();
                    }
                }
            }
        }
        Ok(Plan {
            format_version,
            format,
            terraform_version: self.terraform_version,
            changes,
            drift,
            configuration: self.configuration,
            errored: self.errored.unwrap_or(false),
        })
    }
}

/// The values of the root module's sensitive variables. Terraform marks a
/// sensitive variable's value where the template uses it directly, but a
/// provider may copy it into another resource's attribute with no mark at all;
/// any rendered value that contains one of these is hidden after reading.
fn sensitive_variable_values(
    variables: &BTreeMap<String, PlanVariable>,
    configuration: Option<&Configuration>,
) -> Vec<String> {
    let mut secrets = Vec::new();
    let Some(configuration) = configuration else {
        return secrets;
    };
    for (name, declaration) in &configuration.root_module.variables {
        if let (true, Some(variable)) = (declaration.sensitive, variables.get(name)) {
            value::collect_secrets(&variable.value, &Value::Bool(true), &mut secrets);
        }
    }
    secrets
}

struct DriftEntry(Drift);

impl<'de> Deserialize<'de> for ResourceChange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entry = d.deserialize_map(EntryVisitor { drift: false })?;
        Ok(ResourceChange {
            address: entry.address,
            previous_address: entry.previous_address,
            mode: entry.mode,
            resource_type: entry.resource_type,
            deposed: entry.deposed,
            actions: entry.change.actions,
            action_reason: entry.action_reason,
            replace_paths: entry.change.replace_paths,
            planned_protect_mode: entry.change.protect_mode,
            protected_ids: entry.change.protected_ids,
            before_id: entry.change.before_id,
        })
    }
}

impl<'de> Deserialize<'de> for DriftEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entry = d.deserialize_map(EntryVisitor { drift: true })?;
        let deleted = entry.change.actions.iter().any(|a| a == "delete");
        Ok(DriftEntry(Drift {
            address: entry.address,
            deleted,
            attributes: entry.change.drift_attributes,
        }))
    }
}

struct RawEntry {
    address: String,
    previous_address: Option<String>,
    mode: ResourceMode,
    resource_type: String,
    deposed: Option<String>,
    action_reason: Option<String>,
    change: ParsedChange,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum EntryField {
    Address,
    PreviousAddress,
    Mode,
    Type,
    Deposed,
    ActionReason,
    Change,
    #[serde(other)]
    Other,
}

struct EntryVisitor {
    drift: bool,
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = RawEntry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a resource change object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntry, A::Error> {
        let mut address = None;
        let mut previous_address = None;
        let mut mode = None;
        let mut resource_type: Option<String> = None;
        let mut deposed = None;
        let mut action_reason = None;
        let mut change = None;
        while let Some(field) = map.next_key::<EntryField>()? {
            match field {
                EntryField::Address => address = Some(map.next_value::<String>()?),
                EntryField::PreviousAddress => previous_address = map.next_value()?,
                EntryField::Mode => mode = Some(map.next_value::<ResourceMode>()?),
                EntryField::Type => resource_type = Some(map.next_value()?),
                EntryField::Deposed => deposed = map.next_value()?,
                EntryField::ActionReason => action_reason = map.next_value()?,
                EntryField::Change => {
                    let keep_protect_mode = resource_type
                        .as_deref()
                        .is_none_or(|t| t == crate::rules::PROTECT_TYPE);
                    change = Some(map.next_value_seed(ChangeSeed {
                        drift: self.drift,
                        keep_protect_mode,
                    })?)
                }
                EntryField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let address = address.ok_or_else(|| de::Error::missing_field("address"))?;
        let resource_type = resource_type.ok_or_else(|| de::Error::missing_field("type"))?;
        let mut change = change.ok_or_else(|| de::Error::missing_field("change"))?;
        if resource_type != crate::rules::PROTECT_TYPE {
            change.protect_mode = None;
            change.protected_ids = Vec::new();
        }
        Ok(RawEntry {
            address,
            previous_address,
            mode: mode.unwrap_or(ResourceMode::Managed),
            resource_type,
            deposed,
            action_reason,
            change,
        })
    }
}

#[derive(Default)]
struct ParsedChange {
    actions: Vec<String>,
    replace_paths: Vec<AttributeChange>,
    protect_mode: Option<String>,
    protected_ids: Vec<String>,
    before_id: Option<String>,
    drift_attributes: Vec<AttributeChange>,
}

struct ChangeSeed {
    drift: bool,
    keep_protect_mode: bool,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChangeField {
    Actions,
    Before,
    After,
    AfterUnknown,
    BeforeSensitive,
    AfterSensitive,
    ReplacePaths,
    #[serde(other)]
    Other,
}

impl<'de> DeserializeSeed<'de> for ChangeSeed {
    type Value = ParsedChange;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ParsedChange, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChangeSeed {
    type Value = ParsedChange;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a change object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParsedChange, A::Error> {
        let mut actions: Option<Vec<String>> = None;
        let mut before = None;
        let mut after = None;
        let mut after_unknown = None;
        let mut before_sensitive = None;
        let mut after_sensitive = None;
        let mut replace_paths: Option<Vec<Vec<PathStep>>> = None;
        // Values are built only where a report may show them; Terraform writes
        // `actions` first, so most changes skip their values entirely.
        let wants_values = |actions: &Option<Vec<String>>| {
            self.drift
                || self.keep_protect_mode
                || actions
                    .as_ref()
                    .is_none_or(|a| a.iter().any(|a| a == "delete"))
        };
        while let Some(field) = map.next_key::<ChangeField>()? {
            let slot = match field {
                ChangeField::Actions => {
                    actions = Some(map.next_value()?);
                    continue;
                }
                ChangeField::ReplacePaths => {
                    replace_paths = map.next_value()?;
                    continue;
                }
                ChangeField::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                ChangeField::Before => &mut before,
                ChangeField::After => &mut after,
                ChangeField::AfterUnknown => &mut after_unknown,
                ChangeField::BeforeSensitive => &mut before_sensitive,
                ChangeField::AfterSensitive => &mut after_sensitive,
            };
            if wants_values(&actions) {
                *slot = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        let actions = actions.ok_or_else(|| de::Error::missing_field("actions"))?;
        let no_mask = Value::Bool(false);
        let before = before.unwrap_or(Value::Null);
        let after = after.unwrap_or(Value::Null);
        // Terraform 1.x writes both marks on every change. A change with neither
        // (format 0.1 of Terraform 0.12/0.13 marks nothing) does not say which
        // values are secret, so none of its values is shown.
        let marked = before_sensitive.is_some() || after_sensitive.is_some();
        let before_sensitive = before_sensitive.unwrap_or(Value::Bool(!marked));
        let after_sensitive = after_sensitive.unwrap_or(Value::Bool(!marked));
        let after_unknown = after_unknown.unwrap_or(Value::Bool(false));

        let sensitive = value::union_masks(&before_sensitive, &after_sensitive);
        let mut secrets = Vec::new();
        value::collect_secrets(&before, &sensitive, &mut secrets);
        value::collect_secrets(&after, &sensitive, &mut secrets);

        let mut parsed = ParsedChange {
            actions,
            ..ParsedChange::default()
        };
        for path in replace_paths.unwrap_or_default() {
            parsed.replace_paths.push(AttributeChange {
                path: value::path_to_string_masked(&path, &sensitive),
                before: value::render(
                    value::value_at(&before, &path),
                    value::mask_at(&sensitive, &path),
                    &no_mask,
                    &secrets,
                ),
                after: value::render(
                    value::value_at(&after, &path),
                    value::mask_at(&sensitive, &path),
                    value::mask_at(&after_unknown, &path),
                    &secrets,
                ),
            });
        }
        parsed.before_id = before.get("id").and_then(Value::as_str).map(str::to_string);
        if self.keep_protect_mode {
            for side in [&before, &after] {
                if let Some(id) = side.get("resource_id").and_then(Value::as_str) {
                    if !parsed.protected_ids.iter().any(|known| known == id) {
                        parsed.protected_ids.push(id.to_string());
                    }
                }
            }
            let path = [PathStep::Key("mode".into())];
            if value::mask_at(&after_sensitive, &path) != &Value::Bool(true) {
                parsed.protect_mode = value::value_at(&after, &path)
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
        }
        if self.drift {
            parsed.drift_attributes =
                diff_attributes(&before, &after, &sensitive, &after_unknown, &secrets);
        }
        Ok(parsed)
    }
}

/// The top-level attributes whose values differ between `before` and `after`;
/// `sensitive` covers both sides.
fn diff_attributes(
    before: &Value,
    after: &Value,
    sensitive: &Value,
    after_unknown: &Value,
    secrets: &[String],
) -> Vec<AttributeChange> {
    let empty = serde_json::Map::new();
    let before_map = before.as_object().unwrap_or(&empty);
    let after_map = after.as_object().unwrap_or(&empty);
    if after.is_null() {
        // Deleted outside Terraform: every attribute is "gone", which says nothing new.
        return Vec::new();
    }
    let mut keys: Vec<&String> = before_map.keys().chain(after_map.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before_map.get(*k) != after_map.get(*k))
        .map(|k| {
            let path = [PathStep::Key(k.clone())];
            AttributeChange {
                path: k.clone(),
                before: value::render(
                    before_map.get(k),
                    value::mask_at(sensitive, &path),
                    &Value::Bool(false),
                    secrets,
                ),
                after: value::render(
                    after_map.get(k),
                    value::mask_at(sensitive, &path),
                    value::mask_at(after_unknown, &path),
                    secrets,
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_modes_newer_than_the_reader_are_read() {
        let plan = read_plan_slice(
            br#"{"format_version":"1.2","planned_values":{},
                "resource_changes":[{"address":"x.y","mode":"future","type":"x","name":"y",
                                     "change":{"actions":["delete"]}}],
                "configuration":{"root_module":{"resources":[
                    {"address":"ephemeral.x.t","mode":"ephemeral","type":"x","name":"t"}]}}}"#,
        );
        let plan = plan.map_err(|e| e.to_string());
        let modes = plan.map(|p| {
            (
                p.changes[0].mode,
                p.configuration.map(|c| c.root_module.resources[0].mode),
            )
        });
        assert_eq!(modes, Ok((ResourceMode::Other, Some(ResourceMode::Other))));
    }

    #[test]
    fn values_of_a_change_without_sensitivity_marks_are_hidden() {
        // Format 0.1 from Terraform 0.12/0.13 marks nothing, so nothing is known safe.
        let plan = read_plan_slice(
            br#"{"format_version":"0.1","planned_values":{},
                "resource_changes":[{"address":"x.y","type":"x","name":"y",
                    "change":{"actions":["delete","create"],"replace_paths":[["password"]],
                              "before":{"password":"hunter1"},"after":{"password":"hunter2"}}}]}"#,
        );
        let paths = plan.map(|p| p.changes[0].replace_paths.clone());
        let paths = paths.map_err(|e| e.to_string());
        assert_eq!(
            paths,
            Ok(vec![AttributeChange {
                path: "password".into(),
                before: value::SENSITIVE.into(),
                after: value::SENSITIVE.into(),
            }])
        );
    }
}
