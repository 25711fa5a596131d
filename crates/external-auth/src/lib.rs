//! The external auth providers a server is configured with
//! (`--external-auth-config FILE`, docs/external-auth.md): the accounts
//! (GitHub, GitLab, Bitbucket, any OAuth 2.0 server) people link so that
//! their workspaces clone and push as them.
//!
//! The file is read once, at start, and checked whole: every mistake is one
//! line naming the provider and the key, and a server with any refuses to
//! start. What a type implies (its URLs, scopes, the Git hosts it serves) is
//! filled in here, so the rest of the platform sees one complete
//! [`Provider`] per table. The client secret is read from its own file and
//! never shown: `Debug` leaves it out.
//!
//! # Modules
//!
//! `lib.rs` reads the configuration: `[[provider]]` tables of GitHub's,
//! GitLab's and Bitbucket's types, with their URLs, scopes and hosts implied,
//! or `oauth2` naming all of them; a client secret is read from its own file
//! and is an unknown key in the configuration itself. `oauth.rs` is the
//! exchanges with a provider: the authorization URL with PKCE `S256`, the code
//! and refresh grants with the client's credentials in the body, revocation;
//! blocking ureq with Abode's one TLS trust, no redirects, bounded answers, no
//! token in an error. `cipher.rs` seals tokens at rest (AES-256-GCM from ring,
//! the key from `--external-auth-key-file`, written `v1:KEY_ID:hex`), binding
//! each to its person and provider as associated data. The server lists the
//! secret files and the key among the files no Terraform sandbox may see. The
//! control plane's `ExternalAuth` service links, refreshes, hands out and
//! revokes with them.
//!
//! `Provider::serves` says which provider answers a Git URL. The host is what
//! follows the last `@`, since Git writes a remote's decoded user name into its
//! prompt; a user name of anything but `[A-Za-z0-9._~-]`, or a URL with `%`,
//! `\`, `?`, `#`, spaces or non-ASCII, is served by no provider; Git's
//! path-less `https://HOST` prompt is read as `HOST/`.
//!
//! # What it keeps
//!
//! - A configuration is checked whole: every mistake is one line naming the
//!   provider (its position, its id when it has a good one) and the key, and a
//!   server with any does not start (the table of bad files in its tests, and
//!   the end-to-end test).
//! - A prompt URL whose real host is not a provider's never gets that
//!   provider's token (tested with decoded-user-name vectors).
//! - A sealed token opens only under its key, for its owner, unchanged (tested
//!   with every other owner, key and a changed byte of nonce, ciphertext and
//!   tag).
//! - It links no store, control plane or identity
//!   (`crates/abode/tests/house.rs`).

pub mod cipher;
pub mod oauth;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use toml::Value;
use url::Url;

/// One `[[provider]]` table, complete.
#[derive(Clone)]
pub struct Provider {
    /// The name templates and people use (`abode_external_auth "ID"`).
    pub id: String,
    pub kind: ProviderKind,
    pub client_id: String,
    /// Read from `client_secret_file`.
    pub client_secret: String,
    /// Where it was read from, as the file names it (relative ones are
    /// beside the configuration: [`secret_path`]).
    pub client_secret_file: PathBuf,
    pub auth_url: Url,
    pub token_url: Url,
    pub revoke_url: Option<Url>,
    pub validate_url: Option<Url>,
    /// Where the device flow starts, for a provider that offers only it.
    pub device_auth_url: Option<Url>,
    pub scopes: Vec<String>,
    /// The Git URLs (`https://HOST/...`) whose credentials it gives.
    pub regex: regex::Regex,
    pub device_flow: bool,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("client_id", &self.client_id)
            .field("client_secret", &"(sensitive)")
            .field("auth_url", &self.auth_url.as_str())
            .field("token_url", &self.token_url.as_str())
            .field("scopes", &self.scopes)
            .field("regex", &self.regex.as_str())
            .field("device_flow", &self.device_flow)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// Whether it gives the credentials of `url`, a URL as Git asks for
    /// its credentials (`https://HOST`, `https://USER@HOST`, with a path
    /// when Git was told to send paths): its `regex` matches the URL in its
    /// normal form ([`git_url`]). A URL that is not one Git writes for an
    /// honest remote is served by no provider.
    pub fn serves(&self, url: &str) -> bool {
        git_url(url).is_some_and(|url| self.regex.is_match(&url))
    }
}

