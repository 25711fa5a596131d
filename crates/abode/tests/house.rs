//! The structural invariants of ARCHITECTURE.md that a test can check: which
//! crate may depend on which, how the code is shared out between them, and
//! that the map says what is there: each crate's dependencies as its
//! `Cargo.toml` lists them, the circles of modules it keeps (and no other),
//! the exit statuses `exit.rs` defines, and at most 500 lines. They read the
//! workspace itself (`cargo tree`, `cargo metadata`, the source files), so a
//! change that breaks one fails here, not in a review.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/abode sits two levels under the workspace")
        .to_path_buf()
}

/// The names of every package `package` depends on at run time (normal
/// dependencies, transitively), from Cargo's own resolution.
fn runtime_dependencies(package: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "-p",
            package,
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// What a crate must never link, and why (ARCHITECTURE.md).
const FORBIDDEN: &[(&str, &[&str])] = &[
    // An external daemon runs Terraform on another machine: no database
    // driver, no store, no domain.
    (
        "abode-provisionerd",
        &["sqlx", "abode-store", "abode-control", "abode-api"],
    ),
    // The machine side of a build knows no database and no domain rule.
    (
        "abode-runner",
        &["sqlx", "abode-store", "abode-control", "abode-guard"],
    ),
    ("abode-protocol", &["sqlx", "abode-store", "abode-control"]),
    // The wire is plain data: a client links no server.
    (
        "abode-sdk",
        &["sqlx", "abode-store", "abode-control", "tokio"],
    ),
    // Delivery reaches the outbox, not the domain.
    ("abode-delivery", &["abode-control"]),
    // The domain opens no way into a workspace: the gateway sits above it.
    ("abode-control", &["abode-gateway"]),
    // The pure crates stay pure.
    ("abode-guard", &["sqlx", "abode-store", "tokio"]),
    ("abode-schedule", &["sqlx", "abode-store", "tokio"]),
    ("abode-prebuilds", &["sqlx", "abode-store", "tokio"]),
    ("abode-cost", &["sqlx", "abode-store", "tokio"]),
    // The providers, the token seal and the OAuth exchanges: no server
    // around them.
    (
        "abode-external-auth",
        &["sqlx", "abode-store", "abode-control", "abode-identity"],
    ),
];

#[test]
fn crates_link_only_what_their_role_allows() {
    for (package, forbidden) in FORBIDDEN {
        let dependencies = runtime_dependencies(package);
        assert!(
            dependencies.iter().any(|name| name == package),
            "cargo tree did not list {package} itself: {dependencies:?}"
        );
        for name in *forbidden {
            assert!(
                !dependencies.iter().any(|dependency| dependency == name),
                "{package} depends on {name}, which ARCHITECTURE.md rules out"
            );
        }
    }
}

/// The Rust lines of `src/` of each crate, without the unit tests at the end
/// of a file (`#[cfg(test)] mod tests`).
fn source_lines() -> Vec<(String, usize)> {
    let crates = workspace_root().join("crates");
    let mut counts = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        counts.push((
            name,
            rust_files(&src).iter().map(|f| non_test_lines(f)).sum(),
        ));
    }
    counts
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

fn non_test_lines(file: &Path) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let tests = lines.windows(2).position(|pair| {
        pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod tests")
    });
    tests.unwrap_or(lines.len())
}

/// One reason to change per crate: none grows into the house's hub again
/// (the control plane held 27% of the code before it was split by role).
#[test]
fn no_crate_holds_more_than_a_fifth_of_the_code() {
    let counts = source_lines();
    let total: usize = counts.iter().map(|(_, lines)| lines).sum();
    for (name, lines) in &counts {
        assert!(
            lines * 5 <= total,
            "crates/{name} holds {lines} of {total} lines ({:.1}%): give a part of it a crate of its own",
            100.0 * *lines as f64 / total as f64
        );
    }
}

