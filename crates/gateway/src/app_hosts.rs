//! How requests name apps (docs/apps.md): a host of its own under the
//! wildcard access URL (`SLUG--AGENT--WORKSPACE--OWNER.apps.example.com`),
//! or a path under the dashboard's address (`/@OWNER/WS.AGENT/apps/SLUG/`).
//! A host is read whole against the wildcard, never loosely: a host read
//! loosely once carried a sign-in code to another site.

/// Where apps are served.
#[derive(Debug, Clone, Default)]
pub struct AppsConfig {
    /// `--wildcard-access-url '*.apps.example.com[:PORT]'`: each app on a
    /// host of its own, `SLUG--AGENT--WORKSPACE--OWNER.apps.example.com`.
    pub wildcard: Option<WildcardHost>,
    /// `--allow-path-apps`: apps under the dashboard's own address,
    /// `/@OWNER/WORKSPACE.AGENT/apps/SLUG/`, sharing its origin.
    pub allow_path_apps: bool,
    /// `--app-dial-back off`: every app request on its agent's tunnel,
    /// never on a connection the agent dials back (docs/apps.md).
    pub no_dial_back: bool,
}

/// The wildcard access URL's host pattern: `*.` and a domain, with a port
/// when the server is reached on one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WildcardHost {
    /// `.apps.example.com`, lowercase.
    suffix: String,
    /// `:8443`, or empty.
    port: String,
}

impl WildcardHost {
    /// Reads `*.apps.example.com[:PORT]` (a scheme, if given, is ignored:
    /// apps are reached the way the access URL is).
    pub fn parse(pattern: &str) -> Result<WildcardHost, String> {
        let bare = pattern
            .split_once("://")
            .map_or(pattern, |(_, rest)| rest)
            .trim_end_matches('/');
        let rest = bare.strip_prefix("*.").ok_or_else(|| {
            format!("--wildcard-access-url is *.DOMAIN[:PORT] (e.g. *.apps.example.com), not {pattern:?}")
        })?;
        let (domain, port) = match rest.rsplit_once(':') {
            Some((domain, port)) => {
                // As browsers write it (`:08443` is sent as `:8443`).
                let port = port.parse::<u16>().map_err(|_| {
                    format!("--wildcard-access-url {pattern:?}: {port:?} is not a port")
                })?;
                (domain, format!(":{port}"))
            }
            None => (rest, String::new()),
        };
        let valid_label = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        };
        if !domain.split('.').all(valid_label) {
            return Err(format!(
                "--wildcard-access-url {pattern:?}: {domain:?} is not a domain name"
            ));
        }
        Ok(WildcardHost {
            suffix: format!(".{}", domain.to_ascii_lowercase()),
            port,
        })
    }

    /// The access URL's port when the pattern names none: apps are reached
    /// where the server is (`https://abode.example.com:8443` serves
    /// `*.apps.example.com` on 8443 too).
    pub fn with_port_of(mut self, access_url: &str) -> WildcardHost {
        if self.port.is_empty() {
            let authority = access_url
                .split_once("://")
                .map_or(access_url, |(_, rest)| rest)
                .split('/')
                .next()
                .unwrap_or("");
            if let Some((_, port)) = authority.rsplit_once(':') {
                if !port.contains(']') && port.parse::<u16>().is_ok() {
                    self.port = format!(":{port}");
                }
            }
        }
        self
    }

    /// The host (with the port) of an app.
    pub fn host_of(&self, address: &AppAddress) -> Option<String> {
        let agent = address.agent.as_deref()?;
        let parts = [
            address.slug.as_str(),
            agent,
            address.workspace.as_str(),
            address.owner.as_str(),
        ];
        let label = parts.join("--");
        let fits = parts
            .iter()
            .all(|part| dns_safe(part) && !part.contains("--"))
            && label.len() <= 63;
        fits.then(|| format!("{label}{}{}", self.suffix, self.port))
    }

    /// The app a request's `Host` names, if it is exactly one of this
    /// pattern's: a label of four dash-joined DNS-safe parts, the pattern's
    /// domain and the pattern's port (or none, when that port is the
    /// scheme's default, as browsers write it). Anything else (another
    /// port, userinfo, a trailing dot, a path) is not an app host: a host
    /// read loosely here once carried a sign-in code to another site.
    pub fn address_of(&self, host: &str) -> Option<AppAddress> {
        let host = host.to_ascii_lowercase();
        let bare = if self.port.is_empty() {
            // A proxy may name the scheme's default port a browser left out.
            host.strip_suffix(":443")
                .or_else(|| host.strip_suffix(":80"))
                .unwrap_or(&host)
        } else if let Some(bare) = host.strip_suffix(&self.port) {
            bare
        } else if matches!(self.port.as_str(), ":80" | ":443") {
            host.as_str()
        } else {
            return None;
        };
        let label = bare.strip_suffix(&self.suffix)?;
        if label.len() > 63
            || !label
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        {
            return None;
        }
        let parts: Vec<&str> = label.split("--").collect();
        let [slug, agent, workspace, owner] = parts.as_slice() else {
            return None;
        };
        if !parts.iter().all(|part| dns_safe(part)) {
            return None;
        }
        Some(AppAddress {
            owner: owner.to_string(),
            workspace: workspace.to_string(),
            agent: Some(agent.to_string()),
            slug: slug.to_string(),
        })
    }

    /// The app host a request names, as this pattern writes it (lowercase,
    /// with the pattern's port): the only form codes, sessions and
    /// redirects are ever made for.
    pub fn app_host_of(&self, host: &str) -> Option<AppHost> {
        let address = self.address_of(host)?;
        let host = self.host_of(&address)?;
        Some(AppHost { address, host })
    }

    /// Whether `host` (as a request names it) is an app host.
    pub fn matches(&self, host: &str) -> bool {
        self.address_of(host).is_some()
    }
}

