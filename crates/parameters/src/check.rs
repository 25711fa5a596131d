//! Checks the parameter values a create, start or update gives against the
//! version's declarations, and resolves the values of the build.
//!
//! Every problem is reported, not the first: the caller answers 400 with the
//! whole list, one line per problem, each naming its parameter. Values and
//! names in messages are cut and escaped (`abode_contract::parameters::shown`).

use std::collections::BTreeMap;
use std::fmt;

use abode_contract::parameters::{
    check_parameter_value, shown, typed_value, Monotonic, ParameterDefinition, ParameterKind,
    TypedValue,
};
use serde_json::Value;

/// The most declared names an "is not declared" message lists.
const LISTED_NAMES: usize = 10;

/// Which request gives the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// A new workspace: there is no previous value.
    Create,
    /// A start of the workspace's current version.
    Start,
    /// A start of another version of the template.
    Update,
}

/// One reason the given values are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterProblem {
    /// The parameter's name as given (not cut; for clients that match on it).
    pub name: String,
    /// One line that names the parameter (cut) and says what is wrong.
    pub message: String,
}

impl fmt::Display for ParameterProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The values of an accepted request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedParameters {
    /// Every declared parameter's value for this build (given, else the
    /// workspace's current value, else the default), as `ABODE_PARAMETERS`
    /// takes them.
    pub build: BTreeMap<String, String>,
    /// What the workspace keeps for its next builds: `build` without the
    /// ephemeral parameters, which apply to one build only.
    pub keep: BTreeMap<String, String>,
}

/// Checks `given` (the request's JSON object of values) against
/// `declarations`; `previous` is the workspace's current values (`None` at
/// create). Given values may be strings, numbers, bools (kept in their
/// Terraform spelling) or, for `list(string)`, a JSON array of strings.
///
/// A parameter that is not given keeps its current value (an ephemeral one
/// takes its default), else takes its default; the current value is checked
/// again, since an update may have changed the declaration. Values of
/// parameters the version no longer declares are dropped.
pub fn check_parameters(
    declarations: &[ParameterDefinition],
    given: &BTreeMap<String, Value>,
    previous: Option<&BTreeMap<String, String>>,
    kind: CheckKind,
) -> Result<ResolvedParameters, Vec<ParameterProblem>> {
    let previous = match kind {
        CheckKind::Create => None,
        CheckKind::Start | CheckKind::Update => previous,
    };
    let mut problems = Vec::new();
    let mut problem = |name: &str, message: String| {
        problems.push(ParameterProblem {
            name: name.to_string(),
            message,
        })
    };
    for name in given.keys() {
        if !declarations.iter().any(|d| &d.name == name) {
            problem(
                name,
                format!(
                    "parameter `{}` is not declared by this template version ({})",
                    shown(name),
                    declared_list(declarations)
                ),
            );
        }
    }
    let mut resolved = ResolvedParameters::default();
    for (index, declaration) in declarations.iter().enumerate() {
        // A name declared twice is checked once (the plan reader refuses
        // conflicting declarations).
        if declarations[..index]
            .iter()
            .any(|d| d.name == declaration.name)
        {
            continue;
        }
        let name = declaration.name.as_str();
        let current = previous
            .filter(|_| !declaration.ephemeral)
            .and_then(|values| values.get(name));
        let value = match given.get(name) {
            Some(value) => match given_text(declaration, value) {
                Ok(text) => {
                    let mut fine = true;
                    if let Err(reason) = check_parameter_value(declaration, &text) {
                        problem(name, format!("parameter `{}`: {reason}", shown(name)));
                        fine = false;
                    }
                    if let (true, Some(current)) = (fine, current) {
                        if let Err(message) = check_change(declaration, current, &text, kind) {
                            problem(name, message);
                        }
                    }
                    text
                }
                Err(message) => {
                    problem(name, message);
                    continue;
                }
            },
            None => match (current, &declaration.default) {
                (Some(current), _) => {
                    if let Err(reason) = check_parameter_value(declaration, current) {
                        let fix = if declaration.mutable {
                            "give a new value"
                        } else {
                            "it is immutable, so the workspace cannot use this version"
                        };
                        problem(
                            name,
                            format!(
                                "parameter `{}`: the workspace's current value is not valid in this version: {reason}; {fix}",
                                shown(name)
                            ),
                        );
                    }
                    current.clone()
                }
                (None, Some(default)) => default.clone(),
                (None, None) => {
                    problem(
                        name,
                        format!(
                            "parameter `{}` is required: it has no default, give a value",
                            shown(name)
                        ),
                    );
                    continue;
                }
            },
        };
        if !declaration.ephemeral {
            resolved.keep.insert(name.to_string(), value.clone());
        }
        resolved.build.insert(name.to_string(), value);
    }
    if problems.is_empty() {
        Ok(resolved)
    } else {
        Err(problems)
    }
}

