//! Where the WebSocket routes of docs/ssh.md are: the CLI's connections
//! into workspaces and the agent's tunnel. The sockets themselves are
//! asynchronous and live with their users (`abode_agent::wsdial`, which the
//! agent's tunnel and `abode ssh` dial with); this module only spells the
//! URLs, so that every path of the API stays in this crate.

use crate::client::workspace_segment;

/// Why a server URL cannot carry a WebSocket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectUrlError {
    #[error("the server URL {0:?} is neither http:// nor https://")]
    Unsupported(String),
}

/// The WebSocket URL of `path` (under `/api/v1`) on the server at
/// `base_url`: `ws://` for `http://`, `wss://` for `https://`.
pub fn websocket_url(base_url: &str, path: &str) -> Result<String, ConnectUrlError> {
    let base = base_url.trim_end_matches('/');
    if let Some(rest) = base.strip_prefix("https://") {
        return Ok(format!("wss://{rest}/api/v1{path}"));
    }
    let rest = base
        .strip_prefix("http://")
        .ok_or_else(|| ConnectUrlError::Unsupported(base.to_string()))?;
    Ok(format!("ws://{rest}/api/v1{path}"))
}

/// The path of a person's connection into `workspace` (`name` or
/// `owner/name`): `kind` is `ssh` or `port-forward` (with `port`), to the
/// agent named `agent` (by default the workspace's first).
pub fn workspace_connect_path(
    workspace: &str,
    kind: &str,
    port: Option<u16>,
    agent: Option<&str>,
) -> String {
    let mut path = format!(
        "/workspaces/{}/connect?kind={kind}",
        workspace_segment(workspace)
    );
    if let Some(port) = port {
        path.push_str(&format!("&port={port}"));
    }
    if let Some(agent) = agent {
        // The same percent-encoding as a path segment suits a query value.
        path.push_str(&format!("&agent={}", workspace_segment(agent)));
    }
    path
}

/// The path of an agent's tunnel.
pub const AGENT_CONNECT_PATH: &str = "/agent/connect";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_connections() {
        assert_eq!(
            websocket_url(
                "http://127.0.0.1:7080/",
                &workspace_connect_path("bob/dev", "ssh", None, None)
            )
            .unwrap(),
            "ws://127.0.0.1:7080/api/v1/workspaces/bob%2Fdev/connect?kind=ssh"
        );
        assert_eq!(
            workspace_connect_path("dev", "port-forward", Some(8080), None),
            "/workspaces/dev/connect?kind=port-forward&port=8080"
        );
        assert_eq!(
            workspace_connect_path("dev", "ssh", None, Some("module.m.extra[\"a&b\"]")),
            "/workspaces/dev/connect?kind=ssh&agent=module.m.extra%5B%22a%26b%22%5D"
        );
        assert_eq!(
            websocket_url("https://abode.example/", AGENT_CONNECT_PATH).unwrap(),
            "wss://abode.example/api/v1/agent/connect"
        );
        assert!(websocket_url("ftp://abode.example", AGENT_CONNECT_PATH).is_err());
    }
}
