//! Reads a template's parameters (`abode_parameter`s) out of a
//! template-import plan ([`ImportPlan`], `plan.rs`), and everything a template
//! declares at once: its parameters, its presets (read in `crate::presets`,
//! checked against the parameters) and the external auth it asks for.
//! crates/parameters/tests/fixtures/template-import holds a real plan.

use std::collections::BTreeMap;

use abode_contract::external_auth::ExternalAuthNeed;
use abode_contract::parameters::ParameterDefinition;
use abode_contract::presets::PresetDefinition;
use serde::Deserialize;

use crate::plan::{DeclarationError, ImportPlan};

const PARAMETER_TYPE: &str = "abode_parameter";

/// What a deferred `abode_parameter` would have had to know at plan time.
const PARAMETER_NEEDS: &str =
    "a parameter's name, type, default, options and validation must be known when the template is planned";

/// Everything a template declares, read from one template-import plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateDeclarations {
    pub parameters: Vec<ParameterDefinition>,
    /// Checked against `parameters` (names and values).
    pub presets: Vec<PresetDefinition>,
    /// The external auth providers it asks for, once each (required when
    /// any declaration of it is), by provider id.
    pub external_auth: Vec<ExternalAuthNeed>,
}

/// The attributes of a read `abode_parameter` (its schema, docs/provider.md).
#[derive(Deserialize)]
struct ParameterValues {
    name: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    display_name: Option<String>,
    description: Option<String>,
    default: Option<String>,
    mutable: Option<bool>,
    ephemeral: Option<bool>,
    sensitive: Option<bool>,
    option: Option<Vec<OptionValues>>,
    validation: Option<Vec<ValidationValues>>,
}

#[derive(Deserialize)]
struct OptionValues {
    value: String,
}

#[derive(Deserialize)]
struct ValidationValues {
    min: Option<i64>,
    max: Option<i64>,
    regex: Option<String>,
    monotonic: Option<String>,
    error: Option<String>,
}

impl ParameterValues {
    /// The declaration, its type and rule parsed and the whole checked.
    fn definition(self) -> Result<ParameterDefinition, String> {
        let rules = self.validation.and_then(|rules| rules.into_iter().next());
        let (min, max, regex, monotonic, error) = match rules {
            Some(rules) => (
                rules.min,
                rules.max,
                rules.regex,
                rules.monotonic,
                rules.error,
            ),
            None => (None, None, None, None, None),
        };
        ParameterDefinition {
            name: self.name,
            display_name: self.display_name,
            description: self.description,
            default: self.default,
            mutable: self.mutable.unwrap_or(false),
            ephemeral: self.ephemeral.unwrap_or(false),
            sensitive: self.sensitive.unwrap_or(false),
            options: self
                .option
                .unwrap_or_default()
                .into_iter()
                .map(|option| option.value)
                .collect(),
            min,
            max,
            regex,
            error,
            ..ParameterDefinition::default()
        }
        .declared(self.kind.as_deref(), monotonic.as_deref())
    }
}

/// Every parameter a plan declares, in the order of the plan's modules (the
/// root module's first), each checked as a declaration. The same parameter
/// declared identically by several module instances counts once; declared
/// differently, it is an error.
pub fn declarations_from_plan(
    plan_json: &[u8],
) -> Result<Vec<ParameterDefinition>, DeclarationError> {
    parameters_of(&ImportPlan::parse(plan_json)?)
}

/// Every parameter and preset a plan declares (see
/// [`declarations_from_plan`] and `crate::presets::presets_of`).
pub fn template_declarations_from_plan(
    plan_json: &[u8],
) -> Result<TemplateDeclarations, DeclarationError> {
    let plan = ImportPlan::parse(plan_json)?;
    let parameters = parameters_of(&plan)?;
    let presets = crate::presets::presets_of(&plan, &parameters)?;
    let external_auth = external_auth_of(&plan)?;
    Ok(TemplateDeclarations {
        parameters,
        presets,
        external_auth,
    })
}

/// What a deferred `abode_external_auth` would have had to know.
const EXTERNAL_AUTH_NEEDS: &str =
    "an external auth declaration's id and optional must be known when the template is planned";