/// The binary parses the command line and hands each command to a library
/// crate (`abode-cli`), as ripgrep's does: it stays glue, at most 7% of the
/// code.
#[test]
fn the_binary_is_glue() {
    let counts = source_lines();
    let total: usize = counts.iter().map(|(_, lines)| lines).sum();
    let binary = counts
        .iter()
        .find(|(name, _)| name == "abode")
        .map(|(_, lines)| *lines)
        .expect("crates/abode is there");
    assert!(
        binary * 100 <= total * 7,
        "crates/abode holds {binary} of {total} lines ({:.1}%): a command's work belongs in a library crate (abode-cli), not in the binary",
        100.0 * binary as f64 / total as f64
    );
}

/// The wire has one definition: the client reads the SDK's types.
#[test]
fn the_client_has_no_wire_types_of_its_own() {
    let client = workspace_root().join("crates/client/src/types.rs");
    assert!(!client.exists(), "{} is back", client.display());
}

/// Which modules of a crate name which (module -> the modules it names).
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The crates of the workspace by folder name, each with its `src/`.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let mut crates: Vec<(String, PathBuf)> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("src").is_dir())
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            (name, dir.join("src"))
        })
        .collect();
    crates.sort();
    crates
}

/// A file's code: what comes before its unit tests (`#[cfg(test)] mod
/// tests`).
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|pair| {
            pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod tests")
        })
        .unwrap_or(lines.len());
    lines[..end].join("\n")
}

/// Rust code as tokens: identifiers, `::`, and single punctuation
/// characters; strings and comments are dropped (a doc comment's
/// `crate::x` is no import).
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        if c.is_alphanumeric() || c == '_' {
            let start = at;
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            tokens.push(chars[start..at].iter().collect());
            continue;
        }
        if c == '\'' {
            // A character literal (`'"'`, `'\''`), or a lifetime's quote.
            if chars.get(at + 1) == Some(&'\\') {
                at += 3;
                while at < chars.len() && chars[at] != '\'' {
                    at += 1;
                }
            } else if chars.get(at + 2) == Some(&'\'') {
                at += 2;
            }
        } else if c == '"' {
            // A raw string (`r#"..."#`) ends at a quote with as many `#`
            // as it began with, and has no escapes.
            let hashes = chars[..at].iter().rev().take_while(|c| **c == '#').count();
            let raw = hashes > 0 || (at > 0 && chars[at - 1] == 'r');
            let closes = |at: usize| {
                chars[at] == '"' && (1..=hashes).all(|n| chars.get(at + n) == Some(&'#'))
            };
            at += 1;
            while at < chars.len() && !closes(at) {
                at += if chars[at] == '\\' && !raw { 2 } else { 1 };
            }
            at += hashes;
        } else if c == '/' && chars.get(at + 1) == Some(&'/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && chars.get(at + 1) == Some(&'*') {
            while at < chars.len() && !(chars[at] == '*' && chars.get(at + 1) == Some(&'/')) {
                at += 1;
            }
            at += 1;
        } else if c == ':' && chars.get(at + 1) == Some(&':') {
            tokens.push("::".to_string());
            at += 1;
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
        at += 1;
    }
    tokens
}

/// The files of `src/` that only tests compile (`#[cfg(test)] mod NAME;`).
fn test_only_files(src: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for file in rust_files(src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            let Some(name) = pair[1]
                .trim()
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                continue;
            };
            if pair[0].trim() != "#[cfg(test)]" {
                continue;
            }
            let stem = file.file_stem().unwrap().to_string_lossy();
            let dir = if ["lib", "main", "mod"].contains(&stem.as_ref()) {
                file.parent().unwrap().to_path_buf()
            } else {
                file.with_extension("")
            };
            found.insert(dir.join(format!("{name}.rs")));
            found.insert(dir.join(name).join("mod.rs"));
        }
    }
    found
}

