//! The email channel: each message rendered as plain text and HTML from the
//! templates kept in `crates/delivery/templates/email/` (one pair per kind,
//! `default` for kinds without their own), and sent through the operator's
//! smarthost with a real SMTP client (lettre), optionally with STARTTLS and
//! credentials read from a file.

use std::time::Duration;

use lettre::message::{header, Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{Message, SmtpTransport, Transport};
use serde_json::Value;

use abode_store::{Notification, NotificationKind, User};

/// Where email goes and as whom.
#[derive(Clone)]
pub struct EmailConfig {
    pub host: String,
    pub port: u16,
    pub from: Mailbox,
    /// Upgrade the connection with STARTTLS (and refuse to send without it).
    pub starttls: bool,
    /// Speak TLS from the first byte (implicit TLS, usually port 465).
    pub implicit_tls: bool,
    /// User name and password for the smarthost.
    pub credentials: Option<(String, String)>,
    pub timeout: Duration,
}

impl std::fmt::Debug for EmailConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("from", &self.from.to_string())
            .field("starttls", &self.starttls)
            .field("implicit_tls", &self.implicit_tls)
            .finish_non_exhaustive()
    }
}

/// Why the email flags were refused at start.
#[derive(Debug, thiserror::Error)]
pub enum EmailConfigError {
    #[error("--notifications-email-smarthost must be HOST:PORT, not `{0}`")]
    Smarthost(String),
    #[error("--notifications-email-smarthost needs --notifications-email-from ADDRESS")]
    NoFrom,
    #[error("--notifications-email-from is not an email address: `{0}`")]
    From(String),
    #[error("cannot read the email credentials file {path}: {source}")]
    Credentials {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the email credentials file {0} must hold the user name on its first line and the password on its second")]
    CredentialsShape(String),
    #[error("--notifications-email-starttls and --notifications-email-tls exclude each other: STARTTLS upgrades a plain connection, implicit TLS starts with TLS")]
    TwoTlsModes,
}

impl EmailConfig {
    pub fn from_flags(
        smarthost: &str,
        from: Option<&str>,
        starttls: bool,
        implicit_tls: bool,
        credentials_file: Option<&std::path::Path>,
        timeout: Duration,
    ) -> Result<EmailConfig, EmailConfigError> {
        if starttls && implicit_tls {
            return Err(EmailConfigError::TwoTlsModes);
        }
        let shown: String = smarthost.chars().take(200).collect();
        let (host, port) = smarthost
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .filter(|(host, port)| !host.is_empty() && *port != 0)
            .ok_or_else(|| EmailConfigError::Smarthost(shown.clone()))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let from = from.ok_or(EmailConfigError::NoFrom)?;
        let from: Mailbox = from
            .parse()
            .map_err(|_| EmailConfigError::From(from.chars().take(200).collect()))?;
        let credentials = credentials_file
            .map(|path| {
                let shown = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| {
                    EmailConfigError::Credentials {
                        path: shown.clone(),
                        source,
                    }
                })?;
                let mut lines = text.lines();
                match (lines.next(), lines.next()) {
                    (Some(user), Some(password)) if !user.is_empty() && !password.is_empty() => {
                        Ok((user.to_string(), password.to_string()))
                    }
                    _ => Err(EmailConfigError::CredentialsShape(shown)),
                }
            })
            .transpose()?;
        Ok(EmailConfig {
            host,
            port,
            from,
            starttls,
            implicit_tls,
            credentials,
            timeout,
        })
    }
}

/// A template pair, kept as files in the repository.
struct Template {
    text: &'static str,
    html: &'static str,
}

fn template(kind: NotificationKind) -> Template {
    macro_rules! pair {
        ($name:literal) => {
            Template {
                text: include_str!(concat!("../templates/email/", $name, ".txt")),
                html: include_str!(concat!("../templates/email/", $name, ".html")),
            }
        };
    }
    match kind {
        NotificationKind::BuildHeld => pair!("build_held"),
        NotificationKind::BuildBlocked => pair!("build_blocked"),
        NotificationKind::BuildFailed => pair!("build_failed"),
        NotificationKind::HeldBuildExpiring => pair!("held_build_expiring"),
        NotificationKind::HeldBuildExpired => pair!("held_build_expired"),
        _ => pair!("default"),
    }
}

