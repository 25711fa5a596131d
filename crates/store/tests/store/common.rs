//! What every domain's store tests share: opening a store on each backend
//! (SQLite in a temporary file, PostgreSQL in a fresh schema), the usual
//! seed, and `on_every_backend!`, which runs each behaviour on both.

use abode_store::*;

pub(crate) async fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("abode.db"))
        .await
        .unwrap();
    (dir, store)
}

/// A fresh PostgreSQL schema of the database at ABODE_TEST_POSTGRES_URL, or
/// None (with a note) when the variable is not set.
pub(crate) async fn open_postgres() -> Option<Store> {
    Some(
        Store::open_postgres(&postgres_schema_url().await)
            .await
            .unwrap(),
    )
}

/// The URL of a fresh, empty schema of the database at ABODE_TEST_POSTGRES_URL.
pub(crate) async fn postgres_schema_url() -> String {
    let Ok(url) = std::env::var("ABODE_TEST_POSTGRES_URL") else {
        panic!(
            "ABODE_TEST_POSTGRES_URL is not set: the PostgreSQL variants need a server \
             (scripts/run-tests starts one; by hand: source scripts/postgres.sh; abode_start_postgres)"
        );
    };
    let schema = format!("abode_test_{}", new_id().replace('-', ""));
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

/// A pool on the SQLite file at `path`, without the store (to write rows
/// as an older server did).
pub(crate) async fn sqlite_pool(path: &std::path::Path) -> sqlx::SqlitePool {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .foreign_keys(true);
    sqlx::SqlitePool::connect_with(options).await.unwrap()
}

/// The backend's migrations with a version below `version`, as an older
/// server shipped them.
pub(crate) async fn migrations_before(backend: &str, version: i64) -> sqlx::migrate::Migrator {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut migrator = sqlx::migrate::Migrator::new(dir).await.unwrap();
    let kept: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|migration| migration.version < version)
        .cloned()
        .collect();
    assert!(kept
        .iter()
        .any(|migration| migration.version == version - 1));
    migrator.migrations = std::borrow::Cow::Owned(kept);
    migrator
}

pub(crate) fn new_user(name: &str) -> NewUser {
    NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        roles: Roles::from([Role::Owner, Role::Member]),
        password_hash: "x".into(),
    }
}

/// A user, a template with one version and a workspace whose build #1 is queued.
pub(crate) async fn seeded(store: &Store) -> (User, Workspace, Build) {
    let user = store.create_first_user(&new_user("alice")).await.unwrap();
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![1, 2, 3],
            archive_sha256: "abc".into(),
            message: "first".into(),
            created_by: user.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: None,
            presets: None,
            activate: false,
        })
        .await
        .unwrap();
    let workspace_id = new_id();
    let (workspace, build) = store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id.clone(),
                owner_id: user.id.clone(),
                name: "dev".into(),
                template_id: template.id.clone(),
                template_version_id: version.id.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                id: new_id(),
                workspace_id,
                transition: Transition::Start,
                template_version_id: version.id.clone(),
                initiator_id: user.id.clone(),
                reason: BuildReason::Initiator,
                parameters: None,
                workspace_parameters: None,
                retention: None,
                rename_to: None,
                then_start: false,
            },
        )
        .await
        .unwrap();
    (user, workspace, build)
}

pub(crate) fn next_build(workspace: &Workspace, user: &User, transition: &str) -> NewBuild {
    NewBuild {
        id: new_id(),
        workspace_id: workspace.id.clone(),
        transition: transition.parse().unwrap(),
        template_version_id: workspace.template_version_id.clone(),
        initiator_id: user.id.clone(),
        reason: BuildReason::Initiator,
        parameters: None,
        workspace_parameters: None,
        retention: None,
        rename_to: None,
        then_start: false,
    }
}

/// Each behaviour as a test on SQLite and one on PostgreSQL: invoked in a
/// module with that module's behaviours, it makes `on_sqlite::NAME` and
/// `on_postgres::NAME` for each.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let (_dir, store) = crate::common::open().await;
                    super::$name(store).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    if let Some(store) = crate::common::open_postgres().await {
                        super::$name(store).await;
                    }
                }
            )*
        }
    };
}

pub(crate) use on_every_backend;

/// A guard report as the guard writes it, with `decision` and no changes.
pub(crate) fn report(decision: abode_guard::Decision) -> abode_guard::Report {
    abode_guard::Report {
        schema_version: abode_guard::REPORT_SCHEMA_VERSION,
        decision,
        transition: abode_guard::BuildIntent::Start,
        initiator: abode_guard::Initiator::Person,
        terraform_version: Some("1.9.0".into()),
        older_plan_format: None,
        summary: abode_guard::Summary::default(),
        protected_changes: Vec::new(),
        unprotected_destroys: Vec::new(),
        claim_replacements: Vec::new(),
        retained: Vec::new(),
        warnings: vec!["a warning".into()],
    }
}
