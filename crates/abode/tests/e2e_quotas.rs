//! Quotas with the real binary, real Terraform and a real database (SQLite,
//! and PostgreSQL in the `_on_postgres` variant), on a server started with
//! `--quota-enforce`: a template whose compute costs 4 a day and volume 1;
//! a member whose group allows 10. A create's estimate (the template's
//! import plan with its values) says what it would cost before anything is
//! queued, on the CLI and the dashboard. Two workspaces run (5 + 5); a third
//! create is refused before any apply (the ledger its compute writes to
//! stays without it; the CLI estimated it first, so no Terraform ran for
//! it), with the breakdown in its log, one CLI line and exit status 5. Stopping one keeps its volume charged
//! (1 + 5 + 5 = 11 > 10: still refused, the arithmetic in the line);
//! deleting it frees all (5 + 5 = 10) and the third starts. Bad allowances
//! are one line and a non-zero status. Raising a running workspace's cost
//! (a parameter, a version) past the budget is refused the same way, and
//! `abode_quota_refusals_total{reason="quota"}` counts every refusal.
//!
//! Two CLIs starting two workspaces of one person at the same moment, each
//! start fitting the budget alone but not together: exactly one starts,
//! twenty rounds in a row.
//!
//! Prebuilds under a budget: a claim by a member without room is refused
//! exactly like a create (exit status 5, the same line; here before
//! anything is built, the pool's last plan making the cost clear) and the
//! pool keeps its prebuilt workspace for the next claimer, who gets that
//! very one. A pool builds only what the `prebuilds` budget allows, says
//! so, and tells template admins once per episode. The dashboard's list
//! shows each workspace's cost and what remains.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

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

/// The dashboard's workspace list as `username`: its HTML.
fn dashboard_list(platform: &Platform, username: &str) -> String {
    let password = format!("{username}-password");
    platform.dashboard_page(username, &password, "/workspaces")
}

/// The text of the cell of the daily cost in the row of `workspace`.
fn dashboard_cost(page: &str, workspace: &str) -> String {
    let row = page
        .split("<tr>")
        .find(|row| row.contains(&format!(">{workspace}</a>")))
        .unwrap_or_else(|| panic!("no row of {workspace} in {page}"));
    let cell = row
        .split("<td class=\"cost\">")
        .nth(1)
        .expect("a cost cell");
    let cell = &cell[..cell.find("</td>").unwrap()];
    let mut text = String::new();
    let mut inside = false;
    for c in cell.chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => text.push(c),
            _ => {}
        }
    }
    text.trim().to_string()
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

    // Before anything is queued: what a create would cost (the template's
    // import plan with its values) and whether it fits; nothing is created.
    let estimate = platform
        .run_as(
            &dev,
            &[
                "create",
                "one",
                "-t",
                "costs",
                "--estimate",
                "--output",
                "json",
            ],
            None,
        )
        .ok()
        .json();
    assert_eq!(
        (
            &estimate["daily_cost"],
            &estimate["source"],
            &estimate["fits"],
            &estimate["budget"],
            &estimate["spent"],
            &estimate["remaining"],
        ),
        (
            &serde_json::json!(5),
            &serde_json::json!("import_plan"),
            &serde_json::json!(true),
            &serde_json::json!(10),
            &serde_json::json!(0),
            &serde_json::json!(10),
        ),
        "{estimate}"
    );
    assert_eq!(estimate["items"].as_array().unwrap().len(), 2, "{estimate}");
    let dearer = platform
        .run_as(
            &dev,
            &[
                "create",
                "one",
                "-t",
                "costs",
                "--estimate",
                "-p",
                "compute_cost=20",
            ],
            None,
        )
        .fails_with(5, &["would be refused by quota", "would cost 21 a day"]);
    assert!(
        dearer
            .stdout
            .contains("Estimated daily cost of one: 21 a day")
            && dearer.stdout.contains("It does not fit"),
        "{dearer}"
    );
    // Wrong input is one line, before any plan.
    platform
        .run_as(
            &dev,
            &[
                "create",
                "one",
                "-t",
                "costs",
                "--estimate",
                "-p",
                "compute_cost=lots",
            ],
            None,
        )
        .fails_with(1, &["compute_cost"]);
    platform
        .run_as(&dev, &["create", "one", "-t", "nope", "--estimate"], None)
        .fails_with(1, &["not found"]);
    platform
        .run_as(&dev, &["show", "one"], None)
        .fails_with(1, &["not found"]);
    assert!(ledger_lines(&ledger).is_empty());

    for name in ["one", "two"] {
        let created = platform
            .run_as(&dev, &["create", name, "--template", "costs"], None)
            .ok();
        assert!(
            created
                .stderr
                .contains(&format!("Estimated daily cost of {name}: 5 a day")),
            "{created}"
        );
        assert_eq!(daily_cost(&platform, &dev, name), 5, "{name}");
    }
    let log = platform
        .run_as(&dev, &["builds", "logs", "one", "1"], None)
        .ok();
    assert!(
        log.stdout.contains("[plan]")
            && log.stdout.contains("daily cost: 5 a day")
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
    // The CLI estimated it first, so it was refused before any Terraform
    // ran for it: the estimate is its log's first word on cost.
    let log = platform
        .run_as(&dev, &["builds", "logs", "three", "1"], None)
        .ok()
        .stdout;
    assert!(
        log.contains("estimated daily cost: 5 a day") && !log.contains("[plan]"),
        "{log}"
    );
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

    // The dashboard's list says the same: each workspace's cost and what
    // remains (the refused one costs nothing).
    let page = dashboard_list(&platform, "dev");
    assert!(
        page.contains("Your budget: 10 of 10 a day used, 0 remain"),
        "{page}"
    );
    assert_eq!(dashboard_cost(&page, "one"), "5");
    assert_eq!(dashboard_cost(&page, "two"), "5");
    assert_eq!(dashboard_cost(&page, "three"), "–");

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

    // The dashboard's create page estimates the form's values on request.
    let (status, page) = platform.dashboard_submit(
        "dev",
        "dev-password",
        "/workspaces/new?template=costs",
        "/workspaces/new",
        &[
            ("template", "costs"),
            ("name", ""),
            ("parameter.compute_cost", "2"),
            ("intent", "estimate"),
        ],
    );
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Estimated daily cost: <strong>3</strong> a day")
            && page.contains("Your budget: 10 of 10 a day used, 0 remain")
            && page.contains("It does not fit your budget"),
        "{page}"
    );
    platform
        .run_as(&dev, &["show", "five"], None)
        .fails_with(1, &["not found"]);
}

