//! The job claim under load (issue 15, benches/claim-jobs.sh): a database
//! with PENDING + ROUNDS queued builds (half of their versions tagged), then
//! ROUNDS claims by a provisioner offering the tags, each timed while
//! PENDING or more jobs still wait, side by side with the same number of
//! point reads of a build by id (the floor: one indexed row). Prints the
//! median and the 99th percentile of each and their ratio.
//!
//! Usage: claim_jobs DATABASE [PENDING] [ROUNDS]
//!   DATABASE: a SQLite file (created) or a postgres:// URL (an empty database)
#![allow(clippy::print_stdout)]

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use abode_store::{
    new_id, BuildReason, NewBuild, NewTemplateVersion, NewUser, NewWorkspace, Parameters, Role,
    Roles, Store, Transition,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let database = args
        .get(1)
        .ok_or("usage: claim_jobs DATABASE [PENDING] [ROUNDS]")?;
    let pending: usize = args.get(2).map_or(Ok(100), |n| n.parse())?;
    let rounds: usize = args.get(3).map_or(Ok(200), |n| n.parse())?;
    let store = if database.starts_with("postgres://") {
        Store::open_postgres(database).await?
    } else {
        Store::open_sqlite(Path::new(database)).await?
    };
    let owner = store
        .create_user(&NewUser {
            username: "bench".into(),
            email: "bench@example.com".into(),
            roles: Roles::from([Role::Owner, Role::Member]),
            password_hash: "-".into(),
        })
        .await?;
    let tags = ["cloud=a".to_string()];
    let mut versions = Vec::new();
    for (name, tagged) in [("plain", &[][..]), ("tagged", &tags[..])] {
        let (template, version) = store
            .create_linted_template_version(
                &NewTemplateVersion {
                    template_name: name.into(),
                    archive: Vec::new(),
                    archive_sha256: "0".repeat(64),
                    message: "bench".into(),
                    created_by: owner.id.clone(),
                    validation_ok: true,
                    validation_message: String::new(),
                    parameters: None,
                    presets: None,
                    activate: true,
                },
                None,
                tagged,
                true,
                &[],
            )
            .await?;
        versions.push((template, version));
    }
    let mut build_ids = Vec::new();
    for index in 0..pending + rounds {
        let (template, version) = &versions[index % 2];
        let workspace_id = new_id();
        let (_, build) = store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: owner.id.clone(),
                    name: format!("w{index}"),
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
                    initiator_id: owner.id.clone(),
                    reason: BuildReason::Initiator,
                    parameters: None,
                    workspace_parameters: None,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await?;
        build_ids.push(build.id);
    }
    let mut claims = Vec::with_capacity(rounds);
    let mut reads = Vec::with_capacity(rounds);
    for build_id in build_ids.iter().take(rounds) {
        let started = Instant::now();
        store.build_by_id(build_id).await?;
        reads.push(started.elapsed());
        let started = Instant::now();
        store
            .claim_tagged_job("bench", "bench", "bench", 60_000, &tags)
            .await?
            .ok_or("a claim found no job")?;
        claims.push(started.elapsed());
    }
    let (claim_median, claim_p99) = summary(&mut claims);
    let (read_median, read_p99) = summary(&mut reads);
    println!(
        "{} claims with {pending}+ jobs waiting: median {:.2} ms, p99 {:.2} ms; \
         a build read by id: median {:.2} ms, p99 {:.2} ms; claim/read median ratio {:.1}",
        rounds,
        ms(claim_median),
        ms(claim_p99),
        ms(read_median),
        ms(read_p99),
        claim_median.as_secs_f64() / read_median.as_secs_f64().max(1e-9)
    );
    store.close().await;
    Ok(())
}

fn summary(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let at = |fraction: f64| {
        let index = ((times.len() as f64 - 1.0) * fraction).round() as usize;
        times.get(index).copied().unwrap_or_default()
    };
    (at(0.5), at(0.99))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
