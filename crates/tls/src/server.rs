//! The server's certificate: read from two files, refused at start if the key
//! is readable by other users, and read again when either file changes or
//! the process gets SIGHUP. A connection gets the certificate current when
//! it starts; open connections keep theirs (rotation never drops a tunnel or
//! an ssh session). A reload that fails keeps the certificate being served
//! and says why in the log.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::sync::watch;

use crate::{provider, TlsError};

/// How often the files are looked at for a change.
const POLL: Duration = Duration::from_secs(5);

/// The certificate and key the server serves, and where they come from.
#[derive(Debug)]
pub struct ServerCertificate {
    certificate_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServerCertificate {
    /// Reads the pair, checking the key file is private to its owner.
    pub fn load(certificate_file: &Path, key_file: &Path) -> Result<Arc<Self>, TlsError> {
        let current = read_pair(certificate_file, key_file)?;
        Ok(Arc::new(ServerCertificate {
            certificate_file: certificate_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            current: RwLock::new(current),
        }))
    }

    /// Reads the pair again; on failure the one served stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = read_pair(&self.certificate_file, &self.key_file)?;
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = fresh;
        Ok(())
    }

    /// The rustls configuration serving this certificate: TLS 1.2 and 1.3,
    /// HTTP/2 or HTTP/1.1 by ALPN.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Setup(error.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Reloads on SIGHUP and when either file's modification time or size
    /// changes, until `shutdown` turns true.
    pub async fn watch(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut hangups = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::hangup(),
        ) {
            Ok(signal) => Some(signal),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGHUP; the TLS certificate is still re-read when its files change");
                None
            }
        };
        let mut seen = self.stamps();
        loop {
            let hangup = async {
                match hangups.as_mut() {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let why = tokio::select! {
                () = hangup => "SIGHUP",
                () = tokio::time::sleep(POLL) => "",
                _ = shutdown.changed() => return,
            };
            let now = self.stamps();
            let why = if why.is_empty() {
                if now == seen {
                    continue;
                }
                "its files changed"
            } else {
                why
            };
            seen = now;
            match self.reload() {
                Ok(()) => tracing::info!(
                    certificate = %self.certificate_file.display(),
                    "re-read the TLS certificate ({why}); new connections get it"
                ),
                Err(error) => tracing::error!(
                    %error,
                    "the TLS certificate was not re-read; the one before is still served"
                ),
            }
        }
    }

    fn stamps(&self) -> [Option<(SystemTime, u64)>; 2] {
        let stamp = |path: &Path| {
            let metadata = std::fs::metadata(path).ok()?;
            Some((metadata.modified().ok()?, metadata.len()))
        };
        [stamp(&self.certificate_file), stamp(&self.key_file)]
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(current.clone())
    }
}

fn read_pair(certificate_file: &Path, key_file: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let key_unreadable = |reason: String| TlsError::KeyUnreadable {
        path: key_file.to_path_buf(),
        reason,
    };
    let metadata =
        std::fs::metadata(key_file).map_err(|error| key_unreadable(error.to_string()))?;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TlsError::KeyNotPrivate {
            path: key_file.to_path_buf(),
            mode,
        });
    }
    let certificate_unreadable = |reason: String| TlsError::CertificateUnreadable {
        path: certificate_file.to_path_buf(),
        reason,
    };
    let pem = std::fs::read(certificate_file)
        .map_err(|error| certificate_unreadable(error.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| certificate_unreadable(format!("not PEM: {error}")))?;
    if chain.is_empty() {
        return Err(certificate_unreadable("it holds no PEM certificate".into()));
    }
    let key_pem = std::fs::read(key_file).map_err(|error| key_unreadable(error.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|error| key_unreadable(format!("no PEM private key: {error}")))?;
    let signing_key = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|error| key_unreadable(error.to_string()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|error| TlsError::KeyMismatch {
            path: key_file.to_path_buf(),
            certificate: certificate_file.to_path_buf(),
            reason: error.to_string(),
        })?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn write_pair(dir: &Path, name: &str, mode: u32) -> (PathBuf, PathBuf) {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let certificate = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&certificate, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.key_pair.serialize_pem()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        (certificate, key)
    }

    #[test]
    fn a_key_readable_by_others_is_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o640, 0o604] {
            let (certificate, key) = write_pair(dir.path(), "a.example", mode);
            let error = ServerCertificate::load(&certificate, &key)
                .unwrap_err()
                .to_string();
            assert!(error.contains("readable by other users"), "{error}");
            assert!(error.contains(&format!("{mode:04o}")), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
        let (certificate, key) = write_pair(dir.path(), "a.example", 0o600);
        ServerCertificate::load(&certificate, &key).unwrap();
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (certificate, _) = write_pair(dir.path(), "a.example", 0o600);
        let (_, other_key) = write_pair(dir.path(), "b.example", 0o600);
        let error = ServerCertificate::load(&certificate, &other_key)
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not go with"), "{error}");
    }

    #[test]
    fn a_reload_serves_the_new_pair_and_a_failed_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let (certificate, key) = write_pair(dir.path(), "a.example", 0o600);
        let served = ServerCertificate::load(&certificate, &key).unwrap();
        let first = served.current.read().unwrap().cert[0].clone();
        let (new_certificate, new_key) = write_pair(dir.path(), "b.example", 0o600);
        std::fs::rename(&new_certificate, &certificate).unwrap();
        std::fs::rename(&new_key, &key).unwrap();
        served.reload().unwrap();
        let second = served.current.read().unwrap().cert[0].clone();
        assert_ne!(first, second);
        std::fs::write(&certificate, "garbage").unwrap();
        assert!(served.reload().is_err());
        assert_eq!(served.current.read().unwrap().cert[0], second);
    }
}
