//! Times the prebuild reconciliation's snapshot (`Store::prebuild_snapshot`,
//! one transaction) over 1,000 presets and 10,000 prebuilt workspaces, and
//! the lifecycle scheduler's tick snapshot (`Store::scheduler_tick_snapshot`)
//! over the same workspaces, on SQLite or PostgreSQL
//! (benches/prebuild-snapshot.sh runs both).
//!
//! The database is filled through the store itself: 100 templates whose
//! active version declares 10 presets each, and 10 prebuilt workspaces per
//! preset owned by the `prebuilds` system user, each with a succeeded start
//! build and one ready agent; one preset in ten also has a failed prebuild.
//!
//! Usage: prebuild_snapshot DATABASE [RUNS]
//!   DATABASE: a SQLite file (created) or a postgres:// URL of an empty database
#![allow(clippy::print_stdout)]

use std::error::Error;
use std::path::Path;
use std::time::Instant;

use abode_store::{
    new_id, AgentLifecycle, BuildReason, BuildStatus, NewAgent, NewBuild, NewTemplateVersion,
    NewUser, NewWorkspace, Parameters, Role, Roles, Store, SystemActor, Transition,
};

const TEMPLATES: usize = 100;
const PRESETS_PER_TEMPLATE: usize = 10;
const WORKSPACES_PER_PRESET: usize = 10;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (database, runs) = match args.as_slice() {
        [_, database] => (database, 21),
        [_, database, runs] => (database, runs.parse()?),
        _ => return Err("usage: prebuild_snapshot DATABASE [RUNS]".into()),
    };
    let store = if database.starts_with("postgres://") {
        Store::open_postgres(database).await?
    } else {
        Store::open_sqlite(Path::new(database)).await?
    };
    let owner = store
        .create_first_user(&NewUser {
            username: "owner".into(),
            email: "owner@example.com".into(),
            roles: Roles::from([Role::Owner, Role::Member]),
            password_hash: "-".into(),
        })
        .await?;
    store.ensure_system_users().await?;
    let pool_owner = SystemActor::Prebuilds.user_id().to_string();
    let presets: Vec<String> = (0..PRESETS_PER_TEMPLATE)
        .map(|n| {
            format!(
                r#"{{"name":"preset-{n}","parameters":{{"size":"{n}"}},"prebuilds":{{"instances":{WORKSPACES_PER_PRESET},"ttl_seconds":86400,"scheduling":{{"timezone":"Europe/Paris","schedules":[{{"cron":"* 8-18 * * 1-5","instances":12}}]}}}}}}"#
            )
        })
        .collect();
    let presets = format!("[{}]", presets.join(","));
    let start = Instant::now();
    for t in 0..TEMPLATES {
        let (template, version) = store
            .create_template_version(&NewTemplateVersion {
                template_name: format!("template-{t:03}"),
                archive: Vec::new(),
                archive_sha256: "0".repeat(64),
                message: "bench".into(),
                created_by: owner.id.clone(),
                validation_ok: true,
                validation_message: String::new(),
                parameters: Some(Vec::new()),
                presets: Some(presets.clone()),
                activate: true,
            })
            .await?;
        for p in 0..PRESETS_PER_TEMPLATE {
            for w in 0..WORKSPACES_PER_PRESET {
                let workspace_id = new_id();
                let build_id = new_id();
                store
                    .create_workspace(
                        &NewWorkspace {
                            id: workspace_id.clone(),
                            owner_id: pool_owner.clone(),
                            name: format!("prebuild-{t:03}-{p}-{w}"),
                            template_id: template.id.clone(),
                            template_version_id: version.id.clone(),
                            parameters: Parameters::from([("size".to_string(), p.to_string())]),
                            preset_name: Some(format!("preset-{p}")),
                        },
                        &NewBuild {
                            id: build_id.clone(),
                            workspace_id: workspace_id.clone(),
                            transition: Transition::Start,
                            template_version_id: version.id.clone(),
                            initiator_id: pool_owner.clone(),
                            reason: BuildReason::Prebuild,
                            parameters: None,
                            workspace_parameters: None,
                            retention: None,
                            rename_to: None,
                            then_start: false,
                        },
                    )
                    .await?;
                store.claim_job("bench", "bench", 60_000).await?;
                // One preset in ten has a failed prebuild among its own.
                let status = if p == 0 && w == 0 {
                    BuildStatus::Failed
                } else {
                    BuildStatus::Succeeded
                };
                store.finish_build(&build_id, status, None).await?;
                if status == BuildStatus::Succeeded {
                    let hash = format!("{build_id}-agent");
                    store
                        .replace_agents(
                            &workspace_id,
                            &build_id,
                            &[NewAgent {
                                name: "main".into(),
                                token_hash: hash.clone(),
                                startup_script: None,
                                claim_script: None,
                                settings: Default::default(),
                                dir: None,
                                env: "{}".into(),
                                apps: Vec::new(),
                            }],
                        )
                        .await?;
                    let agent = store.agent_by_token_hash(&hash).await?;
                    store
                        .agent_heartbeat(&agent.id, Some(AgentLifecycle::Ready))
                        .await?;
                }
            }
        }
    }
    println!(
        "filled {} presets and {} prebuilt workspaces in {:.0} s",
        TEMPLATES * PRESETS_PER_TEMPLATE,
        TEMPLATES * PRESETS_PER_TEMPLATE * WORKSPACES_PER_PRESET,
        start.elapsed().as_secs_f64()
    );
    let mut times = Vec::with_capacity(runs);
    let mut counts = (0, 0, 0);
    for _ in 0..runs {
        let start = Instant::now();
        let snapshot = store.prebuild_snapshot(&pool_owner, 0).await?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        counts = (
            snapshot.versions.len(),
            snapshot.workspaces.len(),
            snapshot.failures.len(),
        );
    }
    times.sort_by(f64::total_cmp);
    println!(
        "snapshot: {} versions, {} workspaces, {} pools with failures: median {:.1} ms, min {:.1} ms, max {:.1} ms over {runs} runs",
        counts.0,
        counts.1,
        counts.2,
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    // The lifecycle scheduler's tick reads every live workspace the same
    // way (issue 13): timed on the same 10,000.
    let mut times = Vec::with_capacity(runs);
    let mut counts = (0, 0);
    for _ in 0..runs {
        let start = Instant::now();
        let snapshot = store.scheduler_tick_snapshot().await?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        counts = (snapshot.policies.len(), snapshot.workspaces.len());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "scheduler tick snapshot: {} policies, {} workspaces: median {:.1} ms, min {:.1} ms, max {:.1} ms over {runs} runs",
        counts.0,
        counts.1,
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}
