//! Which token scope each API route needs (issue 49), by method and the
//! route as axum matched it. The user-token extractors ask it before a
//! handler runs, so a route that checks no `Action` (a person's inbox,
//! their external-auth links, retained records) is narrowed too; the
//! domain then asks `abode_authz::scope_permits` about the action and the
//! template or workspace named. Written out by hand; `crates/api/tests/
//! token_scopes.rs` walks every route with a token of each scope.

use abode_control::authz::{ScopeKind, TokenScope};
use axum::http::Method;

/// The kinds of scope a route may be reached with (`all` always may).
fn kinds(method: &Method, route: &str) -> &'static [ScopeKind] {
    use ScopeKind::*;
    let route = route.strip_prefix("/api/v1").unwrap_or(route);
    let get = *method == Method::GET || *method == Method::HEAD;
    match route {
        // Every token reads whose it is and may end itself.
        "/users/me" if get => &[Read, TemplatePush, WorkspaceConnect, WorkspaceBuild],
        "/logout" => &[Read, TemplatePush, WorkspaceConnect, WorkspaceBuild],
        "/workspaces/:workspace/connect" if get => &[WorkspaceConnect],
        "/templates/:name/versions" | "/templates/:name/versions/:number/activate"
            if *method == Method::POST =>
        {
            &[TemplatePush]
        }
        "/workspaces/:workspace/builds"
        | "/workspaces/:workspace/builds/:number/cancel"
        | "/workspaces/:workspace/restart"
            if *method == Method::POST =>
        {
            &[WorkspaceBuild]
        }
        _ if !get => &[],
        // Who else may reach a workspace is only `all`'s to read.
        "/workspaces/:workspace/sharing" => &[],
        // Reads: the domain narrows the limited kinds to what they name.
        "/templates" => &[Read, WorkspaceBuild],
        route if route.starts_with("/templates/:name") && !route.ends_with("/port-share") => {
            &[Read, TemplatePush, WorkspaceBuild]
        }
        route if route.starts_with("/workspaces/:workspace") => {
            &[Read, WorkspaceConnect, WorkspaceBuild]
        }
        _ => &[Read],
    }
}

/// The refusal of a token whose scope does not reach `route`.
pub(crate) fn check(
    scope: &TokenScope,
    method: &Method,
    route: Option<&str>,
) -> Result<(), String> {
    if scope.is_all() {
        return Ok(());
    }
    let allowed = route.map_or(&[][..], |route| kinds(method, route));
    if scope
        .grants()
        .iter()
        .any(|grant| allowed.contains(&grant.kind))
    {
        return Ok(());
    }
    let needs = match allowed.first() {
        Some(kind) => kind.to_string(),
        None => "all".to_string(),
    };
    Err(format!(
        "this API token's scope ({scope}) does not allow {method} {}: that needs scope {needs}",
        route.unwrap_or("this route")
    ))
}
