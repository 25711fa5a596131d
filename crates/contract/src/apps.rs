//! `abode_app` (issue 33, docs/apps.md): what a template declares about an
//! app served inside the workspace, checked the same way by the provider
//! (at plan time, so a push with a bad app fails) and by the platform (when
//! it reads the apps out of a state).

use serde::{Deserialize, Serialize};

/// The longest slug: it becomes part of a host name.
pub const MAX_SLUG: usize = 32;

/// Who may open an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppShare {
    /// Only those who may connect to the workspace (its owner, owners).
    Owner,
    /// Anyone signed in.
    Authenticated,
    /// Anyone, signed in or not.
    Public,
}

impl AppShare {
    pub const NAMES: &'static str = "owner, authenticated, public";

    pub fn as_str(self) -> &'static str {
        match self {
            AppShare::Owner => "owner",
            AppShare::Authenticated => "authenticated",
            AppShare::Public => "public",
        }
    }

    pub fn parse(text: &str) -> Option<AppShare> {
        match text {
            "owner" => Some(AppShare::Owner),
            "authenticated" => Some(AppShare::Authenticated),
            "public" => Some(AppShare::Public),
            _ => None,
        }
    }
}

/// Where the dashboard opens an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppOpenIn {
    Tab,
    Window,
}

impl AppOpenIn {
    pub fn parse(text: &str) -> Option<AppOpenIn> {
        match text {
            "tab" => Some(AppOpenIn::Tab),
            "window" => Some(AppOpenIn::Window),
            _ => None,
        }
    }
}

/// An app's health, as its agent checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppHealth {
    /// The app has no health check.
    Disabled,
    /// Not checked yet, or not answering yet and under its threshold.
    Initializing,
    Healthy,
    /// Its check failed `threshold` times in a row.
    Unhealthy,
}

impl AppHealth {
    pub fn as_str(self) -> &'static str {
        match self {
            AppHealth::Disabled => "disabled",
            AppHealth::Initializing => "initializing",
            AppHealth::Healthy => "healthy",
            AppHealth::Unhealthy => "unhealthy",
        }
    }

    pub fn parse(text: &str) -> Option<AppHealth> {
        match text {
            "disabled" => Some(AppHealth::Disabled),
            "initializing" => Some(AppHealth::Initializing),
            "healthy" => Some(AppHealth::Healthy),
            "unhealthy" => Some(AppHealth::Unhealthy),
            _ => None,
        }
    }
}

/// How the agent checks an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppHealthcheck {
    /// An `http://` URL on the agent's side.
    pub url: String,
    /// Seconds between checks (at least 1).
    pub interval: u32,
    /// Failed checks in a row before the app is unhealthy (at least 1).
    pub threshold: u32,
}

/// An app as the platform keeps it: an `abode_app` of the state, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppDefinition {
    pub slug: String,
    pub display_name: Option<String>,
    /// `http://HOST:PORT[/PATH]` on the agent's side ([`app_target`]).
    pub url: Option<String>,
    pub command: Option<String>,
    pub subdomain: bool,
    pub share: AppShare,
    pub icon: Option<String>,
    pub open_in: AppOpenIn,
    pub healthcheck: Option<AppHealthcheck>,
}

impl AppDefinition {
    /// Reads an `abode_app` instance's `attributes` as the provider wrote
    /// them, with the provider's rules (a state edited by hand, or written
    /// by an older provider, is checked again).
    pub fn from_attributes(attributes: &serde_json::Value) -> Result<AppDefinition, String> {
        let text = |name: &str| {
            attributes
                .get(name)
                .and_then(serde_json::Value::as_str)
                .filter(|value| !value.is_empty())
                .map(str::to_string)
        };
        let slug = text("slug").ok_or("an abode_app without a slug")?;
        if !valid_slug(&slug) {
            return Err(format!("abode_app slug `{slug}` is not valid"));
        }
        let url = text("url");
        let command = text("command");
        match (&url, &command) {
            (Some(url), None) => {
                app_target(url)?;
            }
            (None, Some(_)) => {}
            _ => {
                return Err(format!(
                    "abode_app `{slug}` needs a url or a command, not both"
                ))
            }
        }
        let share = match text("share") {
            None => AppShare::Owner,
            Some(share) => AppShare::parse(&share).ok_or_else(|| {
                format!(
                    "abode_app `{slug}` share `{share}` is not one of {}",
                    AppShare::NAMES
                )
            })?,
        };
        let open_in = match text("open_in") {
            None => AppOpenIn::Tab,
            Some(open_in) => AppOpenIn::parse(&open_in).ok_or_else(|| {
                format!("abode_app `{slug}` open_in `{open_in}` is not tab or window")
            })?,
        };
        let healthcheck = match attributes
            .get("healthcheck")
            .and_then(serde_json::Value::as_array)
            .and_then(|checks| checks.first())
        {
            None => None,
            Some(check) => {
                let url = check
                    .get("url")
                    .and_then(serde_json::Value::as_str)
                    .ok_or_else(|| format!("abode_app `{slug}` healthcheck without a url"))?;
                app_target(url)?;
                let number = |name: &str| {
                    check
                        .get(name)
                        .and_then(serde_json::Value::as_u64)
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|n| (1..=86_400).contains(n))
                        .ok_or_else(|| {
                            format!(
                                "abode_app `{slug}` healthcheck {name} is not between 1 and 86400"
                            )
                        })
                };
                Some(AppHealthcheck {
                    url: url.to_string(),
                    interval: number("interval")?,
                    threshold: number("threshold")?,
                })
            }
        };
        Ok(AppDefinition {
            slug,
            display_name: text("display_name"),
            url,
            command,
            subdomain: attributes
                .get("subdomain")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            share,
            icon: text("icon"),
            open_in,
            healthcheck,
        })
    }

    /// The health an app starts with: checked ones are initializing.
    pub fn initial_health(&self) -> AppHealth {
        match (&self.url, &self.healthcheck) {
            (Some(_), Some(_)) => AppHealth::Initializing,
            _ => AppHealth::Disabled,
        }
    }
}

