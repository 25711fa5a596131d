//! The lint's rules as a table of template folders: each
//! `tests/fixtures/<case>/` holds `.tf` files (modules in subfolders), an
//! optional `options` file (`persistent-type SPEC` lines) and `expected.txt`,
//! the report as `abode templates lint` prints it, or `error: ...` for a
//! folder that cannot be linted. `UPDATE_EXPECT=1` rewrites the snapshots.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use abode_lint::{lint_dir, Options};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Lints one fixture folder and renders what the CLI would print.
fn render(dir: &Path) -> String {
    let mut options = Options::default();
    if let Ok(text) = std::fs::read_to_string(dir.join("options")) {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let spec = line.strip_prefix("persistent-type ").unwrap();
            if let Err(error) = options.persistent_types.add(spec) {
                return format!("error: {error}\n");
            }
        }
    }
    match lint_dir(dir, &options) {
        Ok(report) => format!("{report}\n"),
        Err(error) => format!("error: {error}\n"),
    }
}

/// Compares a case's output with its snapshot (or rewrites it).
fn check(dir: &Path) -> Result<(), String> {
    let actual = render(dir);
    let expected_path = dir.join("expected.txt");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &actual).unwrap();
        return Ok(());
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if actual == expected {
        Ok(())
    } else {
        Err(format!(
            "--- {}\n--- expected:\n{expected}--- actual:\n{actual}",
            dir.display()
        ))
    }
}

#[test]
fn every_fixture_matches_its_snapshot() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "the table lost cases");
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The example template other tests push must stay clean.
#[test]
fn the_example_template_lints_clean() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/local-workspace");
    let report = lint_dir(&example, &Options::default()).unwrap();
    assert!(report.findings.is_empty(), "{report}");
}

/// Every rule fires in at least one fixture and every fixture's snapshot
/// only names known rules.
#[test]
fn every_rule_fires_somewhere() {
    let mut all = String::new();
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path().join("expected.txt");
        all.push_str(&std::fs::read_to_string(path).unwrap_or_default());
    }
    for rule in abode_lint::Rule::ALL {
        assert!(
            all.contains(&format!(" {}: ", rule.id())),
            "no fixture makes {} fire",
            rule.id()
        );
    }
}
