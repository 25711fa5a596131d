//! Behind a TLS-terminating proxy (issue 28): Debian's nginx runs
//! deploy/nginx/abode.conf as written (only its placeholders replaced) in
//! front of `abode server --trusted-proxies`, with a certificate signed by
//! a private CA made here. Through it: `abode login https://...`, a build's
//! live log (the CLI's follow and the dashboard's server-sent events),
//! the agent's tunnel and `abode ssh` (WebSocket upgrades), the dashboard's
//! sign-in with a `Secure` cookie; and the login throttle and the audit log
//! keyed on the client nginx forwards for, never on an address a client
//! wrote itself.
//!
//! Clients pick their source address on loopback (curl's `--interface`,
//! any 127.0.0.0/8 address is local on Linux), so that the proxy
//! (127.0.0.1), the real client (127.0.0.3) and a spoofed address
//! (203.0.113.9) are all different and the rule can be seen at work.
//!
//! With deploy/nginx/abode-apps.conf beside it (a wildcard certificate of
//! the same CA): a workspace's apps on their own subdomains, a download by
//! a script with an API token, a visitor sent to sign in on the dashboard's
//! origin, and a WebSocket app upgraded through nginx over TLS, each on a
//! connection the agent dialed back through nginx. And the web
//! terminal in headless Chromium pinned to the proxy's key: the page, its
//! `Secure` cookie and its WebSocket through nginx.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser;
use crate::util;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite;
use util::authority::{run_trusting, Authority};
use util::{free_port, repo_root, require_terraform, Platform, FAST_AGENT_FLAGS};

/// nginx, not a daemon, as a child of the test, with everything it writes
/// in its own directory.
struct Nginx {
    child: Child,
    dir: PathBuf,
    https_port: u16,
    http_port: u16,
}

impl Nginx {
    /// Renders deploy/nginx/abode.conf (only its placeholders replaced),
    /// includes it in an http block as a Debian site is, and starts nginx.
    /// HTTPS on `https_port` (the access URL's, chosen before the server
    /// started); plain HTTP on a port of its own.
    fn start(dir: &Path, https_port: u16, upstream: &str, certificate: &Path, key: &Path) -> Nginx {
        Nginx::start_with_apps(
            dir,
            https_port,
            upstream,
            certificate,
            key,
            None,
            DialBacks::Pass,
        )
    }

