//! Who the client of a request is, when the server may sit behind a
//! TLS-terminating proxy (`abode server --trusted-proxies`).
//!
//! The socket's peer is the client, unless that peer is one of the trusted
//! proxies: then, and only then, `X-Forwarded-For` and `X-Forwarded-Proto`
//! are believed. Anyone can write those headers, so believing them from an
//! untrusted peer would let a caller pick the address the login throttle
//! counts against (and escape it) and the one the audit log records.
//!
//! In `X-Forwarded-For` each proxy appends the address it received the
//! request from, so only the right end of the list was written by proxies
//! we trust: the client is the right-most address that is not itself a
//! trusted proxy. Whatever lies further left was written by that client and
//! is ignored. The API's router computes this once per request
//! (crates/api) and the login routes, the audit log and the dashboard's
//! cookies read the result.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// At most this many `X-Forwarded-For` entries are looked at, from the
/// right: real chains have a few hops; a longer list costs work and means
/// nothing more (past the limit, the last address read is the client).
pub const MAX_FORWARDED_HOPS: usize = 32;

/// The real client of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress {
    pub ip: IpAddr,
    /// The client reached us over TLS: directly on the HTTPS listener, or
    /// at a trusted proxy that said so in `X-Forwarded-Proto`.
    pub https: bool,
}

impl ClientAddress {
    /// Whether this client may send a password: over TLS, from this
    /// machine, or from anywhere when the server serves no TLS. With
    /// `--tls-address`, the plain listener is for this machine and for a
    /// proxy that terminates TLS (and says so); a password sent to it from
    /// elsewhere crossed the network in the clear.
    pub fn may_send_password(&self, tls_served: bool) -> bool {
        !tls_served || self.https || self.ip.is_loopback()
    }

    /// The one line that refuses a password [`may_send_password`] does not
    /// allow, naming where to sign in instead.
    ///
    /// [`may_send_password`]: ClientAddress::may_send_password
    pub fn password_refusal(access_url: &str) -> String {
        format!("this server takes passwords only over HTTPS: sign in at {access_url}")
    }
}

/// One `--trusted-proxies` range: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("{0:?} is not an address range: expected an address with a prefix length, like 10.0.0.0/8 or fd00::/8")]
    Syntax(String),
    #[error("{given:?}: the prefix length must be at most {max}")]
    Prefix { given: String, max: u8 },
    #[error("{given:?} has bits set after the prefix: did you mean {suggested}? (a typo here would trust more addresses than meant)")]
    HostBits { given: String, suggested: String },
}

impl Cidr {
    pub fn contains(&self, address: IpAddr) -> bool {
        match (self.network, address.to_canonical()) {
            (IpAddr::V4(network), IpAddr::V4(address)) => {
                mask_v4(u32::from(address), self.prefix) == u32::from(network)
            }
            (IpAddr::V6(network), IpAddr::V6(address)) => {
                mask_v6(u128::from(address), self.prefix) == u128::from(network)
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// `ADDRESS/PREFIX`, or a bare address (one host).
    fn from_str(given: &str) -> Result<Self, CidrError> {
        let text = given.trim();
        let syntax = || CidrError::Syntax(given.to_string());
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address.parse().map_err(|_| syntax())?;
        // An IPv4-mapped range is written as the IPv4 one it is.
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(prefix)
                if !prefix.is_empty() && prefix.bytes().all(|byte| byte.is_ascii_digit()) =>
            {
                prefix.parse::<u8>().map_err(|_| CidrError::Prefix {
                    given: given.to_string(),
                    max,
                })?
            }
            Some(_) => return Err(syntax()),
            None => max,
        };
        if prefix > max {
            return Err(CidrError::Prefix {
                given: given.to_string(),
                max,
            });
        }
        let network = match address {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(mask_v4(u32::from(v4), prefix))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(mask_v6(u128::from(v6), prefix))),
        };
        if network != address {
            return Err(CidrError::HostBits {
                given: given.to_string(),
                suggested: format!("{network}/{prefix}"),
            });
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn mask_v4(address: u32, prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        prefix => address & (u32::MAX << (32 - u32::from(prefix.min(32)))),
    }
}

fn mask_v6(address: u128, prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        prefix => address & (u128::MAX << (128 - u32::from(prefix.min(128)))),
    }
}

/// The proxies whose forwarding headers are believed; empty (the default):
/// none, the socket's peer is always the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    pub fn new(ranges: Vec<Cidr>) -> Self {
        TrustedProxies(ranges)
    }

