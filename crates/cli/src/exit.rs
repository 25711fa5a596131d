//! Exit statuses, part of Abode's public interface (docs/cli.md): scripts branch on them.

use abode_guard::Decision;
use std::process::ExitCode;

/// Bad input or a failure: the reason is on standard error.
pub const FAILURE: u8 = 1;
/// The command was called wrongly: a missing or malformed argument (the
/// argument parser's own status, also used by checks it cannot make).
pub const USAGE: u8 = 2;
/// The plan (or build) needs an explicit confirmation.
pub const CONFIRMATION_REQUIRED: u8 = 3;
/// The plan (or build) was blocked by a protection rule.
pub const BLOCKED: u8 = 4;
/// The build was refused before apply because its plan would take the
/// owner past their budget (`--quota-enforce`).
pub const QUOTA: u8 = 5;
/// A delete was held: the workspace's last report shows unsaved work that
/// the command neither discarded nor confirmed by its digest.
pub const UNSAVED_WORK: u8 = 6;
/// Standard output's reader went away (`abode list | head -1`): what a
/// shell reports for a command `SIGPIPE` ended (128 + 13).
pub const CLOSED_PIPE: u8 = 141;

pub fn for_decision(decision: Decision) -> ExitCode {
    match decision {
        Decision::Allow => ExitCode::SUCCESS,
        Decision::Confirm => ExitCode::from(CONFIRMATION_REQUIRED),
        Decision::Block => ExitCode::from(BLOCKED),
    }
}