    /// [`Nginx::start`], with deploy/nginx/abode-apps.conf beside it when
    /// `apps` gives the wildcard host and its certificate and key; with
    /// the agents' dial-back route answered 404 by nginx itself when
    /// `dial_backs` says so.
    fn start_with_apps(
        dir: &Path,
        https_port: u16,
        upstream: &str,
        certificate: &Path,
        key: &Path,
        apps: Option<(&str, &Path, &Path)>,
        dial_backs: DialBacks,
    ) -> Nginx {
        let dir = dir.join("nginx");
        std::fs::create_dir_all(&dir).unwrap();
        let written = std::fs::read_to_string(repo_root().join("deploy/nginx/abode.conf")).unwrap();
        let apps_site = apps.map(|(host, certificate, key)| {
            let site = std::fs::read_to_string(repo_root().join("deploy/nginx/abode-apps.conf"))
                .unwrap()
                .replace("__APPS_SERVER_NAME__", host)
                .replace("__LISTEN__", &format!("127.0.0.1:{https_port}"))
                .replace("__APPS_CERT__", certificate.to_str().unwrap())
                .replace("__APPS_KEY__", key.to_str().unwrap());
            assert!(!site.contains("__"), "a placeholder is left:\n{site}");
            site
        });
        std::fs::write(
            dir.join("abode-apps.conf"),
            apps_site.as_deref().unwrap_or(""),
        )
        .unwrap();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let http_port = free_port();
            let site = written
                .replace("__SERVER_NAME__", "localhost")
                .replace("__HTTP_LISTEN__", &format!("127.0.0.1:{http_port}"))
                .replace("__LISTEN__", &format!("127.0.0.1:{https_port}"))
                .replace("__CERT__", certificate.to_str().unwrap())
                .replace("__KEY__", key.to_str().unwrap())
                .replace("__UPSTREAM__", upstream);
            assert!(!site.contains("__"), "a placeholder is left:\n{site}");
            let site = match dial_backs {
                DialBacks::Pass => site,
                DialBacks::Refused => {
                    assert_eq!(site.matches("    location / {").count(), 1, "{site}");
                    site.replace(
                        "    location / {",
                        "    location = /api/v1/agent/streams { return 404; }\n    location / {",
                    )
                }
            };
            std::fs::write(dir.join("abode.conf"), site).unwrap();
            let d = dir.display();
            // The main configuration Debian's /etc/nginx/nginx.conf would
            // be, with every path nginx writes in the test's directory.
            std::fs::write(
                dir.join("nginx.conf"),
                format!(
                    "error_log {d}/error.log info;\n\
                     worker_processes 1;\n\
                     events {{ worker_connections 256; }}\n\
                     http {{\n\
                       access_log {d}/access.log;\n\
                       client_body_temp_path {d}/client_body;\n\
                       proxy_temp_path {d}/proxy;\n\
                       fastcgi_temp_path {d}/fastcgi;\n\
                       uwsgi_temp_path {d}/uwsgi;\n\
                       scgi_temp_path {d}/scgi;\n\
                       include {d}/abode.conf;\n\
                       include {d}/abode-apps.conf;\n\
                     }}\n"
                ),
            )
            .unwrap();
            let child = Command::new(nginx_binary())
                .arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                // The log of startup, before the configuration is read
                // (else /var/log/nginx, which a non-root user cannot open).
                .arg("-e")
                .arg(dir.join("error.log"))
                .arg("-g")
                .arg(format!("daemon off; pid {d}/nginx.pid;"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
                .spawn()
                .expect("the proxy tests need Debian's nginx (scripts/bootstrap.sh installs it)");
            let mut nginx = Nginx {
                child,
                dir: dir.clone(),
                https_port,
                http_port,
            };
            match nginx.wait_until_listening() {
                Ok(()) => return nginx,
                Err(log) if log.contains("Address already in use") && attempts < 5 => {}
                Err(log) => panic!("nginx did not start:\n{log}"),
            }
        }
    }

    fn wait_until_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exit {status}\n{}", self.logs()));
            }
            if TcpStream::connect(("127.0.0.1", self.https_port)).is_ok()
                && TcpStream::connect(("127.0.0.1", self.http_port)).is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("not listening after 15 s\n{}", self.logs()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn logs(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        format!(
            "--- stderr\n{}\n--- error.log\n{}",
            read("stderr.log"),
            read("error.log")
        )
    }

    fn https(&self) -> String {
        format!("https://localhost:{}", self.https_port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx_binary() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}

/// What curl got: the status, the headers and the body.
struct Answer {
    status: u16,
    headers: String,
    body: String,
}

/// curl from the source address `from`, trusting `ca`, with `args`.
fn curl(from: &str, ca: &Path, args: &[&str]) -> Answer {
    let out = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "30", "--interface", from, "--cacert"])
        .arg(ca)
        .arg("-D")
        .arg(out.path())
        .args(args)
        .output()
        .expect("the proxy tests need curl");
    let headers = std::fs::read_to_string(out.path()).unwrap_or_default();
    let status = headers
        .lines()
        .rev()
        .find(|line| line.starts_with("HTTP/"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "curl {args:?} got no answer: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&output.stdout).into_owned(),
    }
}

/// A failed login of `username` at `url` from `from`, claiming to forward
/// for `forwarded_for`.
fn failed_login(from: &str, ca: &Path, url: &str, username: &str, forwarded_for: &str) -> Answer {
    curl(
        from,
        ca,
        &[
            "-H",
            "content-type: application/json",
            "-H",
            &format!("x-forwarded-for: {forwarded_for}"),
            "--data",
            &format!(r#"{{"username":"{username}","password":"not the password"}}"#),
            &format!("{url}/api/v1/login"),
        ],
    )
}

/// `abode login URL --first-user` as alice through the proxy, trusting `ca`.
fn first_login_through(platform: &Platform, ca: &Path, https: &str) {
    run_trusting(
        platform,
        Some(ca),
        &[
            "login",
            https,
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
}

/// Waits until `dev`'s agent is ready, asked through the proxy (its tunnel
/// comes in through nginx too).
fn wait_until_ready_through(platform: &Platform, ca: &Path, nginx: &Nginx) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let shown = run_trusting(
            platform,
            Some(ca),
            &["show", "dev", "--output", "json"],
            None,
        );
        if shown.code == Some(0) && shown.json()["agent"]["status"] == "ready" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never became ready through nginx: {shown}\n{}\n{}",
            platform.server_log(),
            nginx.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn nginx_as_documented_carries_logins_logs_tunnels_and_ssh_and_the_throttle_sees_the_real_client() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let ca = authority.ca_file();
    let (certificate, key) = authority.sign("proxy", 0o600);
    // nginx's port is chosen before the server starts: the access URL (what
    // agents call back) is nginx's.
    let https_port = free_port();
    let access_url = format!("https://localhost:{https_port}");
    let mut flags = FAST_AGENT_FLAGS.to_vec();
    flags.extend([
        "--access-url",
        &access_url,
        "--trusted-proxies",
        "127.0.0.1/32",
        "--login-failures-per-minute",
        "3",
    ]);
    let platform = Platform::start_with_env(&flags, &[("ABODE_CA_CERT", ca.to_str().unwrap())]);
    let upstream = platform.url.trim_start_matches("http://").to_string();
    let nginx = Nginx::start(dir.path(), https_port, &upstream, &certificate, &key);
    let https = nginx.https();
    assert_eq!(https, access_url);

    // The CLI through the proxy, trusting the private CA.
    first_login_through(&platform, &ca, &https);
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
    // `create` follows the build's live log through the proxy.
    let created = run_trusting(
        &platform,
        Some(&ca),
        &["create", "dev", "--template", "local"],
        None,
    )
    .ok();
    assert!(created.stdout.contains("[apply]"), "{created}");

    // The agent's tunnel comes in through nginx (a WebSocket upgrade over
    // TLS) and becomes ready; `abode ssh` goes the same way.
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
            "the agent never became ready through nginx: {shown}\n{}\n{}",
            platform.server_log(),
            nginx.logs()
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
    assert_eq!(ssh.stdout.trim(), "ok", "{ssh}");

    // The dashboard: its cookies are Secure, the sign-in works through the
    // proxy, and the build's log arrives as server-sent events.
    let jar = dir.path().join("cookies.txt");
    let jar = jar.to_str().unwrap();
    let page = curl("127.0.0.1", &ca, &["-c", jar, &format!("{https}/login")]);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.headers.to_ascii_lowercase().contains("; secure"),
        "{}",
        page.headers
    );
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no CSRF token in the login page:\n{}", page.body))
        .to_string();
    let signed_in = curl(
        "127.0.0.1",
        &ca,
        &[
            "-b",
            jar,
            "-c",
            jar,
            "--data-urlencode",
            "username=alice",
            "--data-urlencode",
            "password=correct horse battery",
            "--data-urlencode",
            &format!("csrf={csrf}"),
            &format!("{https}/login"),
        ],
    );
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let session = signed_in
        .headers
        .lines()
        .find(|line| line.to_ascii_lowercase().contains("abode_session="))
        .unwrap_or_else(|| panic!("no session cookie:\n{}", signed_in.headers));
    assert!(session.contains("Secure"), "{session}");
    let events = curl(
        "127.0.0.1",
        &ca,
        &[
            "-N",
            "-b",
            jar,
            &format!("{https}/workspaces/alice/dev/builds/1/events"),
        ],
    );
    assert_eq!(events.status, 200, "{}", events.body);
    assert!(
        events.headers.contains("text/event-stream"),
        "{}",
        events.headers
    );
    assert!(
        events.body.contains(r#""stage":"apply""#) && events.body.contains("event: status"),
        "{}",
        events.body
    );

    // Plain HTTP at nginx is sent to HTTPS.
    let plain = curl(
        "127.0.0.1",
        &ca,
        &[&format!("http://127.0.0.1:{}/login?x=1", nginx.http_port)],
    );
    assert_eq!(plain.status, 308);
    assert!(
        plain.headers.contains("https://127.0.0.1/login?x=1"),
        "{}",
        plain.headers
    );

    // The login throttle (3 failures a minute here) counts the client nginx
    // forwards for: 127.0.0.3, the right-most address of X-Forwarded-For
    // that is not the trusted proxy; the 203.0.113.9 it wrote itself is
    // ignored, and nginx's own 127.0.0.1 is not what is counted.
    for n in 1..=3 {
        let refused = failed_login(
            "127.0.0.3",
            &ca,
            &https,
            &format!("ghost{n}"),
            "203.0.113.9",
        );
        assert_eq!(refused.status, 401, "{}", refused.body);
    }
    let throttled = failed_login("127.0.0.3", &ca, &https, "ghost4", "203.0.113.9");
    assert_eq!(throttled.status, 429, "{}", throttled.body);
    assert!(
        throttled.body.contains("from this address"),
        "{}",
        throttled.body
    );
    // Another client behind the same proxy is not throttled.
    let other = failed_login("127.0.0.5", &ca, &https, "ghost5", "127.0.0.3");
    assert_eq!(other.status, 401, "{}", other.body);
    // Straight to the server from an address that is not a trusted proxy:
    // the header naming the throttled client is ignored.
    let direct = failed_login("127.0.0.4", &ca, &platform.url, "ghost6", "127.0.0.3");
    assert_eq!(direct.status, 401, "{}", direct.body);

    // The audit log records the same client addresses.
    let audit = run_trusting(
        &platform,
        Some(&ca),
        &["audit", "--limit", "200", "--output", "json"],
        None,
    )
    .ok();
    let events = audit.json();
    let events = events
        .as_array()
        .or_else(|| events["events"].as_array())
        .unwrap_or_else(|| panic!("no events in {audit}"))
        .clone();
    let find = |action: &str, target: &str| {
        events
            .iter()
            .find(|event| event["action"] == action && event["target"] == target)
            .unwrap_or_else(|| panic!("no {action} of {target} in {audit}"))
            .clone()
    };
    for (target, from) in [
        ("ghost1", "127.0.0.3"),
        ("ghost3", "127.0.0.3"),
        ("ghost5", "127.0.0.5"),
        ("ghost6", "127.0.0.4"),
    ] {
        let event = find("login", target);
        assert_eq!(event["outcome"], "failure", "{event}");
        assert_eq!(
            event["details"],
            format!("method=password from {from}"),
            "{event}"
        );
        assert_eq!(event["client_ip"], from, "{event}");
        assert_eq!(event["status_code"], 401, "{event}");
    }
    let throttle = find("login.throttle", "127.0.0.3");
    assert_eq!(throttle["target_type"], "address", "{throttle}");
    let alice = find("login", "alice");
    assert_eq!(alice["outcome"], "success", "{alice}");
    assert_eq!(
        alice["details"], "method=password from 127.0.0.1",
        "{alice}"
    );
}

/// A workspace of the example's shape whose agent serves `hello.txt` with
/// `python3 -m http.server` as a subdomain app, and a WebSocket echo app.
fn apps_template(web_port: u16, echo_port: u16) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    abode = {{
      source = "abode/abode"
    }}
  }}
}}

