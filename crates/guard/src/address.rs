//! Terraform resource addresses, parsed once so that rules and plan entries can be
//! compared structurally instead of as strings.
//!
//! The same grammar serves three inputs: addresses given on the command line
//! (`module.home.docker_volume.this`, `docker_volume.home[0]`, `x.vols["b"]`),
//! addresses in the plan (`address`, `previous_address`), and the `references`
//! Terraform lists for expressions in the plan's `configuration` section
//! (`abode_volume.home[0].id`, `module.home.volume_id`, `var.name`).

use std::fmt;

/// The key of one instance of a resource or module that uses `count` or `for_each`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InstanceKey {
    Int(i64),
    Str(String),
}

impl fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceKey::Int(i) => write!(f, "[{i}]"),
            InstanceKey::Str(s) => write!(f, "[{}]", quote(s)),
        }
    }
}

fn quote(s: &str) -> String {
    // JSON string quoting is what Terraform prints for instance keys.
    serde_json::Value::String(s.to_string()).to_string()
}

/// One `module.NAME[KEY]` step of a module path. A missing key means "every
/// instance" in a rule, and "not repeated" in a plan address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModuleStep {
    pub name: String,
    pub key: Option<InstanceKey>,
}

/// A managed or data resource, or one instance of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub module: Vec<ModuleStep>,
    pub data: bool,
    pub resource_type: String,
    pub name: String,
    pub key: Option<InstanceKey>,
}

impl Address {
    /// The resource this is an instance of, with every instance key left
    /// out (`module.a["x"].t.n[0]` is `module.a.t.n`): what Terraform's
    /// `removed` and `moved` blocks name.
    pub fn resource(&self) -> Address {
        Address {
            module: self
                .module
                .iter()
                .map(|step| ModuleStep {
                    name: step.name.clone(),
                    key: None,
                })
                .collect(),
            data: self.data,
            resource_type: self.resource_type.clone(),
            name: self.name.clone(),
            key: None,
        }
    }
}

/// What a reference in an expression points at, as far as the guard cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// A resource or one of its instances (attribute access is dropped).
    Resource(Address),
    /// An output of a module call in the same module: `module.NAME[KEY].OUTPUT`.
    ModuleOutput { call: ModuleStep, output: String },
    /// A whole module call, `module.NAME` or `module.NAME[KEY]`: what Terraform
    /// lists for `module.NAME[each.key].OUTPUT`, where the computed key hides the output.
    ModuleCall(ModuleStep),
    /// `each.value` / `each.key`: the target is whatever `for_each` iterates.
    /// `attribute` is what follows `each.value` (`each.value.volume_id`), which
    /// names the output when `for_each` iterates a module.
    Each { attribute: Option<String> },
    /// Anything else (`var.x`, `local.x`, `count.index`, `path.module`, a whole
    /// module call without an output...).
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid resource address `{input}`: {problem}")]
pub struct AddressError {
    pub input: String,
    pub problem: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Name(String),
    Index(Option<InstanceKey>),
}

fn tokenize(input: &str) -> Result<Vec<Step>, String> {
    let chars: Vec<char> = input.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    let mut expect_name = true;
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            if expect_name && steps.is_empty() {
                return Err("an address cannot start with `[`".into());
            }
            i += 1;
            let key = if chars.get(i) == Some(&'"') {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("unterminated string key".into()),
                        Some('\\') => {
                            match chars.get(i + 1) {
                                Some('n') => s.push('\n'),
                                Some('t') => s.push('\t'),
                                Some(&other) => s.push(other),
                                None => return Err("unterminated string key".into()),
                            }
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&other) => {
                            s.push(other);
                            i += 1;
                        }
                    }
                }
                Some(InstanceKey::Str(s))
            } else if chars.get(i) == Some(&'*') {
                i += 1;
                None
            } else {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '-') {
                    i += 1;
                }
                let digits: String = chars[start..i].iter().collect();
                let n = digits
                    .parse::<i64>()
                    .map_err(|_| "an index must be a number, a quoted string or `*`".to_string())?;
                Some(InstanceKey::Int(n))
            };
            if chars.get(i) != Some(&']') {
                return Err("missing `]`".into());
            }
            i += 1;
            steps.push(Step::Index(key));
            expect_name = false;
        } else if c == '.' {
            if expect_name {
                return Err("empty name before `.`".into());
            }
            i += 1;
            expect_name = true;
        } else if c.is_alphanumeric() || c == '_' || c == '-' {
            if !expect_name {
                return Err("missing `.` between names".into());
            }
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '-')
            {
                i += 1;
            }
            steps.push(Step::Name(chars[start..i].iter().collect()));
            expect_name = false;
        } else {
            return Err(format!("unexpected character `{c}`"));
        }
    }
    if expect_name {
        return Err(if steps.is_empty() {
            "the address is empty".into()
        } else {
            "the address ends with `.`".into()
        });
    }
    Ok(steps)
}

