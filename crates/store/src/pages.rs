//! Lists that scale: every list is one query per page, read in the order of
//! a sort key and continued with an opaque cursor (the last row's key,
//! base64), so a page costs the same whether it is the first or the
//! hundredth and rows written meanwhile neither repeat nor vanish.
//!
//! The store owns the cursor's format because only the store knows the sort
//! key; callers pass it back untouched.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::error::BadCursor;
use crate::records::{Agent, Build, BuildStatus, Transition, Workspace};

/// Rows per page when the caller does not say.
pub const DEFAULT_PAGE_SIZE: i64 = 50;
/// The most rows one page may hold: a page is one query, kept small.
pub const MAX_PAGE_SIZE: i64 = 200;

/// A page size within `1..=MAX_PAGE_SIZE`, `DEFAULT_PAGE_SIZE` when absent.
pub fn page_size(limit: Option<i64>) -> i64 {
    limit.unwrap_or(DEFAULT_PAGE_SIZE).clamp(1, MAX_PAGE_SIZE)
}

/// One page of a list and the cursor of the next (none on the last page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// Separates a key's fields; no stored name or id holds a NUL (PostgreSQL
/// text cannot), so the split is unambiguous.
const SEPARATOR: char = '\0';

/// Encodes a sort key as a cursor: a list tag (so that one list's cursor is
/// refused by another) and the key's fields.
pub(crate) fn encode_cursor(tag: &str, fields: &[&str]) -> String {
    let mut text = String::from(tag);
    for field in fields {
        text.push(SEPARATOR);
        text.push_str(field);
    }
    URL_SAFE_NO_PAD.encode(text)
}

/// The fields of a cursor of list `tag` with exactly `count` fields.
pub(crate) fn decode_cursor(
    tag: &str,
    cursor: &str,
    count: usize,
) -> Result<Vec<String>, BadCursor> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| BadCursor)?;
    let text = String::from_utf8(bytes).map_err(|_| BadCursor)?;
    let mut parts = text.split(SEPARATOR);
    if parts.next() != Some(tag) {
        return Err(BadCursor);
    }
    let fields: Vec<String> = parts.map(String::from).collect();
    if fields.len() != count {
        return Err(BadCursor);
    }
    Ok(fields)
}

pub(crate) fn parse_i64(field: &str) -> Result<i64, BadCursor> {
    field.parse().map_err(|_| BadCursor)
}

/// Takes `limit + 1` fetched rows down to `limit` and names the next page's
/// cursor after the last row kept, if there were more.
pub(crate) fn paged<T>(mut rows: Vec<T>, limit: i64, key: impl Fn(&T) -> String) -> Page<T> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let next = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(key)
    } else {
        None
    };
    Page { items: rows, next }
}

/// Which workspaces a page lists. Sorted by owner name, workspace name,
/// creation time and id.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceFilter {
    /// Only this owner's (a member's own view); `None`: everyone's.
    pub owner_id: Option<String>,
    /// With `owner_id`: the workspaces shared with that user too (by name,
    /// a group or `Everyone`; issue 49).
    pub include_shared: bool,
    /// Only workspaces of the owner with this username.
    pub owner_name: Option<String>,
    /// Only workspaces of this template.
    pub template: Option<String>,
    /// Only workspaces whose latest build has this status and, if given,
    /// this transition (the domain maps its workspace statuses onto these).
    pub latest_build: Option<(BuildStatus, Option<Transition>)>,
    pub include_deleted: bool,
    /// Leave out the workspaces of system users (the `prebuilds` pool's).
    pub exclude_system_owners: bool,
    pub after: Option<String>,
    pub limit: i64,
}

/// The newest finished build of a workspace, as far as agent health needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettledBuild {
    pub status: BuildStatus,
    pub transition: Transition,
    pub finished_at: Option<i64>,
}

/// A workspace with everything its list row shows, read in the page's one
/// query: its latest build, its newest finished build and its agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceSummary {
    pub workspace: Workspace,
    pub latest_build: Build,
    /// `None` when no build has finished yet.
    pub settled: Option<SettledBuild>,
    /// By name.
    pub agents: Vec<Agent>,
    /// The state lock a build whose holder was lost keeps, if any.
    pub lost_lock: Option<LostLock>,
}

/// A workspace's state lock kept by a build whose holder was lost (a list's
/// view of [`crate::StateLock`]). Times are Unix ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostLock {
    pub build_number: i64,
    pub holder: String,
    pub taken_at: i64,
    pub lost_at: i64,
}

pub(crate) const WORKSPACE_CURSOR: &str = "w1";

pub(crate) fn workspace_cursor(summary: &WorkspaceSummary) -> String {
    let workspace = &summary.workspace;
    encode_cursor(
        WORKSPACE_CURSOR,
        &[
            &workspace.owner_name,
            &workspace.name,
            &workspace.created_at.to_string(),
            &workspace.id,
        ],
    )
}

pub(crate) const BUILD_CURSOR: &str = "b1";
pub(crate) const AUDIT_CURSOR: &str = "a1";
pub(crate) const TEMPLATE_CURSOR: &str = "t1";
pub(crate) const USER_CURSOR: &str = "u1";
pub(crate) const TOKEN_CURSOR: &str = "k1";
pub(crate) const RETAINED_CURSOR: &str = "r1";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_what_was_not_handed_out() {
        let cursor = encode_cursor("w1", &["alice", "dev", "12", "id"]);
        assert_eq!(
            decode_cursor("w1", &cursor, 4).unwrap(),
            vec!["alice", "dev", "12", "id"]
        );
        assert_eq!(decode_cursor("b1", &cursor, 4), Err(BadCursor));
        assert_eq!(decode_cursor("w1", &cursor, 3), Err(BadCursor));
        assert_eq!(decode_cursor("w1", "!!", 4), Err(BadCursor));
        assert_eq!(decode_cursor("w1", "", 4), Err(BadCursor));
    }

    #[test]
    fn page_sizes_are_bounded() {
        assert_eq!(page_size(None), 50);
        assert_eq!(page_size(Some(0)), 1);
        assert_eq!(page_size(Some(10_000)), 200);
    }
}
