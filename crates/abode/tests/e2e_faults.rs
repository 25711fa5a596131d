//! Faults below the API (issue 26): the database going away under a
//! running build. Its log lines are kept and written when the database
//! comes back, in order; nothing of the build is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

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
    let progress_file = platform.outside().join("progress");
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
    let mut numbers: Vec<u32> = log
        .lines()
        .filter_map(|line| line.split("(local-exec): line-").nth(1))
        .map(|number| number.trim().parse().unwrap())
        .collect();
    // A write the cut interrupted after its commit is kept and written
    // again (the store numbers lines itself, so it cannot tell): a line at
    // the cut may show twice, next to itself. Nothing may be missing or out
    // of order.
    let written = numbers.len();
    numbers.dedup();
    assert!(
        written - numbers.len() <= 1,
        "more than the line at the cut twice:\n{log}"
    );
    assert_eq!(numbers, (1..=20).collect::<Vec<u32>>(), "{log}");
}

/// Unmounts a tmpfs when dropped (after the platform using it, declared
/// after it).
struct Tmpfs(std::rc::Rc<std::cell::RefCell<Option<std::path::PathBuf>>>);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Some(path) = self.0.borrow_mut().take() {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&path)
                .status();
        }
    }
}

fn mount_tmpfs(path: &std::path::Path, size: &str) {
    std::fs::create_dir_all(path).unwrap();
    let status = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(path)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cannot mount a tmpfs at {} (this test fills a real filesystem: run it as root)",
        path.display()
    );
}

fn root_volume_file(platform: &Platform, name: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(platform.volumes_dir())
        .ok()?
        .map(|entry| entry.unwrap().path().join(name))
        .find(|path| path.exists())
}

/// A data dir that fills in the middle of an apply (SQLite, a real tmpfs):
/// the server keeps serving, a cancel of another build is acted on, the
/// state waits in Terraform until space returns, and then every worker
/// claims again and the next start creates nothing that already exists.
#[test]
fn a_full_data_dir_loses_nothing_and_the_server_recovers_when_space_returns() {
    require_terraform();
    let mounted = Tmpfs(Default::default());
    let cell = mounted.0.clone();
    let platform = Platform::start_prepared(
        None,
        &["--min-free-disk", "0", "--provisioners", "3"],
        |data_dir| {
            mount_tmpfs(data_dir, "192m");
            *cell.borrow_mut() = Some(data_dir.to_path_buf());
        },
    );
    platform.login_owner();
    for (name, fixture_name) in [
        ("fill", "fill"),
        ("sleepy", "sleepy"),
        ("minimal", "minimal"),
    ] {
        let dir = fixture(fixture_name);
        platform
            .run(&["templates", "push", name, "-d", dir.to_str().unwrap()])
            .ok();
    }
    // A long build to cancel while the disk is full.
    let slow = platform.spawn(&[
        "create",
        "slow",
        "--template",
        "sleepy",
        "--parameter",
        "seconds=120",
    ]);
    wait_until("the slow apply", || {
        platform
            .run(&["builds", "logs", "slow", "1"])
            .stdout
            .contains("Provisioning with 'local-exec'")
    });

    // The apply fills the disk; the state it then hands the server cannot
    // be written.
    let fill = platform.spawn(&["create", "full", "--template", "fill"]);
    wait_until("the apply's state meeting a full disk", || {
        platform
            .server_log()
            .contains("cannot store a state now (disk full)")
    });
    // It still serves, and a cancel is acted on at once.
    platform.run(&["list"]).ok();
    let _ = platform.run(&["builds", "cancel", "slow", "1"]);

    // Space returns.
    let filler = root_volume_file(&platform, "fill").expect("the fill file");
    std::fs::remove_file(&filler).unwrap();
    let build = platform.wait_for_build_status("full", "succeeded");
    assert_eq!(build["number"], 1);
    let log = platform.run(&["builds", "logs", "full", "1"]).ok().stdout;
    assert!(log.contains("disk full"), "{log}");
    platform.wait_for_build_status("slow", "canceled");
    util::finish(fill);
    util::finish(slow);

    // Every worker claims again: three builds at once succeed.
    let creates: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| platform.spawn(&["create", name, "--template", "minimal"]))
        .collect();
    for name in ["a", "b", "c"] {
        platform.wait_for_build_status(name, "succeeded");
    }
    creates.into_iter().for_each(util::finish);
    // What the filled apply made is in the stored state: the stop destroys
    // it (the volume stays), and creates nothing.
    let stopped = platform.run(&["stop", "full"]).ok();
    assert!(
        stopped.stdout.contains("0 added") && stopped.stdout.contains("1 destroyed"),
        "{stopped}"
    );
}

/// Free bytes of the filesystem holding `path` (`df`).
fn free_bytes(path: &std::path::Path) -> u64 {
    let output = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn gauge(scrape: &str, name: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|line| line.starts_with(name) && line[name.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// Below `--min-free-disk`, a server says so (its log, a metric), starts no
/// build and tells the build that waits why; when space returns, it starts
/// it.
#[test]
fn below_the_minimum_free_space_no_build_starts_until_space_returns() {
    require_terraform();
    let mounted = Tmpfs(Default::default());
    let cell = mounted.0.clone();
    let platform = Platform::start_prepared_with_metrics(
        None,
        &["--min-free-disk", "64MiB", "--job-lease", "2"],
        |data_dir| {
            mount_tmpfs(data_dir, "192m");
            *cell.borrow_mut() = Some(data_dir.to_path_buf());
        },
    );
    platform.login_owner();
    let dir = fixture("minimal");
    platform
        .run(&["templates", "push", "minimal", "-d", dir.to_str().unwrap()])
        .ok();
    wait_until("the free space measured", || {
        gauge(&platform.scrape(), "abode_data_dir_low") == Some(0.0)
    });

    // Filled to 32 MiB free: the server says so.
    let filler = platform.data_dir().join("filler");
    let keep = 32 * 1024 * 1024;
    let size = free_bytes(&platform.data_dir()).saturating_sub(keep);
    let filled = std::process::Command::new("fallocate")
        .args(["-l", &size.to_string()])
        .arg(&filler)
        .status()
        .unwrap();
    assert!(filled.success());
    wait_until("the server noticing", || {
        gauge(&platform.scrape(), "abode_data_dir_low") == Some(1.0)
    });
    assert!(platform
        .server_log()
        .contains("the data dir is low on space: this server starts no build"));

    // A build asked now waits, and its log says why.
    let create = platform.spawn(&["create", "dev", "--template", "minimal"]);
    wait_until("the waiting build told why", || {
        platform
            .run(&["builds", "logs", "dev", "1"])
            .stdout
            .contains("starts no build while its data dir has")
    });
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "pending", "{build:#}");

    // Space returns: the build starts and succeeds.
    std::fs::remove_file(&filler).unwrap();
    platform.wait_for_build_status("dev", "succeeded");
    assert_eq!(gauge(&platform.scrape(), "abode_data_dir_low"), Some(0.0));
    util::finish(create);
}
