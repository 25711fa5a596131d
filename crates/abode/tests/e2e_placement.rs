//! Host-local workspaces on several servers (issue 46, item 4): two servers
//! on one PostgreSQL database, each with its own data dir and so its own
//! volumes dir. A workspace's `abode_volume` is on the server that built
//! it; every later build lands there, whichever server it is asked of. When
//! that server is gone, the build waits and its log says why, naming it,
//! once; it is never taken by the other server (which would see the volume
//! as deleted outside Terraform). An owner moves the workspace on purpose:
//! without the volume's data its next build is held, with the directory
//! copied over it goes on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use util::{finish, names_in, push_template, require_terraform, Daemon, FreshDatabase, Platform};

/// A protected home volume and nothing else: the lightest workspace whose
/// data is on one machine.
const TEMPLATE: &str = r#"terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "abode_protect" "home" {
  resource_id = abode_volume.home.id
  mode        = "confirm"
}
"#;

/// Each server: one provisioner, and a job lease short enough that a
/// server gone is seen as gone within seconds of its clock.
fn server(database: &FreshDatabase) -> Platform {
    let mut flags = util::FAST_AGENT_FLAGS.to_vec();
    flags.extend(["--job-lease", "6", "--provisioners", "1"]);
    Platform::start_with_metrics(Some(&database.url), &flags)
}

/// Two servers on one database, `alice` signed in on both, the template
/// pushed.
fn two_servers(database: &FreshDatabase) -> (Platform, Platform) {
    let first = server(database);
    let second = server(database);
    first.login_owner();
    second.login_existing_owner();
    push_template(&first, "local", 1, TEMPLATE);
    (first, second)
}

/// The home volumes under a server's volumes dir.
fn volumes(platform: &Platform) -> Vec<String> {
    names_in(&platform.volumes_dir())
        .into_iter()
        .filter(|name| name.starts_with("home-"))
        .collect()
}

/// Creates `dev` through `through` and answers (the server that has its
/// volume, the other one, the volume's name).
fn create_dev<'a>(
    through: &Platform,
    servers: [&'a Platform; 2],
) -> (&'a Platform, &'a Platform, String) {
    through.run(&["create", "dev", "--template", "local"]).ok();
    let [first, second] = servers;
    match (volumes(first).as_slice(), volumes(second).as_slice()) {
        ([volume], []) => (first, second, volume.clone()),
        ([], [volume]) => (second, first, volume.clone()),
        (one, other) => panic!("the volume is on neither or both servers: {one:?} {other:?}"),
    }
}

/// Whether `platform`'s server claimed `dev`'s build `number` (its log's
/// line for it: a server's id stays out of the build log, where a template
/// could pass it for its own output).
fn claimed(platform: &Platform, number: u64) -> bool {
    let build = format!("build{{workspace=alice/dev build_number={number} ");
    platform
        .server_log()
        .lines()
        .any(|line| line.contains(&build) && line.contains("claimed a job"))
}

/// The build log of `dev`'s build `number`, read through `platform`.
fn log_of(platform: &Platform, number: u64) -> String {
    platform
        .run(&["builds", "logs", "dev", &number.to_string()])
        .ok()
        .stdout
}