data "abode_workspace" "me" {{}}

resource "abode_volume" "home" {{
  name = "home-${{data.abode_workspace.me.id}}"
}}

resource "abode_agent" "main" {{
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
  dir   = abode_volume.home.path
}}

resource "abode_process" "workspace" {{
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env = {{
    ABODE_AGENT_TOKEN = abode_agent.main[0].token
    HOME              = abode_volume.home.path
  }}
}}

resource "abode_process" "web" {{
  count   = data.abode_workspace.me.start_count
  command = ["python3", "-m", "http.server", "{web_port}", "--bind", "127.0.0.1"]
  dir     = abode_volume.home.path
}}

resource "abode_app" "web" {{
  count     = data.abode_workspace.me.start_count
  agent_id  = abode_agent.main[0].id
  slug      = "web"
  url       = "http://127.0.0.1:{web_port}"
  subdomain = true
}}

resource "abode_app" "echo" {{
  count     = data.abode_workspace.me.start_count
  agent_id  = abode_agent.main[0].id
  slug      = "echo"
  url       = "http://127.0.0.1:{echo_port}"
  subdomain = true
}}
"#
    )
}

/// A TLS connection to nginx for `host`, trusting only `ca`.
fn tls_to(
    port: u16,
    host: &str,
    ca: &Path,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    // A WebSocket is an HTTP/1.1 upgrade.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
    let client = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    rustls::StreamOwned::new(client, socket)
}