/// Reconcile every second: the prebuild tests wait for builds, not for a
/// minute-long interval.
const FAST: &[&str] = &[
    "--quota-enforce",
    "--prebuilds-reconcile-interval",
    "1",
    "--prebuilds-backoff",
    "1",
    "--metrics-refresh-interval",
    "1",
];

/// The pool of `preset`, from `abode prebuilds status -o json`.
fn pool(platform: &Platform, preset: &str) -> serde_json::Value {
    let pools = platform
        .run(&["prebuilds", "status", "--output", "json"])
        .ok()
        .json();
    pools
        .as_array()
        .unwrap()
        .iter()
        .find(|pool| pool["preset"] == preset)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// Polls the pool of `preset` until `done` holds; panics with the last
/// status and the server's log after three minutes.
fn wait_for_pool(
    platform: &Platform,
    preset: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let pool = pool(platform, preset);
        if done(&pool) {
            return pool;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pool of {preset} never got {what}; last: {pool:#}\nserver log:\n{}",
            platform.server_log()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The prebuilt workspaces (owned by `prebuilds`), by id.
fn prebuild_ids(platform: &Platform) -> Vec<String> {
    let listed = platform
        .run(&["list", "--all", "--owner", "prebuilds", "--output", "json"])
        .ok()
        .json();
    let mut ids: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|workspace| workspace["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The quota-costs template with a preset `small` whose pool keeps
/// `instances` prebuilt workspaces, pushed as `costs`; the ledger its
/// compute writes to.
fn push_pooled_costs(platform: &Platform, instances: u32) -> std::path::PathBuf {
    let ledger = platform.outside().join("ledger");
    let template = platform.root().join("costs");
    copy_dir(&fixture("quota-costs"), &template);
    let main = template.join("main.tf");
    let text = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, text.replace("LEDGER", ledger.to_str().unwrap())).unwrap();
    std::fs::write(
        template.join("presets.tf"),
        format!(
            "data \"abode_workspace_preset\" \"small\" {{\n  name = \"small\"\n  prebuilds {{\n    instances = {instances}\n  }}\n}}\n"
        ),
    )
    .unwrap();
    platform
        .run(&[
            "templates",
            "push",
            "costs",
            "--directory",
            template.to_str().unwrap(),
        ])
        .ok();
    ledger
}

#[test]
fn a_claim_without_room_is_refused_like_a_create_and_the_pool_keeps_its_prebuild() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, FAST);
    platform.login_owner();
    let dev = platform.login_new_user("dev", "member");
    // The pool's budget: one prebuild (5 a day); dev's: one workspace.
    platform
        .run(&["groups", "create", "pool", "--quota-allowance", "5"])
        .ok();
    platform
        .run(&["groups", "members", "add", "pool", "prebuilds"])
        .ok();
    platform
        .run(&["groups", "create", "payers", "--quota-allowance", "5"])
        .ok();
    platform
        .run(&["groups", "members", "add", "payers", "dev"])
        .ok();
    let ledger = push_pooled_costs(&platform, 1);
    wait_for_pool(&platform, "small", "1 ready", |pool| {
        pool["ready"] == 1 && pool["in_progress"] == 0
    });
    let first = prebuild_ids(&platform);
    assert_eq!(first.len(), 1, "{first:?}");

    // A create whose values are the preset's claims the ready prebuild
    // (5 of dev's 5; estimated from the pool's last plan, said in its log),
    // and the pool, its budget free again, builds another.
    let created = platform
        .run_as(&dev, &["create", "one", "--template", "costs"], None)
        .ok();
    assert!(
        created.stdout.contains(
            "estimated daily cost: 5 a day (the last prebuild plan of preset \"small\"); \
             dev uses 0 of a budget of 5"
        ),
        "{created}"
    );
    let one = platform
        .run_as(&dev, &["show", "one", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(one["id"], first[0].as_str(), "claimed: {one}");
    wait_for_pool(&platform, "small", "1 ready again", |pool| {
        pool["ready"] == 1 && pool["in_progress"] == 0
    });
    let pooled = prebuild_ids(&platform);
    assert_eq!(pooled.len(), 1, "{pooled:?}");
    assert_ne!(pooled, first);
    let before = ledger_lines(&ledger);
    assert_eq!(before.len(), 2, "{before:?}");

    // dev has no room, and the estimate makes it clear: refused before
    // anything is claimed or built, with a create's exit status and line.
    let refused = platform
        .run_as(
            &dev,
            &["create", "two", "--template", "costs", "--preset", "small"],
            None,
        )
        .fails_with(
            5,
            &[
                "refused by quota",
                "two would cost 5 a day",
                "uses 5 of a budget of 5 (0 remain)",
            ],
        );
    // The CLI says the estimate first, then the refusal's one line.
    let lines: Vec<&str> = refused.stderr.lines().collect();
    assert!(
        refused.stderr.contains("before anything was built")
            && lines.len() == 2
            && lines[0].starts_with(
                "Estimated daily cost of two: 5 a day, as the last prebuild of preset small"
            ),
        "{refused}"
    );
    assert_eq!(ledger_lines(&ledger), before, "nothing was applied");
    assert_eq!(
        prebuild_ids(&platform),
        pooled,
        "the pool kept its prebuild"
    );
    platform
        .run_as(&dev, &["show", "two"], None)
        .fails_with(1, &["not found"]);
    let status = pool(&platform, "small");
    assert_eq!(status["ready"], 1, "{status:#}");
    assert_eq!(
        platform.metric(r#"abode_quota_refusals_total{reason="estimate"}"#),
        1.0
    );

    // With room again, the next claimer takes that very prebuild.
    platform.run_as(&dev, &["delete", "one"], None).ok();
    platform
        .run_as(
            &dev,
            &[
                "create",
                "three",
                "--template",
                "costs",
                "--preset",
                "small",
            ],
            None,
        )
        .ok();
    let shown = platform
        .run_as(&dev, &["show", "three", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(
        shown["id"],
        pooled[0].as_str(),
        "claimed the pool's: {shown}"
    );
    assert_eq!(shown["latest_build"]["reason"], "prebuild_claim", "{shown}");
}

/// The owner's messages of `kind` (the owner is a template admin).
fn messages(platform: &Platform, kind: &str) -> Vec<serde_json::Value> {
    let listed = platform
        .run(&["notifications", "list", "--output", "json"])
        .ok()
        .json();
    listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["kind"] == kind)
        .cloned()
        .collect()
}

/// Polls a series until it reads `value` (the gauges are refreshed every
/// second).
fn wait_for_metric(platform: &Platform, series: &str, value: f64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while platform.metric(series) != value {
        assert!(
            std::time::Instant::now() < deadline,
            "{series} never read {value}:\n{}",
            platform.scrape()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A pool of 3 prebuilds of 5 a day under a `prebuilds` budget of 10:
/// exactly two are built (the first tells the pool's cost, the second
/// fits, the third does not), the pool says `quota_limited` in text, JSON
/// and its gauge, and template admins are told once, however many rounds
/// the reconciler runs. Raising the allowance builds the third and tells
/// the recovery once.
#[test]
fn a_pool_builds_only_what_the_prebuilds_budget_allows_and_tells_admins_once() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, FAST);
    platform.login_owner();
    platform
        .run(&["groups", "create", "pool", "--quota-allowance", "10"])
        .ok();
    platform
        .run(&["groups", "members", "add", "pool", "prebuilds"])
        .ok();
    let ledger = push_pooled_costs(&platform, 3);

    let limited = wait_for_pool(&platform, "small", "2 running, quota-limited", |pool| {
        pool["running"] == 2 && pool["in_progress"] == 0 && pool["quota_limited"] == true
    });
    assert_eq!(limited["desired"], 3, "{limited:#}");
    assert_eq!(limited["estimated_cost"], 5, "{limited:#}");
    // More rounds of the reconciler, seen to run, build nothing more and
    // tell nothing more.
    platform.wait_for_passes("prebuilds", 3);
    platform.wait_for_passes("notifications", 2);
    assert_eq!(prebuild_ids(&platform).len(), 2);
    let created: Vec<String> = ledger_lines(&ledger)
        .into_iter()
        .filter(|line| line.starts_with("create "))
        .collect();
    assert_eq!(created.len(), 2, "{created:?}");
    let still = pool(&platform, "small");
    assert_eq!(
        (
            &still["running"],
            &still["in_progress"],
            &still["quota_limited"]
        ),
        (&2.into(), &0.into(), &true.into()),
        "{still:#}"
    );
    assert_eq!(still["consecutive_failures"], 0, "{still:#}");
    let text = platform.run(&["prebuilds", "status"]).ok().stdout;
    assert!(
        text.contains("quota_limited (prebuilds budget, 5 a day each)"),
        "{text}"
    );
    let series =
        r#"abode_prebuilt_workspaces_quota_limited{template_name="costs",preset_name="small"}"#;
    wait_for_metric(&platform, series, 1.0);
    let told = messages(&platform, "preset_quota_limited");
    assert_eq!(told.len(), 1, "{told:#?}");
    assert_eq!(told[0]["payload"]["template"], "costs");
    assert_eq!(told[0]["payload"]["preset"], "small");
    assert_eq!(told[0]["payload"]["daily_cost"], 5);
    assert!(messages(&platform, "preset_quota_recovered").is_empty());
    let budget = platform
        .run(&["quota", "show", "prebuilds", "--output", "json"])
        .ok()
        .json();
    assert_eq!(
        (&budget["budget"], &budget["spent"]),
        (&10.into(), &10.into()),
        "{budget}"
    );

    // Room for the third: it is built, and the recovery told once.
    platform
        .run(&["groups", "edit", "pool", "--quota-allowance", "15"])
        .ok();
    wait_for_pool(&platform, "small", "3 running", |pool| {
        pool["running"] == 3 && pool["in_progress"] == 0 && pool["quota_limited"] == false
    });
    platform.wait_for_passes("prebuilds", 3);
    platform.wait_for_passes("notifications", 2);
    assert_eq!(prebuild_ids(&platform).len(), 3);
    wait_for_metric(&platform, series, 0.0);
    assert_eq!(messages(&platform, "preset_quota_limited").len(), 1);
    let recovered = messages(&platform, "preset_quota_recovered");
    assert_eq!(recovered.len(), 1, "{recovered:#?}");
    assert_eq!(recovered[0]["payload"]["preset"], "small");
}

/// Two starts of one person's workspaces, each fitting the budget alone
/// but not together, asked at the same moment by two CLIs on a server with
/// three provisioner workers (the plans run side by side): exactly one
/// starts and the other is refused by quota, every round.
#[test]
fn two_concurrent_starts_that_fit_only_alone_let_exactly_one_through() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--quota-enforce"]);
    platform.login_owner();
    let racer = platform.login_new_user("racer", "member");
    platform
        .run(&["groups", "create", "racers", "--quota-allowance", "10"])
        .ok();
    platform
        .run(&["groups", "members", "add", "racers", "racer"])
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
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    for name in ["a", "b"] {
        platform
            .run_as(&racer, &["create", name, "--template", "costs"], None)
            .ok();
        platform.run_as(&racer, &["stop", name], None).ok();
    }
    // Stopped, each costs its volume (1); started, 5. With 6: one start fits.
    platform
        .run(&["groups", "edit", "racers", "--quota-allowance", "6"])
        .ok();
    for round in 1..=20 {
        let starts: Vec<std::process::Child> = ["a", "b"]
            .iter()
            .map(|name| {
                platform
                    .cmd_as(&racer, &["start", name])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let codes: Vec<Option<i32>> = starts
            .into_iter()
            .map(|mut child| child.wait().unwrap().code())
            .collect();
        let started: Vec<&str> = ["a", "b"]
            .into_iter()
            .zip(&codes)
            .filter(|(_, code)| **code == Some(0))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(started.len(), 1, "round {round}: exit statuses {codes:?}");
        assert!(codes.contains(&Some(5)), "round {round}: {codes:?}");
        let quota = platform
            .run_as(&racer, &["quota", "show", "--output", "json"], None)
            .ok()
            .json();
        assert_eq!(quota["spent"], 6, "round {round}: {quota}");
        platform.run_as(&racer, &["stop", started[0]], None).ok();
    }
}
