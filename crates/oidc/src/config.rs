//! The provider's settings as the server's flags give them, checked once at
//! start: every mistake is one line, all of them at once, so that an
//! operator fixes a configuration in one go rather than one restart per
//! error.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

/// Where the provider sends the browser back: the access URL plus this.
/// Fixed, so that it is what an admin registers at the provider.
pub const CALLBACK_PATH: &str = "/api/v1/oidc/callback";

/// The scopes asked for when none are given.
pub const DEFAULT_SCOPES: &[&str] = &["openid", "profile", "email"];

/// The claim a new account's username comes from when none is given.
pub const DEFAULT_USERNAME_FIELD: &str = "preferred_username";

/// The flags as given (`abode server --oidc-*`), before any check.
#[derive(Debug, Clone, Default)]
pub struct OidcSettings {
    pub issuer_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret_file: Option<PathBuf>,
    /// Empty: [`DEFAULT_SCOPES`].
    pub scopes: Vec<String>,
    pub email_domains: Vec<String>,
    pub allowed_groups: Vec<String>,
    pub group_field: Option<String>,
    /// `idp-group=abode-group`, each.
    pub group_mapping: Vec<String>,
    pub group_auto_create: bool,
    pub username_field: Option<String>,
    pub allow_signups: bool,
    pub sign_in_text: Option<String>,
    pub ignore_email_verified: bool,
}

/// What group sync does, with `--oidc-group-field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSync {
    /// The claim that lists a person's groups.
    pub field: String,
    /// The provider's group name to Abode's; with a mapping, only the
    /// groups it names sync (none: every name passes as it is).
    pub mapping: BTreeMap<String, String>,
    /// Groups named in the claim that Abode lacks are created.
    pub auto_create: bool,
}

/// A checked configuration.
#[derive(Clone)]
pub struct OidcConfig {
    /// As given, without a trailing `/` (the `iss` an ID token must carry
    /// is compared with the discovery document's, which must be this).
    pub issuer_url: String,
    pub client_id: String,
    client_secret: String,
    pub scopes: Vec<String>,
    /// Lowercase, without `@`; empty: any domain.
    pub email_domains: Vec<String>,
    /// Empty: anyone the provider vouches for (after the domains).
    pub allowed_groups: Vec<String>,
    pub groups: Option<GroupSync>,
    pub username_field: String,
    pub allow_signups: bool,
    /// The button's text, "Sign in with ...".
    pub sign_in_text: String,
    pub ignore_email_verified: bool,
    /// `ACCESS_URL` + [`CALLBACK_PATH`].
    pub redirect_uri: String,
}

