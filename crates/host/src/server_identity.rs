//! One running process per server id.
//!
//! A server is its data dir's `server-id`: it takes back the builds that id
//! holds, renews their leases and follows their Terraform. A data dir copied
//! to start a second server (a restore beside the original, a cloned VM)
//! carries the first one's id, and two processes with one id would each
//! take the other's builds for their own. So a server records which process
//! it is (host, data dir, pid) and beats every keeper round; a start that
//! finds its id beating recently from another host or data dir is refused,
//! with the way out: give the copy an id of its own (`abode server new-id`).
//! The same host and data dir is this server restarted (after a crash, its
//! row still looks alive), unless the process the row names still runs as
//! an abode server: then a second process was started on the data dir.

use std::time::Duration;

use crate::room::Host;
use abode_control::ControlError;

/// How long a server id stays live after its last beat, in job leases: the
/// keeper beats four times per lease.
const LIVE_FOR_LEASES: u32 = 2;

/// This process, as the database records it.
struct ThisProcess {
    host: String,
    data_dir: String,
    pid: i64,
}

/// Whether `pid` is a running `abode server` on this host (its command line
/// says so): a pid reused by another program is not.
fn runs_as_abode_server(pid: i64) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let mut words = cmdline.split(|byte| *byte == 0);
    let program = words.next().unwrap_or_default();
    String::from_utf8_lossy(program).ends_with("abode") && words.any(|word| word == b"server")
}

fn this_process(host: &Host) -> ThisProcess {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default();
    ThisProcess {
        host: if hostname.is_empty() {
            "unknown".into()
        } else {
            hostname
        },
        data_dir: host.inner.config.data_dir.display().to_string(),
        pid: i64::from(std::process::id()),
    }
}

impl Host {
    /// Records this process as the server id's, or refuses when the id is
    /// live from another host or data dir.
    pub async fn claim_server_identity(&self) -> Result<(), ControlError> {
        let me = this_process(self);
        let server = &self.inner.config.server_id;
        let store = &self.inner.store;
        let live_for = self.inner.config.job_lease * LIVE_FOR_LEASES;
        let live_ms =
            i64::try_from(live_for.max(Duration::from_secs(1)).as_millis()).unwrap_or(i64::MAX);
        if let Some(other) = store.server_instance(server).await? {
            let elsewhere = other.host != me.host || other.data_dir != me.data_dir;
            let live = other.beat_at >= self.now_ms().saturating_sub(live_ms);
            if !elsewhere && other.pid != me.pid && live && runs_as_abode_server(other.pid) {
                return Err(ControlError::Conflict(format!(
                    "another abode server (pid {}) already runs on this data dir as {server}: \
                     stop it first, or give this one a data dir of its own",
                    other.pid
                )));
            }
            if elsewhere && live {
                return Err(ControlError::Conflict(format!(
                    "this data dir's server id {server} is live in the database as another server \
                     (host {}, data dir {}, pid {}, last seen {}): a copied data dir needs an id of its \
                     own: run `abode server new-id --data-dir {}` and start it again",
                    other.host,
                    other.data_dir,
                    other.pid,
                    abode_control::times::utc_text(other.beat_at),
                    me.data_dir,
                )));
            }
        }
        store
            .put_server_instance(server, &me.host, &me.data_dir, me.pid)
            .await?;
        self.place_own_workspaces().await?;
        Ok(())
    }

    /// The keeper's beat: this process still runs as the server id.
    pub(crate) async fn beat_server_identity(&self) {
        let me = this_process(self);
        let server = &self.inner.config.server_id;
        match self
            .inner
            .store
            .beat_server_instance(server, &me.host, &me.data_dir, me.pid)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!(server = %server, "another process now runs as this server's id; give one of them a new id (`abode server new-id`)");
            }
            Err(error) => tracing::warn!(%error, "cannot record that this server is alive"),
        }
    }

    /// At shutdown: the id is free for this data dir's next start, or a copy.
    pub(crate) async fn forget_server_identity(&self) {
        let me = this_process(self);
        if let Err(error) = self
            .inner
            .store
            .forget_server_instance(&self.inner.config.server_id, &me.host, &me.data_dir, me.pid)
            .await
        {
            tracing::warn!(%error, "cannot remove this server's process record");
        }
    }
}
