//! A daemon's job is its claim's: the slot that claimed it. A build queued
//! again (its lease ran out before its plan was judged) can be claimed by
//! another slot of the same daemon while the run that lost it winds down;
//! that run's heartbeats, log lines and end must then be refused, not taken
//! for the new claim's (the chaos test once saw a lost run's "lease lost"
//! end recorded as the new run's). And a build's first verdict stands: a
//! daemon that sends another plan to be judged is refused, so a hold never
//! turns into an apply. A daemon's builds are its key's, by the key's id:
//! a key made again under a deleted key's name inherits none of them. A
//! real (SQLite) store; no Terraform runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abode_control::{Caller, Config, Control, ControlError};
use abode_host::{DaemonCaller, Host, HostParts};
use abode_protocol::LogLineWire;
use abode_store::*;

struct Setup {
    _dir: tempfile::TempDir,
    store: Store,
    control: Control,
    host: Host,
    owner: Caller,
    version_id: String,
    template_id: String,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("abode.db"))
        .await
        .unwrap();
    let control = Control::new(
        store.clone(),
        Config::new(dir.path().join("data"), "http://127.0.0.1:1".into()),
    );
    control.identity().ensure_system_actors().await.unwrap();
    let host = Host::new(HostParts::picked_from(&control, store.clone()));
    let roles = Roles::from([Role::Owner, Role::Member]);
    let alice = store
        .create_first_user(&NewUser {
            username: "alice".into(),
            email: "alice@example.com".into(),
            roles: roles.clone(),
            password_hash: "x".into(),
        })
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
    Setup {
        _dir: dir,
        store,
        control,
        host,
        owner: Caller {
            user: alice,
            roles,
            request_id: None,
            token_name: None,
            scope: abode_control::authz::TokenScope::all(),
        },
        version_id: version.id,
        template_id: template.id,
    }
}

