//! A create with presets, through the door (`Builds::request`,
//! `BuildTarget::New`): the version's parameters and presets are those the
//! real template-import plan of tests/fixtures/template-import declares
//! (planned by Terraform with the abode provider), stored as a push stores
//! them; each case asks for a new workspace and says which preset it gets
//! and with which values, or why it is refused. No Terraform runs here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use abode_control::parameters::template_declarations_from_plan;
use abode_control::{Actor, BuildOrder, BuildTarget, Config, Control, ControlError, VersionChoice};
use abode_store::*;
use serde_json::{json, Value};

const PLAN: &[u8] = include_bytes!("../../parameters/tests/fixtures/template-import/plan.json");

/// The answer: a workspace with this preset and these of its values, or a
/// 400 whose message contains this.
enum Answer {
    Created(
        Option<&'static str>,
        &'static [(&'static str, &'static str)],
    ),
    Refused(&'static str),
}

use Answer::*;

/// (preset asked for, values given, answer).
fn table() -> Vec<(Option<&'static str>, Value, Answer)> {
    vec![
        // By name: the preset's values, then the given ones and the defaults.
        (
            Some("small"),
            json!({"replicas": 1}),
            Created(Some("small"), &[("project", "demo"), ("cpus", "2"), ("region", "eu"), ("replicas", "1")]),
        ),
        (
            Some("office hours"),
            json!({"region": "us", "cpus": 4}),
            Created(Some("office hours"), &[("project", "demo"), ("cpus", "4"), ("region", "us")]),
        ),
        (
            Some("module disk"),
            json!({"project": "mine", "replicas": 3}),
            Created(Some("module disk"), &[("project", "mine"), ("disk_size", "20")]),
        ),
        (
            Some("office hours"),
            json!({"replicas": 1, "cpus": 8}),
            Refused("parameter `cpus` is given as `8`, but preset \"office hours\" sets it to `4`"),
        ),
        (
            Some("huge"),
            json!({}),
            Refused("template \"base\" (version 1) has no preset \"huge\"; its presets: \"office hours\", \"small\", \"module disk\""),
        ),
        (
            Some("office hours"),
            json!({"replicas": 2}),
            Refused("parameter `replicas` is given as `2`, but preset \"office hours\" sets it to `1`"),
        ),
        // With the preset's values, the request must still be complete.
        (
            Some("module disk"),
            json!({"replicas": 1}),
            Refused("invalid parameters: parameter `project` is required"),
        ),
        // Without a name: the preset that builds exactly these values alone.
        (
            None,
            json!({"project": "demo", "replicas": 1}),
            Created(Some("small"), &[("project", "demo"), ("cpus", "2")]),
        ),
        (
            None,
            json!({"project": "demo", "replicas": 1, "cpus": "4", "region": "us"}),
            Created(Some("office hours"), &[("cpus", "4"), ("region", "us")]),
        ),
        (
            None,
            json!({"project": "demo", "replicas": 1, "cpus": 3}),
            Created(None, &[("cpus", "3")]),
        ),
        // `small` builds disk_size 10; `module disk` alone lacks a project.
        (
            None,
            json!({"project": "demo", "replicas": 1, "disk_size": 20}),
            Created(None, &[("disk_size", "20")]),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_gets_its_preset_through_the_door() {
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
    let declarations = template_declarations_from_plan(PLAN).unwrap();
    let (template, _) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![1],
            archive_sha256: "1".into(),
            message: String::new(),
            created_by: alice.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: Some(declarations.parameters),
            presets: Some(serde_json::to_string(&declarations.presets).unwrap()),
            activate: true,
        })
        .await
        .unwrap();

    let mut wrong = Vec::new();
    for (index, (preset, given, answer)) in table().into_iter().enumerate() {
        let name = format!("ws-{index}");
        let parameters: BTreeMap<String, Value> = serde_json::from_value(given).unwrap();
        let asked = control
            .builds()
            .request(
                BuildTarget::New {
                    name: name.clone(),
                    owner: alice.clone(),
                    template: template.clone(),
                    preset: preset.map(str::to_string),
                },
                BuildOrder {
                    actor: Actor::User(alice.clone()),
                    request_id: None,
                    transition: Transition::Start,
                    version: VersionChoice::Active,
                    reason: BuildReason::Initiator,
                    parameters,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await;
        match (answer, asked) {
            (Created(expected_preset, values), Ok(build)) => {
                let workspace = store.workspace_by_id(&build.workspace_id).await.unwrap();
                if workspace.preset_name.as_deref() != expected_preset {
                    wrong.push(format!(
                        "case {index}: preset {:?}, expected {expected_preset:?}",
                        workspace.preset_name
                    ));
                }
                let kept = &workspace.parameters;
                for (parameter, value) in values {
                    if kept.get(*parameter).map(String::as_str) != Some(*value) {
                        wrong.push(format!(
                            "case {index}: {parameter} is {:?}, expected {value}",
                            kept.get(*parameter)
                        ));
                    }
                }
            }
            (Refused(expected), Err(ControlError::BadRequest(message))) => {
                if !message.contains(expected) || message.contains('\n') {
                    wrong.push(format!(
                        "case {index}: refused with {message:?}, expected one line with {expected:?}"
                    ));
                }
                if store
                    .workspace_by_owner_and_name(&alice.id, &name)
                    .await
                    .is_ok()
                {
                    wrong.push(format!("case {index}: refused, yet the workspace exists"));
                }
            }
            (_, other) => wrong.push(format!("case {index}: unexpected {other:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
