//! `abode_external_auth`: a template declares that its workspaces' owners
//! must have linked an account of one of the server's external auth
//! providers (docs/external-auth.md). The provider only echoes the
//! declaration: the platform reads it from the template's import plan and
//! refuses a create, start or claim before any plan when a required one is
//! not linked. It has no token attribute on purpose: tokens reach Git in
//! the workspace through the agent, never through Terraform's plan or state.

use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use crate::plumbing::DataSourceType;
use crate::schema::{block, boolean, optional, string, with_default};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ExternalAuthState {
    id: Value<String>,
    optional: Value<bool>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ExternalAuthDataSource;

impl DataSourceType for ExternalAuthDataSource {
    type State = ExternalAuthState;

    fn block(&self) -> Block {
        let id = with_default(
            string(),
            "The provider's id in the server's --external-auth-config; by default this data \
             source's name (`data \"abode_external_auth\" \"github\"` asks for `github`).",
        );
        block(
            "An external auth provider (GitHub, GitLab, any OAuth 2.0 server) whose account \
             the workspace's owner must have linked: a create, start or claim without it is \
             refused before any plan, with the link to follow. Git in the workspace gets \
             the owner's token from the agent; no token is ever an attribute.",
            vec![
                ("id", id),
                (
                    "optional",
                    optional(
                        boolean(),
                        "When true, an owner who has not linked it may still build \
                         (default false).",
                    ),
                ),
            ],
        )
    }

    fn read(&self, _diags: &mut Diagnostics, config: Self::State) -> Option<Self::State> {
        let mut state = config;
        // An unset id stays null: the platform names it by the data
        // source's name, which the provider never sees.
        if !matches!(state.id, Value::Value(_)) {
            state.id = Value::Null;
        }
        Some(state)
    }
}
