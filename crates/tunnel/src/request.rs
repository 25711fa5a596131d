//! What a stream the server opens to an agent is for: the header of its
//! `Open` frame.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamKind {
    /// The agent serves SSH on the stream.
    Ssh,
    /// The agent connects the stream to a TCP port inside the workspace.
    PortForward,
    /// The agent attaches the stream to a terminal session that outlives
    /// it (the web terminal, [`crate::terminal`]).
    Pty,
}

impl StreamKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Ssh => "ssh",
            StreamKind::PortForward => "port-forward",
            StreamKind::Pty => "pty",
        }
    }
}

impl std::str::FromStr for StreamKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "ssh" => Ok(StreamKind::Ssh),
            "port-forward" => Ok(StreamKind::PortForward),
            "pty" => Ok(StreamKind::Pty),
            other => Err(format!(
                "unknown connection kind {other:?}: expected ssh, port-forward or pty"
            )),
        }
    }
}

/// The header of a stream from the server to an agent.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRequest {
    pub kind: StreamKind,
    /// The TCP port inside the workspace (`port-forward`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The host the port is on, on the agent's side (`port-forward` of an
    /// app whose `url` names one; `localhost` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The workspace's SSH host key (`ssh`): the 32-byte Ed25519 seed, hex.
    /// The platform keeps it so that it survives restarts; only the agent
    /// ever receives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
    /// The terminal session to attach to (`pty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<crate::terminal::TerminalOpen>,
    /// A one-time ticket (`port-forward`): the agent may carry the stream
    /// on a connection of its own to the server ([`crate::dial_back`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dial_back: Option<String>,
    /// Who connects (for the agent's log, and whose terminal sessions a
    /// `pty` stream may attach to).
    pub user: String,
}

impl std::fmt::Debug for StreamRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRequest")
            .field("kind", &self.kind)
            .field("port", &self.port)
            .field("host", &self.host)
            .field("host_key", &self.host_key.as_ref().map(|_| "(hidden)"))
            .field("terminal", &self.terminal)
            .field("dial_back", &self.dial_back.as_ref().map(|_| "(hidden)"))
            .field("user", &self.user)
            .finish()
    }
}
