//! The dashboard's one script and one stylesheet, compiled into the binary:
//! it works offline and needs nothing but `abode` to run.

use axum::http::header;
use axum::response::IntoResponse;

const SCRIPT: &str = include_str!("../assets/app.js");
const STYLESHEET: &str = include_str!("../assets/app.css");

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
