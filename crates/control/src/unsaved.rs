//! Unsaved work (issue 47): the agent's reports of Git repositories in the
//! workspace's home with changes that exist nowhere else, and the rule that
//! a delete which would lose them is held. A helper of the services that
//! meet it (`Agents` records a report, `Workspaces` shows it, a person's
//! delete in `WorkspaceBuilds` and the scheduler's automatic delete are
//! judged by it), each with its own store and clock.
//!
//! What it keeps:
//!
//! - The last report per workspace is stored, so a stopped workspace, or
//!   one whose agent is gone, is judged by what its agent last saw; its age
//!   is told with it. A report's time is the server's clock when it came.
//! - A report's digest is the SHA-256 of its content (the repositories and
//!   their kinds, and whether the scan was cut short), not of its time: a
//!   rescan that found the same work keeps the digest a person confirmed,
//!   and any change gives another one.
//! - A report is checked whole when it arrives (bounded counts and lengths,
//!   one-line paths) and read back as its type; one that does not read is
//!   an error, never "nothing unsaved".

use abode_sdk::requests::AgentUnsaved;
use abode_sdk::{UnsavedKind, UnsavedReport, UnsavedRepository};
use abode_store::Store;
use serde::{Deserialize, Serialize};

use crate::{Clock, ControlError};

/// The most repositories a report lists (the agent looks at 200 at most).
const MAX_REPOSITORIES: usize = 1000;
/// The longest path a report names.
const MAX_PATH_CHARS: usize = 4096;

/// What a delete says of the unsaved work the last report shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum UnsavedConsent {
    /// Nothing: a delete that would lose unsaved work is held.
    #[default]
    None,
    /// Delete whatever the report shows (`--discard-unsaved`).
    Discard,
    /// Delete if the report still has this digest (`--confirm-unsaved`).
    Confirm(String),
}

/// How a delete was judged against the last report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsavedVerdict {
    /// No report, or one without unsaved work: nothing to hold.
    Nothing,
    /// Unsaved work, and the delete discards it (`discard`) or confirmed the
    /// report's digest (`confirm`): it goes ahead, audited as such.
    GoesAhead { how: &'static str, digest: String },
    /// Unsaved work the delete did not consent to: held.
    Held(UnsavedReport),
}

/// The report as stored: what the agent found, checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    repositories_scanned: u64,
    truncated: bool,
    repositories: Vec<UnsavedRepository>,
}

/// Checks an agent's report and keeps it as the workspace's last.
pub(crate) async fn record(
    store: &Store,
    workspace_id: &str,
    report: AgentUnsaved,
) -> Result<(), ControlError> {
    if report.repositories.len() > MAX_REPOSITORIES {
        return Err(ControlError::BadRequest(format!(
            "a report names {} repositories; at most {MAX_REPOSITORIES}",
            report.repositories.len()
        )));
    }
    let mut repositories = Vec::with_capacity(report.repositories.len());
    for mut repository in report.repositories {
        if repository.path.chars().count() > MAX_PATH_CHARS
            || repository.path.chars().any(char::is_control)
        {
            return Err(ControlError::BadRequest(
                "a repository's path is longer than 4096 characters or not one line".into(),
            ));
        }
        repository.kinds.sort();
        repository.kinds.dedup();
        if !repository.kinds.is_empty() {
            repositories.push(repository);
        }
    }
    repositories.sort_by(|a, b| a.path.cmp(&b.path));
    let stored = Stored {
        repositories_scanned: report.repositories_scanned,
        truncated: report.truncated,
        repositories,
    };
    let text = serde_json::to_string(&stored)
        .map_err(|error| ControlError::Internal(format!("cannot write a report: {error}")))?;
    store.put_unsaved_report(workspace_id, &text).await?;
    Ok(())
}

