//! What an `abode_env` may say, judged alike by the provider (a bad name
//! fails the plan), the platform's build (two resources that set one name
//! for one agent are refused when the plan is judged, before anything is
//! applied) and the platform reading a state (the first one set is kept).

use std::collections::BTreeMap;

use serde_json::Value;

/// The longest variable name.
pub const MAX_NAME: usize = 256;

/// Why `name` may not be set by an `abode_env`, if it may not: a POSIX
/// shell name (a letter or `_`, then letters, digits and `_`), not the
/// agent's own (`ABODE_AGENT_*`: its token, URL and sockets).
pub fn name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well
        || name.len() > MAX_NAME
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Some(format!(
            "{:?} is not a variable name: a letter or _, then letters, digits and _ \
             (at most {MAX_NAME})",
            name
        ));
    }
    if name.starts_with("ABODE_AGENT_") {
        return Some(format!(
            "`{name}` is the agent's own variable (ABODE_AGENT_*); an abode_env may not set it"
        ));
    }
    None
}

/// One `abode_env` of a plan, with what tells its agent apart.
struct Planned {
    address: String,
    name: String,
    /// The agent: `id=...` when the plan knows it, else the module
    /// instance and the reference its configuration makes.
    agent: String,
    /// How the agent is named in a message.
    agent_label: String,
}

/// The `abode_env`s of a plan (`terraform show -json`) that set a name
/// another one already sets for the same agent: one line each, naming both
/// addresses. An `abode_env` whose name or agent the plan does not know yet
/// (an agent reached through `count.index` or `each`) is left to the check
/// of the state.
pub fn duplicates_in_plan(plan: &Value) -> Vec<String> {
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut problems = Vec::new();
    for planned in planned_envs(plan) {
        let key = (planned.agent.clone(), planned.name.clone());
        match seen.get(&key) {
            Some(first) => problems.push(format!(
                "{first} and {} both set `{}` for {}: each variable is set once per agent",
                planned.address, planned.name, planned.agent_label
            )),
            None => {
                seen.insert(key, planned.address);
            }
        }
    }
    problems
}

fn planned_envs(plan: &Value) -> Vec<Planned> {
    let Some(changes) = plan.get("resource_changes").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for change in changes {
        if change.get("type").and_then(Value::as_str) != Some("abode_env")
            || change.get("mode").and_then(Value::as_str) != Some("managed")
        {
            continue;
        }
        let Some(after) = change.pointer("/change/after").filter(|a| a.is_object()) else {
            continue; // deleted or forgotten
        };
        let Some(address) = change.get("address").and_then(Value::as_str) else {
            continue;
        };
        let Some(name) = after.get("name").and_then(Value::as_str) else {
            continue;
        };
        let module = change
            .get("module_address")
            .and_then(Value::as_str)
            .unwrap_or("");
        let (agent, agent_label) = match after.get("agent_id").and_then(Value::as_str) {
            Some(id) => (format!("id={id}"), format!("the agent {id}")),
            None => {
                let Some(reference) = agent_reference(plan, change, module) else {
                    continue;
                };
                let label = if module.is_empty() {
                    reference.clone()
                } else {
                    format!("{module}.{reference}")
                };
                (format!("ref={module}/{reference}"), label)
            }
        };
        found.push(Planned {
            address: address.to_string(),
            name: name.to_string(),
            agent,
            agent_label,
        });
    }
    found
}

/// The reference an `abode_env`'s `agent_id` makes in its module's
/// configuration (`abode_agent.main[0].id`), when it names one agent
/// whatever the instance.
fn agent_reference(plan: &Value, change: &Value, module: &str) -> Option<String> {
    let mut config = plan.pointer("/configuration/root_module")?;
    for call in module_calls(module) {
        config = config.get("module_calls")?.get(call)?.get("module")?;
    }
    let kind = change.get("type")?.as_str()?;
    let name = change.get("name")?.as_str()?;
    let resource = config.get("resources")?.as_array()?.iter().find(|r| {
        r.get("mode").and_then(Value::as_str) == Some("managed")
            && r.get("type").and_then(Value::as_str) == Some(kind)
            && r.get("name").and_then(Value::as_str) == Some(name)
    })?;
    let references: Vec<&str> = resource
        .pointer("/expressions/agent_id/references")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Through count.index or each, every instance may name another agent.
    if references
        .iter()
        .any(|r| r.starts_with("count.") || r.starts_with("each."))
    {
        return None;
    }
    references.first().map(|r| (*r).to_string())
}