/// A given JSON value as the string a build takes, or why it cannot be one.
fn given_text(declaration: &ParameterDefinition, value: &Value) -> Result<String, String> {
    let name = shown(&declaration.name);
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Array(items) if declaration.kind == ParameterKind::ListOfStrings => {
            if items.iter().all(Value::is_string) {
                Ok(value.to_string())
            } else {
                Err(format!(
                    "parameter `{name}`: a list(string) value holds only strings"
                ))
            }
        }
        Value::Null => Err(format!(
            "parameter `{name}` is null: give a value, or leave it out to keep {}",
            if declaration.default.is_some() {
                "the current value or the default"
            } else {
                "the current value"
            }
        )),
        Value::Array(_) => Err(format!(
            "parameter `{name}` is a list: type {} takes a string, number or bool",
            declaration.kind
        )),
        Value::Object(_) => Err(format!(
            "parameter `{name}` is an object: type {} takes a string, number or bool",
            declaration.kind
        )),
    }
}

/// Whether a workspace's value may become `new`: immutable parameters keep
/// theirs, monotonic ones move only in their direction.
fn check_change(
    declaration: &ParameterDefinition,
    current: &str,
    new: &str,
    kind: CheckKind,
) -> Result<(), String> {
    let name = shown(&declaration.name);
    let (Ok(old_typed), Ok(new_typed)) = (
        typed_value(declaration.kind, current),
        typed_value(declaration.kind, new),
    ) else {
        // A current value of the wrong type is not a change to judge: the new
        // value has passed its own checks.
        return Ok(());
    };
    if !declaration.mutable && old_typed != new_typed {
        let when = match kind {
            CheckKind::Update => "not even by an update",
            CheckKind::Create | CheckKind::Start => "once the workspace exists",
        };
        return Err(format!(
            "parameter `{name}` is immutable: it cannot change from `{}` to `{}` {when}",
            shown(current),
            shown(new)
        ));
    }
    if let (Some(direction), TypedValue::Number(old), TypedValue::Number(value)) =
        (declaration.monotonic, old_typed, new_typed)
    {
        let wrong = match direction {
            Monotonic::Increasing => value < old,
            Monotonic::Decreasing => value > old,
        };
        if wrong {
            let (way, than) = match direction {
                Monotonic::Increasing => ("increase", "less"),
                Monotonic::Decreasing => ("decrease", "more"),
            };
            return Err(format!(
                "parameter `{name}` may only {way}: {} is {than} than the current {}",
                shown(new),
                shown(current)
            ));
        }
    }
    Ok(())
}

