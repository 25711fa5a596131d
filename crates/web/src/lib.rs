//! Abode's web dashboard, served by `abode server` at `/` (docs/web.md).
//!
//! Pages are rendered on the server with `maud`, which escapes every value
//! it interpolates: a user's string can only become markup through
//! `PreEscaped`, which this crate never applies to anything but its own
//! constants. One small script and one stylesheet are compiled into the
//! binary; no page has inline script, so the Content-Security-Policy allows
//! scripts from this origin only.
//!
//! Every page calls the same [`Control`] functions as the JSON API, with the
//! same [`abode_control::Caller`]: authorization is the door's, never the
//! dashboard's. The session is the CLI's (a login's session token), carried
//! in an HttpOnly cookie; every state-changing request carries a CSRF token
//! derived from that session (`session.rs`), checked before any handler runs.
//!
//! # Pages
//!
//! One module per page family: `auth.rs` (sign-in, first user, sign-out),
//! `workspaces.rs` (list, workspace page, start, stop, update, delete),
//! `schedule.rs` (a workspace's schedule, extend and wake), `create.rs` (a new
//! workspace: template, preset, parameters), `builds.rs` (build page, confirm
//! and cancel, the log as server-sent events, which check their session again
//! at every wait and when `Identity` revokes a token, so that a stream ends
//! with its session), `report.rs` (the guard's report as a section),
//! `previews.rs` (a template version's page: its lint, its latest fleet
//! preview, preview and activation), `templates.rs` (versions, upload of a
//! folder archive), `policy.rs` (a template's lifecycle policy and its form),
//! `retained.rs`, `apps.rs`, `external_auth.rs`, `oidc.rs` (single sign-on's
//! login and callback), `inbox.rs`, `preferences.rs`, `tokens.rs`, `admin.rs`
//! (audit log, users and their roles, prebuild pools), `connections.rs` (the
//! connection log), `scripts.rs` (a workspace's scripts and a script's log), `html.rs` (the shell,
//! statuses as words, error pages, redirects), `state.rs` (`WebState`, what
//! every handler shares), `nav.rs` (the header's navigation, the pages'
//! addresses), `session.rs` (cookie, CSRF),
//! `terminal.rs` (the web terminal's page, docs/web-terminal.md: it checks the
//! connection as the route would, then its script opens the API's `kind=pty`
//! connection with the session cookie), `assets.rs` (`assets/app.js`,
//! `assets/app.css`, `assets/terminal.js`, and xterm.js with its fit addon
//! under `assets/vendor/`, vendored with their licences by
//! `scripts/vendor-web-assets.sh`, all `include_str!`'d).
//!
//! Pages point down only. A page is made of parts that name no page (the
//! schedule's section, the policy's form, the log panel, the apps, the
//! guard's report), and a part's form is answered by the page it is on,
//! with the page again beside a refusal (`workspaces::save_schedule`,
//! `templates::save_policy`). This root only declares the modules and routes.
//!
//! # Why server-rendered with maud
//!
//! Nothing to build ahead of time or commit as generated files, no Node
//! anywhere, one binary; every page is one request to the same control-plane
//! calls the API makes; and `maud` checks templates at compile time and escapes
//! every interpolated value, so a user's string cannot become markup unless the
//! code says `PreEscaped` (it never does on anything but constants). The script
//! is small and optional: the live log (EventSource) and the typed-name check
//! of a delete; the pages work without it. Hand-written escaping helpers were
//! the alternative: as small, but escaping would be by discipline, not
//! construction. The web terminal is the one page that needs a library in the
//! browser (a terminal emulator is not something to write by hand): xterm.js is
//! committed as built, so the rule stands that nothing is built ahead of time
//! with Node.
//!
//! # What it keeps
//!
//! - The dashboard decides no permission itself and calls no store method:
//!   every page and action calls the same control-plane service as the matching
//!   API route, with the signed-in person's `Caller`. What it shows or hides by
//!   role (the navigation, everyone's workspaces, Activate, upload, the
//!   schedule, policy and roles forms) asks `authz::authorize` or
//!   `widest_scope`, and the page behind it still asks the door.
//! - No state-changing request reaches a handler without the session's CSRF
//!   token (`session::require_csrf`, a layer over every route: HMAC-SHA256 of a
//!   label keyed by the session token; before sign-in, by a random pre-session
//!   cookie; in a form field, or in the `x-csrf-token` header for an upload).
//!   Every answer carries a Content-Security-Policy with `script-src 'self'`
//!   and no inline script, and `frame-ancestors 'none'` (the terminal page's
//!   adds only a per-answer style nonce, for xterm.js's style elements).
//! - The end-to-end tests drive the dashboard and the terminal in headless
//!   Chromium over WebDriver (`fantoccini`, plain HTTP to a `chromedriver` on
//!   loopback) and check the refusals and headers over plain HTTP with `ureq`.

mod admin;
mod apps;
mod assets;
mod auth;
mod builds;
mod connections;
mod create;
mod external_auth;
mod html;
mod inbox;
mod live;
mod nav;
mod oidc;
mod policy;
mod preferences;
mod previews;
mod report;
mod retained;
mod schedule;
mod scripts;
mod session;
mod sharing;
mod state;
mod templates;
mod terminal;
mod timeline;
mod tokens;
mod workspaces;

use axum::extract::Request;
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use abode_control::Control;
use abode_gateway::Gateway;