/// The module call names of a module instance address
/// (`module.a[0].module.b["x"]` is `a`, `b`).
pub(crate) fn module_calls(module: &str) -> Vec<&str> {
    let mut calls = Vec::new();
    let mut rest = module;
    while let Some(after) = rest.strip_prefix("module.") {
        let end = after.find(['.', '[']).unwrap_or(after.len());
        calls.push(&after[..end]);
        rest = &after[end..];
        // Skip an instance key, which may hold dots in its quotes.
        if rest.starts_with('[') {
            let mut in_quotes = false;
            let mut close = rest.len();
            for (i, c) in rest.char_indices() {
                match c {
                    '"' => in_quotes = !in_quotes,
                    ']' if !in_quotes => {
                        close = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            rest = &rest[close..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    calls
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_are_shell_names_and_not_the_agents() {
        assert_eq!(name_problem("EDITOR"), None);
        assert_eq!(name_problem("_x9"), None);
        for bad in ["", "9LIVES", "A-B", "A B", "Ä"] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
        assert!(name_problem("ABODE_AGENT_TOKEN")
            .unwrap()
            .contains("agent's own"));
        assert!(name_problem(&"A".repeat(MAX_NAME + 1)).is_some());
    }

    #[test]
    fn module_calls_skip_instance_keys() {
        assert_eq!(module_calls(""), Vec::<&str>::new());
        assert_eq!(
            module_calls("module.a[0].module.b[\"x.y]\"]"),
            vec!["a", "b"]
        );
    }

    fn change(address: &str, module: Option<&str>, name: &str, after: Value) -> Value {
        let mut change = serde_json::json!({
            "address": address, "mode": "managed", "type": "abode_env", "name": name,
            "change": {"actions": ["create"], "after": after}
        });
        if let Some(module) = module {
            change["module_address"] = module.into();
        }
        change
    }

    #[test]
    fn a_name_set_twice_for_one_agent_names_both_addresses() {
        let plan = serde_json::json!({
            "resource_changes": [
                change("abode_env.a", None, "a", serde_json::json!({"name": "FOO"})),
                change("abode_env.b", None, "b", serde_json::json!({"name": "FOO"})),
                change("abode_env.c", None, "c", serde_json::json!({"name": "FOO"})),
                change("abode_env.d", None, "d", serde_json::json!({"name": "BAR"})),
                change("module.m[0].abode_env.a", Some("module.m[0]"), "a", serde_json::json!({"name": "FOO"})),
                change("module.m[1].abode_env.a", Some("module.m[1]"), "a", serde_json::json!({"name": "FOO"})),
                change("abode_env.k1", None, "k1", serde_json::json!({"name": "K", "agent_id": "x"})),
                change("abode_env.k2", None, "k2", serde_json::json!({"name": "K", "agent_id": "x"})),
                change("abode_env.k3", None, "k3", serde_json::json!({"name": "K", "agent_id": "y"})),
            ],
            "configuration": {"root_module": {
                "resources": [
                    {"mode": "managed", "type": "abode_env", "name": "a",
                     "expressions": {"agent_id": {"references": ["abode_agent.main[0].id", "abode_agent.main[0]", "abode_agent.main"]}}},
                    {"mode": "managed", "type": "abode_env", "name": "b",
                     "expressions": {"agent_id": {"references": ["abode_agent.main[0].id", "abode_agent.main[0]", "abode_agent.main"]}}},
                    {"mode": "managed", "type": "abode_env", "name": "c",
                     "expressions": {"agent_id": {"references": ["abode_agent.other[0].id"]}}},
                    {"mode": "managed", "type": "abode_env", "name": "d",
                     "expressions": {"agent_id": {"references": ["abode_agent.main[0].id"]}}}
                ],
                "module_calls": {"m": {"module": {"resources": [
                    {"mode": "managed", "type": "abode_env", "name": "a",
                     "expressions": {"agent_id": {"references": ["abode_agent.main.id", "abode_agent.main"]}}}
                ]}}}
            }}
        });
        assert_eq!(
            duplicates_in_plan(&plan),
            vec![
                "abode_env.a and abode_env.b both set `FOO` for abode_agent.main[0].id: each \
                 variable is set once per agent"
                    .to_string(),
                "abode_env.k1 and abode_env.k2 both set `K` for the agent x: each variable is \
                 set once per agent"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn agents_reached_through_count_index_are_left_to_the_state() {
        let plan = serde_json::json!({
            "resource_changes": [
                change("abode_env.e[0]", None, "e", serde_json::json!({"name": "FOO"})),
                change("abode_env.e[1]", None, "e", serde_json::json!({"name": "FOO"})),
            ],
            "configuration": {"root_module": {"resources": [
                {"mode": "managed", "type": "abode_env", "name": "e",
                 "expressions": {"agent_id": {"references": ["abode_agent.main", "count.index"]}}}
            ]}}
        });
        assert!(duplicates_in_plan(&plan).is_empty());
        assert!(duplicates_in_plan(&serde_json::json!({})).is_empty());
    }
}