/// The names a `use` declaration brings in, each with its path
/// (`use a::{b::C, D as E}`: `a::b::C` as `C`, `a::D` as `E`), from the
/// token after `use`; `at` ends past the tree.
fn use_tree(
    tokens: &[String],
    at: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    while let Some(token) = tokens.get(*at) {
        *at += 1;
        match token.as_str() {
            "::" => {}
            "{" => {
                while tokens.get(*at).is_some_and(|token| token != "}") {
                    use_tree(tokens, at, path.clone(), out);
                    if tokens.get(*at).is_some_and(|token| token == ",") {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            "*" => {
                out.push((path, "*".to_string()));
                return;
            }
            name if tokens.get(*at).is_some_and(|token| token == "::") => {
                path.push(name.to_string());
            }
            name => {
                let mut bound = if name == "self" {
                    path.last().cloned().unwrap_or_default()
                } else {
                    path.push(name.to_string());
                    name.to_string()
                };
                if tokens.get(*at).is_some_and(|token| token == "as") {
                    bound = tokens.get(*at + 1).cloned().unwrap_or_default();
                    *at += 2;
                }
                out.push((path, bound));
                return;
            }
        }
    }
}

/// The items a file declares `pub`: `pub struct NAME`, `pub(crate) fn NAME`...
fn public_items(tokens: &[String]) -> Vec<String> {
    const DEFINERS: [&str; 8] = [
        "struct", "enum", "fn", "trait", "type", "const", "static", "union",
    ];
    let mut items = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        if token != "pub" {
            continue;
        }
        let mut at = index + 1;
        if tokens.get(at).is_some_and(|token| token == "(") {
            while tokens.get(at).is_some_and(|token| token != ")") {
                at += 1;
            }
            at += 1;
        }
        if tokens
            .get(at)
            .is_some_and(|token| DEFINERS.contains(&token.as_str()))
        {
            if let Some(name) = tokens.get(at + 1) {
                items.push(name.clone());
            }
        }
    }
    items
}

/// The names right after a path prefix ending at `at` (`x` in `crate::x::y`,
/// `x` and `z` in `crate::{x::y, z}`).
fn names_after(tokens: &[String], at: usize) -> Vec<String> {
    match tokens.get(at).map(String::as_str) {
        Some("{") => {
            let mut names = Vec::new();
            let mut depth = 0;
            let mut expect_name = true;
            for token in &tokens[at..] {
                match token.as_str() {
                    "{" => {
                        depth += 1;
                        expect_name = depth == 1;
                    }
                    "}" => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    "," => expect_name = depth == 1,
                    name if expect_name => {
                        names.push(name.to_string());
                        expect_name = false;
                    }
                    _ => {}
                }
            }
            names
        }
        Some(name) => vec![name.to_string()],
        None => Vec::new(),
    }
}

/// Which module of `src/` names which: `crate::x` (and `super::x` where
/// `super` is the crate's root) in a module, and in the crate's root
/// (`lib.rs`, `main.rs`) any path through a module or name it imports from
/// one. A name the root re-exports from a module counts as that module's,
/// a name the root defines as the root's.
fn module_graph(src: &Path) -> Graph {
    let test_only = test_only_files(src);
    let root_file = ["lib.rs", "main.rs"]
        .into_iter()
        .map(|name| src.join(name))
        .find(|file| file.exists())
        .unwrap();
    let root = root_file
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let is_module = |name: &str| {
        name != root && (src.join(format!("{name}.rs")).exists() || src.join(name).is_dir())
    };

    // The root: the names it imports from its modules, the names it
    // defines, and its code without its `use` declarations.
    let root_tokens = tokens(&code_of(&root_file));
    let mut imported: BTreeMap<String, String> = BTreeMap::new();
    let mut globbed: Vec<String> = Vec::new();
    let mut defined: BTreeSet<String> = BTreeSet::new();
    let mut code: Vec<String> = Vec::new();
    let mut at = 0;
    while at < root_tokens.len() {
        let token = &root_tokens[at];
        if token == "use" {
            let mut leaves = Vec::new();
            at += 1;
            use_tree(&root_tokens, &mut at, Vec::new(), &mut leaves);
            for (path, name) in leaves {
                let from = path
                    .iter()
                    .find(|segment| !["crate", "self"].contains(&segment.as_str()));
                if let Some(module) = from.filter(|module| is_module(module)) {
                    if name == "*" {
                        globbed.push(module.clone());
                    } else {
                        imported.insert(name, module.clone());
                    }
                }
            }
            continue;
        }
        let definer = [
            "struct", "enum", "fn", "trait", "type", "const", "static", "union", "mod",
        ];
        if definer.contains(&token.as_str()) {
            if let Some(name) = root_tokens.get(at + 1) {
                defined.insert(name.clone());
            }
        }
        if token == "macro_rules" {
            if let Some(name) = root_tokens.get(at + 2) {
                defined.insert(name.clone());
            }
        }
        code.push(token.clone());
        at += 1;
    }
    // `pub use x::*`: the public items `x` defines are the root's names.
    for module in &globbed {
        let file = src.join(format!("{module}.rs"));
        let files = if file.exists() {
            vec![file]
        } else {
            rust_files(&src.join(module))
        };
        for file in files {
            for name in public_items(&tokens(&code_of(&file))) {
                if !defined.contains(&name) {
                    imported.entry(name).or_insert_with(|| module.clone());
                }
            }
        }
    }
    // A name in the root's scope (`crate::NAME`), as a module of the graph.
    let resolve = |name: &str| -> Option<String> {
        if is_module(name) {
            Some(name.to_string())
        } else if let Some(module) = imported.get(name) {
            Some(module.clone())
        } else if defined.contains(name) {
            Some(root.clone())
        } else {
            None
        }
    };

    let mut graph = Graph::new();
    graph.entry(root.clone()).or_default();
    for (index, token) in code.iter().enumerate() {
        // A name after `::` or `.` is a segment or a field, one after `mod`
        // the module's declaration.
        let previous = index.checked_sub(1).map(|before| code[before].as_str());
        if previous.is_some_and(|before| ["::", ".", "mod"].contains(&before)) {
            continue;
        }
        let followed_by_path = code.get(index + 1).is_some_and(|next| next == "::");
        let names = if (token == "crate" || token == "self") && followed_by_path {
            names_after(&code, index + 2)
        } else if followed_by_path && is_module(token) {
            vec![token.clone()]
        } else if let Some(module) = imported.get(token).filter(|_| {
            // A lower-case name is a function or macro only where it is
            // called (`request_id(...)`): elsewhere it may be a local.
            token.starts_with(|c: char| c.is_ascii_uppercase())
                || code
                    .get(index + 1)
                    .is_some_and(|next| next == "(" || next == "!")
        }) {
            vec![module.clone()]
        } else {
            continue;
        };
        for to in names.iter().filter_map(|name| resolve(name)) {
            if to != root {
                graph.get_mut(&root).unwrap().insert(to);
            }
        }
    }

    for file in rust_files(src) {
        if file == root_file || test_only.contains(&file) {
            continue;
        }
        let relative = file.strip_prefix(src).unwrap();
        let mut path: Vec<String> = relative
            .components()
            .map(|part| {
                let part = part.as_os_str().to_string_lossy();
                part.trim_end_matches(".rs").to_string()
            })
            .collect();
        if path.last().is_some_and(|last| last == "mod") {
            path.pop();
        }
        let from = path[0].clone();
        let edges = graph.entry(from.clone()).or_default();
        let code = tokens(&code_of(&file));
        for (index, token) in code.iter().enumerate() {
            if index > 0 && code[index - 1] == "::" {
                continue;
            }
            let names = if token == "crate" && code.get(index + 1).is_some_and(|t| t == "::") {
                names_after(&code, index + 2)
            } else if token == "super" {
                // `super::super::x`: the root once the chain climbs past
                // the file's own module path.
                let mut climbs = 0;
                let mut next = index;
                while code.get(next).is_some_and(|t| t == "super")
                    && code.get(next + 1).is_some_and(|t| t == "::")
                {
                    climbs += 1;
                    next += 2;
                }
                if climbs < path.len() {
                    continue;
                }
                names_after(&code, next)
            } else {
                continue;
            };
            for to in names.iter().filter_map(|name| resolve(name)) {
                if to != from {
                    edges.insert(to);
                }
            }
        }
    }
    graph
}

/// The circles of a graph: its strongly connected parts of two modules or more.
fn circles(graph: &Graph) -> Vec<BTreeSet<String>> {
    let reach = |start: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start.clone()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|node| (node, reach(node))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (node, reached) in &reaches {
        if !reached.contains(*node) {
            continue;
        }
        let circle: BTreeSet<String> = reached
            .iter()
            .filter(|other| reaches.get(other).is_some_and(|back| back.contains(*node)))
            .cloned()
            .collect();
        if !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

/// ARCHITECTURE.md, read whole.
fn architecture() -> String {
    std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap()
}

/// The lines of a Markdown section: from its heading to the next heading
/// of its level or above.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut lines = text.lines().skip_while(|line| *line != heading);
    assert!(lines.next().is_some(), "no section {heading:?}");
    lines
        .take_while(|line| {
            let hashes = line.chars().take_while(|c| *c == '#').count();
            hashes == 0 || hashes > level
        })
        .collect()
}

/// What a text writes between backticks.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The workspace crates each package depends on (`[dependencies]` only),
/// by its folder under `crates/`, from `cargo metadata`.
fn manifest_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let crates = workspace_root().join("crates");
    let mut found = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let Ok(relative) = manifest.strip_prefix(&crates) else {
            continue;
        };
        let folder = relative.components().next().unwrap();
        let dependencies = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|dependency| dependency["kind"].is_null())
            .map(|dependency| dependency["name"].as_str().unwrap().to_string())
            .filter(|name| name.starts_with("abode-"))
            .collect();
        found.insert(
            folder.as_os_str().to_string_lossy().into_owned(),
            dependencies,
        );
    }
    found
}

