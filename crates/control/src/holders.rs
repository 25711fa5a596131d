//! Who holds a job's lease (and a workspace's state lock): a server, named
//! by its id, or an external provisioner daemon, `provisioner:KEY/ID`; and
//! how a holder is named in a message. Shared by the door, the keeper, the
//! state backend and the daemons' side, so that none of them reaches into
//! another for it.

/// The prefix of a daemon's lease holder, beside servers' ids.
pub(crate) const DAEMON_HOLDER_PREFIX: &str = "provisioner:";

/// How a lease holder is named in a message: a server, or an external
/// provisioner daemon.
pub(crate) fn describe_holder(holder: &str) -> String {
    match holder.strip_prefix(DAEMON_HOLDER_PREFIX) {
        Some(daemon) => format!("the external provisioner {daemon}"),
        None => format!("the server {holder}"),
    }
}
