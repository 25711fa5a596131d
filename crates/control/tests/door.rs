//! The door (`Builds::request`): every combination of the workspace's
//! state, its active build, the transition asked for and who asks, with the
//! answer. The builds are recorded in a real (SQLite) store; no Terraform
//! runs, as nothing here claims the jobs the door queues.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use abode_control::{Actor, BuildOrder, BuildTarget, Config, Control, ControlError, VersionChoice};
use abode_store::*;

/// The state a workspace is put in before the door is asked.
#[derive(Debug, Clone, Copy)]
enum State {
    Running,
    Stopped,
    /// The latest build failed.
    Failed,
    /// The latest build was canceled.
    Canceled,
    /// A build is queued.
    Pending,
    /// A build runs.
    Building,
    /// A build waits for a confirmation of its plan.
    Held,
    Deleted,
}

/// What is asked.
#[derive(Debug, Clone, Copy)]
enum Ask {
    Start,
    Stop,
    Delete,
    /// A start on the template's active version (newer than the workspace's).
    Update,
    /// A stop that also asks for another version.
    StopOnActive,
}

/// The answer: accepted, or refused as a conflict / a bad request whose
/// message contains this.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Accepted,
    Conflict(&'static str),
    BadRequest(&'static str),
}

use Answer::*;
use Ask::*;
use State::*;

const ACTIVE: &str = "already has build";
const HELD: &str = "awaiting confirmation";

/// The table, written out: (state, ask) -> answer, for every actor alike.
const TABLE: &[(State, Ask, Answer)] = &[
    (Running, Start, Conflict("is already running")),
    (Running, Stop, Accepted),
    (Running, Delete, Accepted),
    (Running, Update, Accepted),
    (Running, StopOnActive, BadRequest("only a start updates")),
    (Stopped, Start, Accepted),
    (Stopped, Stop, Conflict("is already stopped")),
    (Stopped, Delete, Accepted),
    (Stopped, Update, Accepted),
    (Stopped, StopOnActive, BadRequest("only a start updates")),
    (Failed, Start, Accepted),
    (Failed, Stop, Accepted),
    (Failed, Delete, Accepted),
    (Failed, Update, Accepted),
    (Canceled, Start, Accepted),
    (Canceled, Stop, Accepted),
    (Canceled, Delete, Accepted),
    (Canceled, Update, Accepted),
    (Pending, Start, Conflict(ACTIVE)),
    (Pending, Stop, Conflict(ACTIVE)),
    (Pending, Delete, Conflict(ACTIVE)),
    (Pending, Update, Conflict(ACTIVE)),
    (Building, Start, Conflict(ACTIVE)),
    (Building, Stop, Conflict(ACTIVE)),
    (Building, Delete, Conflict(ACTIVE)),
    (Building, Update, Conflict(ACTIVE)),
    (Held, Start, Conflict(HELD)),
    (Held, Stop, Conflict(HELD)),
    (Held, Delete, Conflict(HELD)),
    (Held, Update, Conflict(HELD)),
    (Deleted, Start, Conflict("was deleted")),
    (Deleted, Stop, Conflict("was deleted")),
    (Deleted, Delete, Conflict("was deleted")),
    (Deleted, Update, Conflict("was deleted")),
];

struct Setup {
    _dir: tempfile::TempDir,
    control: Control,
    store: Store,
    alice: User,
    template: Template,
    first_version: String,
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
    let alice = store
        .create_first_user(&NewUser {
            username: "alice".into(),
            email: "alice@example.com".into(),
            roles: Roles::from([Role::Owner, Role::Member]),
            password_hash: "x".into(),
        })
        .await
        .unwrap();
    let version = |number: u8| NewTemplateVersion {
        template_name: "base".into(),
        archive: vec![number],
        archive_sha256: format!("{number}"),
        message: String::new(),
        created_by: alice.id.clone(),
        validation_ok: true,
        validation_message: "ok".into(),
        parameters: Some(Vec::new()),
        presets: None,
        activate: true,
    };
    let (_, first) = store.create_template_version(&version(1)).await.unwrap();
    let (template, _) = store.create_template_version(&version(2)).await.unwrap();
    Setup {
        _dir: dir,
        control,
        store,
        alice,
        template,
        first_version: first.id,
    }
}

/// A workspace of alice's on version 1, put in `state`.
async fn workspace_in(setup: &Setup, name: &str, state: State) -> Workspace {
    let store = &setup.store;
    let build = |workspace_id: &str, transition: Transition| NewBuild {
        id: new_id(),
        workspace_id: workspace_id.to_string(),
        transition,
        template_version_id: setup.first_version.clone(),
        initiator_id: setup.alice.id.clone(),
        reason: BuildReason::Initiator,
        parameters: None,
        workspace_parameters: None,
        retention: None,
        rename_to: None,
        then_start: false,
    };
    let id = new_id();
    let (workspace, first) = store
        .create_workspace(
            &NewWorkspace {
                id: id.clone(),
                owner_id: setup.alice.id.clone(),
                name: name.into(),
                template_id: setup.template.id.clone(),
                template_version_id: setup.first_version.clone(),
                parameters: Parameters::new(),
                preset_name: None,
            },
            &build(&id, Transition::Start),
        )
        .await
        .unwrap();
    let finish = |id: String, status: BuildStatus| async move {
        store.finish_build(&id, status, None).await.unwrap();
    };
    if matches!(state, Pending) {
        return workspace;
    }
    let claimed = store
        .claim_job("door-test", "server", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.build_id, first.id);
    match state {
        Building => {}
        Held => {
            let plan = SavedPlan {
                plan: vec![1],
                digest: "d".repeat(64),
                state_digest: "s".into(),
            };
            assert!(store.hold_build(&first.id, &plan, i64::MAX).await.unwrap());
        }
        Failed => finish(first.id, BuildStatus::Failed).await,
        Canceled => finish(first.id, BuildStatus::Canceled).await,
        Running | Stopped | Deleted => {
            finish(first.id, BuildStatus::Succeeded).await;
            let then = match state {
                Stopped => Transition::Stop,
                Deleted => Transition::Delete,
                _ => return store.workspace_by_id(&workspace.id).await.unwrap(),
            };
            let next = store
                .create_build(&build(&workspace.id, then))
                .await
                .unwrap();
            store
                .claim_job("door-test", "server", 60_000)
                .await
                .unwrap()
                .unwrap();
            finish(next.id, BuildStatus::Succeeded).await;
            if matches!(state, Deleted) {
                store.mark_workspace_deleted(&workspace.id).await.unwrap();
            }
        }
        Pending => unreachable!(),
    }
    store.workspace_by_id(&workspace.id).await.unwrap()
}

fn order(actor: &Actor, ask: Ask) -> BuildOrder {
    let reason = match actor {
        Actor::User(_) => BuildReason::Initiator,
        Actor::System(_) => BuildReason::Autostart,
    };
    let (transition, version) = match ask {
        Start => (Transition::Start, VersionChoice::Current),
        Stop => (Transition::Stop, VersionChoice::Current),
        Delete => (Transition::Delete, VersionChoice::Current),
        Update => (Transition::Start, VersionChoice::Active),
        StopOnActive => (Transition::Stop, VersionChoice::Active),
    };
    BuildOrder {
        actor: actor.clone(),
        request_id: None,
        transition,
        version,
        reason,
        parameters: BTreeMap::new(),
        retention: None,
        rename_to: None,
        then_start: false,
    }
}

fn answer_of(result: &Result<Build, ControlError>) -> String {
    match result {
        Ok(_) => "accepted".into(),
        Err(ControlError::Conflict(message)) => format!("conflict: {message}"),
        Err(ControlError::BadRequest(message)) => format!("bad request: {message}"),
        Err(other) => format!("other: {other}"),
    }
}

fn matches(expected: Answer, result: &Result<Build, ControlError>) -> bool {
    match (expected, result) {
        (Accepted, Ok(_)) => true,
        (Conflict(part), Err(ControlError::Conflict(message)))
        | (BadRequest(part), Err(ControlError::BadRequest(message))) => message.contains(part),
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_transition_and_actor_gets_its_answer() {
    let setup = setup().await;
    let actors = [
        Actor::User(setup.alice.clone()),
        Actor::System(SystemActor::Scheduler),
        Actor::System(SystemActor::Prebuilds),
    ];
    let mut wrong = Vec::new();
    for (index, (state, ask, expected)) in TABLE.iter().enumerate() {
        for (which, actor) in actors.iter().enumerate() {
            let name = format!("w{index}-{which}");
            let workspace = workspace_in(&setup, &name, *state).await;
            let result = setup
                .control
                .builds()
                .request(BuildTarget::Existing(workspace.clone()), order(actor, *ask))
                .await;
            // Nothing here runs builds: what the door or the setup queued
            // is canceled, so that the next setup claims its own job.
            let latest = setup.store.latest_build(&workspace.id).await.unwrap();
            if latest.status == BuildStatus::Pending {
                setup
                    .store
                    .cancel_pending_build(&latest.id, "door test")
                    .await
                    .unwrap();
            }
            if !matches(*expected, &result) {
                wrong.push(format!(
                    "{state:?} {ask:?} by {}: expected {expected:?}, got {}",
                    actor.name(),
                    answer_of(&result)
                ));
                continue;
            }
            let Ok(build) = result else { continue };
            // The build says who asked and why; the workspace stays on its
            // version until a build of the new one succeeds.
            assert_eq!(build.initiator_name, actor.name());
            assert_eq!(build.reason, order(actor, *ask).reason);
            let now = setup.store.workspace_by_id(&workspace.id).await.unwrap();
            assert_eq!(now.template_version_id, setup.first_version);
            let expected_version = if matches!(ask, Update) { 2 } else { 1 };
            assert_eq!(
                build.template_version, expected_version,
                "{state:?} {ask:?}"
            );
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_workspace_and_its_first_build_come_through_the_door_together() {
    let setup = setup().await;
    let new = |name: &str| BuildTarget::New {
        name: name.into(),
        owner: setup.alice.clone(),
        template: setup.template.clone(),
        preset: None,
    };
    let mut first = order(&Actor::System(SystemActor::Prebuilds), Start);
    first.reason = BuildReason::Prebuild;
    first.version = VersionChoice::Active;
    let build = setup
        .control
        .builds()
        .request(new("pool-1"), first.clone())
        .await
        .unwrap();
    assert_eq!(
        (build.number, build.initiator_name.as_str(), build.reason),
        (1, "prebuilds", BuildReason::Prebuild)
    );
    // The name is taken now; a stop cannot create a workspace; a bad name is refused.
    let taken = setup
        .control
        .builds()
        .request(new("pool-1"), first.clone())
        .await;
    assert!(
        matches!(&taken, Err(ControlError::Conflict(message))
            if message == "user \"alice\" already has a workspace named \"pool-1\""),
        "{taken:?}"
    );
    // Said to the owner themselves in the second person.
    let mut own = order(&Actor::User(setup.alice.clone()), Start);
    own.version = VersionChoice::Active;
    let taken = setup.control.builds().request(new("pool-1"), own).await;
    assert!(
        matches!(&taken, Err(ControlError::Conflict(message))
            if message == "you already have a workspace named \"pool-1\""),
        "{taken:?}"
    );
    let mut stop = first.clone();
    stop.transition = Transition::Stop;
    assert!(matches!(
        setup.control.builds().request(new("pool-2"), stop).await,
        Err(ControlError::BadRequest(_))
    ));
    assert!(matches!(
        setup.control.builds().request(new("Pool 3"), first).await,
        Err(ControlError::BadRequest(_))
    ));
    // Parameters the version does not declare are refused, all of them named.
    let mut with_parameters = order(&Actor::User(setup.alice.clone()), Start);
    with_parameters.version = VersionChoice::Active;
    with_parameters.parameters = BTreeMap::from([
        ("size".to_string(), serde_json::json!("large")),
        ("region".to_string(), serde_json::Value::Null),
    ]);
    match setup
        .control
        .builds()
        .request(new("with-parameters"), with_parameters)
        .await
    {
        Err(ControlError::BadRequest(message)) => {
            assert!(
                message.contains("`size`") && message.contains("`region`"),
                "{message}"
            );
            assert!(!message.contains('\n'), "one line: {message}");
        }
        other => panic!("expected a 400 listing both: {other:?}"),
    }
}