/// Where an app's `url` points, on the agent's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTarget {
    pub host: String,
    pub port: u16,
    /// The path the app is served under (`/` when the URL has none).
    pub path: String,
}

/// A slug names the app in URLs and host names: 1 to 32 lowercase letters,
/// digits and single dashes, not starting or ending with a dash (and no
/// `--`, which separates a subdomain app's host name's parts).
pub fn valid_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= MAX_SLUG
        && slug
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && !slug.contains("--")
}

/// Reads an app's `url`: `http://HOST[:PORT][/PATH]`, nothing else (the
/// platform speaks plain HTTP to it through the agent's tunnel; TLS would
/// end inside the workspace).
pub fn app_target(url: &str) -> Result<AppTarget, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("an app's url is http://HOST:PORT/..., not {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(format!("an app's url carries no user or password: {url:?}"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
            let port: u16 = port
                .parse()
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| format!("an app's url has no valid port: {url:?}"))?;
            (host, port)
        }
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty()
        || !host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b':'))
    {
        return Err(format!("an app's url has no valid host: {url:?}"));
    }
    if path.contains(['?', '#']) {
        return Err(format!(
            "an app's url is a base: no query or fragment: {url:?}"
        ));
    }
    Ok(AppTarget {
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        let cases = [
            ("code-server", true),
            ("app1", true),
            ("a", true),
            ("", false),
            ("Code", false),
            ("-a", false),
            ("a-", false),
            ("a--b", false),
            ("a_b", false),
            ("a.b", false),
            (&"a".repeat(33), false),
        ];
        for (slug, valid) in cases {
            assert_eq!(valid_slug(slug), valid, "{slug:?}");
        }
    }

    #[test]
    fn apps_are_read_from_state_attributes_with_the_provider_s_rules() {
        let app = AppDefinition::from_attributes(&serde_json::json!({
            "slug": "web", "url": "http://localhost:3000", "share": "authenticated",
            "subdomain": true, "open_in": "window", "display_name": "Web", "icon": "",
            "healthcheck": [{"url": "http://localhost:3000/health", "interval": 5, "threshold": 3}]
        }))
        .unwrap();
        assert_eq!(app.share, AppShare::Authenticated);
        assert_eq!(app.icon, None);
        assert_eq!(app.initial_health(), AppHealth::Initializing);
        assert_eq!(app.healthcheck.unwrap().threshold, 3);
        let bare =
            AppDefinition::from_attributes(&serde_json::json!({"slug": "x", "command": "make"}))
                .unwrap();
        assert_eq!(
            (bare.share, bare.initial_health()),
            (AppShare::Owner, AppHealth::Disabled)
        );
        for bad in [
            serde_json::json!({"url": "http://localhost:1"}),
            serde_json::json!({"slug": "Web", "url": "http://localhost:1"}),
            serde_json::json!({"slug": "web"}),
            serde_json::json!({"slug": "web", "url": "http://localhost:1", "command": "x"}),
            serde_json::json!({"slug": "web", "url": "http://localhost:1", "share": "everyone"}),
            serde_json::json!({"slug": "web", "url": "http://localhost:1",
                "healthcheck": [{"url": "http://localhost:1", "interval": 0, "threshold": 1}]}),
        ] {
            assert!(AppDefinition::from_attributes(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn app_urls() {
        let target = app_target("http://localhost:3000").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("localhost", 3000, "/")
        );
        let target = app_target("http://127.0.0.1:8888/lab/").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("127.0.0.1", 8888, "/lab/")
        );
        let target = app_target("http://[::1]:8080/").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("::1", 8080));
        assert_eq!(app_target("http://web").unwrap().port, 80);
        for bad in [
            "https://localhost:3000",
            "localhost:3000",
            "http://localhost:0",
            "http://localhost:99999",
            "http://user:pw@localhost:1",
            "http://:3000",
            "http://local host:3000",
            "http://localhost:3000/?a=b",
        ] {
            assert!(app_target(bad).is_err(), "{bad:?}");
        }
    }
}
