//! TLS for every Abode connection, configured in one place.
//!
//! Deployments serve Abode over `https://`, often with a certificate signed
//! by the company's own authority. The advice for an unknown certificate is
//! to trust that authority, never to stop verifying, so there is exactly one
//! trust setting, and no way to skip verification: the operating system's
//! authorities plus the CA bundle named by `--ca-cert FILE` or
//! `ABODE_CA_CERT` ([`install_trust`]), used by every client in the process
//! (the CLI, the agent, the daemon, the server's relays, webhooks and mail)
//! through [`client_config`]. A refused certificate is told in one line
//! that says which, why, and how to pass the CA ([`explain`]).
//!
//! The server side ([`server::ServerCertificate`]) reads the certificate and
//! key from files and reads them again when they change on disk or on
//! SIGHUP, without dropping open connections: certificates are rotated every
//! few weeks in practice.
//!
//! TLS 1.2 and 1.3 only, with the `ring` provider, on both sides.
//!
//! In an agent the extra authorities come as PEM text in `ABODE_AGENT_CA_CERT`.
//! The trust is installed once by the binary at start and used by every client
//! through `client_config()`: the API client, the daemon's client, the agent's
//! tunnel and `abode ssh`'s WebSockets, the server's relays, webhooks, mail,
//! single sign-on and external auth. The server's key is refused when other
//! users can read it; a connection gets the certificate current at its
//! handshake. The API's `tls_listener.rs` serves the same router over it. There
//! is no way to skip verification: no client builds a TLS configuration of its
//! own, and none has a "trust everything" switch.

pub mod server;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// The environment variable naming the CA bundle, for every command.
pub const CA_CERT_ENV: &str = "ABODE_CA_CERT";

/// What goes wrong setting TLS up; each is one line.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the CA bundle {path}: {reason}")]
    CaUnreadable { path: PathBuf, reason: String },
    #[error("the CA bundle {path} holds no PEM certificate")]
    CaEmpty { path: PathBuf },
    #[error("the CA bundle {path} has a certificate rustls refuses: {reason}")]
    CaRefused { path: PathBuf, reason: String },
    #[error("cannot read the TLS certificate {path}: {reason}")]
    CertificateUnreadable { path: PathBuf, reason: String },
    #[error("cannot read the TLS key {path}: {reason}")]
    KeyUnreadable { path: PathBuf, reason: String },
    #[error("the TLS key file {path} is readable by other users (mode {mode:04o}); make it private: chmod 600 {path}")]
    KeyNotPrivate { path: PathBuf, mode: u32 },
    #[error("the TLS key {path} does not go with the certificate {certificate}: {reason}")]
    KeyMismatch {
        path: PathBuf,
        certificate: PathBuf,
        reason: String,
    },
    #[error("TLS cannot be set up: {0}")]
    Setup(String),
}

