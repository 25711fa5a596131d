//! Abode's storage: the only crate that speaks SQL.
//!
//! The domain (`abode-control`) talks to one type, [`Store`], whose methods are
//! the whole storage interface. Behind it sits one backend per database; today
//! SQLite (embedded, under the data dir, the default) and PostgreSQL, each with
//! its own migrations folder. The queries they share are written once, by
//! domain, each file a macro expanded inside each backend's `impl` (the
//! domains are below). Their text is a portable dialect (`?`
//! placeholders, `TRUE`/`FALSE`, `RETURNING`, `ON CONFLICT`) that each
//! backend's `sql()` adapts (PostgreSQL numbers its placeholders);
//! backend-specific statements (opening, migrations, the job claim) stay in
//! the backend's own module. Queries are runtime-checked (`sqlx::query`), so
//! building never needs a live database.
//!
//! Records returned here are plain data with names already joined in (owner
//! name, template name, version number), so that callers need no second query to
//! present them. Secrets never leave in a general record: the plan JSON and the
//! Terraform state have their own getters.
//!
//! # Domains
//!
//! Each file holds its domain's queries (a macro both backends' `impl` expand),
//! column lists and row types: `users.rs` (users, the first user),
//! `accounts.rs` (account status changes under the owners' lock, sightings, the
//! dormancy sweep), `roles.rs` (roles as a set per user, written with the user;
//! the last owner keeps `owner`), `groups.rs` (groups, members, template access
//! lists), `tokens.rs` (sessions and API tokens), `templates.rs` (templates and
//! versions, and the lint's findings each version keeps, read by their own
//! getter), `previews.rs` (fleet previews: the workspaces a preview covers
//! chosen and ordered in the statement that records it, its results as a queue
//! of their own under a lease), `provisioners.rs` (every server's provisioners'
//! heartbeats, listed with the job each holds), `provisioner_keys.rs` (the
//! daemons' keys, found by the SHA-256 of the secret, which is all that is
//! stored), `workspaces.rs` (workspaces and the one-query workspace page),
//! `builds.rs` (builds, jobs, logs, Terraform state, plan JSON), `held.rs`
//! (held builds, confirmation, expiry, saved plans, protections), `agents.rs`,
//! `app_tokens.rs` (subdomain apps' sign-in codes and sessions, as hashes),
//! `port_shares.rs` (shared ports), `platform.rs` (the platform's counts for
//! metrics, one query), `audit.rs`, `notifications.rs` (the outbox: messages
//! per recipient and channel, a dedupe key, the leased claim, retries, the
//! inbox's read flag), `prebuilds.rs` (the reconciliation's snapshot in one
//! transaction, budget facts and episodes included, the claim of a ready
//! prebuild, platform settings, and leases of work one server at a time does),
//! `quotas.rs` (allowances, costs, the reservation), `job_leases.rs` (which
//! server holds each claimed job), `state_locks.rs` (the fence of each
//! workspace's state), `server_instances.rs` (which process runs as each server
//! id), `scheduler_tick.rs` (the scheduler's snapshot and what a tick records),
//! `schedule_settings.rs`, `unsaved.rs` (each workspace's last report of
//! unsaved work, kept past a stop), `build_timings.rs` (each stage of a build and each Terraform resource's plan
//! and apply, issue 50), `connection_log.rs` (connections into
//! workspaces, written at open and completed at close), `host_keys.rs` (each workspace's SSH host key seed,
//! created once, its own getter), `external_auth.rs` (linked accounts, their
//! tokens sealed), `oidc.rs` (links to a provider's issuer and subject, pending
//! sign-ins and codes, taken once), `retained.rs` (retained resources: records written
//! `pending` with a delete's judged plan, settled `open` or `void` against the
//! state it left, a retained destroy's build queued with the state holding only
//! that resource). `pages.rs` is the cursor pagination, `records.rs` and
//! `stored.rs` the record types and how a stored value is read, `backup.rs` the
//! SQLite data dir's backup (`VACUUM INTO` through a read-only connection,
//! renamed into place when whole, with its SHA-256) and the check of a restored
//! database (read-only, never migrated). `error.rs` is `StoreError` and the
//! one mapping from the driver's errors, `named.rs` the `named!` macro and
//! `ids.rs` a new row's id: the domains share them and they name no domain.
//! `lib.rs` lists the `Store` methods in the same order and names no helper a
//! domain needs back; `sqlite.rs` and `postgres.rs` hold what differs. One set of
//! tests (`tests/store/`, a module per domain) runs every behaviour on both
//! backends.
//!
//! # What it keeps
//!
//! - Only the store speaks SQL, and domain code does not know which database it
//!   talks to. A missing row becomes a typed `NotFound` and a unique violation
//!   a typed `Conflict`, in one place.
//! - A write the database did not commit is an error, never reported done.
//!   SQLite commits a statement outside a transaction only when it has run to
//!   its end, so a write's `RETURNING` rows are read with `fetch_all`
//!   (`returned_row`), never `fetch_one`; a connection SQLite left without the
//!   transaction sqlx counts (a full disk rolls it back) is closed when it
//!   comes back to the pool (`sqlite.rs`, `after_release`).
//!   `StoreError::is_transient` tells a database that could not write now
//!   (unreachable, full, busy) from one that refused what was asked;
//!   `tests/store/full_disk.rs` fills a real tmpfs.
//! - State is typed at this boundary: every stored vocabulary (build status and
//!   reason, job kind, agent lifecycle, role, token kind, notification kind,
//!   channel and status) is declared once through `named!` (its names, `ALL`,
//!   `Display`, `FromStr`) and read through `stored_by_name!`, and a value the
//!   code does not know fails the read with an error naming it. A value kept as
//!   JSON text is read once, in the row mapping (`stored.rs`), as its type (a
//!   guard `Report`, `Parameters`, `ParameterDefinition`s); one that does not
//!   read fails with `StoreError::Corrupt`, naming the value and its row, never
//!   a default.
//! - A quota is checked and a build's cost reserved in one write transaction
//!   that first locks the owner's account row (`reserve_build_cost`): of two
//!   builds of one owner racing for the last of a budget, the second sees the
//!   first's reservation (raced 20 times on both backends; without the lock
//!   PostgreSQL let both pass). A workspace costs its newest build that has a
//!   cost and did not fail or get canceled; a refused one keeps what it was
//!   refused for in `refused_cost`. A prebuild claim is judged the same way
//!   before the workspace changes hands.
//! - At most one pending, running or awaiting build per workspace, by a
//!   database index; a job is claimed by exactly one worker (one `UPDATE ...
//!   RETURNING`, `SKIP LOCKED` on PostgreSQL).
//! - An event is recorded in the transaction of the change that caused it (the
//!   outbox), and a message whose lease ran out is claimed again with the same
//!   id: delivery is at least once.
//! - A state is written only in the transaction that finds its run still
//!   holding the workspace's state lock (`FOR UPDATE` on PostgreSQL).
//! - Saved plans, states and plan JSON never leave through a general record;
//!   they have their own getters.
//! - Lists are one query per page (`pages.rs`): read in their sort key's order,
//!   at most `MAX_PAGE_SIZE` rows, continued by an opaque cursor the store
//!   alone encodes and checks; a workspace page carries what a view needs, so
//!   listing costs the same for 10 workspaces as for 10,000
//!   (`benches/list-workspaces.sh`).
//! - A database the previous release wrote upgrades in place. Migrations are
//!   append-only (a shipped file is never edited), and rows written before a
//!   change must read under the new code. `crates/abode/tests/e2e_upgrade.rs`
//!   holds it: `tests/e2e_fixtures/schema-<commit>/` keeps the migrations the
//!   previous release shipped, checked unchanged, and a database made with them
//!   is served and confirmed by the new server. At a release, point the fixture
//!   at the new release's migrations.
//! - The store hands out a token's row with its times and never judges it by
//!   the clock: whether a token is still good is the domain's policy. The times
//!   it writes itself come from the `Clock` it was given, never from the
//!   system.

/// Declares a struct read from a query's row column by column: each field
/// from the column of its name, or the one after `=`, or, after `= flatten`,
/// from the whole row as its own type reads it. What sqlx's `FromRow`
/// derive writes, for both backends, without compiling sqlx's proc macros.
macro_rules! from_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident : $ty:ty $(= $column:tt)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }
        from_row!(@impl $name sqlx::sqlite::SqliteRow { $( $field $(= $column)? ),* });
        from_row!(@impl $name sqlx::postgres::PgRow { $( $field $(= $column)? ),* });
    };
    (@impl $name:ident $row:ty { $( $field:ident $(= $column:tt)? ),* }) => {
        impl<'r> sqlx::FromRow<'r, $row> for $name {
            fn from_row(row: &'r $row) -> Result<Self, sqlx::Error> {
                Ok($name {
                    $( $field: from_row!(@get row $field $($column)?), )*
                })
            }
        }
    };
    (@get $row:ident $field:ident flatten) => { sqlx::FromRow::from_row($row)? };
    (@get $row:ident $field:ident $column:literal) => { sqlx::Row::try_get($row, $column)? };
    (@get $row:ident $field:ident) => { sqlx::Row::try_get($row, stringify!($field))? };
}