/// An app host as the wildcard writes it, and the app it names: read
/// from a request's `Host` only through [`WildcardHost::app_host_of`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppHost {
    pub address: AppAddress,
    /// `web--main-0--dev--alice.apps.example.com:8443`.
    host: String,
}

impl AppHost {
    /// The host, with the wildcard's port.
    pub fn as_str(&self) -> &str {
        &self.host
    }
}

fn dns_safe(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

/// An agent's name as URLs and host names carry it: lowercase letters,
/// digits and single dashes (`main[0]` is `main-0`).
pub fn agent_url_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for character in name.chars() {
        let character = character.to_ascii_lowercase();
        if character.is_ascii_lowercase() || character.is_ascii_digit() {
            out.push(character);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Which app a request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppAddress {
    pub owner: String,
    pub workspace: String,
    /// The agent's URL name ([`agent_url_name`]); `None`: the workspace's
    /// only agent serving that slug.
    pub agent: Option<String>,
    pub slug: String,
}

impl AppAddress {
    /// The path under which the app is served on the dashboard's origin.
    pub fn path(&self) -> String {
        match &self.agent {
            Some(agent) => format!(
                "/@{}/{}.{agent}/apps/{}/",
                self.owner, self.workspace, self.slug
            ),
            None => format!("/@{}/{}/apps/{}/", self.owner, self.workspace, self.slug),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn agent_names_in_urls() {
        let cases = [
            ("main", "main"),
            ("main[0]", "main-0"),
            ("module.m.extra[\"a/b\"]", "module-m-extra-a-b"),
            ("Dev_Box", "dev-box"),
        ];
        for (name, url) in cases {
            assert_eq!(agent_url_name(name), url, "{name}");
        }
    }

    #[test]
    fn app_hosts_round_trip_and_refuse_what_is_not_theirs() {
        let wildcard = WildcardHost::parse("*.apps.example.com:8443").unwrap();
        let address = AppAddress {
            owner: "alice".into(),
            workspace: "dev".into(),
            agent: Some("main-0".into()),
            slug: "web".into(),
        };
        let host = wildcard.host_of(&address).unwrap();
        assert_eq!(host, "web--main-0--dev--alice.apps.example.com:8443");
        assert_eq!(wildcard.address_of(&host), Some(address.clone()));
        assert_eq!(
            wildcard.address_of("WEB--main-0--dev--alice.apps.example.com:8443"),
            Some(address)
        );
        for other in [
            "apps.example.com:8443",
            "web--main--dev.apps.example.com:8443",
            "a--b--c--d--e.apps.example.com:8443",
            "x.web--main--dev--alice.apps.example.com:8443",
            "web--main--dev--alice.example.com:8443",
            "abode.example.com",
            // What an attacker hands `/apps/auth` (a code would follow the
            // redirect to evil.example.com), and its cousins.
            "web--main-0--dev--alice.apps.example.com:8443@evil.example.com",
            "web--main-0--dev--alice.apps.example.com@evil.example.com:8443",
            "alice@web--main-0--dev--alice.apps.example.com:8443",
            "web--main-0--dev--alice.apps.example.com:9999",
            "web--main-0--dev--alice.apps.example.com:8443:8443",
            "web--main-0--dev--alice.apps.example.com",
            "web--main-0--dev--alice.apps.example.com.:8443",
            "web--main-0--dev--alice.apps.example.com:8443/",
            "web--main-0--dev--alice.apps.example.com:8443#x",
            "web--main-0--dev--alice.apps.example.com:8443\\@evil.example.com",
            "web--main-0--dev--alice.apps.example.com:8443 ",
            "web--main-0--dev--alice.apps.example.com.evil.example.com:8443",
            "web--main-0--dev--alice.apps.example.com:8443.evil.example.com",
            "web--main-0--dev--al%69ce.apps.example.com:8443",
            "web--main-0--dev--alice_.apps.example.com:8443",
            "web--main-0--dev---alice.apps.example.com:8443",
            "web--main-0--dev----alice.apps.example.com:8443",
            "--main-0--dev--alice.apps.example.com:8443",
        ] {
            assert_eq!(wildcard.address_of(other), None, "{other}");
            assert_eq!(wildcard.app_host_of(other), None, "{other}");
        }
        // Codes, sessions and redirects are made for the host as the
        // wildcard writes it, whatever case the request used.
        assert_eq!(
            wildcard
                .app_host_of("WEB--main-0--dev--alice.apps.EXAMPLE.com:8443")
                .unwrap()
                .as_str(),
            host
        );
        // A default port may be left out, as browsers do; no other.
        let on_443 = WildcardHost::parse("*.apps.example.com:443").unwrap();
        assert!(on_443.matches("web--main--dev--alice.apps.example.com"));
        assert!(on_443.matches("web--main--dev--alice.apps.example.com:443"));
        assert!(!on_443.matches("web--main--dev--alice.apps.example.com:444"));
        let portless = WildcardHost::parse("*.apps.example.com").unwrap();
        assert!(portless.matches("web--main--dev--alice.apps.example.com:443"));
        assert_eq!(
            portless
                .app_host_of("web--main--dev--alice.apps.example.com:443")
                .unwrap()
                .as_str(),
            "web--main--dev--alice.apps.example.com"
        );
        assert!(!portless.matches("web--main--dev--alice.apps.example.com:8443"));
        assert!(!portless.matches("web--main--dev--alice.apps.example.com:443:443"));
        let zero_led = WildcardHost::parse("*.apps.example.com:08443").unwrap();
        assert!(zero_led.matches("web--main--dev--alice.apps.example.com:8443"));
        let defaulted = WildcardHost::parse("*.apps.test")
            .unwrap()
            .with_port_of("http://127.0.0.1:7080/");
        assert!(defaulted.matches("web--main--dev--alice.apps.test:7080"));
        let kept = WildcardHost::parse("*.apps.test:443")
            .unwrap()
            .with_port_of("http://127.0.0.1:7080");
        assert!(kept.matches("web--main--dev--alice.apps.test:443"));
        let plain = WildcardHost::parse("https://*.apps.test").unwrap();
        assert!(plain.matches("web--main--dev--alice.apps.test"));
        for bad in ["apps.example.com", "*.", "*.a b.com", "*.apps.test:x"] {
            assert!(WildcardHost::parse(bad).is_err(), "{bad}");
        }
    }
}
