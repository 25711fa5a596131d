//! Who holds a job's lease (and a workspace's state lock): a server, named
//! by its id, or an external provisioner daemon,
//! `provisioner:KEY_ID/KEY/ID` (`daemon_jobs::daemon_holder`); and
//! how a holder is named in a message. Shared by the door, the keeper, the
//! state backend and the daemons' side, so that none of them reaches into
//! another for it.

/// The prefix of a daemon's lease holder, beside servers' ids.
pub const DAEMON_HOLDER_PREFIX: &str = "provisioner:";

/// How a lease holder is named in a message: a server, or an external
/// provisioner daemon.
pub fn describe_holder(holder: &str) -> String {
    match holder.strip_prefix(DAEMON_HOLDER_PREFIX) {
        // The key's id makes the holder unique; its name and the daemon's
        // id are what people know it by.
        Some(daemon) => {
            let named = daemon.split_once('/').map_or(daemon, |(_, named)| named);
            format!("the external provisioner {named}")
        }
        None => format!("the server {holder}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_described_by_name() {
        let cases = [
            (
                "provisioner:0f3c/builders/d1-a",
                "the external provisioner builders/d1-a",
            ),
            ("7c1d-server", "the server 7c1d-server"),
        ];
        for (holder, described) in cases {
            assert_eq!(describe_holder(holder), described);
        }
    }
}