mod accounts;
mod agents;
mod app_tokens;
mod audit;
pub mod backup;
mod build_timings;
mod builds;
mod connection_log;
mod error;
mod external_auth;
mod groups;
mod held;
mod host_keys;
mod ids;
mod job_leases;
mod migrations;
mod named;
mod notifications;
mod oidc;
mod pages;
mod platform;
mod port_shares;
mod postgres;
mod prebuilds;
mod previews;
mod provisioner_keys;
mod provisioners;
mod quotas;
mod records;
mod retained;
mod roles;
mod schedule_settings;
mod scheduler_tick;
mod scripts;
mod server_instances;
mod shares;
mod shutdowns;
mod sqlite;
mod state_locks;
mod stored;
mod templates;
mod token_scope;
mod tokens;
mod unsaved;
mod users;
mod workspace_uids;
mod workspaces;

use std::path::Path;

use abode_clock::Clock;

pub use accounts::{StatusChange, StatusRefusal};
pub use agents::AgentTunnelRow;
pub use app_tokens::AppTokenKind;
pub use build_timings::{BuildTimings, ResourceTiming, StageTiming};
pub use connection_log::{ConnectionLogEntry, ConnectionLogFilter, NewConnectionLogEntry};
pub use error::{BadCursor, Corrupt, StoreError};
pub use external_auth::{ExternalAuthLink, PendingExternalAuth};
pub use groups::{
    AccessSubject, Group, GroupMember, GroupSource, GroupSync, NewGroup, TemplateAccessEntry,
    TemplateRole, UnknownGroupSource, UnknownTemplateRole, EVERYONE_GROUP, EVERYONE_GROUP_ID,
};
pub use held::{SavedPlanState, UnknownSavedPlanState};
pub use ids::new_id;
pub use job_leases::{ExpiredJobLease, JobAnnouncements};
pub use notifications::{
    Channel, FailedNotification, InboxFilter, NewNotification, Notification, NotificationKind,
    NotificationStatus, UnknownChannel, UnknownNotificationKind, UnknownNotificationStatus,
};
pub use oidc::MAX_OIDC_PENDING;
pub use pages::{
    page_size, LostLock, Page, SettledBuild, WorkspaceFilter, WorkspaceSummary, DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
};
pub use platform::{AgentCutoffs, PlatformCounts};
pub use port_shares::PortShare;
pub use prebuilds::{
    PoolCost, PoolFailures, PrebuildClaim, PrebuildClaimed, PrebuildRow, PrebuildSnapshot,
    QuotaEpisode, VersionPresets, PREBUILDS_PAUSED,
};
pub use previews::{
    ClaimedPreview, NewPreview, Preview, PreviewOutcome, PreviewResult, PreviewStatus,
    UnknownPreviewStatus,
};
pub use provisioner_keys::{NewProvisionerKey, ProvisionerKeyRow};
pub use provisioners::{ProvisionerBeat, ProvisionerKind, ProvisionerRow, UnknownProvisionerKind};
pub use quotas::{GroupAllowance, QuotaUsage, Reservation, WorkspaceCost};
pub use records::*;
pub use retained::{
    NewRetained, NewSnapshot, RetainedResource, RetainedStatus, UnknownRetainedStatus,
    SNAPSHOT_KIND,
};
pub use roles::{check_role_change, Role, RoleChange, RoleRefusal, Roles, UnknownRole};
pub use schedule_settings::{TemplatePolicy, WorkspaceLifecycle};
pub use scheduler_tick::{TickRow, TickSnapshot};
pub use scripts::{ScriptRunReport, ScriptRunRow};
pub use server_instances::ServerInstance;
pub use shares::{ShareEntry, ShareRole, ShareSubject, UnknownShareRole};
pub use shutdowns::{AgentDiskRow, AgentShutdownRow, NewAgentShutdown, ShutdownTarget};
pub use state_locks::{FencedWrite, StateFence, StateLock};
pub use token_scope::{ScopeError, ScopeGrant, ScopeKind, ScopeObjects, TokenScope, UnknownScope};
pub use tokens::{Credential, NewApiToken, TokenKind, TokenRecord, UnknownTokenKind};
pub use unsaved::UnsavedReportRow;

/// A typed value stored as its name: the contract's `stored_as_text!`.
#[doc(hidden)]
pub use abode_contract::stored_as_text as stored_by_name;

/// The databases Abode can keep its data in.
#[derive(Clone)]
enum Backend {
    Sqlite(sqlite::SqliteBackend),
    Postgres(postgres::PostgresBackend),
}

/// Handle to Abode's database; cheap to clone (a connection pool inside).
#[derive(Clone)]
pub struct Store {
    backend: Backend,
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path`, with WAL,
    /// foreign keys and a busy timeout, and applies pending migrations.
    pub async fn open_sqlite(path: &Path) -> Result<Store, StoreError> {
        let backend = sqlite::SqliteBackend::open(path).await?;
        Ok(Store {
            backend: Backend::Sqlite(backend),
        })
    }

    /// Connects to PostgreSQL (`postgres://...`) and applies pending migrations.
    pub async fn open_postgres(url: &str) -> Result<Store, StoreError> {
        let backend = postgres::PostgresBackend::open(url).await?;
        Ok(Store {
            backend: Backend::Postgres(backend),
        })
    }

    /// The store with its times (created, finished, audited, ...) read
    /// from `clock` instead of the system's: the server gives it the
    /// control plane's clock, so that one clock dates everything.
    pub fn with_clock(mut self, clock: Clock) -> Store {
        match &mut self.backend {
            Backend::Sqlite(backend) => backend.clock = clock,
            Backend::Postgres(backend) => backend.clock = clock,
        }
        self
    }

    /// The clock the store dates its writes with.
    pub fn clock(&self) -> &Clock {
        match &self.backend {
            Backend::Sqlite(backend) => &backend.clock,
            Backend::Postgres(backend) => &backend.clock,
        }
    }

    /// Tells the idle workers of every server on this database that a job was
    /// queued (PostgreSQL `NOTIFY`); nothing on SQLite, whose one server wakes
    /// its own workers.
    pub async fn announce_job_queued(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(backend) => backend.announce_job_queued().await,
        }
    }

    /// A subscription to [`Store::announce_job_queued`] from any server
    /// (PostgreSQL `LISTEN`); `None` on SQLite.
    pub async fn job_announcements(&self) -> Result<Option<JobAnnouncements>, StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(backend) => backend.job_announcements().await.map(Some),
        }
    }

    /// Places on `server_id` the workspaces an earlier id of this server
    /// placed, on SQLite, whose database is one data dir's own: a copy given
    /// a new id (`abode server new-id`), a restore on a fresh data dir or a
    /// lost `server-id` file is the same server, with the volumes the
    /// database's workspaces have. Nothing on PostgreSQL, where another id is
    /// another server (a copy beside the original keeps none of its
    /// workspaces). How many it placed.
    pub async fn place_on_this_server(&self, server_id: &str) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(backend) => backend.place_on_this_server(server_id).await,
            Backend::Postgres(_) => Ok(0),
        }
    }

    /// [`Store::claim_tagged_job`] for a server's provisioner without tags
    /// (the server's id is its host): only jobs whose version needs none.
    pub async fn claim_job(
        &self,
        worker: &str,
        holder: &str,
        lease_ms: i64,
    ) -> Result<Option<ClaimedJob>, StoreError> {
        self.claim_tagged_job(worker, holder, holder, lease_ms, &[])
            .await
    }

    /// Whether the database answers a query now (the readiness probe's
    /// question: a server that cannot reach it should get no traffic).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(backend) => backend.ping().await,
            Backend::Postgres(backend) => backend.ping().await,
        }
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(backend) => backend.close().await,
            Backend::Postgres(backend) => backend.close().await,
        }
    }
}

/// Generates the `Store` methods that forward to the backend: the list below is
/// the storage interface every backend implements.
macro_rules! storage_interface {
    ($( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident : $ty:ty)* ) -> $ret:ty; )*) => {
        impl Store {
            $(
                $(#[$doc])*
                pub async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, StoreError> {
                    match &self.backend {
                        Backend::Sqlite(backend) => backend.$name($($arg),*).await,
                        Backend::Postgres(backend) => backend.$name($($arg),*).await,
                    }
                }
            )*
        }
    };
}

