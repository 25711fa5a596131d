//! External provisioner daemons (`abode provisioner start`) against a real
//! API-only server, real Terraform and the real provider: the daemon runs
//! the builds, the server judges their plans (a held plan is confirmed and
//! applied exactly, by a daemon, after the daemon archived the volume it
//! replaces as the server's snapshot record), a cancel reaches the daemon, a key's tags
//! bind its daemons, a deleted key stops them, and a daemon killed in the
//! middle of an apply loses nothing: the state it wrote halfway was already
//! uploaded, its build is failed naming it, and its restart stores what the
//! orphaned Terraform finished.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use util::{
    create_key, fixture, names_in, printed_digest, repo_root, require_terraform, Daemon, Platform,
};

/// An API-only server: every build must go to a daemon. The lease is long
/// enough that a daemon whose heartbeat stalls for a few seconds on a
/// loaded machine keeps its build; where a lease must run out, the test
/// moves the server's clock past it.
const API_ONLY: &[&str] = &["--provisioners", "0", "--job-lease", "10"];

fn push(platform: &Platform, name: &str, dir: &Path, extra: &[&str]) {
    let mut args = vec!["templates", "push", name, "-d", dir.to_str().unwrap()];
    args.extend(extra);
    platform.run(&args).ok();
}

fn stored_state(platform: &Platform, workspace: &str) -> String {
    let client = platform.client_for(&platform.config_dir());
    String::from_utf8(client.workspace_state(workspace).unwrap_or_default()).unwrap()
}

/// A build's log so far (empty while the build does not exist yet).
fn build_log(platform: &Platform, workspace: &str, number: &str) -> String {
    platform.run(&["builds", "logs", workspace, number]).stdout
}

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_daemon_runs_the_builds_and_the_server_judges_them() {
    require_terraform();
    let platform = Platform::start_with(API_ONLY);
    platform.login_owner();
    let key = create_key(&platform, "builders", &[]);
    let mut daemon = Daemon::start(&platform, "d1", &key, &["--concurrency", "2"]);
    push(
        &platform,
        "local",
        &repo_root().join("examples/local-workspace"),
        &[],
    );

    // The build runs on the daemon: the volume is under its volumes dir,
    // none under the server's.
    platform.run(&["create", "dev", "--template", "local"]).ok();
    assert_eq!(daemon.volumes().len(), 1, "{}", daemon.log());
    assert!(daemon.volumes()[0].starts_with("home-"));
    assert!(names_in(&platform.volumes_dir()).is_empty());
    let log = build_log(&platform, "dev", "1");
    assert!(
        log.contains("claimed by the external provisioner builders/d1-"),
        "{log}"
    );
    assert!(log.contains("workspace agent(s): main[0]"), "{log}");

    // Listed with its two slots.
    let listed = platform
        .run(&["provisioner", "list", "-o", "json"])
        .ok()
        .json();
    let external: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "external")
        .collect();
    assert_eq!(external.len(), 2, "{listed:#}");
    assert!(external.iter().all(|p| p["status"] == "connected"));
    // `provisioner:KEY_ID/KEY/ID`: the key's id holds the leases.
    let server = external[0]["server"].as_str().unwrap();
    assert!(
        server.starts_with("provisioner:") && server.contains("/builders/d1-"),
        "{server}"
    );

    // A version that replaces the protected volume: the server holds the
    // plan the daemon made; confirmed, a daemon applies exactly that plan.
    let renamed = platform.root().join("renamed");
    util::copy_dir(&repo_root().join("examples/local-workspace"), &renamed);
    let main_tf = fs::read_to_string(renamed.join("main.tf")).unwrap();
    fs::write(
        renamed.join("main.tf"),
        util::name_not_kept(&main_tf).replace("name = \"home-${", "name = \"home2-${"),
    )
    .unwrap();
    push(&platform, "local", &renamed, &["--activate"]);
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("Nothing was applied"), "{held}");
    assert!(daemon.volumes()[0].starts_with("home-"));
    let old_home = daemon.data_dir.join("volumes").join(&daemon.volumes()[0]);
    fs::write(
        old_home.join("notes.txt"),
        "written on the daemon's machine\n",
    )
    .unwrap();
    let digest = printed_digest(&held);
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .ok();
    assert_eq!(daemon.volumes().len(), 1);
    assert!(
        daemon.volumes()[0].starts_with("home2-"),
        "{:?}",
        daemon.volumes()
    );
    let log = build_log(&platform, "dev", "2");
    assert!(log.contains("applying the saved plan"), "{log}");
    // The daemon archived the old home before it applied, and the server
    // keeps it as a snapshot record, whose export verifies and holds the
    // file as it was.
    assert!(
        log.contains(
            "snapshot of abode_volume.home: 1 files, 32 bytes archived as retained record"
        ),
        "{log}"
    );
    let snapshot = snapshot_in(&platform, &old_home);
    assert_eq!(
        fs::read_to_string(snapshot.join("notes.txt")).unwrap(),
        "written on the daemon's machine\n"
    );

    // A cancel reaches the daemon's Terraform.
    push(&platform, "slow", &fixture("slow"), &[]);
    let create = platform.spawn(&["create", "lazy", "--template", "slow"]);
    wait_until("the slow apply", Duration::from_secs(60), || {
        build_log(&platform, "lazy", "1").contains("Provisioning with 'local-exec'")
    });
    platform.run(&["builds", "cancel", "lazy", "1"]).ok();
    let canceled = platform.wait_for_build_status("lazy", "canceled");
    assert!(
        canceled["error"]
            .as_str()
            .unwrap()
            .contains("canceled during terraform apply"),
        "{canceled:#}"
    );
    util::finish(create);

    // The key deleted, its daemon is refused and stops with one line.
    platform
        .run(&["provisioner", "keys", "delete", "builders"])
        .ok();
    let status = daemon.wait_exit(Duration::from_secs(60));
    assert!(!status.success());
    let log = daemon.log();
    let last = log.lines().last().unwrap_or_default();
    // Refused at its next request, or within its waiting one.
    assert!(
        last.starts_with("error: the server refused this provisioner:") && last.contains("key"),
        "{log}"
    );
}