/// The code map's `Depends on:` of each crate entry (`### `crates/NAME``),
/// by folder.
fn mapped_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let text = architecture();
    let mut mapped = BTreeMap::new();
    let mut entry: Option<(String, String)> = None;
    for line in section(&text, "## Code map").into_iter().chain(["### end"]) {
        if line.starts_with("### ") {
            if let Some((folder, body)) = entry.take() {
                let stated = body
                    .split_once("Depends on:")
                    .map(|(_, rest)| rest.split('.').next().unwrap_or_default())
                    .unwrap_or_else(|| {
                        panic!("the code map's crates/{folder} says no `Depends on:`")
                    });
                let names: BTreeSet<String> = if stated.trim() == "none" {
                    BTreeSet::new()
                } else {
                    quoted(stated).into_iter().map(str::to_string).collect()
                };
                assert!(
                    mapped.insert(folder.clone(), names).is_none(),
                    "the code map has crates/{folder} twice"
                );
            }
            if let Some(folder) = line
                .strip_prefix("### `crates/")
                .and_then(|rest| rest.split('`').next())
            {
                entry = Some((folder.to_string(), String::new()));
            }
        } else if let Some((_, body)) = entry.as_mut() {
            body.push(' ');
            body.push_str(line.trim());
        }
    }
    mapped
}

