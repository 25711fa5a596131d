//! The small platform both notification test suites run on: alice (owner),
//! bob (member), carol (template-admin), the system actors' accounts,
//! template `base` version 1, bob's `dev` and a prebuilt `pool-1` owned by
//! `prebuilds`, each with its first build queued.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use abode_store::*;

pub(super) struct Platform {
    pub(super) store: Store,
    pub(super) alice: User,
    pub(super) bob: User,
    pub(super) template: Template,
    /// Bob's `dev` and its build #1.
    pub(super) bobs: (Workspace, Build),
    /// The prebuilt `pool-1` and its build #1.
    pub(super) pooled: (Workspace, Build),
}

/// The platform in a SQLite database under `dir`.
pub(super) async fn platform(dir: &Path) -> Platform {
    let store = Store::open_sqlite(&dir.join("abode.db")).await.unwrap();
    let user = |name: &str, roles: &[Role]| NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        roles: roles.iter().copied().collect(),
        password_hash: "x".into(),
    };
    let alice = store
        .create_first_user(&user("alice", &[Role::Owner, Role::Member]))
        .await
        .unwrap();
    let bob = store
        .create_user(&user("bob", &[Role::Member]))
        .await
        .unwrap();
    store
        .create_user(&user("carol", &[Role::TemplateAdmin]))
        .await
        .unwrap();
    store.ensure_system_users().await.unwrap();
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![1],
            archive_sha256: "abc".into(),
            message: "first".into(),
            created_by: alice.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: None,
            presets: None,
            activate: true,
        })
        .await
        .unwrap();
    let mut created = Vec::new();
    for (owner, name) in [
        (bob.id.as_str(), "dev"),
        (SystemActor::Prebuilds.user_id(), "pool-1"),
    ] {
        let workspace_id = new_id();
        created.push(
            store
                .create_workspace(
                    &NewWorkspace {
                        id: workspace_id.clone(),
                        owner_id: owner.to_string(),
                        name: name.into(),
                        template_id: template.id.clone(),
                        template_version_id: version.id.clone(),
                        parameters: Parameters::new(),
                        preset_name: None,
                    },
                    &NewBuild {
                        id: new_id(),
                        workspace_id,
                        transition: Transition::Start,
                        template_version_id: version.id.clone(),
                        initiator_id: owner.to_string(),
                        reason: BuildReason::Initiator,
                        parameters: None,
                        workspace_parameters: None,
                        retention: None,
                        rename_to: None,
                        then_start: false,
                    },
                )
                .await
                .unwrap(),
        );
    }
    let pooled = created.pop().unwrap();
    let bobs = created.pop().unwrap();
    Platform {
        store,
        alice,
        bob,
        template,
        bobs,
        pooled,
    }
}
