//! `abode_protect`: a pure annotation naming a resource the plan guard must
//! protect. Its effect lives entirely in the guard, which reads the `resource_id`
//! expression's references from the plan's `configuration`; here it only has to
//! exist, validate `mode`, and never touch anything.

use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use abode_contract::retain;

use crate::plumbing::ResourceType;
use crate::schema::{
    attribute_error, block, boolean, computed, known, optional, required, string, with_default,
};

pub(crate) const MODES: [&str; 2] = ["confirm", "block"];
const DEFAULT_MODE: &str = "confirm";

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ProtectState {
    id: Value<String>,
    resource_id: Value<String>,
    mode: Value<String>,
    // Absent from states written before retain on delete.
    #[serde(default)]
    on_delete: Value<String>,
    #[serde(default)]
    retain_for: Value<String>,
    #[serde(default)]
    expire: Value<String>,
    // Absent from states written before snapshots (issue 47).
    #[serde(default)]
    snapshot: Value<bool>,
    #[serde(default)]
    snapshot_command: Value<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ProtectResource;

/// The defaults of a rule the template leaves out.
fn fill_defaults(state: &mut ProtectState, config: &ProtectState) {
    if config.mode.is_null() {
        state.mode = DEFAULT_MODE.to_string().into();
    }
    if config.on_delete.is_null() {
        state.on_delete = "destroy".to_string().into();
    }
    if config.expire.is_null() {
        state.expire = "hold".to_string().into();
    }
}

impl ResourceType for ProtectResource {
    type State = ProtectState;

    fn block(&self) -> Block {
        block(
            "Marks a resource as protected: Abode's plan guard holds (`confirm`) or fails \
             (`block`) any start or stop build whose plan would delete or replace it. A \
             workspace deletion destroys it, unless `on_delete = \"retain\"`. Creating, reading or deleting this \
             annotation touches nothing else.",
            vec![
                ("id", computed(string(), "Identifier of this annotation.")),
                (
                    "resource_id",
                    required(
                        string(),
                        "A reference to the protected resource's `id`, such as \
                         `abode_volume.home.id`: the guard reads which resource it is from \
                         the reference in the plan's configuration, not from the value.",
                    ),
                ),
                (
                    "mode",
                    with_default(
                        string(),
                        "`confirm` (default): a protected delete or replace waits for an \
                         explicit confirmation. `block`: it fails the build.",
                    ),
                ),
                (
                    "on_delete",
                    with_default(
                        string(),
                        "What an intentional workspace delete does with the resource: \
                         `destroy` (default) or `retain` (Terraform forgets it, Abode keeps \
                         a record of it that its owner can adopt into a new workspace, \
                         assign or destroy: `abode retained`).",
                    ),
                ),
                (
                    "retain_for",
                    optional(
                        string(),
                        "How long a retained resource is kept (`30d`, `12h`, `90m`); \
                         for ever when left out.",
                    ),
                ),
                (
                    "expire",
                    with_default(
                        string(),
                        "When `retain_for` is up: `hold` (default), its destroy waits for \
                         a person's confirmation; `destroy`, it is destroyed (the owner is \
                         told a week before).",
                    ),
                ),
                (
                    "snapshot",
                    optional(
                        boolean(),
                        "Whether a confirmed plan that destroys or replaces the resource first \
                         archives it: an `abode_volume`'s files go to a retained record of kind \
                         `snapshot` (true by default for an `abode_volume`; other types have \
                         no files Abode can archive). If the archive fails, nothing is applied.",
                    ),
                ),
                (
                    "snapshot_command",
                    optional(
                        string(),
                        "A command (`sh -c`) the provisioner runs, sandboxed like Terraform and \
                         with its environment, before it applies a confirmed plan that destroys \
                         or replaces the resource, with the resource's attributes in \
                         `ABODE_SNAPSHOT_*` and `ABODE_ATTR_*` variables (docs/retain.md), e.g. \
                         `aws ec2 create-snapshot --volume-id \"$ABODE_ATTR_ID\"`. If it \
                         fails, nothing is applied.",
                    ),
                ),
            ],
            )
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        if let Some(mode) = known(&state.mode) {
            if !MODES.contains(&mode.as_str()) {
                attribute_error(
                    diags,
                    "mode",
                    format!("abode_protect mode `{mode}` is not one of `confirm`, `block`"),
                );
            }
        }
        if let Some(on_delete) = known(&state.on_delete) {
            if !retain::ON_DELETE.contains(&on_delete.as_str()) {
                attribute_error(
                    diags,
                    "on_delete",
                    format!(
                        "abode_protect on_delete `{on_delete}` is not one of `destroy`, `retain`"
                    ),
                );
            }
        }
        if let Some(expire) = known(&state.expire) {
            if !retain::EXPIRE.contains(&expire.as_str()) {
                attribute_error(
                    diags,
                    "expire",
                    format!("abode_protect expire `{expire}` is not one of `hold`, `destroy`"),
                );
            }
        }
        if let Some(command) = known(&state.snapshot_command) {
            if command.trim().is_empty() {
                attribute_error(
                    diags,
                    "snapshot_command",
                    "abode_protect snapshot_command is empty: leave it out, or give the command to run"
                        .to_string(),
                );
            }
        }
        if let Some(retain_for) = known(&state.retain_for) {
            if retain::parse_retain_for(retain_for).is_none() {
                attribute_error(
                    diags,
                    "retain_for",
                    format!(
                        "abode_protect retain_for `{retain_for}` is not a duration such as `30d`, `12h` or `90m` (at most ten years)"
                    ),
                );
            }
        }
    }

    fn defaults(&self, state: &mut Self::State, config: &Self::State) {
        fill_defaults(state, config);
    }
}
