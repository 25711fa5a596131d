//! Data-driven cases: each is a short description of a plan and the cost a
//! person would work out by hand. The harness only turns the description
//! into plan JSON (the shape `terraform show -json` writes); the expected
//! numbers are written here, never computed by the crate under test.
//!
//! A line is `ADDRESS ACTION [cost=RAW] [-> REFERENCE...]`: ACTION is
//! `create`, `update`, `no-op`, `delete`, `replace` (delete then create),
//! `replace-cbd` (create before delete), `forget`, `read` (a data source)
//! or `deposed` (an old object being deleted); RAW is put in the plan as
//! written (`4`, `-1`, `1.5`, `"4"`, `unknown`); REFERENCEs are the
//! `resource_id` expression's references. The last line is `=> TOTAL` or
//! `=> error: TEXT`.
#![allow(clippy::unwrap_used)]

use serde_json::{json, Map, Value};

fn split_address(address: &str) -> (String, String, String, Option<Value>) {
    // module path, type, name, index
    let mut module = String::new();
    let mut rest = address;
    while let Some(after) = rest.strip_prefix("module.") {
        let end = after
            .find('.')
            .map(|dot| {
                // a module key in brackets may hold a dot
                if let Some(open) = after[..dot].find('[') {
                    open + after[open..]
                        .find("].")
                        .map(|c| c + 1)
                        .unwrap_or(dot - open)
                } else {
                    dot
                }
            })
            .unwrap();
        if !module.is_empty() {
            module.push('.');
        }
        module.push_str("module.");
        module.push_str(&after[..end]);
        rest = &after[end + 1..];
    }
    let (resource_type, rest) = rest.split_once('.').unwrap();
    let (name, index) = match rest.split_once('[') {
        Some((name, index)) => (
            name.to_string(),
            Some(serde_json::from_str(index.trim_end_matches(']')).unwrap()),
        ),
        None => (rest.to_string(), None),
    };
    (module, resource_type.to_string(), name, index)
}

fn module_names(module: &str) -> Vec<String> {
    module
        .split("module.")
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.trim_end_matches('.')
                .split('[')
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn plan(description: &str) -> Value {
    let mut changes = Vec::new();
    let mut root = json!({"resources": [], "module_calls": {}});
    for line in description.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (head, references) = match line.split_once("->") {
            Some((head, refs)) => (head, refs.split_whitespace().collect::<Vec<_>>()),
            None => (line, Vec::new()),
        };
        let mut words = head.split_whitespace();
        let address = words.next().unwrap();
        let action = words.next().unwrap();
        let cost = words.next().map(|word| word.strip_prefix("cost=").unwrap());
        let (module, resource_type, name, index) = split_address(address);
        let mut after = Map::new();
        after.insert("id".into(), json!("x"));
        let mut unknown = Map::new();
        match cost {
            Some("unknown") => {
                unknown.insert("daily_cost".into(), json!(true));
            }
            Some(raw) => {
                after.insert("daily_cost".into(), serde_json::from_str(raw).unwrap());
            }
            None => {}
        }
        let (actions, after, deposed) = match action {
            "create" => (json!(["create"]), Value::Object(after), None),
            "update" => (json!(["update"]), Value::Object(after), None),
            "no-op" => (json!(["no-op"]), Value::Object(after), None),
            "read" => (json!(["read"]), Value::Object(after), None),
            "replace" => (json!(["delete", "create"]), Value::Object(after), None),
            "replace-cbd" => (json!(["create", "delete"]), Value::Object(after), None),
            "delete" => (json!(["delete"]), Value::Null, None),
            "forget" => (json!(["forget"]), Value::Null, None),
            "deposed" => (json!(["delete"]), Value::Null, Some("abcd1234")),
            other => panic!("unknown action {other}"),
        };
        let mode = if resource_type == "data" {
            "data"
        } else {
            "managed"
        };
        let mut change = json!({
            "address": address,
            "mode": mode,
            "type": resource_type,
            "name": name,
            "change": {"actions": actions, "before": null, "after": after, "after_unknown": unknown},
        });
        if !module.is_empty() {
            change["module_address"] = json!(module);
        }
        if let Some(index) = index {
            change["index"] = index;
        }
        if let Some(deposed) = deposed {
            change["deposed"] = json!(deposed);
        }
        changes.push(change);
        if resource_type == "abode_metadata" {
            let mut config = &mut root;
            for step in module_names(&module) {
                let calls = config["module_calls"].as_object_mut().unwrap();
                let call = calls
                    .entry(step)
                    .or_insert_with(|| json!({"module": {"resources": [], "module_calls": {}}}));
                config = &mut call["module"];
            }
            let local = format!("{resource_type}.{name}");
            let resources = config["resources"].as_array_mut().unwrap();
            if !resources.iter().any(|r| r["address"] == json!(local)) {
                resources.push(json!({
                    "address": local,
                    "mode": "managed",
                    "type": resource_type,
                    "name": name,
                    "expressions": {"resource_id": {"references": references}},
                }));
            }
        }
    }
    json!({
        "format_version": "1.2",
        "terraform_version": "1.11.4",
        "planned_values": {"root_module": {}},
        "resource_changes": changes,
        "configuration": {"root_module": root},
    })
}