impl fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The client secret is never printed.
        f.debug_struct("OidcConfig")
            .field("issuer_url", &self.issuer_url)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("email_domains", &self.email_domains)
            .field("allowed_groups", &self.allowed_groups)
            .field("groups", &self.groups)
            .field("username_field", &self.username_field)
            .field("allow_signups", &self.allow_signups)
            .field("sign_in_text", &self.sign_in_text)
            .field("ignore_email_verified", &self.ignore_email_verified)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// One mistake in the flags, one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("--{0} needs --oidc-issuer-url (OpenID Connect is off without it)")]
    NeedsIssuer(&'static str),
    #[error("--oidc-issuer-url `{0}` is not an http:// or https:// URL with a host (and no query or fragment)")]
    IssuerNotUrl(String),
    #[error("--oidc-issuer-url `{0}` is http://: only a loopback issuer (127.0.0.1, [::1], localhost) may be; use https://")]
    IssuerNotHttps(String),
    #[error("--oidc-client-id is missing (the client id registered at the provider)")]
    NoClientId,
    #[error("--oidc-client-secret-file is missing (a file holding the client secret registered at the provider)")]
    NoSecretFile,
    #[error("cannot read the OIDC client secret file {path}: {reason}")]
    SecretUnreadable { path: String, reason: String },
    #[error("the OIDC client secret file {0} is empty")]
    SecretEmpty(String),
    #[error("--oidc-scopes must include `openid` (it is what makes the provider answer with an ID token)")]
    NoOpenidScope,
    #[error("--oidc-scopes has `{0}`, which is not a scope (no spaces, quotes or backslashes)")]
    BadScope(String),
    #[error("--oidc-email-domain `{0}` is not a domain (example.com, without `@`)")]
    BadDomain(String),
    #[error("--oidc-{0} needs --oidc-group-field (the claim that lists a person's groups)")]
    NeedsGroupField(&'static str),
    #[error("--oidc-group-mapping `{0}` is not PROVIDER_GROUP=ABODE_GROUP")]
    BadMapping(String),
    #[error("--oidc-{0} must not be empty")]
    EmptyField(&'static str),
    #[error("--oidc-sign-in-text must be 1-64 characters with no control characters")]
    BadSignInText,
    #[error("--access-url `{0}` is not where browsers reach this server (http(s)://host with a name or address people use): the provider must send them back to ACCESS_URL{CALLBACK_PATH}")]
    AccessUrl(String),
}

/// Every mistake found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl OidcConfig {
    /// The configuration of `settings`, or every mistake in it; `None`
    /// when OpenID Connect is off (no issuer and no other flag). Reads the
    /// client secret file.
    pub fn from_settings(
        settings: &OidcSettings,
        access_url: &str,
    ) -> Result<Option<OidcConfig>, ConfigErrors> {
        let mut errors = Vec::new();
        let Some(issuer) = settings.issuer_url.as_deref() else {
            for (set, flag) in [
                (settings.client_id.is_some(), "oidc-client-id"),
                (
                    settings.client_secret_file.is_some(),
                    "oidc-client-secret-file",
                ),
                (!settings.scopes.is_empty(), "oidc-scopes"),
                (!settings.email_domains.is_empty(), "oidc-email-domain"),
                (!settings.allowed_groups.is_empty(), "oidc-allowed-groups"),
                (settings.group_field.is_some(), "oidc-group-field"),
                (!settings.group_mapping.is_empty(), "oidc-group-mapping"),
                (settings.group_auto_create, "oidc-group-auto-create"),
                (settings.username_field.is_some(), "oidc-username-field"),
                (settings.allow_signups, "oidc-allow-signups"),
                (settings.sign_in_text.is_some(), "oidc-sign-in-text"),
                (settings.ignore_email_verified, "oidc-ignore-email-verified"),
            ] {
                if set {
                    errors.push(ConfigError::NeedsIssuer(flag));
                }
            }
            return if errors.is_empty() {
                Ok(None)
            } else {
                Err(ConfigErrors(errors))
            };
        };
        let issuer_url = issuer.trim_end_matches('/').to_string();
        if let Err(error) = check_issuer(issuer) {
            errors.push(error);
        }
        let client_id = settings.client_id.clone().unwrap_or_default();
        if client_id.trim().is_empty() {
            errors.push(ConfigError::NoClientId);
        }
        let client_secret = match &settings.client_secret_file {
            None => {
                errors.push(ConfigError::NoSecretFile);
                String::new()
            }
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => {
                    let secret = text.trim_end_matches(['\n', '\r']).to_string();
                    if secret.trim().is_empty() {
                        errors.push(ConfigError::SecretEmpty(path.display().to_string()));
                    }
                    secret
                }
                Err(error) => {
                    errors.push(ConfigError::SecretUnreadable {
                        path: path.display().to_string(),
                        reason: error.to_string(),
                    });
                    String::new()
                }
            },
        };
        let scopes: Vec<String> = if settings.scopes.is_empty() {
            DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect()
        } else {
            settings.scopes.clone()
        };
        for scope in &scopes {
            if scope.is_empty()
                || scope
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
            {
                errors.push(ConfigError::BadScope(scope.clone()));
            }
        }
        if !scopes.iter().any(|scope| scope == "openid") {
            errors.push(ConfigError::NoOpenidScope);
        }
        let mut email_domains = Vec::new();
        for domain in &settings.email_domains {
            let lower = domain.trim().to_ascii_lowercase();
            let shaped = !lower.is_empty()
                && !lower.contains('@')
                && !lower.starts_with('.')
                && !lower.ends_with('.')
                && lower
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
            if shaped {
                email_domains.push(lower);
            } else {
                errors.push(ConfigError::BadDomain(domain.clone()));
            }
        }
        let group_field = settings.group_field.as_deref().map(str::trim);
        if group_field.is_some_and(str::is_empty) {
            errors.push(ConfigError::EmptyField("group-field"));
        }
        if group_field.is_none() {
            for (set, flag) in [
                (!settings.allowed_groups.is_empty(), "allowed-groups"),
                (!settings.group_mapping.is_empty(), "group-mapping"),
                (settings.group_auto_create, "group-auto-create"),
            ] {
                if set {
                    errors.push(ConfigError::NeedsGroupField(flag));
                }
            }
        }
        let mut mapping = BTreeMap::new();
        for pair in &settings.group_mapping {
            match pair.split_once('=') {
                Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
                    mapping.insert(from.trim().to_string(), to.trim().to_string());
                }
                _ => errors.push(ConfigError::BadMapping(pair.clone())),
            }
        }
        let username_field = settings
            .username_field
            .clone()
            .unwrap_or_else(|| DEFAULT_USERNAME_FIELD.to_string());
        if username_field.trim().is_empty() {
            errors.push(ConfigError::EmptyField("username-field"));
        }
        let sign_in_text = settings
            .sign_in_text
            .clone()
            .unwrap_or_else(|| "OpenID Connect".to_string());
        let length = sign_in_text.chars().count();
        if !(1..=64).contains(&length) || sign_in_text.chars().any(char::is_control) {
            errors.push(ConfigError::BadSignInText);
        }
        let redirect_uri = match callback_url(access_url) {
            Some(url) => url,
            None => {
                errors.push(ConfigError::AccessUrl(access_url.to_string()));
                String::new()
            }
        };
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        Ok(Some(OidcConfig {
            issuer_url,
            client_id,
            client_secret,
            scopes,
            email_domains,
            allowed_groups: settings
                .allowed_groups
                .iter()
                .map(|g| g.trim().to_string())
                .collect(),
            groups: group_field.map(|field| GroupSync {
                field: field.to_string(),
                mapping,
                auto_create: settings.group_auto_create,
            }),
            username_field,
            allow_signups: settings.allow_signups,
            sign_in_text,
            ignore_email_verified: settings.ignore_email_verified,
            redirect_uri,
        }))
    }

    /// The client secret, for the code exchange only.
    pub(crate) fn client_secret(&self) -> &str {
        &self.client_secret
    }

    /// A configuration for tests of this crate and its users.
    #[doc(hidden)]
    pub fn for_tests(issuer_url: &str, client_id: &str, secret: &str) -> OidcConfig {
        OidcConfig {
            issuer_url: issuer_url.trim_end_matches('/').to_string(),
            client_id: client_id.to_string(),
            client_secret: secret.to_string(),
            scopes: DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect(),
            email_domains: Vec::new(),
            allowed_groups: Vec::new(),
            groups: None,
            username_field: DEFAULT_USERNAME_FIELD.to_string(),
            allow_signups: true,
            sign_in_text: "OpenID Connect".to_string(),
            ignore_email_verified: false,
            redirect_uri: format!("http://127.0.0.1:7080{CALLBACK_PATH}"),
        }
    }
}