#[test]
fn every_build_of_a_workspace_lands_on_the_server_that_has_its_volume() {
    require_terraform();
    let database = FreshDatabase::create();
    let (a, b) = two_servers(&database);
    let (home, other, volume) = create_dev(&a, [&a, &b]);
    let home_id = home.server_id();
    assert_eq!(home.show("dev")["host"], home_id.as_str());
    // The dashboard of either server says where it is built.
    let page = other.dashboard_page("alice", "correct horse battery", "/workspaces/alice/dev");
    assert!(
        page.contains(&format!("<dt>Host</dt><dd class=\"mono\">{home_id}</dd>")),
        "{page}"
    );

    // Asked of the other server, whose idle worker is woken first (in its
    // own process, the volume's server only through the database): each
    // build still runs where the volume is, and none is held for a volume
    // "deleted outside Terraform".
    let mut number = 1;
    for transition in ["stop", "start"].repeat(5) {
        number += 1;
        let run = other.run(&[transition, "dev"]);
        assert_eq!(
            run.code,
            Some(0),
            "build #{number} ({transition}) asked of the other server: {run}\n{}",
            log_of(other, number)
        );
        // Ended: what each server did about it is in its log by now.
        assert!(
            claimed(home, number) && !claimed(other, number),
            "build #{number} ran elsewhere:\n{}",
            other.server_log()
        );
    }
    assert_eq!(volumes(home), [volume]);
    assert!(volumes(other).is_empty(), "{:?}", volumes(other));

    // Where it is, as both servers tell it.
    for platform in [home, other] {
        let shown = platform.show("dev");
        assert_eq!(shown["host"], home_id.as_str(), "{shown:#}");
        let text = platform.run(&["show", "dev"]).ok().stdout;
        assert!(text.contains(&format!("Host:        {home_id}")), "{text}");
    }
    let listed = other
        .run(&["provisioner", "list", "-o", "json"])
        .ok()
        .json();
    let hosts: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["host"].as_str().unwrap())
        .collect();
    assert!(hosts.contains(&home_id.as_str()), "{listed:#}");

    // Started on a host that runs: a move would leave its processes there.
    let refused = other.run(&["workspaces", "move", "dev", "--to-host", &other.server_id()]);
    refused.fails_with(1, &["is started on host", "stop it first"]);
    assert_eq!(other.show("dev")["host"], home_id.as_str());
}