fn name_at(steps: &[Step], i: usize) -> Option<&str> {
    match steps.get(i) {
        Some(Step::Name(n)) => Some(n),
        _ => None,
    }
}

fn key_at(steps: &[Step], i: usize) -> Option<Option<InstanceKey>> {
    match steps.get(i) {
        Some(Step::Index(k)) => Some(k.clone()),
        _ => None,
    }
}

/// Reads `module.a[..].module.b` steps, returning the path and where it ended.
fn module_path(steps: &[Step]) -> Result<(Vec<ModuleStep>, usize), String> {
    let mut module = Vec::new();
    let mut i = 0;
    while name_at(steps, i) == Some("module") {
        let name = name_at(steps, i + 1)
            .ok_or_else(|| "`module` must be followed by a module name".to_string())?;
        i += 2;
        let key = match key_at(steps, i) {
            Some(k) => {
                i += 1;
                k
            }
            None => None,
        };
        module.push(ModuleStep {
            name: name.to_string(),
            key,
        });
    }
    Ok((module, i))
}

/// Reads `[data.]TYPE.NAME[KEY]` from `i`, returning where it ended.
fn resource_at(
    steps: &[Step],
    module: Vec<ModuleStep>,
    mut i: usize,
) -> Result<(Address, usize), String> {
    let data = name_at(steps, i) == Some("data");
    if data {
        i += 1;
    }
    let resource_type = name_at(steps, i)
        .ok_or_else(|| "expected a resource type".to_string())?
        .to_string();
    let name = name_at(steps, i + 1)
        .ok_or_else(|| format!("expected a resource name after `{resource_type}`"))?
        .to_string();
    i += 2;
    let key = match key_at(steps, i) {
        Some(k) => {
            i += 1;
            k
        }
        None => None,
    };
    Ok((
        Address {
            module,
            data,
            resource_type,
            name,
            key,
        },
        i,
    ))
}

impl Address {
    /// Parses a full resource or resource-instance address; nothing may follow it.
    pub fn parse(input: &str) -> Result<Address, AddressError> {
        let error = |problem: String| AddressError {
            input: input.to_string(),
            problem,
        };
        let steps = tokenize(input.trim()).map_err(error)?;
        let (module, i) = module_path(&steps).map_err(error)?;
        if i == steps.len() {
            return Err(error(
                "a module path alone is not a resource address".into(),
            ));
        }
        let (address, end) = resource_at(&steps, module, i).map_err(error)?;
        if end != steps.len() {
            return Err(error("unexpected text after the resource name".into()));
        }
        Ok(address)
    }

    /// Whether this address, read as a rule, covers `instance` (a concrete plan
    /// address). Missing keys in the rule match every instance.
    pub fn covers(&self, instance: &Address) -> bool {
        self.data == instance.data
            && self.resource_type == instance.resource_type
            && self.name == instance.name
            && key_covers(&self.key, &instance.key)
            && self.module.len() == instance.module.len()
            && self
                .module
                .iter()
                .zip(&instance.module)
                .all(|(rule, inst)| rule.name == inst.name && key_covers(&rule.key, &inst.key))
    }

    /// The same address placed inside `prefix` (for references made from within a module).
    pub fn within(mut self, prefix: &[ModuleStep]) -> Address {
        let mut module = prefix.to_vec();
        module.append(&mut self.module);
        self.module = module;
        self
    }
}

fn key_covers(rule: &Option<InstanceKey>, instance: &Option<InstanceKey>) -> bool {
    match rule {
        None => true,
        Some(k) => instance.as_ref() == Some(k),
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.module {
            write!(f, "module.{}", step.name)?;
            if let Some(key) = &step.key {
                write!(f, "{key}")?;
            }
            f.write_str(".")?;
        }
        if self.data {
            f.write_str("data.")?;
        }
        write!(f, "{}.{}", self.resource_type, self.name)?;
        if let Some(key) = &self.key {
            write!(f, "{key}")?;
        }
        Ok(())
    }
}

