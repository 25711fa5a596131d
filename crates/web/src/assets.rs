//! The dashboard's scripts and stylesheets, compiled into the binary: it
//! works offline and needs nothing but `abode` to run. The web terminal's
//! xterm.js is vendored under `assets/vendor/` with its licence (rebuilt
//! only by scripts/vendor-web-assets.sh from a pinned lock file).

use axum::http::header;
use axum::response::IntoResponse;

const SCRIPT: &str = include_str!("../assets/app.js");
const STYLESHEET: &str = include_str!("../assets/app.css");
const TERMINAL_SCRIPT: &str = include_str!("../assets/terminal.js");

/// The vendored files by name: content type and bytes.
const VENDORED: [(&str, &str, &str); 5] = [
    (
        "xterm.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/vendor/xterm.js"),
    ),
    (
        "xterm.css",
        "text/css; charset=utf-8",
        include_str!("../assets/vendor/xterm.css"),
    ),
    (
        "addon-fit.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/vendor/addon-fit.js"),
    ),
    (
        "xterm.LICENSE",
        "text/plain; charset=utf-8",
        include_str!("../assets/vendor/xterm.LICENSE"),
    ),
    (
        "addon-fit.LICENSE",
        "text/plain; charset=utf-8",
        include_str!("../assets/vendor/addon-fit.LICENSE"),
    ),
];

/// Assets change only with the binary: an hour of caching is safe enough.
const CACHE: &str = "public, max-age=3600";

pub(crate) async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE),
        ],
        SCRIPT,
    )
}

pub(crate) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE),
        ],
        STYLESHEET,
    )
}

pub(crate) async fn terminal_script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE),
        ],
        TERMINAL_SCRIPT,
    )
}

/// A vendored library or its licence, by file name.
pub(crate) async fn vendored(
    axum::extract::Path(file): axum::extract::Path<String>,
) -> axum::response::Response {
    match VENDORED.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, CACHE),
            ],
            *body,
        )
            .into_response(),
        None => crate::html::error_page(
            axum::http::StatusCode::NOT_FOUND,
            &format!("no asset named {file:?}"),
        ),
    }
}
