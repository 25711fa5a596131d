//! HTTPS end to end (issue 28): a private certificate authority made here,
//! `abode server --tls-address` serving a certificate it signed, and the CLI
//! trusting it only when told (`ABODE_CA_CERT`), with a one-line refusal
//! otherwise; TLS 1.0 and 1.1 refused to `openssl s_client`; a rotated
//! certificate served to new connections while an open one keeps working;
//! a key readable by others refused at start; `abode ssh` over `wss://`;
//! plain HTTP redirected to the access URL, but for what must stay plain;
//! an external daemon, a relay between servers, email and a webhook, each
//! over TLS to a peer of the same private CA.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use util::authority::{run_trusting, Authority};
use util::{abode_bin, free_port, repo_root, require_terraform, Platform};

fn wait_for_log(platform: &Platform, from: usize, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = platform.server_log();
        if log.get(from..).unwrap_or("").contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the server log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A TLS client of the test's own, trusting only `ca`: to keep one
/// connection open across a rotation and to read the certificate served.
struct Connection {
    tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl Connection {
    fn open(port: u16, ca: &Path) -> Connection {
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(ca).unwrap();
        use rustls::pki_types::pem::PemObject;
        for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(certificate.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let client = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut tls = rustls::StreamOwned::new(client, socket);
        // The handshake now, so that the certificate is known.
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock).unwrap();
        }
        Connection { tls }
    }

    /// `GET /api/v1/health` on this connection, kept alive; the status line.
    fn health(&mut self) -> String {
        let text = self.health_answer();
        text.lines().next().unwrap_or("").to_string()
    }

    /// `GET /api/v1/health` on this connection, kept alive; the answer.
    fn health_answer(&mut self) -> String {
        self.tls
            .write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        // The answer is small: read until its JSON body has ended.
        while !answer.ends_with(b"}") {
            let n = self.tls.read(&mut buffer).unwrap();
            assert!(n > 0, "the connection was closed");
            answer.extend_from_slice(&buffer[..n]);
        }
        String::from_utf8_lossy(&answer).to_string()
    }

    /// The first certificate the server sent.
    fn certificate(&self) -> Vec<u8> {
        self.tls.conn.peer_certificates().unwrap()[0].to_vec()
    }
}

fn der_of(pem_file: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(pem_file)
        .unwrap()
        .to_vec()
}

fn s_client(port: u16, protocol: &str) -> std::process::Output {
    Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            protocol,
            // Let this client offer what old clients offer, so that the
            // refusal is the server's, not the client's own policy.
            "-cipher",
            "DEFAULT:@SECLEVEL=0",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs")
}

#[test]
fn the_cli_speaks_https_to_a_private_ca_only_when_told_and_rotation_keeps_connections() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("first", 0o600);
    let tls_port = free_port();
    let tls_address = format!("127.0.0.1:{tls_port}");
    let platform = Platform::start_with(&[
        "--tls-address",
        &tls_address,
        "--tls-cert-file",
        certificate.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
    ]);
    let https = format!("https://localhost:{tls_port}");
    let login = [
        "login",
        https.as_str(),
        "--first-user",
        "--username",
        "alice",
        "--email",
        "alice@example.com",
        "--password-stdin",
    ];

    // Without the CA: refused, in one line that says why and what to do.
    let refused = run_trusting(&platform, None, &login, Some("correct horse battery\n"));
    let refused = refused.fails_with(
        1,
        &[
            "signed by an authority this machine does not trust",
            "--ca-cert",
            &format!("localhost:{tls_port}"),
        ],
    );
    assert_eq!(refused.stderr.trim().lines().count(), 1, "{refused:?}");
    // A CA file that is not one: one line, before any connection.
    let not_a_ca = dir.path().join("not-a-ca.pem");
    std::fs::write(&not_a_ca, "hello\n").unwrap();
    run_trusting(&platform, Some(&not_a_ca), &login, Some("x\n"))
        .fails_with(1, &["holds no PEM certificate"]);

    // With it: the login and every call after it go over TLS.
    let ca = authority.ca_file();
    run_trusting(
        &platform,
        Some(&ca),
        &login,
        Some("correct horse battery\n"),
    )
    .ok();
    let me = run_trusting(
        &platform,
        Some(&ca),
        &["users", "me", "--output", "json"],
        None,
    )
    .ok();
    assert_eq!(me.json()["username"], "alice", "{me:?}");

    // Old protocols are refused by the server (the client offers them).
    for old in ["-tls1", "-tls1_1"] {
        let output = s_client(tls_port, old);
        let said = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{old} was accepted:\n{said}");
        // The server's alert (rustls answers an old ClientHello with a
        // handshake failure or a protocol version alert), not the client's
        // own refusal to offer the protocol.
        assert!(
            said.contains("alert handshake failure") || said.contains("alert protocol version"),
            "{old}: not refused by the server:\n{said}"
        );
        assert!(said.contains("Cipher is (NONE)"), "{old}:\n{said}");
    }
    let modern = s_client(tls_port, "-tls1_2");
    let said = String::from_utf8_lossy(&modern.stdout);
    assert!(
        said.contains("Protocol  : TLSv1.2") || said.contains("TLSv1.2"),
        "{said}"
    );

    // Rotation: an open connection keeps working; new ones get the new
    // certificate once the server has re-read it (on SIGHUP here).
    let mut open = Connection::open(tls_port, &ca);
    assert!(open.health().contains("200"));
    assert_eq!(open.certificate(), der_of(&certificate));
    let (second, second_key) = authority.sign("second", 0o600);
    let log_before = platform.server_log().len();
    std::fs::rename(&second, &certificate).unwrap();
    std::fs::rename(&second_key, &key).unwrap();
    util::signal(platform.server_pid().unwrap(), "HUP");
    wait_for_log(&platform, log_before, "re-read the TLS certificate");
    let renewed = Connection::open(tls_port, &ca);
    assert_eq!(renewed.certificate(), der_of(&certificate));
    assert_ne!(renewed.certificate(), open.certificate());
    assert!(open.health().contains("200"), "the open connection broke");
}

