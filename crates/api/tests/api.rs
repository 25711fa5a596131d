//! The API's tests against a real server in this process (a real store,
//! real Terraform where a build runs), in one test binary: one link
//! instead of one per file. Each file is a module, as it was a binary.

mod common;

mod authz_matrix;
mod daemon_bodies;
mod guarded;
mod lists;
mod live_log_session;
mod metrics;
mod request_checks;
mod roles;
mod server;
mod token_scopes;
mod units;
