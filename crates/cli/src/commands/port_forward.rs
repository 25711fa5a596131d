//! `abode port-forward WS --tcp LOCAL:REMOTE`: local TCP ports forwarded
//! to ports inside the workspace. Each accepted connection is its own
//! connection of kind `port-forward` (authorized and audited by the server,
//! counted as activity while open), piped to the agent, which connects to
//! `localhost:REMOTE` inside the workspace.

use std::str::FromStr;

use abode_agent::wsdial::into_stream;
use anyhow::Context;
use clap::Args;
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Args)]
pub struct PortForwardArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// `LOCAL:REMOTE`: listen on 127.0.0.1:LOCAL, forward to REMOTE inside
    /// the workspace (repeatable; `PORT` alone is `PORT:PORT`).
    #[arg(long = "tcp", value_name = "LOCAL:REMOTE", required = true)]
    pub tcp: Vec<Forward>,
    /// Which agent, in a workspace with several (its name in `abode show`).
    #[arg(long)]
    pub agent: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    pub local: u16,
    pub remote: u16,
}

impl FromStr for Forward {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let port = |part: &str| {
            part.parse::<u16>()
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| format!("{part:?} is not a port (1 to 65535)"))
        };
        match text.split_once(':') {
            Some((local, remote)) => Ok(Forward {
                local: port(local)?,
                remote: port(remote)?,
            }),
            None => {
                let both = port(text)?;
                Ok(Forward {
                    local: both,
                    remote: both,
                })
            }
        }
    }
}

pub fn run(args: PortForwardArgs) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(forward_all(args));
    runtime.shutdown_background();
    result
}

async fn forward_all(args: PortForwardArgs) -> anyhow::Result<u8> {
    let mut listeners = Vec::new();
    for forward in &args.tcp {
        let listener = TcpListener::bind(("127.0.0.1", forward.local))
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{}", forward.local))?;
        listeners.push((listener, *forward));
    }
    for (_, forward) in &listeners {
        eprintln!(
            "Forwarding 127.0.0.1:{} -> {}:{}",
            forward.local,
            crate::output::visible(&args.workspace),
            forward.remote
        );
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (listener, forward) in listeners {
        let workspace = args.workspace.clone();
        let agent = args.agent.clone();
        tasks.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let workspace = workspace.clone();
                let agent = agent.clone();
                tokio::spawn(async move {
                    if let Err(error) =
                        forward_one(tcp, &workspace, forward.remote, agent.as_deref()).await
                    {
                        eprintln!(
                            "abode: port {} -> {}: {}",
                            forward.local,
                            forward.remote,
                            crate::output::one_line(&error)
                        );
                    }
                });
            }
        });
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = tasks.join_next() => {}
    }
    Ok(super::EXIT_OK)
}

async fn forward_one(
    mut tcp: TcpStream,
    workspace: &str,
    port: u16,
    agent: Option<&str>,
) -> anyhow::Result<()> {
    let _ = tcp.set_nodelay(true);
    let socket = super::ssh::connect(workspace, "port-forward", Some(port), agent).await?;
    let mut stream = into_stream(socket);
    let chunk = abode_tunnel::frame::MAX_DATA;
    let _ = tokio::io::copy_bidirectional_with_sizes(&mut tcp, &mut stream, chunk, chunk).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_parse() {
        let cases = [
            (
                "8080:80",
                Ok(Forward {
                    local: 8080,
                    remote: 80,
                }),
            ),
            (
                "3000",
                Ok(Forward {
                    local: 3000,
                    remote: 3000,
                }),
            ),
            ("0:80", Err(())),
            ("a:80", Err(())),
            ("80:70000", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<Forward>().map_err(|_| ()), expected, "{text}");
        }
    }
}
