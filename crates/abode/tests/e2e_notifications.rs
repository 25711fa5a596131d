//! Notifications through the real server, Terraform and a real HTTP
//! receiver on loopback: a held build reaches the owner and the template
//! admins as a signed webhook call and an inbox entry; a receiver that is
//! down gets the message once it is back; a server killed in the middle of
//! a delivery delivers it again after its restart (same message id).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use util::{hold_a_build, require_terraform, Platform, ReservedPort};

const SECRET: &str = "webhook shared secret";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Delivery {
    path: String,
    signature: Option<String>,
    delivery_id: Option<String>,
    body: serde_json::Value,
    /// Whether the signature is the HMAC-SHA256 of the body with SECRET.
    signed: bool,
}

/// A webhook receiver on loopback: answers 204, or (`hang`) reads the
/// request and keeps the connection open without answering.
struct Receiver {
    port: u16,
    hang: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    fn start(listener: TcpListener, deliveries: Arc<Mutex<Vec<Delivery>>>, hang: bool) -> Receiver {
        let port = listener.local_addr().unwrap().port();
        let hang = Arc::new(AtomicBool::new(hang));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (deliveries, hang, stop) = (deliveries.clone(), hang.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut stream) = stream else { continue };
                    let Some(delivery) = read_request(&mut stream) else {
                        continue;
                    };
                    deliveries.lock().unwrap().push(delivery);
                    if hang.load(Ordering::SeqCst) {
                        held.push(stream);
                    } else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
                    }
                }
            })
        };
        Receiver {
            port,
            hang,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Closes the listener: connections are refused until a new start.
    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Delivery> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let (mut length, mut signature, mut delivery_id) = (0usize, None, None);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim().to_string();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().ok()?,
            "x-abode-signature" => signature = Some(value),
            "x-abode-delivery" => delivery_id = Some(value),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(&body);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    Some(Delivery {
        path,
        signed: signature.as_deref() == Some(expected.as_str()),
        signature,
        delivery_id,
        body: serde_json::from_slice(&body).ok()?,
    })
}

/// Waits until `deliveries` holds at least `count` of `kind`.
fn wait_for(deliveries: &Arc<Mutex<Vec<Delivery>>>, kind: &str, count: usize) -> Vec<Delivery> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found: Vec<Delivery> = deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|d| d.body["kind"] == kind)
            .cloned()
            .collect();
        if found.len() >= count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no {count} {kind} deliveries within 60 s: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_for_log(platform: &Platform, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !platform.server_log().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "the server never logged {needle:?}:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn secret_file(dir: &Path) -> String {
    let file = dir.join("webhook-secret");
    fs::write(&file, format!("{SECRET}\n")).unwrap();
    file.display().to_string()
}

