//! An app's HTTP, proxied (docs/apps.md): a visitor's request goes to the
//! app as HTTP/1.1 (WebSocket upgrades too, piped both ways) over the
//! app's stream, or, when the app's agent is on another server, to that
//! server as it is. What this module keeps is the isolation:
//!
//! - an app never sees Abode's credentials: the `Authorization` that signed
//!   the request in and every `abode_*` cookie are taken off the request;
//! - an app cannot set cookies for anything but itself: a `Set-Cookie`
//!   named `abode_*` or without a name is dropped, and a `Domain` attribute
//!   removed (so a subdomain app's cookie stays on its own host).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;

use crate::app_hosts::AppHost;
use crate::apps::{AppSession, AppStream, Apps, APP_SESSION_COOKIE, APP_SESSION_LIFETIME};
use crate::connection_log::{ByteCounts, ConnectionClient, EndReason};
use crate::relay::RELAYED_HEADER;

/// A short text answer of the app proxy, never cached.
pub fn plain(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

/// A `303 See Other` to `location`.
pub fn redirect(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(location) => (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response(),
        Err(_) => plain(StatusCode::BAD_REQUEST, "bad redirect"),
    }
}

/// A path inside the app to return to: absolute, never another host's.
fn safe_path(path: &str) -> &str {
    // A browser drops tabs and line breaks from a `Location`: `/\t/evil`
    // would be `//evil`, another host.
    if path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
    {
        path
    } else {
        "/"
    }
}

/// The query of a code's exchange on an app host.
#[derive(Default, serde::Deserialize)]
struct CodeQuery {
    code: Option<String>,
    path: Option<String>,
}

/// `/.abode/auth?code=...&path=...` on an app host: the code the dashboard
/// minted becomes this host's session cookie.
pub async fn exchange_code(apps: &Apps, host: &AppHost, uri: &Uri) -> Response {
    let query = axum::extract::Query::<CodeQuery>::try_from_uri(uri)
        .map(|query| query.0)
        .unwrap_or_default();
    let path = query.path.unwrap_or_else(|| "/".into());
    let Some(code) = query.code else {
        return plain(
            StatusCode::BAD_REQUEST,
            "no code: open the app's address again",
        );
    };
    let Some(session) = apps.exchange_app_code(&code, host).await else {
        return plain(
            StatusCode::BAD_REQUEST,
            "this sign-in link was used or expired: open the app's address again",
        );
    };
    let secure = if apps.access_url().starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{APP_SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        APP_SESSION_LIFETIME.as_secs()
    );
    let mut response = redirect(safe_path(&path));
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    // The code is spent, and still says nothing to anyone.
    response.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Request headers that are the connection's, not the request's.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .is_some_and(|value| !value.is_empty())
}

/// Everything the app may see of the request's headers.
fn app_request_headers(headers: &HeaderMap, by_header: bool) -> HeaderMap {
    let upgrade = is_upgrade(headers);
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower) && !(upgrade && lower == "connection") {
            continue;
        }
        if name == header::UPGRADE && !upgrade {
            continue;
        }
        if name == header::AUTHORIZATION && by_header {
            continue;
        }
        if name == header::COOKIE || name.as_str() == RELAYED_HEADER {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    // Cookies, without Abode's.
    let kept: Vec<String> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .map(str::trim)
        .filter(|pair| !pair.is_empty() && !pair.starts_with("abode_"))
        .map(str::to_string)
        .collect();
    if let Ok(value) = HeaderValue::from_str(&kept.join("; ")) {
        if !kept.is_empty() {
            out.insert(header::COOKIE, value);
        }
    }
    out
}

/// The app's `Set-Cookie`, as it may stand: `None` for Abode's own names
/// and for a cookie without a name (`=abode_app_session=S`, or no `=` at
/// all), which a browser sends back as its bare value, that is as the
/// cookie the value spells; without any `Domain` (a cookie stays on the
/// host that served it).
fn app_set_cookie(value: &str) -> Option<String> {
    let mut attributes = value.split(';');
    let pair = attributes.next()?.trim();
    let (name, _) = pair.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || name.to_ascii_lowercase().starts_with("abode_") {
        return None;
    }
    let mut out = pair.to_string();
    for attribute in attributes {
        let attribute = attribute.trim();
        if attribute.to_ascii_lowercase().starts_with("domain") {
            continue;
        }
        out.push_str("; ");
        out.push_str(attribute);
    }
    Some(out)
}

fn app_response_headers(headers: &HeaderMap, upgraded: bool) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower) && !(upgraded && lower == "connection") {
            continue;
        }
        if name == header::SET_COOKIE {
            let kept = value
                .to_str()
                .ok()
                .and_then(app_set_cookie)
                .and_then(|kept| HeaderValue::from_str(&kept).ok());
            if let Some(kept) = kept {
                out.append(header::SET_COOKIE, kept);
            }
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Joins the app's base path and the request's path inside the app.
fn app_uri(base: &str, inner: &str) -> String {
    let base = base.trim_end_matches('/');
    format!("{base}{inner}")
}

/// Sends the visitor's request (for `inner`, the path and query inside the
/// app) to the app over its stream, and its answer back, filtered.
/// `by_header`: the request was signed in by its `Authorization`, which the
/// app does not see.
pub async fn serve_app(
    opened: AppStream,
    request: Request,
    inner: &str,
    by_header: bool,
) -> Response {
    let AppStream {
        stream,
        target,
        app,
        mut session,
    } = opened;
    session.from_client(ConnectionClient {
        ip: request
            .extensions()
            .get::<abode_control::ClientAddress>()
            .map(|client| client.ip.to_string()),
        user_agent: request
            .headers()
            .get(header::USER_AGENT)
            .and_then(|agent| agent.to_str().ok())
            .map(|agent| agent.chars().take(512).collect()),
    });
    let mut headers = app_request_headers(request.headers(), by_header);
    if let Some(host) = request.headers().get(header::HOST).cloned() {
        headers.insert(HeaderName::from_static("x-forwarded-host"), host);
    }
    let uri = app_uri(&target.path, inner);
    let unreachable = format!(
        "the app {} did not answer on {}:{} in the workspace (is it running?)",
        app.definition.slug, target.host, target.port
    );
    match forward(stream, request, &uri, headers, Some(session)).await {
        Ok(response) => filtered(response),
        Err(error) => {
            tracing::info!(app = %app.definition.slug, %error, "an app did not answer");
            plain(StatusCode::BAD_GATEWAY, &unreachable)
        }
    }
}

/// The app's answer as the visitor gets it: its headers filtered
/// ([`app_response_headers`]).
fn filtered(mut response: Response) -> Response {
    let upgraded = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    let headers = app_response_headers(response.headers(), upgraded);
    *response.headers_mut() = headers;
    response
}

/// Sends the visitor's request to the server that holds the app's agent
/// tunnel, as it is (its `Host`, cookies and `Authorization`: that server
/// signs it in and decides), marked relayed so it is never relayed again.
pub async fn relay_app(relay_url: &str, request: Request) -> Response {
    let unreachable = |why: String| {
        plain(
            StatusCode::BAD_GATEWAY,
            &format!(
                "the app's agent is connected to another server ({relay_url}), which cannot be reached now: {why}; try again"
            ),
        )
    };
    let (https, authority) = match relay_url.split_once("://") {
        Some(("http", rest)) => (false, rest.trim_end_matches('/')),
        Some(("https", rest)) => (true, rest.trim_end_matches('/')),
        _ => return unreachable("not an http:// or https:// URL".into()),
    };
    let authority = authority.split('/').next().unwrap_or(authority);
    let address = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_string()
    } else if https {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    };
    let tcp = match tokio::net::TcpStream::connect(&address).await {
        Ok(tcp) => tcp,
        Err(error) => return unreachable(error.to_string()),
    };
    let _ = tcp.set_nodelay(true);
    let uri = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .to_string();
    let mut headers = request.headers().clone();
    headers.insert(
        HeaderName::from_static(RELAYED_HEADER),
        HeaderValue::from_static("1"),
    );
    tracing::info!(server = %relay_url, "relaying an app request to the server that holds the agent's tunnel");
    let answer = if https {
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let Ok(name) = tokio_rustls::rustls::pki_types::ServerName::try_from(host) else {
            return unreachable("its host is not a valid name".into());
        };
        let connector = tokio_rustls::TlsConnector::from(abode_tls::client_config());
        match connector.connect(name, tcp).await {
            Ok(tls) => forward(tls, request, &uri, headers, None).await,
            Err(error) => return unreachable(error.to_string()),
        }
    } else {
        forward(tcp, request, &uri, headers, None).await
    };
    answer.unwrap_or_else(|error| unreachable(error.to_string()))
}

