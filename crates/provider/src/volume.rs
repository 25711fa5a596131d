//! `abode_volume`: a workspace's persistent storage on the local machine, a
//! directory under `ABODE_VOLUMES_DIR`. It is the resource Abode promises never to
//! lose by accident, so it behaves like a real disk: a new `name` is a new disk
//! (replacement), a directory removed by hand reads as gone (the plan shows the
//! drift), and only a destroy removes the data.
//!
//! A volume is its `name` under the volumes dir of the machine that runs the
//! build: `path` is worked out from them at every read, plan and destroy,
//! never taken from the state. A data dir copied to another place (a
//! restore beside the original) then manages the copy's volumes, never the
//! original's, and an absolute path an older state kept is brought up to
//! date at the next refresh. Nothing outside the volumes dir is touched.

use std::path::PathBuf;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

use crate::plumbing::ResourceType;
use crate::schema::{
    attribute_error, block, build_context, computed, known, optional, required, string, string_map,
    StringMap,
};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct VolumeState {
    id: Value<String>,
    name: Value<String>,
    labels: StringMap,
    path: Value<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct VolumeResource;

/// A name that is one plain path component, so a volume can never point outside
/// the volumes directory nor collide with the hidden entries Abode may keep there.
pub(crate) fn check_volume_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        // The value itself is not echoed: it may come from a sensitive
        // variable, and diagnostics reach the build log as they are.
        Err(format!(
            "abode_volume name must be 1 to 128 letters, digits, `.`, `_` or `-`, not starting with `.` (the given name has {} characters)",
            name.chars().count()
        ))
    }
}

/// The volume's directory on this machine: its name under the volumes dir
/// of the build's environment contract; `None` (with an error) when the
/// name or the contract is missing or bad.
fn volume_path(diags: &mut Diagnostics, state: &VolumeState) -> Option<PathBuf> {
    let name = known(&state.name)?;
    if let Err(message) = check_volume_name(name) {
        attribute_error(diags, "name", message);
        return None;
    }
    let context = build_context(diags)?;
    Some(context.volumes_dir.join(name))
}

fn check_name(diags: &mut Diagnostics, state: &VolumeState) -> bool {
    match known(&state.name).map(|name| check_volume_name(name)) {
        Some(Err(message)) => {
            attribute_error(diags, "name", message);
            false
        }
        _ => true,
    }
}

#[async_trait]
impl ResourceType for VolumeResource {
    type State = VolumeState;

    fn block(&self) -> Block {
        block(
            "Persistent local storage: the directory ABODE_VOLUMES_DIR/<name>. Keep it out \
             of `count = start_count` so it survives stops, and protect it with \
             `abode_protect`. Destroying it deletes the directory and everything in it.",
            vec![
                (
                    "id",
                    computed(
                        string(),
                        "Identifier of this volume, new for every directory created.",
                    ),
                ),
                (
                    "name",
                    required(
                        string(),
                        "The directory's name under ABODE_VOLUMES_DIR (letters, digits, \
                         `.`, `_`, `-`). Changing it replaces the volume: a new, empty \
                         directory, and the old one deleted. Include the workspace id to keep \
                         workspaces apart.",
                    ),
                ),
                (
                    "labels",
                    optional(
                        string_map(),
                        "Free-form labels; changing them updates in place.",
                    ),
                ),
                (
                    "path",
                    computed(string(), "The volume directory's absolute path."),
                ),
            ],
        )
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        check_name(diags, state);
    }

    fn plan_create(&self, diags: &mut Diagnostics, state: &mut Self::State) -> Option<()> {
        // A bad name (its error is the check's) refuses the plan.
        if known(&state.name).is_some_and(|name| check_volume_name(name).is_err()) {
            return None;
        }
        let context = build_context(diags)?;
        state.path = match known(&state.name) {
            Some(name) => context.volumes_dir.join(name).display().to_string().into(),
            None => Value::Unknown,
        };
        Some(())
    }

    fn plan_update(
        &self,
        diags: &mut Diagnostics,
        prior: &Self::State,
        state: &mut Self::State,
    ) -> Option<Vec<AttributePath>> {
        if state.name != prior.name {
            state.path = Value::Unknown;
            return Some(vec![AttributePath::new("name")]);
        }
        // Where this machine keeps it (`read` brought it up to date).
        state.path = match volume_path(diags, state) {
            Some(path) => path.display().to_string().into(),
            None => prior.path.clone(),
        };
        Some(vec![])
    }

    async fn read(&self, diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        let mut state = state;
        // Gone (None) makes Terraform record the deletion as drift.
        let path = volume_path(diags, &state)?;
        if path.is_dir() {
            state.path = path.display().to_string().into();
            Some(state)
        } else {
            None
        }
    }

    async fn create(&self, diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        let mut state = state;
        let path = volume_path(diags, &state)?;
        state.path = path.display().to_string().into();
        if let Some(parent) = path.parent() {
            if let Err(err) = std::fs::create_dir_all(parent) {
                diags.root_error(
                    "Cannot create the volumes directory",
                    format!("{}: {err}", parent.display()),
                );
                return None;
            }
        }
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {
                diags.root_warning(
                    "Volume directory already existed",
                    format!(
                        "{} was already there (from an earlier workspace or by hand); it is now \
                         managed by this abode_volume and its content is kept.",
                        path.display()
                    ),
                );
            }
            Err(err) => {
                diags.root_error(
                    "Cannot create the volume directory",
                    format!("{}: {err}", path.display()),
                );
                return None;
            }
        }
        Some(state)
    }

    /// Imported by its name (`import { to = abode_volume.home, id = "NAME" }`):
    /// how Abode brings a retained volume back into a workspace. Only a
    /// directory that is already there is imported; the new state gets an id
    /// of its own.
    async fn import(&self, diags: &mut Diagnostics, id: String) -> Option<Self::State> {
        if let Err(message) = check_volume_name(&id) {
            diags.root_error("Cannot import the volume", message);
            return None;
        }
        let context = build_context(diags)?;
        let path = context.volumes_dir.join(&id);
        if !path.is_dir() {
            diags.root_error(
                "Cannot import the volume",
                format!("no volume directory {} on this machine", path.display()),
            );
            return None;
        }
        let state = VolumeState {
            id: uuid::Uuid::new_v4().to_string().into(),
            name: id.into(),
            labels: Value::Null,
            path: path.display().to_string().into(),
        };
        Some(state)
    }

    async fn destroy(&self, diags: &mut Diagnostics, prior_state: Self::State) -> Option<()> {
        if known(&prior_state.name).is_none() {
            return Some(());
        }
        // This machine's volume of that name, whatever path the state kept.
        let path = volume_path(diags, &prior_state)?;
        let path = path.display().to_string();
        // A workspace that ran in its volume owns it: the supervisor, which
        // gave it, removes it, and only for this build's workspace.
        if let Some(socket) = build_context(diags)?.process_supervisor {
            let request = abode_contract::supervisor::Request::RemoveVolume { dir: path };
            return match crate::process::ask(socket, request, std::time::Duration::from_secs(600))
                .await
            {
                Ok(abode_contract::supervisor::Reply::Stopped) => Some(()),
                other => {
                    crate::process::supervisor_error(diags, other);
                    None
                }
            };
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => Some(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(()),
            Err(err) => {
                diags.root_error(
                    "Cannot delete the volume directory",
                    format!("{path}: {err}"),
                );
                None
            }
        }
    }
}
