//! The agents' tunnels, and where a workspace's agent is: every way into a
//! workspace starts here.
//!
//! Each running agent keeps one connection to the server (the API glues its
//! WebSocket to an [`abode_tunnel::Mux`] and registers it here while it
//! lasts). With several servers, each records the tunnels it holds in the
//! database with the URL the others reach it at (`Config::relay_url`), so
//! that [`Tunnels::locate`] answers "on this server" with the tunnel, or
//! "on server X" with that server's URL.
//!
//! A tunnel counts only while its agent is one of its workspace's agents
//! now, in a started workspace: one that is not (an agent process that
//! outlived a stop, or a start build that replaced its token) is closed on
//! the way, never a way in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use abode_control::ControlError;
use abode_store::{Agent, Store, StoreError, Transition, Workspace};
use abode_tunnel::Mux;
use tokio::sync::oneshot;

/// Where a target is: a stream to it on this server, or the URL of the
/// server that holds its agent's tunnel (`Config::relay_url`), where the
/// request goes as it is and that server decides again.
pub enum Opened<S> {
    Local(S),
    OnServer(String),
}

/// The agents' tunnels up in this process; cheap to clone.
#[derive(Clone)]
pub struct Tunnels {
    inner: Arc<TunnelsParts>,
}

struct TunnelsParts {
    store: Store,
    registry: Registry,
    /// This server, for the tunnels' records.
    server_id: String,
    /// Where the other servers reach this one (`Config::relay_url`).
    relay_url: Option<String>,
}

/// The tunnels by the hash of the agent's token: the one thing that names
/// an agent across builds (a start build that keeps an agent, same token
/// and process, gives it a new id).
#[derive(Default)]
struct Registry {
    agents: Mutex<HashMap<String, LiveAgent>>,
    generation: AtomicU64,
}

struct LiveAgent {
    workspace_id: String,
    name: String,
    /// Which of the agent's connections this is: a reconnect replaces the
    /// entry, and the old connection's end must not remove the new one.
    generation: u64,
    mux: Mux,
    /// Tells the connection's task to close it.
    evict: oneshot::Sender<Eviction>,
}

/// Why the server closes an agent's tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// The same agent (its token) connected again: the newest connection
    /// wins (the old one is most likely dead and not noticed yet).
    Replaced,
    /// The agent is not one of its workspace's agents any more (a stop, or a
    /// start build that replaced it): nothing may reach it through the
    /// platform.
    Gone,
}

impl Eviction {
    /// The WebSocket close code the agent is told (private-use range).
    pub fn close_code(self) -> u16 {
        match self {
            Eviction::Replaced => abode_tunnel::CLOSE_REPLACED,
            Eviction::Gone => abode_tunnel::CLOSE_GONE,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Eviction::Replaced => "replaced by a newer connection with this agent's token",
            Eviction::Gone => "this agent is no longer one of its workspace's agents",
        }
    }
}

impl Registry {
    fn agents(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveAgent>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a connection of the agent whose token hashes to `key`; an
    /// older connection of the same agent is told to close. Its generation
    /// and where its own eviction arrives.
    fn register(
        &self,
        key: &str,
        workspace_id: &str,
        name: &str,
        mux: Mux,
    ) -> (u64, oneshot::Receiver<Eviction>, bool) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let (evict, evicted) = oneshot::channel();
        let live = LiveAgent {
            workspace_id: workspace_id.to_string(),
            name: name.to_string(),
            generation,
            mux,
            evict,
        };
        let replaced = match self.agents().insert(key.to_string(), live) {
            Some(old) => {
                let _ = old.evict.send(Eviction::Replaced);
                true
            }
            None => false,
        };
        (generation, evicted, replaced)
    }

    /// Forgets connection `generation` of `key`, unless a newer one took
    /// its place.
    fn unregister(&self, key: &str, generation: u64) -> bool {
        let mut agents = self.agents();
        if agents
            .get(key)
            .is_some_and(|live| live.generation == generation)
        {
            agents.remove(key);
            return true;
        }
        false
    }

    /// Closes the tunnel of `key` (the agent is gone).
    fn evict(&self, key: &str, why: Eviction) {
        if let Some(live) = self.agents().remove(key) {
            let _ = live.evict.send(why);
        }
    }

    /// The open tunnels of a workspace's agents (named `name` if given), by
    /// agent name: their keys and handles.
    fn of_workspace(&self, workspace_id: &str, name: Option<&str>) -> Vec<(String, String, Mux)> {
        let mut found: Vec<(String, String, Mux)> = self
            .agents()
            .iter()
            .filter(|(_, live)| live.workspace_id == workspace_id && live.mux.is_open())
            .filter(|(_, live)| name.is_none_or(|name| live.name == name))
            .map(|(key, live)| (key.clone(), live.name.clone(), live.mux.clone()))
            .collect();
        found.sort_by(|a, b| a.1.cmp(&b.1));
        found
    }
}