/// The only snapshot record's archive, exported, verified and unpacked;
/// the folder of its volume's files. It is of the volume `of`.
fn snapshot_in(platform: &Platform, of: &Path) -> std::path::PathBuf {
    let listed = platform
        .run(&["retained", "list", "--output", "json"])
        .ok()
        .json();
    let records = listed.as_array().unwrap();
    assert_eq!(records.len(), 1, "{listed:#}");
    assert_eq!(records[0]["kind"], "snapshot");
    assert_eq!(records[0]["address"], "abode_volume.home");
    assert_eq!(
        records[0]["import_id"].as_str(),
        of.file_name().unwrap().to_str()
    );
    let id = records[0]["id"].as_str().unwrap();
    let file = platform.root().join(format!("{id}.tar"));
    platform
        .run(&["retained", "export", id, "--to", file.to_str().unwrap()])
        .ok();
    let verified = platform
        .run(&["retained", "verify", file.to_str().unwrap()])
        .ok();
    assert!(verified.stderr.contains("1 files"), "{verified}");
    let unpacked = platform.root().join(format!("{id}-unpacked"));
    fs::create_dir_all(&unpacked).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xf")
        .arg(&file)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(status.success());
    unpacked.join("volume")
}

/// A daemon's confirmed replacement whose snapshot fails (its
/// `snapshot_command`, run on the daemon's machine, exits 1) applies
/// nothing: the old volume and its file stay, no record is kept.
#[test]
fn a_failing_snapshot_on_a_daemon_applies_nothing() {
    require_terraform();
    let platform = Platform::start_with(API_ONLY);
    platform.login_owner();
    let key = create_key(&platform, "builders", &[]);
    let daemon = Daemon::start(&platform, "d1", &key, &[]);
    let failing = (
        "  mode        = \"confirm\"\n",
        "  mode        = \"confirm\"\n  snapshot_command = \"echo taking a snapshot of $ABODE_ATTR_NAME; exit 1\"\n",
    );
    util::push_template(&platform, "local", 1, &util::example_with(&[failing]));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let home = daemon.data_dir.join("volumes").join(&daemon.volumes()[0]);
    fs::write(home.join("notes.txt"), "unsaved work\n").unwrap();
    let renamed = util::name_not_kept(&util::example_with(&[
        failing,
        ("name = \"home-${", "name = \"home2-${"),
    ]));
    util::push_template(&platform, "local", 2, &renamed);
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    let digest = printed_digest(&held);
    let confirmed = platform.run(&["builds", "confirm", "dev", "2", "--digest", &digest]);
    assert_ne!(confirmed.code, Some(0), "{confirmed}");
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "failed", "{build:#}");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.contains("snapshot_command of abode_volume.home failed with exit status 1")
            && error.contains("nothing was applied")
            && !error.contains('\n'),
        "{error}"
    );
    // It ran on the daemon, with the resource's attributes.
    let name = home.file_name().unwrap().to_str().unwrap();
    let log = build_log(&platform, "dev", "2");
    assert!(
        log.contains(&format!("snapshot_command: taking a snapshot of {name}")),
        "{log}"
    );
    assert_eq!(
        fs::read_to_string(home.join("notes.txt")).unwrap(),
        "unsaved work\n"
    );
    assert_eq!(daemon.volumes(), [name]);
    let listed = platform
        .run(&["retained", "list", "--output", "json"])
        .ok()
        .json();
    assert!(listed.as_array().unwrap().is_empty(), "{listed:#}");
}

