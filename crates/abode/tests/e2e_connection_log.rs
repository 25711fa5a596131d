//! The connection log (issue 49): an `abode ssh` session is logged with its
//! person, workspace, kind, client, bytes each way, end and how it ended;
//! owners see everyone's entries and a member those on their own
//! workspaces; Prometheus counts connections by kind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{require_terraform, Platform};

/// The log as `config_dir`'s person reads it, once every entry in it has
/// ended (the server writes a connection's end as it closes, just after
/// the client saw it end).
#[track_caller]
pub(crate) fn ended_log(platform: &Platform, config_dir: &std::path::Path, count: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = platform
            .run_as(
                config_dir,
                &["connections", "log", "--output", "json"],
                None,
            )
            .ok()
            .json();
        let entries = log.as_array().unwrap();
        if entries.len() == count && entries.iter().all(|entry| !entry["closed_at"].is_null()) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "the log never showed {count} ended connections: {log:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_ssh_session_is_logged_with_its_bytes_and_end_and_members_see_their_own() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, util::FAST_AGENT_FLAGS);
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(60));

    let run = platform
        .run(&["ssh", "dev", "--", "sh", "-c", "head -c 100000 /dev/zero"])
        .ok();
    assert_eq!(run.stdout.len(), 100_000);
    let owner_dir = platform.config_dir();
    let entries = ended_log(&platform, &owner_dir, 1);
    let entry = &entries[0];
    assert_eq!(entry["kind"], "ssh", "{entry:#}");
    assert_eq!(entry["user"], "alice", "{entry:#}");
    assert_eq!(entry["workspace"], "alice/dev", "{entry:#}");
    assert!(
        entry["bytes_from_workspace"].as_u64().unwrap() >= 100_000,
        "{entry:#}"
    );
    assert!(
        entry["bytes_to_workspace"].as_u64().unwrap() > 0,
        "{entry:#}"
    );
    assert_eq!(entry["end_reason"], "client_closed", "{entry:#}");
    assert_eq!(entry["client_ip"], "127.0.0.1", "{entry:#}");
    // `abode ssh` names itself (the CLI's version) as its requests do.
    assert_eq!(
        entry["user_agent"],
        concat!("abode/", env!("CARGO_PKG_VERSION")),
        "{entry:#}"
    );
    assert!(entry["token_name"].is_null(), "{entry:#}");

    // Bob, a member, connects to his own workspace: he sees his entry only,
    // the owner sees both; filters narrow it.
    let bob = platform.login_new_user("bob", "member");
    platform
        .run_as(&bob, &["create", "mine", "--template", "local"], None)
        .ok();
    platform.wait_for_agent("bob/mine", "ready", Duration::from_secs(60));
    platform
        .run_as(&bob, &["ssh", "mine", "--", "true"], None)
        .ok();
    let bobs = ended_log(&platform, &bob, 1);
    assert_eq!(bobs[0]["workspace"], "bob/mine", "{bobs:#}");
    assert_eq!(bobs[0]["user"], "bob", "{bobs:#}");
    let all = ended_log(&platform, &owner_dir, 2);
    assert_eq!(all[0]["user"], "bob", "newest first: {all:#}");
    let alices = platform
        .run(&["connections", "log", "--user", "alice", "-o", "json"])
        .ok()
        .json();
    assert_eq!(alices.as_array().unwrap().len(), 1, "{alices:#}");
    let of_dev = platform
        .run(&[
            "connections",
            "log",
            "--workspace",
            "alice/dev",
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(of_dev.as_array().unwrap().len(), 1, "{of_dev:#}");
    let later = platform
        .run(&[
            "connections",
            "log",
            "--since",
            "2999-01-01T00:00:00Z",
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(later.as_array().unwrap().len(), 0, "{later:#}");
    let text = platform.run(&["connections", "log"]).ok();
    assert!(text.stdout.contains("client_closed"), "{text}");

    // Prometheus counts them by kind.
    let scrape = platform.scrape();
    assert!(
        scrape.contains("abode_connections_total{kind=\"ssh\"} 2"),
        "{scrape}"
    );
    assert!(
        scrape.contains("abode_connections_open{kind=\"ssh\"} 0"),
        "{scrape}"
    );
}
