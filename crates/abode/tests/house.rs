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
    // Delivery reaches the outbox, not the domain.
    ("abode-delivery", &["abode-control"]),
    // The pure crates stay pure.
    ("abode-guard", &["sqlx", "abode-store", "tokio"]),
    ("abode-schedule", &["sqlx", "abode-store", "tokio"]),
    ("abode-prebuilds", &["sqlx", "abode-store", "tokio"]),
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