#[test]
fn a_build_whose_host_is_gone_waits_saying_so_until_an_owner_moves_it() {
    require_terraform();
    let database = FreshDatabase::create();
    let (a, b) = two_servers(&database);
    let (home, other, volume) = create_dev(&a, [&a, &b]);
    let home_id = home.server_id();
    let other_id = other.server_id();
    let home_volume = home.volumes_dir().join(&volume);
    std::fs::write(home_volume.join("notes.txt"), "kept across the move\n").unwrap();

    // The volume's server dies; by the other's clock, its provisioner's last
    // heartbeat is a lease old at once.
    let (mut home, other) = if std::ptr::eq(home, &a) {
        (a, b)
    } else {
        (b, a)
    };
    home.kill_server();
    other.advance_clock(Duration::from_secs(60));

    // A stop asked of the survivor waits, and its log says for what, once.
    let stopping = other.spawn(&["stop", "dev"]);
    let waiting = format!("waiting for host {home_id}: ");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        // The stop may not be asked for yet: no build #2.
        let log = other.run(&["builds", "logs", "dev", "2"]).stdout;
        if log.contains(&waiting) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "build #2 never said it waits for its host:\n{log}\n{}",
            other.server_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // More rounds of the survivor's keeper, each of which looks at the
    // queue: still one line, the build still pending, nothing made here.
    other.wait_for_passes("keeper", 3);
    let log = log_of(&other, 2);
    assert_eq!(log.matches(&waiting).count(), 1, "{log}");
    let line = log.lines().find(|line| line.contains(&waiting)).unwrap();
    assert!(line.contains("abode workspaces move"), "{line}");
    assert_eq!(other.show("dev")["latest_build"]["status"], "pending");
    assert!(!claimed(&other, 2), "{}", other.server_log());
    assert!(volumes(&other).is_empty());
    let shown = other.run(&["show", "dev"]).ok().stdout;
    assert!(
        shown.contains(&format!("Host:        {home_id}")),
        "{shown}"
    );
    finish(stopping);

    // A move waits for no build: cancel it first.
    other
        .run(&["workspaces", "move", "dev", "--to-host", &other_id])
        .fails_with(1, &["has build #2 pending", "cancel it"]);
    other.run(&["builds", "cancel", "dev", "2"]).ok();
    other
        .run(&["workspaces", "move", "dev", "--to-host", "nowhere"])
        .fails_with(1, &["no provisioner of host nowhere is connected"]);
    let moved = other
        .run(&["workspaces", "move", "dev", "--to-host", &other_id])
        .ok();
    assert!(
        moved
            .stdout
            .contains(&format!("Moved dev from host {home_id} to host {other_id}")),
        "{moved}"
    );
    assert_eq!(other.show("dev")["host"], other_id.as_str());
    let audit = other
        .run(&["audit", "--action", "workspace.move", "--output", "json"])
        .ok()
        .json();
    let details = audit[0]["details"].as_str().unwrap_or_default();
    assert_eq!(
        details,
        format!("from={home_id} to={other_id}"),
        "{audit:#}"
    );

    // The data did not come along: the start finds no volume here, and the
    // guard holds it rather than make an empty home unasked.
    let held = other.run(&["start", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(
        format!("{}{}", held.stdout, held.stderr).contains("deleted outside Terraform"),
        "{held}"
    );
    assert!(claimed(&other, 3), "{}", other.server_log());
    other.run(&["builds", "cancel", "dev", "3"]).ok();
    assert!(volumes(&other).is_empty());

    // Copied into this server's volumes dir under its name, it is found.
    copy_preserving(&home_volume, &other.volumes_dir().join(&volume));
    other.run(&["start", "dev"]).ok();
    assert_eq!(
        std::fs::read_to_string(other.volumes_dir().join(&volume).join("notes.txt")).unwrap(),
        "kept across the move\n"
    );
    assert_eq!(other.show("dev")["host"], other_id.as_str());

    // The old server comes back: the workspace is not its own any more, and
    // the next build still runs where it was moved.
    home.start_server_again();
    other.run(&["stop", "dev"]).ok();
    assert!(claimed(&other, 5), "{}", other.server_log());
    assert!(!claimed(&home, 5), "{}", home.server_log());
}

/// External daemons are hosts too, each with its own data dir and volumes
/// dir: the daemon that built a workspace builds all of it, and while it is
/// gone its builds wait, named by its id.
#[test]
fn a_daemon_that_built_a_workspace_builds_it_and_its_absence_is_told() {
    require_terraform();
    // API-only: every build goes to a daemon.
    let platform =
        Platform::start_with_metrics(None, &["--provisioners", "0", "--job-lease", "10"]);
    platform.login_owner();
    push_template(&platform, "local", 1, TEMPLATE);
    let key = util::create_key(&platform, "builders", &[]);
    let mut d1 = Daemon::start(&platform, "d1", &key, &["--concurrency", "1"]);
    let mut d2 = Daemon::start(&platform, "d2", &key, &["--concurrency", "1"]);
    let id_of = |daemon: &Daemon| {
        std::fs::read_to_string(daemon.data_dir.join("provisioner-id"))
            .unwrap()
            .trim()
            .to_string()
    };
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let (home, away) = match (d1.volumes().len(), d2.volumes().len()) {
        (1, 0) => (&mut d1, &mut d2),
        (0, 1) => (&mut d2, &mut d1),
        counts => panic!("the volume is on neither or both daemons: {counts:?}"),
    };
    let home_id = id_of(home);
    assert_eq!(platform.show("dev")["host"], home_id.as_str());

    for (number, transition) in (2..).zip(["stop", "start", "stop", "start"]) {
        let run = platform.run(&[transition, "dev"]);
        assert_eq!(run.code, Some(0), "build #{number} ({transition}): {run}");
        let log = log_of(&platform, number);
        assert!(
            log.contains(&format!(
                "claimed by the external provisioner builders/{home_id}"
            )),
            "build #{number} ran elsewhere:\n{log}"
        );
    }
    assert_eq!(home.volumes().len(), 1);
    assert!(away.volumes().is_empty(), "{:?}", away.volumes());

    // Gone (its last acquire a lease old by the server's clock): the next
    // build waits for it, and says so, naming it, while the other daemon
    // polls on.
    home.kill();
    platform.advance_clock(Duration::from_secs(60));
    let stopping = platform.spawn(&["stop", "dev"]);
    let waiting = format!("waiting for host {home_id}: ");
    let deadline = Instant::now() + Duration::from_secs(90);
    while !platform
        .run(&["builds", "logs", "dev", "6"])
        .stdout
        .contains(&waiting)
    {
        assert!(
            Instant::now() < deadline,
            "build #6 never said it waits for its daemon:\n{}",
            platform.server_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    platform.wait_for_passes("keeper", 3);
    let log = log_of(&platform, 6);
    assert_eq!(log.matches(&waiting).count(), 1, "{log}");
    assert!(!log.contains("claimed by"), "{log}");
    assert_eq!(platform.show("dev")["latest_build"]["status"], "pending");
    assert!(away.volumes().is_empty());
    finish(stopping);
}

/// `cp -a`: the volume as it is, owners and modes kept.
fn copy_preserving(from: &Path, to: &Path) {
    let parent: PathBuf = to.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&parent).unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}
