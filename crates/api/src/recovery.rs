//! `abode server create-admin-user` and `abode server reset-password`: the
//! way back in for an owner locked out, run on the server's machine against
//! the database its servers use (stopped or running). Opening the database
//! refuses one of a newer release before anything is written, as a server
//! does.

use std::path::Path;

use abode_control::{Identity, IdentityConfig};
use abode_store::Store;

use crate::server::{ServerError, DATABASE_FILE};

/// One recovery, with the password already read.
pub enum Recovery {
    CreateAdminUser {
        username: String,
        email: String,
        password: String,
    },
    ResetPassword {
        username: String,
        password: String,
    },
    /// Re-encrypts every linked account's tokens under a new key
    /// (docs/external-auth.md).
    RotateExternalAuthKey {
        old: Box<abode_control::external_auth::TokenCipher>,
        new: Box<abode_control::external_auth::TokenCipher>,
    },
}

/// Runs `recovery` against the SQLite database of `data_dir`, or the
/// PostgreSQL database at `database_url`; one line saying what was done.
pub async fn recover(
    data_dir: &Path,
    database_url: Option<&str>,
    recovery: Recovery,
) -> Result<String, ServerError> {
    let store = match database_url {
        Some(url) => Store::open_postgres(url).await?,
        None => {
            let database = data_dir.join(DATABASE_FILE);
            // Opening creates a database: a mistyped data dir would get a
            // new, empty platform with one admin in it.
            if !database.exists() {
                return Err(ServerError::NoDatabase(database.display().to_string()));
            }
            Store::open_sqlite(&database).await?
        }
    };
    let identity = Identity::new(
        store.clone(),
        abode_clock::Clock::system(),
        IdentityConfig::default(),
    );
    let done = match recovery {
        Recovery::CreateAdminUser {
            username,
            email,
            password,
        } => identity
            .create_admin_user(&username, &email, &password)
            .await
            .map(|user| format!("created {} (owner, member)", user.username))
            .map_err(Into::into),
        Recovery::ResetPassword { username, password } => identity
            .reset_password(&username, &password)
            .await
            .map(|ended| format!("set a new password for {username}; {ended} session(s) ended"))
            .map_err(Into::into),
        Recovery::RotateExternalAuthKey { old, new } => {
            abode_control::external_auth::rotate_key(&store, &old, &new)
                .await
                .map(|count| {
                    format!(
                        "re-encrypted {count} linked account(s) under key {}; start the servers with the new --external-auth-key-file (links under way must be started again)",
                        new.key_id()
                    )
                })
        }
    };
    store.close().await;
    done.map_err(ServerError::Identity)
}
