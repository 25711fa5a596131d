//! Getting into a workspace (issue 14), with the real binary, server,
//! Terraform and the example template: `abode ssh` runs a command and
//! returns its exit status; OpenSSH connects through `abode config-ssh`'s
//! entry (`abode ssh --stdio`), and the workspace's host key is the same
//! after a stop and a start; `abode port-forward` and OpenSSH's `-W` reach
//! a TCP server inside the workspace; a member is refused on another's
//! workspace (403) and no token gets 401; the audit log has each connection
//! and its end; a connection moves the workspace's last use; a second
//! tunnel with an agent's token replaces the first, which is closed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite;
use tungstenite::client::IntoClientRequest;
use util::{require_terraform, Platform};

/// A TCP echo server "inside the workspace" (the example template's
/// workspace is local processes, so its localhost is this machine's).
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                loop {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if stream.write_all(&buffer[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

/// The agent token of the workspace whose home is `home`, from the
/// environment of its agent's process.
fn agent_token(home: &Path) -> String {
    let home = format!("HOME={}", home.display());
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let vars: Vec<String> = environ
            .split(|b| *b == 0)
            .map(|var| String::from_utf8_lossy(var).into_owned())
            .collect();
        if !vars.contains(&home) {
            continue;
        }
        let prefix = format!("{}=", abode_contract::AGENT_TOKEN);
        if let Some(token) = vars.iter().find_map(|var| var.strip_prefix(&prefix)) {
            return token.to_string();
        }
    }
    panic!("no agent process with {home}");
}

/// Runs OpenSSH with the generated configuration and its own known_hosts.
fn openssh(platform: &Platform, dir: &Path, strict: &str, args: &[&str]) -> std::process::Output {
    Command::new("ssh")
        .arg("-F")
        .arg(dir.join("ssh_config"))
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            dir.join("known_hosts").display()
        ))
        .arg("-o")
        .arg(format!("StrictHostKeyChecking={strict}"))
        .arg("-o")
        .arg("BatchMode=yes")
        .args(args)
        .env("ABODE_CONFIG_DIR", platform.config_dir())
        .env_remove("ABODE_URL")
        .env_remove("ABODE_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Drives `abode ssh WS` on a pseudo-terminal of 30x100 (Python's `pty`):
/// waits for each expected text before typing the next line, resizes the
/// terminal to 40x120 on the way (the kernel sends SIGWINCH), and exits
/// with the session's status. Prints what the terminal showed.
const TERMINAL_DRIVER: &str = r#"
import fcntl, os, pty, select, struct, sys, termios, time
def size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
pid, fd = pty.fork()
if pid == 0:
    size(0, 30, 100)
    os.execvp(sys.argv[1], sys.argv[1:])
seen = b""
def expect(text):
    global seen
    deadline = time.time() + 30
    while text.encode() not in seen:
        if time.time() > deadline:
            sys.stdout.write(seen.decode(errors="replace"))
            sys.exit(90)
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    seen = seen.split(text.encode(), 1)[1]
def type_line(line):
    os.write(fd, line.encode() + b"\r")
type_line("echo term=$TERM; stty size | sed 's/ /x/'")
expect("term=xterm-256color")
expect("30x100")
size(fd, 40, 120)
type_line("stty size | sed 's/ /x/'")
expect("40x120")
type_line("exit 7")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// A raw `GET` of a connect URL: the status line's code.
fn http_status(url: &str, path: &str, token: Option<&str>) -> u16 {
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(address).unwrap();
    let auth = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /api/v1{path} HTTP/1.1\r\nHost: {address}\r\n{auth}Connection: close\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn last_used(platform: &Platform) -> i64 {
    let run = platform
        .run(&["schedule", "show", "dev", "-o", "json"])
        .ok();
    run.json()["last_used_at"].as_i64().unwrap_or(0)
}

/// OpenSSH's client is never optional here (scripts/bootstrap.sh installs it).
fn require_openssh() {
    for tool in ["ssh", "scp"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        assert!(
            found,
            "{tool} is not on PATH: install Debian's openssh-client (scripts/bootstrap.sh does)"
        );
    }
}

#[test]
fn ssh_openssh_port_forward_authorization_audit_and_activity() {
    require_terraform();
    require_openssh();
    // The forwarded port's echo server is this test's, on the host's
    // loopback: the workspace is on the machine's network to reach it.
    let mut platform = Platform::start_with(&["--workspace-network", "host"]);
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));

    // A command, its output and its exit status; in the agent's dir.
    let run = platform.run(&["ssh", "dev", "--", "sh", "-c", "echo hi; exit 3"]);
    assert_eq!(run.code, Some(3), "{run:?}");
    assert_eq!(run.stdout, "hi\n", "{run:?}");
    let shown = platform.show("dev");
    let home = platform
        .volumes_dir()
        .join(format!("home-{}", shown["id"].as_str().unwrap()));
    std::fs::write(home.join("file.txt"), "from the volume\n").unwrap();
    let run = platform.run(&["ssh", "dev", "--", "cat", "file.txt"]).ok();
    assert_eq!(run.stdout, "from the volume\n");

    // Several sessions at once: the first waits for what the second does.
    let waiting = platform
        .cmd(&[
            "ssh",
            "dev",
            "--",
            "sh",
            "-c",
            "while [ ! -f go ]; do sleep 0.1; done; echo first",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let run = platform
        .run(&["ssh", "dev", "--", "sh", "-c", "touch go; echo second"])
        .ok();
    assert_eq!(run.stdout, "second\n");
    let first = waiting.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&first.stdout), "first\n");
    assert!(first.status.success());

    // On a terminal, `-t`: a real PTY on the other side, and its command's
    // exit status.
    let run = platform.run_on_terminal(&["ssh", "-t", "dev", "--", "sh", "-c", "tty; exit 5"], "");
    assert_eq!(run.code, Some(5), "{run:?}");
    assert!(run.stdout.contains("/dev/pts/"), "{run:?}");
    // An interactive shell, with what was typed before it started.
    let run = platform.run_on_terminal(&["ssh", "dev"], "tty; exit 6\n");
    assert_eq!(run.code, Some(6), "{run:?}");
    assert!(run.stdout.contains("/dev/pts/"), "{run:?}");

    // An interactive shell: the client's TERM, the window's size, and its
    // changes.
    let driven = Command::new("python3")
        .args(["-c", TERMINAL_DRIVER, util::abode_bin(), "ssh", "dev"])
        .env("ABODE_CONFIG_DIR", platform.config_dir())
        .env("TERM", "xterm-256color")
        .env_remove("ABODE_URL")
        .env_remove("ABODE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(
        driven.status.code(),
        Some(7),
        "{}{}",
        String::from_utf8_lossy(&driven.stdout),
        String::from_utf8_lossy(&driven.stderr)
    );

    // OpenSSH through `abode config-ssh`: one block, however often it runs.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ssh_config");
    std::fs::write(&config, "Host other\n  User someone\n").unwrap();
    for _ in 0..2 {
        platform
            .run(&["config-ssh", "--ssh-config-file", config.to_str().unwrap()])
            .ok();
    }
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with("Host other\n  User someone\n"), "{text}");
    assert_eq!(text.matches("Host abode.dev\n").count(), 1, "{text}");
    assert_eq!(text.matches("START ABODE SSH CONFIG").count(), 1, "{text}");
    let ssh = openssh(
        &platform,
        dir.path(),
        "accept-new",
        &["abode.dev", "--", "echo", "ok"],
    );
    assert_eq!(
        String::from_utf8_lossy(&ssh.stdout),
        "ok\n",
        "{}",
        String::from_utf8_lossy(&ssh.stderr)
    );
    assert_eq!(ssh.status.code(), Some(0));
    let known = std::fs::read_to_string(dir.path().join("known_hosts")).unwrap();
    assert!(known.contains("ssh-ed25519"), "{known}");

    // scp (its classic protocol: the remote `scp` over exec) in and out.
    let local_file = dir.path().join("upload.txt");
    std::fs::write(&local_file, "copied in\n").unwrap();
    let scp = |from: &str, to: &str| {
        let output = Command::new("scp")
            .arg("-O")
            .arg("-F")
            .arg(&config)
            .arg("-o")
            .arg(format!(
                "UserKnownHostsFile={}",
                dir.path().join("known_hosts").display()
            ))
            .args([
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                from,
                to,
            ])
            .env("ABODE_CONFIG_DIR", platform.config_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "scp {from} {to}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    scp(local_file.to_str().unwrap(), "abode.dev:uploaded.txt");
    assert_eq!(
        std::fs::read_to_string(home.join("uploaded.txt")).unwrap(),
        "copied in\n"
    );
    let downloaded = dir.path().join("downloaded.txt");
    scp("abode.dev:file.txt", downloaded.to_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(&downloaded).unwrap(),
        "from the volume\n"
    );

    // OpenSSH's -W: a direct-tcpip channel to a port inside the workspace.
    let echo = echo_server();
    let mut forwarded = Command::new("ssh")
        .arg("-F")
        .arg(&config)
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            dir.path().join("known_hosts").display()
        ))
        .args(["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"])
        .arg("-W")
        .arg(format!("127.0.0.1:{echo}"))
        .arg("abode.dev")
        .env("ABODE_CONFIG_DIR", platform.config_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    forwarded
        .stdin
        .take()
        .unwrap()
        .write_all(b"through ssh -W\n")
        .unwrap();
    let output = forwarded.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "through ssh -W\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // OpenSSH's -L: a local port forwarded over the SSH connection.
    let local_l = util::free_port();
    let mut tunnel = Command::new("ssh")
        .arg("-F")
        .arg(&config)
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            dir.path().join("known_hosts").display()
        ))
        .args(["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"])
        .args(["-o", "ExitOnForwardFailure=yes", "-N", "-L"])
        .arg(format!("{local_l}:127.0.0.1:{echo}"))
        .arg("abode.dev")
        .env("ABODE_CONFIG_DIR", platform.config_dir())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut through_l = loop {
        if let Ok(stream) = TcpStream::connect(("127.0.0.1", local_l)) {
            break stream;
        }
        assert!(Instant::now() < deadline, "ssh -L never listened");
        assert!(tunnel.try_wait().unwrap().is_none(), "ssh -L exited");
        std::thread::sleep(Duration::from_millis(100));
    };
    through_l.write_all(b"through ssh -L").unwrap();
    let mut got = [0u8; 14];
    through_l.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"through ssh -L");
    drop(through_l);
    tunnel.kill().unwrap();
    tunnel.wait().unwrap();

    // abode port-forward, two connections at once.
    let local = util::free_port();
    let mut forward = platform
        .cmd(&["port-forward", "dev", "--tcp", &format!("{local}:{echo}")])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(forward.stderr.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert!(banner.starts_with("Forwarding 127.0.0.1:"), "{banner}");
    let mut first = TcpStream::connect(("127.0.0.1", local)).unwrap();
    let mut second = TcpStream::connect(("127.0.0.1", local)).unwrap();
    for (stream, text) in [(&mut first, "one"), (&mut second, "two")] {
        stream.write_all(text.as_bytes()).unwrap();
        let mut got = vec![0u8; text.len()];
        stream.read_exact(&mut got).unwrap();
        assert_eq!(got, text.as_bytes());
    }
    drop((first, second));
    forward.kill().unwrap();
    forward.wait().unwrap();

    // Who may connect.
    let member = platform.login_new_user("mem", "member");
    let run = platform.run_as(&member, &["ssh", "alice/dev", "--", "true"], None);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("you may not connect to other users' workspaces"),
        "{run:?}"
    );
    let member_token = abode_client::config::load_session(&member)
        .unwrap()
        .unwrap()
        .token;
    let path = "/workspaces/alice%2Fdev/connect?kind=ssh";
    assert_eq!(http_status(&platform.url, path, Some(&member_token)), 403);
    assert_eq!(http_status(&platform.url, path, None), 401);

    // The audit log: each connection and its end, with its kind.
    let deadline = Instant::now() + Duration::from_secs(10);
    let events = loop {
        let events = platform
            .run(&["audit", "--workspace", "dev", "-o", "json"])
            .ok()
            .json();
        let count = |action: &str, kind: &str| {
            events
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| {
                    e["action"] == action && e["details"].as_str().unwrap_or("").contains(kind)
                })
                .count()
        };
        // abode ssh and OpenSSH (echo, scp, -W, -L); 2 forwarded connections.
        if count("workspace.disconnect", "kind=ssh") >= 4
            && count("workspace.disconnect", "kind=port-forward") >= 2
        {
            assert!(count("workspace.connect", "kind=ssh") >= 4, "{events:#}");
            assert_eq!(
                count("workspace.connect", "kind=port-forward"),
                2,
                "{events:#}"
            );
            break events;
        }
        assert!(
            Instant::now() < deadline,
            "missing audit events: {events:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let connect = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "workspace.connect")
        .unwrap();
    assert_eq!(connect["actor"], "alice", "{connect:#}");
    assert_eq!(connect["target"], "alice/dev", "{connect:#}");

    // A connection is use of the workspace: its last use moves.
    let before = last_used(&platform);
    platform.advance_clock(Duration::from_secs(600));
    platform.run(&["ssh", "dev", "--", "true"]).ok();
    let after = last_used(&platform);
    assert!(after >= before + 600_000, "{before} -> {after}");

    // The agent's tunnel comes back after a server restart, without a build.
    platform.restart_server();
    let run = platform.run(&["ssh", "dev", "--", "echo", "back"]).ok();
    assert_eq!(run.stdout, "back\n");

    // One tunnel per agent token, the newest wins: a second connection with
    // the agent's token takes the tunnel; the agent's own reconnect takes it
    // back and the other is closed cleanly (code 4001); both are logged,
    // and sessions work again.
    let token = agent_token(&home);
    let url = abode_client::connect::websocket_url(
        &platform.url,
        abode_client::connect::AGENT_CONNECT_PATH,
    )
    .unwrap();
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut second, _) = tungstenite::connect(request).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(stream) = second.get_mut() {
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
    }
    let closed = loop {
        match second.read() {
            Ok(tungstenite::Message::Close(frame)) => break frame,
            Ok(_) => continue,
            Err(error) => panic!("the replaced tunnel was not closed: {error}"),
        }
    };
    let closed = closed.expect("a close frame with a code");
    assert_eq!(
        u16::from(closed.code),
        abode_tunnel::CLOSE_REPLACED,
        "{closed:?}"
    );
    let run = platform
        .run(&["ssh", "dev", "--", "echo", "taken back"])
        .ok();
    assert_eq!(run.stdout, "taken back\n");
    let log = platform.server_log();
    assert!(
        log.matches("replacing an older connection with the same agent token")
            .count()
            >= 2,
        "{log}"
    );

    // The host key survives a stop and a start: strict checking passes.
    platform.run(&["stop", "dev"]).ok();
    let run = platform.run(&["ssh", "dev", "--", "true"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("the workspace is not running"),
        "{run:?}"
    );
    platform.run(&["start", "dev"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let ssh = openssh(
        &platform,
        dir.path(),
        "yes",
        &["abode.dev", "--", "echo", "again"],
    );
    assert_eq!(
        String::from_utf8_lossy(&ssh.stdout),
        "again\n",
        "{}",
        String::from_utf8_lossy(&ssh.stderr)
    );
    platform.run(&["delete", "dev"]).ok();
}
