//! Presets through the real CLI, server and Terraform: a push reads them
//! (and refuses the invalid ones, with the provider's or the platform's
//! message), `templates presets` lists them, and `create` uses one by name
//! or finds the one matching the requested values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::path::PathBuf;

use serde_json::json;
use util::{fixture, require_terraform, Platform};

/// The fixture `presets` with `from` replaced by `to`, in a folder of its own.
fn variant(platform: &Platform, name: &str, from: &str, to: &str) -> PathBuf {
    let main = std::fs::read_to_string(fixture("presets").join("main.tf")).unwrap();
    assert!(main.contains(from), "the fixture lacks {from:?}");
    let dir = platform.root().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.tf"), main.replace(from, to)).unwrap();
    dir
}

/// Terraform wraps diagnostics at 80 columns.
fn flatten(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn presets_are_read_at_push_listed_and_used_by_create() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("presets");
    platform
        .run(&[
            "templates",
            "push",
            "pool",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();

    let table = platform.run(&["templates", "presets", "pool"]).ok();
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    let columns = |line: &str| -> Vec<String> {
        line.split("  ")
            .map(str::trim)
            .filter(|cell| !cell.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(columns(lines[0]), ["NAME", "PARAMETERS", "PREBUILDS"]);
    assert_eq!(
        columns(lines[1]),
        [
            "office",
            "cpus=4, region=us",
            "1 instance, ttl 1d, 1 schedule (Europe/Paris): * 8-18 * * 1-5 -> 3"
        ]
    );
    assert_eq!(columns(lines[2]), ["small", "cpus=1", "-"]);

    let expected = json!([
        {
            "name": "office",
            "parameters": {"cpus": "4", "region": "us"},
            "prebuilds": {
                "instances": 1,
                "ttl_seconds": 86400,
                "scheduling": {
                    "timezone": "Europe/Paris",
                    "schedules": [{"cron": "* 8-18 * * 1-5", "instances": 3}],
                },
            },
        },
        {"name": "small", "parameters": {"cpus": "1"}, "prebuilds": null},
    ]);
    let listed = platform
        .run(&["templates", "presets", "pool", "-o", "json"])
        .ok()
        .json();
    assert_eq!(listed, expected);
    // Any member reads them, by version too.
    let bob = platform.login_new_user("bob", "member");
    let by_version = platform
        .run_as(
            &bob,
            &[
                "templates",
                "presets",
                "pool",
                "--version",
                "1",
                "-o",
                "json",
            ],
            None,
        )
        .ok()
        .json();
    assert_eq!(by_version, expected);
    platform
        .run(&["templates", "presets", "pool", "--version", "9"])
        .fails_with(1, &["template \"pool\" has no version 9"]);

    // By name: the preset's values, recorded with the workspace.
    let created = platform
        .run(&[
            "create",
            "named",
            "--template",
            "pool",
            "--preset",
            "office",
        ])
        .ok();
    assert!(created.stderr.contains("with preset office"), "{created}");
    let named = platform.show("named");
    assert_eq!(named["preset"], "office");
    assert_eq!(named["parameters"], json!({"cpus": "4", "region": "us"}));
    assert_eq!(named["status"], "running");

    // Without a preset: the one building exactly the requested values.
    let cases: &[(&str, &[&str], serde_json::Value)] = &[
        ("matched", &["-p", "cpus=1"], json!("small")),
        (
            "matched-all",
            &["-p", "cpus=4", "-p", "region=us"],
            json!("office"),
        ),
        (
            "unmatched",
            &["-p", "cpus=1", "-p", "region=us"],
            json!(null),
        ),
        ("defaults", &[], json!(null)),
    ];
    for (name, parameters, preset) in cases {
        let mut args = vec!["create", name, "--template", "pool"];
        args.extend_from_slice(parameters);
        platform.run(&args).ok();
        assert_eq!(&platform.show(name)["preset"], preset, "{name}");
    }
    // Given together with a preset, a value must agree with it.
    platform
        .run(&[
            "create",
            "agreeing",
            "-t",
            "pool",
            "--preset",
            "office",
            "-p",
            "region=us",
        ])
        .ok();
    platform
        .run(&[
            "create", "bad", "-t", "pool", "--preset", "office", "-p", "cpus=2",
        ])
        .fails_with(
            1,
            &["parameter `cpus` is given as `2`, but preset \"office\" sets it to `4`"],
        );
    platform
        .run(&["create", "bad", "-t", "pool", "--preset", "huge"])
        .fails_with(
            1,
            &["template \"pool\" (version 1) has no preset \"huge\"; its presets: \"office\", \"small\""],
        );
    platform.run(&["show", "bad"]).fails_with(1, &["not found"]);

    // Invalid presets fail the push and say why; the version is not kept.
    let refused = [
        (
            variant(&platform, "bad-cron", "* 8-18 * * 1-5", "0 8-18 * * 1-5"),
            "the minute field must be `*`",
        ),
        (
            variant(&platform, "bad-zone", "Europe/Paris", "Mars/Olympus_Mons"),
            "timezone `Mars/Olympus_Mons` is not an IANA time zone",
        ),
        (
            variant(&platform, "twice", "name       = \"small\"", "name       = \"office\""),
            "preset `office` is declared twice (data.abode_workspace_preset.office and data.abode_workspace_preset.small)",
        ),
        (
            variant(&platform, "undeclared", "{ cpus = \"1\" }", "{ gpus = \"1\" }"),
            "preset `small` sets parameter `gpus`, which the template does not declare (declared: `cpus`, `region`)",
        ),
        (
            variant(&platform, "invalid-value", "{ cpus = \"1\" }", "{ cpus = \"12\" }"),
            "preset `small` sets parameter `cpus`:",
        ),
    ];
    for (dir, expected) in refused {
        let run = platform.run(&["templates", "push", "pool", "-d", dir.to_str().unwrap()]);
        assert_eq!(run.code, Some(1), "{run}");
        assert!(
            flatten(&run.stderr).contains(expected),
            "{expected}:\n{run}"
        );
    }
    let versions = platform
        .run(&["templates", "versions", "list", "pool", "-o", "json"])
        .ok()
        .json();
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
}

/// `abode start` and `abode update` take new values of mutable parameters
/// (`--parameter`); the others keep theirs, and an immutable one is refused.
#[test]
fn start_and_update_change_mutable_parameters_only() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("presets");
    platform
        .run(&[
            "templates",
            "push",
            "pool",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    platform
        .run(&["create", "dev", "--template", "pool", "-p", "cpus=2"])
        .ok();
    platform.run(&["stop", "dev"]).ok();
    platform.run(&["start", "dev", "-p", "cpus=3"]).ok();
    let shown = platform.show("dev");
    assert_eq!(
        shown["parameters"],
        json!({"cpus": "3", "region": "eu"}),
        "{shown:#}"
    );
    platform.run(&["stop", "dev"]).ok();
    platform
        .run(&["update", "dev", "--parameter", "cpus=5"])
        .ok();
    assert_eq!(platform.show("dev")["parameters"]["cpus"], "5");

    platform.run(&["stop", "dev"]).ok();
    let refused = platform.run(&["start", "dev", "-p", "region=us"]);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains("region"), "{refused}");
    assert_eq!(platform.show("dev")["parameters"]["region"], "eu");
    platform
        .run(&["start", "dev", "-p", "novalue"])
        .fails_with(2, &["NAME=VALUE"]);
}
