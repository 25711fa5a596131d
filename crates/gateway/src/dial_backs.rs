//! Streams waiting for their agent to dial back ([`abode_tunnel::dial_back`]):
//! an app's bytes go on a connection of the agent's own, with no tunnel
//! framing between, and that connection finds its request by a one-time
//! ticket. A ticket carries at most one connection, and only from the agent
//! it was issued for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use abode_store::Agent;
use abode_tunnel::BoxedStream;
use rand::RngCore;
use tokio::sync::oneshot;

/// The streams waiting for a dial-back, by their ticket; cheap to clone.
#[derive(Clone, Default)]
pub struct DialBacks {
    waiting: Arc<Mutex<HashMap<String, WaitingDialBack>>>,
}

/// Whose dial-back a ticket waits for, and where the connection goes.
struct WaitingDialBack {
    workspace_id: String,
    agent_name: String,
    deliver: oneshot::Sender<BoxedStream>,
}

impl DialBacks {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, WaitingDialBack>> {
        // Every change to the map is a single insert or remove.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A one-time ticket for a stream to the workspace's agent
    /// `agent_name` to dial back with, and the wait for its connection.
    pub(crate) fn expect(&self, workspace_id: &str, agent_name: &str) -> DialBackWait {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        let ticket = hex::encode(secret);
        let (deliver, arrived) = oneshot::channel();
        self.waiting().insert(
            ticket.clone(),
            WaitingDialBack {
                workspace_id: workspace_id.to_string(),
                agent_name: agent_name.to_string(),
                deliver,
            },
        );
        DialBackWait {
            ticket,
            arrived,
            dial_backs: self.clone(),
        }
    }

    /// Uses `ticket` up: where its connection goes, if it was issued for
    /// this agent.
    fn take(
        &self,
        workspace_id: &str,
        agent_name: &str,
        ticket: &str,
    ) -> Option<oneshot::Sender<BoxedStream>> {
        let waiting = self.waiting().remove(ticket)?;
        (waiting.workspace_id == workspace_id && waiting.agent_name == agent_name)
            .then_some(waiting.deliver)
    }

    /// Where the connection `agent` dialed back with `ticket` goes: the
    /// stream waiting for it, if it waits for this agent (the ticket is
    /// used up either way). `None` for a ticket unknown here (never issued,
    /// used, given up on, or issued by another server).
    pub fn dialed_back(&self, agent: &Agent, ticket: &str) -> Option<oneshot::Sender<BoxedStream>> {
        let deliver = self.take(&agent.workspace_id, &agent.name, ticket);
        if deliver.is_none() {
            tracing::info!(
                agent = %agent.name,
                workspace = %agent.workspace_id,
                "an agent dialed back with a ticket this server does not wait for (it carries the stream on its tunnel)"
            );
        }
        deliver
    }
}

/// A stream's wait for its dial-back: the ticket to send its agent, and the
/// connection once the agent opened it. Dropped, the ticket is forgotten.
pub struct DialBackWait {
    ticket: String,
    arrived: oneshot::Receiver<BoxedStream>,
    dial_backs: DialBacks,
}

impl DialBackWait {
    /// The ticket, for the stream's header.
    pub fn ticket(&self) -> &str {
        &self.ticket
    }

    /// The agent's connection; `None` if it broke on the way.
    pub async fn arrived(&mut self) -> Option<BoxedStream> {
        (&mut self.arrived).await.ok()
    }
}

impl Drop for DialBackWait {
    fn drop(&mut self) {
        self.dial_backs.waiting().remove(&self.ticket);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dial_back_ticket_is_its_agent_s_and_is_used_once() {
        let dial_backs = DialBacks::default();
        let mut wait = dial_backs.expect("ws", "main");
        let other_wait = dial_backs.expect("ws", "main");
        let (ticket, other) = (wait.ticket().to_string(), other_wait.ticket().to_string());
        assert_eq!(ticket.len(), 64);
        assert_ne!(ticket, other, "each stream has its own ticket");
        assert!(dial_backs.take("ws", "main", "unknown").is_none());
        // Another workspace's agent, or another agent of the workspace, with
        // the ticket: refused, and the ticket is gone.
        assert!(dial_backs.take("other-ws", "main", &other).is_none());
        assert!(dial_backs.take("ws", "main", &other).is_none());
        let deliver = dial_backs.take("ws", "main", &ticket).unwrap();
        assert!(
            dial_backs.take("ws", "main", &ticket).is_none(),
            "used once"
        );
        let (near, _far) = tokio::io::duplex(64);
        assert!(deliver.send(Box::new(near)).is_ok());
        assert!(wait.arrived.try_recv().is_ok());
        assert!(dial_backs.waiting().is_empty());
        drop(other_wait);
        drop(wait);
        assert!(dial_backs.waiting().is_empty());
    }
}
