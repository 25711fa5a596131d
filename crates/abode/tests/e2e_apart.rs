//! Workspaces apart on one host (issue 46), tested as the neighbour: one
//! member's workspace tries to reach what another's listens on, and what
//! the host keeps on its loopback (a database without a password, say).
//! Each workspace has a network of its own: its loopback is its own, and of
//! the host it reaches only the server's access URL, which its agent dials.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::Duration;

use util::{require_terraform, Platform};

/// The port a workspace's own service listens on, in every workspace.
const SERVICE_PORT: u16 = 8765;

/// Listens on the workspace's loopback and answers each connection with
/// its workspace's name, until a connection says `quit`.
const SERVICE: &str = r#"
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(8)
server.settimeout(120)
while True:
    conn, _ = server.accept()
    said = conn.recv(64)
    conn.sendall(sys.argv[2].encode() + b"\n")
    conn.close()
    if said.startswith(b"quit"):
        break
"#;

/// Tries each `host:port` argument and prints one line per target: what it
/// answered, or `refused`/`unreachable` and why.
const PROBE: &str = r#"
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        conn = socket.create_connection((host, int(port)), timeout=5)
        conn.sendall(b"hello\n")
        conn.settimeout(5)
        said = conn.recv(64).decode(errors="replace").strip() or "(connected)"
        print(target, "answered", said)
    except ConnectionRefusedError:
        print(target, "refused")
    except Exception as error:
        print(target, "unreachable", type(error).__name__)
"#;

fn probe(platform: &Platform, workspace: &str, targets: &[String]) -> String {
    let mut args = vec!["ssh", workspace, "--", "python3", "-c", PROBE];
    args.extend(targets.iter().map(String::as_str));
    platform.run(&args).ok().stdout
}

fn line_for<'a>(said: &'a str, target: &str) -> &'a str {
    said.lines()
        .find(|line| line.starts_with(&format!("{target} ")))
        .unwrap_or_else(|| panic!("no line for {target} in:\n{said}"))
}

/// Issue 46: every workspace shared the host's network, so a member's
/// workspace reached another's loopback services and the host's. Now
/// workspace `two` is refused `one`'s service and the host's loopback
/// service (also through its network's gateway), while `one` reaches its
/// own service and both reach the server's access URL.
#[test]
fn a_workspace_reaches_neither_anothers_ports_nor_the_hosts_loopback() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    for name in ["one", "two"] {
        platform.run(&["create", name, "--template", "local"]).ok();
        platform.wait_for_agent(name, "ready", Duration::from_secs(60));
    }
    // The host's own loopback service: it answers whoever connects.
    let host_service = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host_service.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in host_service.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ = std::io::Write::write_all(&mut conn, b"host\n");
        }
    });
    let server_port = platform
        .url
        .rsplit(':')
        .next()
        .and_then(|port| port.trim_end_matches('/').parse::<u16>().ok())
        .expect("the server's port");
    let own = format!("127.0.0.1:{SERVICE_PORT}");
    std::thread::scope(|scope| {
        let service = scope.spawn(|| {
            platform
                .run(&[
                    "ssh",
                    "one",
                    "--",
                    "python3",
                    "-c",
                    SERVICE,
                    &SERVICE_PORT.to_string(),
                    "one",
                ])
                .ok()
        });
        // Observed, not slept on: `one` itself reaches its service first.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let said = probe(&platform, "one", std::slice::from_ref(&own));
            if line_for(&said, &own).contains("answered one") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "one's service never answered one:\n{said}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let targets = [
            own.clone(),
            format!("127.0.0.1:{host_port}"),
            format!("10.0.2.2:{host_port}"),
            format!("127.0.0.1:{server_port}"),
        ];
        let said = probe(&platform, "two", &targets);
        assert!(
            !line_for(&said, &targets[0]).contains("answered"),
            "two reached one's service:\n{said}"
        );
        for host in &targets[1..3] {
            assert!(
                !line_for(&said, host).contains("answered"),
                "two reached the host's loopback service at {host}:\n{said}"
            );
        }
        assert!(
            line_for(&said, &targets[3]).contains("answered"),
            "two cannot reach the server's access URL:\n{said}"
        );
        // `one`'s service is still there: it was not down, it was apart.
        let said = probe(&platform, "one", std::slice::from_ref(&own));
        assert!(line_for(&said, &own).contains("answered one"), "{said}");
        let mut args = vec!["ssh", "one", "--", "python3", "-c"];
        let quit_script = format!(
            "import socket; c = socket.create_connection(('127.0.0.1', {SERVICE_PORT})); c.sendall(b'quit'); c.recv(64)"
        );
        args.push(&quit_script);
        platform.run(&args).ok();
        service.join().unwrap();
    });
    let holders = network_holders(&platform);
    assert_eq!(holders.len(), 2, "one network per workspace: {holders:?}");
    platform.run(&["stop", "one"]).ok();
    platform.run(&["stop", "two"]).ok();
    util::assert_no_processes_left(&platform, "after the stops");
    // The networks end with their workspaces' last processes: their holders
    // and the slirp4netns attached to each.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<u32> = holders
            .iter()
            .copied()
            .filter(|holder| {
                std::path::Path::new(&format!("/proc/{holder}")).exists() || slirp_for(*holder)
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the networks of {left:?} outlived their workspaces"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(network_holders(&platform).is_empty());
}

/// The pids holding this server's workspace networks (its records).
fn network_holders(platform: &Platform) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(platform.data_dir().join("networks")) else {
        return Vec::new();
    };
    entries
        .map(|entry| {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let identity = text.lines().next().unwrap();
            identity.split('-').next().unwrap().parse().unwrap()
        })
        .collect()
}

