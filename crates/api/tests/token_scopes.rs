//! Which scope each API route needs, written by hand per route (not derived
//! from `authz::SCOPE_POLICY`), and the walk of every route of
//! `authz_matrix`'s table with a token of each scope: a route the scope
//! covers is never refused for the scope; any other is refused with `403`
//! and a body that names the scope it needs.

use serde_json::Value;

/// What a route needs of a token's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// Nothing: it takes no user token (before login, agents, builds).
    Nothing,
    /// `read`.
    Read,
    /// `template:push` naming the template.
    TemplatePush,
    /// `workspace:connect` naming the workspace.
    WorkspaceConnect,
    /// `workspace:build` naming the workspace.
    WorkspaceBuild,
    /// `read`, `workspace:connect` or `workspace:build` naming the
    /// workspace.
    WorkspaceRead,
    /// `read`, or `template:push` or `workspace:build` (which read the
    /// template they push or build from).
    TemplateRead,
    /// `read` or `workspace:build`: the list of templates.
    TemplateList,
    /// Every scope (the token's owner reading themselves).
    AnyScope,
    /// Only `all`.
    All,
}

/// The route table of scopes, by method, the path as `authz_matrix` writes
/// it and the row's body.
#[rustfmt::skip]
pub(crate) fn needs(method: &str, path: &str, body: &str) -> Needs {
    use Needs::*;
    let path = path.split('?').next().unwrap_or(path);
    match (method, path) {
        ("GET", "/health" | "/ready" | "/sign-in-methods") => Nothing,
        ("POST", "/users/first" | "/login" | "/oidc/cli-token") => Nothing,
        (_, p) if p.starts_with("/agent/") || p.starts_with("/builds/") => Nothing,
        ("GET", "/users/me") | ("POST", "/logout") => AnyScope,
        // Previews plan; the state, orphaned volumes and a retained
        // volume's files hold what only `all` may read.
        ("GET", p) if p.contains("/previews") || p.ends_with("/state") => All,
        ("GET", "/retained/{rec}/export" | "/volumes/orphans" | "/notifications/failed") => All,
        // Who else may use a workspace: only `all` reads or changes it.
        (_, "/workspaces/{ws}/sharing") => All,
        ("GET", p) if p.starts_with("/workspaces/{ws}/connect") => WorkspaceConnect,
        ("GET", p) if p.starts_with("/workspaces/{") => WorkspaceRead,
        ("GET", "/templates") => TemplateList,
        ("GET", "/templates/quick/port-share") => Read,
        ("GET", p) if p.starts_with("/templates/quick") => TemplateRead,
        ("GET", _) => Read,
        ("POST", "/templates/quick/versions" | "/templates/quick/versions/1/activate") => TemplatePush,
        ("POST", "/workspaces/{ws}/builds") if body.contains("delete") => All,
        ("POST", "/workspaces/{ws}/builds" | "/workspaces/{ws}/restart" | "/workspaces/{settled}/builds/1/cancel") => WorkspaceBuild,
        _ => All,
    }
}

/// The scopes walked, by the `--scope` text a token is made with (the
/// workspace ones name mem's `busy` and `settled`).
pub(crate) const SCOPES: [&str; 4] = [
    "read",
    "template:push",
    "workspace:connect",
    "workspace:build",
];

/// Whether a token of `scope` (as in [`SCOPES`]) passes a route that
/// needs `needs`.
pub(crate) fn covers(scope: &str, needs: Needs) -> bool {
    use Needs::*;
    match needs {
        Nothing | AnyScope => true,
        All => false,
        Read => scope == "read",
        TemplatePush => scope == "template:push",
        WorkspaceConnect => scope == "workspace:connect",
        WorkspaceBuild => scope == "workspace:build",
        WorkspaceRead => scope != "template:push",
        TemplateRead => scope != "workspace:connect",
        TemplateList => scope == "read" || scope == "workspace:build",
    }
}

/// The mismatch of one answer, if any.
pub(crate) fn judge(
    scope: &str,
    method: &str,
    path: &str,
    body: &str,
    status: u16,
    answer: &Value,
) -> Option<String> {
    let needs = needs(method, path, body);
    let refused_for_scope = status == 403 && answer.to_string().contains("API token's scope");
    match (covers(scope, needs), refused_for_scope) {
        (true, false) | (false, true) => None,
        (true, true) => Some(format!(
            "{method} {path} with a {scope} token ({needs:?}): refused for its scope: {answer}"
        )),
        (false, false) => Some(format!(
            "{method} {path} with a {scope} token ({needs:?}): expected 403 naming the scope, got {status}: {answer}"
        )),
    }
}
