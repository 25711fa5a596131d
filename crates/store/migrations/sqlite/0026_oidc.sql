-- OpenID Connect sign-in (issue 30). A person who signs in through the
-- identity provider is linked to their account by the provider's issuer and
-- subject, never by email (which a person can change at the provider).
CREATE TABLE user_oidc_links (
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_oidc_links_user ON user_oidc_links (user_id);

-- What a sign-in keeps between the redirect to the provider and the
-- callback (its nonce and PKCE verifier), and the CLI's one-time codes: found
-- by the SHA-256 of the state or code, taken once, for minutes. In the
-- database so that the callback may reach any server of a deployment.
CREATE TABLE oidc_pending (
    key_hash   TEXT PRIMARY KEY,
    payload    TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX oidc_pending_expiry ON oidc_pending (expires_at);