// Lists (`list_*_page`): each page is one query, continued with the previous
// page's `next` (pages.rs); `BadCursor` for a cursor the list did not hand out.

// ---- users (users.rs) ----

storage_interface! {
    /// Creates the first user; `Conflict("first user")` once any user exists.
    fn create_first_user(&self, user: &NewUser) -> User;
    /// `Conflict("username")` if the name is taken.
    fn create_user(&self, user: &NewUser) -> User;
    /// Makes sure the system actors' reserved accounts exist (at every
    /// start); a person who held a reserved name is renamed, and each
    /// rename is returned as (old, new) for the server to tell.
    fn ensure_system_users(&self) -> Vec<(String, String)>;
    fn user_by_name(&self, username: &str) -> User;
    fn user_by_id(&self, id: &str) -> User;
    /// Sets a person's password and ends their sessions, in one
    /// transaction; how many sessions ended. `NotFound("user")` for a system
    /// actor's account or an unknown id.
    /// `keep_session`: the id of a session that stays (a person changing
    /// their own password keeps the one they did it with).
    fn set_password(&self, user_id: &str, password_hash: &str, now: i64, keep_session: Option<&str>) -> u64;
    fn create_token(&self, user_id: &str, token_hash: &str) -> ();
    /// Users by username; deleted accounts only with `include_deleted`.
    fn list_user_page(&self, after: Option<&str>, limit: i64, include_deleted: bool) -> Page<UserEntry>;
}

// ---- account status (accounts.rs) ----

storage_interface! {
    /// Suspends, activates or deletes a person (`NotFound("user")` for a
    /// system actor's account or an unknown id), checked and written in one
    /// transaction: never the last owner who can act, never someone who
    /// owns workspaces; a deletion revokes every token.
    fn set_account_status(&self, user_id: &str, status: AccountStatus, now: i64) -> Result<StatusChange, StatusRefusal>;
    /// Records a sighting at most every `now - not_since`; wakes a dormant
    /// account (true when it did).
    fn mark_seen(&self, user_id: &str, now: i64, not_since: i64) -> bool;
    /// The dormancy sweep: active people unseen since `unseen_since`
    /// become dormant; their usernames.
    fn mark_accounts_dormant(&self, unseen_since: i64) -> Vec<String>;
    /// Suspended and deleted accounts' ids: nothing is sent to them.
    fn accounts_that_may_not_act(&self) -> Vec<String>;
}

// ---- OpenID Connect (oidc.rs) ----

storage_interface! {
    /// The account linked to the provider's `issuer` and `subject`;
    /// `NotFound("user")` if none.
    fn user_by_oidc_subject(&self, issuer: &str, subject: &str) -> User;
    /// A new user, their roles and their link, in one transaction;
    /// `Conflict("username")` if the name is taken, `Conflict("oidc link")`
    /// if the subject is linked already.
    fn create_oidc_user(&self, user: &NewUser, issuer: &str, subject: &str) -> User;
    fn set_user_email(&self, user_id: &str, email: &str) -> ();
    /// Revokes every session and API token of the user; how many.
    fn end_user_tokens(&self, user_id: &str, now: i64) -> u64;
    /// Keeps a pending sign-in or one-time code (and drops the expired).
    fn put_oidc_pending(&self, key_hash: &str, payload: &str, expires_at: i64, now: i64) -> ();
    /// Removes the entry of `key_hash`; its payload if it had not expired.
    fn take_oidc_pending(&self, key_hash: &str, now: i64) -> Option<String>;
}

// ---- sessions and API tokens (tokens.rs) ----

storage_interface! {
    /// A session or API token by its hash, revoked or not: whether it is
    /// still good is the domain's policy. `NotFound("token")` if unknown.
    fn token_by_hash(&self, token_hash: &str) -> TokenRecord;
    /// A token with its user and the user's roles, in one query (every
    /// authenticated request reads it). `NotFound("token")` if unknown.
    fn credential_by_hash(&self, token_hash: &str) -> Credential;
    /// Records a use at `now` unless one was recorded at or after `not_since`.
    fn touch_token(&self, token_id: &str, now: i64, not_since: i64) -> ();
    /// Marks a token revoked; false if it already was.
    fn revoke_token(&self, token_id: &str, now: i64) -> bool;
    /// `Conflict("token name")` if the user has a live token of that name.
    fn create_api_token(&self, token: &NewApiToken) -> TokenRecord;
    /// The user's API tokens that are not revoked (expired ones included), by name.
    fn list_api_token_page(&self, user_id: &str, after: Option<&str>, limit: i64) -> Page<TokenRecord>;
    /// Revokes the user's live API token of that name; `NotFound("token")` if none.
    fn revoke_api_token(&self, user_id: &str, name: &str, now: i64) -> TokenRecord;
}

// ---- templates and their versions (templates.rs) ----

storage_interface! {
    fn template_by_name(&self, name: &str) -> Template;
    /// Deprecates the template `name` (`message`, and a replacement
    /// template's name), or undeprecates it (`None`); the template as it
    /// is now, `NotFound("template")` if there is none.
    fn set_template_deprecation(&self, name: &str, deprecation: Option<(&str, Option<&str>)>) -> Template;
    fn list_templates(&self) -> Vec<Template>;
    /// Stores a new immutable version, creating the template on its first push
    /// (whose first version is always active).
    fn create_template_version(&self, version: &NewTemplateVersion) -> (Template, TemplateVersion);
    /// The same, keeping the lint's findings (JSON, docs/lint.md) and the
    /// provisioner tags its builds need (`key=value`) with it.
    /// `everyone_may_use`: a template this version creates starts with
    /// `Everyone: use` on its access list (otherwise an empty list).
    /// `external_auth`: the providers its workspaces' owners must link.
    fn create_linted_template_version(&self, version: &NewTemplateVersion, lint: Option<&str>, provisioner_tags: &[String], everyone_may_use: bool, external_auth: &[abode_contract::external_auth::ExternalAuthNeed]) -> (Template, TemplateVersion);
    /// The providers a version asks its workspaces' owners to have linked.
    fn template_version_external_auth(&self, version_id: &str) -> Vec<abode_contract::external_auth::ExternalAuthNeed>;
    /// The provisioner tags a version's builds need, sorted.
    fn template_version_tags(&self, version_id: &str) -> Vec<String>;
    fn list_template_versions(&self, template_id: &str) -> Vec<TemplateVersion>;
    fn template_version(&self, template_id: &str, number: i64) -> TemplateVersion;
    fn template_version_by_id(&self, version_id: &str) -> TemplateVersion;
    fn template_version_archive(&self, version_id: &str) -> Vec<u8>;
    /// The lint's findings kept with a version (JSON); `None` for a version
    /// pushed before the lint existed.
    fn template_version_lint(&self, version_id: &str) -> Option<String>;
    fn activate_template_version(&self, template_id: &str, version_id: &str) -> ();
    /// Templates by name.
    /// `usable_by`: only the templates whose access list gives that user
    /// a role (by name, a group, or `Everyone`); `None`: every template.
    fn list_template_page(&self, after: Option<&str>, limit: i64, usable_by: Option<&str>) -> Page<Template>;
}

// ---- fleet previews (previews.rs) ----

storage_interface! {
    /// Records a preview with a queued result per workspace it covers (the
    /// live workspaces of the template not on the version, or the named
    /// ones), ordered by owner and name, in one transaction.
    fn create_preview(&self, preview: &NewPreview) -> Preview;
    fn preview_by_id(&self, id: &str) -> Preview;
    /// The newest preview of a version, with its counts; `whole_fleet`:
    /// the newest that covered every workspace (not named ones).
    fn latest_preview(&self, template_version_id: &str, whole_fleet: bool) -> Option<Preview>;
    /// The newest preview of the whole fleet of any version of a template
    /// with these very files (its archive's SHA-256): what activating a
    /// version, or a copy of it pushed again, is weighed by.
    fn latest_fleet_preview_of_archive(&self, template_id: &str, archive_sha256: &str) -> Option<Preview>;
    /// Takes the oldest queued result (or one whose lease ran out) for
    /// `worker` of server `holder` under a lease of `lease_ms`: only of a
    /// version whose provisioner tags are all among `tags`.
    fn claim_preview(&self, worker: &str, holder: &str, lease_ms: i64, tags: &[String]) -> Option<ClaimedPreview>;
    /// Renews the leases of the results server `holder` is planning.
    fn renew_preview_leases(&self, holder: &str, lease_ms: i64) -> u64;
    /// Records how a claimed result ended; false if `holder` no longer
    /// holds it (its lease ran out and another worker took it).
    fn finish_preview(&self, result_id: &str, holder: &str, outcome: &PreviewOutcome) -> bool;
    /// Gives back to the queue the results `holder` is planning (only
    /// `result_id`, when given): a server that stops or starts again leaves
    /// nothing waiting for a lease to run out.
    fn requeue_previews(&self, holder: &str, result_id: Option<&str>) -> u64;
    /// A preview's results in the report's order.
    fn list_preview_result_page(&self, preview_id: &str, after: Option<&str>, limit: i64) -> Page<PreviewResult>;
}

