//! The end-to-end walks on the PostgreSQL store: the real CLI against
//! `abode server --database-url postgres://...`, each test on a database of
//! its own created at ABODE_TEST_POSTGRES_URL's server and dropped after.
//!
//! The other end-to-end suites run on the embedded SQLite store only; these
//! repeat what matters most for a second backend (the lifecycle keeping the
//! volume, a guarded build held and confirmed, and the one-build-per-workspace
//! rule under a race), since the store-level tests cannot show that the
//! server, its workers and the CLI work together on it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::process::Stdio;
use std::time::Duration;

use util::{
    assert_no_processes_left, only_subdir, printed_digest, psql, repo_root, require_terraform,
    with_database, FreshDatabase, Platform,
};

const AGENT_WAIT: Duration = Duration::from_secs(60);

/// A server on a fresh PostgreSQL database with the owner `alice` logged in.
fn platform_on_postgres(database: &FreshDatabase) -> Platform {
    require_terraform();
    let platform = Platform::start_on(Some(&database.url), util::FAST_AGENT_FLAGS);
    platform.login_owner();
    assert!(
        !platform.data_dir().join("abode.db").exists(),
        "the server made a SQLite database despite --database-url"
    );
    let users = psql(&database.url, "SELECT username FROM users WHERE NOT system").unwrap();
    assert_eq!(users, "alice", "the first user is not in {}", database.name);
    platform
}

#[test]
fn database_url_names_the_fresh_database() {
    let cases = [
        (
            "postgres://abode@127.0.0.1:5432/postgres",
            "postgres://abode@127.0.0.1:5432/x",
        ),
        (
            "postgres://abode@host/postgres?sslmode=disable",
            "postgres://abode@host/x?sslmode=disable",
        ),
        ("postgres://abode@host", "postgres://abode@host/x"),
        (
            "postgres://abode@host?sslmode=disable",
            "postgres://abode@host/x?sslmode=disable",
        ),
    ];
    for (url, expected) in cases {
        assert_eq!(with_database(url, "x"), expected, "{url}");
    }
}