    /// Comma-separated ranges, as `--trusted-proxies` takes them; empty
    /// items (a trailing comma) are skipped.
    pub fn parse_list(list: &str) -> Result<Vec<Cidr>, CidrError> {
        list.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(Cidr::from_str)
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn ranges(&self) -> &[Cidr] {
        &self.0
    }

    pub fn trusts(&self, address: IpAddr) -> bool {
        self.0.iter().any(|range| range.contains(address))
    }

    /// The client of a request whose socket peer is `peer`, that arrived
    /// over TLS when `over_tls`, with these `X-Forwarded-For` header values
    /// (in the order received) and `X-Forwarded-Proto` values.
    pub fn resolve<'a>(
        &self,
        peer: IpAddr,
        over_tls: bool,
        forwarded_for: impl IntoIterator<Item = &'a str>,
        forwarded_proto: impl IntoIterator<Item = &'a str>,
    ) -> ClientAddress {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return ClientAddress {
                ip: peer,
                https: over_tls,
            };
        }
        ClientAddress {
            ip: self.client_from(peer, forwarded_for),
            https: over_tls || proto_is_https(forwarded_proto),
        }
    }

    /// Walks `X-Forwarded-For` from the right while the addresses are
    /// trusted proxies. An entry that is not an address stops the walk:
    /// the hop that wrote it is the last one known, and is the client.
    fn client_from<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> IpAddr {
        let values: Vec<&str> = forwarded_for.into_iter().collect();
        let entries = values
            .iter()
            .rev()
            .flat_map(|value| value.rsplit(','))
            .take(MAX_FORWARDED_HOPS);
        let mut client = peer;
        for entry in entries {
            let Some(address) = parse_forwarded_address(entry) else {
                break;
            };
            client = address;
            if !self.trusts(address) {
                break;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, possibly with a port
/// (`1.2.3.4:5678`, `[::1]:5678`), as some proxies write it.
fn parse_forwarded_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(address) = entry.parse::<IpAddr>() {
        return Some(address.to_canonical());
    }
    if let Ok(socket) = entry.parse::<std::net::SocketAddr>() {
        return Some(socket.ip().to_canonical());
    }
    // `[::1]` without a port.
    entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse::<Ipv6Addr>().ok())
        .map(|address| IpAddr::V6(address).to_canonical())
}

/// `https` only when the trusted proxy said exactly that: a list (`https,
/// http`, several headers) is ambiguous about which hop wrote what, and an
/// ambiguous answer must not mark a plain connection secure.
fn proto_is_https<'a>(values: impl IntoIterator<Item = &'a str>) -> bool {
    let mut items = values.into_iter().flat_map(|value| value.split(','));
    match (items.next(), items.next()) {
        (Some(only), None) => only.trim().eq_ignore_ascii_case("https"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn trusted(list: &str) -> TrustedProxies {
        TrustedProxies::new(TrustedProxies::parse_list(list).unwrap())
    }

    #[test]
    fn ranges_parse_and_contain() {
        let cases: &[(&str, &str, bool)] = &[
            ("10.0.0.0/8", "10.255.1.2", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1/32", "127.0.0.2", false),
            ("0.0.0.0/0", "203.0.113.9", true),
            ("0.0.0.0/0", "2001:db8::1", false),
            ("fd00::/8", "fd12:3456::1", true),
            ("fd00::/8", "fe80::1", false),
            ("::1/128", "::1", true),
            // An IPv4-mapped peer (a dual-stack listener) is its IPv4 self.
            ("127.0.0.0/8", "::ffff:127.0.0.1", true),
            ("::/0", "2001:db8::1", true),
        ];
        for (range, address, inside) in cases {
            let cidr: Cidr = range.parse().unwrap();
            assert_eq!(cidr.contains(ip(address)), *inside, "{range} ∋ {address}");
        }
    }

    #[test]
    fn bad_ranges_are_refused_with_what_was_given() {
        for (given, wanted) in [
            ("10.0.0.0/33", "at most 32"),
            ("fd00::/129", "at most 128"),
            ("10.0.0.0/999", "at most 32"),
            ("10.0.0.0/", "not an address range"),
            ("10.0.0.0/-1", "not an address range"),
            ("10.0.0/8", "not an address range"),
            ("localhost", "not an address range"),
            ("10.0.0.1/8", "did you mean 10.0.0.0/8"),
            ("fd00::1/8", "did you mean fd00::/8"),
        ] {
            let error = given.parse::<Cidr>().unwrap_err().to_string();
            assert!(error.contains(wanted), "{given}: {error}");
            assert!(error.contains(given), "{given}: {error}");
        }
        assert!(
            TrustedProxies::parse_list("10.0.0.0/8, ,fd00::/8,").is_ok_and(|list| list.len() == 2)
        );
        assert!(TrustedProxies::parse_list("10.0.0.0/8,nope").is_err());
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_address_from_a_trusted_peer_only() {
        // (trusted, peer, over TLS, X-Forwarded-For values, X-Forwarded-Proto values)
        //   -> (client, https)
        type Case = (
            &'static str,
            &'static str,
            bool,
            &'static [&'static str],
            &'static [&'static str],
            &'static str,
            bool,
        );
        let cases: &[Case] = &[
            // No trusted proxies: the headers mean nothing.
            (
                "",
                "198.51.100.7",
                false,
                &["203.0.113.9"],
                &["https"],
                "198.51.100.7",
                false,
            ),
            // A spoofed header from an untrusted peer is ignored.
            (
                "10.0.0.0/8",
                "198.51.100.7",
                false,
                &["203.0.113.9"],
                &["https"],
                "198.51.100.7",
                false,
            ),
            // ... but the peer's own TLS still counts.
            (
                "10.0.0.0/8",
                "198.51.100.7",
                true,
                &["203.0.113.9"],
                &["http"],
                "198.51.100.7",
                true,
            ),
            // A trusted proxy: its header names the client.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9"],
                &["https"],
                "203.0.113.9",
                true,
            ),
            // The client wrote its own entry first: the proxy appended the
            // real one, which is the right-most untrusted.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["1.2.3.4, 203.0.113.9"],
                &["https"],
                "203.0.113.9",
                true,
            ),
            // Two trusted hops before the client.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["1.2.3.4, 203.0.113.9, 10.0.0.3"],
                &[],
                "203.0.113.9",
                false,
            ),
            // Several headers are one list, in order.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["1.2.3.4", "203.0.113.9", "10.0.0.3"],
                &[],
                "203.0.113.9",
                false,
            ),
            // Every entry a trusted proxy: the left-most is the client.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["10.1.1.1, 10.0.0.3"],
                &[],
                "10.1.1.1",
                false,
            ),
            // A trusted peer without the header is itself the client.
            ("10.0.0.0/8", "10.0.0.2", false, &[], &[], "10.0.0.2", false),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &[""],
                &[],
                "10.0.0.2",
                false,
            ),
            // Garbage stops the walk at the last address known.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9, <script>"],
                &[],
                "10.0.0.2",
                false,
            ),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["garbage, 10.0.0.3"],
                &[],
                "10.0.0.3",
                false,
            ),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9,, 10.0.0.3"],
                &[],
                "10.0.0.3",
                false,
            ),
            // Ports and brackets, as some proxies write them.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9:4711"],
                &[],
                "203.0.113.9",
                false,
            ),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["[2001:db8::9]:4711"],
                &[],
                "2001:db8::9",
                false,
            ),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["[2001:db8::9]"],
                &[],
                "2001:db8::9",
                false,
            ),
            // IPv6 proxies and clients.
            (
                "fd00::/8",
                "fd00::2",
                false,
                &["2001:db8::9, fd00::3"],
                &["HTTPS"],
                "2001:db8::9",
                true,
            ),
            (
                "fd00::/8",
                "2001:db8::5",
                false,
                &["2001:db8::9"],
                &["https"],
                "2001:db8::5",
                false,
            ),
            // A dual-stack listener's mapped peer is trusted as its IPv4 self.
            (
                "127.0.0.1/32",
                "::ffff:127.0.0.1",
                false,
                &["203.0.113.9"],
                &[],
                "203.0.113.9",
                false,
            ),
            // An ambiguous scheme is not https.
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9"],
                &["https, http"],
                "203.0.113.9",
                false,
            ),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9"],
                &["https", "https"],
                "203.0.113.9",
                false,
            ),
            (
                "10.0.0.0/8",
                "10.0.0.2",
                false,
                &["203.0.113.9"],
                &["wss"],
                "203.0.113.9",
                false,
            ),
        ];
        for (list, peer, over_tls, forwarded_for, proto, client, https) in cases {
            let resolved = trusted(list).resolve(
                ip(peer),
                *over_tls,
                forwarded_for.iter().copied(),
                proto.iter().copied(),
            );
            assert_eq!(
                resolved,
                ClientAddress {
                    ip: ip(client),
                    https: *https
                },
                "trusted {list:?}, peer {peer}, X-Forwarded-For {forwarded_for:?}, proto {proto:?}"
            );
        }
    }

    #[test]
    fn a_long_chain_is_read_only_from_its_right_end() {
        let proxies = trusted("10.0.0.0/8");
        // The client's address hidden behind more trusted hops than are read.
        let mut chain = vec!["203.0.113.9".to_string()];
        chain.extend(
            (0..MAX_FORWARDED_HOPS + 5).map(|n| format!("10.0.{}.{}", n / 250, n % 250 + 1)),
        );
        let header = chain.join(", ");
        let resolved = proxies.resolve(ip("10.0.0.2"), false, [header.as_str()], []);
        assert!(proxies.trusts(resolved.ip), "{resolved:?}");
        // A huge list of untrusted addresses: the right-most wins.
        let header = vec!["198.51.100.1"; 10_000].join(",") + ",203.0.113.9";
        let resolved = proxies.resolve(ip("10.0.0.2"), false, [header.as_str()], []);
        assert_eq!(resolved.ip, ip("203.0.113.9"));
    }
}
