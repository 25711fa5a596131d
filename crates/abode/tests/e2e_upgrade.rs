//! Upgrade in place: a data dir or PostgreSQL database written by the
//! previous release (schema as of commit 2460467) is opened by this release's
//! `abode server`, which applies only the migrations added since, and
//! everything in it is still there and still works.
//!
//! The previous schema is `tests/e2e_fixtures/schema-2460467/{sqlite,postgres}`:
//! byte copies of the migrations that release shipped, applied with sqlx's
//! migrator as that release did. The rows are written with SQL, as that
//! release wrote them: users with argon2 password hashes and session tokens
//! (one recent, one past the session lifetime), a template version with its
//! archive, a workspace with a succeeded build and its Terraform state, a held
//! build with a real saved plan (made by Terraform on that state), remembered
//! protections and audit events; a second workspace holds a plan too.
//!
//! Migrations are append-only: `shipped_migrations_are_unchanged` checks that
//! every file of the fixture is byte-identical to the one of that name in
//! `crates/store/migrations` (sqlx refuses to start on a database whose
//! applied migration has changed, so an edit would fail every upgrade).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};
use util::{fixture, require_terraform, FreshDatabase, Platform, FAST_AGENT_FLAGS};

/// The last release's commit, whose schema the fixture holds.
const PREVIOUS: &str = "schema-2460467";

const DAY_MS: i64 = 86_400_000;

/// The template the previous release ran: one resource, remembered as
/// protected, that the held build replaces.
const TEMPLATE: &str = r#"resource "terraform_data" "home" {
  input = "home of dev"
}
"#;

const ALICE_PASSWORD: &str = "alice's old password";
const BOB_PASSWORD: &str = "bob's old password";
/// Alice's session token, used 10 minutes ago: still good.
const ALICE_TOKEN: &str = "abode_1111111111111111111111111111111111111111111111111111111111111111";
/// Bob's session token, created 40 days ago: past the 30-day lifetime.
const BOB_TOKEN: &str = "abode_2222222222222222222222222222222222222222222222222222222222222222";

#[test]
fn shipped_migrations_are_unchanged() {
    let current = Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/migrations");
    for backend in ["sqlite", "postgres"] {
        let shipped = fixture(PREVIOUS).join(backend);
        let mut names: Vec<_> = fs::read_dir(&shipped)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        names.sort();
        assert!(!names.is_empty(), "no migrations in {}", shipped.display());
        for name in names {
            let now = current.join(backend).join(&name);
            let now = fs::read(&now).unwrap_or_else(|err| {
                panic!(
                    "{} shipped in the previous release but {}: {err}; migrations are append-only",
                    name.to_string_lossy(),
                    now.display()
                )
            });
            assert!(
                now == fs::read(shipped.join(&name)).unwrap(),
                "crates/store/migrations/{backend}/{} changed since it shipped; \
                 migrations are append-only: add a new numbered file instead",
                name.to_string_lossy()
            );
        }
    }
}

#[test]
fn a_sqlite_data_dir_of_the_previous_release_upgrades() {
    require_terraform();
    let old = OldRelease::make();
    let platform = Platform::start_prepared(None, FAST_AGENT_FLAGS, |data_dir| {
        fs::create_dir_all(data_dir).unwrap();
        let path = data_dir.join("abode.db");
        runtime().block_on(async {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .foreign_keys(true);
            let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
            let db = OldDatabase::Sqlite(pool);
            db.migrate("sqlite").await;
            old.fill(&db).await;
            db.close().await;
        });
    });
    everything_survives(&platform, &old);
}

#[test]
fn a_postgres_database_of_the_previous_release_upgrades() {
    require_terraform();
    let old = OldRelease::make();
    let database = FreshDatabase::create();
    runtime().block_on(async {
        let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
        let db = OldDatabase::Postgres(pool);
        db.migrate("postgres").await;
        old.fill(&db).await;
        db.close().await;
    });
    let platform = Platform::start_prepared(Some(&database.url), FAST_AGENT_FLAGS, |_| {});
    everything_survives(&platform, &old);
}

