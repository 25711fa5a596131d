//! `abode audit export` (issue 49): the whole audit log, oldest first, as
//! JSON lines or CSV, streamed; owners and auditors only. A log of 100k
//! events is exported by a client and a server whose memory stays that of
//! a page, not of the log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use util::Platform;

const SINCE: &str = "2000-01-01T00:00:00Z";
/// Events the long log holds (besides those the test's own actions made).
const MANY: usize = 100_000;
/// The export's budget, client and server alike.
const BUDGET_KB: u64 = 50 * 1024;

/// Appends `count` events to the server's database behind its back (a
/// log that grew over years), in one transaction.
fn fill_audit_log(platform: &Platform, count: usize) {
    let path = platform.data_dir().join("abode.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .busy_timeout(std::time::Duration::from_secs(30));
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        for index in 0..count {
            sqlx::query(
                "INSERT INTO audit_events (time, actor_id, actor_name, action, target_type, \
                 target, outcome, details) VALUES (?, NULL, ?, 'login', 'user', ?, 'failure', ?)",
            )
            // One a minute, from 2001 on: all before the test's own events.
            .bind(978_307_200_000_i64 + index as i64 * 60_000)
            .bind(format!("user{index}"))
            .bind(format!("user{index}"))
            .bind("reason=wrong password, \"quoted\"\nsecond line")
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
        pool.close().await;
    });
}

/// The peak resident memory (KiB) of this process's children waited for
/// so far (each test runs in its own process: the CLI runs are its only
/// waited-for children).
fn children_peak_kb() -> u64 {
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    usage.max_rss() as u64
}

/// A process's peak resident memory (KiB), from `/proc/PID/status`.
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

#[test]
fn the_audit_log_is_exported_whole_oldest_first_to_owners_and_auditors_only() {
    let platform = Platform::start();
    platform.login_owner();
    let auditor = platform.login_new_user("ann", "auditor");
    let member = platform.login_new_user("bob", "member");

    // A member is refused, with nothing on standard output.
    let refused = platform
        .run_as(&member, &["audit", "export", "--since", SINCE], None)
        .fails_with(1, &["audit"]);
    assert!(refused.stdout.is_empty(), "{refused}");
    // Bad input: one line each.
    platform
        .run(&["audit", "export", "--since", "yesterday"])
        .fails_with(1, &["since"]);
    platform
        .run(&["audit", "export", "--since", SINCE, "--format", "xml"])
        .fails_with(2, &["xml"]);

    // The test's own events (the users made), oldest first, as JSON lines.
    let lines = platform
        .run_as(&auditor, &["audit", "export", "--since", SINCE], None)
        .ok();
    let events: Vec<serde_json::Value> = lines
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let created: Vec<&str> = events
        .iter()
        .filter(|event| event["action"] == "user.create")
        .map(|event| event["target"].as_str().unwrap())
        .collect();
    assert_eq!(created, ["alice", "ann", "bob"], "{}", lines.stdout);
    let ids: Vec<i64> = events
        .iter()
        .map(|event| event["id"].as_i64().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "not oldest first: {ids:?}"
    );

    // A long log: streamed, in constant memory on both sides.
    fill_audit_log(&platform, MANY);
    let server = platform.server_pid().expect("the server's pid");
    let server_before = peak_kb(server);
    let csv = platform
        .run(&["audit", "export", "--since", SINCE, "--format", "csv"])
        .ok();
    let client_peak = children_peak_kb();
    let server_growth = peak_kb(server).saturating_sub(server_before);
    assert!(
        client_peak < BUDGET_KB,
        "the CLI peaked at {client_peak} KiB exporting {MANY} events"
    );
    assert!(
        server_growth < BUDGET_KB,
        "the server grew by {server_growth} KiB exporting {MANY} events"
    );
    let mut rows = csv.stdout.split("\r\n");
    assert_eq!(
        rows.next(),
        Some("id,time,actor,action,target_type,target,outcome,request_id,client_ip,user_agent,status_code,details")
    );
    // The test's own events, then the long log, in the order recorded; its
    // first row with its field quoted.
    let first = rows.find(|row| row.contains(",user0,")).unwrap();
    assert!(
        first.contains(",2001-01-01T00:00:00.000Z,user0,login,user,user0,failure,,,,,\"reason=wrong password, \"\"quoted\"\"\nsecond line\""),
        "{first}"
    );
    let count = csv.stdout.matches(",\"reason=wrong password").count();
    assert_eq!(count, MANY, "rows of the long log");

    // A window of it: `until` is exclusive.
    let window = platform
        .run(&[
            "audit",
            "export",
            "--since",
            "2001-01-01T00:01:00Z",
            "--until",
            "2001-01-01T00:03:00Z",
        ])
        .ok();
    let actors: Vec<String> = window
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["actor"].to_string())
        .collect();
    assert_eq!(actors, ["\"user1\"", "\"user2\""]);
}
