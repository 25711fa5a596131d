//! Activity (`schedules.rs`): an owner's requests acting on their running
//! workspace record its use at most once a minute and push its deadline by
//! the template's activity bump, never past the hard deadline; reading it,
//! and other people's requests, are not use. A real (SQLite) store on the
//! control plane's manual clock; no Terraform runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abode_control::{Caller, Clock, Config, Control};
use abode_sdk::ScheduleSpec;
use abode_store::*;

const T0: i64 = 1_700_000_000_000;
const MINUTE: i64 = 60_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_requests_record_use_once_a_minute_and_bump_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, hand) = Clock::manual(T0);
    let store = Store::open_sqlite(&dir.path().join("abode.db"))
        .await
        .unwrap()
        .with_clock(clock.clone());
    let mut config = Config::new(dir.path().join("data"), "http://127.0.0.1:1".into());
    config.clock = clock;
    let control = Control::new(store.clone(), config);
    let user = |name: &str, roles: Roles| NewUser {
        username: name.into(),
        email: format!("{name}@example.com"),
        roles,
        password_hash: "x".into(),
    };
    let alice = store
        .create_first_user(&user("alice", Roles::from([Role::Member])))
        .await
        .unwrap();
    let tess = store
        .create_user(&user("tess", Roles::from([Role::TemplateAdmin])))
        .await
        .unwrap();
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![1],
            archive_sha256: "1".into(),
            message: String::new(),
            created_by: alice.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: Some(Vec::new()),
            presets: None,
            activate: true,
        })
        .await
        .unwrap();
    let id = new_id();
    let (workspace, first) = store
        .create_workspace(
            &NewWorkspace {
                id: id.clone(),
                owner_id: alice.id.clone(),
                name: "dev".into(),
                template_id: template.id.clone(),
                template_version_id: version.id.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                id: new_id(),
                workspace_id: id.clone(),
                transition: Transition::Start,
                template_version_id: version.id.clone(),
                initiator_id: alice.id.clone(),
                reason: BuildReason::Initiator,
                parameters: None,
                workspace_parameters: None,
                retention: None,
                rename_to: None,
                then_start: false,
            },
        )
        .await
        .unwrap();
    store
        .claim_job("test", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    store
        .finish_build(&first.id, BuildStatus::Succeeded, None)
        .await
        .unwrap();
    // A run whose deadline is in 30 minutes and hard deadline in 2 hours;
    // the template's activity bump is the default hour.
    store
        .set_deadlines(
            &workspace.id,
            Some(T0 + 30 * MINUTE),
            Some(T0 + 120 * MINUTE),
        )
        .await
        .unwrap();
    let as_caller = |user: &User, roles: Roles| Caller {
        user: user.clone(),
        roles,
        request_id: None,
        token_name: None,
        scope: abode_control::authz::TokenScope::all(),
    };
    let owner = as_caller(&alice, Roles::from([Role::Member]));
    let admin = as_caller(&tess, Roles::from([Role::TemplateAdmin]));

    // (ms after T0, who, on which reference, acts (else reads),
    //  last_used_at, deadline after)
    type Step<'a> = (i64, &'a Caller, &'a str, bool, Option<i64>, i64);
    let steps: [Step; 6] = [
        (0, &admin, "alice/dev", false, None, T0 + 30 * MINUTE),
        (0, &owner, "dev", false, None, T0 + 30 * MINUTE),
        (0, &owner, "dev", true, Some(T0), T0 + 60 * MINUTE),
        (MINUTE / 2, &owner, "dev", true, Some(T0), T0 + 60 * MINUTE),
        (
            MINUTE + 1_000,
            &owner,
            "dev",
            true,
            Some(T0 + MINUTE + 1_000),
            T0 + 61 * MINUTE + 1_000,
        ),
        (
            90 * MINUTE,
            &owner,
            "dev",
            true,
            Some(T0 + 90 * MINUTE),
            T0 + 120 * MINUTE,
        ),
    ];
    for (at, caller, reference, acts, used, deadline) in steps {
        hand.set(T0 + at);
        if acts {
            control
                .schedule_settings()
                .set_schedule(caller, reference, &ScheduleSpec::default())
                .await
                .unwrap();
        } else {
            control.workspaces().get(caller, reference).await.unwrap();
        }
        let schedule = control
            .schedule_settings()
            .schedule(&owner, "dev")
            .await
            .unwrap();
        let step = format!("at +{at} ms by {reference}, acting: {acts}");
        assert_eq!(schedule.last_used_at, used, "{step}");
        assert_eq!(schedule.deadline, Some(deadline), "{step}");
    }

    // Extending: up to the hard deadline, not past it.
    hand.set(T0 + 100 * MINUTE);
    let refused = control
        .schedule_settings()
        .extend(&owner, "dev", Duration::from_secs(3600))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("max ttl"), "{refused}");
    let extended = control
        .schedule_settings()
        .extend(&owner, "dev", Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(extended.deadline, Some(T0 + 110 * MINUTE));
}
