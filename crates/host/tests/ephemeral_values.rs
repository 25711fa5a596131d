//! An ephemeral parameter's value applies to one build, and the platform
//! keeps it in none of its records: not in the build's values once it has
//! ended, not in the plan JSON kept with the build, not in its log. (What
//! Terraform writes itself, the state, is Terraform's.) A daemon's run,
//! which reaches the same `ServerJob` as an embedded one; a real (SQLite)
//! store; no Terraform runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use abode_contract::parameters::ParameterKind;
use abode_control::{Caller, Config, Control};
use abode_host::{DaemonCaller, Host, HostParts};
use abode_protocol::{LogLineWire, Outcome};
use abode_store::*;

const SECRET: &str = "hunter2-one-time-token";

/// A plan the guard allows, with the ephemeral value where Terraform puts
/// it: the parameter's data source, and a resource's attribute made from it.
fn plan_with_the_value() -> Vec<u8> {
    let mut plan: serde_json::Value = serde_json::from_slice(include_bytes!(
        "../../guard/tests/fixtures/no-change/plan.json"
    ))
    .unwrap();
    plan["prior_state"]["values"]["root_module"]["resources"] = serde_json::json!([{
        "address": "data.abode_parameter.token", "mode": "data",
        "type": "abode_parameter", "name": "token",
        "provider_name": "registry.terraform.io/abode/abode", "schema_version": 1,
        "values": {"name": "token", "type": "string", "ephemeral": true, "mutable": true, "value": SECRET},
        "sensitive_values": {}
    }]);
    plan["planned_values"]["outputs"] = serde_json::json!({
        "header": {"sensitive": false, "value": format!("Bearer {SECRET}")}
    });
    serde_json::to_vec(&plan).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_value_is_kept_in_no_record_of_the_platform() {
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
    let owner = Caller {
        user: alice.clone(),
        roles,
        request_id: None,
        token_name: None,
        scope: abode_control::authz::TokenScope::all(),
    };
    let declarations = vec![
        ParameterDefinition {
            name: "token".into(),
            kind: ParameterKind::String,
            mutable: true,
            ephemeral: true,
            default: Some(String::new()),
            ..ParameterDefinition::default()
        },
        ParameterDefinition {
            name: "region".into(),
            kind: ParameterKind::String,
            default: Some("eu".into()),
            ..ParameterDefinition::default()
        },
    ];
    let (template, version) = store
        .create_template_version(&NewTemplateVersion {
            template_name: "base".into(),
            archive: vec![1],
            archive_sha256: "1".into(),
            message: String::new(),
            created_by: alice.id.clone(),
            validation_ok: true,
            validation_message: "ok".into(),
            parameters: Some(declarations),
            presets: None,
            activate: true,
        })
        .await
        .unwrap();
    // What the door records for `create ws -p token=SECRET`: the build's
    // values with it, the workspace's without.
    let kept: Parameters = BTreeMap::from([("region".into(), "eu".into())]);
    let mut given = kept.clone();
    given.insert("token".into(), SECRET.into());
    let build_id = new_id();
    let workspace_id = new_id();
    store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id.clone(),
                owner_id: alice.id.clone(),
                name: "ws".into(),
                template_id: template.id.clone(),
                template_version_id: version.id.clone(),
                parameters: kept.clone(),
                preset_name: None,
            },
            &NewBuild {
                id: build_id.clone(),
                workspace_id,
                transition: Transition::Start,
                template_version_id: version.id.clone(),
                initiator_id: alice.id.clone(),
                reason: BuildReason::Initiator,
                parameters: Some(given),
                workspace_parameters: Some(kept.clone()),
                retention: None,
                rename_to: None,
                then_start: false,
            },
        )
        .await
        .unwrap();

    let (key, secret) = control
        .provisioner_keys()
        .create(&owner, "k", &[])
        .await
        .unwrap();
    let daemon = DaemonCaller {
        key_hash: abode_control::token_hash(&secret),
        key_id: key.id.clone(),
        key_name: key.name.clone(),
        tags: Vec::new(),
        daemon_id: "d".into(),
        slot: "d-1".into(),
    };
    let job = host
        .acquire_daemon_job(&daemon, &[], "d-1", "0.1.0", Duration::ZERO)
        .await
        .unwrap()
        .expect("the queued build is claimed");
    // The run gets the value: it is what the build is for.
    assert_eq!(
        job.inputs
            .context
            .parameters
            .get("token")
            .map(String::as_str),
        Some(SECRET)
    );
    // Terraform prints it (a plan shows the attributes it sets).
    let lines = [
        format!("  + input = \"{SECRET}\""),
        SECRET.to_string(),
        "Plan: 1 to add, 0 to change, 0 to destroy.".to_string(),
    ];
    let lines: Vec<LogLineWire> = lines
        .iter()
        .map(|text| LogLineWire {
            stage: "plan".into(),
            level: "info".into(),
            text: text.clone(),
        })
        .collect();
    host.daemon_log(&daemon, &build_id, &lines).await.unwrap();
    let verdict = host
        .daemon_judge(&daemon, &build_id, plan_with_the_value(), b"plan".to_vec())
        .await
        .unwrap();
    assert_eq!(verdict, abode_runner::Verdict::Apply);
    // The same plan asked again still gets its verdict (it is compared as
    // it is kept).
    let again = host
        .daemon_judge(&daemon, &build_id, plan_with_the_value(), b"plan".to_vec())
        .await
        .unwrap();
    assert_eq!(again, abode_runner::Verdict::Apply);
    let status = host
        .daemon_complete(
            &daemon,
            &build_id,
            Outcome::Failed(abode_runner::Failure::failed("the apply failed")),
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, BuildStatus::Failed);

    // Nothing the platform keeps holds it.
    let build = store.build_by_id(&build_id).await.unwrap();
    assert_eq!(build.parameters, Some(kept), "the build's values");
    let plan_json = store.build_plan_json(&build_id).await.unwrap().unwrap();
    assert!(!plan_json.contains(SECRET), "the kept plan: {plan_json}");
    assert!(
        plan_json.contains("(ephemeral parameter value)"),
        "the kept plan says what was masked: {plan_json}"
    );
    let report = serde_json::to_string(&build.guard_report).unwrap();
    assert!(!report.contains(SECRET), "the guard's report: {report}");
    let logged = store.logs_after(&build_id, 0, 1000).await.unwrap();
    for line in &logged {
        assert!(!line.text.contains(SECRET), "a log line: {}", line.text);
    }
    assert!(
        logged
            .iter()
            .any(|line| line.text == "  + input = \"(ephemeral parameter value)\""),
        "{logged:?}"
    );
    let workspace = store.workspace_by_id(&build.workspace_id).await.unwrap();
    assert!(!workspace.parameters.values().any(|value| value == SECRET));
}