fn check(case: &str) {
    let (description, expected) = case.rsplit_once("=>").unwrap();
    let expected = expected.trim();
    let bytes = serde_json::to_vec(&plan(description)).unwrap();
    match (
        abode_cost::daily_cost(&bytes),
        expected.strip_prefix("error:"),
    ) {
        (Ok(cost), None) => {
            assert_eq!(cost.total.to_string(), expected, "case:\n{case}\n{cost:?}");
            let sum: u64 = cost.items.iter().map(|item| item.daily_cost).sum();
            assert_eq!(sum, cost.total, "items add up to the total");
        }
        (Err(error), Some(text)) => {
            let line = error.to_string();
            assert!(
                line.contains(text.trim()),
                "case:\n{case}\nerror `{line}` lacks `{}`",
                text.trim()
            );
            assert!(!line.contains('\n'), "one line: {line}");
        }
        (got, _) => panic!("case:\n{case}\nexpected {expected}, got {got:?}"),
    }
}

/// Nested blocks (a list of expression objects, as Terraform writes
/// `prebuilds { ... }` or `ports { ... }`) anywhere in the configuration,
/// the metadata's own included, are read past (found by a real claim's
/// plan, which the cost could not read before).
#[test]
fn nested_blocks_in_the_configuration_are_read_past() {
    let mut doc = plan(
        "terraform_data.compute create\n\
         abode_metadata.compute create cost=4 -> terraform_data.compute.id terraform_data.compute",
    );
    let resources = doc["configuration"]["root_module"]["resources"]
        .as_array_mut()
        .unwrap();
    resources[0]["expressions"]["item"] = json!([{"key": {"constant_value": "size"}}]);
    resources.push(json!({
        "address": "data.abode_workspace_preset.small",
        "mode": "data",
        "type": "abode_workspace_preset",
        "name": "small",
        "expressions": {
            "name": {"constant_value": "small"},
            "prebuilds": [{"instances": {"constant_value": 1}}],
            "empty": [],
        },
    }));
    let cost = abode_cost::daily_cost(&serde_json::to_vec(&doc).unwrap()).unwrap();
    assert_eq!(cost.total, 4);
}

#[test]
fn a_start_charges_compute_and_volume() {
    check(
        "docker_container.ws[0] create
         abode_volume.home create
         abode_metadata.compute[0] create cost=4 -> docker_container.ws[0].id docker_container.ws[0] docker_container.ws
         abode_metadata.home create cost=1 -> abode_volume.home.id abode_volume.home
         => 5",
    );
}

#[test]
fn a_stop_keeps_charging_the_volume() {
    check(
        "docker_container.ws[0] delete
         abode_volume.home no-op
         abode_metadata.compute[0] delete cost=4 -> docker_container.ws[0].id docker_container.ws[0] docker_container.ws
         abode_metadata.home no-op cost=1 -> abode_volume.home.id abode_volume.home
         => 1",
    );
}

#[test]
fn metadata_left_on_a_deleted_resource_is_not_charged() {
    // The metadata stays (no count of its own) but its resource goes.
    check(
        "docker_container.ws delete
         abode_volume.home no-op
         abode_metadata.compute update cost=4 -> docker_container.ws.id docker_container.ws
         abode_metadata.home no-op cost=1 -> abode_volume.home.id abode_volume.home
         => 1",
    );
}

#[test]
fn a_delete_charges_nothing() {
    check(
        "docker_container.ws[0] delete
         abode_volume.home delete
         abode_metadata.compute[0] delete cost=4 -> docker_container.ws[0].id
         abode_metadata.home delete cost=1 -> abode_volume.home.id
         => 0",
    );
}

#[test]
fn a_replaced_resource_is_charged_once() {
    check(
        "docker_container.ws replace
         abode_metadata.compute replace cost=4 -> docker_container.ws.id docker_container.ws
         => 4",
    );
    check(
        "docker_container.ws replace-cbd
         docker_container.ws deposed
         abode_metadata.compute replace-cbd cost=4 -> docker_container.ws.id docker_container.ws
         => 4",
    );
}

#[test]
fn forgotten_and_deposed_objects_cost_nothing() {
    check(
        "abode_volume.old forget
         abode_metadata.old forget cost=7 -> abode_volume.old.id
         => 0",
    );
    check(
        "abode_volume.home deposed
         abode_metadata.home no-op cost=2 -> abode_volume.home.id abode_volume.home
         => 0",
    );
}