fn subject(kind: NotificationKind, payload: &Value) -> String {
    let workspace = payload["workspace"].as_str().unwrap_or("a workspace");
    let number = &payload["build_number"];
    let text = match kind {
        NotificationKind::BuildHeld => {
            format!("[abode] {workspace}: build #{number} awaits your confirmation")
        }
        NotificationKind::BuildBlocked => {
            format!("[abode] {workspace}: build #{number} was blocked")
        }
        NotificationKind::BuildFailed => format!("[abode] {workspace}: build #{number} failed"),
        NotificationKind::HeldBuildExpiring => {
            format!("[abode] {workspace}: build #{number} expires soon")
        }
        NotificationKind::HeldBuildExpired => {
            format!("[abode] {workspace}: build #{number} expired")
        }
        other => format!("[abode] {other}: {workspace}"),
    };
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// The message's text and HTML bodies.
pub(crate) fn render(message: &Notification) -> (String, String, String) {
    let payload: Value = serde_json::from_str(&message.payload).unwrap_or(Value::Null);
    let template = template(message.kind);
    let field = |name: &str| -> String {
        match &payload[name] {
            Value::String(text) => text.clone(),
            Value::Null => "-".to_string(),
            other => other.to_string(),
        }
    };
    let changes: Vec<(String, String)> = payload["protected_changes"]
        .as_array()
        .map(|changes| {
            changes
                .iter()
                .map(|change| {
                    let paths: Vec<String> = change["paths"]
                        .as_array()
                        .map(|p| {
                            p.iter()
                                .filter_map(|p| p.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    let address = change["address"].as_str().unwrap_or("?").to_string();
                    let mut reason = change["reason"].as_str().unwrap_or("").to_string();
                    if !paths.is_empty() {
                        reason.push_str(&format!(" (forced by: {})", paths.join(", ")));
                    }
                    (address, reason)
                })
                .collect()
        })
        .unwrap_or_default();
    let initiator = format!(
        "{}{}",
        payload["initiator"]["name"].as_str().unwrap_or("-"),
        if payload["initiator"]["system"] == true {
            " (system)"
        } else {
            ""
        }
    );
    let fields: Vec<(&str, String)> = vec![
        ("kind", message.kind.as_str().to_string()),
        ("workspace", field("workspace")),
        ("build_number", field("build_number")),
        ("transition", field("transition")),
        ("reason", field("reason")),
        ("initiator", initiator),
        ("error", field("error")),
        ("expires_at_utc", field("expires_at_utc")),
        ("confirm_command", field("confirm_command")),
        (
            "payload",
            serde_json::to_string_pretty(&payload).unwrap_or_default(),
        ),
    ];
    let text_changes: String = changes
        .iter()
        .map(|(address, reason)| format!("  - {address}: {reason}"))
        .collect::<Vec<_>>()
        .join("\n");
    let html_changes: String = changes
        .iter()
        .map(|(address, reason)| {
            format!(
                "<li><code>{}</code>: {}</li>",
                escape_html(address),
                escape_html(reason)
            )
        })
        .collect();
    let mut text = template.text.to_string();
    let mut html = template.html.to_string();
    // Fields first, then the lists: a value never holds a placeholder that
    // is filled after it.
    for (name, value) in &fields {
        let placeholder = format!("{{{{{name}}}}}");
        text = text.replace(&placeholder, value);
        html = html.replace(&placeholder, &escape_html(value));
    }
    text = text.replace("{{changes}}", &text_changes);
    html = html.replace("{{changes}}", &html_changes);
    (subject(message.kind, &payload), text, html)
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '{' => out.push_str("&#123;"),
            other => out.push(other),
        }
    }
    out
}

/// Sends one message to its recipient; `Err` says in one line why not.
pub(crate) async fn deliver(
    config: &EmailConfig,
    message: &Notification,
    recipient: &User,
) -> Result<(), String> {
    if recipient.email.trim().is_empty() {
        return Err(format!("{} has no email address", recipient.username));
    }
    let to: Mailbox = recipient.email.parse().map_err(|_| {
        format!(
            "{} has an email address that cannot be used",
            recipient.username
        )
    })?;
    let (subject, text, html) = render(message);
    let email = Message::builder()
        .from(config.from.clone())
        .to(to)
        .subject(subject)
        .message_id(Some(format!("<{}@abode>", message.id)))
        .multipart(
            MultiPart::alternative()
                .singlepart(
                    SinglePart::builder()
                        .header(header::ContentType::TEXT_PLAIN)
                        .body(text),
                )
                .singlepart(
                    SinglePart::builder()
                        .header(header::ContentType::TEXT_HTML)
                        .body(html),
                ),
        )
        .map_err(|error| format!("cannot build the email: {error}"))?;
    let config = config.clone();
    tokio::task::spawn_blocking(move || {
        let builder = SmtpTransport::builder_dangerous(&config.host);
        let builder = match (config.starttls, config.implicit_tls) {
            (false, false) => builder,
            (starttls, _) => {
                let parameters = tls_parameters(&config.host)?;
                builder.tls(if starttls {
                    Tls::Required(parameters)
                } else {
                    Tls::Wrapper(parameters)
                })
            }
        };
        let mut builder = builder.port(config.port).timeout(Some(config.timeout));
        if let Some((user, password)) = &config.credentials {
            builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
        }
        builder.build().send(&email).map(drop).map_err(|error| {
            let text: String = format!("cannot send the email: {error}")
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .take(300)
                .collect();
            text
        })
    })
    .await
    .map_err(|error| format!("the email delivery stopped: {error}"))?
}

/// TLS to the smarthost, verified with the system's authorities plus the
/// ones the server was given (`--ca-cert`).
fn tls_parameters(host: &str) -> Result<TlsParameters, String> {
    let mut builder = TlsParameters::builder(host.to_string());
    for der in abode_tls::added_authorities_der() {
        let certificate = Certificate::from_der(der)
            .map_err(|error| format!("cannot use a --ca-cert certificate for email: {error}"))?;
        builder = builder.add_root_certificate(certificate);
    }
    builder
        .build_rustls()
        .map_err(|error| format!("cannot set up TLS with {host}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use abode_store::{Channel, NotificationStatus};

    fn message(kind: NotificationKind, payload: Value) -> Notification {
        Notification {
            id: "m1".into(),
            kind,
            recipient_id: "u".into(),
            channel: Channel::Email,
            payload: payload.to_string(),
            status: NotificationStatus::Pending,
            attempts: 0,
            next_attempt_at: 0,
            lease_owner: None,
            lease_expires_at: None,
            last_error: None,
            read_at: None,
            created_at: 0,
            sent_at: None,
        }
    }

    #[test]
    fn every_kind_renders_without_leftover_placeholders_and_html_is_escaped() {
        let payload = serde_json::json!({
            "workspace": "alice/dev",
            "build_number": 2,
            "transition": "start",
            "reason": "initiator",
            "initiator": {"name": "alice", "system": false},
            "error": "<script>{{workspace}}</script>",
            "expires_at_utc": "2026-01-01T00:00:00Z",
            "confirm_command": "abode builds confirm alice/dev 2 --digest abc",
            "protected_changes": [{"address": "abode_volume.home", "reason": "name changed", "paths": ["name"]}],
        });
        for kind in NotificationKind::ALL {
            let (subject, text, html) = render(&message(kind, payload.clone()));
            assert!(!subject.is_empty() && !subject.contains('\n'), "{kind}");
            for body in [&text, &html] {
                assert!(
                    !body.contains("{{") || body.contains("<script>{{"),
                    "{kind}: {body}"
                );
            }
            assert!(!html.contains("<script>"), "{kind}: {html}");
        }
        let (_, text, html) = render(&message(NotificationKind::BuildHeld, payload));
        assert!(text.contains("abode builds confirm alice/dev 2 --digest abc"));
        assert!(text.contains("abode_volume.home: name changed (forced by: name)"));
        assert!(html.contains("<li><code>abode_volume.home</code>"));
    }

    #[test]
    fn the_smarthost_and_sender_are_checked_at_start() {
        let timeout = Duration::from_secs(1);
        let ok = EmailConfig::from_flags(
            "127.0.0.1:2525",
            Some("Abode <abode@example.com>"),
            false,
            false,
            None,
            timeout,
        )
        .unwrap();
        assert_eq!((ok.host.as_str(), ok.port), ("127.0.0.1", 2525));
        let refused = [
            ("127.0.0.1", Some("a@example.com"), "HOST:PORT"),
            (":25", Some("a@example.com"), "HOST:PORT"),
            ("mail:0", Some("a@example.com"), "HOST:PORT"),
            ("mail:25", None, "needs --notifications-email-from"),
            ("mail:25", Some("not an address"), "not an email address"),
        ];
        for (smarthost, from, words) in refused {
            let error =
                EmailConfig::from_flags(smarthost, from, false, false, None, timeout).unwrap_err();
            assert!(error.to_string().contains(words), "{smarthost}: {error}");
        }
        let both =
            EmailConfig::from_flags("mail:465", Some("a@example.com"), true, true, None, timeout)
                .unwrap_err();
        assert!(both.to_string().contains("exclude each other"), "{both}");
    }
}
