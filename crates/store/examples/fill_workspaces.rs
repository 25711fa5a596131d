//! Fills a database with many workspaces for benches/list-workspaces.sh,
//! through the store itself (no Terraform): each workspace gets a started
//! build that succeeded and one ready agent, so a list page shows what a
//! real one does. Run while the server is up with `--provisioners 0`
//! (nothing else claims the jobs).
//!
//! Usage: fill_workspaces DATABASE OWNER COUNT [TOKENS_FILE]
//!   DATABASE: a SQLite file or a postgres:// URL
//!   OWNER: the (existing) user who pushes the template; the workspaces are
//!          spread over 100 users `bench-NN` created here, plus OWNER.
//!   TOKENS_FILE: where each agent's token goes, one per line, for a load
//!          generator that connects as the agents (benches/tls-tunnels.sh).
#![allow(clippy::print_stdout)]

use std::error::Error;
use std::path::Path;

use sha2::Digest;

use abode_store::{
    new_id, BuildReason, BuildStatus, NewAgent, NewBuild, NewTemplateVersion, NewUser,
    NewWorkspace, Parameters, Store, Transition,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (database, owner, count, tokens_file) = match args.as_slice() {
        [_, database, owner, count] => (database, owner, count, None),
        [_, database, owner, count, tokens] => (database, owner, count, Some(tokens)),
        _ => return Err("usage: fill_workspaces DATABASE OWNER COUNT [TOKENS_FILE]".into()),
    };
    let mut tokens = String::new();
    let count: usize = count.parse()?;
    let store = if database.starts_with("postgres://") {
        Store::open_postgres(database).await?
    } else {
        Store::open_sqlite(Path::new(database)).await?
    };
    let owner = match store.user_by_name(owner).await {
        Ok(user) => user,
        // A bare database (query plans, no server): a user nobody logs in as.
        Err(abode_store::StoreError::NotFound(_)) => {
            store
                .create_user(&NewUser {
                    username: owner.clone(),
                    email: format!("{owner}@example.com"),
                    roles: abode_store::Roles::from([
                        abode_store::Role::Owner,
                        abode_store::Role::Member,
                    ]),
                    password_hash: "-".into(),
                })
                .await?
        }
        Err(error) => return Err(error.into()),
    };
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "bench".into(),
            archive: Vec::new(),
            archive_sha256: "0".repeat(64),
            message: "bench".into(),
            created_by: owner.id.clone(),
            validation_ok: true,
            validation_message: String::new(),
            parameters: None,
            presets: None,
            activate: true,
        })
        .await?;
    let mut users = vec![owner];
    for n in 0..100 {
        users.push(
            store
                .create_user(&NewUser {
                    username: format!("bench-{n:02}"),
                    email: format!("bench-{n:02}@example.com"),
                    roles: abode_store::Roles::from([abode_store::Role::Member]),
                    password_hash: "-".into(),
                })
                .await?,
        );
    }
    for n in 0..count {
        let user = &users[n % users.len()];
        let workspace_id = new_id();
        let build_id = new_id();
        store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: user.id.clone(),
                    name: format!("ws-{n:05}"),
                    template_id: template.id.clone(),
                    template_version_id: version.id.clone(),
                    parameters: Parameters::new(),
                    preset_name: None,
                },
                &NewBuild {
                    id: build_id.clone(),
                    workspace_id: workspace_id.clone(),
                    transition: Transition::Start,
                    template_version_id: version.id.clone(),
                    initiator_id: user.id.clone(),
                    reason: BuildReason::Initiator,
                    parameters: None,
                    workspace_parameters: None,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await?;
        store.claim_job("bench", "bench", 60_000).await?;
        // Hashed as the control plane hashes agent tokens (SHA-256, hex).
        let token = format!("bench-agent-{}", new_id());
        tokens.push_str(&token);
        tokens.push('\n');
        store
            .finish_build(&build_id, BuildStatus::Succeeded, None)
            .await?;
        store
            .replace_agents(
                &workspace_id,
                &build_id,
                &[NewAgent {
                    name: "main".into(),
                    token_hash: hex::encode(sha2::Sha256::digest(token.as_bytes())),
                    startup_script: None,
                    claim_script: None,
                    settings: Default::default(),
                    dir: None,
                    env: "{}".into(),
                    apps: Vec::new(),
                }],
            )
            .await?;
        let agent = store.agents_of_workspace(&workspace_id).await?;
        if let Some(agent) = agent.first() {
            store
                .agent_heartbeat(&agent.id, Some(abode_store::AgentLifecycle::Ready))
                .await?;
        }
        if (n + 1) % 1000 == 0 {
            println!("{} workspaces", n + 1);
        }
    }
    store.close().await;
    if let Some(path) = tokens_file {
        std::fs::write(path, tokens)?;
    }
    Ok(())
}
