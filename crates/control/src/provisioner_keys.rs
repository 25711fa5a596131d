//! Provisioner keys: how an external provisioner daemon (`abode provisioner
//! start --key-file`) proves it may take the jobs of the tags its key names.
//!
//! An owner makes a key (`abode provisioner keys create NAME --tag k=v`):
//! the secret is shown once and only its SHA-256 is kept, as for API tokens.
//! A daemon sends the secret; [`ProvisionerKeys::for_secret`] finds
//! the key by the hash of what was sent, so the secret is never compared,
//! logged or stored. Deleting a key ends every daemon that uses it at its
//! next request. Keys belong to nobody: only owners make, list and delete
//! them, since a key's tags decide which builds (and which cloud
//! credentials) its daemon gets.
//!
//! A service of its own (`Control::provisioner_keys()`): it holds the
//! store and the audit log, and nothing of the rest of the control plane.

use abode_store::{page_size, NewProvisionerKey, Page, ProvisionerKeyRow, Store, StoreError};

use crate::audit::{audit_event, Audit};
use crate::authz::Action;
use crate::{secrets, tags, validate_name, Caller, ControlError};

/// A provisioner key, without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisionerKey {
    pub id: String,
    pub name: String,
    /// `key=value`, sorted.
    pub tags: Vec<String>,
    /// Unix ms.
    pub created_at: i64,
    /// The username of the owner who made it.
    pub created_by: String,
}

impl TryFrom<ProvisionerKeyRow> for ProvisionerKey {
    type Error = ControlError;

    fn try_from(row: ProvisionerKeyRow) -> Result<Self, Self::Error> {
        let tags = tags::tags_of_json(&row.tags)
            .map_err(ControlError::Internal)?
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        Ok(ProvisionerKey {
            id: row.id,
            name: row.name,
            tags,
            created_at: row.created_at,
            created_by: row.created_by_name,
        })
    }
}

/// The answer to a daemon whose key is unknown (never made, or deleted).
const UNKNOWN_KEY: &str =
    "invalid provisioner key; ask an owner for a new one (abode provisioner keys create)";

/// The provisioner keys.
pub struct ProvisionerKeys {
    store: Store,
    audit: Audit,
}

impl ProvisionerKeys {
    pub fn new(store: Store) -> ProvisionerKeys {
        ProvisionerKeys {
            audit: Audit::new(store.clone()),
            store,
        }
    }

    /// Whether the caller may make provisioner keys (asked before a
    /// request's body is read).
    pub fn may_create(&self, caller: &Caller) -> Result<(), ControlError> {
        Ok(caller.authorize(Action::ProvisionerKeyCreate, None)?)
    }

    /// Makes a provisioner key named `name` whose daemons offer `tags`
    /// (`key=value`); returns it with its secret, which is never shown
    /// again. Owners only; audited without the secret.
    pub async fn create(
        &self,
        caller: &Caller,
        name: &str,
        tags: &[String],
    ) -> Result<(ProvisionerKey, String), ControlError> {
        caller.authorize(Action::ProvisionerKeyCreate, None)?;
        validate_name("provisioner key name", name)?;
        let tags = tags::parse_tags(tags).map_err(ControlError::BadRequest)?;
        let secret = secrets::new_provisioner_key();
        let row = match self
            .store
            .create_provisioner_key(&NewProvisionerKey {
                name: name.to_string(),
                secret_hash: secrets::token_hash(&secret),
                tags: tags::tags_json(&tags),
                created_by: caller.user.id.clone(),
            })
            .await
        {
            Ok(row) => row,
            Err(StoreError::Conflict(_)) => {
                return Err(ControlError::Conflict(format!(
                    "a provisioner key named \"{name}\" exists; delete it or pick another name"
                )))
            }
            Err(other) => return Err(other.into()),
        };
        self.audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "provisioner_key.create",
                "provisioner_key",
                name,
                "success",
                Some(format!("tags={}", tags.join(","))),
            ))
            .await;
        Ok((ProvisionerKey::try_from(row)?, secret))
    }

    /// One page of the provisioner keys, by name. Owners only.
    pub async fn list(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<ProvisionerKey>, ControlError> {
        caller.authorize(Action::ProvisionerKeyList, None)?;
        let page = self
            .store
            .list_provisioner_key_page(after, page_size(limit))
            .await?;
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(ProvisionerKey::try_from)
                .collect::<Result<_, _>>()?,
            next: page.next,
        })
    }

    /// Deletes the provisioner key `name`: from now on its secret is
    /// refused. Owners only; audited.
    pub async fn delete(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<ProvisionerKey, ControlError> {
        caller.authorize(Action::ProvisionerKeyDelete, None)?;
        let row = match self.store.delete_provisioner_key(name).await {
            Ok(row) => row,
            Err(StoreError::NotFound(_)) => {
                return Err(ControlError::NotFound(format!(
                    "there is no provisioner key named \"{name}\" (abode provisioner keys list)"
                )))
            }
            Err(other) => return Err(other.into()),
        };
        self.audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "provisioner_key.delete",
                "provisioner_key",
                name,
                "success",
                None,
            ))
            .await;
        ProvisionerKey::try_from(row)
    }

    /// The key a daemon's secret stands for, found by the secret's hash;
    /// `Unauthorized` for a secret no key has (never made, or deleted).
    pub async fn for_secret(&self, secret: &str) -> Result<ProvisionerKey, ControlError> {
        match self
            .store
            .provisioner_key_by_hash(&secrets::token_hash(secret))
            .await
        {
            Ok(row) => ProvisionerKey::try_from(row),
            Err(StoreError::NotFound(_)) => Err(ControlError::Unauthorized(UNKNOWN_KEY.into())),
            Err(other) => Err(other.into()),
        }
    }
}
