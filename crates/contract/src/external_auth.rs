//! What a template says of external auth (`data "abode_external_auth"
//! "ID"`, docs/external-auth.md): which of the server's providers its
//! workspaces' owners must have linked. The platform reads it from the
//! template's import plan at push and refuses a create, start or claim
//! before any plan when a required one is not linked. No token ever goes
//! through Terraform: the declaration carries none.

use serde::{Deserialize, Serialize};

/// The Terraform type of the declaration.
pub const DATA_SOURCE: &str = "abode_external_auth";

/// One provider a template version asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalAuthNeed {
    /// The provider's id in the server's `--external-auth-config`.
    pub provider: String,
    /// An optional provider does not block a build when unlinked.
    pub optional: bool,
}