#[test]
fn a_held_build_reaches_owner_and_template_admins_signed_even_after_the_receiver_was_down() {
    require_terraform();
    let secrets = tempfile::tempdir().unwrap();
    // Down: the port is held, not listened on, until the receiver starts.
    let reserved = ReservedPort::new();
    let deliveries = Arc::new(Mutex::new(Vec::new()));
    let url = format!("http://127.0.0.1:{}/hook", reserved.port);
    let secret = secret_file(secrets.path());
    let platform = Platform::start_with(&[
        "--notifications-webhook-url",
        &url,
        "--notifications-webhook-secret-file",
        &secret,
    ]);
    platform.login_owner();
    let bob = platform.login_new_user("bob", "template-admin");
    let carol = platform.login_new_user("carol", "member");

    // The receiver is down when the build is held.
    let digest = hold_a_build(&platform);
    wait_for_log(&platform, "notification delivery failed; will retry");
    assert!(deliveries.lock().unwrap().is_empty());

    // Back up: the next attempt (the clock moved past any backoff) delivers.
    let receiver = Receiver::start(reserved.listen(), deliveries.clone(), false);
    assert_eq!(receiver.url(), url);
    platform.advance_clock(Duration::from_secs(2 * 60 * 60));
    let held = wait_for(&deliveries, "build_held", 2);
    let mut recipients: Vec<String> = held
        .iter()
        .map(|d| {
            d.body["recipient"]["username"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    recipients.sort();
    assert_eq!(
        recipients,
        ["alice", "bob"],
        "the owner and the template admin"
    );
    for delivery in &held {
        assert!(delivery.signed, "bad signature {:?}", delivery.signature);
        assert_eq!(delivery.path, "/hook");
        assert_eq!(delivery.body["schema_version"], 1);
        assert_eq!(
            delivery.delivery_id.as_deref(),
            delivery.body["id"].as_str(),
            "X-Abode-Delivery is the message id"
        );
        let payload = &delivery.body["payload"];
        assert_eq!(payload["workspace"], "alice/dev");
        assert_eq!(payload["build_number"], 2);
        assert_eq!(payload["transition"], "start");
        assert_eq!(payload["initiator"]["name"], "alice");
        assert_eq!(payload["initiator"]["system"], false);
        assert_eq!(
            payload["confirm_command"],
            format!("abode builds confirm alice/dev 2 --digest {digest}")
        );
        assert!(payload["expires_at"].as_i64().unwrap() > 0);
        let changes = payload["protected_changes"].as_array().unwrap();
        let volume = changes
            .iter()
            .find(|c| c["address"] == "abode_volume.home")
            .unwrap_or_else(|| panic!("{changes:?}"));
        assert!(
            volume["paths"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "name"),
            "{volume}"
        );
        assert!(volume["reason"].as_str().is_some_and(|r| !r.is_empty()));
    }

    // The inbox: the owner's and the template admin's, not the member's.
    let inbox = platform
        .run(&["notifications", "list", "--unread", "--output", "json"])
        .ok()
        .json();
    let inbox = inbox.as_array().unwrap();
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert_eq!(inbox[0]["kind"], "build_held");
    assert_eq!(inbox[0]["read"], false);
    assert_eq!(
        inbox[0]["payload"]["confirm_command"],
        format!("abode builds confirm alice/dev 2 --digest {digest}")
    );
    let bobs = platform
        .run_as(&bob, &["notifications", "list", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(bobs.as_array().unwrap().len(), 1);
    let carols = platform
        .run_as(&carol, &["notifications", "list", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(carols, serde_json::json!([]));
    let text = platform.run(&["notifications", "list"]).ok();
    assert!(text.stdout.contains("build_held"), "{text}");
    assert!(text.stdout.contains("alice/dev"), "{text}");

    // Read one, then all; another person's id is not found.
    let id = inbox[0]["id"].as_str().unwrap();
    platform
        .run_as(&carol, &["notifications", "read", id], None)
        .fails_with(1, &["not"]);
    platform.run(&["notifications", "read", id]).ok();
    let unread = platform
        .run(&["notifications", "list", "--unread", "--output", "json"])
        .ok()
        .json();
    assert_eq!(unread, serde_json::json!([]));
    platform
        .run_as(&bob, &["notifications", "read", "--all"], None)
        .ok();
    let bobs_unread = platform
        .run_as(
            &bob,
            &["notifications", "list", "--unread", "-o", "json"],
            None,
        )
        .ok()
        .json();
    assert_eq!(bobs_unread, serde_json::json!([]));
    platform.run(&["notifications", "read"]).fails_with(2, &[]);

    // An hour before the deadline (24 h after the hold; the clock already
    // moved 2 h): held_build_expiring, once; then held_build_expired.
    platform.advance_clock(Duration::from_secs(21 * 60 * 60 + 30 * 60));
    let expiring = wait_for(&deliveries, "held_build_expiring", 2);
    for delivery in &expiring {
        assert!(delivery.signed);
        assert_eq!(
            delivery.body["payload"]["confirm_command"],
            format!("abode builds confirm alice/dev 2 --digest {digest}")
        );
    }
    platform.advance_clock(Duration::from_secs(60 * 60));
    let expired = wait_for(&deliveries, "held_build_expired", 2);
    assert!(expired[0].body["payload"]["error"]
        .as_str()
        .unwrap()
        .contains("expired"));
    let kinds: Vec<String> = platform
        .run(&["notifications", "list", "--unread", "--output", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["held_build_expired", "held_build_expiring"]);
    assert_eq!(
        wait_for(&deliveries, "held_build_expiring", 2).len(),
        2,
        "the warning goes out once per build and person"
    );
    receiver.stop();
}

#[test]
fn a_server_killed_during_a_delivery_delivers_it_after_its_restart() {
    killed_during_a_delivery(None);
}

#[test]
fn on_postgres_a_server_killed_during_a_delivery_delivers_it_after_its_restart() {
    let database = util::FreshDatabase::create();
    killed_during_a_delivery(Some(&database.url));
}

fn killed_during_a_delivery(database_url: Option<&str>) {
    require_terraform();
    let secrets = tempfile::tempdir().unwrap();
    let deliveries = Arc::new(Mutex::new(Vec::new()));
    // It takes the request and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let receiver = Receiver::start(listener, deliveries.clone(), true);
    let secret = secret_file(secrets.path());
    let url = receiver.url();
    let mut platform = Platform::start_with_metrics(
        database_url,
        &[
            "--notifications-webhook-url",
            &url,
            "--notifications-webhook-secret-file",
            &secret,
            "--notifications-webhook-timeout",
            "600",
        ],
    );
    platform.login_owner();
    hold_a_build(&platform);
    let first = wait_for(&deliveries, "build_held", 1);
    assert!(first[0].signed);

    platform.kill_server();
    receiver.hang.store(false, Ordering::SeqCst);
    platform.start_server_again();
    // Nothing is sent again while the dead server's lease runs, though the
    // restarted server's dispatcher looked for due messages...
    platform.wait_for_passes("notifications", 2);
    assert_eq!(deliveries.lock().unwrap().len(), 1);
    // ...and once it ran out, the message is delivered again, same id.
    platform.advance_clock(Duration::from_secs(60 * 60));
    let again = wait_for(&deliveries, "build_held", 2);
    assert_eq!(again[1].delivery_id, first[0].delivery_id);
    assert_eq!(again[1].body, first[0].body, "the same message");
    assert!(again[1].signed);
    receiver.stop();
}

#[test]
fn the_server_refuses_a_bad_webhook_url_or_secret_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path());
    let missing = dir.path().join("missing").display().to_string();
    let cases: [(&str, &str, &str); 3] = [
        (
            "ftp://example.com/hook",
            secret.as_str(),
            "http:// or https://",
        ),
        ("file:///etc/passwd", secret.as_str(), "http:// or https://"),
        (
            "http://127.0.0.1:9/hook",
            missing.as_str(),
            "cannot read the webhook secret file",
        ),
    ];
    for (url, secret, needle) in cases {
        let output = std::process::Command::new(util::abode_bin())
            .args(["server", "--address", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--notifications-webhook-url", url])
            .args(["--notifications-webhook-secret-file", secret])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{url}: {stderr}");
        assert!(stderr.contains(needle), "{url}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{url}: {stderr}");
    }
}

/// A real SMTP server (Debian's aiosmtpd) that stores what it receives in a
/// Maildir; killed when dropped.
struct SmtpServer {
    child: std::process::Child,
    port: u16,
    maildir: std::path::PathBuf,
}

impl SmtpServer {
    fn start(dir: &Path) -> SmtpServer {
        let python = Path::new("/usr/bin/python3");
        let has_aiosmtpd = std::process::Command::new(python)
            .args(["-c", "import aiosmtpd"])
            .status()
            .is_ok_and(|status| status.success());
        assert!(
            has_aiosmtpd,
            "Debian's python3-aiosmtpd is missing: source scripts/bootstrap.sh installs it"
        );
        let maildir = dir.join("maildir");
        // The port is free when picked; should another process take it
        // before aiosmtpd binds it, aiosmtpd exits and starts again on
        // another.
        for _ in 0..10 {
            let port = util::free_port();
            let mut child = std::process::Command::new(python)
                .args(["-m", "aiosmtpd", "-n", "-l"])
                .arg(format!("127.0.0.1:{port}"))
                .args(["-c", "aiosmtpd.handlers.Mailbox"])
                .arg(&maildir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok()
                    && child.try_wait().unwrap().is_none()
                {
                    return SmtpServer {
                        child,
                        port,
                        maildir,
                    };
                }
                assert!(Instant::now() < deadline, "aiosmtpd did not listen");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        panic!("aiosmtpd exited ten times before listening")
    }

    /// The raw messages received so far.
    fn messages(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.maildir.join("new")) else {
            return Vec::new();
        };
        entries
            .map(|entry| fs::read_to_string(entry.unwrap().path()).unwrap())
            .collect()
    }

    fn wait_for(&self, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let messages = self.messages();
            if messages.len() >= count {
                return messages;
            }
            assert!(
                Instant::now() < deadline,
                "{count} emails did not arrive: {messages:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_held_build_is_mailed_to_the_owner_and_the_template_admins() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let smtp = SmtpServer::start(dir.path());
    let smarthost = format!("127.0.0.1:{}", smtp.port);
    let platform = Platform::start_with_metrics(
        None,
        &[
            "--notifications-email-smarthost",
            &smarthost,
            "--notifications-email-from",
            "Abode <abode@example.com>",
        ],
    );
    platform.login_owner();
    let bob = platform.login_new_user("bob", "template-admin");
    platform.login_new_user("carol", "member");
    // Preferences: dave disables build_held; the owner makes
    // held_build_expired mandatory, which erin then cannot disable; a
    // template admin cannot make kinds mandatory.
    let dave = platform.login_new_user("dave", "template-admin");
    let settings = platform
        .run_as(
            &dave,
            &[
                "notifications",
                "settings",
                "--disable",
                "build_held",
                "-o",
                "json",
            ],
            None,
        )
        .ok()
        .json();
    let held_setting = settings
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "build_held")
        .unwrap()
        .clone();
    assert_eq!(held_setting["enabled"], false);
    let erin = platform.login_new_user("erin", "template-admin");
    platform
        .run(&[
            "notifications",
            "settings",
            "--mandatory",
            "held_build_expired",
        ])
        .ok();
    platform
        .run_as(
            &erin,
            &[
                "notifications",
                "settings",
                "--disable",
                "held_build_expired",
            ],
            None,
        )
        .fails_with(1, &["mandatory"]);
    platform
        .run_as(
            &bob,
            &["notifications", "settings", "--mandatory", "build_failed"],
            None,
        )
        .fails_with(1, &[]);
    platform
        .run_as(
            &erin,
            &["notifications", "settings", "--disable", "no_such_kind"],
            None,
        )
        .fails_with(1, &["unknown notification kind"]);
    let text = platform.run(&["notifications", "settings"]).ok();
    assert!(text.stdout.contains("held_build_expired"), "{text}");

    let digest = hold_a_build(&platform);
    let messages = smtp.wait_for(3);
    // Let a wrongly addressed fourth one show up, if there were one: the
    // dispatcher looked for due messages again after the third arrived.
    platform.wait_for_passes("notifications", 2);
    let messages = if smtp.messages().len() > 3 {
        smtp.messages()
    } else {
        messages
    };
    let mut to: Vec<String> = messages
        .iter()
        .map(|m| {
            m.lines()
                .find_map(|line| line.strip_prefix("To: "))
                .unwrap()
                .to_string()
        })
        .collect();
    to.sort();
    assert_eq!(
        to,
        ["alice@example.com", "bob@example.com", "erin@example.com"],
        "the owner and the template admins, but not dave, who disabled build_held"
    );
    for message in &messages {
        assert!(
            message.contains("From: Abode <abode@example.com>"),
            "{message}"
        );
        assert!(
            message.contains("Subject: [abode] alice/dev: build #2 awaits your confirmation"),
            "{message}"
        );
        assert!(message.contains("multipart/alternative"), "{message}");
        assert!(message.contains("text/plain"), "{message}");
        assert!(message.contains("text/html"), "{message}");
        // Quoted-printable may wrap the long line: compare without soft breaks.
        let unwrapped = message.replace("=\r\n", "").replace("=\n", "");
        assert!(
            unwrapped.contains(&format!(
                "abode builds confirm alice/dev 2 --digest {digest}"
            )),
            "{message}"
        );
        assert!(unwrapped.contains("abode_volume.home"), "{message}");
    }
}

#[test]
fn a_delivery_that_keeps_failing_is_marked_failed_with_its_last_error_for_owners_to_see() {
    require_terraform();
    let secrets = tempfile::tempdir().unwrap();
    // Nobody listens there, and nobody can meanwhile.
    let nobody = ReservedPort::new();
    let url = format!("http://127.0.0.1:{}/hook", nobody.port);
    let secret = secret_file(secrets.path());
    let platform = Platform::start_with(&[
        "--notifications-webhook-url",
        &url,
        "--notifications-webhook-secret-file",
        &secret,
        "--notifications-max-attempts",
        "2",
    ]);
    platform.login_owner();
    let bob = platform.login_new_user("bob", "member");
    hold_a_build(&platform);
    wait_for_log(&platform, "notification delivery failed; will retry");
    platform.advance_clock(Duration::from_secs(2 * 60 * 60));
    wait_for_log(&platform, "notification failed for good");

    let failed = platform
        .run(&["notifications", "failed", "--output", "json"])
        .ok()
        .json();
    let failed = failed.as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["kind"], "build_held");
    assert_eq!(failed[0]["recipient"], "alice");
    assert_eq!(failed[0]["channel"], "webhook");
    assert_eq!(failed[0]["attempts"], 2);
    assert!(
        failed[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot reach the webhook"),
        "{failed:?}"
    );
    let text = platform.run(&["notifications", "failed"]).ok();
    assert!(text.stdout.contains("cannot reach the webhook"), "{text}");
    platform
        .run_as(&bob, &["notifications", "failed"], None)
        .fails_with(1, &[]);
    // The inbox does not depend on the webhook.
    let inbox = platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(inbox.as_array().unwrap().len(), 1);
}
