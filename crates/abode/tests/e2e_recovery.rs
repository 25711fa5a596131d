//! The way back in for an owner locked out (issue 30): `abode server
//! reset-password` and `abode server create-admin-user` run on the server's
//! machine against its database while no server runs; the old sessions end,
//! the new password and the new owner work once a server is back, and both
//! are in the audit log as the server's own doing. Wrong input, a data dir
//! without a database and a database of a newer release are refused with
//! one line, changing nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use util::{abode_bin, require_terraform, Platform, Run};

/// `abode server ARGS` beside a stopped server, `stdin` on its input.
fn server_command(args: &[&str], data_dir: &Path, stdin: &str) -> Run {
    let mut child = Command::new(abode_bin())
        .arg("server")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("ABODE_DATABASE_URL")
        .env_remove("ABODE_DATA_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A refusal before the password is read closes the pipe: not an error.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    Run::from_output(
        format!("abode server {}", args.join(" ")),
        child.wait_with_output().unwrap(),
    )
}

/// What these commands could change, read behind the server's back: the
/// accounts and their passwords, the tokens and their revocations, the
/// audit log and the applied migrations. (The file's bytes are no measure:
/// opening a database checkpoints what a killed server left in its WAL.)
fn database_contents(platform: &Platform) -> String {
    util::on_sqlite(platform, |mut connection| async move {
        let mut contents = String::new();
        for query in [
            "SELECT username || ' ' || password_hash FROM users ORDER BY username",
            "SELECT id || ' ' || COALESCE(revoked_at, '-') FROM api_tokens ORDER BY id",
            "SELECT COUNT(*) || ' audit events' FROM audit_events",
            "SELECT GROUP_CONCAT(version) FROM _sqlx_migrations",
        ] {
            let rows: Vec<(String,)> = sqlx::query_as(query)
                .fetch_all(&mut connection)
                .await
                .unwrap_or_else(|err| panic!("{query}: {err}"));
            for (row,) in rows {
                contents.push_str(&row);
                contents.push('\n');
            }
        }
        contents
    })
}

#[test]
fn a_locked_out_owner_gets_back_in_through_the_servers_machine() {
    require_terraform();
    let mut platform = Platform::start();
    platform.login_owner();
    let data_dir = platform.data_dir();
    platform.kill_server();

    let reset = server_command(
        &["reset-password", "alice", "--password-stdin"],
        &data_dir,
        "a brand new password\n",
    );
    assert_eq!(reset.code, Some(0), "{reset}");
    assert_eq!(
        reset.stdout, "set a new password for alice; 1 session(s) ended\n",
        "{reset}"
    );
    let created = server_command(
        &[
            "create-admin-user",
            "--username",
            "rescue",
            "--email",
            "rescue@example.com",
            "--password-stdin",
        ],
        &data_dir,
        "rescue password\n",
    );
    assert_eq!(created.code, Some(0), "{created}");
    assert_eq!(created.stdout, "created rescue (owner, member)\n");

    platform.start_server_again();
    // The session alice had is over; her new password opens a new one.
    let old = platform.run(&["users", "me"]);
    assert_eq!(old.code, Some(1), "{old}");
    let url = platform.url.clone();
    platform
        .run_as(
            &platform.config_dir(),
            &["login", &url, "--username", "alice", "--password-stdin"],
            Some("a brand new password\n"),
        )
        .ok();
    platform.run(&["users", "me"]).ok();
    let rescue_dir = data_dir.parent().unwrap().join("config-rescue");
    platform
        .run_as(
            &rescue_dir,
            &["login", &url, "--username", "rescue", "--password-stdin"],
            Some("rescue password\n"),
        )
        .ok();
    let me = platform
        .run_as(&rescue_dir, &["users", "me", "--output", "json"], None)
        .ok()
        .json();
    let roles: Vec<&str> = me["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|role| role.as_str().unwrap())
        .collect();
    assert!(roles.contains(&"owner"), "{me:#}");

    let audit = platform.run(&["audit", "--output", "json"]).ok().json();
    let by_the_server: Vec<(&str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| {
            event["details"]
                .as_str()
                .is_some_and(|details| details.contains("via=server_command"))
        })
        .map(|event| {
            (
                event["action"].as_str().unwrap(),
                event["target"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(by_the_server.len(), 2, "{by_the_server:?} in {audit:#}");
    assert!(
        by_the_server.contains(&("user.password_reset", "alice")),
        "{audit:#}"
    );
    assert!(
        by_the_server.contains(&("user.create", "rescue")),
        "{audit:#}"
    );
}

/// Each wrong input: one line, a non-zero exit, the database unchanged.
#[test]
fn wrong_input_and_a_newer_database_are_refused_in_one_line_changing_nothing() {
    require_terraform();
    let mut platform = Platform::start();
    platform.login_owner();
    let data_dir = platform.data_dir();
    platform.kill_server();
    let empty = tempfile::tempdir().unwrap();
    let create = |name: &str| {
        vec![
            "create-admin-user".to_string(),
            "--username".into(),
            name.into(),
            "--email".into(),
            format!("{name}@example.com"),
            "--password-stdin".into(),
        ]
    };
    let cases: Vec<(Vec<String>, &Path, &str, &str)> = vec![
        (
            vec![
                "reset-password".into(),
                "nobody".into(),
                "--password-stdin".into(),
            ],
            &data_dir,
            "long enough password\n",
            "no user named \"nobody\"",
        ),
        (
            vec![
                "reset-password".into(),
                "alice".into(),
                "--password-stdin".into(),
            ],
            &data_dir,
            "short\n",
            "at least 8",
        ),
        (
            vec![
                "reset-password".into(),
                "alice".into(),
                "--password-stdin".into(),
            ],
            &data_dir,
            "",
            "no password on standard input",
        ),
        (
            create("alice"),
            &data_dir,
            "long enough password\n",
            "username \"alice\" is taken",
        ),
        (
            create("bad name!"),
            &data_dir,
            "long enough password\n",
            "username",
        ),
        (
            create("newowner"),
            empty.path(),
            "long enough password\n",
            "no database at",
        ),
    ];
    for (args, dir, stdin, expected) in cases {
        let before = database_contents(&platform);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = server_command(&args, dir, stdin);
        assert_eq!(run.code, Some(1), "{run}");
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{run}");
        assert!(lines[0].contains(expected), "{expected:?} in {run}");
        assert_eq!(
            database_contents(&platform),
            before,
            "{run} changed the database"
        );
    }
    assert!(
        !empty.path().join("abode.db").exists(),
        "a database was made in a wrong data dir"
    );

    // A database a newer release migrated: refused, left as it is.
    util::sqlite_execute(
        &platform,
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101, 'from the future', 1, X'00', 1)",
    );
    let before = database_contents(&platform);
    let run = server_command(
        &["reset-password", "alice", "--password-stdin"],
        &data_dir,
        "long enough password\n",
    );
    assert_eq!(run.code, Some(1), "{run}");
    assert_eq!(run.stderr.lines().count(), 1, "{run}");
    assert!(
        run.stderr
            .contains("migration 99990101, newer than this abode's"),
        "{run}"
    );
    assert_eq!(database_contents(&platform), before, "the database changed");
}