/// The `abode_external_auth` data sources: the provider is the data
/// source's name (`data "abode_external_auth" "github"`) unless its `id`
/// says otherwise.
fn external_auth_of(plan: &ImportPlan) -> Result<Vec<ExternalAuthNeed>, DeclarationError> {
    #[derive(Deserialize)]
    struct Values {
        id: Option<String>,
        optional: Option<bool>,
    }
    let mut needs: Vec<ExternalAuthNeed> = Vec::new();
    for resource in plan.data_sources(
        abode_contract::external_auth::DATA_SOURCE,
        EXTERNAL_AUTH_NEEDS,
    )? {
        let values: Values = serde_json::from_value(resource.values).map_err(|error| {
            DeclarationError::Unreadable {
                address: resource.address.clone(),
                reason: error.to_string(),
            }
        })?;
        let provider = values
            .id
            .filter(|id| !id.is_empty())
            .unwrap_or(resource.name);
        abode_contract::text::check_name_text("external auth provider", &provider).map_err(
            |message| DeclarationError::Invalid {
                address: resource.address.clone(),
                message,
            },
        )?;
        let optional = values.optional.unwrap_or(false);
        match needs.iter_mut().find(|need| need.provider == provider) {
            Some(need) => need.optional &= optional,
            None => needs.push(ExternalAuthNeed { provider, optional }),
        }
    }
    needs.sort_by(|a, b| a.provider.cmp(&b.provider));
    Ok(needs)
}