// ---- provisioners (provisioners.rs) ----

storage_interface! {
    /// Records that `names`, the workers of `beat.server_id` on
    /// `beat.host`, are alive, and forgets every row whose last heartbeat
    /// is older than `forget_before`.
    fn beat_provisioners(&self, beat: &ProvisionerBeat<'_>, names: &[String], forget_before: i64) -> ();
    /// Whether a provisioner of `host` was heard from since `beat_since`.
    fn host_is_live(&self, host: &str, beat_since: i64) -> bool;
    /// The queued jobs whose workspace is on a host no provisioner of which
    /// was heard from since `beat_since`, and whose log has not said so for
    /// that host yet, as (build id, host) rows, oldest first.
    fn jobs_waiting_for_absent_hosts(&self, beat_since: i64) -> Vec<(String, String)>;
    /// Notes that a queued job's log says it waits for `host`; false when
    /// it was noted already (by this server or another: one says it) or the
    /// job is no longer queued.
    fn note_waiting_for_host(&self, build_id: &str, host: &str) -> bool;
    /// The tags (`key=value`) of every job queued before `queued_before`
    /// whose version needs tags, as (build id, tag) rows.
    fn waiting_job_tags(&self, queued_before: i64) -> Vec<(String, Option<String>)>;
    /// The tag sets (JSON objects) of the provisioners heard from since
    /// `beat_since`.
    fn live_provisioner_tags(&self, beat_since: i64) -> Vec<String>;
    /// Every job queued before `queued_before`, with each tag its version
    /// needs (none: one row with `None`) and the note of why it waits that
    /// it has now, as (build id, tag, note) rows by build.
    fn unserved_candidates(&self, queued_before: i64) -> Vec<(String, Option<String>, Option<String>)>;
    /// Sets (or, `None`, clears) why a queued job waits; false when it
    /// said that already (by this server or another: one says it) or the
    /// job is no longer queued.
    fn note_unserved(&self, build_id: &str, note: Option<&str>) -> bool;
    /// The provisioners heard from since `beat_since`, grouped by host,
    /// kind and tags (a JSON object), with how many, by host.
    fn live_provisioner_groups(&self, beat_since: i64) -> Vec<(String, ProvisionerKind, String, i64)>;
    /// Removes a stopping server's rows.
    fn forget_provisioners(&self, server_id: &str) -> ();
    /// Every server's provisioners by server and name, each with the job it
    /// holds now.
    fn list_provisioner_page(&self, after: Option<&str>, limit: i64) -> Page<ProvisionerRow>;
}

// ---- quotas (quotas.rs) ----

storage_interface! {
    /// The user's allowances by group and the counted cost of each of
    /// their live workspaces (quotas.rs says which build counts).
    fn quota_usage(&self, user_id: &str) -> QuotaUsage;
    /// Records a judged build's daily cost while `holder` holds its job.
    /// With `enforce`, first checks in the same transaction (the owner's
    /// row locked) that the owner's other workspaces plus `cost` stay
    /// within the budget, and records nothing when they do not.
    fn reserve_build_cost(&self, build_id: &str, holder: &str, cost: i64, enforce: bool) -> Reservation;
}

// ---- retained resources (retained.rs) ----

storage_interface! {
    /// What a delete build retains (`None`: not a delete); `NotFound("build")`.
    fn build_retention(&self, build_id: &str) -> Option<DeleteRetention>;
    /// Records what a delete's judged plan forgets, `pending` until the
    /// delete ends; a record of the same build and address is kept as it is.
    fn insert_retained(&self, build_id: &str, retained_by: &str, records: &[NewRetained]) -> ();
    /// Records a snapshot whose archive is whole, `open` at once (issue 47);
    /// `NotFound("build")` if the build is gone.
    fn insert_snapshot(&self, build_id: &str, retained_by: &str, record: &NewSnapshot) -> RetainedResource;
    /// Settles the pending records of a delete that ended: `void` for an
    /// address still in the workspace's state, `open` otherwise.
    fn settle_retained(&self, build_id: &str, still_in_state: &[String]) -> Vec<RetainedResource>;
    /// `NotFound("retained resource")` if none.
    fn retained_by_id(&self, id: &str) -> RetainedResource;
    /// Records oldest first: held ones (pending, open) unless `include_closed`;
    /// only `owner_id`'s when given.
    fn list_retained_page(&self, owner_id: Option<&str>, include_closed: bool, after: Option<&str>, limit: i64) -> Page<RetainedResource>;
    /// Hands an open record to another owner; `NotFound("open retained resource")`.
    fn assign_retained(&self, id: &str, owner_id: &str) -> RetainedResource;
    /// A new expiry of an open record; `NotFound("open retained resource")`.
    fn extend_retained(&self, id: &str, expires_at: i64) -> RetainedResource;
    /// Reserves open records of `owner_id` for the workspace `adopt_for`
    /// (`OWNER_ID/NAME`) to import, all or none.
    fn reserve_retained_for(&self, ids: &[String], owner_id: &str, adopt_for: &str) -> Vec<RetainedResource>;
    /// Forgets what was reserved for `adopt_for` (a workspace of that name
    /// that no longer exists must not import it unasked); how many.
    fn release_adoption(&self, adopt_for: &str) -> u64;
    /// The open records reserved for `adopt_for`.
    fn retained_to_adopt(&self, adopt_for: &str) -> Vec<RetainedResource>;
    /// Queues the build `build` (a delete of the record's deleted
    /// workspace) that destroys the open record `record_id`, with `state`
    /// (holding only that resource) as the workspace's state, in one
    /// transaction. `Conflict` while the workspace has a build that has not
    /// ended or the record's last destroy has not.
    fn create_retained_destroy_build(&self, record_id: &str, build: &NewBuild, state: &[u8]) -> Build;
    /// The record the build `build_id` destroys.
    fn retained_destroyed_by(&self, build_id: &str) -> Option<RetainedResource>;
    /// The resource's object as the state held it before its delete.
    fn retained_state_fragment(&self, id: &str) -> Option<String>;
    /// Open records that expire at or before `before`, soonest first.
    fn retained_expiring(&self, before: i64, after: Option<&str>, limit: i64) -> Page<RetainedResource>;
    /// Workspaces' stored states by workspace id, `limit` after `after`
    /// (every state, deleted workspaces' too: what still exists).
    fn state_page(&self, after: Option<&str>, limit: i64) -> Vec<(String, Vec<u8>)>;
    /// Closes an open record (adopted, destroyed); false if it was not open.
    fn close_retained(&self, id: &str, status: RetainedStatus, closed_by: &str, build_id: Option<&str>) -> bool;
}

// ---- groups and template access lists (groups.rs) ----

storage_interface! {
    /// `Conflict("group name")` if a group of that name exists.
    fn create_group(&self, group: &NewGroup) -> Group;
    /// `NotFound("group")` if none.
    fn group_by_name(&self, name: &str) -> Group;
    /// Groups by name, with their member counts.
    fn list_group_page(&self, after: Option<&str>, limit: i64) -> Page<Group>;
    /// New settings of a group other than `Everyone` (`NotFound("group")`);
    /// `Conflict("group name")` if another group has the new name.
    fn update_group(&self, group_id: &str, group: &NewGroup) -> Group;
    /// Removes a group other than `Everyone`, its memberships and its
    /// entries in access lists; `NotFound("group")` if none.
    fn delete_group(&self, group_id: &str) -> ();
    /// The group's members by username (`Everyone`: every person).
    fn group_member_page(&self, group_id: &str, after: Option<&str>, limit: i64) -> Page<GroupMember>;
    /// Adds and removes members (user ids) in one transaction; adding a
    /// member or removing a non-member changes nothing. `NotFound("group")`
    /// for `Everyone`.
    fn change_group_members(&self, group_id: &str, add: &[String], remove: &[String]) -> ();
    /// The names of the groups the user is in, `Everyone` included for a
    /// person, by name.
    fn user_group_names(&self, user_id: &str) -> Vec<String>;
    /// Sets the user's memberships of `oidc` groups to exactly the named
    /// ones (creating missing ones as `oidc` groups when `auto_create`,
    /// ignoring unknown and `manual` ones), in one transaction.
    fn sync_user_groups(&self, user_id: &str, names: &[String], auto_create: bool) -> GroupSync;
    /// A template's access list, groups then users, by name.
    fn template_access(&self, template_id: &str) -> Vec<TemplateAccessEntry>;
    /// Sets (or, with `None`, removes) one entry of a template's access
    /// list; the role it had before.
    fn set_template_access(&self, template_id: &str, subject: &AccessSubject, role: Option<TemplateRole>) -> Option<TemplateRole>;
    /// The widest role the user holds on the template (by name, a group, or
    /// `Everyone`); `None`: not on its list.
    fn template_role_of(&self, template_id: &str, user_id: &str) -> Option<TemplateRole>;
    /// The entries a group holds on templates' access lists: each
    /// template's id and name and the group's role there, by name.
    fn group_template_roles(&self, group_id: &str) -> Vec<(String, String, TemplateRole)>;
}

// ---- workspace sharing (shares.rs) ----

storage_interface! {
    /// A workspace's share list, groups then users, by name.
    fn workspace_shares(&self, workspace_id: &str) -> Vec<ShareEntry>;
    /// Sets (or, with `None`, removes) one entry of a workspace's share
    /// list; the role it had before.
    fn set_workspace_share(&self, workspace_id: &str, subject: &ShareSubject, role: Option<ShareRole>) -> Option<ShareRole>;
    /// The widest role the user holds on the workspace (by name, a group,
    /// or `Everyone`); `None`: not shared with them.
    fn share_role_of(&self, workspace_id: &str, user_id: &str) -> Option<ShareRole>;
    /// Whether the template lets its workspaces be shared.
    fn template_allows_sharing(&self, template_id: &str) -> bool;
}

// ---- provisioner keys (provisioner_keys.rs) ----

storage_interface! {
    /// `Conflict("provisioner key name")` if a key of that name exists.
    fn create_provisioner_key(&self, key: &NewProvisionerKey) -> ProvisionerKeyRow;
    /// Keys by name.
    fn list_provisioner_key_page(&self, after: Option<&str>, limit: i64) -> Page<ProvisionerKeyRow>;
    /// Removes the key of that name (its secret finds nothing from now
    /// on); `NotFound("provisioner key")` if none.
    fn delete_provisioner_key(&self, name: &str) -> ProvisionerKeyRow;
    /// The key whose secret has this SHA-256; `NotFound("provisioner key")`
    /// if none.
    fn provisioner_key_by_hash(&self, secret_hash: &str) -> ProvisionerKeyRow;
}

// ---- workspaces (workspaces.rs) ----

storage_interface! {
    /// Creates a workspace together with its first build and that build's job.
    fn create_workspace(&self, workspace: &NewWorkspace, build: &NewBuild) -> (Workspace, Build);
    /// The live workspace of that name, else the most recently deleted one.
    fn workspace_by_owner_and_name(&self, owner_id: &str, name: &str) -> Workspace;
    fn workspace_by_id(&self, id: &str) -> Workspace;
    /// `owner_id: None` lists every user's workspaces.
    fn list_workspaces(&self, owner_id: Option<&str>, include_deleted: bool) -> Vec<Workspace>;
    fn mark_workspace_deleted(&self, workspace_id: &str) -> ();
    /// Puts a live workspace on the host `to` if it is still on `from`
    /// (`None`: on none) and has no build pending, running or held; false
    /// otherwise (nothing changed).
    fn move_workspace(&self, workspace_id: &str, from: Option<&str>, to: &str) -> bool;
    /// Gives a live workspace a new owner and name (either may stay the
    /// same), with the build that follows (a prebuild claim's) queued in the
    /// same transaction. `Conflict("workspace name")` when the new owner
    /// already has a live workspace of that name; `Conflict("active build")`
    /// when the workspace has one. Its audit history follows it (events
    /// refer to the workspace by id).
    fn transfer_workspace(&self, workspace_id: &str, owner_id: &str, name: &str, build: Option<&NewBuild>) -> (Workspace, Option<Build>);
    /// Workspaces with their latest build, newest finished build and agents,
    /// by owner name, name, creation time.
    fn list_workspace_page(&self, filter: &WorkspaceFilter) -> Page<WorkspaceSummary>;
}

// ---- builds, their jobs, logs, Terraform state and plan JSON (builds.rs;
// the job claim itself is in each backend) ----

storage_interface! {
    /// Creates the next build of a workspace and queues its job; moves the
    /// workspace to the build's template version. `Conflict("active build")`
    /// when the workspace already has a pending or running build.
    fn create_build(&self, build: &NewBuild) -> Build;
    fn build_by_id(&self, id: &str) -> Build;
    fn build_by_number(&self, workspace_id: &str, number: i64) -> Build;
    fn latest_build(&self, workspace_id: &str) -> Build;
    /// The newest build that succeeded: what the workspace now is.
    fn latest_succeeded_build(&self, workspace_id: &str) -> Option<Build>;
    /// Newest first.
    fn list_builds(&self, workspace_id: &str) -> Vec<Build>;
    /// Records the plan JSON (may hold secrets: never returned with the build)
    /// and the guard's report.
    fn set_build_plan(&self, build_id: &str, plan_json: &str, guard_report: &abode_guard::Report) -> ();
    /// Like `set_build_plan`, only while `holder` holds the build's claimed
    /// job: a holder that lost it (its build queued again, or failed)
    /// writes no plan over the new run's; and only once per build (none
    /// judged yet): the first verdict stands. Whether it was written.
    fn set_judged_plan(&self, build_id: &str, holder: &str, plan_json: &str, guard_report: &abode_guard::Report) -> bool;
    fn build_plan_json(&self, build_id: &str) -> Option<String>;
    /// Removes the plan JSON of the workspace's finished builds older than its
    /// newest `keep` builds (held and running builds keep theirs); returns the
    /// ids of the builds whose plan JSON was removed.
    fn prune_plan_json(&self, workspace_id: &str, keep: i64) -> Vec<String>;
    /// Moves a pending or running build to a final status; false if it had
    /// already finished.
    fn finish_build(&self, build_id: &str, status: BuildStatus, error: Option<&str>) -> bool;
    /// `finish_build` writing `notices` into the outbox in the same
    /// transaction (only when the build did end here).
    fn finish_build_notifying(&self, build_id: &str, status: BuildStatus, error: Option<&str>, notices: &[NewNotification]) -> bool;
    /// Whether `name` is the owner's for another workspace than
    /// `workspace_id`: a live workspace's, or the new name of a rename
    /// build not ended yet (pending, running or held).
    fn workspace_name_in_use(&self, owner_id: &str, name: &str, workspace_id: &str) -> bool;
    /// A succeeded restart's stop whose start was not requested yet: the
    /// latest build of a live workspace, oldest first.
    fn restarts_to_continue(&self) -> Vec<Build>;
    /// Cancels a build that no worker has claimed yet, or one held for
    /// confirmation (discarding its saved plan); false otherwise.
    fn cancel_pending_build(&self, build_id: &str, error: &str) -> bool;
    /// Ends a build that no worker has claimed yet as refused by quota
    /// (`failed`, `refusal = 'quota'`, the cost it was refused for) before
    /// any Terraform ran: a create whose estimate clearly does not fit.
    /// False when a worker claimed it first (its own plan is judged then).
    fn refuse_pending_build(&self, build_id: &str, error: &str, cost: i64) -> bool;
    /// Atomically claims the next queued job for `worker` of server `holder`
    /// on `host` offering provisioner `tags` (`key=value`), under a lease of
    /// `lease_ms`, and marks its build running: people's builds before the
    /// system's (scheduler, prebuilds), oldest first, only jobs whose
    /// version's tags are all among `tags` and whose workspace is on `host`
    /// or on none ([`Workspace::host`]). The job records `host`.
    fn claim_tagged_job(&self, worker: &str, holder: &str, host: &str, lease_ms: i64, tags: &[String]) -> Option<ClaimedJob>;
    fn request_cancel(&self, build_id: &str) -> ();
    fn cancel_requested(&self, build_id: &str) -> bool;
    fn append_log(&self, build_id: &str, line: &NewLogLine) -> i64;
    fn logs_after(&self, build_id: &str, after: i64, limit: i64) -> Vec<LogLine>;
    fn put_state(&self, workspace_id: &str, build_id: &str, state: &[u8]) -> ();
    /// Stores `state` only if the stored state is still `previous` (none:
    /// there is none yet), placing the workspace as `placement` says in the
    /// same transaction; false when another write came first.
    fn put_state_replacing(&self, workspace_id: &str, build_id: &str, state: &[u8], previous: Option<&[u8]>, placement: Placement) -> bool;
    fn state(&self, workspace_id: &str) -> Option<Vec<u8>>;
    /// A workspace's builds, newest first.
    fn list_build_page(&self, workspace_id: &str, status: Option<BuildStatus>, after: Option<&str>, limit: i64) -> Page<Build>;
}

// ---- who runs each claimed job (job_leases.rs) ----

storage_interface! {
    /// Extends the lease of every job `holder` has claimed and not finished
    /// to now + `ttl_ms`; how many.
    fn renew_job_leases(&self, holder: &str, ttl_ms: i64) -> u64;
    /// Builds marked running whose job `holder` claimed (or that no server
    /// held: from before leases), oldest first: at start, those this server
    /// left behind when it died.
    fn running_builds_of(&self, holder: &str) -> Vec<String>;
    /// Running builds whose job's lease, held by another server than
    /// `holder`, has expired.
    fn expired_job_leases(&self, holder: &str) -> Vec<ExpiredJobLease>;
    /// The server that claimed a build's job, if any did.
    fn job_lease_holder(&self, build_id: &str) -> Option<String>;
    /// Who holds a build's job while it is claimed (not once it ended).
    fn claimed_job_holder(&self, build_id: &str) -> Option<String>;
    /// Gives back to the queue a build whose holder's lease ran out before
    /// its plan was judged; false when it was judged (or renewed, or ended).
    fn requeue_unjudged_job(&self, lease: &ExpiredJobLease) -> bool;
    /// Renews one job's lease if `holder` still holds it (through `worker`,
    /// when given: see [`Store::claimed_job_kind`]).
    fn renew_job_lease(&self, build_id: &str, holder: &str, worker: Option<&str>, ttl_ms: i64) -> bool;
    /// The kind of a build's job while `holder` holds it. With `worker`,
    /// only while it holds it through that worker: a build queued again
    /// (its lease ran out before its plan was judged) can be claimed again
    /// by the same holder through another of its workers while the run that
    /// lost it still winds down, and that run's calls must not pass for
    /// the new claim's.
    fn claimed_job_kind(&self, build_id: &str, holder: &str, worker: Option<&str>) -> Option<JobKind>;
    /// Fails a running build whose job's lease is still exactly `lease` (not
    /// renewed nor claimed again since it was seen), ends its job, drops its
    /// saved plan and queues `notices`, in one transaction; whether it did.
    fn salvage_build(&self, lease: &ExpiredJobLease, error: &str, notices: &[NewNotification]) -> bool;
}

// ---- held builds, saved plans and protections (held.rs) ----

storage_interface! {
    /// Moves a running build to `awaiting_confirmation` with its saved plan;
    /// false if it was not running.
    fn hold_build(&self, build_id: &str, plan: &SavedPlan, expires_at: i64) -> bool;
    /// `hold_build` writing `notices` into the outbox in the same transaction.
    fn hold_build_notifying(&self, build_id: &str, plan: &SavedPlan, expires_at: i64, notices: &[NewNotification]) -> bool;
    /// Single use: moves a held build whose plan has `digest` back to pending
    /// and queues the apply of its saved plan, recording `audit` in the same
    /// transaction (no confirmation goes unaudited); false otherwise.
    fn confirm_build(&self, build_id: &str, digest: &str, confirmer_id: &str, audit: &NewAuditEvent) -> bool;
    fn saved_plan(&self, build_id: &str) -> Option<SavedPlan>;
    /// Keeps a plan the guard held, before its build is recorded as held.
    fn put_saved_plan(&self, build_id: &str, plan: &SavedPlan) -> ();
    /// Whether the saved plan was made before Abode was the state backend
    /// (it is applied against the stored state laid out in the work dir).
    fn saved_plan_on_local_state(&self, build_id: &str) -> bool;
    fn delete_saved_plan(&self, build_id: &str) -> ();
    /// Held builds whose time ran out: canceled, plans deleted.
    fn expire_held_builds(&self, now: i64, error: &str) -> Vec<String>;
    /// Held builds whose deadline is at or before `before`, soonest first.
    fn held_builds_expiring(&self, before: i64) -> Vec<Build>;
    /// Expires one held build whose deadline is at or before `now` (canceled,
    /// plan deleted) with `notices` in the same transaction; false if it was
    /// not held or not due.
    fn expire_held_build(&self, build_id: &str, now: i64, error: &str, notices: &[NewNotification]) -> bool;
    fn protections(&self, workspace_id: &str) -> Vec<Protection>;
    fn replace_protections(&self, workspace_id: &str, build_id: &str, protections: &[NewProtection]) -> ();
    /// `NotFound("protection")` when the workspace does not remember it.
    fn release_protection(&self, workspace_id: &str, address: &str) -> Protection;
}

// ---- app tokens (app_tokens.rs) ----

storage_interface! {
    /// Records an app token's hash for `host`, until `expires_at`.
    fn create_app_token(&self, token_hash: &str, kind: AppTokenKind, user_id: &str, host: &str, expires_at: i64) -> ();
    /// The user of an unexpired token of `host`; a code is taken (deleted).
    fn app_token_user(&self, token_hash: &str, kind: AppTokenKind, host: &str) -> Option<String>;
}

// ---- external auth (external_auth.rs) ----

storage_interface! {
    /// Records a person's linked account (again: its new tokens, and the
    /// `linked_at` given: a new link's time, or a refresh's first one).
    fn put_external_auth_link(&self, link: &ExternalAuthLink) -> ();
    fn external_auth_links_of(&self, user_id: &str) -> Vec<ExternalAuthLink>;
    /// Removes a link and answers what it was (to revoke its tokens).
    fn delete_external_auth_link(&self, user_id: &str, provider_id: &str) -> Option<ExternalAuthLink>;
    /// Replaces a link's tokens after a refresh of the tokens refreshed at
    /// `previous_refreshed_at`; false when it is no longer that link (unlinked,
    /// linked again, or refreshed by another server meanwhile).
    fn refresh_external_auth_link(&self, link: &ExternalAuthLink, previous_refreshed_at: i64) -> bool;
    /// The links of suspended and deleted accounts (to revoke and remove).
    fn external_auth_links_of_closed_accounts(&self) -> Vec<ExternalAuthLink>;
    /// Re-encrypts every link's tokens with `reseal`, in one transaction
    /// (the first refusal leaves all as they were: `Ok(Err(..))`), and drops
    /// the links under way; answers how many links it re-encrypted.
    fn reseal_external_auth_links(&self, reseal: &(dyn Fn(&ExternalAuthLink) -> Result<ExternalAuthLink, String> + Send + Sync)) -> Result<u64, String>;
    /// Records a link under way by its state's hash, until `expires_at`.
    fn create_external_auth_pending(&self, state_hash: &str, pending: &PendingExternalAuth, expires_at: i64) -> ();
    /// Takes (deletes) an unexpired link under way: a state works once.
    fn take_external_auth_pending(&self, state_hash: &str) -> Option<PendingExternalAuth>;
}

// ---- shared ports (port_shares.rs) ----

storage_interface! {
    /// How far a template lets its workspaces share ports.
    fn template_max_port_share(&self, template_id: &str) -> abode_contract::apps::AppShare;
    fn set_template_max_port_share(&self, template_id: &str, max: abode_contract::apps::AppShare) -> ();
    /// Shares a port of a workspace's agent (again: the new level).
    fn put_port_share(&self, workspace_id: &str, agent_name: &str, port: u16, share: abode_contract::apps::AppShare, created_by: &str) -> ();
    /// `false` when the port was not shared.
    fn delete_port_share(&self, workspace_id: &str, agent_name: &str, port: u16) -> bool;
    fn port_shares(&self, workspace_id: &str) -> Vec<PortShare>;
}

// ---- the connection log (connection_log.rs) ----

storage_interface! {
    /// Records a connection opening now; its id.
    fn open_connection_log(&self, entry: &NewConnectionLogEntry) -> String;
    /// Records a connection's end now, with its bytes and how it ended;
    /// false if it had ended already (or there is no such row).
    fn close_connection_log(&self, id: &str, bytes_to_workspace: i64, bytes_from_workspace: i64, end_reason: &str) -> bool;
    /// Ends `server_lost`, now, the connections server `server_id` left
    /// open (it was killed); how many.
    fn end_lost_connections(&self, server_id: &str) -> u64;
    /// Newest first, one page.
    fn list_connection_log_page(&self, filter: &ConnectionLogFilter) -> Page<ConnectionLogEntry>;
}

// ---- build timings (build_timings.rs) ----

storage_interface! {
    /// Writes stages of a build's runs and their Terraform resources (a
    /// run's own, again: replaced), in one transaction.
    fn put_timings(&self, build_id: &str, stages: &[StageTiming], resources: &[ResourceTiming]) -> ();
    /// Everything recorded of a build's time, by start.
    fn build_timings(&self, build_id: &str) -> BuildTimings;
    /// An agent's lifecycle report as its build's timings: the agent's
    /// stages that ended now, with their seconds.
    fn agent_lifecycle_timings(&self, agent_id: &str, lifecycle: AgentLifecycle) -> Vec<(String, f64)>;
}

// ---- unsaved work (unsaved.rs) ----

storage_interface! {
    /// Replaces the workspace's last report of unsaved work, made now.
    fn put_unsaved_report(&self, workspace_id: &str, report: &str) -> ();
    /// The workspace's last report of unsaved work, if one ever came.
    fn unsaved_report(&self, workspace_id: &str) -> Option<UnsavedReportRow>;
    /// Records that an automatic delete was held for the report of
    /// `digest`: true the first time for that digest (tell and audit it),
    /// false when it was already held for it.
    fn mark_unsaved_hold(&self, workspace_id: &str, digest: &str) -> bool;
    /// A person asks for a fresh report (now).
    fn request_unsaved_scan(&self, workspace_id: &str) -> ();
    /// Whether a fresh report was asked for and none came since.
    fn unsaved_scan_requested(&self, workspace_id: &str) -> bool;
}

// ---- the agents' abode_scripts (scripts.rs) ----

storage_interface! {
    /// The agent's scripts (a JSON list of their definitions), if it has any.
    fn agent_scripts(&self, agent_id: &str) -> Option<String>;
    /// What the agent watches (a JSON `AgentWatch`), if anything.
    fn agent_watch(&self, agent_id: &str) -> Option<String>;
    /// The workspace's agents that watch something: name and `AgentWatch` JSON.
    fn workspace_agent_watches(&self, workspace_id: &str) -> Vec<(String, String)>;
    /// The workspace's agents that have scripts: name and definitions.
    fn workspace_agent_scripts(&self, workspace_id: &str) -> Vec<(String, String)>;
    /// What an agent reports of a script's run (now).
    fn put_script_run(&self, report: &ScriptRunReport<'_>) -> ();
    /// The latest run of each script of the workspace's agents.
    fn script_runs(&self, workspace_id: &str) -> Vec<ScriptRunRow>;
    /// The end of the output of a script's latest run.
    fn script_run_log(&self, workspace_id: &str, agent_name: &str, display_name: &str) -> Option<String>;
}

// ---- stop scripts and disk-full warnings (shutdowns.rs) ----

storage_interface! {
    /// The workspace's agents that have a shutdown script.
    fn agents_to_shut_down(&self, workspace_id: &str) -> Vec<ShutdownTarget>;
    /// Asks an agent (now) to run its shutdown script for a build: false
    /// when that build already asked it.
    fn insert_agent_shutdown(&self, shutdown: &NewAgentShutdown) -> bool;
    /// A build's shutdowns, by agent name.
    fn agent_shutdowns(&self, build_id: &str) -> Vec<AgentShutdownRow>;
    /// The oldest shutdown asked of the agent that has not ended.
    fn pending_agent_shutdown(&self, agent_id: &str) -> Option<AgentShutdownRow>;
    /// Ends a shutdown (now): false when it had ended already.
    fn end_agent_shutdown(&self, build_id: &str, agent_id: &str, outcome: &str, exit_status: Option<i64>, output: Option<&str>) -> bool;
    /// True once per ended shutdown: the caller writes how it ended.
    fn mark_agent_shutdown_logged(&self, build_id: &str, agent_id: &str) -> bool;
    /// What the agent says of its home volume (now); its thresholds.
    fn put_agent_disk(&self, agent_id: &str, used_bytes: i64, total_bytes: i64, available_bytes: i64) -> Option<String>;
    /// What the workspace's agents last said of their home volume.
    fn workspace_disks(&self, workspace_id: &str) -> Vec<AgentDiskRow>;
    /// True when the workspace's threshold was not told within `quiet_ms`
    /// (it counts as told now).
    fn claim_disk_warning(&self, workspace_id: &str, percent: i64, quiet_ms: i64) -> bool;
}

// ---- workspace uids (workspace_uids.rs) ----

storage_interface! {
    /// The uid of a workspace, given now from `first..=last` when it has
    /// none; `Conflict("workspace uids")` when the range is used up.
    fn workspace_uid(&self, workspace_id: &str, first: u32, last: u32) -> u32;
    /// Every uid given so far, lowest first.
    fn given_workspace_uids(&self) -> Vec<u32>;
}

// ---- agents (agents.rs) ----

storage_interface! {
    /// Replaces the workspace's agents by those of a successful start build;
    /// an agent whose token hash is unchanged keeps its lifecycle, heartbeat
    /// times and exit status.
    fn replace_agents(&self, workspace_id: &str, build_id: &str, agents: &[NewAgent]) -> ();
    fn agents_of_workspace(&self, workspace_id: &str) -> Vec<Agent>;
    /// The workspace's apps, by agent and slug.
    fn apps_of_workspace(&self, workspace_id: &str) -> Vec<WorkspaceApp>;
    /// The health an agent reports for one of its apps; `false` when it was
    /// already that (or the agent has no such app).
    fn set_app_health(&self, agent_id: &str, slug: &str, health: abode_contract::apps::AppHealth) -> bool;
    fn agent_by_token_hash(&self, token_hash: &str) -> Agent;
    /// Records that `server_id` holds an agent's tunnel, reachable at `relay_url`.
    fn put_agent_tunnel(&self, token_hash: &str, workspace_id: &str, agent_name: &str, server_id: &str, relay_url: &str) -> ();
    /// Removes the record if `server_id` still holds the tunnel.
    fn delete_agent_tunnel(&self, token_hash: &str, server_id: &str) -> ();
    /// Removes every tunnel record of a (restarted) server.
    fn forget_agent_tunnels(&self, server_id: &str) -> ();
    /// The workspace's agents' tunnels held by other servers than `server_id`.
    fn remote_agent_tunnels(&self, workspace_id: &str, server_id: &str) -> Vec<AgentTunnelRow>;
    /// The `abode_agent`'s `claim_script`, handed to the agent only (kept
    /// out of [`Agent`], which workspace views carry).
    fn agent_claim_script(&self, agent_id: &str) -> Option<String>;
    /// A heartbeat, with a new lifecycle state if given; sets `connected_at` on
    /// the first call.
    fn agent_heartbeat(&self, agent_id: &str, lifecycle: Option<AgentLifecycle>) -> ();
    /// A new lifecycle state with the startup script's exit status (kept only
    /// for `start_error`; any other state clears it), counting as a heartbeat.
    fn agent_lifecycle(&self, agent_id: &str, lifecycle: AgentLifecycle, exit_status: Option<i64>) -> ();
}

// ---- which process runs as each server id (server_instances.rs) ----

storage_interface! {
    fn server_instance(&self, server_id: &str) -> Option<ServerInstance>;
    /// Records this process as the server id's, beating now.
    fn put_server_instance(&self, server_id: &str, host: &str, data_dir: &str, pid: i64) -> ();
    /// Beats now; false when the id's row is another process's (or gone).
    fn beat_server_instance(&self, server_id: &str, host: &str, data_dir: &str, pid: i64) -> bool;
    /// At shutdown, if the row is still this process's.
    fn forget_server_instance(&self, server_id: &str, host: &str, data_dir: &str, pid: i64) -> ();
}

// ---- the fence of each workspace's state (state_locks.rs) ----

storage_interface! {
    /// Takes the workspace's state lock for a run of `build_id`; false when
    /// another lock is there.
    fn take_state_lock(&self, workspace_id: &str, build_id: &str, holder: &str, secret_hash: &str) -> bool;
    fn state_lock_of_workspace(&self, workspace_id: &str) -> Option<StateLock>;
    fn state_lock_of_build(&self, build_id: &str) -> Option<StateLock>;
    /// Records Terraform's lock under the run's lock; false when the run
    /// does not hold it or another Terraform lock is held.
    fn set_terraform_lock(&self, build_id: &str, secret_hash: &str, lock_id: &str, info: &str) -> bool;
    /// False when that Terraform lock is not held under the run's lock.
    fn clear_terraform_lock(&self, build_id: &str, secret_hash: &str, lock_id: &str) -> bool;
    /// The run's Terraform ended: its lock goes; false if it was not there.
    fn release_state_lock(&self, build_id: &str, secret_hash: &str) -> bool;
    /// The locks runs of `holder` took.
    fn state_locks_of_holder(&self, holder: &str) -> Vec<StateLock>;
    /// The lock of `build_id` if `holder`'s run took it (that holder knows
    /// none of its runs is left); false if it did not.
    fn release_state_lock_of_holder(&self, build_id: &str, holder: &str) -> bool;
    /// A person's unlock; false if that build did not hold the lock.
    fn force_release_state_lock(&self, workspace_id: &str, build_id: &str) -> bool;
    /// Writes the state only while the run holds the lock (and the named
    /// Terraform lock), over `previous` as stored now, placing the
    /// workspace as `placement` says in the same transaction.
    fn put_state_fenced(&self, workspace_id: &str, build_id: &str, fence: &StateFence<'_>, state: &[u8], previous: Option<&[u8]>, placement: Placement) -> FencedWrite;
}

// ---- the platform's counts for metrics (platform.rs) ----

storage_interface! {
    /// Held builds, the job queue and agents by status, in one query.
    fn platform_counts(&self, cutoffs: AgentCutoffs) -> PlatformCounts;
}

// ---- prebuilt workspaces (prebuilds.rs) ----

storage_interface! {
    /// The pools (presets of active versions, and of inactive versions that
    /// still have prebuilt workspaces), the workspaces `pool_owner_id` owns
    /// with their newest build, the pools' failures since their last
    /// success, and whether reconciliation is paused, in one transaction.
    fn prebuild_snapshot(&self, pool_owner_id: &str, heartbeat_before: i64) -> PrebuildSnapshot;
    /// Hands a ready prebuild of the pool to the claimant under their name
    /// and queues its claim build, in one transaction; `NoneReady` when
    /// none is ready, `OverBudget` (nothing changed) when the claim enforces
    /// quotas and the prebuild's cost does not fit the claimant's budget.
    /// `Conflict` if the claimant has a workspace of that name.
    fn claim_prebuild(&self, claim: &PrebuildClaim) -> PrebuildClaimed;
    /// The last known daily cost of one pool (see `PoolCost`), `None` when
    /// no prebuild plan of it was costed.
    fn prebuild_pool_cost(&self, pool_owner_id: &str, version_id: &str, preset_name: &str) -> Option<i64>;
    /// Opens (`open`) or ends the budget episode of a template's preset,
    /// writing `notices` in the same transaction only when that changed
    /// something: whether it did (an episode already open, or not open, is
    /// left as it is, and nothing is written).
    fn set_prebuild_quota_episode(&self, template_id: &str, preset_name: &str, open: bool, notices: &[NewNotification]) -> bool;
    fn platform_setting(&self, name: &str) -> Option<String>;
    fn set_platform_setting(&self, name: &str, value: &str) -> ();
    /// Takes or renews the lease `name` for `ttl_ms` unless another holder's
    /// lease is unexpired; whether `holder` holds it now.
    fn try_lease(&self, name: &str, holder: &str, ttl_ms: i64) -> bool;
}

// ---- SSH host keys (host_keys.rs) ----

storage_interface! {
    /// The workspace's SSH host key seed: the stored one, or `new_seed`
    /// stored now when it has none (the first connection's key wins).
    fn workspace_host_key(&self, workspace_id: &str, new_seed: &str) -> String;
}

// ---- the scheduler's settings (schedule_settings.rs) ----

storage_interface! {
    /// `NotFound("template")` when there is no such template.
    fn template_policy(&self, template_id: &str) -> TemplatePolicy;
    fn set_template_policy(&self, policy: &TemplatePolicy) -> ();
    /// `NotFound("workspace")` when there is no such workspace.
    fn workspace_lifecycle(&self, workspace_id: &str) -> WorkspaceLifecycle;
    /// The autostart schedule (both `None`: none).
    fn set_workspace_autostart(&self, workspace_id: &str, cron: Option<&str>, timezone: Option<&str>) -> ();
    /// The owner's autostop ttl (`None`: the template's default).
    fn set_workspace_ttl(&self, workspace_id: &str, ttl_ms: Option<i64>) -> ();
    /// Sets the deadline only if it is still `expected` (what the caller
    /// read); whether it was set.
    fn push_workspace_deadline(&self, workspace_id: &str, expected: Option<i64>, deadline: i64) -> bool;
    /// Sets `last_used_at` to `at` only when it is unset or before
    /// `older_than`, so that frequent use writes once per interval; whether
    /// it was written.
    fn record_workspace_use(&self, workspace_id: &str, at: i64, older_than: i64) -> bool;
    /// Wakes a dormant workspace: dormancy and deletion dates cleared, used
    /// at `at`; whether it was dormant.
    fn wake_workspace(&self, workspace_id: &str, at: i64) -> bool;
}

// ---- the lifecycle scheduler's tick (scheduler_tick.rs) ----

storage_interface! {
    /// Every template's policy and every live workspace with its latest
    /// build, schedule, deadlines, use and dormancy, in one transaction.
    fn scheduler_tick_snapshot(&self) -> TickSnapshot;
    /// The autostop deadlines of a workspace's current run (`None`: none).
    fn set_deadlines(&self, workspace_id: &str, deadline: Option<i64>, max_deadline: Option<i64>) -> ();
    /// Marks a workspace dormant since `dormant_at`, to be deleted at
    /// `deleting_at`; false if it already was (or is deleted).
    fn mark_dormant(&self, workspace_id: &str, dormant_at: i64, deleting_at: Option<i64>) -> bool;
    /// The owner was told at `at` of the coming deletion.
    fn deletion_notified(&self, workspace_id: &str, at: i64) -> ();
}

// ---- the audit log (audit.rs) ----

storage_interface! {
    fn record_audit(&self, event: &NewAuditEvent) -> ();
    /// Fills in the client, user agent and HTTP status of the events a
    /// request recorded (those not completed yet); how many.
    fn complete_audit(&self, request_id: &str, client_ip: Option<&str>, user_agent: Option<&str>, status_code: i64) -> u64;
    /// Newest first, one page.
    fn list_audit(&self, filter: &AuditFilter) -> Page<AuditEvent>;
}

// Roles: a set per user (roles.rs). A change the rules refuse (the last
// owner losing `owner`, an empty set) is the inner `Err`, decided in the
// transaction that writes it.
storage_interface! {
    /// The user's roles; empty for a user without any (or an unknown id).
    fn roles_of(&self, user_id: &str) -> Roles;
    /// Replaces the user's roles. `NotFound("user")` if there is no such user.
    fn set_roles(&self, user_id: &str, roles: &Roles) -> Result<RoleChange, RoleRefusal>;
    /// Adds `add` and removes `remove` (a role in both stays held).
    /// `NotFound("user")` if there is no such user.
    fn change_roles(&self, user_id: &str, add: &Roles, remove: &Roles) -> Result<RoleChange, RoleRefusal>;
}

// ---- the notification outbox (notifications.rs) ----

storage_interface! {
    /// Writes messages (outside another change); a repeated dedupe key is dropped.
    fn enqueue_notifications(&self, notices: &[NewNotification]) -> ();
    /// Forgets the dedupe keys that start with `prefix` (an event that is
    /// sent once until something clears it, like a preset that recovers):
    /// the next message with such a key is written again. How many were
    /// released; an empty prefix releases nothing.
    fn release_notification_dedupe(&self, prefix: &str) -> u64;
    /// People (never a system actor) who hold any of `roles`, by username:
    /// which roles is the caller's (the policy table's) to say.
    fn users_with_any_role(&self, roles: &[Role]) -> Vec<User>;
    fn notification_by_id(&self, id: &str) -> Notification;
    /// Claims up to `limit` due messages (pending and due, or delivering
    /// with an expired lease) for `owner` until `lease_until`, counting an
    /// attempt for each.
    fn claim_notifications(&self, owner: &str, now: i64, lease_until: i64, limit: i64) -> Vec<Notification>;
    /// Marks a claimed message sent; false if `owner` no longer holds it.
    fn notification_sent(&self, id: &str, owner: &str) -> bool;
    /// Records a failed attempt: pending again at `retry_at`, or failed for
    /// good when `None`; false if `owner` no longer holds it.
    fn notification_attempt_failed(&self, id: &str, owner: &str, error: &str, retry_at: Option<i64>) -> bool;
    /// A person's inbox, newest first.
    fn list_inbox_page(&self, filter: &InboxFilter) -> Page<Notification>;
    /// `NotFound("notification")` unless it is in the person's inbox.
    fn mark_notification_read(&self, recipient_id: &str, id: &str) -> Notification;
    /// How many were marked.
    fn mark_all_notifications_read(&self, recipient_id: &str) -> u64;
    /// Messages given up on, newest first, one page.
    fn list_failed_notification_page(&self, after: Option<&str>, limit: i64) -> Page<FailedNotification>;
    /// The kinds a person disabled.
    fn notification_opt_outs(&self, user_id: &str) -> Vec<NotificationKind>;
    fn set_notification_opt_out(&self, user_id: &str, kind: NotificationKind, opted_out: bool) -> ();
    /// The kinds sent whatever people disabled.
    fn mandatory_notification_kinds(&self) -> Vec<NotificationKind>;
    fn set_notification_kind_mandatory(&self, kind: NotificationKind, mandatory: bool) -> ();
    /// Who does not receive `kind` (disabled it, and it is not mandatory).
    fn opted_out_of(&self, kind: NotificationKind) -> Vec<String>;
}
