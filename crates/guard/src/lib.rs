//! Abode's plan guard: the heart of Abode's promise that a workspace never loses a
//! persistent resource because Terraform decided to delete or replace it.
//!
//! The guard reads a plan (`terraform show -json PLANFILE`), the build's
//! transition and protection rules, and answers `allow`, `confirm` or `block`
//! with a report that explains, in an operator's words, why Terraform wants to
//! destroy each protected resource.
//!
//! It is pure: no files, no processes, no network, no clock. It reads from the
//! reader or bytes it is handed and returns values; callers own all I/O. Any
//! input it cannot understand becomes a [`PlanError`], never a panic.
//!
//! ```
//! let plan = abode_guard::read_plan_slice(br#"{"format_version":"1.2","planned_values":{}}"#).unwrap();
//! let report = abode_guard::evaluate(&plan, abode_guard::Transition::Start, &[]);
//! assert_eq!(report.decision, abode_guard::Decision::Allow);
//! ```

mod address;
mod decision;
mod format;
mod memory;
mod plan;
mod render;
mod rules;
mod scan;
mod value;

pub use address::{Address, AddressError, InstanceKey, ModuleStep};
pub use decision::{
    evaluate, evaluate_as, evaluate_delete, Action, ClaimReplacement, Decision, DriftReport,
    Initiator, ProtectedChange, Protection, Report, RetainedResource, Summary, Transition,
    UnprotectedChange, REPORT_SCHEMA_VERSION,
};
pub use format::{MissingExplanation, OlderPlanFormat, PlanFormat};
pub use memory::{protections_after_apply, remembered_rules, RememberedProtection};
pub use plan::{read_plan, read_plan_slice, AttributeChange, Plan, PlanError, ResourceChange};
pub use render::render_text;
pub use rules::{
    annotations, parse_retain_for, Annotations, Expire, Mode, Origin, RetainRule, Rule, Target,
    PROTECT_TYPE,
};
