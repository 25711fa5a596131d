//! Reading `terraform show -json PLANFILE` output into the little the guard needs.
//!
//! Plans get large (tens of megabytes for big workspaces), so the reader streams
//! (see `scan`): it never holds the whole document, skips `planned_values` and
//! `prior_state` without building them (their brackets and strings are checked,
//! not their contents), and for each resource change keeps only its address,
//! actions, reason and, for destructive changes, the rendered values of the
//! attributes that force replacement. Which root variables are sensitive is
//! known only at the end (Terraform writes `configuration` last), so each
//! rendered string remembers which variables' values it contains and is hidden,
//! or not, once the plan has been read. Clear-text secrets in the plan are
//! dropped while reading, never stored in a [`Plan`].

use crate::annotation::PROTECT_TYPE;
use crate::error::PlanError;
use crate::format::PlanFormat;
use crate::scan::Scanner;
use crate::value::{self, PathStep, Rendered, SecretSet, Secrets, SensitiveVariables};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::marker::PhantomData;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
                // Any of them may be declared sensitive in `configuration`,
                // which comes later: keep every value to compare with. A
                // second `variables` adds to the first, so the indexes that
                // rendered values hold keep their meaning.
                raw.values_before_variables |= raw.values_read;
                for (name, variable) in variables.unwrap_or_default() {
                    let mut values = Vec::new();
                    value::collect_secrets(&variable.value, &Value::Bool(true), &mut values);
                    raw.variable_names.push(name);
                    raw.variable_values.push(values);
                }
                raw.variable_secrets = SecretSet::new(&raw.variable_values);
                raw.variables_read = true;
            }
            "resource_changes" => {
                raw.values_before_variables |= !raw.variables_read;
                raw.values_read = true;
                let seed = EntrySeed {
                    drift: false,
                    variables: &raw.variable_secrets,
                };
                raw.resource_changes = read_list(scanner, &mut scratch, seed)?;
            }
            "resource_drift" => {
                raw.values_before_variables |= !raw.variables_read;
                raw.values_read = true;
                let seed = EntrySeed {
                    drift: true,
                    variables: &raw.variable_secrets,
                };
                raw.resource_drift = read_list(scanner, &mut scratch, seed)?;
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

/// Reads a JSON array (or `null`) element by element, each with `seed`.
fn read_list<R: Read, T, S>(
    scanner: &mut Scanner<R>,
    scratch: &mut Vec<u8>,
    seed: S,
) -> Result<Vec<T>, PlanError>
where
    S: for<'de> DeserializeSeed<'de, Value = T> + Clone,
{
    match scanner.peek_non_ws()? {
        Some(b'[') => {}
        Some(b'n') => {
            let _: Option<IgnoredAny> = scanner.parse_seed(scratch, PhantomData)?;
            return Ok(Vec::new());
        }
        Some(_) => {
            let position = scanner_position(scanner);
            let found: Value = scanner.parse_seed(scratch, PhantomData)?;
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
        items.push(scanner.parse_seed(scratch, seed.clone())?);
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
    /// The root variables' names, and the values each holds (see `value::collect_secrets`).
    variable_names: Vec<String>,
    variable_values: Vec<Vec<String>>,
    /// `variable_values` compiled for comparing (owner `i` is variable `i`).
    variable_secrets: SecretSet,
    variables_read: bool,
    values_read: bool,
    /// Changes came before (some of) `variables` (Terraform writes them
    /// after), so their values were not compared with every variable's value.
    values_before_variables: bool,
    terraform_version: Option<String>,
    resource_changes: Vec<RawEntry>,
    resource_drift: Vec<RawEntry>,
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
        let variables = SensitiveVariables {
            sensitive: sensitive_variables(&self.variable_names, self.configuration.as_ref()),
            hide_every_value: self.values_before_variables,
        };
        let changes = self
            .resource_changes
            .into_iter()
            .map(|entry| entry.into_change(&variables))
            .collect();
        let drift = self
            .resource_drift
            .into_iter()
            .map(|entry| entry.into_drift(&variables))
            .collect();
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

/// Which root variables are sensitive, in the order of `names`. Terraform
/// marks a sensitive variable's value where the template uses it directly, but
/// a provider (or `nonsensitive()`) may copy it into another attribute with no
/// mark at all; every piece of a rendered value that reveals one is hidden.
fn sensitive_variables(names: &[String], configuration: Option<&Configuration>) -> Vec<bool> {
    let declared = configuration.map(|c| &c.root_module.variables);
    names
        .iter()
        .map(|name| {
            declared
                .and_then(|d| d.get(name))
                .is_some_and(|declaration| declaration.sensitive)
        })
        .collect()
}

/// An attribute whose pieces are rendered but not yet hidden (see [`Rendered`]).
struct PendingAttribute {
    path: Rendered,
    before: Rendered,
    after: Rendered,
}

impl PendingAttribute {
    fn finish(&self, variables: &SensitiveVariables) -> AttributeChange {
        AttributeChange {
            path: self.path.finish(variables, false),
            before: self.before.finish(variables, true),
            after: self.after.finish(variables, true),
        }
    }
}

fn finish_all(
    attributes: &[PendingAttribute],
    variables: &SensitiveVariables,
) -> Vec<AttributeChange> {
    attributes.iter().map(|a| a.finish(variables)).collect()
}

impl RawEntry {
    fn into_change(self, variables: &SensitiveVariables) -> ResourceChange {
        ResourceChange {
            replace_paths: finish_all(&self.change.replace_paths, variables),
            address: self.address,
            previous_address: self.previous_address,
            mode: self.mode,
            resource_type: self.resource_type,
            deposed: self.deposed,
            actions: self.change.actions,
            action_reason: self.action_reason,
            planned_protect_mode: self.change.protect_mode,
            protected_ids: self.change.protected_ids,
            before_id: self.change.before_id,
        }
    }

    fn into_drift(self, variables: &SensitiveVariables) -> Drift {
        Drift {
            deleted: self.change.actions.iter().any(|a| a == "delete"),
            attributes: finish_all(&self.change.drift_attributes, variables),
            address: self.address,
        }
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

/// Reads one entry of `resource_changes` or `resource_drift`, comparing its
/// values with the root variables' values as they are rendered.
#[derive(Clone, Copy)]
struct EntrySeed<'a> {
    drift: bool,
    variables: &'a SecretSet,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = RawEntry;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawEntry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
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
                    let keep_protect_mode =
                        resource_type.as_deref().is_none_or(|t| t == PROTECT_TYPE);
                    change = Some(map.next_value_seed(ChangeSeed {
                        drift: self.drift,
                        keep_protect_mode,
                        variables: self.variables,
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
        if resource_type != PROTECT_TYPE {
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
    replace_paths: Vec<PendingAttribute>,
    protect_mode: Option<String>,
    protected_ids: Vec<String>,
    before_id: Option<String>,
    drift_attributes: Vec<PendingAttribute>,
}

struct ChangeSeed<'a> {
    drift: bool,
    keep_protect_mode: bool,
    variables: &'a SecretSet,
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

impl<'de> DeserializeSeed<'de> for ChangeSeed<'_> {
    type Value = ParsedChange;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ParsedChange, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChangeSeed<'_> {
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
        let mut marked = Vec::new();
        value::collect_secrets(&before, &sensitive, &mut marked);
        value::collect_secrets(&after, &sensitive, &mut marked);
        let marked = SecretSet::marked(marked);
        let secrets = Secrets {
            marked: &marked,
            variables: self.variables,
        };

        let mut parsed = ParsedChange {
            actions,
            ..ParsedChange::default()
        };
        for path in replace_paths.unwrap_or_default() {
            parsed.replace_paths.push(PendingAttribute {
                path: value::render_path(&path, &sensitive, &secrets),
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
    secrets: &Secrets,
) -> Vec<PendingAttribute> {
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
            PendingAttribute {
                path: value::render_path(&path, sensitive, secrets),
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

    /// A replace of `x.home` whose `tags` map holds `secret` as a key and, in
    /// a longer string, as a value; `variables` is written before or after
    /// the changes.
    fn tagged_plan(secret: &str, variables_first: bool) -> Vec<u8> {
        let variables = serde_json::json!({"token": {"value": secret}, "region": {"value": "eu"}});
        let tags =
            serde_json::json!({secret: "a", "dsn": format!("pg://u:{secret}@db"), "team": "dev"});
        let changes = serde_json::json!([{"address": "x.home", "type": "x", "name": "home",
            "change": {"actions": ["delete", "create"], "before": {"tags": tags}, "after": {"tags": {}},
                       "before_sensitive": {}, "after_sensitive": {},
                       "replace_paths": [["tags", secret], ["tags"]]}}]);
        let configuration = serde_json::json!({"root_module": {"variables": {"token": {"sensitive": true}, "region": {}}}});
        let mut text = String::from(r#"{"format_version":"1.2","planned_values":{},"#);
        let variables = format!(r#""variables":{variables},"#);
        if variables_first {
            text.push_str(&variables);
        }
        text.push_str(&format!(r#""resource_changes":{changes},"#));
        if !variables_first {
            text.push_str(&variables);
        }
        text.push_str(&format!(r#""configuration":{configuration}}}"#));
        text.into_bytes()
    }

    fn replace_paths(bytes: &[u8]) -> Vec<AttributeChange> {
        match read_plan_slice(bytes) {
            Ok(plan) => plan.changes[0].replace_paths.clone(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_sensitive_variable_is_hidden_in_keys_paths_and_longer_strings() {
        let secret = r#"to"k\en"#;
        let paths = replace_paths(&tagged_plan(secret, true));
        assert_eq!(paths[0].path, "tags[(sensitive value)]");
        assert_eq!(paths[0].before, r#""a""#);
        assert_eq!(
            paths[1].before,
            r#"{ dsn = (sensitive value), team = "dev", (sensitive value) = "a" }"#
        );
    }

    #[test]
    fn a_short_sensitive_variable_is_hidden_where_it_is_the_whole_value() {
        // Found by tests/properties.rs: a one-character secret was compared
        // with the rendered text `"A"`, quotes included, and never matched.
        let paths = replace_paths(&tagged_plan("A", true));
        assert_eq!(paths[0].path, "tags[(sensitive value)]");
        assert_eq!(
            paths[1].before, r#"{ dsn = "pg://u:A@db", team = "dev", (sensitive value) = "a" }"#,
            "inside a longer string, a secret this short is shown"
        );
    }

    #[test]
    fn values_read_before_the_variables_are_all_hidden() {
        // Not Terraform's order, so the values were never compared with the
        // variables: with a sensitive one among them, nothing can be shown.
        let paths = replace_paths(&tagged_plan("token-value", false));
        assert_eq!(paths[0].path, "(sensitive value)[(sensitive value)]");
        assert_eq!(
            paths[1].before,
            "{ (sensitive value) = (sensitive value), (sensitive value) = (sensitive value), (sensitive value) = (sensitive value) }"
        );
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
            // The whole value counts as marked, its keys included (Terraform
            // 0.12/0.13 wrote no `replace_paths` anyway).
            Ok(vec![AttributeChange {
                path: value::SENSITIVE.into(),
                before: value::SENSITIVE.into(),
                after: value::SENSITIVE.into(),
            }])
        );
    }
}
