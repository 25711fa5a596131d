//! Quotas with the real binary, real Terraform and a real database (SQLite,
//! and PostgreSQL in the `_on_postgres` variant), on a server started with
//! `--quota-enforce`: a template whose compute costs 4 a day and volume 1;
//! a member whose group allows 10. Two workspaces run (5 + 5); a third
//! create is refused after its plan, before any apply (the ledger its
//! compute writes to stays without it), with the breakdown in its log, one
//! CLI line and exit status 5. Stopping one keeps its volume charged
//! (1 + 5 + 5 = 11 > 10: still refused, the arithmetic in the line);
//! deleting it frees all (5 + 5 = 10) and the third starts. Bad allowances
//! are one line and a non-zero status. Raising a running workspace's cost
//! (a parameter, a version) past the budget is refused the same way, and
//! `abode_quota_refusals_total{reason="quota"}` counts every refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::path::Path;

use util::{copy_dir, fixture, require_terraform, FreshDatabase, Platform};

#[test]
fn quotas_refuse_before_apply_on_sqlite() {
    quotas_refuse_before_apply(None);
}

#[test]
fn quotas_refuse_before_apply_on_postgres() {
    let database = FreshDatabase::create();
    quotas_refuse_before_apply(Some(&database.url));
}

fn ledger_lines(ledger: &Path) -> Vec<String> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn daily_cost(platform: &Platform, dev: &Path, workspace: &str) -> serde_json::Value {
    let shown = platform
        .run_as(dev, &["show", workspace, "--output", "json"], None)
        .ok()
        .json();
    shown["latest_build"]["daily_cost"].clone()
}

fn quotas_refuse_before_apply(database_url: Option<&str>) {
    require_terraform();
    let platform = Platform::start_with_metrics(database_url, &["--quota-enforce"]);
    platform.login_owner();
    let dev = platform.login_new_user("dev", "member");

    // Bad allowances: one line, non-zero, nothing changed.
    platform
        .run(&["groups", "create", "payers", "--quota-allowance", "10"])
        .ok();
    platform
        .run(&["groups", "edit", "payers", "--quota-allowance=-1"])
        .fails_with(1, &["quota"]);
    platform
        .run(&["groups", "edit", "nope", "--quota-allowance", "5"])
        .fails_with(1, &["not found"]);
    platform
        .run(&["groups", "members", "add", "payers", "dev"])
        .ok();

    let ledger = platform.outside().join("ledger");
    let template = platform.root().join("costs");
    copy_dir(&fixture("quota-costs"), &template);
    let main = template.join("main.tf");
    let text = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, text.replace("LEDGER", ledger.to_str().unwrap())).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "costs",
            "--directory",
            template.to_str().unwrap(),
        ])
        .ok();

    for name in ["one", "two"] {
        platform
            .run_as(&dev, &["create", name, "--template", "costs"], None)
            .ok();
        assert_eq!(daily_cost(&platform, &dev, name), 5, "{name}");
    }
    let log = platform
        .run_as(&dev, &["builds", "logs", "one", "1"], None)
        .ok();
    assert!(
        log.stdout.contains("daily cost: 5 a day")
            && log
                .stdout
                .contains("abode_metadata.compute[0] for terraform_data.compute[0]: 4")
            && log
                .stdout
                .contains("abode_metadata.home for abode_volume.home: 1"),
        "{log}"
    );
    assert_eq!(ledger_lines(&ledger), ["create one", "create two"]);

    // The third does not fit: refused after its plan, nothing applied.
    let refused = platform
        .run_as(&dev, &["create", "three", "--template", "costs"], None)
        .fails_with(
            5,
            &[
                "refused by quota",
                "three would cost 5 a day",
                "uses 10 of a budget of 10 (0 remain)",
            ],
        );
    let breakdown = format!("{}{}", refused.stdout, refused.stderr);
    for line in [
        "workspace one (build #1): 5 a day",
        "workspace two (build #1): 5 a day",
        "group Everyone: allows 0 a day",
        "group payers: allows 10 a day",
    ] {
        assert!(breakdown.contains(line), "missing {line:?}:\n{refused}");
    }
    assert_eq!(ledger_lines(&ledger), ["create one", "create two"]);
    let shown = platform
        .run_as(&dev, &["show", "three", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(shown["latest_build"]["refusal"], "quota", "{shown}");
    assert_eq!(shown["latest_build"]["status"], "failed", "{shown}");
    assert!(shown["latest_build"]["daily_cost"].is_null(), "{shown}");

    // How it adds up, for the person and for an owner; not for another member.
    let quota = platform
        .run_as(&dev, &["quota", "show", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(
        quota,
        serde_json::json!({
            "user": "dev", "enforced": true, "budget": 10, "spent": 10, "remaining": 0,
            "groups": [{"name": "Everyone", "allowance": 0}, {"name": "payers", "allowance": 10}],
            "workspaces": [
                {"name": "one", "build_number": 1, "daily_cost": 5, "reserved": false},
                {"name": "two", "build_number": 1, "daily_cost": 5, "reserved": false},
            ],
        })
    );
    let by_owner = platform
        .run(&["quota", "show", "dev", "--output", "json"])
        .ok()
        .json();
    assert_eq!(by_owner, quota);
    let text = platform.run_as(&dev, &["quota", "show"], None).ok().stdout;
    assert!(
        text.contains("dev: 10 of 10 a day used, 0 remain"),
        "{text}"
    );
    platform.login_new_user("eve", "member");
    platform
        .run_as(&dev, &["quota", "show", "eve"], None)
        .fails_with(1, &["may not read other users' quotas"]);

    // A stop is never refused; the volume stays charged.
    platform.run_as(&dev, &["stop", "one"], None).ok();
    assert_eq!(daily_cost(&platform, &dev, "one"), 1);
    assert_eq!(
        ledger_lines(&ledger),
        ["create one", "create two", "destroy one"]
    );
    platform
        .run_as(&dev, &["start", "three"], None)
        .fails_with(5, &["uses 6 of a budget of 10 (4 remain)"]);

    // A delete frees all of it: now the third fits exactly.
    platform.run_as(&dev, &["delete", "one"], None).ok();
    platform.run_as(&dev, &["start", "three"], None).ok();
    assert_eq!(daily_cost(&platform, &dev, "three"), 5);
    assert_eq!(
        ledger_lines(&ledger),
        ["create one", "create two", "destroy one", "create three"]
    );
    // And a fourth is refused again, with the sum it saw.
    platform
        .run_as(&dev, &["create", "four", "--template", "costs"], None)
        .fails_with(5, &["uses 10 of a budget of 10"]);

    let text = platform.run_as(&dev, &["show", "three"], None).ok().stdout;
    assert!(text.contains("Daily cost:  5 (build #"), "{text}");
}
