//! Faults below the API (issue 26): the database going away under a
//! running build. Its log lines are kept and written when the database
//! comes back, in order; nothing of the build is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use util::{fixture, require_terraform, FreshDatabase, Platform};

/// A TCP proxy in front of PostgreSQL that can be cut (every connection
/// reset, new ones refused) and restored: the database unreachable from the
/// server, as a network partition or a database restart makes it.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (accept_cut, accept_open) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if accept_cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let mut open = accept_open.lock().unwrap();
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy { port, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// `url` (postgres://USER@HOST:PORT/DB) through the proxy, and the
/// database's own `host:port`.
fn through(url: &str, proxy_port: u16) -> (String, String) {
    let after_scheme = url.find("://").unwrap() + 3;
    let at = url[after_scheme..]
        .find('@')
        .map_or(after_scheme, |at| after_scheme + at + 1);
    let end = url[at..].find('/').map_or(url.len(), |slash| at + slash);
    let target = url[at..end].to_string();
    let proxied = format!("{}127.0.0.1:{proxy_port}{}", &url[..at], &url[end..]);
    (proxied, target)
}

fn progress(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

#[track_caller]
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 90 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn log_lines_written_while_the_database_is_away_arrive_in_order() {
    require_terraform();
    let database = FreshDatabase::create();
    let (_, target) = through(&database.url, 0);
    let proxy = Proxy::start(target);
    let (url, _) = through(&database.url, proxy.port);
    let platform = Platform::start_on(Some(&url), util::FAST_AGENT_FLAGS);
    platform.login_owner();
    let template = fixture("chatty");
    platform
        .run(&[
            "templates",
            "push",
            "chatty",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    let progress_file = platform.root().join("progress");
    let create = platform.spawn(&[
        "create",
        "dev",
        "--template",
        "chatty",
        "--parameter",
        &format!("progress={}", progress_file.display()),
    ]);
    wait_until("the apply printing", || progress(&progress_file) >= 3);

    // The database goes away while the apply prints; the server says it
    // keeps the lines it cannot write.
    proxy.cut();
    wait_until("the server keeping lines", || {
        platform
            .server_log()
            .contains("cannot write a build log line now; it is kept")
    });
    let during = progress(&progress_file);
    wait_until("lines printed while it is away", || {
        progress(&progress_file) >= during + 4
    });
    proxy.restore();

    let build = platform.wait_for_build_status("dev", "succeeded");
    assert_eq!(build["number"], 1);
    util::finish(create);
    let log = platform.run(&["builds", "logs", "dev", "1"]).ok().stdout;
    let numbers: Vec<u32> = log
        .lines()
        .filter_map(|line| line.split("(local-exec): line-").nth(1))
        .map(|number| number.trim().parse().unwrap())
        .collect();
    assert_eq!(numbers, (1..=20).collect::<Vec<u32>>(), "{log}");
}