#[test]
fn apps_on_their_own_subdomains_through_nginx_as_documented() {
    apps_through_nginx(DialBacks::Pass);
}

/// A proxy that does not let dial-backs through (here nginx answering 404
/// for their route, as one without the route to the server would): every
/// app request still works, carried on the agent's tunnel.
#[test]
fn apps_behind_a_proxy_that_refuses_dial_backs_go_through_the_tunnel() {
    apps_through_nginx(DialBacks::Refused);
}

/// Whether the proxy passes the agent's dial-backs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DialBacks {
    Pass,
    Refused,
}

fn apps_through_nginx(dial_backs: DialBacks) {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let ca = authority.ca_file();
    let (certificate, key) = authority.sign("proxy", 0o600);
    let (apps_certificate, apps_key) = authority.sign_for("apps", &["*.apps.localhost"], 0o600);
    let https_port = free_port();
    let access_url = format!("https://localhost:{https_port}");
    let mut flags = FAST_AGENT_FLAGS.to_vec();
    flags.extend([
        "--access-url",
        &access_url,
        "--trusted-proxies",
        "127.0.0.1/32",
        "--wildcard-access-url",
        "*.apps.localhost",
        // The WebSocket echo app is this test's server on the host's
        // loopback: the workspace is on the machine's network to reach it.
        "--workspace-network",
        "host",
    ]);
    let platform =
        Platform::start_with_env_and_metrics(&flags, &[("ABODE_CA_CERT", ca.to_str().unwrap())]);
    let upstream = platform.url.trim_start_matches("http://").to_string();
    let nginx = Nginx::start_with_apps(
        dir.path(),
        https_port,
        &upstream,
        &certificate,
        &key,
        Some(("*.apps.localhost", &apps_certificate, &apps_key)),
        dial_backs,
    );
    let https = nginx.https();
    first_login_through(&platform, &ca, &https);
    let web_port = free_port();
    let template = dir.path().join("apps");
    std::fs::create_dir_all(&template).unwrap();
    std::fs::write(
        template.join("main.tf"),
        apps_template(web_port, util::websocket_echo_server()),
    )
    .unwrap();
    run_trusting(
        &platform,
        Some(&ca),
        &[
            "templates",
            "push",
            "apps",
            "-d",
            template.to_str().unwrap(),
        ],
        None,
    )
    .ok();
    run_trusting(
        &platform,
        Some(&ca),
        &["create", "dev", "--template", "apps"],
        None,
    )
    .ok();
    let shown = run_trusting(
        &platform,
        Some(&ca),
        &["show", "dev", "--output", "json"],
        None,
    )
    .ok()
    .json();
    let home = platform
        .volumes_dir()
        .join(format!("home-{}", shown["id"].as_str().unwrap()));
    std::fs::write(home.join("hello.txt"), "hello through nginx\n").unwrap();
    // Each app's address is on the wildcard, with the access URL's scheme
    // and port: nginx's.
    let web_host = "web--main-0--dev--alice.apps.localhost";
    let web = shown["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|app| app["slug"] == "web")
        .cloned()
        .unwrap();
    assert_eq!(
        web["url"],
        format!("https://{web_host}:{https_port}/"),
        "{shown}"
    );
    let token = run_trusting(
        &platform,
        Some(&ca),
        &["tokens", "create", "--name", "apps"],
        None,
    )
    .ok()
    .stdout
    .trim()
    .to_string();
    let resolve = format!("{web_host}:{https_port}:127.0.0.1");
    let url = format!("https://{web_host}:{https_port}/hello.txt");
    let bearer = format!("Authorization: Bearer {token}");

    // The owner's script reaches the app through nginx once the agent and
    // the app are up.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let answer = curl(
            "127.0.0.1",
            &ca,
            &["--resolve", &resolve, "-H", &bearer, &url],
        );
        if answer.status == 200 {
            assert_eq!(answer.body, "hello through nginx\n");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the app never answered through nginx: {} {}\n{}\n{}",
            answer.status,
            answer.body,
            platform.server_log(),
            nginx.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // A visitor who is not signed in is sent to sign in, on the dashboard's
    // origin behind the same nginx.
    let anonymous = curl("127.0.0.1", &ca, &["--resolve", &resolve, &url]);
    assert!(
        (300..400).contains(&anonymous.status)
            && anonymous
                .headers
                .to_lowercase()
                .contains(&format!("location: {https}/")),
        "{} {}",
        anonymous.status,
        anonymous.headers
    );

    // A WebSocket app, upgraded through nginx over TLS.
    let echo_host = "echo--main-0--dev--alice.apps.localhost";
    let mut request = tungstenite::client::IntoClientRequest::into_client_request(format!(
        "wss://{echo_host}:{https_port}/"
    ))
    .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut socket, _) = tungstenite::client(request, tls_to(https_port, echo_host, &ca))
        .unwrap_or_else(|error| panic!("no WebSocket through nginx: {error}\n{}", nginx.logs()));
    socket
        .send(tungstenite::Message::Text("echo through nginx".into()))
        .unwrap();
    let echoed = socket.read().unwrap();
    assert_eq!(echoed.into_text().unwrap(), "echo through nginx");

    // The agent's dial-backs went through nginx over TLS, trusting the
    // private CA, as its tunnel does (none fell back to the tunnel); or,
    // refused, every request went through the tunnel.
    let carried =
        |how: &str| platform.metric(&format!("abode_app_streams_total{{carried=\"{how}\"}}"));
    let (dialed, tunnelled) = (carried("dial_back"), carried("tunnel"));
    match dial_backs {
        DialBacks::Pass => assert!(
            dialed >= 2.0 && tunnelled == 0.0,
            "{dialed} dialed back, {tunnelled} on the tunnel\n{}",
            platform.server_log()
        ),
        DialBacks::Refused => assert!(
            dialed == 0.0 && tunnelled >= 2.0,
            "{dialed} dialed back, {tunnelled} on the tunnel\n{}\n{}\n{}",
            nginx.logs(),
            platform.scrape(),
            platform.server_log()
        ),
    }
}

