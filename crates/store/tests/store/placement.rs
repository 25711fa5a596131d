//! Host-local workspaces (migration 0037): a stored state places its
//! workspace on the host of the run that wrote it, the claim skips a placed
//! workspace's jobs on other hosts (and takes the next job instead), a job
//! waiting for a host nobody runs is noted once, a person's move is a
//! compare-and-set, and a database of the previous release is placed where
//! its states were written.

use std::time::Duration;

use abode_clock::Clock;
use abode_store::*;

use crate::common::*;

/// A state's bytes; what they hold does not matter to the store, which is
/// told the placement.
const STATE: &[u8] = br#"{"version":4,"serial":1,"lineage":"l","resources":[]}"#;

/// Another workspace of `user` on the seed's template, its build #1 queued.
async fn another_workspace(
    store: &Store,
    user: &User,
    like: &Workspace,
    name: &str,
) -> (Workspace, Build) {
    let workspace_id = new_id();
    store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id.clone(),
                owner_id: user.id.clone(),
                name: name.into(),
                template_id: like.template_id.clone(),
                template_version_id: like.template_version_id.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                workspace_id,
                ..next_build(like, user, "start")
            },
        )
        .await
        .unwrap()
}

async fn host_of(store: &Store, workspace: &Workspace) -> Option<String> {
    store.workspace_by_id(&workspace.id).await.unwrap().host
}

