//! The structural invariants of ARCHITECTURE.md that a test can check: which
//! crate may depend on which, and how the code is shared out between them.
//! They read the workspace itself (`cargo tree`, the source files), so a
//! change that breaks one fails here, not in a review.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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

/// The wire has one definition: the client reads the SDK's types.
#[test]
fn the_client_has_no_wire_types_of_its_own() {
    let client = workspace_root().join("crates/client/src/types.rs");
    assert!(!client.exists(), "{} is back", client.display());
}

/// No two modules of the control plane reach into each other in a circle:
/// a module that needs another's helper takes it from a shared module
/// (`holders.rs`, `times.rs`, `states.rs`), not from a sibling that needs it
/// back. Measured on `crate::MODULE` paths and `use crate::{...}` lists.
#[test]
fn the_control_plane_s_modules_import_each_other_in_no_circle() {
    let src = workspace_root().join("crates/control/src");
    let module_of = |file: &Path| -> String {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap();
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string()
    };
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let path = regex_lite_paths();
    for file in rust_files(&src) {
        let from = module_of(&file);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let text = &text[..text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len())];
        for to in path(text) {
            let is_module = src.join(format!("{to}.rs")).exists() || src.join(&to).is_dir();
            if to != from && is_module {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // Depth-first search for a way back.
    fn reaches(
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        from: &str,
        target: &str,
        seen: &mut std::collections::BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> bool {
        for next in edges.get(from).into_iter().flatten() {
            if next == target {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if reaches(edges, next, target, seen, path) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    for module in edges.keys() {
        let mut path = vec![module.clone()];
        let mut seen = std::collections::BTreeSet::new();
        assert!(
            !reaches(&edges, module, module, &mut seen, &mut path),
            "a circle of modules in crates/control/src: {}",
            path.join(" -> ")
        );
    }
}

/// The modules a text names as `crate::NAME` or in `use crate::{NAME, ...}`.
fn regex_lite_paths() -> impl Fn(&str) -> Vec<String> {
    |text: &str| {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                let end = list.find('}').unwrap_or(list.len());
                for item in list[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.push(name);
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
        }
        found
    }
}
