//! A snapshot before a confirmed destroy, on the machine where the volume
//! and Terraform are (issue 47).
//!
//! The server decides what a confirmed plan needs snapshotted (its guard
//! report, the resources' `abode_protect`s) and hands a run on an external
//! daemon one [`crate::SnapshotOrder`] per protected resource the plan destroys or
//! replaces. Before anything is applied, the run runs each order's
//! `snapshot_command`s ([`run_command`], sandboxed like Terraform and with
//! its environment) and has its host archive the order's volume
//! ([`crate::BuildHost::keep_snapshot`]: a daemon archives it and streams it
//! to the server, which keeps it as a retained record of kind `snapshot`).
//! Any of it failing fails the run before the apply. The server's own
//! provisioners take theirs before they hand the run out (they share
//! [`run_command`]), so their runs get no orders.

use std::path::Path;
use std::time::Duration;

use abode_terraform::isolation::Isolation;

use crate::host::{Failure, LogLevel, LogSink, LogStage};

/// How long a `snapshot_command` may run (a cloud disk snapshot is queued,
/// not waited for, by `aws ec2 create-snapshot`).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Whether `name` is one plain directory name (no path, no dot first).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Runs one `snapshot_command` of `address` with `sh -c` in `dir` (made
/// here, the sandbox's, removed after), its output into the build's log;
/// an error says why in one line, ending "nothing was applied".
pub async fn run_command<S: LogSink>(
    log: &S,
    isolation: Option<&Isolation>,
    dir: &Path,
    env: Vec<(String, String)>,
    address: &str,
    command: &str,
) -> Result<(), Failure> {
    log.log(
        &LogStage::APPLY,
        LogLevel::Info,
        &format!("snapshot of {address}: running its snapshot_command"),
    )
    .await;
    let outcome = match prepare_dir(dir, isolation).await {
        Ok(()) => {
            abode_terraform::shell::run_shell(abode_terraform::shell::ShellRun {
                isolation,
                dir,
                command,
                env,
                timeout: COMMAND_TIMEOUT,
            })
            .await
        }
        Err(error) => Err(error),
    };
    let _ = tokio::fs::remove_dir_all(dir).await;
    let outcome = outcome.map_err(|error| {
        Failure::failed(format!(
            "the snapshot_command of {address} could not run: {error}; nothing was applied"
        ))
    })?;
    for line in outcome
        .output
        .lines()
        .filter(|line| !line.trim().is_empty())
    {
        log.log(
            &LogStage::APPLY,
            LogLevel::Info,
            &format!("snapshot_command: {line}"),
        )
        .await;
    }
    if outcome.succeeded() {
        log.log(
            &LogStage::APPLY,
            LogLevel::Info,
            &format!("snapshot of {address}: its snapshot_command succeeded"),
        )
        .await;
        return Ok(());
    }
    let last = outcome
        .output
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let what = if outcome.timed_out {
        format!(
            "did not end within {} minutes",
            COMMAND_TIMEOUT.as_secs() / 60
        )
    } else if outcome.not_found() {
        format!("was not found (exit 127: {last})")
    } else {
        match outcome.code {
            Some(code) if last.is_empty() => format!("failed with exit status {code}"),
            Some(code) => format!("failed with exit status {code}: {last}"),
            None => "was killed by a signal".to_string(),
        }
    };
    Err(Failure::failed(format!(
        "the snapshot_command of {address} {what}; nothing was applied (the volume is as it was: fix the command, then run the build again and confirm its plan)"
    )))
}

/// The command's own directory, the sandbox user's.
async fn prepare_dir(dir: &Path, isolation: Option<&Isolation>) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let _ = tokio::fs::remove_dir_all(dir).await;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    if let Some(isolation) = isolation {
        isolation.hand_over(dir).map_err(std::io::Error::other)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::host::{ArchiveOrder, SnapshotOrder};

    #[test]
    fn an_order_crosses_the_wire_unchanged() {
        let order = SnapshotOrder {
            index: 2,
            address: "abode_volume.home[\"a b\"]".into(),
            commands: vec!["echo \"$ABODE_ATTR_NAME\"\nexit 1".into()],
            env: vec![("ABODE_ATTR_NAME".into(), "home-ünï".into())],
            archive: Some(ArchiveOrder {
                volume: "home-1".into(),
                retained_id: "r1".into(),
                workspace: "dev".into(),
                owner: "alice".into(),
                exported_at: "2026-01-01T00:00:00Z".into(),
            }),
        };
        let text = serde_json::to_string(&order).unwrap();
        assert_eq!(serde_json::from_str::<SnapshotOrder>(&text).unwrap(), order);
        let bare: SnapshotOrder = serde_json::from_str(r#"{"index":0,"address":"x"}"#).unwrap();
        assert!(bare.commands.is_empty() && bare.env.is_empty() && bare.archive.is_none());
    }

    #[test]
    fn only_plain_names_are_volumes() {
        for name in ["home-1", "a.b_c"] {
            assert!(is_plain_name(name), "{name}");
        }
        for name in ["", ".", "..", ".hidden", "a/b", "../x", "a b", "ü"] {
            assert!(!is_plain_name(name), "{name}");
        }
    }
}