/// The workspace's last report, with its age now and its digest.
pub(crate) async fn last_report(
    store: &Store,
    clock: &Clock,
    workspace_id: &str,
) -> Result<Option<UnsavedReport>, ControlError> {
    let Some(row) = store.unsaved_report(workspace_id).await? else {
        return Ok(None);
    };
    let stored: Stored = serde_json::from_str(&row.report).map_err(|error| {
        ControlError::Internal(format!(
            "the unsaved work report of workspace {workspace_id} does not read: {error}"
        ))
    })?;
    let age_ms = clock.now_ms().saturating_sub(row.made_at).max(0);
    Ok(Some(UnsavedReport {
        made_at: crate::times::utc_text(row.made_at),
        age_seconds: u64::try_from(age_ms / 1000).unwrap_or(0),
        digest: digest(&stored.repositories, stored.truncated),
        repositories_scanned: stored.repositories_scanned,
        truncated: stored.truncated,
        repositories: stored.repositories,
    }))
}

/// The digest of a report's content: each repository's path and kinds (in
/// the stored order: by path, kinds sorted), and whether it was cut short.
fn digest(repositories: &[UnsavedRepository], truncated: bool) -> String {
    let mut text = String::from("abode unsaved report 1\n");
    for repository in repositories {
        // A path is one line (checked at `record`): the newline ends it.
        text.push_str(&repository.path);
        for kind in &repository.kinds {
            text.push(' ');
            text.push_str(kind.as_str());
        }
        text.push('\n');
    }
    if truncated {
        text.push_str("truncated\n");
    }
    crate::secrets::sha256_hex(text.as_bytes())
}

/// Judges a delete against the workspace's last report.
pub(crate) async fn judge_delete(
    store: &Store,
    clock: &Clock,
    workspace_id: &str,
    consent: &UnsavedConsent,
) -> Result<UnsavedVerdict, ControlError> {
    let Some(report) = last_report(store, clock, workspace_id).await? else {
        return Ok(UnsavedVerdict::Nothing);
    };
    if report.repositories.is_empty() {
        return Ok(UnsavedVerdict::Nothing);
    }
    Ok(match consent {
        UnsavedConsent::Discard => UnsavedVerdict::GoesAhead {
            how: "discard",
            digest: report.digest,
        },
        UnsavedConsent::Confirm(digest) if *digest == report.digest => UnsavedVerdict::GoesAhead {
            how: "confirm",
            digest: report.digest,
        },
        _ => UnsavedVerdict::Held(report),
    })
}

/// One line about a held delete: the repositories (the first few), the
/// report's age and digest, and what to do.
pub fn held_line(workspace: &str, report: &UnsavedReport, consent: &UnsavedConsent) -> String {
    let shown: Vec<String> = report
        .repositories
        .iter()
        .take(5)
        .map(|repository| {
            let kinds: Vec<&str> = repository.kinds.iter().map(|kind| kind.as_str()).collect();
            format!("{} ({})", repository.path, kinds.join(", "))
        })
        .collect();
    let more = report.repositories.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let changed = if matches!(consent, UnsavedConsent::Confirm(_)) {
        "the report changed since the digest you confirmed; "
    } else {
        ""
    };
    format!(
        "{changed}workspace {workspace} has unsaved work in {}{more} (reported {} ago, digest {}): \
         delete with --confirm-unsaved {} or --discard-unsaved",
        shown.join("; "),
        age_text(report.age_seconds),
        report.digest,
        report.digest,
    )
}

/// An age for people: `42s`, `5m`, `3h`, `2d`.
pub fn age_text(seconds: u64) -> String {
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// The kinds as a list for people.
pub fn kinds_text(kinds: &[UnsavedKind]) -> String {
    kinds
        .iter()
        .map(|kind| kind.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository(path: &str, kinds: &[UnsavedKind]) -> UnsavedRepository {
        UnsavedRepository {
            path: path.into(),
            kinds: kinds.to_vec(),
        }
    }

    #[test]
    fn a_digest_changes_with_the_content_only() {
        let one = [repository("a", &[UnsavedKind::Untracked])];
        let same = digest(&one, false);
        assert_eq!(same, digest(&one, false));
        assert_ne!(same, digest(&one, true));
        assert_ne!(
            same,
            digest(
                &[repository(
                    "a",
                    &[UnsavedKind::Uncommitted, UnsavedKind::Untracked]
                )],
                false
            )
        );
    }

    #[test]
    fn ages_read_as_people_say_them() {
        assert_eq!(age_text(5), "5s");
        assert_eq!(age_text(600), "10m");
        assert_eq!(age_text(3 * 3600), "3h");
        assert_eq!(age_text(3 * 86_400), "3d");
    }
}