fn declared_list(declarations: &[ParameterDefinition]) -> String {
    if declarations.is_empty() {
        return "it declares no parameters".to_string();
    }
    let mut names: Vec<String> = declarations
        .iter()
        .take(LISTED_NAMES)
        .map(|d| shown(&d.name))
        .collect();
    if declarations.len() > LISTED_NAMES {
        names.push(format!("… ({} in all)", declarations.len()));
    }
    format!("it declares {}", names.join(", "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declarations() -> Vec<ParameterDefinition> {
        let base = |name: &str, kind: &str| ParameterDefinition {
            name: name.into(),
            kind: kind.parse().unwrap(),
            ..Default::default()
        };
        vec![
            ParameterDefinition {
                regex: Some("^[a-z][a-z0-9-]*$".into()),
                ..base("project", "string")
            },
            ParameterDefinition {
                default: Some("eu".into()),
                options: vec!["eu".into(), "us".into()],
                ..base("region", "string")
            },
            ParameterDefinition {
                default: Some("2".into()),
                mutable: true,
                min: Some(1),
                max: Some(16),
                monotonic: Some(Monotonic::Increasing),
                ..base("cpus", "number")
            },
            ParameterDefinition {
                default: Some("false".into()),
                mutable: true,
                ephemeral: true,
                ..base("debug", "bool")
            },
            ParameterDefinition {
                default: Some("[\"git\"]".into()),
                mutable: true,
                options: vec!["git".into(), "make".into()],
                ..base("tools", "list(string)")
            },
            ParameterDefinition {
                default: Some("1".into()),
                ..base("replicas", "number")
            },
        ]
    }

    /// A request (kind, given values, the workspace's current values) and
    /// what it should come to.
    type Case<T> = (
        CheckKind,
        serde_json::Value,
        Option<BTreeMap<String, String>>,
        T,
    );

    fn given(value: serde_json::Value) -> BTreeMap<String, Value> {
        serde_json::from_value(value).unwrap()
    }

    fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The workspace a start or update finds.
    fn current() -> BTreeMap<String, String> {
        strings(&[
            ("project", "app"),
            ("region", "eu"),
            ("cpus", "4"),
            ("tools", "[\"git\"]"),
            ("replicas", "1"),
            ("gone", "kept by an older version"),
        ])
    }

    #[test]
    fn accepted_requests_resolve_every_value() {
        let create = CheckKind::Create;
        let update = CheckKind::Update;
        let cases: Vec<Case<&[(&str, &str)]>> = vec![
            (
                create,
                json!({"project": "app"}),
                None,
                &[
                    ("project", "app"),
                    ("region", "eu"),
                    ("cpus", "2"),
                    ("debug", "false"),
                    ("tools", "[\"git\"]"),
                    ("replicas", "1"),
                ],
            ),
            (
                create,
                json!({"project": "app", "cpus": 8, "debug": true, "tools": ["git", "make"], "region": "us", "replicas": "1.0"}),
                None,
                &[
                    ("project", "app"),
                    ("region", "us"),
                    ("cpus", "8"),
                    ("debug", "true"),
                    ("tools", "[\"git\",\"make\"]"),
                    ("replicas", "1.0"),
                ],
            ),
            // Numbers as strings, and floats, are numbers; the list may come as JSON text.
            (
                create,
                json!({"project": "app", "cpus": "2.5", "tools": "[\"make\"]"}),
                None,
                &[
                    ("project", "app"),
                    ("region", "eu"),
                    ("cpus", "2.5"),
                    ("debug", "false"),
                    ("tools", "[\"make\"]"),
                    ("replicas", "1"),
                ],
            ),
            // Not given: the current value, not the default; the dropped parameter goes.
            (
                CheckKind::Start,
                json!({}),
                Some(current()),
                &[
                    ("project", "app"),
                    ("region", "eu"),
                    ("cpus", "4"),
                    ("debug", "false"),
                    ("tools", "[\"git\"]"),
                    ("replicas", "1"),
                ],
            ),
            // An immutable parameter given its current value (spelled otherwise) is no change.
            (
                update,
                json!({"project": "app", "replicas": 1.0, "cpus": 4, "debug": true}),
                Some(current()),
                &[
                    ("project", "app"),
                    ("region", "eu"),
                    ("cpus", "4"),
                    ("debug", "true"),
                    ("tools", "[\"git\"]"),
                    ("replicas", "1.0"),
                ],
            ),
            (
                update,
                json!({"cpus": "16"}),
                Some(current()),
                &[
                    ("project", "app"),
                    ("region", "eu"),
                    ("cpus", "16"),
                    ("debug", "false"),
                    ("tools", "[\"git\"]"),
                    ("replicas", "1"),
                ],
            ),
        ];
        for (kind, request, previous, expected) in cases {
            let resolved = check_parameters(
                &declarations(),
                &given(request.clone()),
                previous.as_ref(),
                kind,
            )
            .unwrap_or_else(|problems| panic!("{request}: {problems:?}"));
            assert_eq!(resolved.build, strings(expected), "{request}");
            let mut keep = strings(expected);
            keep.remove("debug");
            assert_eq!(
                resolved.keep, keep,
                "{request}: ephemeral values are not kept"
            );
        }
    }

    #[test]
    fn refused_requests_list_every_problem() {
        let long = "é".repeat(5_000);
        let hostile_name = format!("x\"\\\n{long}");
        let cases: Vec<Case<Vec<&str>>> = vec![
            (
                CheckKind::Create,
                json!({}),
                None,
                vec!["parameter `project` is required: it has no default, give a value"],
            ),
            (
                CheckKind::Create,
                json!({"project": "App", "region": "mars", "cpus": "four", "debug": "True", "tools": ["git", "vim"], "nope": 1, "replicas": null}),
                None,
                vec![
                    "parameter `nope` is not declared by this template version (it declares project, region, cpus, debug, tools, replicas)",
                    "parameter `project`: `App` does not match ^[a-z][a-z0-9-]*$",
                    "parameter `region`: `mars` is not one of the options: eu, us",
                    "parameter `cpus`: `four` is not a number",
                    "parameter `debug`: `True` is not `true` or `false`",
                    "parameter `tools`: `vim` is not one of the options: git, make",
                    "parameter `replicas` is null: give a value, or leave it out to keep the current value or the default",
                ],
            ),
            (
                CheckKind::Create,
                json!({"project": "a", "cpus": 0, "debug": 1, "replicas": [1], "tools": [1], "region": {"a": 1}}),
                None,
                vec![
                    "parameter `region` is an object: type string takes a string, number or bool",
                    "parameter `cpus`: 0 is less than the minimum 1",
                    "parameter `debug`: `1` is not `true` or `false`",
                    "parameter `tools`: a list(string) value holds only strings",
                    "parameter `replicas` is a list: type number takes a string, number or bool",
                ],
            ),
            (
                CheckKind::Create,
                json!({"project": "a", "cpus": 1e300, "replicas": "1e3x", "tools": "git"}),
                None,
                vec![
                    "parameter `cpus`: 1e+300 is more than the maximum 16",
                    "parameter `tools`: `git` is not a JSON list of strings",
                    "parameter `replicas`: `1e3x` is not a number",
                ],
            ),
            (
                CheckKind::Update,
                json!({"project": "other", "region": "us", "cpus": 2}),
                Some(current()),
                vec![
                    "parameter `project` is immutable: it cannot change from `app` to `other` not even by an update",
                    "parameter `region` is immutable: it cannot change from `eu` to `us` not even by an update",
                    "parameter `cpus` may only increase: 2 is less than the current 4",
                ],
            ),
            (
                CheckKind::Start,
                json!({"replicas": "2"}),
                Some(strings(&[("project", "Bad"), ("region", "eu"), ("cpus", "4"), ("replicas", "1")])),
                vec![
                    "parameter `project`: the workspace's current value is not valid in this version: `Bad` does not match ^[a-z][a-z0-9-]*$; it is immutable, so the workspace cannot use this version",
                    "parameter `replicas` is immutable: it cannot change from `1` to `2` once the workspace exists",
                ],
            ),
            (
                CheckKind::Update,
                json!({}),
                Some(strings(&[("project", "app"), ("cpus", "40")])),
                vec!["parameter `cpus`: the workspace's current value is not valid in this version: 40 is more than the maximum 16; give a new value"],
            ),
            (
                CheckKind::Create,
                json!({"project": long.clone(), hostile_name.clone(): "v"}),
                None,
                vec![
                    "parameter `x\"\\\\nééé",
                    "parameter `project`: `éééé",
                ],
            ),
        ];
        for (kind, request, previous, expected) in cases {
            let problems = check_parameters(
                &declarations(),
                &given(request.clone()),
                previous.as_ref(),
                kind,
            )
            .unwrap_err();
            let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
            assert_eq!(messages.len(), expected.len(), "{messages:#?}");
            for (message, start) in messages.iter().zip(&expected) {
                assert!(message.starts_with(start), "{message}\nexpected: {start}");
                assert!(!message.contains('\n'), "{message}");
                assert!(message.chars().count() < 400, "{message}");
            }
        }
    }

    #[test]
    fn problems_name_the_parameter_as_given() {
        let problems = check_parameters(
            &declarations(),
            &given(json!({"nope\n": 1})),
            None,
            CheckKind::Create,
        )
        .unwrap_err();
        let names: Vec<&str> = problems.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["nope\n", "project"]);
    }

    #[test]
    fn a_template_without_parameters_takes_none() {
        let resolved =
            check_parameters(&[], &given(json!({})), Some(&current()), CheckKind::Update).unwrap();
        assert!(resolved.build.is_empty() && resolved.keep.is_empty());
        let problems =
            check_parameters(&[], &given(json!({"a": "1"})), None, CheckKind::Create).unwrap_err();
        assert_eq!(
            problems[0].message,
            "parameter `a` is not declared by this template version (it declares no parameters)"
        );
    }
}