/// The URL Git asks credentials for, as `scheme://host[:port]/path` (a
/// `/` for no path, the host in lower case, no user name), or `None` for
/// anything else. Git percent-decodes a remote's user name into its prompt:
/// `https://github.com%2F@evil.example` is asked as
/// `https://github.com/@evil.example`, whose host a URL parser reads as
/// `github.com`; so the host is what follows the last `@`, a user name is
/// only the characters a URL's user name may have unencoded, and `%`, `\`,
/// `?`, `#`, spaces, controls and non-ASCII are refused outright.
pub fn git_url(url: &str) -> Option<String> {
    let refused = |c: char| {
        !c.is_ascii() || c.is_ascii_whitespace() || c.is_ascii_control() || "%\\?#".contains(c)
    };
    if url.chars().any(refused) {
        return None;
    }
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let rest = match rest.rsplit_once('@') {
        Some((user, rest)) => {
            let user_ok = !user.is_empty()
                && user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._~-".contains(c));
            if !user_ok {
                return None;
            }
            rest
        }
        None => rest,
    };
    let (host, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
    if !host_ok {
        return None;
    }
    Some(format!("{scheme}://{}{path}", host.to_ascii_lowercase()))
}

/// What kind of server a provider is; each but `oauth2` implies its URLs,
/// scopes and hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    GitHub,
    GitLab,
    Bitbucket,
    OAuth2,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 4] = [
        ProviderKind::GitHub,
        ProviderKind::GitLab,
        ProviderKind::Bitbucket,
        ProviderKind::OAuth2,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::GitHub => "github",
            ProviderKind::GitLab => "gitlab",
            ProviderKind::Bitbucket => "bitbucket",
            ProviderKind::OAuth2 => "oauth2",
        }
    }

    /// The user name Git sends with the token as its password: what each
    /// host expects of an OAuth token (GitHub's `x-access-token`, GitLab's
    /// `oauth2`, Bitbucket's `x-token-auth`).
    pub fn git_username(self) -> &'static str {
        match self {
            ProviderKind::GitHub => "x-access-token",
            ProviderKind::GitLab | ProviderKind::OAuth2 => "oauth2",
            ProviderKind::Bitbucket => "x-token-auth",
        }
    }

    /// What the type implies, for the keys a table leaves out.
    fn defaults(self) -> Defaults {
        match self {
            ProviderKind::GitHub => Defaults {
                auth_url: Some("https://github.com/login/oauth/authorize"),
                token_url: Some("https://github.com/login/oauth/access_token"),
                revoke_url: None,
                validate_url: Some("https://api.github.com/user"),
                device_auth_url: Some("https://github.com/login/device/code"),
                scopes: &["repo", "workflow"],
                regex: Some(r"^https://github\.com(/.*)?$"),
            },
            ProviderKind::GitLab => Defaults {
                auth_url: Some("https://gitlab.com/oauth/authorize"),
                token_url: Some("https://gitlab.com/oauth/token"),
                revoke_url: Some("https://gitlab.com/oauth/revoke"),
                validate_url: Some("https://gitlab.com/oauth/token/info"),
                device_auth_url: Some("https://gitlab.com/oauth/authorize_device"),
                scopes: &["write_repository"],
                regex: Some(r"^https://gitlab\.com(/.*)?$"),
            },
            ProviderKind::Bitbucket => Defaults {
                auth_url: Some("https://bitbucket.org/site/oauth2/authorize"),
                token_url: Some("https://bitbucket.org/site/oauth2/access_token"),
                revoke_url: None,
                validate_url: Some("https://api.bitbucket.org/2.0/user"),
                device_auth_url: None,
                scopes: &["repository:write"],
                regex: Some(r"^https://bitbucket\.org(/.*)?$"),
            },
            ProviderKind::OAuth2 => Defaults {
                auth_url: None,
                token_url: None,
                revoke_url: None,
                validate_url: None,
                device_auth_url: None,
                scopes: &[],
                regex: None,
            },
        }
    }
}

struct Defaults {
    auth_url: Option<&'static str>,
    token_url: Option<&'static str>,
    revoke_url: Option<&'static str>,
    validate_url: Option<&'static str>,
    device_auth_url: Option<&'static str>,
    scopes: &'static [&'static str],
    regex: Option<&'static str>,
}

/// Every mistake of a configuration, one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct ConfigErrors(pub Vec<String>);