/// Whether a slirp4netns runs for the namespace of `holder`.
fn slirp_for(holder: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            return false;
        };
        let args: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        args.first()
            .is_some_and(|program| program.ends_with(b"slirp4netns"))
            && args.iter().any(|arg| *arg == holder.to_string().as_bytes())
    })
}

/// A template whose Terraform lists the volumes dir and reads a file in
/// another workspace's home, and writes what it got where the test reads.
fn peeking_template(victim_home: &str, report: &str) -> String {
    format!(
        r#"
resource "terraform_data" "peek" {{
  provisioner "local-exec" {{
    command = <<-EOT
      {{
        echo "uid=$(id -u)"
        echo "list:"; ls -a "$ABODE_VOLUMES_DIR" 2>&1
        echo "read:"; cat '{victim_home}/diary' 2>&1
        echo "home:"; ls -a '{victim_home}' 2>&1
        echo "end"
      }} > '{report}'
    EOT
  }}
}}
"#
    )
}

fn uid_in(platform: &Platform, workspace: &str) -> u32 {
    let said = platform.run(&["ssh", workspace, "--", "id", "-u"]).ok();
    said.stdout.trim().parse().expect("a uid")
}

/// Issue 46: every workspace ran as one user (`nobody`), and Terraform saw
/// every volume. Now each workspace runs as a uid of its own from the
/// default range (not Terraform's), its home is its uid's and private, the
/// other workspace cannot read it, and a hostile template's Terraform can
/// neither list the volumes nor read another workspace's home.
#[test]
fn each_workspace_runs_as_its_own_uid_and_terraform_reads_no_home() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    let mut homes = Vec::new();
    for name in ["one", "two"] {
        let before: std::collections::BTreeSet<_> = std::fs::read_dir(platform.volumes_dir())
            .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
            .unwrap_or_default();
        platform.run(&["create", name, "--template", "local"]).ok();
        platform.wait_for_agent(name, "ready", Duration::from_secs(60));
        let home = std::fs::read_dir(platform.volumes_dir())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| !before.contains(path))
            .expect("the workspace's volume");
        homes.push(home);
    }
    let (one, two) = (uid_in(&platform, "one"), uid_in(&platform, "two"));
    let nobody = nix_uid("nobody");
    for uid in [one, two] {
        assert!(
            (200_000..=299_999).contains(&uid),
            "uid {uid} is not from the range"
        );
        assert_ne!(Some(uid), nobody, "a workspace runs as Terraform's user");
    }
    assert_ne!(one, two, "two workspaces share a uid");
    for (home, uid) in homes.iter().zip([one, two]) {
        let meta = std::fs::metadata(home).unwrap();
        assert_eq!(meta.uid(), uid, "{} is not its workspace's", home.display());
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o700,
            "{}",
            home.display()
        );
    }
    platform
        .run(&[
            "ssh",
            "one",
            "--",
            "sh",
            "-c",
            "echo private > \"$HOME/diary\"",
        ])
        .ok();
    // The uid stays with the workspace across a stop and a start.
    platform.run(&["stop", "one"]).ok();
    platform.run(&["start", "one"]).ok();
    platform.wait_for_agent("one", "ready", Duration::from_secs(60));
    assert_eq!(uid_in(&platform, "one"), one);

    // The neighbour workspace, as its shell.
    let victim = homes[0].display().to_string();
    let peek = platform.run(&["ssh", "two", "--", "cat", &format!("{victim}/diary")]);
    assert_ne!(peek.code, Some(0), "two read one's diary: {peek}");
    assert!(!peek.stdout.contains("private"), "{peek}");

    // A hostile template's Terraform.
    let report = platform.outside().join("peek.txt");
    let dir = platform.root().join("peek");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.tf"),
        peeking_template(&victim, report.to_str().unwrap()),
    )
    .unwrap();
    platform
        .run(&["templates", "push", "peek", "-d", dir.to_str().unwrap()])
        .ok();
    platform
        .run(&["create", "peeker", "--template", "peek"])
        .ok();
    let seen = std::fs::read_to_string(&report).unwrap();
    assert!(seen.contains("end"), "{seen}");
    assert!(
        !seen.contains("private"),
        "Terraform read one's diary:\n{seen}"
    );
    let listed = seen
        .split("list:")
        .nth(1)
        .and_then(|rest| rest.split("read:").next())
        .unwrap_or_default();
    for home in &homes {
        let name = home.file_name().unwrap().to_str().unwrap();
        assert!(
            !listed.contains(name),
            "Terraform listed the volumes:\n{seen}"
        );
    }
    platform.run(&["stop", "one"]).ok();
    platform.run(&["stop", "two"]).ok();
    util::assert_no_processes_left(&platform, "after the stops");
}