#[test]
fn a_keys_tags_bind_its_daemons() {
    require_terraform();
    let platform = Platform::start_with(API_ONLY);
    platform.login_owner();
    let key = create_key(&platform, "cloud-a", &["cloud=a"]);

    // Started with other tags than its key's, a daemon is refused at once.
    let mut wrong = Daemon::start(&platform, "wrong", &key, &["--tag", "cloud=b"]);
    assert!(!wrong.wait_exit(Duration::from_secs(30)).success());
    assert!(
        wrong.log().contains("its key cloud-a has cloud=a"),
        "{}",
        wrong.log()
    );

    // With no provisioner at all, a build waits and says so.
    push(&platform, "free", &fixture("minimal"), &[]);
    let free = platform.spawn(&["create", "free-1", "--template", "free"]);
    platform.wait_for_build_status("free-1", "pending");
    platform.advance_clock(Duration::from_secs(40));
    wait_until(
        "the notice of no provisioner",
        Duration::from_secs(30),
        || build_log(&platform, "free-1", "1").contains("no provisioner is connected"),
    );

    // Without --tag it offers its key's: the waiting untagged build goes
    // to it, as does a template tagged cloud=a; one tagged cloud=b waits,
    // and says so.
    let _daemon = Daemon::start(&platform, "right", &key, &[]);
    util::finish(free);
    platform.wait_for_build_status("free-1", "succeeded");
    push(
        &platform,
        "a",
        &fixture("minimal"),
        &["--provisioner-tag", "cloud=a"],
    );
    push(
        &platform,
        "b",
        &fixture("minimal"),
        &["--provisioner-tag", "cloud=b"],
    );
    platform.run(&["create", "on-a", "--template", "a"]).ok();
    let waiting = platform.spawn(&["create", "on-b", "--template", "b"]);
    // Queued first, then 40 s pass for it.
    platform.wait_for_build_status("on-b", "pending");
    platform.advance_clock(Duration::from_secs(40));
    wait_until(
        "the notice of no provisioner",
        Duration::from_secs(30),
        || build_log(&platform, "on-b", "1").contains("cloud=b"),
    );
    assert_eq!(platform.show("on-b")["latest_build"]["status"], "pending");
    platform.run(&["builds", "cancel", "on-b", "1"]).ok();
    util::finish(waiting);
}