/// `scheme://host[:port]` and its host, of an `http(s)://` URL.
fn split_url(url: &str) -> Option<(&'static str, String)> {
    let lower = url.to_ascii_lowercase();
    let (scheme, rest) = if let Some(rest) = lower.strip_prefix("https://") {
        ("https", rest.to_string())
    } else if let Some(rest) = lower.strip_prefix("http://") {
        ("http", rest.to_string())
    } else {
        return None;
    };
    let authority = rest.split('/').next().unwrap_or_default().to_string();
    if authority.is_empty()
        || authority.contains('@')
        || url.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return None;
    }
    Some((scheme, authority))
}

/// The host of an authority, without port or IPv6 brackets.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    authority.split(':').next().unwrap_or_default()
}

/// Whether `host` is this machine, by name or address.
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

fn check_issuer(issuer: &str) -> Result<(), ConfigError> {
    let shown: String = issuer.chars().take(200).collect();
    let Some((scheme, authority)) = split_url(issuer) else {
        return Err(ConfigError::IssuerNotUrl(shown));
    };
    if issuer.contains('?') || issuer.contains('#') {
        return Err(ConfigError::IssuerNotUrl(shown));
    }
    if scheme == "http" && !is_loopback_host(host_of(&authority)) {
        return Err(ConfigError::IssuerNotHttps(shown));
    }
    Ok(())
}

/// `ACCESS_URL` + [`CALLBACK_PATH`], when the access URL is one a browser
/// can be sent back to (not an unspecified address such as `0.0.0.0`).
pub fn callback_url(access_url: &str) -> Option<String> {
    let (_, authority) = split_url(access_url)?;
    let host = host_of(&authority);
    if host.is_empty()
        || host
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_unspecified())
    {
        return None;
    }
    Some(format!(
        "{}{CALLBACK_PATH}",
        access_url.trim_end_matches('/')
    ))
}

