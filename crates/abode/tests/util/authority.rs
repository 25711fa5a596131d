//! A certificate authority of a test's own (rcgen), what it signs, and the
//! CLI trusting it: for the tests of TLS in the server and behind a proxy.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::{Platform, Run};

/// A certificate authority of the test's own, and what it signs.
pub struct Authority {
    dir: PathBuf,
    certificate: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl Authority {
    pub fn new(dir: &Path) -> Authority {
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Abode test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.pem"), certificate.pem()).unwrap();
        Authority {
            dir: dir.to_path_buf(),
            certificate,
            key,
        }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Signs a certificate for `localhost` and 127.0.0.1 into
    /// `<name>.crt` and `<name>.key` (mode `key_mode`).
    pub fn sign(&self, name: &str, key_mode: u32) -> (PathBuf, PathBuf) {
        self.sign_for(name, &["localhost", "127.0.0.1"], key_mode)
    }

    /// Signs a certificate for `hosts` (names, wildcards or addresses)
    /// into `<name>.crt` and `<name>.key` (mode `key_mode`).
    pub fn sign_for(&self, name: &str, hosts: &[&str], key_mode: u32) -> (PathBuf, PathBuf) {
        let mut params = rcgen::CertificateParams::new(
            hosts
                .iter()
                .map(|host| host.to_string())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params
            .signed_by(&key, &self.certificate, &self.key)
            .unwrap();
        let (crt, key_file) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        std::fs::write(&crt, certificate.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(key_mode)).unwrap();
        (crt, key_file)
    }
}

/// The SHA-256 of the public key in `key_file`, base64: what Chromium's
/// `--ignore-certificate-errors-spki-list` pins (a browser that trusts
/// that key and nothing else of the test's).
pub fn spki_pin(key_file: &Path) -> String {
    use sha2::Digest;
    let key_pem = std::fs::read_to_string(key_file).unwrap();
    let spki = rcgen::KeyPair::from_pem(&key_pem).unwrap().public_key_der();
    base64(&sha2::Sha256::digest(&spki))
}

/// Standard base64 of `bytes` (Chromium's certificate pin list takes it).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, byte)| n | (u32::from(*byte) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `abode ARGS` as `platform`'s default session, with `ca` as the trust.
pub fn run_trusting(
    platform: &Platform,
    ca: Option<&Path>,
    args: &[&str],
    stdin: Option<&str>,
) -> Run {
    let mut command = platform.cmd(args);
    command.env_remove("ABODE_CA_CERT");
    if let Some(ca) = ca {
        command.env("ABODE_CA_CERT", ca);
    }
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    Run::from_output(
        format!("abode {}", args.join(" ")),
        child.wait_with_output().unwrap(),
    )
}
