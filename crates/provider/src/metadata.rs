//! `abode_metadata`: extra facts about another resource (its cost, key/value
//! items) that the platform shows next to the workspace. Pure state: nothing
//! outside Terraform is touched.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{NestedBlock, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::schema::{
    attribute_error, block, boolean, computed, known, number, optional, required, string,
    with_default,
};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct MetadataItem {
    key: Value<String>,
    value: Value<String>,
    sensitive: Value<bool>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct MetadataState {
    id: Value<String>,
    resource_id: Value<String>,
    daily_cost: Value<i64>,
    item: Value<Vec<Value<MetadataItem>>>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MetadataResource;

fn check_config(diags: &mut Diagnostics, state: &MetadataState) {
    let mut seen = BTreeSet::new();
    for item in known(&state.item).into_iter().flatten().filter_map(known) {
        if let Some(key) = known(&item.key) {
            if !seen.insert(key.clone()) {
                attribute_error(
                    diags,
                    "item",
                    format!("abode_metadata item key `{key}` appears more than once"),
                );
            }
        }
    }
    if let Some(cost) = known(&state.daily_cost) {
        if *cost < 0 {
            attribute_error(
                diags,
                "daily_cost",
                format!("abode_metadata daily_cost must be 0 or more, not {cost}"),
            );
        }
    }
}

/// Items leave `sensitive` out to mean false; the plan should say so.
fn fill_defaults(state: &mut MetadataState) {
    if let Value::Value(items) = &mut state.item {
        for item in items.iter_mut() {
            if let Value::Value(item) = item {
                if item.sensitive.is_null() {
                    item.sensitive = false.into();
                }
            }
        }
    }
}

#[async_trait]
impl Resource for MetadataResource {
    type State<'a> = MetadataState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let mut schema = block(
            "Facts about another resource shown by the platform with the workspace: \
             key/value items and a daily cost.",
            vec![
                ("id", computed(string(), "Identifier of this metadata.")),
                (
                    "resource_id",
                    required(string(), "The `id` of the resource these facts describe."),
                ),
                (
                    "daily_cost",
                    optional(
                        number(),
                        "What the resource costs per day, in your own unit.",
                    ),
                ),
            ],
        );
        schema.blocks.insert(
            "item".into(),
            NestedBlock::List(block(
                "One fact.",
                vec![
                    (
                        "key",
                        required(string(), "The fact's name, unique in this resource."),
                    ),
                    ("value", optional(string(), "The fact's value.")),
                    (
                        "sensitive",
                        with_default(
                            boolean(),
                            "Hide the value in the platform's UI and API (default false). The \
                             value is still stored in the Terraform state.",
                        ),
                    ),
                ],
            )),
        );
        Some(Schema {
            version: 1,
            block: schema,
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        check_config(diags, &config);
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
        check_config(diags, &state);
        fill_defaults(&mut state);
        state.id = Value::Unknown;
        Some((state, Value::Null))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior_state: Self::State<'a>,
        proposed_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let mut state = proposed_state;
        check_config(diags, &state);
        fill_defaults(&mut state);
        state.id = prior_state.id;
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
