//! `abode_protect`: a pure annotation naming a resource the plan guard must
//! protect. Its effect lives entirely in the guard, which reads the `resource_id`
//! expression's references from the plan's `configuration`; here it only has to
//! exist, validate `mode`, and never touch anything.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::Schema;
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::schema::{attribute_error, block, computed, known, required, string, with_default};

pub(crate) const MODES: [&str; 2] = ["confirm", "block"];
const DEFAULT_MODE: &str = "confirm";

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ProtectState {
    id: Value<String>,
    resource_id: Value<String>,
    mode: Value<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ProtectResource;

fn check_mode(diags: &mut Diagnostics, state: &ProtectState) {
    if let Some(mode) = known(&state.mode) {
        if !MODES.contains(&mode.as_str()) {
            attribute_error(
                diags,
                "mode",
                format!("abode_protect mode `{mode}` is not one of `confirm`, `block`"),
            );
        }
    }
}

#[async_trait]
impl Resource for ProtectResource {
    type State<'a> = ProtectState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "Marks a resource as protected: Abode's plan guard holds (`confirm`) or fails \
                 (`block`) any start or stop build whose plan would delete or replace it. A \
                 workspace deletion is always allowed. Creating, reading or deleting this \
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
                ],
            ),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        check_mode(diags, &config);
        Some(())
    }

    async fn read<'a>(
        &self,
        _diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        Some((state, private_state))
    }

    async fn plan_create<'a>(
        &self,
        diags: &mut Diagnostics,
        proposed_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let mut state = proposed_state;
        check_mode(diags, &state);
        state.id = Value::Unknown;
        if state.mode.is_null() {
            state.mode = DEFAULT_MODE.to_string().into();
        }
        Some((state, Value::Null))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior_state: Self::State<'a>,
        proposed_state: Self::State<'a>,
        config_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let mut state = proposed_state;
        check_mode(diags, &state);
        state.id = prior_state.id;
        if config_state.mode.is_null() {
            state.mode = DEFAULT_MODE.to_string().into();
        }
        Some((state, prior_private_state, vec![]))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<Self::PrivateState<'a>> {
        Some(prior_private_state)
    }

    async fn create<'a>(
        &self,
        _diags: &mut Diagnostics,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let mut state = planned_state;
        state.id = uuid::Uuid::new_v4().to_string().into();
        Some((state, planned_private_state))
    }

    async fn update<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        Some((planned_state, planned_private_state))
    }

    async fn destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        _planned_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        Some(())
    }
}
