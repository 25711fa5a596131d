//! `abode_metadata`: extra facts about another resource (its cost, key/value
//! items) that the platform shows next to the workspace. Pure state: nothing
//! outside Terraform is touched.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tf_provider::schema::{Block, NestedBlock};
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use crate::plumbing::ResourceType;
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

impl ResourceType for MetadataResource {
    type State = MetadataState;

    fn block(&self) -> Block {
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
        schema
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
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

    fn defaults(&self, state: &mut Self::State, _config: &Self::State) {
        fill_defaults(state);
    }
}