#[test]
fn a_daemon_killed_mid_apply_loses_no_state() {
    require_terraform();
    let platform = Platform::start_with(API_ONLY);
    platform.login_owner();
    let key = create_key(&platform, "builders", &[]);
    let mut daemon = Daemon::start(&platform, "d1", &key, &[]);
    push(&platform, "half", &fixture("half-apply"), &[]);
    let create = platform.spawn(&["create", "h", "--template", "half"]);

    // Killed while its Terraform applies (`second` sleeps 8 s).
    wait_until("the apply's local-exec", Duration::from_secs(60), || {
        build_log(&platform, "h", "1").contains("Provisioning with 'local-exec'")
    });
    assert!(!stored_state(&platform, "h").contains("\"second\""));
    daemon.kill();
    util::finish(create);

    // Its lease runs out: the build is failed, naming the daemon; the
    // workspace stays locked by it (its Terraform may still run).
    platform.advance_clock(Duration::from_secs(30));
    let failed = platform.wait_for_build_status("h", "failed");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("the external provisioner builders/d1-") && error.contains("lease"),
        "{failed:#}"
    );
    assert_eq!(
        platform.show("h")["locked_by_lost_holder"]["build_number"],
        1
    );

    // The orphaned Terraform stores what it made itself, through the state
    // backend, without the daemon that started it.
    wait_until("the orphan's state", Duration::from_secs(60), || {
        stored_state(&platform, "h").contains("\"second\"")
    });

    // Started again on its data dir, the daemon finds that Terraform ended
    // and gives the workspace's lock back.
    let restarted = Daemon::start(&platform, "d1", &key, &[]);
    wait_until("the lock given back", Duration::from_secs(60), || {
        build_log(&platform, "h", "1").contains("reported that its Terraform of this build ended")
    });
    assert!(platform.show("h").get("locked_by_lost_holder").is_none());
    wait_until(
        "the leftover work dir removed",
        Duration::from_secs(30),
        || names_in(&restarted.data_dir.join("work")).is_empty(),
    );

    // The workspace builds again, on the full state: nothing to redo.
    let started = platform.run(&["start", "h"]).ok();
    assert!(started.stdout.contains("0 added"), "{started}");
}

/// The daemons' routes refuse what is not a daemon's, with one line each:
/// no key, a person's token, a bad id, a body that is not JSON, a build
/// the daemon does not hold.
#[test]
fn the_daemon_routes_refuse_bad_callers_and_bodies() {
    require_terraform();
    let platform = Platform::start_with(API_ONLY);
    platform.login_owner();
    let key = fs::read_to_string(create_key(&platform, "k", &[])).unwrap();
    let key = key.trim();
    let post = |path: &str, token: Option<&str>, body: &str| -> (u16, String) {
        let mut request = ureq::post(&format!("{}/api/v1/provisionerd/{path}", platform.url))
            .set("Content-Type", "application/json");
        if let Some(token) = token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        match request.send_string(body) {
            Ok(response) => (response.status(), response.into_string().unwrap()),
            Err(ureq::Error::Status(status, response)) => (status, response.into_string().unwrap()),
            Err(error) => panic!("{error}"),
        }
    };
    let hello = r#"{"daemon_id":"d-1","slot":"d-1-1","version":"0.1.0"}"#;
    let cases: [(&str, Option<&str>, &str, u16, &str); 6] = [
        ("acquire", None, hello, 401, "missing provisioner key"),
        ("acquire", Some("abode_pk_nope"), hello, 401, "unauthorized"),
        (
            "acquire",
            Some(key),
            r#"{"daemon_id":"../etc","slot":"s","version":"1"}"#,
            400,
            "daemon_id must be",
        ),
        ("acquire", Some(key), "not json", 400, "invalid JSON body"),
        (
            "jobs/some-build/heartbeat",
            Some(key),
            hello,
            409,
            "not this provisioner's job",
        ),
        // The lease is checked before the body is read: a build the key's
        // daemons do not hold is refused whatever the body says.
        (
            "jobs/some-build/complete",
            Some(key),
            r#"{"daemon_id":"d-1","slot":"d-1-1","version":"0.1.0","outcome":"succeeded"}"#,
            409,
            "not this provisioner's job",
        ),
    ];
    for (path, token, body, status, needle) in cases {
        let (got, answer) = post(path, token, body);
        assert_eq!(got, status, "{path}: {answer}");
        assert!(answer.contains(needle), "{path}: {answer}");
        assert!(!answer.contains(key), "{path}: {answer}");
    }
    // A person's session is not a provisioner key.
    let session: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(platform.config_dir().join("session.json")).unwrap(),
    )
    .unwrap();
    let token = session["token"].as_str().unwrap();
    let (got, answer) = post("acquire", Some(token), hello);
    assert_eq!(got, 401, "{answer}");
}