fn parameters_of(plan: &ImportPlan) -> Result<Vec<ParameterDefinition>, DeclarationError> {
    let mut declarations: Vec<ParameterDefinition> = Vec::new();
    let mut declared_at: BTreeMap<String, String> = BTreeMap::new();
    for resource in plan.data_sources(PARAMETER_TYPE, PARAMETER_NEEDS)? {
        let values: ParameterValues = serde_json::from_value(resource.values).map_err(|error| {
            DeclarationError::Unreadable {
                address: resource.address.clone(),
                reason: error.to_string(),
            }
        })?;
        let definition = values
            .definition()
            .map_err(|message| DeclarationError::Invalid {
                address: resource.address.clone(),
                message,
            })?;
        match declarations
            .iter()
            .find(|known| known.name == definition.name)
        {
            Some(known) if *known == definition => {}
            Some(_) => {
                return Err(DeclarationError::Conflicting {
                    name: abode_contract::parameters::shown(&definition.name),
                    first: declared_at
                        .get(&definition.name)
                        .cloned()
                        .unwrap_or_default(),
                    second: resource.address,
                })
            }
            None => {
                declared_at.insert(definition.name.clone(), resource.address);
                declarations.push(definition);
            }
        }
    }
    Ok(declarations)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use abode_contract::parameters::Monotonic;

    const PLAN: &[u8] = include_bytes!("../tests/fixtures/template-import/plan.json");
    const DEFERRED: &[u8] = include_bytes!("../tests/fixtures/template-import/plan-deferred.json");

    fn declaration(name: &str, kind: &str) -> ParameterDefinition {
        ParameterDefinition {
            name: name.into(),
            kind: kind.parse().unwrap(),
            ..Default::default()
        }
    }

    #[test]
    fn a_real_import_plan_declares_every_parameter() {
        let expected = vec![
            ParameterDefinition {
                default: Some("2".into()),
                mutable: true,
                min: Some(1),
                max: Some(16),
                monotonic: Some(Monotonic::Increasing),
                ..declaration("cpus", "number")
            },
            ParameterDefinition {
                default: Some("false".into()),
                mutable: true,
                ephemeral: true,
                ..declaration("debug", "bool")
            },
            ParameterDefinition {
                display_name: Some("Project".into()),
                description: Some("The project's \"slug\" (lowercase)".into()),
                regex: Some("^[a-z][a-z0-9-]*$".into()),
                error: Some("a slug such as my-app, not {value}".into()),
                ..declaration("project", "string")
            },
            ParameterDefinition {
                default: Some("eu".into()),
                options: vec!["eu".into(), "us".into()],
                ..declaration("region", "string")
            },
            ParameterDefinition {
                min: Some(1),
                max: Some(3),
                ..declaration("replicas", "number")
            },
            ParameterDefinition {
                default: Some("[\"git\"]".into()),
                mutable: true,
                options: vec!["git".into(), "make".into()],
                ..declaration("tools", "list(string)")
            },
            ParameterDefinition {
                default: Some("10".into()),
                mutable: true,
                min: Some(10),
                error: Some("at least {min} GB".into()),
                ..declaration("disk_size", "number")
            },
        ];
        assert_eq!(declarations_from_plan(PLAN).unwrap(), expected);
    }

    /// A plan holding the given `abode_parameter` attribute objects, read
    /// during plan, at the given addresses.
    fn plan_with(parameters: &[(&str, serde_json::Value)]) -> Vec<u8> {
        let resources: Vec<serde_json::Value> = parameters
            .iter()
            .map(|(address, values)| {
                serde_json::json!({
                    "address": address, "mode": "data", "type": "abode_parameter",
                    "name": "p", "values": values,
                })
            })
            .collect();
        serde_json::json!({
            "format_version": "1.2",
            "prior_state": {"values": {"root_module": {"resources": resources}}},
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn plans_that_cannot_give_declarations() {
        let region = serde_json::json!({"name": "region", "type": "string", "default": "eu"});
        let other_region = serde_json::json!({"name": "region", "type": "string", "default": "us"});
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (DEFERRED.to_vec(), "data.abode_parameter.late: the declaration depends on values known only after apply"),
            (b"not json".to_vec(), "the plan is not `terraform show -json` output"),
            (b"{}".to_vec(), "the plan is not `terraform show -json` output: it has no format_version"),
            (b"[1]".to_vec(), "the plan is not `terraform show -json` output"),
            (
                plan_with(&[("data.abode_parameter.a", serde_json::json!({"type": "string"}))]),
                "data.abode_parameter.a: the declaration cannot be read: missing field `name`",
            ),
            (
                plan_with(&[("data.abode_parameter.a", serde_json::json!({"name": "a", "type": "int"}))]),
                "data.abode_parameter.a: parameter `a`: type `int` is not one of",
            ),
            (
                plan_with(&[("data.abode_parameter.a", region.clone()), ("module.m.data.abode_parameter.b", other_region)]),
                "parameter `region` is declared twice, differently (data.abode_parameter.a and module.m.data.abode_parameter.b)",
            ),
        ];
        for (plan, expected) in cases {
            let message = declarations_from_plan(&plan).unwrap_err().to_string();
            assert!(message.starts_with(expected), "{message}");
        }
        let twice = plan_with(&[
            ("module.m[0].data.abode_parameter.a", region.clone()),
            ("module.m[1].data.abode_parameter.a", region),
        ]);
        assert_eq!(declarations_from_plan(&twice).unwrap().len(), 1);
    }

    #[test]
    fn a_plan_without_parameters_declares_none() {
        let plan = br#"{"format_version":"1.2","resource_changes":[{"address":"terraform_data.a","mode":"managed","type":"terraform_data","change":{"actions":["create"]}}]}"#;
        assert_eq!(declarations_from_plan(plan).unwrap(), vec![]);
    }

    #[test]
    fn external_auth_needs_are_named_by_the_data_source_once_each() {
        let source = |address: &str, name: &str, values: serde_json::Value| {
            serde_json::json!({
                "address": address, "mode": "data", "type": "abode_external_auth",
                "name": name, "values": values,
            })
        };
        let plan = |resources: Vec<serde_json::Value>| {
            serde_json::json!({
                "format_version": "1.2",
                "prior_state": {"values": {"root_module": {"resources": resources}}},
            })
            .to_string()
            .into_bytes()
        };
        let needs =
            |bytes: Vec<u8>| template_declarations_from_plan(&bytes).map(|d| d.external_auth);
        let need = |provider: &str, optional: bool| ExternalAuthNeed {
            provider: provider.into(),
            optional,
        };
        assert_eq!(
            needs(plan(vec![
                source(
                    "data.abode_external_auth.gitlab",
                    "gitlab",
                    serde_json::json!({"optional": true, "id": null})
                ),
                source(
                    "data.abode_external_auth.github",
                    "github",
                    serde_json::json!({"optional": null})
                ),
                // Named by `id`; optional here, required above: required.
                source(
                    "module.m.data.abode_external_auth.gh",
                    "gh",
                    serde_json::json!({"id": "github", "optional": true})
                ),
                source(
                    "module.m.data.abode_external_auth.gitlab[0]",
                    "gitlab",
                    serde_json::json!({"optional": true})
                ),
            ])),
            Ok(vec![need("github", false), need("gitlab", true)])
        );
        assert_eq!(needs(plan(vec![])), Ok(vec![]));
        let message = needs(plan(vec![source(
            "data.abode_external_auth.x",
            "x",
            serde_json::json!({"id": "git\u{202e}hub"}),
        )]))
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("data.abode_external_auth.x: external auth provider"),
            "{message}"
        );
        let message = needs(plan(vec![source(
            "data.abode_external_auth.x",
            "x",
            serde_json::json!({"optional": "yes"}),
        )]))
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("data.abode_external_auth.x: the declaration cannot be read"),
            "{message}"
        );
    }
}