impl PartialEq for OidcConfig {
    fn eq(&self, other: &OidcConfig) -> bool {
        format!("{self:?}") == format!("{other:?}") && self.client_secret == other.client_secret
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn settings(secret: &std::path::Path) -> OidcSettings {
        OidcSettings {
            issuer_url: Some("https://id.example.com/realms/dev".into()),
            client_id: Some("abode".into()),
            client_secret_file: Some(secret.to_path_buf()),
            ..OidcSettings::default()
        }
    }

    #[test]
    fn each_mistake_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let access = "https://abode.example.com";
        type Change = fn(&mut OidcSettings, &std::path::Path);
        let cases: Vec<(&str, Change, Option<&str>)> = vec![
            ("valid", |_, _| {}, None),
            (
                "http issuer elsewhere",
                |s, _| s.issuer_url = Some("http://id.example.com".into()),
                Some("only a loopback issuer"),
            ),
            (
                "http issuer on loopback",
                |s, _| s.issuer_url = Some("http://127.0.0.1:9000/".into()),
                None,
            ),
            (
                "http issuer on [::1]",
                |s, _| s.issuer_url = Some("http://[::1]:9000".into()),
                None,
            ),
            (
                "not a url",
                |s, _| s.issuer_url = Some("id.example.com".into()),
                Some("is not an http:// or https:// URL"),
            ),
            (
                "no client id",
                |s, _| s.client_id = None,
                Some("--oidc-client-id is missing"),
            ),
            (
                "no secret file",
                |s, _| s.client_secret_file = None,
                Some("--oidc-client-secret-file is missing"),
            ),
            (
                "missing secret file",
                |s, d| s.client_secret_file = Some(d.join("nope")),
                Some("cannot read the OIDC client secret file"),
            ),
            (
                "empty secret file",
                |s, d| s.client_secret_file = Some(d.join("empty")),
                Some("is empty"),
            ),
            (
                "no openid scope",
                |s, _| s.scopes = vec!["email".into()],
                Some("must include `openid`"),
            ),
            (
                "bad domain",
                |s, _| s.email_domains = vec!["@example.com".into()],
                Some("is not a domain"),
            ),
            (
                "allowed groups without a field",
                |s, _| s.allowed_groups = vec!["dev".into()],
                Some("--oidc-allowed-groups needs --oidc-group-field"),
            ),
            (
                "bad mapping",
                |s, _| {
                    s.group_field = Some("groups".into());
                    s.group_mapping = vec!["nope".into()];
                },
                Some("is not PROVIDER_GROUP=ABODE_GROUP"),
            ),
            (
                "long sign-in text",
                |s, _| s.sign_in_text = Some("x".repeat(65)),
                Some("--oidc-sign-in-text"),
            ),
        ];
        for (name, change, expected) in cases {
            let mut given = settings(&secret);
            change(&mut given, dir.path());
            let result = OidcConfig::from_settings(&given, access);
            match (result, expected) {
                (Ok(Some(_)), None) => {}
                (Err(errors), Some(says)) => {
                    assert_eq!(errors.0.len(), 1, "{name}: {errors}");
                    let line = errors.to_string();
                    assert!(line.contains(says), "{name}: {line}");
                    assert!(!line.contains('\n'), "{name}: {line}");
                }
                (other, _) => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn nothing_set_is_off_and_a_lone_flag_says_what_it_needs() {
        assert_eq!(
            OidcConfig::from_settings(&OidcSettings::default(), "http://x"),
            Ok(None)
        );
        let lone = OidcSettings {
            client_id: Some("abode".into()),
            allow_signups: true,
            ..OidcSettings::default()
        };
        let errors = OidcConfig::from_settings(&lone, "http://x").unwrap_err();
        assert_eq!(errors.0.len(), 2, "{errors}");
        assert!(errors
            .to_string()
            .contains("--oidc-client-id needs --oidc-issuer-url"));
    }

    #[test]
    fn the_callback_is_the_access_url_plus_the_fixed_path() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret").unwrap();
        let config = OidcConfig::from_settings(&settings(&secret), "https://abode.example.com/")
            .unwrap()
            .unwrap();
        assert_eq!(
            config.redirect_uri,
            "https://abode.example.com/api/v1/oidc/callback"
        );
        assert_eq!(config.client_secret(), "s3cret");
        assert!(!format!("{config:?}").contains("s3cret"));
        let errors =
            OidcConfig::from_settings(&settings(&secret), "http://0.0.0.0:7080").unwrap_err();
        assert!(errors.to_string().contains("--access-url"), "{errors}");
    }
}