#[test]
fn a_private_key_readable_by_others_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("server", 0o644);
    let output = Command::new(abode_bin())
        .args(["server", "--address", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--tls-address", "127.0.0.1:0", "--tls-cert-file"])
        .arg(&certificate)
        .arg("--tls-key-file")
        .arg(&key)
        .env_remove("ABODE_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let error: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(error.len(), 1, "{stderr}");
    assert!(error[0].contains("readable by other users"), "{stderr}");
    assert!(error[0].contains("chmod 600"), "{stderr}");
    // Nothing was made of the data dir's database.
    assert!(!dir.path().join("data/abode.db").exists());
}

#[test]
fn ssh_goes_over_wss_and_plain_http_redirects_to_the_access_url() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("server", 0o600);
    let tls_port = free_port();
    let https = format!("https://localhost:{tls_port}");
    let ca = authority.ca_file();
    // The server trusts the private CA, and so hands it to its agents.
    let platform = Platform::start_with_env(
        &[
            "--tls-address",
            &format!("127.0.0.1:{tls_port}"),
            "--tls-cert-file",
            certificate.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
            "--access-url",
            &https,
            "--redirect-to-access-url",
        ],
        &[("ABODE_CA_CERT", ca.to_str().unwrap())],
    );

    // Plain HTTP: people are sent to the access URL (path and query kept,
    // method kept: 308); probes are answered where they are.
    let plain = ureq::AgentBuilder::new().redirects(0).build();
    let answer = plain
        .get(&format!("{}/api/v1/users/me?x=1", platform.url))
        .call();
    let response = match answer {
        Err(ureq::Error::Status(_, response)) => response,
        Ok(response) => response,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(response.status(), 308);
    assert_eq!(
        response.header("location"),
        Some(format!("{https}/api/v1/users/me?x=1").as_str())
    );
    let health = plain
        .get(&format!("{}/api/v1/health", platform.url))
        .call()
        .unwrap();
    assert_eq!(health.status(), 200);
    // Browsers are told to keep to TLS, over TLS only (RFC 6797).
    assert_eq!(health.header("strict-transport-security"), None);
    let over_tls = Connection::open(tls_port, &ca).health_answer();
    assert!(
        over_tls
            .to_ascii_lowercase()
            .contains("\r\nstrict-transport-security: max-age=31536000\r\n"),
        "{over_tls}"
    );

    run_trusting(
        &platform,
        Some(&ca),
        &[
            "login",
            &https,
            "--first-user",
            "--username",
            "alice",
            "--email",
            "alice@example.com",
            "--password-stdin",
        ],
        Some("correct horse battery\n"),
    )
    .ok();
    let example = repo_root().join("examples/local-workspace");
    run_trusting(
        &platform,
        Some(&ca),
        &[
            "templates",
            "push",
            "local",
            "-d",
            example.to_str().unwrap(),
        ],
        None,
    )
    .ok();
    run_trusting(
        &platform,
        Some(&ca),
        &["create", "dev", "--template", "local"],
        None,
    )
    .ok();
    // The agent reaches the https:// access URL over wss:// with the CA the
    // server handed it (the environment contract), and becomes ready.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let shown = run_trusting(
            &platform,
            Some(&ca),
            &["show", "dev", "--output", "json"],
            None,
        );
        if shown.code == Some(0) && shown.json()["agent"]["status"] == "ready" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never became ready over wss://: {shown:?}\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let ssh = run_trusting(
        &platform,
        Some(&ca),
        &["ssh", "dev", "--", "echo", "ok"],
        None,
    )
    .ok();
    assert_eq!(ssh.stdout.trim(), "ok", "{ssh:?}");
    // Without the CA, the same ssh is refused in one line.
    run_trusting(&platform, None, &["ssh", "dev", "--", "echo", "ok"], None)
        .fails_with(1, &["does not trust", "--ca-cert"]);
}

