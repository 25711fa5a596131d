//! The plumbing every resource and data source shares, written once:
//! [`Plumbing`] turns a [`ResourceType`] (a schema, config checks, plan-time
//! values and, for the resources with side effects, hooks on read, create
//! and destroy) into a `tf_provider` resource, and a [`DataSourceType`] (a
//! schema, config checks and a read) into a data source.
//!
//! What it does for every resource:
//! - validate, plan create and plan update run the type's config checks,
//!   and both plans its defaults;
//! - a planned create has an unknown `id`; a planned update keeps the prior
//!   `id`, unless an attribute forces a replacement (then it is unknown);
//! - create gives the resource a new random `id` (before the type's hook,
//!   which may choose another);
//! - update and plan destroy change nothing; read, destroy and import do
//!   what the type says (by default: keep the state, touch nothing, refuse).
//!
//! No resource has a private state, and none reads provider meta.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tf_provider::schema::{Block, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, DataSource, Diagnostics, Resource};

/// What one resource type adds to the shared plumbing.
#[async_trait]
pub(crate) trait ResourceType: Send + Sync {
    /// The resource's attributes as Terraform stores them.
    type State: Serialize + DeserializeOwned + Clone + Send;

    /// The resource's schema (its version is 1).
    fn block(&self) -> Block;

    /// The state's `id` attribute.
    fn id(state: &mut Self::State) -> &mut Value<String>;

    /// The checks of a configuration, at validate and at every plan; each
    /// failed one is an attribute error.
    fn check(&self, diags: &mut Diagnostics, state: &Self::State);

    /// Fills in the defaults of what `config` leaves out, at every plan.
    /// At a create, `config` is the proposed state (for a new resource,
    /// the configuration's values); at an update, the configuration.
    fn defaults(&self, _state: &mut Self::State, _config: &Self::State) {}

    /// The computed values a new resource's plan shows; `None` refuses the
    /// plan.
    fn plan_create(&self, _diags: &mut Diagnostics, _state: &mut Self::State) -> Option<()> {
        Some(())
    }

    /// The computed values a changed resource's plan shows, and the
    /// attributes whose change replaces it; `None` refuses the plan.
    fn plan_update(
        &self,
        _diags: &mut Diagnostics,
        _prior: &Self::State,
        _state: &mut Self::State,
    ) -> Option<Vec<AttributePath>> {
        Some(vec![])
    }

    /// The resource as it is now; `None` when it is gone.
    async fn read(&self, _diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        Some(state)
    }

    /// Makes the planned resource real; `None` on failure.
    async fn create(&self, _diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        Some(state)
    }

    /// Removes what the resource made; `None` on failure.
    async fn destroy(&self, _diags: &mut Diagnostics, _prior: Self::State) -> Option<()> {
        Some(())
    }

    /// The state of an existing resource Terraform imports by `id`.
    async fn import(&self, diags: &mut Diagnostics, _id: String) -> Option<Self::State> {
        diags.root_error_short("Import is not supported");
        None
    }
}

/// What one data source adds to the shared plumbing.
pub(crate) trait DataSourceType: Send + Sync {
    /// The data source's attributes, as configured and as read.
    type State: Serialize + DeserializeOwned + Send;

    /// The data source's schema (its version is 1).
    fn block(&self) -> Block;

    /// The checks of a configuration, at validate.
    fn check(&self, _diags: &mut Diagnostics, _config: &Self::State) {}

    /// The data source's values for this build; `None` on failure.
    fn read(&self, diags: &mut Diagnostics, config: Self::State) -> Option<Self::State>;
}

/// A [`ResourceType`] served as a Terraform resource, or a
/// [`DataSourceType`] as a data source.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Plumbing<T>(pub(crate) T);

#[async_trait]
impl<T: ResourceType> Resource for Plumbing<T> {
    type State<'a> = T::State;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: self.0.block(),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        self.0.check(diags, &config);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let state = self.0.read(diags, state).await?;
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
        self.0.check(diags, &state);
        let config = state.clone();
        self.0.defaults(&mut state, &config);
        self.0.plan_create(diags, &mut state)?;
        *T::id(&mut state) = Value::Unknown;
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
        let mut prior = prior_state;
        let mut state = proposed_state;
        self.0.check(diags, &state);
        self.0.defaults(&mut state, &config_state);
        let replace = self.0.plan_update(diags, &prior, &mut state)?;
        *T::id(&mut state) = if replace.is_empty() {
            std::mem::replace(T::id(&mut prior), Value::Null)
        } else {
            Value::Unknown
        };
        Some((state, prior_private_state, replace))
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
        diags: &mut Diagnostics,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let mut state = planned_state;
        *T::id(&mut state) = uuid::Uuid::new_v4().to_string().into();
        let state = self.0.create(diags, state).await?;
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
        diags: &mut Diagnostics,
        prior_state: Self::State<'a>,
        _planned_private_state: Self::PrivateState<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        self.0.destroy(diags, prior_state).await
    }

    async fn import<'a>(
        &self,
        diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let state = self.0.import(diags, id).await?;
        Some((state, Value::Null))
    }
}

#[async_trait]
impl<T: DataSourceType> DataSource for Plumbing<T> {
    type State<'a> = T::State;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: self.0.block(),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        self.0.check(diags, &config);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        self.0.read(diags, config)
    }
}