async fn a_workspace_is_built_only_on_the_host_its_state_placed_it(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (user, workspace, first) = seeded(&store).await;
    assert_eq!(workspace.host, None);

    // Placed nowhere yet: any host claims its build, and the job records
    // which; the state its run writes places the workspace there.
    let claimed = store
        .claim_tagged_job("embedded-0", "server-a", "host-a", 60_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.build_id, first.id);
    assert!(store
        .put_state_replacing(
            &workspace.id,
            &first.id,
            STATE,
            None,
            Placement::WritersHost
        )
        .await
        .unwrap());
    assert_eq!(host_of(&store, &workspace).await.as_deref(), Some("host-a"));
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();

    // Its next build waits behind nothing on another host: that host takes
    // the next job in line (a workspace placed nowhere), never this one.
    let stop = store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    hand.advance(Duration::from_secs(1));
    let (_other, other_first) = another_workspace(&store, &user, &workspace, "other").await;
    let taken = store
        .claim_tagged_job("embedded-0", "server-b", "host-b", 60_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.build_id, other_first.id);
    assert!(store
        .claim_tagged_job("embedded-0", "server-b", "host-b", 60_000, &[])
        .await
        .unwrap()
        .is_none());
    let taken = store
        .claim_tagged_job("embedded-0", "server-a", "host-a", 60_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.build_id, stop.id);

    // A state with nothing host-local places it nowhere...
    assert!(store
        .put_state_replacing(
            &workspace.id,
            &stop.id,
            b"{}",
            Some(STATE),
            Placement::Nowhere
        )
        .await
        .unwrap());
    assert_eq!(host_of(&store, &workspace).await, None);
    store
        .finish_build(&stop.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();

    // ...but a delete's keeps it where it was: what it retained is there.
    let start_again = store
        .create_build(&next_build(&workspace, &user, "start"))
        .await
        .unwrap();
    store
        .claim_tagged_job("embedded-0", "server-a", "host-a", 60_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .put_state_replacing(
            &workspace.id,
            &start_again.id,
            STATE,
            Some(b"{}"),
            Placement::WritersHost
        )
        .await
        .unwrap());
    store
        .finish_build(&start_again.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let delete = store
        .create_build(&next_build(&workspace, &user, "delete"))
        .await
        .unwrap();
    store
        .claim_tagged_job("embedded-0", "server-a", "host-a", 60_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .put_state_replacing(
            &workspace.id,
            &delete.id,
            b"{}",
            Some(STATE),
            Placement::Nowhere
        )
        .await
        .unwrap());
    assert_eq!(host_of(&store, &workspace).await.as_deref(), Some("host-a"));
}

/// A fenced write (Terraform's own, through the state backend) places the
/// workspace in the same transaction; a fenced-off one places nothing.
async fn a_fenced_state_write_places_its_workspace(store: Store) {
    let (_, workspace, build) = seeded(&store).await;
    store
        .claim_tagged_job("embedded-0", "server-a", "host-a", 60_000, &[])
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .take_state_lock(&workspace.id, &build.id, "server-a", "run-1")
        .await
        .unwrap());
    let fenced = store
        .put_state_fenced(
            &workspace.id,
            &build.id,
            &StateFence {
                secret_hash: "another-run",
                terraform_lock_id: None,
            },
            STATE,
            None,
            Placement::WritersHost,
        )
        .await
        .unwrap();
    assert_eq!(fenced, FencedWrite::Fenced);
    assert_eq!(host_of(&store, &workspace).await, None);
    let written = store
        .put_state_fenced(
            &workspace.id,
            &build.id,
            &StateFence {
                secret_hash: "run-1",
                terraform_lock_id: None,
            },
            STATE,
            None,
            Placement::WritersHost,
        )
        .await
        .unwrap();
    assert_eq!(written, FencedWrite::Written);
    assert_eq!(host_of(&store, &workspace).await.as_deref(), Some("host-a"));
}

async fn a_build_waiting_for_an_absent_host_is_noted_once(store: Store) {
    let start = 1_000_000_000_000;
    let (clock, hand) = Clock::manual(start);
    let store = store.with_clock(clock);
    let (user, workspace, first) = seeded(&store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    assert!(store
        .move_workspace(&workspace.id, None, "host-a")
        .await
        .unwrap());
    let waiting = store
        .create_build(&next_build(&workspace, &user, "start"))
        .await
        .unwrap();
    store
        .beat_provisioners(
            &ProvisionerBeat {
                server_id: "server-a",
                host: "host-a",
                kind: ProvisionerKind::Embedded,
                tags: "{}",
                version: "0.1.0",
            },
            &["embedded-0".to_string()],
            0,
        )
        .await
        .unwrap();
    let since = start - 60_000;
    assert!(store.host_is_live("host-a", since).await.unwrap());
    assert!(!store.host_is_live("host-b", since).await.unwrap());
    assert!(store
        .jobs_waiting_for_absent_hosts(since)
        .await
        .unwrap()
        .is_empty());
    let listed = store.list_provisioner_page(None, 10).await.unwrap();
    assert_eq!(listed.items[0].host, "host-a");

    // Its host silent for a lease: noted once, whoever notes it.
    hand.advance(Duration::from_secs(120));
    let since = start + 60_000;
    assert!(!store.host_is_live("host-a", since).await.unwrap());
    assert_eq!(
        store.jobs_waiting_for_absent_hosts(since).await.unwrap(),
        [(waiting.id.clone(), "host-a".to_string())]
    );
    assert!(store
        .note_waiting_for_host(&waiting.id, "host-a")
        .await
        .unwrap());
    assert!(!store
        .note_waiting_for_host(&waiting.id, "host-a")
        .await
        .unwrap());
    assert!(store
        .jobs_waiting_for_absent_hosts(since)
        .await
        .unwrap()
        .is_empty());
}

async fn a_move_is_made_over_the_host_it_was_seen_on_with_no_build_under_way(store: Store) {
    let (user, workspace, first) = seeded(&store).await;
    assert!(
        !store
            .move_workspace(&workspace.id, None, "host-b")
            .await
            .unwrap(),
        "its build #1 is pending"
    );
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    assert!(store
        .move_workspace(&workspace.id, None, "host-b")
        .await
        .unwrap());
    assert_eq!(host_of(&store, &workspace).await.as_deref(), Some("host-b"));
    assert!(
        !store
            .move_workspace(&workspace.id, None, "host-c")
            .await
            .unwrap(),
        "it is on host-b now"
    );
    assert!(store
        .move_workspace(&workspace.id, Some("host-b"), "host-c")
        .await
        .unwrap());
    store
        .create_build(&next_build(&workspace, &user, "stop"))
        .await
        .unwrap();
    assert!(!store
        .move_workspace(&workspace.id, Some("host-c"), "host-b")
        .await
        .unwrap());
    assert_eq!(host_of(&store, &workspace).await.as_deref(), Some("host-c"));
}

/// A workspace on an earlier id of a server and one on a daemon, then the
/// server started under a new id: how many moved, and where each is.
async fn started_under_a_new_id(store: &Store) -> (u64, Option<String>, Option<String>) {
    let (user, workspace, first) = seeded(store).await;
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    let (on_daemon, daemon_first) = another_workspace(store, &user, &workspace, "d").await;
    store
        .finish_build(&daemon_first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    assert_eq!(store.place_on_this_server("server-old").await.unwrap(), 0);
    for (moved, host) in [(&workspace, "server-old"), (&on_daemon, "d1-0a1b2c3d")] {
        assert!(store.move_workspace(&moved.id, None, host).await.unwrap());
    }
    let placed = store.place_on_this_server("server-new").await.unwrap();
    // Started again under the same id: nothing more to do.
    assert_eq!(store.place_on_this_server("server-new").await.unwrap(), 0);
    (
        placed,
        host_of(store, &workspace).await,
        host_of(store, &on_daemon).await,
    )
}

/// On SQLite, whose database is one data dir's own, an earlier id of its
/// server is the same server (a copy given a new id, a restore): its
/// workspaces follow the new id; a daemon's stay where they are.
#[tokio::test]
async fn an_sqlite_server_given_a_new_id_keeps_its_workspaces() {
    let (_dir, store) = open().await;
    let (placed, server_s, daemon_s) = started_under_a_new_id(&store).await;
    assert_eq!(placed, 1);
    assert_eq!(server_s.as_deref(), Some("server-new"));
    assert_eq!(daemon_s.as_deref(), Some("d1-0a1b2c3d"));
}

/// On PostgreSQL, shared by servers, another id is another server (a copy
/// beside the original): nothing moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_server_given_a_new_id_takes_no_workspace() {
    let store = open_postgres().await.unwrap();
    let (placed, server_s, daemon_s) = started_under_a_new_id(&store).await;
    assert_eq!(placed, 0);
    assert_eq!(server_s.as_deref(), Some("server-old"));
    assert_eq!(daemon_s.as_deref(), Some("d1-0a1b2c3d"));
}

on_every_backend!(
    a_workspace_is_built_only_on_the_host_its_state_placed_it,
    a_fenced_state_write_places_its_workspace,
    a_build_waiting_for_an_absent_host_is_noted_once,
    a_move_is_made_over_the_host_it_was_seen_on_with_no_build_under_way,
);

/// Rows as the previous release wrote them: three workspaces, each with a
/// succeeded build whose job a holder claimed and whose state it wrote.
const OLD_ROWS: [&str; 3] = [
    "INSERT INTO users (id, username, email, role, password_hash, created_at) \
     VALUES ('u1', 'alice', 'alice@example.com', 'owner', 'x', 1000)",
    "INSERT INTO templates (id, name, active_version_id, created_at, updated_at) \
     VALUES ('t1', 'local', 'v1', 1000, 1000)",
    "INSERT INTO template_versions (id, template_id, number, archive, archive_sha256, message, \
     created_by, validation_ok, validation_message, created_at) \
     VALUES ('v1', 't1', 1, 'x', 'x', 'm', 'u1', TRUE, 'ok', 1000)",
];

/// Each workspace: its name, the holder of its build's job, and a state
/// written as Terraform writes it.
fn old_workspaces() -> [(&'static str, &'static str, String); 4] {
    let state = |resource_type: &str| {
        format!(
            "{{\n  \"version\": 4,\n  \"serial\": 3,\n  \"lineage\": \"l\",\n  \"resources\": [\n    {{\n      \
             \"mode\": \"managed\",\n      \"type\": \"{resource_type}\",\n      \"name\": \"home\",\n      \
             \"provider\": \"provider[\\\"registry.terraform.io/abode/abode\\\"]\",\n      \
             \"instances\": [{{}}]\n    }}\n  ]\n}}\n"
        )
    };
    [
        ("on-server", "server-a", state("abode_volume")),
        (
            "on-daemon",
            "provisioner:k-1/builders/d1-0a1b2c3d",
            state("abode_process"),
        ),
        ("nothing-local", "server-a", state("terraform_data")),
        // Built last under an earlier id of the server.
        ("on-an-earlier-id", "server-before", state("abode_volume")),
    ]
}

trait OldDatabase {
    async fn exec(&self, statement: &str, values: &[&str], state: Option<&[u8]>);
}

impl OldDatabase for sqlx::SqlitePool {
    async fn exec(&self, statement: &str, values: &[&str], state: Option<&[u8]>) {
        let mut query = sqlx::query(statement);
        for value in values {
            query = query.bind(*value);
        }
        if let Some(state) = state {
            query = query.bind(state);
        }
        query.execute(self).await.unwrap();
    }
}

impl OldDatabase for sqlx::PgPool {
    async fn exec(&self, statement: &str, values: &[&str], state: Option<&[u8]>) {
        let statement = numbered(statement);
        let mut query = sqlx::query(&statement);
        for value in values {
            query = query.bind(*value);
        }
        if let Some(state) = state {
            query = query.bind(state);
        }
        query.execute(self).await.unwrap();
    }
}

/// `?` placeholders as `$1, $2, ...`.
fn numbered(statement: &str) -> String {
    let mut out = String::new();
    for (index, part) in statement.split('?').enumerate() {
        if index > 0 {
            out.push_str(&format!("${index}"));
        }
        out.push_str(part);
    }
    out
}

async fn fill_old(db: &impl OldDatabase) {
    for statement in OLD_ROWS {
        db.exec(statement, &[], None).await;
    }
    for (name, holder, state) in old_workspaces() {
        let (build, job) = (format!("{name}-b1"), format!("{name}-j1"));
        db.exec(
            "INSERT INTO workspaces (id, owner_id, name, template_id, template_version_id, \
             parameters, deleted, created_at, updated_at) \
             VALUES (?, 'u1', ?, 't1', 'v1', '{}', FALSE, 1000, 1000)",
            &[name, name],
            None,
        )
        .await;
        db.exec(
            "INSERT INTO builds (id, workspace_id, number, transition, status, \
             template_version_id, initiator_id, reason, created_at) \
             VALUES (?, ?, 1, 'start', 'succeeded', 'v1', 'u1', 'create', 1000)",
            &[&build, name],
            None,
        )
        .await;
        db.exec(
            "INSERT INTO jobs (id, build_id, status, created_at, lease_holder) \
             VALUES (?, ?, 'done', 1000, ?)",
            &[&job, &build, holder],
            None,
        )
        .await;
        db.exec(
            "INSERT INTO workspace_states (workspace_id, build_id, state, updated_at) \
             VALUES (?, ?, ?, 1000)",
            &[name, &build],
            Some(state.as_bytes()),
        )
        .await;
    }
}

/// `earlier`: where the workspace built under an earlier id of the server
/// is once the server started (SQLite: its database is that server's own).
async fn placed_after_the_upgrade(store: &Store, earlier: &str) {
    // The server's first start under this release, as `server-a`.
    store.place_on_this_server("server-a").await.unwrap();
    let expected = [
        ("on-server", Some("server-a")),
        ("on-daemon", Some("d1-0a1b2c3d")),
        ("nothing-local", None),
        ("on-an-earlier-id", Some(earlier)),
    ];
    for (name, host) in expected {
        let workspace = store.workspace_by_id(name).await.unwrap();
        assert_eq!(workspace.host.as_deref(), host, "{name}");
    }
}

/// The previous release's workspaces are placed on the host whose run wrote
/// their state, when it holds a volume or a process (SQLite).
#[tokio::test]
async fn an_sqlite_database_of_the_previous_release_places_its_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abode.db");
    let pool = sqlite_pool(&path).await;
    migrations_before("sqlite", 36)
        .await
        .run(&pool)
        .await
        .unwrap();
    fill_old(&pool).await;
    pool.close().await;
    let store = Store::open_sqlite(&path).await.unwrap();
    placed_after_the_upgrade(&store, "server-a").await;
}

/// The same upgrade on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_database_of_the_previous_release_places_its_workspaces() {
    let url = postgres_schema_url().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    migrations_before("postgres", 36)
        .await
        .run(&pool)
        .await
        .unwrap();
    fill_old(&pool).await;
    pool.close().await;
    let store = Store::open_postgres(&url).await.unwrap();
    placed_after_the_upgrade(&store, "server-before").await;
}
