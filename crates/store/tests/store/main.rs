//! Behaviour of the store: migrations, typed errors, the one-build-at-a-time
//! rule, the atomic job claim, held builds, protections and the audit log.
//! One module per domain, like the store's own files. Every behaviour runs
//! on SQLite (a temporary file) and, when ABODE_TEST_POSTGRES_URL is set, on
//! PostgreSQL (a fresh schema per test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod accounts;
mod agents;
mod build_timings;
mod builds;
mod clock;
mod connection_log;
mod external_auth;
mod full_disk;
mod held;
mod host_keys;
mod job_leases;
mod lists;
mod notifications;
mod oidc;
mod opening;
mod placement;
mod platform;
mod prebuilds;
mod previews;
mod provisioner_keys;
mod provisioners;
mod quotas;
mod roles;
mod schedule_settings;
mod shutdowns;
mod state_locks;
mod templates;
mod tokens;
mod unsaved;
mod users;
mod workspaces;