#[test]
fn an_external_daemon_builds_over_https_and_its_terraform_trusts_the_same_ca() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("server", 0o600);
    let tls_port = free_port();
    let https = format!("https://localhost:{tls_port}");
    let platform = Platform::start_with(&[
        "--provisioners",
        "0",
        "--tls-address",
        &format!("127.0.0.1:{tls_port}"),
        "--tls-cert-file",
        certificate.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
    ]);
    platform.login_owner();
    platform.push_example();
    let key_file = util::create_key(&platform, "tls", &[]);
    let daemon = |name: &str, ca: Option<&Path>| {
        let log = platform.root().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(abode_bin());
        command
            .args(["provisioner", "start", "--url", &https, "--key-file"])
            .arg(&key_file)
            .arg("--data-dir")
            .arg(platform.root().join(name))
            .args(["--name", name])
            .env_remove("ABODE_CA_CERT")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        if let Some(ca) = ca {
            command.env("ABODE_CA_CERT", ca);
        }
        (command.spawn().unwrap(), log)
    };

    // Without the CA, a daemon says why it cannot reach the server (and
    // keeps trying: a certificate can be fixed while it waits).
    let (mut untrusting, untrusting_log) = daemon("untrusting", None);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(&untrusting_log).unwrap_or_default();
        if log.contains("signed by an authority this machine does not trust") {
            break;
        }
        assert!(Instant::now() < deadline, "{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    untrusting.kill().unwrap();
    untrusting.wait().unwrap();

    // With it, the build runs on the daemon, whose Terraform keeps the
    // state through the server's state backend over https.
    let (mut trusting, trusting_log) = daemon("trusting", Some(&authority.ca_file()));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let shown = platform.wait_for_build_status("dev", "succeeded");
    let log = std::fs::read_to_string(&trusting_log).unwrap_or_default();
    assert!(log.contains("running a job"), "{shown:#}\n{log}");
    let client = platform.client_for(&platform.config_dir());
    let state = String::from_utf8(client.workspace_state("dev").unwrap()).unwrap();
    assert!(state.contains("abode_volume"), "{state}");
    let build_log = platform.run(&["builds", "logs", "dev", "1"]).stdout;
    assert!(
        build_log.contains("claimed by the external provisioner tls/trusting-"),
        "{build_log}"
    );
    trusting.kill().unwrap();
    trusting.wait().unwrap();
}

/// aiosmtpd (Debian's) with a certificate of the test's CA: STARTTLS
/// required before AUTH, one user, each message stored in a Maildir.
const SMTP_SERVER: &str = r#"
import asyncio, ssl, sys, signal
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword

port, cert, key, maildir = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == b"mailer" and auth_data.password == b"mail password"
    return AuthResult(success=ok)

controller = Controller(Mailbox(maildir), hostname="127.0.0.1", port=port,
    tls_context=context, require_starttls=True, auth_require_tls=True,
    authenticator=authenticator, auth_required=True)