/// Each crate's entry in ARCHITECTURE.md's code map says, on its `Depends
/// on:` line, exactly the workspace crates its `Cargo.toml` depends on.
#[test]
fn the_code_map_states_each_crate_s_dependencies() {
    let manifests = manifest_dependencies();
    let mapped = mapped_dependencies();
    let mut wrong = Vec::new();
    for (folder, needs) in &manifests {
        match mapped.get(folder) {
            None => wrong.push(format!("crates/{folder} has no entry in the code map")),
            Some(stated) if stated != needs => {
                let names = |set: BTreeSet<&String>| {
                    set.into_iter().cloned().collect::<Vec<_>>().join(", ")
                };
                let left_out = names(needs.difference(stated).collect());
                let extra = names(stated.difference(needs).collect());
                let mut differences = Vec::new();
                if !left_out.is_empty() {
                    differences.push(format!("its Cargo.toml has {left_out}, the map does not"));
                }
                if !extra.is_empty() {
                    differences.push(format!("the map says {extra}, its Cargo.toml does not"));
                }
                wrong.push(format!("crates/{folder}: {}", differences.join("; ")));
            }
            Some(_) => {}
        }
    }
    for folder in mapped
        .keys()
        .filter(|folder| !manifests.contains_key(*folder))
    {
        wrong.push(format!(
            "the code map has crates/{folder}, which is no crate"
        ));
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's code map:\n{}",
        wrong.join("\n")
    );
}

