//! The provider's redirect back after a person granted access to their
//! account (docs/external-auth.md): the server trades the code for tokens.
//! The page needs no dashboard session: the link's `state`, made for the
//! person who started it, says whose account it is (a state works once,
//! for 10 minutes).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use crate::html::{page, respond};
use crate::WebState;

#[derive(Deserialize)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

pub(crate) async fn callback(
    State(state): State<WebState>,
    Path(id): Path<String>,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let outcome = match (&query.code, &query.state, &query.error) {
        (_, _, Some(error)) => Err((
            StatusCode::BAD_REQUEST,
            match &query.error_description {
                Some(description) => format!("{id} refused: {error}: {description}"),
                None => format!("{id} refused: {error}"),
            },
        )),
        (Some(code), Some(link), None) => state
            .control
            .external_auth()
            .finish_link(&id, link, code)
            .await
            .map_err(|error| {
                (
                    crate::html::status_of(&error),
                    crate::html::message_of(&error),
                )
            }),
        _ => Err((
            StatusCode::BAD_REQUEST,
            "the provider sent back neither a code nor an error".to_string(),
        )),
    };
    match outcome {
        Ok(username) => respond(
            StatusCode::OK,
            page(
                "Account linked",
                None,
                html! {
                    h1 { "Account linked" }
                    p role="status" id="external-auth-linked" {
                        "Your " (id) " account is linked to " (username)
                        ". Your workspaces can use it now; you can close this page."
                    }
                },
            ),
        ),
        Err((status, message)) => respond(
            status,
            page(
                "Not linked",
                None,
                html! {
                    h1 { "Not linked" }
                    p class="error" role="alert" { (message) }
                },
            ),
        ),
    }
}
