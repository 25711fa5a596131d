//! A template-import plan (`terraform show -json`), parsed once, and the
//! error of reading declarations out of it. Every kind of declaration is a
//! read data source of the plan: the parameters (`declarations.rs`) and the
//! presets (`presets.rs`) are both read through [`ImportPlan`], which names
//! neither.
//!
//! A data source Terraform could read while planning is in the plan's
//! `prior_state` (`values.root_module`, and below it `child_modules`, for
//! every module instance), with its attributes as the provider returned them.
//! One whose configuration depends on values known only after apply is not
//! read: it is a `read` in `resource_changes` and its declaration is unknown,
//! which is an error here (the platform cannot check values against it).

use serde::Deserialize;

/// Why a plan's declarations cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    #[error("the plan is not `terraform show -json` output: {0}")]
    NotAPlan(String),
    #[error("{address}: the declaration cannot be read: {reason}")]
    Unreadable { address: String, reason: String },
    #[error("{address}: the declaration depends on values known only after apply; {needs}")]
    Deferred {
        address: String,
        /// What must be known at plan time, for the kind of declaration.
        needs: &'static str,
    },
    #[error("{address}: {message}")]
    Invalid { address: String, message: String },
    #[error("parameter `{name}` is declared twice, differently ({first} and {second})")]
    Conflicting {
        name: String,
        first: String,
        second: String,
    },
    #[error(
        "preset `{name}` is declared twice ({first} and {second}); preset names must be unique"
    )]
    PresetTwice {
        name: String,
        first: String,
        second: String,
    },
}

#[derive(Deserialize)]
struct PlanJson {
    format_version: Option<String>,
    prior_state: Option<StateJson>,
    #[serde(default)]
    resource_changes: Vec<ChangeJson>,
}

#[derive(Deserialize)]
struct StateJson {
    values: Option<ValuesJson>,
}

#[derive(Deserialize)]
struct ValuesJson {
    root_module: Option<ModuleJson>,
}

#[derive(Deserialize)]
struct ModuleJson {
    #[serde(default)]
    resources: Vec<ResourceJson>,
    #[serde(default)]
    child_modules: Vec<ModuleJson>,
}

#[derive(Deserialize)]
struct ResourceJson {
    address: String,
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    /// The name in the configuration (`data "TYPE" "NAME"`).
    #[serde(default)]
    name: String,
    #[serde(default)]
    values: serde_json::Value,
}

#[derive(Deserialize)]
struct ChangeJson {
    address: String,
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    change: ActionsJson,
}

#[derive(Deserialize)]
struct ActionsJson {
    #[serde(default)]
    actions: Vec<String>,
}

/// A template-import plan, parsed once; the declarations of each kind are
/// its read data sources of that kind.
pub(crate) struct ImportPlan {
    resource_changes: Vec<ChangeJson>,
    /// Every data source read during plan, root module first, depth first.
    read: Vec<ResourceJson>,
}

/// One read data source: where it is and the attributes the provider returned.
pub(crate) struct ReadDataSource {
    pub(crate) address: String,
    pub(crate) name: String,
    pub(crate) values: serde_json::Value,
}

impl ImportPlan {
    pub(crate) fn parse(plan_json: &[u8]) -> Result<Self, DeclarationError> {
        let plan: PlanJson = serde_json::from_slice(plan_json)
            .map_err(|error| DeclarationError::NotAPlan(error.to_string()))?;
        if plan.format_version.is_none() {
            return Err(DeclarationError::NotAPlan(
                "it has no format_version".to_string(),
            ));
        }
        let mut read = Vec::new();
        if let Some(root) = plan
            .prior_state
            .and_then(|state| state.values)
            .and_then(|values| values.root_module)
        {
            collect(root, &mut read);
        }
        Ok(ImportPlan {
            resource_changes: plan.resource_changes,
            read,
        })
    }

    /// The read data sources of type `kind`, in plan order. One Terraform
    /// could not read while planning is an error saying what `needs` to be
    /// known then.
    pub(crate) fn data_sources(
        &self,
        kind: &str,
        needs: &'static str,
    ) -> Result<Vec<ReadDataSource>, DeclarationError> {
        if let Some(change) = self.resource_changes.iter().find(|change| {
            change.mode == "data"
                && change.kind == kind
                && change.change.actions.iter().any(|action| action == "read")
        }) {
            return Err(DeclarationError::Deferred {
                address: change.address.clone(),
                needs,
            });
        }
        Ok(self
            .read
            .iter()
            .filter(|resource| resource.kind == kind)
            .map(|resource| ReadDataSource {
                address: resource.address.clone(),
                name: resource.name.clone(),
                values: resource.values.clone(),
            })
            .collect())
    }
}

/// The read data sources of a module and its children, depth first.
fn collect(module: ModuleJson, out: &mut Vec<ResourceJson>) {
    out.extend(
        module
            .resources
            .into_iter()
            .filter(|resource| resource.mode == "data"),
    );
    for child in module.child_modules {
        collect(child, out);
    }
}
