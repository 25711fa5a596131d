//! Reads a pushed template's declarations by planning it as a template import
//! (the environment contract's import mode: no workspace, placeholders for
//! the workspace and its owner and for required parameters) and reading the
//! plan's `abode_parameter`s and `abode_workspace_preset`s.
//!
//! The plan is never applied: it only reads data sources and plans changes.
//! Its saved plan goes to the caller's scratch dir, and so do the volumes and
//! process logs directories the contract names, so that nothing it could
//! touch is shared with a workspace.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

use abode_contract::BuildContext;
use abode_terraform::run::{self, Invocation, RunError};

use super::declarations::{template_declarations_from_plan, TemplateDeclarations};
use super::plan::DeclarationError;

/// The saved plan's file name in the scratch dir.
const PLAN_FILE: &str = "template-import.tfplan";

/// Why a template's declarations could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Terraform refused the template (the template's fault: a 400).
    #[error("terraform {step} of the template failed: {message}")]
    Template { step: &'static str, message: String },
    /// The plan's declarations are unusable (the template's fault too).
    #[error(transparent)]
    Declarations(#[from] DeclarationError),
    /// Terraform could not be run at all (the server's fault).
    #[error(transparent)]
    Run(RunError),
}

/// What a template import read: the declarations, and the plan itself
/// (`terraform show -json`) for what else a push checks in it (the guard's
/// reading of `abode_protect`s).
#[derive(Debug, Clone)]
pub struct ImportedTemplate {
    pub declarations: TemplateDeclarations,
    pub plan_json: Vec<u8>,
}

/// The parameters and presets `template_dir` declares. `terraform init` must already have
/// run there with `env` (the push's Terraform environment: the operator's
/// passed variables, `TF_CLI_CONFIG_FILE`); `scratch_dir` is an absolute
/// directory of this push alone. The import's `ABODE_*` variables are added
/// here.
pub async fn declarations_from_template(
    template_dir: &Path,
    env: &[(String, String)],
    scratch_dir: &Path,
    isolation: Option<&std::sync::Arc<abode_terraform::isolation::Isolation>>,
) -> Result<ImportedTemplate, ImportError> {
    import_with_values(template_dir, env, scratch_dir, isolation, &BTreeMap::new()).await
}

/// A template import planned with parameter `values` (by name, in the
/// contract's spelling) instead of the defaults: what a create with those
/// values would build, before there is a workspace (a create's estimated
/// cost reads its plan).
pub async fn import_with_values(
    template_dir: &Path,
    env: &[(String, String)],
    scratch_dir: &Path,
    isolation: Option<&std::sync::Arc<abode_terraform::isolation::Isolation>>,
    values: &BTreeMap<String, String>,
) -> Result<ImportedTemplate, ImportError> {
    let mut context = BuildContext::template_import(scratch_dir);
    context.parameters = values.clone();
    context.volumes_dir = scratch_dir.join("volumes");
    context.process_logs_dir = scratch_dir.join("process-logs");
    let mut env = env.to_vec();
    env.extend(
        context
            .to_env()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    let plan_file = scratch_dir.join(PLAN_FILE);
    let plan_arg = format!("-out={}", plan_file.display());
    let step = |step: &'static str| {
        move |error: RunError| match error {
            RunError::Failed { message, .. } => ImportError::Template { step, message },
            other => ImportError::Run(other),
        }
    };
    run::capture(
        &Invocation::new(
            template_dir,
            [
                "plan",
                "-input=false",
                "-no-color",
                "-lock=false",
                plan_arg.as_str(),
            ],
            &env,
        )
        .isolated(isolation, scratch_dir),
    )
    .await
    .map_err(step("plan"))?;
    let plan_json = run::capture(
        &Invocation::new(
            template_dir,
            [
                OsStr::new("show"),
                OsStr::new("-json"),
                OsStr::new("-no-color"),
                plan_file.as_os_str(),
            ],
            &env,
        )
        .isolated(isolation, scratch_dir),
    )
    .await
    .map_err(step("show"))?;
    Ok(ImportedTemplate {
        declarations: template_declarations_from_plan(&plan_json)?,
        plan_json,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! Real Terraform, with templates that need no provider download (the
    //! abode provider's side is in the fixture script of
    //! tests/fixtures/template-import, which plans with it).
    use super::*;

    fn env() -> Vec<(String, String)> {
        ["PATH", "HOME"]
            .iter()
            .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
            .collect()
    }

    async fn import(main_tf: &str) -> Result<TemplateDeclarations, ImportError> {
        let scratch = tempfile::tempdir().unwrap();
        let template = scratch.path().join("template");
        std::fs::create_dir(&template).unwrap();
        std::fs::write(template.join("main.tf"), main_tf).unwrap();
        run::capture(&Invocation::new(
            &template,
            ["init", "-input=false", "-no-color"],
            &env(),
        ))
        .await
        .unwrap();
        declarations_from_template(&template, &env(), scratch.path(), None)
            .await
            .map(|imported| imported.declarations)
    }

    #[tokio::test]
    async fn a_template_without_parameters_declares_none() {
        let declarations = import("resource \"terraform_data\" \"a\" {\n  input = \"x\"\n}\n")
            .await
            .unwrap();
        assert_eq!(declarations, TemplateDeclarations::default());
    }

    #[tokio::test]
    async fn a_template_terraform_cannot_plan_is_the_template_s_fault() {
        let error = import("resource \"terraform_data\" \"a\" {\n  input = var.missing\n}\n")
            .await
            .unwrap_err();
        assert!(
            matches!(error, ImportError::Template { step: "plan", .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains("Reference to undeclared input variable"),
            "{message}"
        );
    }
}
