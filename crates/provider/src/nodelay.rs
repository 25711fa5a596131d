//! Turns Nagle's algorithm off on the provider's own gRPC sockets.
//!
//! tf-provider 0.2.2 serves gRPC over TCP without TCP_NODELAY. Each small
//! response then sits in the kernel until Terraform's delayed ACK (~40 ms on
//! Linux), for every call: `terraform plan` on the example template took 925 ms
//! against 72 ms for the same graph in `terraform_data` (benches/provider-startup.sh).
//! The sockets belong to tf-provider, so the provider reaches them through a
//! duplicate of each of its socket descriptors (`pidfd_getfd` on itself: safe,
//! and the duplicate shares the socket) and sets the option there. Linux copies
//! TCP_NODELAY from a listening socket to the connections it accepts, and the
//! scan repeats for a moment in case Terraform connected first.
//!
//! Best effort: on a kernel without pidfd_getfd (< 5.6) the provider works,
//! only slower. Drop this module once tf-provider sets TCP_NODELAY itself.

use std::time::Duration;

use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};

/// When to scan, from the moment the server has printed its handshake.
const SCANS_AFTER: [Duration; 5] = [
    Duration::ZERO,
    Duration::from_millis(2),
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(250),
];

/// Sets TCP_NODELAY on every TCP socket of this process; returns how many.
pub(crate) fn set_nodelay_on_own_sockets() -> usize {
    let Ok(own) = pidfd_open(getpid(), PidfdFlags::empty()) else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|fd| pidfd_getfd(&own, fd, PidfdGetfdFlags::empty()).ok())
        // Unix sockets refuse the option: only TCP ones count.
        .filter(|socket| rustix::net::sockopt::set_tcp_nodelay(socket, true).is_ok())
        .count()
}

/// Runs the scans on the provider's runtime, while the server starts.
pub(crate) async fn keep_sockets_nodelay() {
    let mut elapsed = Duration::ZERO;
    for at in SCANS_AFTER {
        tokio::time::sleep(at.saturating_sub(elapsed)).await;
        elapsed = at;
        set_nodelay_on_own_sockets();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_of_this_process_get_nodelay() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        assert!(set_nodelay_on_own_sockets() >= 1);
        let _client = std::net::TcpStream::connect(address).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(
            accepted.nodelay().unwrap(),
            "accepted connections inherit it"
        );
    }
}
