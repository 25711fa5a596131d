//! The agent's side of a dial-back ([`abode_tunnel::dial_back`]): a
//! connection of its own to the server for one stream, opened with the
//! stream's ticket and the agent token, over TLS with the same trust as the
//! tunnel when the access URL is `https://`.
//!
//! The exchange is one HTTP/1.1 upgrade, written and read here rather than
//! through an HTTP client: after the `101` the connection is the stream's
//! bytes, and what the server sent after its answer's head stays in the
//! returned reader's buffer.

use std::time::Duration;

use abode_tunnel::dial_back::{is_ticket, STREAMS_PATH, TICKET_HEADER, UPGRADE_PROTOCOL};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::MaybeTlsStream;

/// A dialed-back connection, ready to carry the stream's bytes.
pub type Dialed = BufReader<MaybeTlsStream<TcpStream>>;

/// The most an answer's head may take before it is refused.
const MAX_HEAD: usize = 16 * 1024;

/// How long a dial-back may take, well within the server's wait for it
/// (15 s): one that hangs (a route that drops packets, a proxy that never
/// answers) falls back to the tunnel in time.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DialBackError {
    #[error("the access URL {0} is not an http:// or https:// URL")]
    Url(String),
    #[error("cannot reach {address}: {reason}")]
    Connect { address: String, reason: String },
    #[error("the server answered {0} instead of switching protocols")]
    Refused(String),
    #[error("the server's answer is not HTTP/1.1 ({0})")]
    Malformed(&'static str),
    /// The server's certificate was refused (one line: which, why, the fix).
    #[error("{0}")]
    Certificate(String),
    #[error("no answer within {} s", DIAL_TIMEOUT.as_secs())]
    TimedOut,
    /// What the tunnel brought is no ticket, or the token no header value.
    #[error("{0}")]
    Unusable(&'static str),
}

/// Where `base_url` says to connect: whether over TLS, the host (for the
/// certificate), `host:port`, and the path prefix.
fn target(base_url: &str) -> Result<(bool, String, String, String), DialBackError> {
    let bad = || DialBackError::Url(base_url.to_string());
    let (tls, rest) = match base_url.split_once("://") {
        Some(("https", rest)) => (true, rest),
        Some(("http", rest)) => (false, rest),
        _ => return Err(bad()),
    };
    let (authority, prefix) = match rest.find('/') {
        Some(at) => (&rest[..at], rest[at..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(bad());
    }
    let has_port = match authority.rfind(':') {
        Some(at) => !authority[at..].contains(']'),
        None => false,
    };
    let address = if has_port {
        authority.to_string()
    } else if tls {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    };
    let host = match address.rsplit_once(':') {
        Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => authority,
    };
    Ok((tls, host.to_string(), address, prefix.to_string()))
}

/// Opens the dial-back connection of `ticket` to the server at `base_url`,
/// within [`DIAL_TIMEOUT`].
pub async fn dial(base_url: &str, token: &str, ticket: &str) -> Result<Dialed, DialBackError> {
    if !is_ticket(ticket) {
        return Err(DialBackError::Unusable("the server sent no usable ticket"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(DialBackError::Unusable(
            "the agent token is not a valid header value",
        ));
    }
    tokio::time::timeout(DIAL_TIMEOUT, dial_untimed(base_url, token, ticket))
        .await
        .map_err(|_| DialBackError::TimedOut)?
}

async fn dial_untimed(base_url: &str, token: &str, ticket: &str) -> Result<Dialed, DialBackError> {
    let (tls, host, address, prefix) = target(base_url)?;
    let connect_error = |reason: String| DialBackError::Connect {
        address: address.clone(),
        reason,
    };
    let tcp = TcpStream::connect(&address)
        .await
        .map_err(|error| connect_error(error.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let stream = if tls {
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| DialBackError::Url(base_url.to_string()))?;
        let connector = tokio_rustls::TlsConnector::from(abode_tls::client_config());
        let tls = connector.connect(name, tcp).await.map_err(|error| {
            match abode_tls::explain(&error, &address) {
                Some(line) => DialBackError::Certificate(line),
                None => connect_error(error.to_string()),
            }
        })?;
        MaybeTlsStream::Rustls(tls)
    } else {
        MaybeTlsStream::Plain(tcp)
    };
    let mut stream = BufReader::new(stream);
    let authority = address
        .strip_suffix(if tls { ":443" } else { ":80" })
        .unwrap_or(&address);
    let request = format!(
        "GET {prefix}{STREAMS_PATH} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n{TICKET_HEADER}: {ticket}\r\nConnection: Upgrade\r\nUpgrade: {UPGRADE_PROTOCOL}\r\n\r\n",
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| connect_error(error.to_string()))?;
    stream
        .flush()
        .await
        .map_err(|error| connect_error(error.to_string()))?;
    read_switching(&mut stream, &address).await?;
    Ok(stream)
}

/// Reads the answer's head (from `address`); `Ok` when it switched to the
/// stream.
async fn read_switching(stream: &mut Dialed, address: &str) -> Result<(), DialBackError> {
    let mut line = Vec::new();
    let mut status = None;
    let mut upgraded_to_stream = false;
    let mut taken = 0;
    loop {
        line.clear();
        // Never more than what is left of the head's bound, even in one
        // endless line.
        let left = (MAX_HEAD - taken) as u64;
        let read = (&mut *stream)
            .take(left)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|error| DialBackError::Connect {
                address: address.to_string(),
                reason: error.to_string(),
            })?;
        taken += read;
        if taken >= MAX_HEAD {
            return Err(DialBackError::Malformed("its head is too long"));
        }
        if read == 0 {
            return Err(DialBackError::Malformed("it ended before its head did"));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if status.is_none() {
            let mut parts = text.splitn(3, ' ');
            match (parts.next(), parts.next()) {
                (Some(version), Some(code)) if version.starts_with("HTTP/1.") => {
                    status = Some(code.to_string());
                }
                _ => return Err(DialBackError::Malformed("no status line")),
            }
            continue;
        }
        if text.is_empty() {
            break;
        }
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("upgrade")
                && value.trim().eq_ignore_ascii_case(UPGRADE_PROTOCOL)
            {
                upgraded_to_stream = true;
            }
        }
    }
    match status.as_deref() {
        Some("101") if upgraded_to_stream => Ok(()),
        Some("101") => Err(DialBackError::Malformed("it switched to another protocol")),
        Some(other) => Err(DialBackError::Refused(other.to_string())),
        None => Err(DialBackError::Malformed("no status line")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_access_url_names_where_to_dial() {
        let cases = [
            (
                "http://127.0.0.1:3000",
                (false, "127.0.0.1", "127.0.0.1:3000", ""),
            ),
            (
                "https://abode.example.com",
                (true, "abode.example.com", "abode.example.com:443", ""),
            ),
            (
                "https://abode.example.com/",
                (true, "abode.example.com", "abode.example.com:443", ""),
            ),
            (
                "http://example.com/abode/",
                (false, "example.com", "example.com:80", "/abode"),
            ),
            ("https://[::1]:8443", (true, "::1", "[::1]:8443", "")),
            ("http://[::1]", (false, "::1", "[::1]:80", "")),
        ];
        for (url, (tls, host, address, prefix)) in cases {
            let got = target(url).unwrap();
            assert_eq!(
                got,
                (
                    tls,
                    host.to_string(),
                    address.to_string(),
                    prefix.to_string()
                ),
                "{url}"
            );
        }
        for bad in ["ftp://example.com", "example.com", "http://", "https:///x"] {
            assert!(target(bad).is_err(), "{bad}");
        }
    }
}
