//! Signing in to subdomain apps (docs/apps.md): an app on a host of its own
//! never sees the dashboard's cookie, so the dashboard mints a one-time
//! code for that host, which the host exchanges for a session of its own.
//! Only hashes of either are kept; a code is taken once (deleted as it is
//! read), and an expired token opens nothing.

/// What an app token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppTokenKind {
    /// Minted on the dashboard's origin, exchanged once on the app's host.
    Code,
    /// The app host's cookie.
    Session,
}

impl AppTokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AppTokenKind::Code => "code",
            AppTokenKind::Session => "session",
        }
    }
}

/// The app token methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! app_token_queries {
    () => {
        pub(crate) async fn create_app_token(
            &self,
            token_hash: &str,
            kind: AppTokenKind,
            user_id: &str,
            host: &str,
            expires_at: i64,
        ) -> Result<(), StoreError> {
            let now = self.now_ms();
            // Expired tokens go as new ones come.
            sqlx::query(&sql("DELETE FROM app_tokens WHERE expires_at <= ?"))
                .bind(now)
                .execute(&self.pool)
                .await
                .map_err(db_error("app token"))?;
            sqlx::query(&sql(
                "INSERT INTO app_tokens (token_hash, kind, user_id, host, created_at, expires_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
            ))
            .bind(token_hash)
            .bind(kind.as_str())
            .bind(user_id)
            .bind(host)
            .bind(now)
            .bind(expires_at)
            .execute(&self.pool)
            .await
            .map_err(db_error("app token"))?;
            Ok(())
        }

        pub(crate) async fn app_token_user(
            &self,
            token_hash: &str,
            kind: AppTokenKind,
            host: &str,
        ) -> Result<Option<String>, StoreError> {
            let now = self.now_ms();
            let query = match kind {
                // A code opens one session: it is gone once read.
                AppTokenKind::Code => {
                    "DELETE FROM app_tokens WHERE token_hash = ? AND kind = ? AND host = ? \
                 AND expires_at > ? RETURNING user_id"
                }
                AppTokenKind::Session => {
                    "SELECT user_id FROM app_tokens WHERE token_hash = ? AND kind = ? AND host = ? \
                 AND expires_at > ?"
                }
            };
            sqlx::query_scalar(&sql(query))
                .bind(token_hash)
                .bind(kind.as_str())
                .bind(host)
                .bind(now)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error("app token"))
        }
    };
}
pub(crate) use app_token_queries;
