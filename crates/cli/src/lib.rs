//! The commands of `abode`: each one's flags, turned into calls of Abode's
//! library crates, and what it prints. The binary (`crates/abode`) parses the
//! command line and hands each command here.
//!
//! # Modules
//!
//! `commands/` holds the commands that talk to a server (a session's), with
//! their output: tables for people, `--output json` for scripts (the
//! `abode-sdk` types); `commands/ssh.rs`, `commands/config_ssh.rs` and
//! `commands/port_forward.rs` are the CLI's side of connections (`abode ssh`
//! with its SSH client and `--stdio`, the managed `~/.ssh/config` block, port
//! forwards; docs/ssh.md). `output.rs` is how server-supplied text and errors
//! are shown, `password.rs` how passwords are read. `server.rs` is `abode
//! server`'s flags (with `terraform_flags.rs` and `sign_in_flags.rs`) and
//! logging (`--log-format text|json`, a
//! `RUST_LOG`-style `--log-filter`; a build's lines carry its workspace and
//! number from the span its run opens), handed to the start-up of the server
//! `abode-api` assembles. `provisioner_daemon.rs` is `abode provisioner start`'s flags,
//! handed to `abode-provisionerd`; `agent.rs` is `abode agent`'s and Git's
//! askpass, handed to `abode-agent`; `provider.rs` serves the provider when
//! Terraform starts the binary under its name and installs the mirror;
//! `plan_check.rs` is the guard on one plan file. `duration.rs` and `size.rs`
//! are the one format of long durations (`90m`, `24h`, `30d`, or seconds) and
//! of sizes on the command line. `exit.rs` is the exit statuses, a public
//! interface: `crates/abode/tests/house.rs` checks that ARCHITECTURE.md and
//! docs/cli.md list the ones it defines.
//!
//! # What it keeps
//!
//! - No domain logic here: library crates return typed errors (`thiserror`),
//!   the commands add context (`anyhow`) and the binary turns an error into
//!   one line on standard error and an exit status.
//! - The CLI never prints a token or a password, except the new API token
//!   `abode tokens create` and the new provisioner key `abode provisioner keys
//!   create` are there to print, alone on standard output; passwords are read
//!   only from standard input.
//! - The CLI's text output shows server-supplied strings (other people's names,
//!   messages, parameters, errors, Terraform's output) only through
//!   [`output::visible`], which makes terminal controls, C1 and bidi
//!   controls visible (docs/cli.md); tables apply it to every cell.
//! - `builds confirm` applies a held plan only with its digest given, or after
//!   showing the plan on a terminal and reading `yes`.
//! - The server's data dir is private to the server's user (0700, set at every
//!   start); `e2e_security` holds the on-disk privacy checks.

pub mod agent;
pub mod commands;
mod duration;
pub mod exit;
pub mod output;
mod password;
pub mod plan_check;
pub mod provider;
mod provisioner_daemon;
pub mod server;
mod sign_in_flags;
mod size;
mod terraform_flags;