/// A workspace whose first build is queued; that build's id.
async fn queued_build(setup: &Setup) -> String {
    let id = new_id();
    let build_id = new_id();
    setup
        .store
        .create_workspace(
            &NewWorkspace {
                id: id.clone(),
                owner_id: setup.owner.user.id.clone(),
                name: "ws".into(),
                template_id: setup.template_id.clone(),
                template_version_id: setup.version_id.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &NewBuild {
                id: build_id.clone(),
                workspace_id: id,
                transition: Transition::Start,
                template_version_id: setup.version_id.clone(),
                initiator_id: setup.owner.user.id.clone(),
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
    build_id
}

fn line(text: &str) -> LogLineWire {
    LogLineWire {
        stage: "plan".into(),
        level: "info".into(),
        text: text.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_slot_that_claimed_a_job_speaks_for_it() {
    let setup = setup().await;
    let build_id = queued_build(&setup).await;
    let (key, secret) = setup
        .control
        .provisioner_keys()
        .create(&setup.owner, "k", &[])
        .await
        .unwrap();
    let slot = |slot: &str| DaemonCaller {
        key_hash: abode_control::token_hash(&secret),
        key_id: key.id.clone(),
        key_name: "k".into(),
        tags: Vec::new(),
        daemon_id: "d".into(),
        slot: slot.into(),
    };
    let (first, second) = (slot("d-1"), slot("d-2"));

    let acquired = setup
        .host
        .acquire_daemon_job(&first, &[], "d-1", "0.1.0", Duration::ZERO)
        .await
        .unwrap()
        .expect("the queued build is claimed");
    assert_eq!(acquired.inputs.build_id, build_id);

    // The claiming slot speaks for the job.
    let canceled = setup
        .host
        .daemon_heartbeat(&first, &build_id, "d-1", "0.1.0")
        .await
        .unwrap();
    assert!(!canceled);
    setup
        .host
        .daemon_log(&first, &build_id, &[line("from the claim's run")])
        .await
        .unwrap();

    // Another slot of the same daemon (same key, same daemon id, so the
    // same lease holder) does not.
    let refused = setup
        .host
        .daemon_heartbeat(&second, &build_id, "d-2", "0.1.0")
        .await;
    assert!(
        matches!(refused, Err(ControlError::Conflict(_))),
        "{refused:?}"
    );
    let refused = setup
        .host
        .daemon_log(&second, &build_id, &[line("from a lost run")])
        .await;
    assert!(
        matches!(refused, Err(ControlError::Conflict(_))),
        "{refused:?}"
    );
    let logged = setup.store.logs_after(&build_id, 0, 100).await.unwrap();
    let texts: Vec<&str> = logged.iter().map(|l| l.text.as_str()).collect();
    assert!(texts.contains(&"from the claim's run"), "{texts:?}");
    assert!(!texts.contains(&"from a lost run"), "{texts:?}");
    let build = setup.store.build_by_id(&build_id).await.unwrap();
    assert_eq!(build.status, BuildStatus::Running);
}

/// `terraform show -json` of plans the guard holds (a protected resource
/// replaced, annotated in the plan) and allows (no change) on a start.
const HELD_PLAN: &[u8] = include_bytes!("../../guard/tests/fixtures/annotation-root/plan.json");
const HARMLESS_PLAN: &[u8] = include_bytes!("../../guard/tests/fixtures/no-change/plan.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_verdict_on_a_build_stands() {
    let setup = setup().await;
    let build_id = queued_build(&setup).await;
    let (key, secret) = setup
        .control
        .provisioner_keys()
        .create(&setup.owner, "k", &[])
        .await
        .unwrap();
    let daemon = DaemonCaller {
        key_hash: abode_control::token_hash(&secret),
        key_id: key.id.clone(),
        key_name: "k".into(),
        tags: Vec::new(),
        daemon_id: "d".into(),
        slot: "d-1".into(),
    };
    setup
        .host
        .acquire_daemon_job(&daemon, &[], "d-1", "0.1.0", Duration::ZERO)
        .await
        .unwrap()
        .expect("the queued build is claimed");
    let judge = |plan: &'static [u8]| {
        let (host, daemon, build_id) = (setup.host.clone(), daemon.clone(), build_id.clone());
        async move {
            host.daemon_judge(
                &daemon,
                &build_id,
                plan.to_vec(),
                b"the saved plan".to_vec(),
            )
            .await
        }
    };
    let first = judge(HELD_PLAN).await.unwrap();
    assert_eq!(first, abode_runner::Verdict::Hold);

    // Another plan, that the guard would allow, is not judged.
    let second = judge(HARMLESS_PLAN).await;
    assert!(
        matches!(second, Err(ControlError::AlreadyJudged(_))),
        "{second:?}"
    );
    // The same plan asked again (an answer lost on the way) gets the same
    // verdict.
    assert_eq!(judge(HELD_PLAN).await.unwrap(), abode_runner::Verdict::Hold);

    let build = setup.store.build_by_id(&build_id).await.unwrap();
    let decision = build.guard_report.map(|report| report.decision);
    assert_eq!(decision, Some(abode_guard::Decision::Confirm));
    // And the run may not end as if it had been allowed.
    let applied = setup
        .host
        .daemon_complete(&daemon, &build_id, abode_protocol::Outcome::Applied, None)
        .await;
    assert!(
        matches!(applied, Err(ControlError::Conflict(_))),
        "{applied:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_again_under_a_deleted_key_s_name_inherits_none_of_its_builds() {
    let setup = setup().await;
    let build_id = queued_build(&setup).await;
    let daemon = |key: &abode_control::ProvisionerKey, secret: &str| DaemonCaller {
        key_hash: abode_control::token_hash(secret),
        key_id: key.id.clone(),
        key_name: key.name.clone(),
        tags: Vec::new(),
        // The same daemon (its data dir kept) and slot.
        daemon_id: "d".into(),
        slot: "d-1".into(),
    };
    let (old_key, old_secret) = setup
        .control
        .provisioner_keys()
        .create(&setup.owner, "builders", &[])
        .await
        .unwrap();
    let old = daemon(&old_key, &old_secret);
    setup
        .host
        .acquire_daemon_job(&old, &[], "d-1", "0.1.0", Duration::ZERO)
        .await
        .unwrap()
        .expect("the queued build is claimed");
    setup
        .control
        .provisioner_keys()
        .delete(&setup.owner, "builders")
        .await
        .unwrap();
    let (new_key, new_secret) = setup
        .control
        .provisioner_keys()
        .create(&setup.owner, "builders", &[])
        .await
        .unwrap();
    assert_ne!(new_key.id, old_key.id);
    let new = daemon(&new_key, &new_secret);
    assert_ne!(
        abode_host::daemon_holder(&new),
        abode_host::daemon_holder(&old)
    );

    // Every call about the old key's build is refused to the new key's
    // daemon, before and after its body is read.
    let heartbeat = setup
        .host
        .daemon_heartbeat(&new, &build_id, "d-1", "0.1.0")
        .await;
    assert!(
        matches!(heartbeat, Err(ControlError::Conflict(_))),
        "{heartbeat:?}"
    );
    let log = setup
        .host
        .daemon_log(&new, &build_id, &[line("from the new key")])
        .await;
    assert!(matches!(log, Err(ControlError::Conflict(_))), "{log:?}");
    let ended = setup
        .host
        .daemon_complete(&new, &build_id, abode_protocol::Outcome::Applied, None)
        .await;
    assert!(matches!(ended, Err(ControlError::Conflict(_))), "{ended:?}");
    let state = setup
        .host
        .daemon_keep_state(&new, &build_id, b"{}".to_vec(), None)
        .await;
    assert!(
        matches!(state, Err(ControlError::Forbidden(_))),
        "{state:?}"
    );
    for need in [
        abode_host::DaemonNeed::Holding,
        abode_host::DaemonNeed::Held,
    ] {
        let early = setup
            .host
            .daemon_may_call_about(&new_key.id, &build_id, need)
            .await;
        assert!(early.is_err(), "{need:?}");
    }
    let build = setup.store.build_by_id(&build_id).await.unwrap();
    assert_eq!(build.status, BuildStatus::Running);
}