/// The keys a `[[provider]]` table may have.
const KEYS: [&str; 12] = [
    "id",
    "type",
    "client_id",
    "client_secret_file",
    "auth_url",
    "token_url",
    "revoke_url",
    "validate_url",
    "device_auth_url",
    "scopes",
    "regex",
    "device_flow",
];

/// The longest id: it is part of URLs and of the data source's name.
const MAX_ID: usize = 64;

/// Reads and checks the configuration file at `path` and the client
/// secrets it names (relative paths are the file's directory's).
pub fn load(path: &Path) -> Result<Vec<Provider>, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigErrors(vec![format!(
            "{}: cannot read the external auth configuration: {error}",
            path.display()
        )])
    })?;
    parse(&text, |file| {
        let file = secret_path(path, file);
        std::fs::read_to_string(&file).map_err(|error| format!("{}: {error}", file.display()))
    })
}

/// Checks a configuration's text; `read_secret` reads a client secret file.
pub fn parse<F>(text: &str, read_secret: F) -> Result<Vec<Provider>, ConfigErrors>
where
    F: Fn(&Path) -> Result<String, String>,
{
    let document: toml::Table = text
        .parse()
        .map_err(|error: toml::de::Error| ConfigErrors(vec![one_line(&error.to_string())]))?;
    let mut errors = Vec::new();
    for key in document.keys().filter(|key| *key != "provider") {
        errors.push(format!(
            "unknown top-level key `{key}`: the file holds [[provider]] tables"
        ));
    }
    let tables = match document.get("provider") {
        None => Vec::new(),
        Some(Value::Array(tables)) => tables.iter().collect(),
        Some(_) => {
            errors.push("`provider` must be [[provider]] tables".into());
            Vec::new()
        }
    };
    let mut providers = Vec::new();
    let mut ids = BTreeSet::new();
    for (index, table) in tables.into_iter().enumerate() {
        let mut reader = TableReader {
            position: index + 1,
            id: None,
            errors: Vec::new(),
        };
        let Some(table) = table.as_table() else {
            errors.push(format!("provider {}: not a table", index + 1));
            continue;
        };
        if let Some(provider) = reader.provider(table, &read_secret) {
            if !ids.insert(provider.id.clone()) {
                reader.fail("id", "is used by an earlier provider too");
            } else {
                providers.push(provider);
            }
        }
        errors.append(&mut reader.errors);
    }
    if errors.is_empty() {
        Ok(providers)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// A TOML error on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads one table, collecting its mistakes.
struct TableReader {
    position: usize,
    id: Option<String>,
    errors: Vec<String>,
}

impl TableReader {
    fn fail(&mut self, key: &str, what: &str) {
        let which = match &self.id {
            Some(id) => format!("provider {} (id \"{id}\")", self.position),
            None => format!("provider {}", self.position),
        };
        self.errors.push(format!("{which}: {key} {what}"));
    }

    fn text(&mut self, table: &toml::Table, key: &str) -> Option<String> {
        match table.get(key)? {
            Value::String(text) => Some(text.clone()),
            _ => {
                self.fail(key, "must be a string");
                None
            }
        }
    }

    /// A URL of `key`, or the type's default; http only to this machine.
    fn url(&mut self, table: &toml::Table, key: &str, default: Option<&str>) -> Option<Url> {
        let text = self.text(table, key).or(default.map(str::to_string))?;
        match Url::parse(&text) {
            Ok(url) if url_allowed(&url) => Some(url),
            Ok(_) => {
                self.fail(
                    key,
                    &format!("must be an https:// URL (http:// only to this machine): {text}"),
                );
                None
            }
            Err(error) => {
                self.fail(key, &format!("is not a URL ({error}): {text}"));
                None
            }
        }
    }

    fn provider<F>(&mut self, table: &toml::Table, read_secret: &F) -> Option<Provider>
    where
        F: Fn(&Path) -> Result<String, String>,
    {
        let id = self.text(table, "id");
        match &id {
            Some(id) if valid_id(id) => self.id = Some(id.clone()),
            Some(id) => self.fail(
                "id",
                &format!(
                    "must be 1 to {MAX_ID} lowercase letters, digits, '-' and '_', starting with a letter: {id:?}"
                ),
            ),
            None => self.fail("id", "is missing"),
        }
        for key in table.keys().filter(|key| !KEYS.contains(&key.as_str())) {
            self.fail(key, "is not a key of a provider (docs/external-auth.md)");
        }
        let kind = match self.text(table, "type") {
            Some(kind) => match ProviderKind::ALL.into_iter().find(|k| k.as_str() == kind) {
                Some(kind) => Some(kind),
                None => {
                    self.fail(
                        "type",
                        &format!("{kind:?} is not one of github, gitlab, bitbucket, oauth2"),
                    );
                    None
                }
            },
            None => {
                self.fail("type", "is missing (github, gitlab, bitbucket or oauth2)");
                None
            }
        };
        let defaults = kind.map_or(ProviderKind::OAuth2.defaults(), ProviderKind::defaults);
        let client_id = match self.text(table, "client_id") {
            Some(client_id) if !client_id.trim().is_empty() => Some(client_id),
            _ => {
                self.fail("client_id", "is missing");
                None
            }
        };
        let secret_file = self.text(table, "client_secret_file");
        let client_secret = match &secret_file {
            Some(file) => match read_secret(Path::new(file)) {
                Ok(secret) if !secret.trim().is_empty() => Some(secret.trim().to_string()),
                Ok(_) => {
                    self.fail("client_secret_file", &format!("{file} is empty"));
                    None
                }
                Err(error) => {
                    self.fail("client_secret_file", &format!("cannot be read: {error}"));
                    None
                }
            },
            None => {
                self.fail(
                    "client_secret_file",
                    "is missing (the client secret is read from a file, never written here)",
                );
                None
            }
        };
        // What a type implies is asked for only once the type is known.
        let known = kind.is_some();
        let required = |reader: &mut Self, key: &str, default: Option<&str>| {
            let present = table.contains_key(key) || default.is_some();
            let url = reader.url(table, key, default);
            if !present && known {
                reader.fail(key, "is missing (an oauth2 provider names all its URLs)");
            }
            url
        };
        let auth_url = required(self, "auth_url", defaults.auth_url);
        let token_url = required(self, "token_url", defaults.token_url);
        let revoke_url = self.url(table, "revoke_url", defaults.revoke_url);
        let validate_url = self.url(table, "validate_url", defaults.validate_url);
        let device_auth_url = self.url(table, "device_auth_url", defaults.device_auth_url);
        let scopes = match table.get("scopes") {
            None => Some(defaults.scopes.iter().map(|s| s.to_string()).collect()),
            Some(Value::Array(items)) => {
                let scopes: Option<Vec<String>> = items
                    .iter()
                    .map(|item| item.as_str().map(str::to_string))
                    .collect();
                if scopes.is_none() {
                    self.fail("scopes", "must be a list of strings");
                }
                scopes
            }
            Some(_) => {
                self.fail("scopes", "must be a list of strings");
                None
            }
        };
        let regex = match self
            .text(table, "regex")
            .or(defaults.regex.map(str::to_string))
        {
            Some(text) => match regex::Regex::new(&text) {
                Ok(regex) => Some(regex),
                Err(error) => {
                    self.fail(
                        "regex",
                        &format!(
                            "is not a regular expression: {}",
                            one_line(&error.to_string())
                        ),
                    );
                    None
                }
            },
            None if !known => None,
            None => {
                self.fail(
                    "regex",
                    "is missing (the Git URLs this provider's tokens are for, e.g. '^https://git\\.example\\.com/')",
                );
                None
            }
        };
        let device_flow = match table.get("device_flow") {
            None => false,
            Some(Value::Boolean(flag)) => *flag,
            Some(_) => {
                self.fail("device_flow", "must be true or false");
                false
            }
        };
        if device_flow && device_auth_url.is_none() && !table.contains_key("device_auth_url") {
            self.fail(
                "device_auth_url",
                "is missing: device_flow needs where the device flow starts",
            );
        }
        if !self.errors.is_empty() {
            return None;
        }
        Some(Provider {
            id: self.id.clone()?,
            kind: kind?,
            client_id: client_id?,
            client_secret: client_secret?,
            client_secret_file: PathBuf::from(secret_file?),
            auth_url: auth_url?,
            token_url: token_url?,
            revoke_url,
            validate_url,
            device_auth_url,
            scopes: scopes?,
            regex: regex?,
            device_flow,
        })
    }
}

/// An id: 1 to [`MAX_ID`] of `a-z`, `0-9`, `-`, `_`, starting with a letter.
pub fn valid_id(id: &str) -> bool {
    id.len() <= MAX_ID
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Whether a provider's URL may be used: https, or http to this machine
/// only (a provider run beside the server).
pub(crate) fn url_allowed(url: &Url) -> bool {
    url.scheme() == "https" || (url.scheme() == "http" && url.host_str().is_some_and(is_loopback))
}

/// Whether `host` is this machine, by name or address.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// Where [`load`] reads a client secret file named in the configuration
/// at `config` (a relative one is beside the configuration).
pub fn secret_path(config: &Path, file: &Path) -> PathBuf {
    if file.is_absolute() {
        file.to_path_buf()
    } else {
        config.parent().unwrap_or(Path::new(".")).join(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Secret files: `secret` holds one, `empty` nothing, others are absent.
    fn secrets(file: &Path) -> Result<String, String> {
        match file.to_str() {
            Some("secret") => Ok("s3cret\n".into()),
            Some("empty") => Ok("  \n".into()),
            _ => Err(format!("{}: No such file or directory", file.display())),
        }
    }

    #[test]
    fn each_type_fills_in_what_it_implies_and_oauth2_names_everything() {
        let text = r#"
[[provider]]
id = "github"
type = "github"
client_id = "Iv1.abc"
client_secret_file = "secret"

[[provider]]
id = "corp-git"
type = "oauth2"
client_id = "abode"
client_secret_file = "secret"
auth_url = "https://sso.example.com/authorize"
token_url = "https://sso.example.com/token"
revoke_url = "https://sso.example.com/revoke"
scopes = ["git", "offline_access"]
regex = '^https://git\.example\.com/'

[[provider]]
id = "local_test"
type = "oauth2"
client_id = "abode"
client_secret_file = "secret"
auth_url = "http://127.0.0.1:9000/auth"
token_url = "http://localhost:9000/token"
regex = '^http://127\.0\.0\.1:'
device_flow = true
device_auth_url = "http://[::1]:9000/device"
"#;
        let providers = parse(text, secrets).unwrap_or_else(|errors| panic!("{errors}"));
        let summary: Vec<(&str, &str, &str, Vec<String>, bool)> = providers
            .iter()
            .map(|p| {
                (
                    p.id.as_str(),
                    p.kind.as_str(),
                    p.token_url.as_str(),
                    p.scopes.clone(),
                    p.device_flow,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "github",
                    "github",
                    "https://github.com/login/oauth/access_token",
                    vec!["repo".to_string(), "workflow".to_string()],
                    false
                ),
                (
                    "corp-git",
                    "oauth2",
                    "https://sso.example.com/token",
                    vec!["git".to_string(), "offline_access".to_string()],
                    false
                ),
                (
                    "local_test",
                    "oauth2",
                    "http://localhost:9000/token",
                    Vec::new(),
                    true
                ),
            ]
        );
        assert_eq!(providers[0].client_secret, "s3cret");
        assert!(providers[0]
            .regex
            .is_match("https://github.com/abode/abode.git"));
        assert!(!providers[0]
            .regex
            .is_match("https://github.com.evil.example/x"));
        assert!(providers[1]
            .regex
            .is_match("https://git.example.com/team/repo.git"));
        // A regex that wants a path still serves Git's path-less prompt.
        assert!(providers[1].serves("https://git.example.com"));
        assert!(providers[1].serves("https://oauth2@git.example.com"));
        // The secret is never shown.
        assert!(!format!("{:?}", providers[0]).contains("s3cret"));
        // Git asks with a user name in the URL; the host is what counts.
        for (url, served) in [
            ("https://github.com/abode/abode.git", true),
            ("https://x-access-token@github.com/abode/abode.git", true),
            // Git never asks with a password in the URL.
            ("https://user:pw@github.com", false),
            ("https://github.com", true),
            ("https://GitHub.com", true),
            ("https://github.com.evil.example/abode", false),
            ("https://evil.example/github.com/abode", false),
            ("https://evil.example@github.com.evil.example/", false),
            ("not a url", false),
            // Git decodes a remote's user name into its prompt: each of
            // these is a host other than github.com, or no honest one.
            ("https://github.com/@evil.example", false),
            ("https://github.com#@evil.example", false),
            ("https://github.com?@evil.example", false),
            ("https://github.com\\@evil.example", false),
            ("https://github.com%2F@evil.example", false),
            ("https://github.com@evil.example", false),
            ("https://github.com\u{2215}@evil.example", false),
            ("https://a@b@github.com", false),
            ("https://@github.com", false),
            ("https://github.com /x", false),
            ("ftp://github.com/x", false),
            ("https://", false),
        ] {
            assert_eq!(providers[0].serves(url), served, "{url}");
        }
    }

    #[test]
    fn every_mistake_is_one_line_naming_the_provider_and_the_key() {
        let cases: &[(&str, &[&str])] = &[
            ("[[provider]\nid =", &["TOML parse error"]),
            ("providers = 1", &["unknown top-level key `providers`"]),
            ("provider = 3", &["`provider` must be [[provider]] tables"]),
            (
                "[[provider]]\ntype = \"github\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"",
                &["provider 1: id is missing"],
            ),
            (
                "[[provider]]\nid = \"GitHub\"\ntype = \"github\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"",
                &["provider 1: id must be 1 to 64 lowercase letters"],
            ),
            (
                "[[provider]]\nid = \"gh\"\ntype = \"gitea\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"",
                &["provider 1 (id \"gh\"): type \"gitea\" is not one of github, gitlab, bitbucket, oauth2"],
            ),
            (
                "[[provider]]\nid = \"gh\"\ntype = \"github\"\nclient_secret = \"inline\"",
                &[
                    "provider 1 (id \"gh\"): client_secret is not a key of a provider",
                    "provider 1 (id \"gh\"): client_id is missing",
                    "provider 1 (id \"gh\"): client_secret_file is missing",
                ],
            ),
            (
                "[[provider]]\nid = \"gh\"\ntype = \"github\"\nclient_id = \"x\"\nclient_secret_file = \"nope\"",
                &["provider 1 (id \"gh\"): client_secret_file cannot be read: nope: No such file"],
            ),
            (
                "[[provider]]\nid = \"gh\"\ntype = \"github\"\nclient_id = \"x\"\nclient_secret_file = \"empty\"",
                &["provider 1 (id \"gh\"): client_secret_file empty is empty"],
            ),
            (
                "[[provider]]\nid = \"o\"\ntype = \"oauth2\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"",
                &[
                    "provider 1 (id \"o\"): auth_url is missing",
                    "provider 1 (id \"o\"): token_url is missing",
                    "provider 1 (id \"o\"): regex is missing",
                ],
            ),
            (
                "[[provider]]\nid = \"o\"\ntype = \"oauth2\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"\nauth_url = \"http://sso.example.com/a\"\ntoken_url = \"not a url\"\nregex = \"(\"",
                &[
                    "provider 1 (id \"o\"): auth_url must be an https:// URL (http:// only to this machine): http://sso.example.com/a",
                    "provider 1 (id \"o\"): token_url is not a URL",
                    "provider 1 (id \"o\"): regex is not a regular expression",
                ],
            ),
            (
                "[[provider]]\nid = \"gh\"\ntype = \"github\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"\nscopes = \"repo\"\ndevice_flow = \"yes\"",
                &[
                    "provider 1 (id \"gh\"): scopes must be a list of strings",
                    "provider 1 (id \"gh\"): device_flow must be true or false",
                ],
            ),
            (
                "[[provider]]\nid = \"bb\"\ntype = \"bitbucket\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"\ndevice_flow = true",
                &["provider 1 (id \"bb\"): device_auth_url is missing: device_flow needs"],
            ),
            (
                "[[provider]]\nid = \"gh\"\ntype = \"github\"\nclient_id = \"x\"\nclient_secret_file = \"secret\"\n[[provider]]\nid = \"gh\"\ntype = \"gitlab\"\nclient_id = \"y\"\nclient_secret_file = \"secret\"",
                &["provider 2 (id \"gh\"): id is used by an earlier provider too"],
            ),
        ];
        for (text, expected) in cases {
            let errors = match parse(text, secrets) {
                Ok(providers) => panic!("{text:?} was taken: {providers:?}"),
                Err(ConfigErrors(errors)) => errors,
            };
            assert_eq!(errors.len(), expected.len(), "{text:?}: {errors:#?}");
            for (error, expected) in errors.iter().zip(expected.iter()) {
                assert!(
                    error.starts_with(expected) && !error.contains('\n'),
                    "{text:?}: {error:?} does not start with {expected:?}"
                );
            }
        }
    }

    #[test]
    fn an_empty_file_configures_no_provider() {
        assert!(parse("", secrets)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty());
    }
}