controller.start()
print("listening", flush=True)
signal.sigwait([signal.SIGTERM, signal.SIGINT])
controller.stop()
"#;

#[test]
fn email_goes_through_starttls_with_a_login_to_a_server_of_the_private_ca() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("smtp", 0o600);
    let maildir = dir.path().join("maildir");
    let smtp_port = free_port();
    let mut smtp = Command::new("/usr/bin/python3")
        .args(["-c", SMTP_SERVER, &smtp_port.to_string()])
        .arg(&certificate)
        .arg(&key)
        .arg(&maildir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("Debian's python3 with aiosmtpd (scripts/bootstrap.sh installs it)");
    let mut ready = [0u8; 9];
    smtp.stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert_eq!(&ready, b"listening");
    let credentials = dir.path().join("smtp-credentials");
    std::fs::write(&credentials, "mailer\nmail password\n").unwrap();
    std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
    let smarthost = format!("localhost:{smtp_port}");
    let platform = Platform::start_with_env(
        &[
            "--notifications-email-smarthost",
            &smarthost,
            "--notifications-email-from",
            "Abode <abode@example.com>",
            "--notifications-email-starttls",
            "--notifications-email-credentials-file",
            credentials.to_str().unwrap(),
        ],
        &[("ABODE_CA_CERT", authority.ca_file().to_str().unwrap())],
    );
    platform.login_owner();
    util::hold_a_build(&platform);
    let deadline = Instant::now() + Duration::from_secs(60);
    let message = loop {
        let found = std::fs::read_dir(maildir.join("new"))
            .ok()
            .and_then(|mut entries| entries.next())
            .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap());
        if let Some(message) = found {
            break message;
        }
        assert!(
            Instant::now() < deadline,
            "no email arrived:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(message.contains("To: alice@example.com"), "{message}");
    assert!(message.contains("awaits your confirmation"), "{message}");
    util::signal(smtp.id(), "TERM");
    smtp.wait().unwrap();
}

#[test]
fn two_servers_relay_an_ssh_session_over_https() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("servers", 0o600);
    let ca = authority.ca_file();
    let database = util::FreshDatabase::create();
    let tls_server = |extra: &[&str]| {
        let tls_port = free_port();
        let relay = format!("https://localhost:{tls_port}");
        let mut flags: Vec<&str> = util::FAST_AGENT_FLAGS.to_vec();
        flags.extend(extra);
        let tls_address = format!("127.0.0.1:{tls_port}");
        let mut with_tls = flags.clone();
        with_tls.extend([
            "--tls-address",
            tls_address.as_str(),
            "--tls-cert-file",
            certificate.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
            "--relay-url",
            relay.as_str(),
            "--database-url",
            database.url.as_str(),
        ]);
        Platform::start_with_env(&with_tls, &[("ABODE_CA_CERT", ca.to_str().unwrap())])
    };
    // The agent's tunnel goes to the builder (its access URL, https://);
    // people use the front, which relays to the builder over wss://.
    let builder = tls_server(&["--provisioners", "1"]);
    let front = tls_server(&["--provisioners", "0"]);
    builder.login_owner();
    front.login_existing_owner();
    front.push_example();
    front.run(&["create", "dev", "--template", "local"]).ok();
    front.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let run = front.run(&["ssh", "dev", "--", "sh", "-c", "echo relayed; exit 3"]);
    assert_eq!(run.code, Some(3), "{run:?}");
    assert_eq!(run.stdout, "relayed\n", "{run:?}");
    let log = front.server_log();
    assert!(
        log.contains("relaying a connection to the server that holds the agent's tunnel"),
        "{log}"
    );
}

/// An HTTPS webhook receiver (Python's own server with the private CA's
/// certificate): prints `listening`, then one line per request, its path
/// and its body's `kind`.
const WEBHOOK_RECEIVER: &str = r#"
import http.server, json, ssl, sys

port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]

class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        print(self.path, body.get("kind"), flush=True)
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", port), Hook)
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print("listening", flush=True)
server.serve_forever()
"#;