/// Keeps an agent's tunnel registered; dropping it (the connection ended)
/// unregisters it.
pub struct AgentTunnel {
    tunnels: Tunnels,
    key: String,
    generation: u64,
    evicted: oneshot::Receiver<Eviction>,
    replaced: bool,
}

impl AgentTunnel {
    /// Whether this connection took the place of an older one of the same
    /// agent (which is being closed).
    pub fn replaced_another(&self) -> bool {
        self.replaced
    }

    /// Resolves when the server wants this connection closed, and why.
    pub async fn evicted(&mut self) -> Eviction {
        // A sender dropped without a word means the entry is gone: nothing
        // routes here any more either.
        (&mut self.evicted).await.unwrap_or(Eviction::Gone)
    }

    /// Whether the agent behind this tunnel is still one of its
    /// workspace's agents, in a started workspace (checked now and then by
    /// the connection's task, so that a tunnel outliving its agent goes
    /// away without waiting for someone to connect). A store error answers
    /// yes: a database hiccup does not cut tunnels.
    pub async fn still_current(&self, workspace_id: &str) -> bool {
        match self.tunnels.current_agent(&self.key, workspace_id).await {
            Ok(current) => current.is_some(),
            Err(error) => {
                tracing::warn!(%error, "cannot check an agent's tunnel against the store");
                true
            }
        }
    }
}

impl Drop for AgentTunnel {
    fn drop(&mut self) {
        let gone = self
            .tunnels
            .inner
            .registry
            .unregister(&self.key, self.generation);
        // Another connection of the same agent to this server keeps the
        // record; one to another server has replaced it already.
        if gone {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let (tunnels, key) = (self.tunnels.clone(), self.key.clone());
                runtime.spawn(async move {
                    let inner = &tunnels.inner;
                    if let Err(error) = inner
                        .store
                        .delete_agent_tunnel(&key, &inner.server_id)
                        .await
                    {
                        tracing::warn!(%error, "cannot remove an agent tunnel's record");
                    }
                });
            }
        }
    }
}

impl Tunnels {
    pub(crate) fn new(store: Store, server_id: String, relay_url: Option<String>) -> Tunnels {
        Tunnels {
            inner: Arc::new(TunnelsParts {
                store,
                registry: Registry::default(),
                server_id,
                relay_url,
            }),
        }
    }

    /// Registers an agent's tunnel (the agent authenticated with `token`);
    /// streams to its workspace go through `mux` until the returned guard
    /// is dropped. A newer connection with the same token replaces an older
    /// one, which is told to close ([`AgentTunnel::evicted`]).
    pub fn agent_tunnel_up(&self, agent: &Agent, token: &str, mux: Mux) -> AgentTunnel {
        let key = abode_credentials::secrets::token_hash(token);
        let (generation, evicted, replaced) =
            self.inner
                .registry
                .register(&key, &agent.workspace_id, &agent.name, mux);
        // Told to the other servers, so that a connection reaching them is
        // relayed here.
        if let Some(relay_url) = self.inner.relay_url.clone() {
            let (tunnels, key) = (self.clone(), key.clone());
            let (workspace_id, name) = (agent.workspace_id.clone(), agent.name.clone());
            tokio::spawn(async move {
                let inner = &tunnels.inner;
                if let Err(error) = inner
                    .store
                    .put_agent_tunnel(&key, &workspace_id, &name, &inner.server_id, &relay_url)
                    .await
                {
                    tracing::warn!(%error, "cannot record an agent's tunnel for the other servers");
                }
            });
        }
        AgentTunnel {
            tunnels: self.clone(),
            key,
            generation,
            evicted,
            replaced,
        }
    }