/// The trust every client of this process uses, built at its first TLS
/// connection from the system's store and [`ADDED`].
static TRUST: OnceLock<Arc<ClientConfig>> = OnceLock::new();
/// The authorities [`install_trust`] added (checked), and where they came from.
static ADDED: OnceLock<(Vec<CertificateDer<'static>>, PathBuf)> = OnceLock::new();
/// The PEM text of the authorities added to the system's, if any: handed
/// to what verifies on its own (Terraform's state backend, agents).
static ADDED_PEM: OnceLock<Option<String>> = OnceLock::new();

/// Where added authorities come from.
#[derive(Debug, Clone, Copy)]
pub enum AddedAuthorities<'a> {
    None,
    /// A PEM file (`--ca-cert`, `ABODE_CA_CERT`).
    File(&'a Path),
    /// PEM text (an agent's, from the environment contract).
    Pem(&'a str),
}

/// Sets this process's trust: the system's authorities plus `added`.
/// Called once, at start, before any connection; a bad file is an error
/// here rather than at the first connection. A later call changes nothing
/// (the first setting is the process's).
pub fn install_trust(added: AddedAuthorities<'_>) -> Result<(), TlsError> {
    let (certificates, pem) = match added {
        AddedAuthorities::None => (Vec::new(), None),
        AddedAuthorities::File(path) => {
            let pem = std::fs::read_to_string(path).map_err(|error| TlsError::CaUnreadable {
                path: path.to_path_buf(),
                reason: error.to_string(),
            })?;
            (parse_pem(&pem, path)?, Some(pem))
        }
        AddedAuthorities::Pem(pem) => (
            parse_pem(pem, Path::new(AGENT_CA_SOURCE))?,
            Some(pem.to_string()),
        ),
    };
    let source = added_path(added);
    // Refused here rather than at the first connection; the system's store
    // is read only when a first TLS connection needs it.
    let mut refused = RootCertStore::empty();
    for certificate in &certificates {
        refused
            .add(certificate.clone())
            .map_err(|error| TlsError::CaRefused {
                path: source.clone(),
                reason: error.to_string(),
            })?;
    }
    let _ = ADDED.set((certificates, source));
    let _ = ADDED_PEM.set(pem);
    Ok(())
}

/// How the agent's PEM text is named in errors.
const AGENT_CA_SOURCE: &str = "ABODE_AGENT_CA_CERT";

fn added_path(added: AddedAuthorities<'_>) -> PathBuf {
    match added {
        AddedAuthorities::File(path) => path.to_path_buf(),
        _ => PathBuf::from(AGENT_CA_SOURCE),
    }
}

/// The PEM text of the authorities this process added to the system's.
pub fn added_authorities_pem() -> Option<String> {
    ADDED_PEM.get().cloned().flatten()
}

/// The authorities this process added to the system's, one DER each: for a
/// library that takes roots one by one (SMTP).
pub fn added_authorities_der() -> Vec<Vec<u8>> {
    let Some(pem) = added_authorities_pem() else {
        return Vec::new();
    };
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .map(|certificate| certificate.to_vec())
        .collect()
}

/// The CA file named by [`CA_CERT_ENV`], if any (empty counts as none).
pub fn ca_file_from_env() -> Option<PathBuf> {
    std::env::var_os(CA_CERT_ENV)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// The client configuration every TLS connection of this process uses: the
/// installed trust, or the system's authorities when none was installed.
pub fn client_config() -> Arc<ClientConfig> {
    TRUST
        .get_or_init(|| {
            let (added, source) = ADDED.get().cloned().unwrap_or_default();
            match build_client_config(added, source) {
                Ok(config) => config,
                // Without any root, every connection is refused with a clear
                // unknown-authority line: better than no TLS at all.
                Err(error) => {
                    tracing::error!(%error, "cannot set up TLS trust");
                    Arc::new(
                        ClientConfig::builder_with_provider(provider())
                            .with_safe_default_protocol_versions()
                            .map(|builder| {
                                builder
                                    .with_root_certificates(RootCertStore::empty())
                                    .with_no_client_auth()
                            })
                            .unwrap_or_else(|_| unreachable_config()),
                    )
                }
            }
        })
        .clone()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Only reached if the ring provider lacks TLS 1.2 and 1.3, which it does
/// not; kept total rather than panicking.
fn unreachable_config() -> ClientConfig {
    ClientConfig::builder()
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth()
}

/// The CA certificates of a PEM file.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = std::fs::read_to_string(path).map_err(|error| TlsError::CaUnreadable {
        path: path.to_path_buf(),
        reason: error.to_string(),
    })?;
    parse_pem(&text, path)
}

/// The certificates of PEM text; `path` names where it came from.
fn parse_pem(text: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let mut certificates = Vec::new();
    for certificate in CertificateDer::pem_slice_iter(text.as_bytes()) {
        certificates.push(certificate.map_err(|error| TlsError::CaUnreadable {
            path: path.to_path_buf(),
            reason: format!("not PEM: {error}"),
        })?);
    }
    if certificates.is_empty() {
        return Err(TlsError::CaEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(certificates)
}

fn build_client_config(
    added: Vec<CertificateDer<'static>>,
    source: PathBuf,
) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    // The system's store: a machine that has none (a bare container) still
    // trusts the CA file.
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::debug!(%error, "a system certificate could not be read");
    }
    let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
    for certificate in added {
        roots
            .add(certificate)
            .map_err(|error| TlsError::CaRefused {
                path: source.clone(),
                reason: error.to_string(),
            })?;
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Setup(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Why a certificate was refused, in one line that names the server and
/// says how to pass the CA; `None` when `error` is no certificate refusal.
///
/// `error` is anything a connection failed with; its chain of sources is
/// searched for rustls' typed error, and, because some clients flatten it
/// into text, for rustls' words.
pub fn explain(error: &(dyn std::error::Error + 'static), server: &str) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut text = String::new();
    while let Some(current) = source {
        if let Some(rustls_error) = current.downcast_ref::<rustls::Error>() {
            return explain_rustls(rustls_error, server);
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(rustls_error) = inner.downcast_ref::<rustls::Error>() {
                    return explain_rustls(rustls_error, server);
                }
            }
        }
        text.push_str(&current.to_string());
        text.push(' ');
        source = current.source();
    }
    explain_text(&text, server)
}

/// [`explain`] for an error known only as text.
pub fn explain_text(text: &str, server: &str) -> Option<String> {
    let why = if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        Why::UnknownAuthority
    } else if text.contains("Expired") || text.contains("expired") {
        Why::Expired
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        Why::WrongName
    } else if text.contains("invalid peer certificate") {
        Why::Other(text.trim().to_string())
    } else {
        return None;
    };
    Some(why.say(server))
}

fn explain_rustls(error: &rustls::Error, server: &str) -> Option<String> {
    use rustls::CertificateError;
    let why = match error {
        rustls::Error::InvalidCertificate(certificate) => match certificate {
            CertificateError::UnknownIssuer => Why::UnknownAuthority,
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => Why::Expired,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                Why::WrongName
            }
            other => Why::Other(format!("{other:?}")),
        },
        _ => return None,
    };
    Some(why.say(server))
}

enum Why {
    UnknownAuthority,
    Expired,
    WrongName,
    Other(String),
}

impl Why {
    fn say(&self, server: &str) -> String {
        let how = format!(
            "pass the CA that signed it with --ca-cert FILE or {CA_CERT_ENV}=FILE (verification cannot be turned off)"
        );
        match self {
            Why::UnknownAuthority => format!(
                "the TLS certificate of {server} is signed by an authority this machine does not trust: {how}"
            ),
            Why::Expired => format!(
                "the TLS certificate of {server} has expired (or this machine's clock is wrong): the server needs a new certificate"
            ),
            Why::WrongName => format!(
                "the TLS certificate of {server} is not valid for that name: use the name the certificate was issued for, or a certificate for this one"
            ),
            Why::Other(reason) => {
                format!("the TLS certificate of {server} was refused ({reason}): {how}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_certificate_is_one_line_naming_the_server_and_the_fix() {
        let cases = [
            (
                rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
                "--ca-cert",
            ),
            (
                rustls::Error::InvalidCertificate(rustls::CertificateError::Expired),
                "expired",
            ),
            (
                rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName),
                "not valid for that name",
            ),
        ];
        for (error, says) in cases {
            let wrapped = std::io::Error::new(std::io::ErrorKind::InvalidData, error);
            let line = explain(&wrapped, "abode.example.com:443").expect("explained");
            assert!(line.contains("abode.example.com:443"), "{line}");
            assert!(line.contains(says), "{line}");
            assert!(!line.contains('\n'), "{line}");
        }
        let unrelated = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(explain(&unrelated, "x"), None);
        assert!(explain_text("invalid peer certificate: UnknownIssuer", "h")
            .is_some_and(|line| line.contains(CA_CERT_ENV)));
    }

    #[test]
    fn a_ca_file_must_hold_certificates() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap_or_else(|error| panic!("{error}"));
        let error = read_ca_file(&empty).err().map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.contains("no PEM certificate")),
            "{error:?}"
        );
        let missing = dir.path().join("missing.pem");
        let error = read_ca_file(&missing).err().map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.contains("cannot read the CA bundle")),
            "{error:?}"
        );
    }
}
