//! Apps served from workspaces, through this server (docs/apps.md): a
//! layer over every route that takes the requests naming an app, either by
//! their `Host` (`SLUG--AGENT--WORKSPACE--OWNER` under the wildcard access
//! URL) or, with `--allow-path-apps`, by their path (`/@OWNER/WS.AGENT/apps/
//! SLUG/...` on the dashboard's origin), signs their visitor in, and hands
//! them to the gateway (`Gateway::open`), which proxies them over the app's
//! stream or relays them to the server holding its agent, and keeps Abode's
//! credentials from the app. A subdomain app's visitor signs in through the
//! dashboard, which hands the app host a one-time code that the gateway
//! exchanges for a session cookie of that host only.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use abode_control::Caller;
use abode_gateway::{
    exchange_code, plain, redirect, relay_app, serve_app, AppAddress, AppHost, AppRefusal, Opened,
    APP_AUTH_PATH, APP_SESSION_COOKIE,
};

use crate::AppState;

/// Which way a request named its app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via<'a> {
    Subdomain(&'a AppHost),
    Path,
}

/// The layer: app requests are served here, everything else goes on.
pub(crate) async fn serve_apps(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .map(str::to_string);
    if let Some(host) = host.as_deref() {
        if let Some(app_host) = state.gateway.apps().app_host_of(host) {
            return serve_subdomain(&state, &app_host, request).await;
        }
    }
    if request.uri().path().starts_with("/@") {
        return serve_path(&state, request).await;
    }
    next.run(request).await
}

/// The signed-in caller of an app request, and whether it was its
/// `Authorization` header (then taken off before the app sees it).
async fn caller_of(state: &AppState, headers: &HeaderMap, via: Via<'_>) -> (Option<Caller>, bool) {
    let control = &state.control;
    if let Some(token) = crate::extract::bearer_of(headers) {
        if let Ok(caller) = control.identity().authenticate_caller(&token, None).await {
            return (Some(caller), true);
        }
    }
    let caller = match via {
        Via::Subdomain(host) => match abode_web::cookie(headers, APP_SESSION_COOKIE) {
            Some(session) => {
                state
                    .gateway
                    .apps()
                    .app_session_caller(&session, host)
                    .await
            }
            None => None,
        },
        Via::Path => match abode_web::session_cookie(headers) {
            Some(session) => control
                .identity()
                .authenticate_caller(&session, None)
                .await
                .ok(),
            None => None,
        },
    };
    (caller, false)
}

async fn serve_subdomain(state: &AppState, host: &AppHost, request: Request) -> Response {
    let uri = request.uri().clone();
    if uri.path() == APP_AUTH_PATH {
        return exchange_code(state.gateway.apps(), host, &uri).await;
    }
    let (caller, by_header) = caller_of(state, request.headers(), Via::Subdomain(host)).await;
    let may_relay = !abode_gateway::is_relayed(request.headers());
    match state
        .gateway
        .open(caller.as_ref(), &host.address, may_relay)
        .await
    {
        Ok(Opened::Local(stream)) => {
            let path_and_query = uri
                .path_and_query()
                .map_or("/", |path| path.as_str())
                .to_string();
            serve_app(stream, request, &path_and_query, by_header).await
        }
        Ok(Opened::OnServer(url)) => relay_app(&url, request).await,
        Err(AppRefusal::SignIn) if request.method() == Method::GET => {
            let back = uri.path_and_query().map_or("/", |path| path.as_str());
            redirect(&state.gateway.apps().app_sign_in_url(host, back))
        }
        Err(refusal) => refused(refusal),
    }
}

async fn serve_path(state: &AppState, request: Request) -> Response {
    let path = request.uri().path().to_string();
    // /@OWNER/WS[.AGENT]/apps/SLUG[/REST]
    let mut parts = path.trim_start_matches("/@").splitn(4, '/');
    let (Some(owner), Some(workspace), Some("apps"), Some(rest)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return plain(StatusCode::NOT_FOUND, "no such app");
    };
    let (slug, inner) = match rest.split_once('/') {
        Some((slug, inner)) => (slug, format!("/{inner}")),
        None => {
            // Relative links need the trailing slash.
            let query = request
                .uri()
                .query()
                .map(|query| format!("?{query}"))
                .unwrap_or_default();
            return redirect(&format!("{path}/{query}"));
        }
    };
    if !state.gateway.apps().config().allow_path_apps {
        return plain(
            StatusCode::NOT_FOUND,
            "path apps are off on this server (they would share the dashboard's origin): \
             use the app's own host, or start the server with --allow-path-apps",
        );
    }
    let (workspace, agent) = match workspace.split_once('.') {
        Some((workspace, agent)) => (workspace, Some(agent.to_string())),
        None => (workspace, None),
    };
    let address = AppAddress {
        owner: owner.to_string(),
        workspace: workspace.to_string(),
        agent,
        slug: slug.to_string(),
    };
    let (caller, by_header) = caller_of(state, request.headers(), Via::Path).await;
    let may_relay = !abode_gateway::is_relayed(request.headers());
    match state
        .gateway
        .open(caller.as_ref(), &address, may_relay)
        .await
    {
        Ok(Opened::Local(stream)) => {
            let query = request
                .uri()
                .query()
                .map(|query| format!("?{query}"))
                .unwrap_or_default();
            serve_app(stream, request, &format!("{inner}{query}"), by_header).await
        }
        Ok(Opened::OnServer(url)) => relay_app(&url, request).await,
        Err(AppRefusal::SignIn) if request.method() == Method::GET => redirect("/login"),
        Err(refusal) => refused(refusal),
    }
}

fn refused(refusal: AppRefusal) -> Response {
    match refusal {
        AppRefusal::SignIn => plain(StatusCode::UNAUTHORIZED, "sign in to open this app"),
        AppRefusal::NotFound => plain(StatusCode::NOT_FOUND, "no such app"),
        AppRefusal::Unavailable(why) => plain(
            StatusCode::BAD_GATEWAY,
            &format!("the app cannot be reached: {why}"),
        ),
    }
}