fn nix_uid(name: &str) -> Option<u32> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == name).then(|| fields.nth(1)?.parse().ok())?
    })
}

/// `abode server FLAGS` on a fresh data dir (or `data_dir`): its exit code
/// and its error's line (clap's first, or the server's last).
fn server_refusal(flags: &[&str], data_dir: Option<&std::path::Path>) -> (Option<i32>, String) {
    let scratch = tempfile::tempdir().unwrap();
    let data_dir = data_dir.unwrap_or(scratch.path());
    let output = std::process::Command::new(util::abode_bin())
        .args(["server", "--address", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(flags)
        .env_remove("ABODE_DATABASE_URL")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let line = stderr
        .lines()
        .find(|line| line.starts_with("error: invalid value"))
        .or_else(|| stderr.lines().last())
        .unwrap_or_default()
        .to_string();
    (output.status.code(), line)
}

/// Bad `--workspace-uids` and `--workspace-network` are refused at start,
/// one line each, before anything is made; so is a range that would leave
/// out a uid a workspace already has.
#[test]
fn bad_workspace_uids_and_networks_are_refused_at_start_in_one_line() {
    let nobody = nix_uid("nobody").unwrap_or(65534);
    let around_nobody = format!("{}-{}", nobody - 50, nobody + 49);
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--workspace-uids", "200000-200010"],
            &["holds 11 uids, fewer than 100"],
        ),
        (&["--workspace-uids", "0-1000"], &["expected FIRST-LAST"]),
        (&["--workspace-uids", "300-200"], &["expected FIRST-LAST"]),
        (&["--workspace-uids", "lots"], &["expected FIRST-LAST"]),
        (
            &["--workspace-uids", &around_nobody],
            &[&format!("holds uid {nobody}")],
        ),
        (&["--workspace-uids", "0-99"], &["expected FIRST-LAST"]),
        (&["--workspace-network", "bridge"], &["bridge"]),
        (
            &[
                "--terraform-sandbox",
                "off",
                "--workspace-network",
                "isolated",
            ],
            &["--workspace-network isolated needs the workspace sandbox"],
        ),
    ];
    for (flags, needles) in cases {
        let (code, last) = server_refusal(flags, None);
        assert_ne!(code, Some(0), "{flags:?} started");
        for needle in *needles {
            assert!(last.contains(needle), "{flags:?}: {last}");
        }
    }

    // A workspace has a uid of the default range: a range without it is refused.
    require_terraform();
    let mut platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "one", "--template", "local"]).ok();
    platform.run(&["stop", "one"]).ok();
    platform.kill_server();
    let (code, last) = server_refusal(
        &["--workspace-uids", "300000-300099"],
        Some(&platform.data_dir()),
    );
    assert_ne!(code, Some(0));
    assert!(
        last.contains("1 workspaces already have uids outside it (e.g. 200000)"),
        "{last}"
    );
}