/// What the new server must show and do with the previous release's data.
fn everything_survives(platform: &Platform, old: &OldRelease) {
    // Sessions from before the upgrade: a recent one works, an old one is
    // expired by the session lifetime, with the usual message.
    let alice = session_dir(platform, "alice-old", ALICE_TOKEN);
    let me = platform
        .run_as(&alice, &["users", "me", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(me["username"], "alice", "{me:#}");
    assert_eq!(me["role"], "owner", "{me:#}");
    let bob = session_dir(platform, "bob-old", BOB_TOKEN);
    platform
        .run_as(&bob, &["users", "me"], None)
        .fails_with(1, &["session expired", "abode login"]);

    // Passwords hashed by the previous release still log in.
    login(platform, &platform.config_dir(), "alice", ALICE_PASSWORD);
    let bob = platform.root().join("config-bob");
    login(platform, &bob, "bob", BOB_PASSWORD);
    let me = platform
        .run_as(&bob, &["users", "me", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(me["role"], "member", "{me:#}");
    // The new token columns work on the upgraded table.
    platform
        .run(&["tokens", "create", "--name", "after-upgrade"])
        .ok();

    let templates = platform
        .run(&["templates", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(templates[0]["name"], "local", "{templates:#}");
    assert_eq!(templates[0]["active_version"], 1, "{templates:#}");
    let versions = platform
        .run(&["templates", "versions", "list", "local", "--output", "json"])
        .ok()
        .json();
    assert_eq!(versions[0]["message"], "pushed before the upgrade");
    assert_eq!(versions[0]["created_by"], "alice", "{versions:#}");

    let workspaces = platform.run(&["list", "--output", "json"]).ok().json();
    let mut names: Vec<&str> = workspaces
        .as_array()
        .unwrap()
        .iter()
        .map(|workspace| workspace["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["dev", "scratch"], "{workspaces:#}");
    let dev = platform.show("dev");
    assert_eq!(dev["template"], "local", "{dev:#}");
    assert_eq!(dev["parameters"]["size"], "small", "{dev:#}");

    let builds = builds_of(platform, "dev");
    assert_eq!(builds[1]["status"], "succeeded", "{builds:#?}");
    let held = &builds[0];
    assert_eq!(held["number"], 2, "{held:#}");
    assert_eq!(held["status"], "awaiting_confirmation", "{held:#}");
    assert_eq!(held["plan_digest"], old.plan_digest.as_str(), "{held:#}");
    assert_eq!(held["guard"]["decision"], "confirm", "{held:#}");
    let log = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(log.stdout.contains("written before the upgrade"), "{log}");

    let protections = platform
        .run(&["workspaces", "protections", "dev", "--output", "json"])
        .ok()
        .json();
    assert_eq!(protections[0]["address"], "terraform_data.home");
    assert_eq!(protections[0]["mode"], "confirm", "{protections:#}");

    let audit = platform.run(&["audit", "--output", "json"]).ok().json();
    let created = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["request_id"] == "request-before-upgrade")
        .unwrap_or_else(|| panic!("the old audit event is gone: {audit:#}"));
    assert_eq!(created["action"], "workspace.create");
    assert_eq!(created["actor"], "alice");
    assert_eq!(created["target"], "alice/dev");

    // The held plan of the previous release is canceled, or applied once
    // confirmed with its digest, on the state it was made from.
    platform.run(&["builds", "cancel", "scratch", "2"]).ok();
    assert_eq!(builds_of(platform, "scratch")[0]["status"], "canceled");
    platform
        .run(&[
            "builds",
            "confirm",
            "dev",
            "2",
            "--digest",
            &old.plan_digest,
        ])
        .ok();
    let builds = builds_of(platform, "dev");
    assert_eq!(builds[0]["status"], "succeeded", "{builds:#?}");
    assert_eq!(builds[0]["confirmed_by"], "alice", "{builds:#?}");
    let state_file = platform.root().join("state-after.json");
    platform
        .run(&[
            "workspaces",
            "state",
            "dev",
            "--file",
            state_file.to_str().unwrap(),
        ])
        .ok();
    let before: serde_json::Value = serde_json::from_slice(&old.state).unwrap();
    let after: serde_json::Value = serde_json::from_slice(&fs::read(&state_file).unwrap()).unwrap();
    assert_eq!(after["lineage"], before["lineage"]);
    assert!(
        after["serial"].as_i64() > before["serial"].as_i64(),
        "the confirmed plan did not move the state on: {after:#}"
    );
    let protections = platform
        .run(&["workspaces", "protections", "dev", "--output", "json"])
        .ok()
        .json();
    assert_eq!(protections[0]["address"], "terraform_data.home");

    // And the upgraded workspace goes on building.
    platform.run(&["stop", "dev"]).ok();
    assert_eq!(builds_of(platform, "dev")[0]["status"], "succeeded");
}

/// A config dir whose session is `token` on this server, as the previous
/// release's `abode login` left it.
fn session_dir(platform: &Platform, name: &str, token: &str) -> PathBuf {
    let dir = platform.root().join(name);
    let session = abode_client::config::Session {
        url: platform.url.clone(),
        token: token.to_string(),
        username: None,
    };
    abode_client::config::save_session(&dir, &session).unwrap();
    dir
}

fn login(platform: &Platform, config_dir: &Path, username: &str, password: &str) {
    platform
        .run_as(
            config_dir,
            &[
                "login",
                &platform.url,
                "--username",
                username,
                "--password-stdin",
            ],
            Some(&format!("{password}\n")),
        )
        .ok();
}

/// `abode builds list WS`, newest first.
fn builds_of(platform: &Platform, workspace: &str) -> Vec<serde_json::Value> {
    let json = platform
        .run(&["builds", "list", workspace, "--output", "json"])
        .ok()
        .json();
    json.as_array().unwrap().clone()
}

/// What the previous release would have stored for one template and its
/// workspaces, made with real Terraform: the template archive, the state
/// after the first start, and the saved plan (with its JSON and the guard's
/// report) of a start that replaces the protected resource.
struct OldRelease {
    _dir: tempfile::TempDir,
    archive: Vec<u8>,
    create_plan_json: String,
    create_report: String,
    state: Vec<u8>,
    plan: Vec<u8>,
    plan_digest: String,
    plan_json: String,
    report: String,
}

impl OldRelease {
    fn make() -> OldRelease {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("template");
        fs::create_dir(&template).unwrap();
        fs::write(template.join("main.tf"), TEMPLATE).unwrap();
        let archive = abode_client::archive::pack_template(&template).unwrap();

        let work = dir.path().join("work");
        fs::create_dir(&work).unwrap();
        fs::write(work.join("main.tf"), TEMPLATE).unwrap();
        let cli_config = dir.path().join("terraformrc");
        fs::write(&cli_config, "").unwrap();
        let terraform = |args: &[&str]| -> Vec<u8> {
            let output = Command::new("terraform")
                .args(args)
                .current_dir(&work)
                .env("CHECKPOINT_DISABLE", "1")
                .env("TF_IN_AUTOMATION", "1")
                .env("TF_INPUT", "0")
                .env("TF_CLI_CONFIG_FILE", &cli_config)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "terraform {args:?} failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            output.stdout
        };
        terraform(&["init", "-input=false"]);
        terraform(&["plan", "-input=false", "-out=create.tfplan"]);
        let create_plan_json = terraform(&["show", "-json", "create.tfplan"]);
        terraform(&["apply", "-input=false", "create.tfplan"]);
        let state = fs::read(work.join("terraform.tfstate")).unwrap();
        terraform(&[
            "plan",
            "-input=false",
            "-replace=terraform_data.home",
            "-out=held.tfplan",
        ]);
        let plan_json = terraform(&["show", "-json", "held.tfplan"]);
        let plan = fs::read(work.join("held.tfplan")).unwrap();

        let create_plan_file = work.join("create.json");
        fs::write(&create_plan_file, &create_plan_json).unwrap();
        let held_plan_file = work.join("held.json");
        fs::write(&held_plan_file, &plan_json).unwrap();
        OldRelease {
            archive,
            create_plan_json: String::from_utf8(create_plan_json).unwrap(),
            create_report: guard_report(&create_plan_file, 0),
            state,
            plan_digest: sha256_hex(&plan),
            plan,
            plan_json: String::from_utf8(plan_json).unwrap(),
            report: guard_report(&held_plan_file, 3),
            _dir: dir,
        }
    }

    /// The previous release's rows, as it wrote them.
    async fn fill(&self, db: &OldDatabase) {
        use Value::{Bool, Bytes, Int, Text};
        let now = now_ms();
        let t = |s: &str| Text(s.to_string());

        for (id, name, role, password, created) in [
            (
                "u-alice",
                "alice",
                "owner",
                ALICE_PASSWORD,
                now - 50 * DAY_MS,
            ),
            ("u-bob", "bob", "member", BOB_PASSWORD, now - 45 * DAY_MS),
        ] {
            db.exec(
                "INSERT INTO users (id, username, email, role, password_hash, created_at) \
                 VALUES (?, ?, ?, ?, ?, ?)",
                vec![
                    t(id),
                    t(name),
                    Text(format!("{name}@example.com")),
                    t(role),
                    Text(old_password_hash(password)),
                    Int(created),
                ],
            )
            .await;
        }
        for (id, user, token, created, used) in [
            (
                "tok-alice",
                "u-alice",
                ALICE_TOKEN,
                now - 3_600_000,
                now - 600_000,
            ),
            (
                "tok-bob",
                "u-bob",
                BOB_TOKEN,
                now - 40 * DAY_MS,
                now - 60_000,
            ),
        ] {
            db.exec(
                "INSERT INTO api_tokens (id, user_id, token_hash, created_at, last_used_at) \
                 VALUES (?, ?, ?, ?, ?)",
                vec![
                    t(id),
                    t(user),
                    Text(sha256_hex(token.as_bytes())),
                    Int(created),
                    Int(used),
                ],
            )
            .await;
        }

        let pushed = now - 20 * DAY_MS;
        db.exec(
            "INSERT INTO templates (id, name, active_version_id, created_at, updated_at) \
             VALUES ('tpl-local', 'local', 'tv-local-1', ?, ?)",
            vec![Int(pushed), Int(pushed)],
        )
        .await;
        db.exec(
            "INSERT INTO template_versions (id, template_id, number, archive, archive_sha256, \
             message, created_by, validation_ok, validation_message, created_at) \
             VALUES ('tv-local-1', 'tpl-local', 1, ?, ?, 'pushed before the upgrade', 'u-alice', \
             ?, 'Success! The configuration is valid.', ?)",
            vec![
                Bytes(self.archive.clone()),
                Text(sha256_hex(&self.archive)),
                Bool(true),
                Int(pushed),
            ],
        )
        .await;

        let state_digest = sha256_hex(&self.state);
        for (workspace, name) in [("ws-dev", "dev"), ("ws-scratch", "scratch")] {
            let created = now - 10 * DAY_MS;
            let (first, held) = (format!("{workspace}-b1"), format!("{workspace}-b2"));
            db.exec(
                "INSERT INTO workspaces (id, owner_id, name, template_id, template_version_id, \
                 parameters, deleted, created_at, updated_at) \
                 VALUES (?, 'u-alice', ?, 'tpl-local', 'tv-local-1', '{\"size\":\"small\"}', ?, ?, ?)",
                vec![t(workspace), t(name), Bool(false), Int(created), Int(created)],
            )
            .await;
            db.exec(
                "INSERT INTO builds (id, workspace_id, number, transition, status, \
                 template_version_id, initiator_id, reason, error, plan_json, guard_report, \
                 created_at, started_at, finished_at) \
                 VALUES (?, ?, 1, 'start', 'succeeded', 'tv-local-1', 'u-alice', 'create', NULL, \
                 ?, ?, ?, ?, ?)",
                vec![
                    t(&first),
                    t(workspace),
                    t(&self.create_plan_json),
                    t(&self.create_report),
                    Int(created),
                    Int(created + 1_000),
                    Int(created + 9_000),
                ],
            )
            .await;
            db.exec(
                "INSERT INTO build_logs (build_id, seq, time, stage, level, text) \
                 VALUES (?, 1, ?, 'setup', 'info', 'build #1 (start): written before the upgrade'), \
                 (?, 2, ?, 'apply', 'info', 'Apply complete! Resources: 1 added, 0 changed, 0 destroyed.')",
                vec![t(&first), Int(created + 1_000), t(&first), Int(created + 8_000)],
            )
            .await;
            db.exec(
                "INSERT INTO workspace_states (workspace_id, build_id, state, updated_at) \
                 VALUES (?, ?, ?, ?)",
                vec![
                    t(workspace),
                    t(&first),
                    Bytes(self.state.clone()),
                    Int(created + 8_000),
                ],
            )
            .await;
            db.exec(
                "INSERT INTO workspace_protections (workspace_id, address, mode, build_id, updated_at) \
                 VALUES (?, 'terraform_data.home', 'confirm', ?, ?)",
                vec![t(workspace), t(&first), Int(created + 8_000)],
            )
            .await;

            let asked = now - 3_600_000;
            db.exec(
                "INSERT INTO builds (id, workspace_id, number, transition, status, \
                 template_version_id, initiator_id, reason, error, plan_json, guard_report, \
                 created_at, started_at, finished_at, plan_digest, expires_at) \
                 VALUES (?, ?, 2, 'start', 'awaiting_confirmation', 'tv-local-1', 'u-alice', \
                 'start', NULL, ?, ?, ?, ?, NULL, ?, ?)",
                vec![
                    t(&held),
                    t(workspace),
                    t(&self.plan_json),
                    t(&self.report),
                    Int(asked),
                    Int(asked + 1_000),
                    t(&self.plan_digest),
                    Int(now + DAY_MS),
                ],
            )
            .await;
            db.exec(
                "INSERT INTO saved_plans (build_id, plan, digest, state_digest, created_at) \
                 VALUES (?, ?, ?, ?, ?)",
                vec![
                    t(&held),
                    Bytes(self.plan.clone()),
                    t(&self.plan_digest),
                    t(&state_digest),
                    Int(asked + 5_000),
                ],
            )
            .await;
            for (job, build, at) in [(1, &first, created), (2, &held, asked)] {
                db.exec(
                    "INSERT INTO jobs (id, build_id, status, worker, cancel_requested, created_at, \
                     claimed_at, finished_at, kind) \
                     VALUES (?, ?, 'done', 'embedded-0', ?, ?, ?, ?, 'build')",
                    vec![
                        Text(format!("{workspace}-job{job}")),
                        t(build),
                        Bool(false),
                        Int(at),
                        Int(at + 1_000),
                        Int(at + 9_000),
                    ],
                )
                .await;
            }
            db.exec(
                "INSERT INTO build_logs (build_id, seq, time, stage, level, text) \
                 VALUES (?, 1, ?, 'guard', 'warn', ?)",
                vec![
                    t(&held),
                    Int(asked + 5_000),
                    Text(format!(
                        "held for confirmation; confirm with: abode builds confirm alice/{name} 2 --digest {}",
                        self.plan_digest
                    )),
                ],
            )
            .await;
            db.exec(
                "INSERT INTO audit_events (time, actor_id, actor_name, action, target_type, \
                 target, outcome, request_id, details) \
                 VALUES (?, NULL, NULL, 'build.held', 'workspace', ?, 'success', NULL, ?)",
                vec![
                    Int(asked + 5_000),
                    Text(format!("alice/{name}")),
                    Text(format!("build=2 digest={}", self.plan_digest)),
                ],
            )
            .await;
        }
        db.exec(
            "INSERT INTO audit_events (time, actor_id, actor_name, action, target_type, target, \
             outcome, request_id, details) \
             VALUES (?, 'u-alice', 'alice', 'workspace.create', 'workspace', 'alice/dev', \
             'success', 'request-before-upgrade', 'template=local version=1')",
            vec![Int(now - 10 * DAY_MS)],
        )
        .await;
    }
}

/// `abode plan check` of a plan JSON file with `terraform_data.home`
/// protected: the guard's JSON report, as a build stores it.
fn guard_report(plan_json: &Path, expected_exit: i32) -> String {
    let output = Command::new(util::abode_bin())
        .args(["plan", "check"])
        .arg(plan_json)
        .args(["--protect", "terraform_data.home", "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(expected_exit),
        "abode plan check: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// An argon2id hash as the previous release made it (`Argon2::default()`,
/// a PHC string with a random salt).
fn old_password_hash(password: &str) -> String {
    use argon2::password_hash::{rand_core::OsRng, PasswordHasher, SaltString};
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .unwrap()
        .to_string()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(now.as_millis()).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A value bound to a `?` placeholder (NULLs are written in the SQL).
enum Value {
    Text(String),
    Int(i64),
    Bool(bool),
    Bytes(Vec<u8>),
}

/// The previous release's database, before the new server has seen it.
enum OldDatabase {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl OldDatabase {
    /// The migrations the previous release shipped, from the fixture.
    async fn migrate(&self, backend: &str) {
        let migrator = sqlx::migrate::Migrator::new(fixture(PREVIOUS).join(backend))
            .await
            .unwrap();
        match self {
            OldDatabase::Sqlite(pool) => migrator.run(pool).await.unwrap(),
            OldDatabase::Postgres(pool) => migrator.run(pool).await.unwrap(),
        }
    }

    async fn exec(&self, statement: &str, values: Vec<Value>) {
        macro_rules! bound {
            ($query:expr) => {{
                let mut query = $query;
                for value in values {
                    query = match value {
                        Value::Text(text) => query.bind(text),
                        Value::Int(number) => query.bind(number),
                        Value::Bool(flag) => query.bind(flag),
                        Value::Bytes(bytes) => query.bind(bytes),
                    };
                }
                query
            }};
        }
        let done = match self {
            OldDatabase::Sqlite(pool) => bound!(sqlx::query(statement))
                .execute(pool)
                .await
                .map(|done| done.rows_affected()),
            OldDatabase::Postgres(pool) => {
                let statement = numbered(statement);
                bound!(sqlx::query(&statement))
                    .execute(pool)
                    .await
                    .map(|done| done.rows_affected())
            }
        };
        let rows = done.unwrap_or_else(|err| panic!("{statement}: {err}"));
        assert!(rows > 0, "{statement} wrote nothing");
    }

    async fn close(&self) {
        match self {
            OldDatabase::Sqlite(pool) => pool.close().await,
            OldDatabase::Postgres(pool) => pool.close().await,
        }
    }
}

/// `?` placeholders as PostgreSQL's `$1, $2, ...` (no `?` in the literals here).
fn numbered(statement: &str) -> String {
    let mut out = String::new();
    let mut next = 0;
    for c in statement.chars() {
        if c == '?' {
            next += 1;
            out.push_str(&format!("${next}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// A database a newer release migrated is refused with one line naming
/// both migrations, and left as it is (an older binary started by mistake,
/// or a restore of the binary without the database).
#[test]
fn a_database_of_a_newer_release_is_refused_and_left_as_it_is() {
    require_terraform();
    let mut platform = Platform::start_with(FAST_AGENT_FLAGS);
    platform.login_owner();
    platform.kill_server();
    util::sqlite_execute(
        &platform,
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101, 'from the future', 1, X'00', 1)",
    );
    let before = applied_migrations(&platform);
    let output = Command::new(util::abode_bin())
        .args(["server", "--address", "127.0.0.1:0", "--data-dir"])
        .arg(platform.data_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "migration 99990101, newer than this abode's (migration {})",
            newest_shipped_migration()
        )) && last.contains("restore a backup or run the newer release"),
        "{stderr}"
    );
    assert_eq!(
        applied_migrations(&platform),
        before,
        "the database changed"
    );
}

/// The number of the newest migration this build carries.
fn newest_shipped_migration() -> u32 {
    fs::read_dir(util::repo_root().join("crates/store/migrations/sqlite"))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.split('_').next()?.parse::<u32>().ok()
        })
        .max()
        .unwrap()
}

/// The migrations recorded in the platform's SQLite database, in order.
fn applied_migrations(platform: &Platform) -> Vec<i64> {
    util::on_sqlite(platform, |mut connection| async move {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut connection)
            .await
            .unwrap()
    })
}
