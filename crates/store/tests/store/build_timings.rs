//! Build timings (`build_timings.rs`): a run's stages written again replace
//! their own, another run's stand beside them, read back by start; an
//! agent's lifecycle makes its `agent_connected` (from the build's last
//! stage), `scripts` (under way, then ended) and `ready`, once each.

use abode_store::*;

use crate::common::*;

fn stage(job: &str, stage: &str, started_us: i64, ended_us: i64) -> StageTiming {
    StageTiming {
        job: job.into(),
        stage: stage.into(),
        started_us,
        ended_us: Some(ended_us),
    }
}

async fn a_runs_stages_replace_their_own_and_an_agents_follow_its_build(store: Store) {
    let (_user, workspace, build) = seeded(&store).await;
    store
        .put_timings(
            &build.id,
            &[
                stage("build", "init", 10, 20),
                stage("build", "plan", 20, 40),
            ],
            &[],
        )
        .await
        .unwrap();
    // The run again (handed out again): its own stages replaced.
    store
        .put_timings(&build.id, &[stage("build", "init", 5, 15)], &[])
        .await
        .unwrap();
    let resource = ResourceTiming {
        job: "build".into(),
        phase: "apply".into(),
        address: "terraform_data.a".into(),
        action: "create".into(),
        started_us: 30,
        ended_us: 31,
    };
    store
        .put_timings(
            &build.id,
            &[stage("apply_saved_plan", "init", 50, 60)],
            &[resource.clone(), resource.clone()],
        )
        .await
        .unwrap();
    let timings = store.build_timings(&build.id).await.unwrap();
    let seen: Vec<(&str, &str, i64)> = timings
        .stages
        .iter()
        .map(|s| (s.job.as_str(), s.stage.as_str(), s.started_us))
        .collect();
    assert_eq!(
        seen,
        [
            ("build", "init", 5),
            ("build", "plan", 20),
            ("apply_saved_plan", "init", 50)
        ]
    );
    assert_eq!(timings.resources, [resource]);

    // Its agent: connected from the build's last stage's end, its scripts
    // under way, then ended with its ready; a second report changes nothing.
    store
        .replace_agents(
            &workspace.id,
            &build.id,
            &[NewAgent {
                name: "main".into(),
                token_hash: "hash-main".into(),
                startup_script: None,
                claim_script: None,
                settings: Default::default(),
                dir: None,
                env: "{}".into(),
                apps: Vec::new(),
            }],
        )
        .await
        .unwrap();
    let agent = store.agent_by_token_hash("hash-main").await.unwrap();
    let ended = store
        .agent_lifecycle_timings(&agent.id, AgentLifecycle::Starting)
        .await
        .unwrap();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].0, "agent_connected");
    let timings = store.build_timings(&build.id).await.unwrap();
    let connected = timings
        .stages
        .iter()
        .find(|s| s.stage == "agent_connected")
        .unwrap();
    assert_eq!(
        (connected.job.as_str(), connected.started_us),
        ("agent:main", 60)
    );
    let scripts = timings
        .stages
        .iter()
        .find(|s| s.stage == "scripts")
        .unwrap();
    assert_eq!(scripts.ended_us, None);
    let ended = store
        .agent_lifecycle_timings(&agent.id, AgentLifecycle::Ready)
        .await
        .unwrap();
    let names: Vec<&str> = ended.iter().map(|(stage, _)| stage.as_str()).collect();
    assert_eq!(names, ["scripts", "ready"]);
    assert!(store
        .agent_lifecycle_timings(&agent.id, AgentLifecycle::Ready)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .agent_lifecycle_timings(&agent.id, AgentLifecycle::Starting)
        .await
        .unwrap()
        .is_empty());
    let timings = store.build_timings(&build.id).await.unwrap();
    let stages: Vec<&str> = timings.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(
        stages,
        [
            "init",
            "plan",
            "init",
            "agent_connected",
            "scripts",
            "ready"
        ]
    );
    assert!(timings.stages.iter().all(|s| s.ended_us.is_some()));
    // An unknown build has none.
    assert_eq!(
        store.build_timings("no-such-build").await.unwrap(),
        BuildTimings::default()
    );
}

on_every_backend!(a_runs_stages_replace_their_own_and_an_agents_follow_its_build);
