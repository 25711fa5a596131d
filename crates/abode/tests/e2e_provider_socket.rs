//! Only Terraform can talk to the abode provider while a build runs: the
//! provider serves its RPCs on a unix socket in a private directory, with no
//! TCP port any local user could reach (issue 17's defect: it listened on
//! 127.0.0.1 and accepted TLS clients without a certificate).
//!
//! The test catches the real provider process of a real build in the middle of
//! its apply, looks at its sockets, and has a process of another uid (one
//! that is neither the server's nor Terraform's, when the test runs as root
//! and can arrange it) try to connect. Terraform runs in a sandbox (as
//! `nobody` when the server is root), whose `/tmp`, where the socket is, no
//! other process sees: the test looks at it through `/proc/<provider>/root`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use util::{assert_no_processes_left, finish, fixture, require_terraform, Platform};

/// The user sandboxed Terraform runs as under a root server (the default).
const NOBODY: u32 = 65534;
/// The unprivileged account the other caller runs as.
const OTHER: u32 = 65533;

#[test]
fn another_user_cannot_reach_the_provider_of_a_running_build() {
    require_terraform();
    let mut flags = util::FAST_AGENT_FLAGS.to_vec();
    flags.extend(["--provisioners", "1", "--cancel-grace", "5"]);
    let platform = Platform::start_with(&flags);
    platform.login_owner();
    let template = fixture("provider-busy");
    platform
        .run(&[
            "templates",
            "push",
            "busy",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    let create = platform.spawn(&["create", "dev", "--template", "busy"]);

    let provider = wait_for_provider_during_apply(&platform);
    let sockets = socket_inodes(provider);
    assert!(
        tcp_inodes().is_disjoint(&sockets),
        "the provider (pid {provider}) has a TCP socket"
    );
    let socket = listening_unix_socket(&sockets)
        .unwrap_or_else(|| panic!("the provider (pid {provider}) listens on no unix socket"));
    // The socket's path is in the provider's own mount namespace.
    let socket = PathBuf::from(format!("/proc/{provider}/root{}", socket.display()));
    let dir = socket.parent().unwrap().to_path_buf();
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let owner = if uid == 0 { NOBODY } else { uid };
    for (path, mode) in [(&dir, 0o700), (&socket, 0o600)] {
        let meta = std::fs::metadata(path).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o777,
            mode,
            "{}",
            path.display()
        );
        assert_eq!(
            meta.uid(),
            owner,
            "{} belongs to Terraform's user",
            path.display()
        );
    }

    // The socket is live: the server's own user reaches it.
    std::os::unix::net::UnixStream::connect(&socket).unwrap();
    if uid == 0 {
        let refused = connect_as(OTHER, &socket);
        assert_eq!(
            refused,
            "PermissionError",
            "uid {OTHER} connecting to {}",
            socket.display()
        );
    } else {
        eprintln!(
            "running as uid {uid}, not root: a connection from another uid was not tried (the directory's mode 0700 was checked)"
        );
    }

    platform.run(&["builds", "cancel", "dev", "1"]).ok();
    platform.wait_for_build_status("dev", "canceled");
    finish(create);
    assert_no_processes_left(&platform, "after the cancel");
    assert!(!dir.exists(), "the provider left {} behind", dir.display());
}

/// The abode provider of the build, once the apply's local-exec holds it open.
fn wait_for_provider_during_apply(platform: &Platform) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let applying = platform
            .run(&["builds", "logs", "dev", "1"])
            .stdout
            .contains("slow: Provisioning with 'local-exec'");
        // The process serving the provider: its launcher (`--launch-terraform`),
        // or one Terraform started.
        let provider = platform.spawned_processes().into_iter().find(|pid| {
            let named = std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
                exe.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("terraform-provider-abode"))
            });
            named && listening_unix_socket(&socket_inodes(*pid)).is_some()
        });
        if let (true, Some(pid)) = (applying, provider) {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no abode provider was seen during the apply:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The inodes of a process's sockets (`socket:[N]` in /proc/PID/fd).
fn socket_inodes(pid: u32) -> HashSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?.to_owned();
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Every TCP socket's inode on this machine (IPv4 and IPv6).
fn tcp_inodes() -> HashSet<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| line.split_whitespace().nth(9)?.parse().ok())
                .collect::<Vec<u64>>()
        })
        .collect()
}

/// The path of the listening unix socket among `inodes` (/proc/net/unix: flags
/// 00010000 is `__SO_ACCEPTCON`, a listening socket).
fn listening_unix_socket(inodes: &HashSet<u64>) -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let inode: u64 = fields.get(6)?.parse().ok()?;
        let listening = *fields.get(3)? == "00010000";
        let path = fields.get(7)?;
        (listening && inodes.contains(&inode)).then(|| PathBuf::from(path))
    })
}

/// Tries to connect to `socket` as `uid`; returns Python's name for the
/// outcome (`connected`, or the exception: `PermissionError` when refused).
fn connect_as(uid: u32, socket: &Path) -> String {
    let probe = "import socket, sys\n\
                 s = socket.socket(socket.AF_UNIX)\n\
                 try:\n    s.connect(sys.argv[1]); print('connected')\n\
                 except OSError as e:\n    print(type(e).__name__)\n";
    let output = Command::new("/usr/bin/python3")
        .args(["-c", probe])
        .arg(socket)
        .uid(uid)
        .gid(uid)
        .output()
        .expect("/usr/bin/python3 (installed by scripts/bootstrap.sh) runs the probe");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
