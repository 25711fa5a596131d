//! What interrupts a running build: a cancel asked of this process, a cancel
//! recorded in the database by anyone, this server shutting down, or this
//! server finding that it no longer holds the build's lease (it was frozen,
//! and another server queued the build again or failed it).

use std::time::Duration;

use tokio::sync::watch;

use crate::room::Host;
use tracing::Instrument;

/// How often a running build looks for a cancel recorded in the database
/// (by another server process, or before this worker registered the build).
const CANCEL_POLL: Duration = Duration::from_secs(1);

/// What interrupts a running build: a cancel asked of this process (through
/// `Host::running`), a cancel recorded in the database by anyone, at any
/// time since the build was queued, or this server shutting down.
pub(crate) struct Interruptions {
    host: Host,
    build_id: String,
    shutdown_watch: tokio::task::JoinHandle<()>,
    request_watch: tokio::task::JoinHandle<()>,
    lease_lost: watch::Receiver<bool>,
}

impl Interruptions {
    /// Registers the build's cancel switch and starts watching; the receiver
    /// turns true when the build must stop.
    /// With `lease_holder`, [`Interruptions::lease_lost`] turns true once
    /// that holder no longer holds the job's lease (the runner stops its
    /// Terraform then, unless it is applying: a half-done apply is worse
    /// than a finished one, and the state lock it still holds is the fence).
    pub(crate) fn start(
        host: &Host,
        build_id: &str,
        mut shutdown: watch::Receiver<bool>,
        lease_holder: Option<(String, String)>,
    ) -> (Interruptions, watch::Receiver<bool>) {
        let (switch, cancel) = watch::channel(false);
        host.builds()
            .cancel_switches()
            .register(build_id, switch.clone());
        let shutdown_switch = switch.clone();
        let shutdown_watch = tokio::spawn(
            async move {
                while !*shutdown.borrow_and_update() {
                    if shutdown.changed().await.is_err() {
                        return;
                    }
                }
                let _ = shutdown_switch.send(true);
            }
            .in_current_span(),
        );
        let (store, id) = (host.inner.store.clone(), build_id.to_string());
        let (lost, lease_lost) = watch::channel(false);
        let request_watch = tokio::spawn(async move {
            loop {
                if let Some((holder, worker)) = &lease_holder {
                    // An error is not a loss: the database may be away a moment.
                    if let Ok(None) = store.claimed_job_kind(&id, holder, Some(worker)).await {
                        tracing::warn!(build = %id, "this server no longer holds the build's lease");
                        let _ = lost.send(true);
                        return;
                    }
                }
                match store.cancel_requested(&id).await {
                    Ok(true) => {
                        let _ = switch.send(true);
                        return;
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(build = %id, %error, "cannot read whether a cancel was requested")
                    }
                }
                tokio::time::sleep(CANCEL_POLL).await;
            }
        }.in_current_span());
        let interruptions = Interruptions {
            host: host.clone(),
            build_id: build_id.to_string(),
            shutdown_watch,
            request_watch,
            lease_lost,
        };
        (interruptions, cancel)
    }

    /// Whether it was this server's shutdown that interrupted the build.
    pub(crate) fn by_shutdown(&self) -> bool {
        self.shutdown_watch.is_finished()
    }

    /// Turns true when this server lost the build's lease.
    pub(crate) fn lease_lost(&self) -> watch::Receiver<bool> {
        self.lease_lost.clone()
    }

    /// Whether this server lost the build's lease.
    pub(crate) fn by_lost_lease(&self) -> bool {
        *self.lease_lost.borrow()
    }

    pub(crate) fn end(self) {
        self.shutdown_watch.abort();
        self.request_watch.abort();
        self.host.builds().cancel_switches().forget(&self.build_id);
    }
}
