//! The cancel switches of the builds this process runs: the machine room
//! registers one while a build's Terraform runs, a person's cancel flips it,
//! so that a cancel is acted on at once, even when the database cannot
//! record it now (a full disk). Another server's build learns of a cancel
//! from its record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The switches by build id; cheap to clone, shared by clones.
#[derive(Clone, Default)]
pub struct CancelSwitches {
    switches: Arc<Mutex<HashMap<String, watch::Sender<bool>>>>,
}

impl CancelSwitches {
    /// Registers `build_id`'s switch while its run lasts.
    pub fn register(&self, build_id: &str, switch: watch::Sender<bool>) {
        if let Ok(mut switches) = self.switches.lock() {
            switches.insert(build_id.to_string(), switch);
        }
    }

    /// Marks `build_id` as run here before its run puts its own switch in
    /// place (a restarted server's followers).
    pub fn reserve(&self, build_id: &str) {
        if let Ok(mut switches) = self.switches.lock() {
            switches
                .entry(build_id.to_string())
                .or_insert_with(|| watch::channel(false).0);
        }
    }

    /// Whether this process runs `build_id` (yes when it cannot tell).
    pub fn runs(&self, build_id: &str) -> bool {
        self.switches
            .lock()
            .map(|switches| switches.contains_key(build_id))
            .unwrap_or(true)
    }

    /// Forgets `build_id`'s switch once its run ended.
    pub fn forget(&self, build_id: &str) {
        if let Ok(mut switches) = self.switches.lock() {
            switches.remove(build_id);
        }
    }

    /// Flips `build_id`'s switch, if this process runs it.
    pub fn flip(&self, build_id: &str) {
        if let Ok(switches) = self.switches.lock() {
            if let Some(switch) = switches.get(build_id) {
                let _ = switch.send(true);
            }
        }
    }
}
