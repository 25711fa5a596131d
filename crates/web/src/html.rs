//! The page shell and the small pieces every page uses: times, statuses as
//! words, error pages. Everything here goes through maud, which escapes
//! what it interpolates.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use abode_control::ControlError;

/// The form field that carries the CSRF token (`session.rs` derives and
/// checks it): every form of the dashboard has it, the shell's sign-out form
/// too.
pub(crate) const CSRF_FIELD: &str = "csrf";

/// Who is signed in, for the header: name, the CSRF token of the sign-out
/// form, and the pages of the navigation (those the policy lets them open).
pub(crate) struct Header<'a> {
    pub(crate) username: &'a str,
    pub(crate) csrf: &'a str,
    pub(crate) nav: Vec<(&'static str, &'static str)>,
}

/// A whole page: `title` is text, `body` markup this crate built.
pub(crate) fn page(title: &str, header: Option<Header<'_>>, body: Markup) -> Markup {
    page_with(title, header, html! {}, body)
}

/// [`page`] with more of this origin's stylesheets and scripts in its head
/// (`head`, markup this crate built).
pub(crate) fn page_with(
    title: &str,
    header: Option<Header<'_>>,
    head: Markup,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Abode" }
                link rel="stylesheet" href="/assets/app.css";
                script src="/assets/app.js" defer {}
                (head)
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    a class="brand" href="/" { "Abode" }
                    @if let Some(header) = header {
                        nav aria-label="Main" {
                            @for (href, label) in &header.nav {
                                a href=(href) { (label) }
                                " "
                            }
                        }
                        form class="signout" method="post" action="/logout" {
                            input type="hidden" name=(CSRF_FIELD) value=(header.csrf);
                            span { "Signed in as " strong { (header.username) } }
                            " "
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main id="main" tabindex="-1" {
                    (body)
                }
            }
        }
    }
}

/// A page as an answer with `status`.
pub(crate) fn respond(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// A page that says what went wrong, in one sentence.
pub(crate) fn error_page(status: StatusCode, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    respond(
        status,
        page(
            title,
            None,
            html! {
                h1 { (title) }
                p class="error" role="alert" { (message) }
                p { a href="/workspaces" { "Back to workspaces" } }
            },
        ),
    )
}

/// A 303 to `location` (a path this crate built). Unlike axum's `Redirect`,
/// a path that is not a valid header (a name from the request with a control
/// character) answers 400 instead of panicking.
pub(crate) fn see_other(location: &str) -> Response {
    match axum::http::HeaderValue::from_str(location) {
        Ok(value) => (
            StatusCode::SEE_OTHER,
            [(axum::http::header::LOCATION, value)],
        )
            .into_response(),
        Err(_) => error_page(StatusCode::BAD_REQUEST, "That address is not valid."),
    }
}

/// A name from the store (a username, a token's name) as one path segment
/// of a form's address, whatever characters it has.
pub(crate) fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.') {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// The HTTP status the API gives the same error (docs/api.md).
pub(crate) fn status_of(error: &ControlError) -> StatusCode {
    match error {
        ControlError::BadRequest(_) | ControlError::InvalidArchive(_) => StatusCode::BAD_REQUEST,
        ControlError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        ControlError::Forbidden(_)
        | ControlError::QuotaExceeded(_)
        | ControlError::ExternalAuthRequired(_) => StatusCode::FORBIDDEN,
        ControlError::NotFound(_) => StatusCode::NOT_FOUND,
        ControlError::Conflict(_)
        | ControlError::AlreadyJudged(_)
        | ControlError::UnsavedWork(_) => StatusCode::CONFLICT,
        ControlError::InvalidTemplate(_) => StatusCode::UNPROCESSABLE_ENTITY,
        ControlError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
        ControlError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
        ControlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The door's one-line message, except an internal error's detail, which is
/// for the operator's log.
pub(crate) fn message_of(error: &ControlError) -> String {
    match error {
        ControlError::Internal(detail) => {
            tracing::error!(error = %detail, "internal error");
            "Internal server error; the server log has the details.".to_string()
        }
        other => other.to_string(),
    }
}

/// The error page of a refusal by the control plane.
pub(crate) fn control_error(error: ControlError) -> Response {
    error_page(status_of(&error), &message_of(&error))
}

/// Unix milliseconds as `2026-11-30 17:40 UTC`.
pub(crate) fn time(ms: i64) -> String {
    let t = abode_clock::UtcTime::from_ms(ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        t.year, t.month, t.day, t.hour, t.minute
    )
}

/// Words for a status name (`awaiting_confirmation` reads "awaiting
/// confirmation"); the text always says it, colour only repeats it.
pub(crate) fn words(name: &str) -> String {
    name.replace('_', " ")
}

/// A status as a badge: its words, and a class for colour.
pub(crate) fn badge(name: &str) -> Markup {
    let class = match name {
        "running" | "succeeded" | "ready" | "allow" => "badge ok",
        "failed" | "start_error" | "unhealthy" | "disconnected" | "block" | "blocked" => {
            "badge bad"
        }
        "awaiting_confirmation" | "confirm" => "badge warn",
        _ => "badge",
    };
    html! { span class=(class) { (words(name)) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolated_text_is_escaped() {
        let hostile = "<script>alert(1)</script>\"'&";
        let markup = html! { p title=(hostile) { (hostile) } }.into_string();
        assert!(!markup.contains("<script>"), "{markup}");
        assert!(markup.contains("&lt;script&gt;"), "{markup}");
        assert!(markup.contains("&quot;"), "{markup}");
    }

    #[test]
    fn statuses_read_as_words() {
        for (name, expected) in [
            ("awaiting_confirmation", "awaiting confirmation"),
            ("running", "running"),
            ("start_error", "start error"),
        ] {
            assert_eq!(words(name), expected);
            assert!(badge(name).into_string().contains(expected));
        }
    }

    #[test]
    fn names_are_one_path_segment() {
        for (name, expected) in [
            ("ci-token", "ci-token"),
            ("a/b", "a%2Fb"),
            ("x y?", "x%20y%3F"),
        ] {
            assert_eq!(path_segment(name), expected);
        }
    }
}
