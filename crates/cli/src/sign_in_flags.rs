//! The server's sign-in flags: single sign-on through an OpenID provider
//! (`--oidc-*`, docs/deployment.md "Single sign-on with OpenID Connect")
//! and turning password sign-in off. What they mean, and the checks of
//! their values, are `abode-oidc`'s; this is only their spelling.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Sign-in")]
pub struct SignInFlags {
    /// The OpenID provider's issuer URL (https://; http:// only on
    /// loopback). Register ACCESS_URL/api/v1/oidc/callback there.
    #[arg(long, env = "ABODE_OIDC_ISSUER_URL", value_name = "URL")]
    oidc_issuer_url: Option<String>,
    /// The client id registered at the provider.
    #[arg(long, env = "ABODE_OIDC_CLIENT_ID", value_name = "ID")]
    oidc_client_id: Option<String>,
    /// The file holding the client's secret.
    #[arg(long, env = "ABODE_OIDC_CLIENT_SECRET_FILE", value_name = "FILE")]
    oidc_client_secret_file: Option<PathBuf>,
    /// The scopes asked for [default: openid,profile,email].
    #[arg(
        long,
        env = "ABODE_OIDC_SCOPES",
        value_delimiter = ',',
        value_name = "SCOPE,..."
    )]
    oidc_scopes: Vec<String>,
    /// Only email addresses at this domain may sign in (repeatable).
    #[arg(
        long = "oidc-email-domain",
        env = "ABODE_OIDC_EMAIL_DOMAIN",
        value_delimiter = ',',
        value_name = "DOMAIN"
    )]
    oidc_email_domains: Vec<String>,
    /// Only people in one of these groups (of --oidc-group-field) may sign
    /// in; the sessions of one who left them end at their next sign-in.
    #[arg(
        long,
        env = "ABODE_OIDC_ALLOWED_GROUPS",
        value_delimiter = ',',
        value_name = "GROUP,..."
    )]
    oidc_allowed_groups: Vec<String>,
    /// The claim that lists a person's groups (e.g. `groups`).
    #[arg(long, env = "ABODE_OIDC_GROUP_FIELD", value_name = "CLAIM")]
    oidc_group_field: Option<String>,
    /// A provider group's name in Abode (repeatable).
    #[arg(
        long,
        env = "ABODE_OIDC_GROUP_MAPPING",
        value_delimiter = ',',
        value_name = "PROVIDER=ABODE"
    )]
    oidc_group_mapping: Vec<String>,
    /// Create the groups the claim names that Abode lacks.
    #[arg(long, env = "ABODE_OIDC_GROUP_AUTO_CREATE")]
    oidc_group_auto_create: bool,
    /// The claim a new account's username comes from [default: preferred_username].
    #[arg(long, env = "ABODE_OIDC_USERNAME_FIELD", value_name = "CLAIM")]
    oidc_username_field: Option<String>,
    /// Create an account at a person's first sign-in (otherwise only
    /// people already linked may sign in).
    #[arg(long, env = "ABODE_OIDC_ALLOW_SIGNUPS")]
    oidc_allow_signups: bool,
    /// The sign-in button's text after "Sign in with" [default: OpenID Connect].
    #[arg(long, env = "ABODE_OIDC_SIGN_IN_TEXT", value_name = "TEXT")]
    oidc_sign_in_text: Option<String>,
    /// Accept email addresses the provider has not verified.
    #[arg(long, env = "ABODE_OIDC_IGNORE_EMAIL_VERIFIED")]
    oidc_ignore_email_verified: bool,
    /// Refuse password sign-in (the first user's setup and
    /// `abode server create-admin-user`/`reset-password` still work).
    #[arg(long, env = "ABODE_DISABLE_PASSWORD_AUTH")]
    disable_password_auth: bool,
}

impl SignInFlags {
    /// Whether password sign-in stays on.
    pub fn password_login(&self) -> bool {
        !self.disable_password_auth
    }

    /// The OpenID settings as given, checked by the server at start.
    pub fn oidc(&self) -> abode_api::OidcSettings {
        abode_api::OidcSettings {
            issuer_url: self.oidc_issuer_url.clone().filter(|url| !url.is_empty()),
            client_id: self.oidc_client_id.clone(),
            client_secret_file: self.oidc_client_secret_file.clone(),
            scopes: self.oidc_scopes.clone(),
            email_domains: self.oidc_email_domains.clone(),
            allowed_groups: self.oidc_allowed_groups.clone(),
            group_field: self.oidc_group_field.clone(),
            group_mapping: self.oidc_group_mapping.clone(),
            group_auto_create: self.oidc_group_auto_create,
            username_field: self.oidc_username_field.clone(),
            allow_signups: self.oidc_allow_signups,
            sign_in_text: self.oidc_sign_in_text.clone(),
            ignore_email_verified: self.oidc_ignore_email_verified,
        }
    }
}