impl Reference {
    /// Reads one entry of an expression's `references` list.
    pub fn parse(input: &str) -> Reference {
        let other = || Reference::Other(input.to_string());
        let Ok(steps) = tokenize(input) else {
            return other();
        };
        match name_at(&steps, 0) {
            Some("var" | "local" | "count" | "path" | "terraform" | "self") | None => other(),
            Some("each") => Reference::Each {
                attribute: match (name_at(&steps, 1), name_at(&steps, 2)) {
                    (Some("value"), Some(attribute)) => Some(attribute.to_string()),
                    _ => None,
                },
            },
            Some("module") => {
                let (Some(name), rest) = (name_at(&steps, 1), 2) else {
                    return other();
                };
                let (key, rest) = match key_at(&steps, rest) {
                    Some(k) => (k, rest + 1),
                    None => (None, rest),
                };
                let call = ModuleStep {
                    name: name.to_string(),
                    key,
                };
                match (name_at(&steps, rest), steps.get(rest)) {
                    (Some(output), _) => Reference::ModuleOutput {
                        call,
                        output: output.to_string(),
                    },
                    (None, None) => Reference::ModuleCall(call),
                    (None, Some(_)) => other(),
                }
            }
            Some(_) => match resource_at(&steps, Vec::new(), 0) {
                Ok((address, _)) => Reference::Resource(address),
                Err(_) => other(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: &str) {
        let got = match Address::parse(input) {
            Ok(a) => a.to_string(),
            Err(e) => format!("error: {e}"),
        };
        assert_eq!(got, expect, "input: {input}");
    }

    #[test]
    fn parses_and_prints_addresses() {
        check("docker_volume.home", "docker_volume.home");
        check("docker_volume.home[0]", "docker_volume.home[0]");
        check(r#"x.vols["b"]"#, r#"x.vols["b"]"#);
        check(
            r#"module.home["a"].module.inner[2].data.t.n"#,
            r#"module.home["a"].module.inner[2].data.t.n"#,
        );
        check(
            "module.home",
            "error: invalid resource address `module.home`: a module path alone is not a resource address",
        );
        check(
            "",
            "error: invalid resource address ``: the address is empty",
        );
        check(
            "a.b.c",
            "error: invalid resource address `a.b.c`: unexpected text after the resource name",
        );
        check(
            "a.b[x]",
            "error: invalid resource address `a.b[x]`: an index must be a number, a quoted string or `*`",
        );
        check(
            r#"a.b["x"#,
            r#"error: invalid resource address `a.b["x`: unterminated string key"#,
        );
    }

    #[test]
    fn rules_without_keys_cover_every_instance() {
        let rule = Address::parse("module.home.docker_volume.this").unwrap();
        assert!(rule.covers(&Address::parse("module.home.docker_volume.this").unwrap()));
        assert!(rule.covers(&Address::parse(r#"module.home["x"].docker_volume.this[3]"#).unwrap()));
        assert!(!rule.covers(&Address::parse("docker_volume.this").unwrap()));
        let instance = Address::parse("docker_volume.home[0]").unwrap();
        assert!(!instance.covers(&Address::parse("docker_volume.home[1]").unwrap()));
        assert!(!instance.covers(&Address::parse("data.docker_volume.home[0]").unwrap()));
    }

    #[test]
    fn reads_references() {
        assert_eq!(
            Reference::parse("abode_volume.home[0].id"),
            Reference::Resource(Address::parse("abode_volume.home[0]").unwrap())
        );
        assert_eq!(
            Reference::parse("module.home.volume_id"),
            Reference::ModuleOutput {
                call: ModuleStep {
                    name: "home".into(),
                    key: None
                },
                output: "volume_id".into()
            }
        );
        assert_eq!(
            Reference::parse("each.value"),
            Reference::Each { attribute: None }
        );
        assert_eq!(
            Reference::parse("each.value.volume_id"),
            Reference::Each {
                attribute: Some("volume_id".into())
            }
        );
        assert_eq!(
            Reference::parse("var.name"),
            Reference::Other("var.name".into())
        );
        assert_eq!(
            Reference::parse("module.home"),
            Reference::ModuleCall(ModuleStep {
                name: "home".into(),
                key: None
            })
        );
        assert_eq!(
            Reference::parse(r#"module.home["a"]"#),
            Reference::ModuleCall(ModuleStep {
                name: "home".into(),
                key: Some(InstanceKey::Str("a".into()))
            })
        );
    }
}