use state::WebState;

/// The dashboard's session token a browser's request carries in its
/// cookie: the web terminal's WebSocket (served with the API's connections)
/// is opened by the page with it.
pub fn session_cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    session::cookie(headers, session::SESSION_COOKIE)
}

/// The value of cookie `name` a request carries (an app host's session).
pub fn cookie(headers: &axum::http::HeaderMap, name: &str) -> Option<String> {
    session::cookie(headers, name)
}

/// The policy of every dashboard answer: scripts, styles and connections
/// from this origin only, no inline script, never framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes, with their own state and layers, ready to be
/// merged beside `/api/v1` (whose paths it never uses).
pub fn router(control: Control, gateway: Gateway) -> Router {
    let secure_cookies = control
        .config()
        .access_url
        .to_ascii_lowercase()
        .starts_with("https://");
    let state = WebState {
        control,
        gateway,
        secure_cookies,
    };
    Router::new()
        .route("/", get(workspaces::home))
        .route("/login", get(auth::login_page).post(auth::login))
        .route("/setup", get(auth::setup_page).post(auth::setup))
        .route("/logout", post(auth::logout))
        .route("/api/v1/oidc/login", get(oidc::login))
        .route(abode_oidc::CALLBACK_PATH, get(oidc::callback))
        .route("/workspaces", get(workspaces::list))
        .route("/workspaces/new", get(create::page).post(create::create))
        .route("/workspaces/:owner/:name", get(workspaces::page))
        .route(
            "/workspaces/:owner/:name/metadata/events",
            get(live::events),
        )
        .route(
            "/workspaces/:owner/:name/actions/:action",
            post(workspaces::act),
        )
        .route("/workspaces/:owner/:name/rename", post(workspaces::rename))
        .route("/workspaces/:owner/:name/sharing", post(sharing::change))
        .route(
            "/workspaces/:owner/:name/schedule",
            post(workspaces::save_schedule),
        )
        .route("/workspaces/:owner/:name/extend", post(workspaces::extend))
        .route("/workspaces/:owner/:name/wake", post(workspaces::wake))
        .route("/workspaces/:owner/:name/terminal", get(terminal::page))
        .route(
            "/workspaces/:owner/:name/scripts/log",
            get(scripts::log_page),
        )
        .route("/apps/auth", get(apps::auth))
        .route("/external-auth", get(external_auth::list))
        .route("/external-auth/:id/link", get(external_auth::link))
        .route("/external-auth/:id/unlink", post(external_auth::unlink))
        .route("/external-auth/:id/callback", get(external_auth::callback))
        .route("/workspaces/:owner/:name/builds/:number", get(builds::page))
        .route(
            "/workspaces/:owner/:name/builds/:number/events",
            get(builds::events),
        )
        .route(
            "/workspaces/:owner/:name/builds/:number/confirm",
            post(builds::confirm),
        )
        .route(
            "/workspaces/:owner/:name/builds/:number/cancel",
            post(builds::cancel),
        )
        .route("/templates", get(templates::list))
        .route("/templates/:name", get(templates::page))
        .route("/templates/:name/versions/:number", get(previews::page))
        .route(
            "/templates/:name/versions/:number/activate",
            post(previews::activate),
        )
        .route(
            "/templates/:name/versions/:number/preview",
            post(previews::start),
        )
        .route("/templates/:name/create", get(create::link))
        .route("/templates/:name/upload", post(templates::upload))
        .route("/templates/:name/policy", post(templates::save_policy))
        .route("/notifications", get(inbox::list))
        .route("/notifications/read-all", post(inbox::read_all))
        .route("/notifications/:id/read", post(inbox::read))
        .route(
            "/notifications/settings",
            get(preferences::page).post(preferences::save),
        )
        .route("/notifications/mandatory", post(preferences::mandatory))
        .route("/tokens", get(tokens::list).post(tokens::create))
        .route("/tokens/:name/revoke", post(tokens::revoke))
        .route("/audit", get(admin::audit))
        .route("/connections", get(connections::connections))
        .route("/users", get(admin::users).post(admin::create_user))
        .route("/users/:name/roles", post(admin::change_roles))
        .route("/users/:name/suspend", post(admin::suspend_user))
        .route("/users/:name/activate", post(admin::activate_user))
        .route("/prebuilds", get(admin::prebuilds))
        .route("/retained", get(retained::list))
        .route("/retained/:id/extend", post(retained::extend))
        .route("/assets/app.js", get(assets::script))
        .route("/assets/app.css", get(assets::stylesheet))
        .route("/assets/terminal.js", get(assets::terminal_script))
        .route("/assets/vendor/:file", get(assets::vendored))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            session::require_csrf,
        ))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(state)
}

/// Headers every dashboard answer carries, whatever produced it.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let nonce = response
        .extensions()
        .get::<terminal::StyleNonce>()
        .map(|nonce| nonce.0.clone());
    let headers = response.headers_mut();
    let fixed: [(HeaderName, &'static str); 5] = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    // The terminal's page takes its own style elements, by nonce.
    if let Some(Ok(policy)) = nonce.map(|nonce| {
        HeaderValue::from_str(&CONTENT_SECURITY_POLICY.replace(
            "style-src 'self';",
            &format!("style-src 'self' 'nonce-{nonce}';"),
        ))
    }) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    // Pages show one person's data: never kept by a shared cache.
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