/// Sends `request` (to `uri`, with `headers`) over `io` as HTTP/1.1 and
/// streams the answer back; a WebSocket upgrade is piped both ways once
/// both sides switched, logged as an app session (`session`; none for a
/// request relayed to the holding server, which logs it) with its bytes
/// and end.
async fn forward<S>(
    io: S,
    mut request: Request,
    uri: &str,
    headers: HeaderMap,
    session: Option<AppSession>,
) -> Result<Response, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let client_upgrade = is_upgrade(request.headers()).then(|| hyper::upgrade::on(&mut request));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let method = request.method().clone();
    let mut forwarded = axum::http::Request::new(request.into_body());
    *forwarded.method_mut() = method;
    *forwarded.headers_mut() = headers;
    if let Ok(uri) = uri.parse() {
        *forwarded.uri_mut() = uri;
    }
    let mut response = sender.send_request(forwarded).await?;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let upstream = hyper::upgrade::on(&mut response);
        if let Some(client_upgrade) = client_upgrade {
            tokio::spawn(async move {
                if let (Ok(client), Ok(upstream)) = (client_upgrade.await, upstream.await) {
                    let logged = session.map(|session| session.log.opened(session.entry));
                    let bytes = logged
                        .as_ref()
                        .map(|logged| logged.bytes.clone())
                        .unwrap_or_default();
                    // Counted as read, so that a connection cut mid-way
                    // still says what it carried.
                    let mut client = Counted {
                        io: TokioIo::new(client),
                        bytes: bytes.clone(),
                        to_workspace: true,
                    };
                    let mut upstream = Counted {
                        io: TokioIo::new(upstream),
                        bytes,
                        to_workspace: false,
                    };
                    let copied = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    if let Some(logged) = logged {
                        let why = match copied {
                            Ok(_) => EndReason::ClientClosed,
                            Err(_) => EndReason::Interrupted,
                        };
                        logged.close(why).await;
                    }
                }
            });
        }
        let (parts, _) = response.into_parts();
        return Ok(Response::from_parts(parts, Body::empty()));
    }
    let (parts, body) = response.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// One side of an app session's socket, counting what is read from it