    /// Whether the workspace's latest successful build started it (an
    /// agent that outlived its workspace's stop is not a way in).
    pub(crate) async fn started(&self, workspace_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .inner
            .store
            .latest_succeeded_build(workspace_id)
            .await?
            .is_some_and(|build| build.transition == Transition::Start))
    }

    /// The agent whose token hashes to `key`, if it is one of the agents of
    /// workspace `workspace_id` now and that workspace is started (what
    /// authenticating the token would say).
    async fn current_agent(
        &self,
        key: &str,
        workspace_id: &str,
    ) -> Result<Option<Agent>, ControlError> {
        let agent = match self.inner.store.agent_by_token_hash(key).await {
            Ok(agent) if agent.workspace_id == workspace_id => agent,
            Ok(_) | Err(StoreError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        Ok(self.started(workspace_id).await?.then_some(agent))
    }

    /// Where the workspace's agent (the one named, or the first by name)
    /// is: its tunnel on this server, else (when `may_relay`: the request
    /// was not relayed already) the server holding one; `None` while no
    /// server has it.
    pub(crate) async fn locate(
        &self,
        workspace: &Workspace,
        name: Option<&str>,
        may_relay: bool,
    ) -> Result<Option<Opened<Mux>>, ControlError> {
        if let Some(mux) = self.live_agent(workspace, name).await? {
            return Ok(Some(Opened::Local(mux)));
        }
        if may_relay {
            if let Some(url) = self.remote_agent(workspace, name).await? {
                return Ok(Some(Opened::OnServer(url)));
            }
        }
        Ok(None)
    }

    /// The relay URL of another server holding a tunnel of one of the
    /// workspace's current agents (named `name` if given).
    async fn remote_agent(
        &self,
        workspace: &Workspace,
        name: Option<&str>,
    ) -> Result<Option<String>, ControlError> {
        let tunnels = self
            .inner
            .store
            .remote_agent_tunnels(&workspace.id, &self.inner.server_id)
            .await?;
        for tunnel in tunnels {
            if name.is_some_and(|name| tunnel.agent_name != name) {
                continue;
            }
            if self
                .current_agent(&tunnel.token_hash, &workspace.id)
                .await?
                .is_some()
            {
                return Ok(Some(tunnel.relay_url));
            }
        }
        Ok(None)
    }

    /// The tunnel of the workspace's agent (the one named, or the first by
    /// name) if it is up and its agent is one of the workspace's agents now.
    /// A tunnel whose agent is not is closed on the way.
    async fn live_agent(
        &self,
        workspace: &Workspace,
        name: Option<&str>,
    ) -> Result<Option<Mux>, ControlError> {
        let registry = &self.inner.registry;
        for (key, agent_name, mux) in registry.of_workspace(&workspace.id, name) {
            if self.current_agent(&key, &workspace.id).await?.is_some() {
                return Ok(Some(mux));
            }
            tracing::info!(
                agent = %agent_name,
                workspace = %workspace.id,
                "closing the tunnel of an agent that is no longer the workspace's"
            );
            registry.evict(&key, Eviction::Gone);
        }
        Ok(None)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use abode_tunnel::Side;
    use tokio::sync::mpsc;

    /// A tunnel handle whose other side is kept open by the returned
    /// channels.
    fn mux() -> (Mux, mpsc::Sender<Vec<u8>>, mpsc::Receiver<Vec<u8>>) {
        let (to_us, incoming) = mpsc::channel(8);
        let (outgoing, from_us) = mpsc::channel(8);
        let (mux, _accept, _task) = Mux::start(Side::Server, incoming, outgoing);
        (mux, to_us, from_us)
    }

    #[tokio::test]
    async fn the_newest_connection_of_an_agent_wins_and_the_old_one_is_told() {
        let tunnels = Registry::default();
        let (first_mux, _a, _b) = mux();
        let (second_mux, _c, _d) = mux();
        let (first, mut first_evicted, replaced) = tunnels.register("tok", "ws", "main", first_mux);
        assert!(!replaced);
        assert!(first_evicted.try_recv().is_err(), "nothing happened yet");
        let (second, mut second_evicted, replaced) =
            tunnels.register("tok", "ws", "main", second_mux);
        assert!(replaced);
        assert_eq!(first_evicted.try_recv().unwrap(), Eviction::Replaced);
        // The old connection's end does not unregister the new one.
        tunnels.unregister("tok", first);
        assert_eq!(tunnels.of_workspace("ws", None).len(), 1);
        assert!(second_evicted.try_recv().is_err());
        tunnels.unregister("tok", second);
        assert!(tunnels.of_workspace("ws", None).is_empty());
    }

    #[tokio::test]
    async fn a_gone_agent_is_closed_and_tunnels_are_found_by_workspace_and_name() {
        let tunnels = Registry::default();
        let (a, _a1, _a2) = mux();
        let (b, _b1, _b2) = mux();
        let (c, _c1, _c2) = mux();
        let (_, mut a_evicted, _) = tunnels.register("ka", "ws", "zeta", a);
        tunnels.register("kb", "ws", "alpha", b);
        tunnels.register("kc", "other", "alpha", c);
        let names = |name: Option<&str>| {
            tunnels
                .of_workspace("ws", name)
                .into_iter()
                .map(|(key, name, _)| format!("{key}:{name}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(None), ["kb:alpha", "ka:zeta"]);
        assert_eq!(names(Some("zeta")), ["ka:zeta"]);
        tunnels.evict("ka", Eviction::Gone);
        assert_eq!(a_evicted.try_recv().unwrap(), Eviction::Gone);
        assert_eq!(names(None), ["kb:alpha"]);
    }
}
