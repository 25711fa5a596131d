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
//! let report = abode_guard::evaluate(&plan, abode_guard::BuildIntent::Start, &[]);
//! assert_eq!(report.decision, abode_guard::Decision::Allow);
//! ```
//!
//! # How a plan is read
//!
//! The reader streams (`scan.rs`): it reads chunks, walks only the top level
//! itself, skips `planned_values` and `prior_state` by tracking strings and
//! brackets, hands each resource change to serde_json as its own small slice,
//! builds attribute values only for destructive changes, and keeps only the
//! rendered values of the paths that force replacement (redacted once the whole
//! plan is read). Secrets are looked for in one pass (Aho-Corasick over every
//! root variable's value). A large plan is read several times faster than a
//! one-line `jq` filter, in a fraction of the file's size of memory
//! (docs/benchmarks.md).
//!
//! `format.rs` names the format families (0.1, 0.2 and 1.x: Terraform 0.12 on):
//! older plans are decided from their `actions` like current ones, the report
//! lists the explanations their format lacks, and an unknown `format_version`
//! is refused. Protection rules and `abode_protect` annotations are resolved
//! through modules, module outputs, `count`, `for_each` and `moved`; every
//! change is classified (create, update, delete, replace either way round,
//! forget, no-op, read, deposed objects). Protection memory (`memory.rs`)
//! computes what a workspace keeps protected after each successful build,
//! following `moved` blocks.
//!
//! # What it keeps
//!
//! - A sensitive value never leaves the guard, whatever its shape. Values and
//!   paths are rendered only through `value::render` and `value::render_path`,
//!   which walk the value together with its `*_sensitive` masks; a value marked
//!   on either side of a change is hidden on both, and any string, number or
//!   map key that is or contains a secret (a value marked in the change, a key
//!   of a sensitive map, the value of a sensitive root variable) is hidden
//!   whole. Secrets are compared with raw values, before escaping and before
//!   the display cut. Terraform writes `configuration` (which says which root
//!   variables are sensitive) after the changes, so rendering keeps each
//!   string, number and key apart with the root variables it contains and
//!   settles what is hidden once the plan has been read. Clear-text secrets in
//!   the plan are dropped while reading and never stored in a `Plan` or
//!   `Report`.
//! - In a `start` or `stop` build, a protected resource that would be deleted
//!   or replaced is never `allow`. The one exception is the `claim` transition
//!   (a prebuilt workspace handed to a person, which has never held anyone's
//!   data): every destroy is allowed and listed in the report's
//!   `claim_replacements`, so that it is logged, counted and notified, never
//!   silent. The guard also knows who asked (`Initiator`): a `delete` the
//!   system started (the scheduler's dormant deletion) gives each protected
//!   resource its rule's mode, as a `start` would (held or blocked), never a
//!   silent destroy. Abode's pure annotations (`abode_protect`,
//!   `abode_metadata`) are never themselves protected changes; `abode_volume`
//!   and `abode_process` are protected like any resource.
//! - A delete that retains (`evaluate_delete`) never lets a retained resource
//!   be destroyed: each must be `forget` in the plan (listed in the report's
//!   `retained`), and one the plan would delete or replace blocks the build
//!   whoever asked. An annotation's delete rule (`on_delete`, `retain_for`,
//!   `expire`) is read from literals only and remembered like its protection
//!   (the rule that keeps longest winning); it decides nothing in any other
//!   transition (`tests/properties.rs` holds both against an oracle of its
//!   own).
//! - Anything it cannot understand is a `PlanError` with a one-line message,
//!   never a panic: a fuzz target (`fuzz/`) and property tests hold it to that.

mod address;
mod annotation;
mod decision;
mod error;
mod format;
mod memory;
mod plan;
mod render;
mod rules;
mod scan;
mod value;

pub use address::{Address, AddressError, InstanceKey, ModuleStep};
pub use annotation::PROTECT_TYPE;
pub use decision::{
    evaluate, evaluate_as, evaluate_delete, Action, BuildIntent, ClaimReplacement, Decision,
    DriftReport, Initiator, ProtectedChange, Protection, Report, RetainedResource, Summary,
    UnprotectedChange, REPORT_SCHEMA_VERSION,
};
pub use error::PlanError;
pub use format::{MissingExplanation, OlderPlanFormat, PlanFormat};
pub use memory::{protections_after_apply, remembered_rules, RememberedProtection};
pub use plan::{read_plan, read_plan_slice, AttributeChange, Plan, ResourceChange};
pub use render::render_text;
pub use rules::{
    annotations, parse_retain_for, Annotations, Expire, Mode, Origin, RetainRule, Rule,
    SnapshotRule, Target,
};