#[test]
fn count_and_for_each_follow_their_instances() {
    // count: two of three disks stay; each metadata follows its own index.
    check(
        r#"abode_volume.disk[0] no-op
           abode_volume.disk[1] no-op
           abode_volume.disk[2] delete
           abode_metadata.disk[0] no-op cost=3 -> abode_volume.disk
           abode_metadata.disk[1] no-op cost=3 -> abode_volume.disk
           abode_metadata.disk[2] no-op cost=3 -> abode_volume.disk
           => 6"#,
    );
    // for_each with string keys, one going away.
    check(
        r#"abode_volume.v["a"] no-op
           abode_volume.v["b.c"] delete
           abode_metadata.v["a"] no-op cost=2 -> abode_volume.v each.key
           abode_metadata.v["b.c"] no-op cost=10 -> abode_volume.v each.key
           => 2"#,
    );
    // A literal index picks that instance whatever the metadata's own.
    check(
        r#"abode_volume.v[0] delete
           abode_volume.v[1] create
           abode_metadata.m no-op cost=5 -> abode_volume.v[1].id abode_volume.v[1] abode_volume.v
           => 5"#,
    );
}

#[test]
fn modules_are_read_in_their_own_scope() {
    check(
        r#"module.dev[0].docker_container.ws create
           module.dev[0].abode_metadata.c create cost=4 -> docker_container.ws.id docker_container.ws
           docker_container.ws delete
           abode_metadata.c no-op cost=100 -> docker_container.ws.id docker_container.ws
           => 4"#,
    );
    check(
        r#"module.a.module.b.abode_volume.home no-op
           module.a.module.b.abode_metadata.home no-op cost=1 -> abode_volume.home.id
           => 1"#,
    );
}

#[test]
fn metadata_about_something_terraform_cannot_see_is_charged_while_it_exists() {
    check(
        "abode_metadata.licence create cost=3 -> var.licence_id
         abode_metadata.gone delete cost=9 -> var.other
         abode_metadata.out no-op cost=2 -> module.net.id
         => 5",
    );
}

#[test]
fn no_metadata_or_no_cost_is_zero() {
    check("docker_container.ws create\n=> 0");
    check("docker_container.ws create\nabode_metadata.m create -> docker_container.ws.id\n=> 0");
    check("docker_container.ws create\nabode_metadata.m create cost=null -> docker_container.ws.id\n=> 0");
    check("data.abode_workspace.me read\nabode_metadata.m create cost=0 -> data.abode_workspace.me.id\n=> 0");
}

#[test]
fn hostile_costs_are_refused_in_one_line() {
    check("abode_metadata.m create cost=-1 -> var.x\n=> error: abode_metadata.m: daily_cost -1 is negative");
    check("abode_metadata.m create cost=-1e3 -> var.x\n=> error: is negative");
    check(
        "abode_metadata.m create cost=1.5 -> var.x\n=> error: daily_cost 1.5 is not a whole number",
    );
    check("abode_metadata.m create cost=\"4\" -> var.x\n=> error: is not a number");
    check("abode_metadata.m create cost=unknown -> var.x\n=> error: known only after apply");
    check("abode_metadata.m create cost=1e30 -> var.x\n=> error: larger than 9223372036854775807");
    check("abode_metadata.m create cost=18446744073709551615 -> var.x\n=> error: larger than");
    check(
        "abode_metadata.a create cost=9223372036854775807 -> var.x
         abode_metadata.b create cost=1 -> var.x
         => error: larger than 9223372036854775807 (at abode_metadata.b)",
    );
    // The largest total that still fits is accepted exactly.
    check(
        "abode_metadata.a create cost=9223372036854775806 -> var.x
         abode_metadata.b create cost=1 -> var.x
         => 9223372036854775807",
    );
}

#[test]
fn a_hostile_cost_on_something_going_away_is_not_read() {
    // Only what exists after the plan is charged, so only it must be valid.
    check("abode_metadata.m delete cost=-5 -> var.x\n=> 0");
    check("abode_volume.v delete\nabode_metadata.m no-op cost=1.5 -> abode_volume.v.id\n=> 0");
}

#[test]
fn what_is_not_a_plan_is_one_line() {
    for bytes in [&b""[..], b"{", b"[]", b"{\"resource_changes\": 3}"] {
        let error = abode_cost::daily_cost(bytes).unwrap_err().to_string();
        assert!(error.starts_with("cannot read the plan"), "{error}");
        assert!(!error.contains('\n'));
    }
    // An empty plan costs nothing.
    assert_eq!(abode_cost::daily_cost(b"{}").unwrap().total, 0);
}

#[test]
fn the_breakdown_names_each_charge() {
    let bytes = serde_json::to_vec(&plan(
        "docker_container.ws[0] create
         abode_metadata.compute[0] create cost=4 -> docker_container.ws[0].id
         abode_metadata.licence create cost=1 -> var.l",
    ))
    .unwrap();
    let cost = abode_cost::daily_cost(&bytes).unwrap();
    assert_eq!(
        cost.describe(),
        "5 a day (abode_metadata.compute[0] for docker_container.ws[0]: 4; abode_metadata.licence: 1)"
    );
}