/// The web terminal through nginx over TLS, in a browser that trusts the
/// proxy's key and nothing else of the test's: the page, its sign-in cookie
/// (`Secure`) and its WebSocket all go through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_terminal_through_nginx_over_tls() {
    require_terraform();
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path());
    let ca = authority.ca_file();
    let (certificate, key) = authority.sign("proxy", 0o600);
    let https_port = free_port();
    let access_url = format!("https://localhost:{https_port}");
    let mut flags = FAST_AGENT_FLAGS.to_vec();
    flags.extend([
        "--access-url",
        &access_url,
        "--trusted-proxies",
        "127.0.0.1/32",
    ]);
    let platform = Platform::start_with_env(&flags, &[("ABODE_CA_CERT", ca.to_str().unwrap())]);
    let upstream = platform.url.trim_start_matches("http://").to_string();
    let nginx = Nginx::start(dir.path(), https_port, &upstream, &certificate, &key);
    let https = nginx.https();
    first_login_through(&platform, &ca, &https);
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
    wait_until_ready_through(&platform, &ca, &nginx);

    // The browser pins the proxy's public key: the connection is verified,
    // against that key alone.
    let pin = util::authority::spki_pin(&key);
    let browser = browser::Browser::start_with_args(&[&format!(
        "--ignore-certificate-errors-spki-list={pin}"
    )])
    .await;
    browser
        .sign_in(&https, "alice", "correct horse battery")
        .await;
    browser
        .go(&format!("{https}/workspaces/alice/dev/terminal"))
        .await;
    browser.wait_for_element(".xterm-rows").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while browser.text("#terminal-status").await != "Connected." {
        assert!(
            Instant::now() < deadline,
            "the terminal never connected through nginx:\n{}",
            nginx.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser
        .type_into(".xterm-helper-textarea", "echo T$((6*7))U")
        .await;
    browser
        .type_into(
            ".xterm-helper-textarea",
            &char::from(fantoccini::key::Key::Enter).to_string(),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let screen = browser.text(".xterm-rows").await;
        if screen.lines().any(|line| line.trim().ends_with("T42U")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the shell's answer never came through nginx:\n{screen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser.close().await;
}
