//! Bearer tokens of users: sessions (one per login) and named API tokens.
//!
//! Both live in `api_tokens` and are found by the SHA-256 of the token, which
//! is all the database keeps. Whether a token is still good (expired, idle,
//! revoked) is the domain's decision: the store hands out the row with its
//! times and never filters by the clock, so that the policy (server flags)
//! lives in one place and an expired token can be told apart from an unknown
//! one. The queries are written once here, like those of the other domain
//! files (`users.rs`, `builds.rs`, ...), and expanded in each backend.

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// Made by a login; expires after the server's idle timeout and at the
    /// server's maximum session lifetime.
    Session,
    /// Made by `abode tokens create`: named, with its own expiry, no idle
    /// timeout.
    Api,
}

/// A stored token kind none of [`TokenKind`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown token kind `{0}`")]
pub struct UnknownTokenKind(pub String);

crate::named!(TokenKind, UnknownTokenKind, {
    Session => "session",
    Api => "api",
});

from_row! {
    /// A token's row, without its hash. Times are Unix milliseconds.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TokenRecord {
        pub id: String,
        pub user_id: String,
        pub kind: TokenKind,
        /// Set for API tokens only.
        pub name: Option<String>,
        pub created_at: i64,
        /// Recorded at most once per the caller's interval (see `touch_token`).
        pub last_used_at: Option<i64>,
        /// API tokens: when the token stops working. Sessions: `None` (their end
        /// follows from the server's policy).
        pub expires_at: Option<i64>,
        pub revoked_at: Option<i64>,
        /// What the token may be used for: `all` for sessions.
        pub scope: crate::TokenScope,
    }
}

/// What a bearer token stands for, read in one query: the token's row, its
/// user and the roles the user holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub token: TokenRecord,
    pub user: crate::User,
    pub roles: crate::Roles,
}

from_row! {
    /// One row of the credential query: the token's columns (`t_*`), the user,
    /// and one of their roles (none: a user without roles).
    pub(crate) struct CredentialRow {
        t_id: String,
        t_user_id: String,
        t_kind: TokenKind,
        t_name: Option<String>,
        t_created_at: i64,
        t_last_used_at: Option<i64>,
        t_expires_at: Option<i64>,
        t_revoked_at: Option<i64>,
        t_scope: crate::TokenScope,
        user: crate::User = flatten,
        granted: Option<crate::Role>,
    }
}

/// Folds the rows of one token (one per role of its user) into a credential.
pub(crate) fn credential(rows: Vec<CredentialRow>) -> Option<Credential> {
    let roles = rows.iter().filter_map(|row| row.granted).collect();
    let row = rows.into_iter().next()?;
    Some(Credential {
        token: TokenRecord {
            id: row.t_id,
            user_id: row.t_user_id,
            kind: row.t_kind,
            name: row.t_name,
            created_at: row.t_created_at,
            last_used_at: row.t_last_used_at,
            expires_at: row.t_expires_at,
            revoked_at: row.t_revoked_at,
            scope: row.t_scope,
        },
        user: row.user,
        roles,
    })
}

/// A new named API token.
#[derive(Debug, Clone)]
pub struct NewApiToken {
    pub user_id: String,
    pub name: String,
    /// SHA-256 of the token, hex.
    pub token_hash: String,
    pub expires_at: i64,
    pub scope: crate::TokenScope,
}

pub(crate) const TOKEN_COLUMNS: &str =
    "id, user_id, kind, name, created_at, last_used_at, expires_at, revoked_at, scope";

/// The token methods of [`crate::Store`]; expanded inside each backend's
/// `impl` next to the other domains' macros.
macro_rules! token_queries {
    () => {
    pub(crate) async fn token_by_hash(&self, token_hash: &str) -> Result<TokenRecord, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?"
        )))
        .bind(token_hash)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("token"))
    }

    pub(crate) async fn credential_by_hash(
        &self,
        token_hash: &str,
    ) -> Result<Credential, StoreError> {
        let rows: Vec<CredentialRow> = sqlx::query_as(&sql(
            "SELECT t.id AS t_id, t.user_id AS t_user_id, t.kind AS t_kind, t.name AS t_name, \
             t.created_at AS t_created_at, t.last_used_at AS t_last_used_at, \
             t.expires_at AS t_expires_at, t.revoked_at AS t_revoked_at, t.scope AS t_scope, \
             u.id, u.username, u.email, u.role, u.password_hash, u.created_at, u.system, u.status, u.last_seen_at, \
             r.role AS granted \
             FROM api_tokens t JOIN users u ON u.id = t.user_id \
             LEFT JOIN user_roles r ON r.user_id = u.id \
             WHERE t.token_hash = ?",
        ))
        .bind(token_hash)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("token"))?;
        credential(rows).ok_or(StoreError::NotFound("token"))
    }

    pub(crate) async fn touch_token(
        &self,
        token_id: &str,
        now: i64,
        not_since: i64,
    ) -> Result<(), StoreError> {
        // Only when the last recorded use is older than `not_since`: every
        // request authenticates, and most of them should stay reads.
        sqlx::query(&sql(
            "UPDATE api_tokens SET last_used_at = ? WHERE id = ? \
             AND (last_used_at IS NULL OR last_used_at < ?)",
        ))
        .bind(now)
        .bind(token_id)
        .bind(not_since)
        .execute(&self.pool)
        .await
        .map_err(db_error("token"))?;
        Ok(())
    }

    pub(crate) async fn revoke_token(&self, token_id: &str, now: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(&sql(
            "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
        ))
        .bind(now)
        .bind(token_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("token"))?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn create_api_token(
        &self,
        token: &NewApiToken,
    ) -> Result<TokenRecord, StoreError> {
        let id = new_id();
        sqlx::query(&sql(
            "INSERT INTO api_tokens (id, user_id, token_hash, created_at, kind, name, expires_at, scope) \
             VALUES (?, ?, ?, ?, 'api', ?, ?, ?)",
        ))
        .bind(&id)
        .bind(&token.user_id)
        .bind(&token.token_hash)
        .bind(self.now_ms())
        .bind(&token.name)
        .bind(token.expires_at)
        .bind(token.scope.to_string())
        .execute(&self.pool)
        .await
        .map_err(db_error("token name"))?;
        sqlx::query_as(&sql(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE id = ?"
        )))
        .bind(&id)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("token"))
    }

    pub(crate) async fn list_api_token_page(
        &self,
        user_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<TokenRecord>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(TOKEN_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let rows: Vec<TokenRecord> = sqlx::query_as(&sql(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens \
             WHERE user_id = ?1 AND kind = 'api' AND revoked_at IS NULL \
             AND (?2 IS NULL OR name > ?2) ORDER BY name LIMIT ?3"
        )))
        .bind(user_id)
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("token"))?;
        let name = |token: &TokenRecord| token.name.clone().unwrap_or_default();
        Ok(paged(rows, limit, |token| {
            encode_cursor(TOKEN_CURSOR, &[&name(token)])
        }))
    }

    pub(crate) async fn revoke_api_token(
        &self,
        user_id: &str,
        name: &str,
        now: i64,
    ) -> Result<TokenRecord, StoreError> {
        sqlx::query_as(&sql(&format!(
            "UPDATE api_tokens SET revoked_at = ? \
             WHERE user_id = ? AND kind = 'api' AND name = ? AND revoked_at IS NULL \
             RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(now)
        .bind(user_id)
        .bind(name)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("token"))
        .and_then(|rows| crate::error::returned_row(rows, "token"))
    }
    };
}

pub(crate) use token_queries;
