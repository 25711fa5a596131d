//! What `Identity` holds for single sign-on, in a module of its own: the
//! OpenID provider and the pending sign-ins, kept in the store (any server
//! may take the callback). The service (`service.rs`) builds it, the
//! sign-in flow (`oidc.rs`) uses it; neither names the other for it.

use abode_oidc::{Pending, PendingError, PendingStore, Provider};
use abode_store::{Store, StoreError};

/// The pending entries, kept in the store (any server may take the callback).
pub(crate) struct StorePending(pub(crate) Store);

impl PendingStore for StorePending {
    async fn put(
        &self,
        key: String,
        payload: String,
        expires_at: i64,
        now: i64,
    ) -> Result<(), PendingError> {
        match self
            .0
            .put_oidc_pending(&key, &payload, expires_at, now)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict(_)) => Err(PendingError::Full),
            Err(error) => Err(PendingError::Store(error.to_string())),
        }
    }

    async fn take(&self, key: String, now: i64) -> Result<Option<String>, PendingError> {
        self.0
            .take_oidc_pending(&key, now)
            .await
            .map_err(|error| PendingError::Store(error.to_string()))
    }
}

/// The provider and the flow's pending entries.
pub(crate) struct Oidc {
    pub(crate) provider: Provider,
    pub(crate) pending: Pending<StorePending>,
}
