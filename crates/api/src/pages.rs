//! The shapes every answer shares: a JSON body with its status, and one page
//! of a list (`limit`, `after`, `next`; docs/api.md, Pagination).

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;

use crate::ApiError;

/// What a handler answers.
pub(crate) type ApiResult = Result<axum::response::Response, ApiError>;

/// A JSON answer with its status: `body` is one of the sdk's answers.
pub(crate) fn ok(status: StatusCode, body: impl serde::Serialize) -> ApiResult {
    Ok((status, Json(body)).into_response())
}

/// A list page's answer: its rows under `key`, and `next`, the cursor of the
/// next page (null on the last).
pub(crate) fn page_answer<T: serde::Serialize>(
    key: &str,
    items: Vec<T>,
    next: Option<String>,
) -> ApiResult {
    // Written straight from the rows' views: a page of workspaces never
    // becomes a tree of JSON values first.
    struct PageBody<'a, T> {
        key: &'a str,
        items: &'a [T],
        next: Option<&'a str>,
    }
    impl<T: serde::Serialize> serde::Serialize for PageBody<'_, T> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(Some(2))?;
            map.serialize_entry(self.key, self.items)?;
            map.serialize_entry("next", &self.next)?;
            map.end()
        }
    }
    let body = PageBody {
        key,
        items: &items,
        next: next.as_deref(),
    };
    Ok((StatusCode::OK, Json(body)).into_response())
}

/// Pagination parameters every list takes.
#[derive(Deserialize)]
pub(crate) struct PageQuery {
    #[serde(default)]
    pub(crate) after: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<i64>,
}