/// Also: sharing on PostgreSQL (a share by name and one through a group).
#[test]
fn lifecycle_on_postgres_keeps_the_volume_and_cleans_up_on_delete() {
    let database = FreshDatabase::create();
    let platform = platform_on_postgres(&database);
    platform.push_example();

    let created = platform.run(&["create", "dev", "--template", "local"]).ok();
    assert!(created.stderr.contains("succeeded"), "{created}");
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();
    let shown = platform.wait_for_agent("dev", "ready", AGENT_WAIT);
    assert_eq!(shown["status"], "running");

    // Shared with Bob both by name and through a group: listed once, he
    // connects; unshared both ways, refused.
    let bob = platform.login_new_user("bob", "member");
    platform.run(&["groups", "create", "pair"]).ok();
    platform
        .run(&["groups", "members", "add", "pair", "bob"])
        .ok();
    for whom in [["--user", "bob"], ["--group", "pair"]] {
        let mut args = vec!["sharing", "add", "dev"];
        args.extend(whom);
        args.extend(["--role", "use"]);
        platform.run(&args).ok();
    }
    let listed = platform
        .run_as(&bob, &["list", "-o", "json"], None)
        .ok()
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["shared"], true, "{listed}");
    platform
        .run_as(&bob, &["ssh", "alice/dev", "--", "true"], None)
        .ok();
    for whom in [["--user", "bob"], ["--group", "pair"]] {
        let mut args = vec!["sharing", "remove", "dev"];
        args.extend(whom);
        platform.run(&args).ok();
    }
    let refused = platform.run_as(&bob, &["ssh", "alice/dev", "--", "true"], None);
    assert_ne!(refused.code, Some(0), "{refused}");

    platform.run(&["stop", "dev"]).ok();
    assert_eq!(platform.show("dev")["status"], "stopped");
    assert_no_processes_left(&platform, "after stop");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );

    platform.run(&["start", "dev"]).ok();
    assert_eq!(only_subdir(&platform.volumes_dir()), volume);
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    let shown = platform.wait_for_agent("dev", "ready", AGENT_WAIT);
    assert_eq!(shown["healthy"], true);
    let builds = platform
        .run(&["builds", "list", "dev", "-o", "json"])
        .ok()
        .json();
    let summary: Vec<(u64, &str, &str)> = builds
        .as_array()
        .unwrap()
        .iter()
        .map(|build| {
            (
                build["number"].as_u64().unwrap(),
                build["transition"].as_str().unwrap(),
                build["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (3, "start", "succeeded"),
            (2, "stop", "succeeded"),
            (1, "start", "succeeded")
        ]
    );

    platform.run(&["delete", "dev"]).ok();
    assert!(
        !volume.exists(),
        "volume {} survived delete",
        volume.display()
    );
    assert_no_processes_left(&platform, "after delete");
    assert_eq!(platform.show("dev")["status"], "deleted");
    platform.run(&["start", "dev"]).fails_with(1, &[]);
}

#[test]
fn renamed_protected_volume_waits_for_confirmation_on_postgres() {
    let database = FreshDatabase::create();
    let platform = platform_on_postgres(&database);
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();

    let example = repo_root().join("examples/local-workspace/main.tf");
    let renamed = util::name_not_kept(&fs::read_to_string(example).unwrap())
        .replace("name = \"home-${", "name = \"home2-${");
    let v2 = platform.root().join("templates/local-v2");
    fs::create_dir_all(&v2).unwrap();
    fs::write(v2.join("main.tf"), renamed).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "local",
            "-d",
            v2.to_str().unwrap(),
            "--activate",
        ])
        .ok();

    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home"), "{held}");
    let digest = printed_digest(&held);
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "awaiting_confirmation", "{build:#}");
    assert_eq!(build["plan_digest"], digest.as_str());
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    // The held build holds the workspace.
    platform.run(&["stop", "dev"]).fails_with(1, &["dev"]);

    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .ok();
    assert!(
        !volume.exists(),
        "the confirmed replacement kept the old volume"
    );
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "succeeded", "{build:#}");
    assert_eq!(build["confirmed_by"], "alice");
    platform
        .run(&["builds", "confirm", "dev", "2", "--digest", &digest])
        .fails_with(1, &["not awaiting confirmation"]);

    let audit = platform
        .run(&["audit", "--workspace", "dev", "-o", "json"])
        .ok()
        .json();
    let confirmed = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["action"] == "build.confirm" && event["outcome"] == "success")
        .unwrap_or_else(|| panic!("no build.confirm event: {audit:#}"));
    assert_eq!(confirmed["actor"], "alice");
    assert!(
        confirmed["details"].as_str().unwrap().contains(&digest),
        "{confirmed:#}"
    );
    platform.run(&["delete", "dev"]).ok();
}

#[test]
fn two_concurrent_starts_on_postgres_one_wins_one_is_refused() {
    let database = FreshDatabase::create();
    let platform = platform_on_postgres(&database);
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.run(&["stop", "dev"]).ok();

    let spawn = || {
        platform
            .cmd(&["start", "dev"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn(), spawn());
    let outcomes: Vec<(Option<i32>, String)> = [first, second]
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        })
        .collect();
    let mut codes: Vec<Option<i32>> = outcomes.iter().map(|(code, _)| *code).collect();
    codes.sort();
    assert_eq!(codes, vec![Some(0), Some(1)], "{outcomes:#?}");
    let (_, refused) = outcomes.iter().find(|(code, _)| *code == Some(1)).unwrap();
    let errors: Vec<&str> = refused
        .lines()
        .filter(|line| line.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{refused}");
    assert!(errors[0].contains("dev"), "{refused}");

    let builds = platform
        .run(&["builds", "list", "dev", "-o", "json"])
        .ok()
        .json();
    let builds = builds.as_array().unwrap();
    assert_eq!(
        builds.len(),
        3,
        "the refused start queued a build: {builds:#?}"
    );
    assert_eq!(builds[0]["status"], "succeeded");
    assert_eq!(platform.show("dev")["status"], "running");
    platform.run(&["delete", "dev"]).ok();
}