#[test]
fn a_webhook_reaches_an_https_receiver_of_the_private_ca() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("receiver", 0o600);
    let port = free_port();
    let mut receiver = Command::new("/usr/bin/python3")
        .args(["-c", WEBHOOK_RECEIVER, &port.to_string()])
        .arg(&certificate)
        .arg(&key)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut lines = std::io::BufReader::new(receiver.stdout.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    lines.read_line(&mut line).unwrap();
    assert_eq!(line, "listening\n");
    let secret = dir.path().join("webhook-secret");
    std::fs::write(&secret, "shared\n").unwrap();
    let url = format!("https://localhost:{port}/hook");
    let platform = Platform::start_with_env(
        &[
            "--notifications-webhook-url",
            &url,
            "--notifications-webhook-secret-file",
            secret.to_str().unwrap(),
        ],
        &[("ABODE_CA_CERT", authority.ca_file().to_str().unwrap())],
    );
    platform.login_owner();
    util::hold_a_build(&platform);
    // Blocks until the receiver printed the delivery (the test's timeout
    // bounds it): the negative would be no line at all.
    line.clear();
    lines.read_line(&mut line).unwrap();
    assert_eq!(line, "/hook build_held\n", "{}", platform.server_log());
    receiver.kill().unwrap();
    receiver.wait().unwrap();
}

/// Issue 46: with `--tls-address`, a password sent to the plain listener
/// from another machine crossed the network in the clear, so it is refused
/// with a line that says where to sign in; from this machine, or through a
/// proxy that terminated TLS and says so, it is taken. The neighbour here is
/// a client a trusted proxy forwards for (the plain listener's only way to
/// see an address other than loopback in a test).
#[test]
fn a_password_crosses_the_network_only_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let (certificate, key) = authority.sign("first", 0o600);
    let tls_port = free_port();
    let tls_address = format!("127.0.0.1:{tls_port}");
    let platform = Platform::start_with(&[
        "--tls-address",
        &tls_address,
        "--tls-cert-file",
        certificate.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
        "--trusted-proxies",
        "127.0.0.1/32",
    ]);
    // The first user's password from another machine, in the clear: refused
    // too, and nobody was created.
    let first = ureq::post(&format!("{}/api/v1/users/first", platform.url))
        .set("x-forwarded-for", "203.0.113.7")
        .send_json(serde_json::json!({
            "username": "mallory",
            "email": "mallory@example.com",
            "password": "correct horse battery",
        }));
    match first {
        Err(ureq::Error::Status(403, response)) => {
            let body = response.into_string().unwrap();
            assert!(body.contains("https_required"), "{body}");
        }
        other => panic!("the first user was taken in the clear: {other:?}"),
    }
    // From this machine, on the plain listener: taken.
    platform.login_owner();
    let login = serde_json::json!({"username": "alice", "password": "correct horse battery"});
    let post = |headers: &[(&str, &str)]| {
        let mut request = ureq::post(&format!("{}/api/v1/login", platform.url));
        for (name, value) in headers {
            request = request.set(name, value);
        }
        match request.send_json(login.clone()) {
            Ok(response) => (response.status(), response.into_string().unwrap()),
            Err(ureq::Error::Status(status, response)) => (status, response.into_string().unwrap()),
            Err(other) => panic!("{other}"),
        }
    };

    // From another machine, in the clear: refused, before any check of the
    // password (a wrong one gets the same answer), saying where to go.
    let (status, body) = post(&[("x-forwarded-for", "203.0.113.7")]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("https_required"), "{body}");
    assert!(body.contains("only over HTTPS"), "{body}");
    assert!(!body.contains("token"), "{body}");
    // The same through a proxy that terminated TLS: taken.
    let (status, body) = post(&[
        ("x-forwarded-for", "203.0.113.7"),
        ("x-forwarded-proto", "https"),
    ]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"token\""), "{body}");

    // The dashboard's sign-in form says the same, in the page.
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let page = agent
        .get(&format!("{}/login", platform.url))
        .call()
        .unwrap();
    let cookie = page
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let html = page.into_string().unwrap();
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let refused = agent
        .post(&format!("{}/login", platform.url))
        .set("cookie", &cookie)
        .set("x-forwarded-for", "203.0.113.7")
        .send_form(&[
            ("csrf", csrf.as_str()),
            ("username", "alice"),
            ("password", "correct horse battery"),
        ]);
    let (status, html) = match refused {
        Ok(response) => (response.status(), response.into_string().unwrap()),
        Err(ureq::Error::Status(status, response)) => (status, response.into_string().unwrap()),
        Err(other) => panic!("{other}"),
    };
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("only over HTTPS"), "{html}");
}
