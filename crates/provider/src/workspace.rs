//! `abode_workspace` and `abode_workspace_owner`: the build's workspace and its
//! owner as the platform describes them (or the development workspace by hand).

use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use crate::plumbing::DataSourceType;
use crate::schema::{block, boolean, build_context, computed, number, string, string_list};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct WorkspaceState {
    id: Value<String>,
    name: Value<String>,
    transition: Value<String>,
    start_count: Value<i64>,
    template_id: Value<String>,
    template_name: Value<String>,
    template_version: Value<String>,
    is_prebuild: Value<bool>,
    is_prebuild_claim: Value<bool>,
    prebuild_count: Value<i64>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WorkspaceDataSource;

impl DataSourceType for WorkspaceDataSource {
    type State = WorkspaceState;

    fn block(&self) -> Block {
        block(
            "The workspace this build belongs to. Outside Abode (a template author running \
             terraform by hand) it describes a fixed development workspace, overridable \
             variable by variable (docs/environment.md).",
            vec![
                (
                    "id",
                    computed(string(), "The workspace's id (ABODE_WORKSPACE_ID)."),
                ),
                (
                    "name",
                    computed(string(), "The workspace's name (ABODE_WORKSPACE_NAME)."),
                ),
                (
                    "transition",
                    computed(
                        string(),
                        "What this build does: `start`, `stop` or `delete` \
                         (ABODE_WORKSPACE_TRANSITION).",
                    ),
                ),
                (
                    "start_count",
                    computed(
                        number(),
                        "1 when the build starts the workspace, else 0: use it as the \
                         `count` of everything that only exists while the workspace runs.",
                    ),
                ),
                (
                    "template_id",
                    computed(string(), "The template's id (ABODE_TEMPLATE_ID)."),
                ),
                (
                    "template_name",
                    computed(string(), "The template's name (ABODE_TEMPLATE_NAME)."),
                ),
                (
                    "template_version",
                    computed(
                        string(),
                        "The template version being built (ABODE_TEMPLATE_VERSION).",
                    ),
                ),
                (
                    "is_prebuild",
                    computed(
                        boolean(),
                        "True when this build creates a prebuilt workspace that nobody has \
                         claimed yet (ABODE_IS_PREBUILD).",
                    ),
                ),
                (
                    "is_prebuild_claim",
                    computed(
                        boolean(),
                        "True when this build hands a prebuilt workspace to its new owner \
                         (ABODE_IS_PREBUILD_CLAIM).",
                    ),
                ),
                (
                    "prebuild_count",
                    computed(number(), "1 when `is_prebuild` is true, else 0."),
                ),
            ],
        )
    }

    fn read(&self, diags: &mut Diagnostics, _config: Self::State) -> Option<Self::State> {
        let context = build_context(diags)?;
        Some(WorkspaceState {
            id: context.workspace_id.clone().into(),
            name: context.workspace_name.clone().into(),
            transition: context.transition.as_str().to_string().into(),
            start_count: context.start_count().into(),
            template_id: context.template_id.clone().into(),
            template_name: context.template_name.clone().into(),
            template_version: context.template_version.clone().into(),
            is_prebuild: context.is_prebuild.into(),
            is_prebuild_claim: context.is_prebuild_claim.into(),
            prebuild_count: i64::from(context.is_prebuild).into(),
        })
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct OwnerState {
    id: Value<String>,
    name: Value<String>,
    full_name: Value<String>,
    email: Value<String>,
    groups: Value<Vec<String>>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OwnerDataSource;

impl DataSourceType for OwnerDataSource {
    type State = OwnerState;

    fn block(&self) -> Block {
        block(
            "The user who owns the workspace being built.",
            vec![
                (
                    "id",
                    computed(string(), "The owner's user id (ABODE_WORKSPACE_OWNER_ID)."),
                ),
                (
                    "name",
                    computed(
                        string(),
                        "The owner's user name (ABODE_WORKSPACE_OWNER_NAME).",
                    ),
                ),
                (
                    "full_name",
                    computed(
                        string(),
                        "The owner's full name, empty if unknown \
                         (ABODE_WORKSPACE_OWNER_FULL_NAME).",
                    ),
                ),
                (
                    "email",
                    computed(
                        string(),
                        "The owner's email, empty if unknown (ABODE_WORKSPACE_OWNER_EMAIL).",
                    ),
                ),
                (
                    "groups",
                    computed(
                        string_list(),
                        "The groups the owner belongs to (ABODE_WORKSPACE_OWNER_GROUPS).",
                    ),
                ),
            ],
        )
    }

    fn read(&self, diags: &mut Diagnostics, _config: Self::State) -> Option<Self::State> {
        let context = build_context(diags)?;
        Some(OwnerState {
            id: context.owner_id.into(),
            name: context.owner_name.into(),
            full_name: context.owner_full_name.into(),
            email: context.owner_email.into(),
            groups: context.owner_groups.into(),
        })
    }
}
