//! The one error of reading a plan, in its own module: the streaming reader
//! (`scan.rs`) and the plan's reader (`plan.rs`) both report it, and neither
//! names the other's module for it.

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
