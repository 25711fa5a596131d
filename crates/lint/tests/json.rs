//! The JSON report is an API (docs/lint.md): its field names, rule ids and
//! severities are fixed, and it reads back into the same report.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_lint::{lint_files, Options, Report, SourceFile};

#[test]
fn the_json_report_has_the_documented_shape() {
    let files = [SourceFile::new(
        "main.tf",
        "data \"abode_workspace_owner\" \"me\" {}\nresource \"abode_volume\" \"home\" {\n  name = data.abode_workspace_owner.me.name\n}\n",
    )];
    let report = lint_files(&files, &Options::default()).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["errors"], 1);
    assert_eq!(json["warnings"], 1);
    let first = &json["findings"][0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "attribute",
            "column",
            "file",
            "fix",
            "line",
            "message",
            "resource",
            "rule",
            "severity"
        ]
    );
    assert_eq!(first["rule"], "persistent-unprotected");
    assert_eq!(first["severity"], "warning");
    assert!(first["attribute"].is_null());
    let second = &json["findings"][1];
    assert_eq!(second["rule"], "persistent-identity-mutable");
    assert_eq!(second["severity"], "error");
    assert_eq!(
        (second["line"].clone(), second["column"].clone()),
        (3.into(), 3.into())
    );
    assert_eq!(second["attribute"], "name");
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}