/// into the connection log's counters (a relaxed atomic add per read).
struct Counted<T> {
    io: T,
    bytes: std::sync::Arc<ByteCounts>,
    /// Read from the person (else: from the app).
    to_workspace: bool,
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        if read > 0 {
            if self.to_workspace {
                self.bytes.to_workspace(read);
            } else {
                self.bytes.from_workspace(read);
            }
        }
        polled
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn apps_never_see_abode_credentials() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer secret".parse().unwrap());
        headers.insert(
            header::COOKIE,
            "abode_session=s1; theme=dark; abode_app_session=s2"
                .parse()
                .unwrap(),
        );
        headers.insert(header::ACCEPT, "text/html".parse().unwrap());
        headers.insert(header::CONNECTION, "keep-alive".parse().unwrap());
        let seen = app_request_headers(&headers, true);
        assert_eq!(seen.get(header::AUTHORIZATION), None);
        assert_eq!(seen.get(header::COOKIE).unwrap(), "theme=dark");
        assert_eq!(seen.get(header::ACCEPT).unwrap(), "text/html");
        assert_eq!(seen.get(header::CONNECTION), None);
        // An Authorization that is not Abode's is the app's own.
        assert!(app_request_headers(&headers, false)
            .get(header::AUTHORIZATION)
            .is_some());
    }

    #[test]
    fn apps_set_cookies_for_themselves_only() {
        let cases = [
            (
                "a=1; Path=/; Domain=example.com; HttpOnly",
                Some("a=1; Path=/; HttpOnly"),
            ),
            ("abode_session=x; Path=/", None),
            ("ABODE_SESSION=x", None),
            ("b=2", Some("b=2")),
            ("c=3; domain=.apps.test", Some("c=3")),
            // Nameless: sent back as `abode_app_session=x`, Abode's cookie.
            ("=abode_app_session=x; Path=/", None),
            (" =abode_session=x", None),
            ("=x", None),
            ("abode_app_session", None),
            ("d=e=f", Some("d=e=f")),
        ];
        for (given, kept) in cases {
            assert_eq!(app_set_cookie(given).as_deref(), kept, "{given}");
        }
    }

    #[test]
    fn an_app_s_path_is_joined_to_its_base() {
        assert_eq!(app_uri("/", "/a/b?c"), "/a/b?c");
        assert_eq!(app_uri("/lab/", "/a"), "/lab/a");
    }

    #[test]
    fn paths_to_return_to_stay_on_the_host() {
        assert_eq!(safe_path("/lab?x=1"), "/lab?x=1");
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil",
            "",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r/evil.example",
        ] {
            assert_eq!(safe_path(bad), "/", "{bad}");
        }
    }
}
