//! `abode provisioner list` against a real server: its embedded
//! provisioners with their heartbeat and the job each runs now; a server
//! killed leaves them listed as stale once its lease has passed, and its
//! restart makes them connected again; members may not list them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::{Duration, Instant};

use util::{finish, fixture, require_terraform, Platform};

fn provisioners(platform: &Platform) -> Vec<serde_json::Value> {
    platform
        .run(&["provisioner", "list", "-o", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn provisioners_are_listed_with_their_job_and_heartbeat() {
    require_terraform();
    let mut platform = Platform::start_with(&["--provisioners", "2", "--job-lease", "4"]);
    platform.login_owner();
    let slow = fixture("slow");
    platform
        .run(&["templates", "push", "slow", "-d", slow.to_str().unwrap()])
        .ok();
    let create = platform.spawn(&["create", "one", "--template", "slow"]);

    // The build's worker names it; the other is idle.
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let listed = provisioners(&platform);
        if listed.iter().any(|p| !p["current_job"].is_null()) {
            break listed;
        }
        assert!(Instant::now() < deadline, "no job ever listed: {listed:#?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let server = listed[0]["server"].as_str().unwrap().to_string();
    for provisioner in &listed {
        assert_eq!(provisioner["server"], server.as_str());
        assert_eq!(provisioner["kind"], "embedded");
        assert_eq!(provisioner["status"], "connected");
    }
    let busy = listed.iter().find(|p| !p["current_job"].is_null()).unwrap();
    assert_eq!(busy["current_job"]["kind"], "build");
    assert_eq!(busy["current_job"]["workspace"], "alice/one");
    assert_eq!(busy["current_job"]["build_number"], 1);
    let text = platform.run(&["provisioner", "list"]).ok();
    assert!(
        text.stdout.contains("build #1 (start) of alice/one"),
        "{text}"
    );

    // Members may not list them.
    let bob = platform.login_new_user("bob", "member");
    let refused = platform.run_as(&bob, &["provisioner", "list"], None);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains("provisioners"), "{refused}");

    // Killed, the server says nothing more: once a lease has passed its
    // provisioners are stale. Started again, they are connected.
    platform.kill_server();
    finish(create);
    platform.advance_clock(Duration::from_secs(10));
    platform.start_server_again();
    // Until the restarted server's first round, the old heartbeats show.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = provisioners(&platform);
        if listed.len() == 2 && listed.iter().all(|p| p["status"] == "connected") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never connected again: {listed:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_version_s_jobs_go_only_to_provisioners_with_its_tags() {
    require_terraform();
    let platform = Platform::start_with_metrics(
        None,
        &["--provisioner-tag", "cloud=a,zone=1", "--job-lease", "4"],
    );
    platform.login_owner();
    let minimal = fixture("minimal");
    let push = |name: &str, tags: &[&str]| {
        let mut args = vec!["templates", "push", name, "-d", minimal.to_str().unwrap()];
        for tag in tags {
            args.extend(["--provisioner-tag", tag]);
        }
        platform.run(&args)
    };
    push("plain", &[]).ok();
    push("on-a", &["cloud=a"]).ok();
    push("on-b", &["zone=1", "cloud=b"]).ok();
    push("bad", &["cloud"]).fails_with(1, &["provisioner tag `cloud` is not key=value"]);
    let shown = platform
        .run(&["templates", "versions", "show", "on-b", "1", "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        shown["provisioner_tags"],
        serde_json::json!(["cloud=b", "zone=1"])
    );

    // Untagged and covered versions build here; the other waits for a
    // provisioner that offers cloud=b.
    platform.run(&["create", "p", "-t", "plain"]).ok();
    platform.run(&["create", "a", "-t", "on-a"]).ok();
    let waiting = platform.spawn(&["create", "b", "-t", "on-b"]);
    platform.wait_for_build_status("b", "pending");
    // The server's three workers looked at the queue since (four looks: one
    // worker looked twice, the second time after the build was queued) and
    // left it.
    platform.wait_for_passes("provisioner", 4);
    assert_eq!(platform.show("b")["latest_build"]["status"], "pending");
    // Within seconds its log says why it waits, naming what it needs and
    // what the connected provisioners offer.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = platform.run(&["builds", "logs", "b", "1"]);
        if log
            .stdout
            .contains("no provisioner matches the tags (cloud=b, zone=1)")
        {
            assert!(
                log.stdout.contains("3 embedded on host server-")
                    && log.stdout.contains("(cloud=a, zone=1)"),
                "{log}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the wait was never told: {log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(platform.show("b")["latest_build"]["status"], "pending");
    finish(waiting);
    let listed = provisioners(&platform);
    assert!(
        listed
            .iter()
            .all(|p| p["tags"] == serde_json::json!({"cloud": "a", "zone": "1"})),
        "{listed:#?}"
    );

    // A server whose tag is not one refuses to start, in one line.
    let refused = std::process::Command::new(util::abode_bin())
        .args(["server", "--provisioner-tag", "cloud", "--data-dir"])
        .arg(platform.root().join("other"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--provisioner-tag: provisioner tag `cloud` is not key=value"),
        "{stderr}"
    );
}