/// The circles ARCHITECTURE.md keeps ("Circles that stay"), by crate
/// folder: each bullet's first backticked name is the crate, the backticked
/// files up to the next `: ` its modules.
fn kept_circles() -> BTreeSet<(String, BTreeSet<String>)> {
    let text = architecture();
    let mut bullets: Vec<String> = Vec::new();
    for line in section(&text, "## Circles that stay, and why") {
        if let Some(start) = line.strip_prefix("- ") {
            bullets.push(start.to_string());
        } else if let Some(bullet) = bullets.last_mut().filter(|_| line.starts_with("  ")) {
            bullet.push(' ');
            bullet.push_str(line.trim());
        }
    }
    bullets
        .iter()
        .map(|bullet| {
            let folder = quoted(bullet)[0];
            let after = &bullet[folder.len() + 3..];
            let list = after.split(": ").next().unwrap_or_default();
            let modules = quoted(list)
                .into_iter()
                .map(|file| {
                    file.trim_end_matches('/')
                        .trim_end_matches(".rs")
                        .to_string()
                })
                .collect();
            (folder.to_string(), modules)
        })
        .collect()
}

/// No modules of a crate name each other in a circle, the crate's root
/// (`lib.rs`, `main.rs`) included, but the ones ARCHITECTURE.md keeps, each
/// with its reason: a helper two modules need lives in a module of its own,
/// not in a sibling that needs it back. Measured on `crate::` and `super::`
/// paths, and in the root on paths and the names it imports from modules.
#[test]
fn the_only_circles_of_modules_are_the_ones_the_map_keeps() {
    let kept = kept_circles();
    let mut found = BTreeSet::new();
    let mut wrong = Vec::new();
    for (folder, src) in crate_sources() {
        let graph = module_graph(&src);
        for circle in circles(&graph) {
            let key = (folder.clone(), circle.clone());
            if !kept.contains(&key) {
                let arrows: Vec<String> = circle
                    .iter()
                    .map(|module| {
                        let to: Vec<&str> = graph[module]
                            .intersection(&circle)
                            .map(String::as_str)
                            .collect();
                        format!("{module} -> {}", to.join(", "))
                    })
                    .collect();
                wrong.push(format!(
                    "crates/{folder}: a circle the map does not keep: {} ({})",
                    circle.iter().cloned().collect::<Vec<_>>().join(", "),
                    arrows.join("; ")
                ));
            }
            found.insert(key);
        }
    }
    for (folder, circle) in kept.difference(&found) {
        wrong.push(format!(
            "crates/{folder}: the map keeps a circle that is not there: {}",
            circle.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's \"Circles that stay\":\n{}",
        wrong.join("\n")
    );
}

/// The numbers a text writes on their own (`141`, not `0600` in `a0600`),
/// outside backticks.
fn numbers(text: &str) -> BTreeSet<u8> {
    text.split('`')
        .step_by(2)
        .flat_map(|plain| plain.split(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_digit()))
        .map(|word| word.parse().unwrap())
        .collect()
}

/// The exit statuses `crates/cli/src/exit.rs` defines: 0
/// (`ExitCode::SUCCESS`) and every `pub const NAME: u8 = N;`.
fn defined_exit_statuses() -> BTreeSet<u8> {
    let text = code_of(&workspace_root().join("crates/cli/src/exit.rs"));
    let mut statuses: BTreeSet<u8> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .filter_map(|rest| rest.split_once(": u8 = "))
        .map(|(_, value)| value.trim_end_matches(';').parse().unwrap())
        .collect();
    if text.contains("ExitCode::SUCCESS") {
        statuses.insert(0);
    }
    statuses
}

/// The exit statuses written down, in ARCHITECTURE.md (the paragraph that
/// names `src/exit.rs`) and in docs/cli.md's table, are the ones exit.rs
/// defines.
#[test]
fn the_exit_statuses_written_down_are_the_ones_exit_rs_defines() {
    let defined = defined_exit_statuses();
    let text = architecture();
    let paragraph = text
        .split("\n\n")
        .find(|paragraph| paragraph.contains("`src/exit.rs`"))
        .expect("ARCHITECTURE.md has a paragraph naming `src/exit.rs`");
    let cli = std::fs::read_to_string(workspace_root().join("docs/cli.md")).unwrap();
    let table: BTreeSet<u8> = section(&cli, "## Exit status")
        .into_iter()
        .filter_map(|line| line.strip_prefix("| ")?.split(" |").next()?.parse().ok())
        .collect();
    for (place, written) in [
        ("ARCHITECTURE.md", numbers(paragraph)),
        ("docs/cli.md", table),
    ] {
        assert_eq!(
            written, defined,
            "{place} writes down the exit statuses {written:?}, crates/cli/src/exit.rs defines {defined:?}"
        );
    }
}

/// A short map that a test keeps true: detail lives in each crate's `//!`.
#[test]
fn the_architecture_document_is_at_most_500_lines() {
    let lines = architecture().lines().count();
    assert!(
        lines <= 500,
        "ARCHITECTURE.md has {lines} lines: move a crate's detail into its own `//!` docs"
    );
}

/// The serde types the crates around the wire may declare themselves, none
/// of them a request's or an answer's body: (file, type, why).
const NOT_WIRE_BODIES: &[(&str, &str, &str)] = &[
    (
        "crates/client/src/config.rs",
        "Session",
        "the CLI's session file on disk",
    ),
    (
        "crates/web/src/tokens.rs",
        "NewToken",
        "the dashboard's new-token form (a page's form, not the API's)",
    ),
    (
        "crates/web/src/admin.rs",
        "AuditFilters",
        "the audit page's query string",
    ),
];

/// One wire, written as its types: the API and the client build no body
/// with `json!` (a `serde_json::Value` built by hand is a body the SDK does
/// not know).
#[test]
fn the_api_and_the_client_build_no_body_with_json_macros() {
    let root = workspace_root();
    let mut found = Vec::new();
    for dir in ["crates/api/src", "crates/client/src"] {
        for file in rust_files(&root.join(dir)) {
            let tokens = tokens(&code_of(&file));
            let uses = tokens
                .windows(2)
                .filter(|pair| pair[0] == "json" && pair[1] == "!")
                .count();
            if uses > 0 {
                let relative = file.strip_prefix(&root).unwrap().display().to_string();
                found.push(format!("{relative}: {uses}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "bodies are abode-sdk's types, not json! values: {found:#?}"
    );
}

/// The types a file declares with a serde derive: their names.
fn serde_types(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut derived = false;
    for line in code.lines().map(str::trim) {
        if line.starts_with("#[derive(") {
            derived |= line.contains("Serialize") || line.contains("Deserialize");
            continue;
        }
        if !derived || line.starts_with("#[") || line.starts_with("//") {
            continue;
        }
        derived = false;
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|word| !word.is_empty())
            .collect();
        if let Some(at) = words
            .iter()
            .position(|word| *word == "struct" || *word == "enum")
        {
            if let Some(name) = words.get(at + 1) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// One wire: every request and answer body is `abode-sdk`'s. The API, the
/// client, the gateway, the web pages and the commands declare no serde type
/// of their own but a URL's
/// query string (`...Query`, read by axum's `Query` and never as a body),
/// an HTML form the dashboard's own pages post (`...Form`, crates/web), and
/// the few of `NOT_WIRE_BODIES`.
#[test]
fn no_body_is_declared_outside_the_sdk() {
    let root = workspace_root();
    let mut found = Vec::new();
    for dir in [
        "crates/api/src",
        "crates/client/src",
        "crates/gateway/src",
        "crates/web/src",
        "crates/cli/src",
    ] {
        for file in rust_files(&root.join(dir)) {
            let relative = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let code = code_of(&file);
            for name in serde_types(&code) {
                let listed = NOT_WIRE_BODIES
                    .iter()
                    .any(|(path, allowed, _)| *path == relative && *allowed == name);
                let query = name.ends_with("Query");
                let form = dir == "crates/web/src" && name.ends_with("Form");
                let read_as_body = code.contains(&format!("Json<{name}>"))
                    || code.contains(&format!(": {name} = parse_json"))
                    || code.contains(&format!("parse_json::<{name}>"));
                if !(listed || ((query || form) && !read_as_body)) {
                    found.push(format!("{relative}: {name}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "request and answer bodies belong in abode-sdk (crates/sdk), not in {found:#?}"
    );
    for (path, name, why) in NOT_WIRE_BODIES {
        let code = code_of(&root.join(path));
        assert!(
            serde_types(&code).iter().any(|declared| declared == name),
            "NOT_WIRE_BODIES lists {name} in {path} ({why}), which no longer declares it"
        );
    }
}

/// The methods of `impl Control` blocks in the control plane's sources.
fn control_methods() -> Vec<String> {
    let src = workspace_root().join("crates/control/src");
    let mut methods = Vec::new();
    for file in rust_files(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut inside = false;
        for line in text.lines() {
            if line.starts_with("impl Control {") || line.starts_with("impl crate::Control {") {
                inside = true;
            } else if inside && line.starts_with('}') {
                inside = false;
            } else if inside {
                let trimmed = line.trim_start();
                let indent = line.len() - trimmed.len();
                let signature = trimmed
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ")
                    .trim_start_matches("async ");
                if indent == 4 && signature.starts_with("fn ") {
                    let name = signature[3..]
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or_default();
                    methods.push(name.to_string());
                }
            }
        }
    }
    methods
}

/// `Control` is the composition root: its constructor and an accessor per
/// service (at most 25 methods), and the control plane holds at most 12% of
/// the house (the machine room and the gateway have crates of their own).
#[test]
fn the_control_plane_is_a_composition_root() {
    let methods = control_methods();
    assert!(
        methods.len() <= 25,
        "Control has {} methods ({}): give the rule a service of its own",
        methods.len(),
        methods.join(", ")
    );
    let counts = source_lines();
    let total: usize = counts.iter().map(|(_, lines)| lines).sum();
    let control = counts
        .iter()
        .find(|(name, _)| name == "control")
        .map_or(0, |(_, lines)| *lines);
    assert!(
        control * 100 <= total * 12,
        "crates/control holds {control} of {total} lines ({:.1}%): at most 12%",
        100.0 * control as f64 / total as f64
    );
}

/// A route or a page reaches a record only through the service that checks
/// who may see it (as Coder's `dbauthz` wraps its store): no file of the API
/// or the dashboard names the store, but the server's assembly (`server.rs`,
/// which opens it and hands it to the services) and the offline recovery
/// command (`recovery.rs`, which runs with no server).
#[test]
fn routes_and_pages_reach_records_only_through_services() {
    let root = workspace_root();
    let mut offenders = Vec::new();
    for dir in ["crates/api/src", "crates/web/src"] {
        for file in rust_files(&root.join(dir)) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            if dir == "crates/api/src" && ["server.rs", "recovery.rs"].contains(&name.as_str()) {
                continue;
            }
            if tokens(&code_of(&file)).iter().any(|token| token == "Store") {
                offenders.push(file.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "these name the store instead of asking a service: {}",
        offenders.join(", ")
    );
}
