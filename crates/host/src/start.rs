//! Starting the machine room: taking over what a dead server left
//! ([`Host::recover`]) and the workers and loops of a running server
//! ([`Host::start_provisioners`]). Nothing else imports it, so the modules
//! it starts do not name each other round.

use tokio::sync::watch;

use abode_control::ControlError;

use crate::room::Host;
use crate::{job_leases, provisioner, recovery, unserved};

impl Host {
    /// Takes over the builds a dead server left running (see `recovery`):
    /// each is followed until no Terraform of it runs, its state stored, and
    /// it ends failed with what happened. Old work dirs are cleared. The
    /// followers stop, interrupting what they follow, when `shutdown` turns
    /// true.
    pub async fn recover(
        &self,
        shutdown: watch::Receiver<bool>,
    ) -> Result<recovery::Recovered, ControlError> {
        recovery::recover(self, shutdown).await
    }

    /// Starts `count` provisioner workers, the job leases' keeper and the
    /// queue's announcements (also with no worker here: external daemons
    /// long-poll this server), and continues the restarts a dead server
    /// left half-done. They stop when `shutdown` turns true, interrupting
    /// the builds they run. Wait on the handles for a clean stop.
    pub fn start_provisioners(
        &self,
        count: usize,
        shutdown: watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.inner.config.metrics.provisioners_started(count);
        let names: Vec<String> = (0..count)
            .map(|index| format!("embedded-{index}"))
            .collect();
        let mut handles: Vec<tokio::task::JoinHandle<()>> = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                tokio::spawn(provisioner::worker(
                    self.clone(),
                    name.clone(),
                    count == 1 || index > 0,
                    shutdown.clone(),
                ))
            })
            .collect();
        handles.push(tokio::spawn(job_leases::keeper(
            self.clone(),
            names,
            shutdown.clone(),
        )));
        handles.push(tokio::spawn(unserved::watcher(
            self.clone(),
            shutdown.clone(),
        )));
        handles.push(tokio::spawn(job_leases::announcements(
            self.clone(),
            shutdown,
        )));
        // A restart whose stop succeeded while no server was there to
        // request its start (it died in between) starts now.
        let host = self.clone();
        handles.push(tokio::spawn(async move {
            host.continue_restarts().await;
        }));
        handles
    }
}
