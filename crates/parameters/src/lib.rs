//! A template version's parameters: what it declares (with its presets,
//! read from the same plan), and whether the values
//! a create, start or update gives fit those declarations.
//!
//! Declarations are read once, at push, from a plan of the template in the
//! environment contract's template-import mode (no workspace; a required
//! parameter reads as a placeholder), and stored with the version. Values are
//! checked against them before a build is accepted, so a bad value is a 400
//! listing every problem rather than a build that fails in `terraform plan`.
//! The checks of one value are the contract's (`abode_contract::parameters`),
//! the same the provider runs at plan time.
//!
//! `declarations.rs` and `import.rs` read the declarations from the import
//! plan (parsed once in `plan.rs`), `presets.rs` the presets of the same plan (checked against the
//! declarations) and the preset a new workspace is created with, `check.rs` the
//! values a build gives, every problem at once. A real plan is the fixture
//! (`tests/fixtures/template-import`, with the script that regenerates it).

mod check;
mod declarations;
mod import;
mod plan;
pub mod presets;

pub use abode_contract::parameters::ParameterDefinition;
pub use check::{check_parameters, CheckKind, ParameterProblem, ResolvedParameters};
pub use declarations::{
    declarations_from_plan, template_declarations_from_plan, TemplateDeclarations,
};
pub use import::{declarations_from_template, import_with_values, ImportError, ImportedTemplate};
pub use plan::DeclarationError;
