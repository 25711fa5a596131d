//! Values the store keeps as JSON text and hands out as types, read once
//! here: a stored value that does not read as its type is an error naming
//! it and its row ([`Corrupt`]), never a default.

use abode_guard::Report;

use crate::error::Corrupt;
use crate::records::{ParameterDefinition, Parameters};

/// A build's guard report (`builds.guard_report`, the guard's JSON report).
pub(crate) fn guard_report(
    build_id: &str,
    text: Option<String>,
) -> Result<Option<Report>, Corrupt> {
    text.map(|text| {
        serde_json::from_str(&text).map_err(|error| Corrupt {
            what: "guard report",
            of: format!("build {build_id}"),
            reason: error.to_string(),
        })
    })
    .transpose()
}

/// A guard report as it is stored: the guard's JSON report, as
/// `abode plan check --format json` prints it.
pub(crate) fn guard_report_text(report: &Report) -> String {
    report.to_json()
}

/// Parameter values (`workspaces.parameters`, `builds.parameters`,
/// `builds.workspace_parameters`: a JSON object of strings) of `of`, e.g.
/// `workspace 4f1c...`.
pub(crate) fn parameters(of: impl FnOnce() -> String, text: &str) -> Result<Parameters, Corrupt> {
    serde_json::from_str(text).map_err(|error| Corrupt {
        what: "parameters",
        of: of(),
        reason: error.to_string(),
    })
}

/// A build's parameters, when it was given any.
pub(crate) fn build_parameters(
    build_id: &str,
    text: Option<String>,
) -> Result<Option<Parameters>, Corrupt> {
    text.map(|text| parameters(|| format!("build {build_id}"), &text))
        .transpose()
}

/// Parameter values as they are stored: a JSON object of strings.
pub(crate) fn parameters_text(parameters: &Parameters) -> String {
    let object: serde_json::Map<String, serde_json::Value> = parameters
        .iter()
        .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
        .collect();
    serde_json::Value::Object(object).to_string()
}

/// A template version's parameter declarations
/// (`template_versions.parameters`, a JSON array), when it has them.
pub(crate) fn declarations(
    version_id: &str,
    text: Option<String>,
) -> Result<Option<Vec<ParameterDefinition>>, Corrupt> {
    text.map(|text| {
        serde_json::from_str(&text).map_err(|error| Corrupt {
            what: "parameter declarations",
            of: format!("template version {version_id}"),
            reason: error.to_string(),
        })
    })
    .transpose()
}

/// Parameter declarations as they are stored: a JSON array.
pub(crate) fn declarations_text(
    declarations: &[ParameterDefinition],
) -> Result<String, crate::StoreError> {
    serde_json::to_string(declarations)
        .map_err(|error| crate::StoreError::Database(sqlx::Error::Encode(Box::new(error))))
}
