//! Where the pages are: the header's navigation for a signed-in person (the
//! pages the policy lets them open) and the addresses pages link to. Every
//! page takes them from here, so that no page names another for them.

use abode_control::authz::{self, Action};
use abode_store::Build;

use crate::html::Header;
use crate::session::Viewer;

/// The page header of `viewer`: the navigation lists the pages the
/// authorization policy lets them open (the pages themselves still ask the
/// door).
pub(crate) fn header(viewer: &Viewer) -> Header<'_> {
    let subject = viewer.caller.subject();
    // Templates are listed to everyone who may use one (their access
    // lists decide which); other pages by the widest scope held.
    let may = |action: Action| match action {
        Action::TemplateRead => {
            authz::template_visibility(&subject) != authz::TemplateVisibility::None
        }
        _ => authz::widest_scope(&subject, action).is_some(),
    };
    let pages = [
        ("/workspaces", "Workspaces", Action::WorkspaceRead),
        ("/templates", "Templates", Action::TemplateRead),
        ("/prebuilds", "Prebuilds", Action::PrebuildsRead),
        ("/retained", "Retained", Action::WorkspaceRead),
        ("/notifications", "Inbox", Action::NotificationRead),
        ("/audit", "Audit log", Action::AuditRead),
        ("/connections", "Connections", Action::WorkspaceRead),
        ("/users", "Users", Action::UserList),
        ("/tokens", "API tokens", Action::TokenList),
        ("/external-auth", "Linked accounts", Action::TokenList),
    ];
    Header {
        username: &viewer.caller.user.username,
        csrf: &viewer.csrf,
        nav: pages
            .into_iter()
            .filter(|(_, _, action)| may(*action))
            .map(|(href, label, _)| (href, label))
            .collect(),
    }
}

/// A workspace's page address.
pub(crate) fn workspace_url(owner: &str, name: &str) -> String {
    format!("/workspaces/{owner}/{name}")
}

/// A build's page address.
pub(crate) fn build_url(build: &Build) -> String {
    format!(
        "{}/builds/{}",
        workspace_url(&build.owner_name, &build.workspace_name),
        build.number
    )
}
