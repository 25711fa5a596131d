//! Who acts: a person, or a named part of the system (`server`,
//! `scheduler`, `prebuilds`) acting on its own rules. Builds and audit events
//! record the actor either way, so "who stopped my workspace" always has an
//! answer.

use abode_store::{SystemActor, User};

/// Whoever asks the control plane for something.
#[derive(Debug, Clone)]
pub enum Actor {
    User(User),
    System(SystemActor),
}

impl Actor {
    /// The id recorded with what the actor did (a system actor's reserved
    /// account).
    pub fn id(&self) -> &str {
        match self {
            Actor::User(user) => &user.id,
            Actor::System(actor) => actor.user_id(),
        }
    }

    /// The name shown for the actor.
    pub fn name(&self) -> &str {
        match self {
            Actor::User(user) => &user.username,
            Actor::System(actor) => actor.username(),
        }
    }

    pub fn user(&self) -> Option<&User> {
        match self {
            Actor::User(user) => Some(user),
            Actor::System(_) => None,
        }
    }
}
