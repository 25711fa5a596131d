//! The guard's behaviour, driven by data: every folder in `tests/fixtures` holds a
//! plan (`plan.json`, real Terraform output unless its README says otherwise), the
//! rules to check it with (`check-args`, the same flags as `abode plan check`), and
//! the expected reports (`expected.txt`, `expected.json`), and optionally the
//! decisions the same plan and rules get in other builds (`other-transitions`,
//! which may also name who asks: a person or the system).
//!
//! `UPDATE_EXPECT=1 cargo test -p abode-guard --test fixtures` rewrites the
//! snapshots; review the diff before committing it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{Address, BuildIntent, Decision, Initiator, Mode, Origin, Rule};
use std::path::{Path, PathBuf};

/// Marker that every fixture secret contains; it must never reach any output.
const SECRET_MARKER: &str = "s3cr3t";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn parse_check_args(text: &str) -> (BuildIntent, Initiator, Vec<Rule>) {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut transition = BuildIntent::Start;
    let mut initiator = Initiator::Person;
    let mut mode = Mode::Confirm;
    let mut addresses = Vec::new();
    let mut types = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let value = words.get(i + 1).copied().unwrap_or_default();
        match words[i] {
            "--transition" => transition = BuildIntent::parse(value).expect("transition"),
            "--initiator" => initiator = Initiator::parse(value).expect("initiator"),
            "--mode" => mode = Mode::parse(value).expect("mode"),
            "--protect" => addresses.push(Address::parse(value).expect("address")),
            "--protect-type" => types.push(value.to_string()),
            other => panic!("unknown check-args word {other}"),
        }
        i += 2;
    }
    let mut rules: Vec<Rule> = addresses
        .into_iter()
        .map(|a| Rule::address(a, mode, Origin::Caller))
        .collect();
    rules.extend(
        types
            .iter()
            .map(|t| Rule::resource_type(t, mode, Origin::Caller)),
    );
    (transition, initiator, rules)
}

/// Every 6-character piece of the string values of the plan's sensitive root
/// variables, as written raw, escaped once (a rendered value) and escaped twice
/// (a rendered value inside the JSON report). Read straight from the plan's
/// JSON, not through the guard, so the check does not trust what it checks.
fn sensitive_variable_pieces(plan: &[u8]) -> Vec<String> {
    let plan: serde_json::Value = serde_json::from_slice(plan).unwrap();
    let declared = &plan["configuration"]["root_module"]["variables"];
    let mut pieces = Vec::new();
    let Some(variables) = plan["variables"].as_object() else {
        return pieces;
    };
    for (name, variable) in variables {
        let Some(secret) = variable["value"].as_str() else {
            continue;
        };
        if declared[name]["sensitive"] != serde_json::Value::Bool(true) {
            continue;
        }
        let chars: Vec<char> = secret.chars().collect();
        for window in chars.windows(6) {
            let raw: String = window.iter().collect();
            let once = escaped(&raw);
            let twice = escaped(&once);
            pieces.extend([raw, once, twice]);
        }
    }
    pieces
}

/// `text` as it appears inside a JSON string, without the quotes.
fn escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// A reader that hands out at most 7 bytes per call.
struct Trickle<'a>(&'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(7).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// Compares `actual` with the snapshot file, or rewrites it under UPDATE_EXPECT.
fn expect_file(path: &Path, actual: &str) -> Result<(), String> {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, actual).unwrap();
        return Ok(());
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    if expected == actual {
        Ok(())
    } else {
        Err(format!(
            "{} differs (UPDATE_EXPECT=1 to update)\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        ))
    }
}

fn check(case: &Path) -> Result<(), String> {
    let bytes = std::fs::read(case.join("plan.json")).map_err(|e| e.to_string())?;
    let args = std::fs::read_to_string(case.join("check-args")).unwrap_or_default();
    let (transition, initiator, rules) = parse_check_args(&args);
    let plan =
        abode_guard::read_plan_slice(&bytes).map_err(|e| format!("{}: {e}", case.display()))?;
    // Reading in tiny pieces (every chunk boundary inside strings, escapes and
    // numbers) must give the same plan as reading at once.
    let streamed = abode_guard::read_plan(Trickle(&bytes)).map_err(|e| e.to_string())?;
    let report = abode_guard::evaluate_as(&plan, transition, initiator, &rules);
    assert_eq!(
        report,
        abode_guard::evaluate_as(&streamed, transition, initiator, &rules)
    );
    let text = abode_guard::render_text(&report, false);
    let json = report.to_json() + "\n";
    // A stored report is read back as the type: it must read as it was.
    let read_back: abode_guard::Report =
        serde_json::from_str(&json).map_err(|e| format!("{}: {e}", case.display()))?;
    assert_eq!(read_back, report, "{}", case.display());
    for output in [&text, &json] {
        if output.contains(SECRET_MARKER) {
            return Err(format!(
                "{}: a secret reached the output:\n{output}",
                case.display()
            ));
        }
        if let Some(piece) = sensitive_variable_pieces(&bytes)
            .into_iter()
            .find(|piece| output.contains(piece.as_str()))
        {
            return Err(format!(
                "{}: {piece:?}, part of a sensitive variable's value, reached the output:\n{output}",
                case.display()
            ));
        }
    }
    check_other_transitions(case, &plan, &rules)?;
    expect_file(&case.join("expected.txt"), &text)?;
    expect_file(&case.join("expected.json"), &json)
}

/// `other-transitions`: one `TRANSITION [INITIATOR] DECISION` a line, the
/// decision the same plan and rules get in another build (a claim's plan in a
/// `start` build, a delete the system started: `delete system confirm`). A line
/// without an initiator is a person's build, whatever `check-args` says.
fn check_other_transitions(
    case: &Path,
    plan: &abode_guard::Plan,
    rules: &[Rule],
) -> Result<(), String> {
    let Ok(text) = std::fs::read_to_string(case.join("other-transitions")) else {
        return Ok(());
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (transition, initiator, decision) = match words.as_slice() {
            [transition, decision] => (transition, "person", decision),
            [transition, initiator, decision] => (transition, *initiator, decision),
            _ => panic!("{}: bad other-transitions line {line:?}", case.display()),
        };
        let transition = BuildIntent::parse(transition).expect("transition");
        let initiator = Initiator::parse(initiator).expect("initiator");
        let want = Decision::parse(decision).expect("decision");
        let got = abode_guard::evaluate_as(plan, transition, initiator, rules).decision;
        if got != want {
            return Err(format!(
                "{}: a {transition} build of the same plan asked for by the {initiator} decides {}, other-transitions says {}",
                case.display(),
                got.as_str(),
                want.as_str()
            ));
        }
    }
    Ok(())
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures_dir().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("plan.json").exists())
        .collect();
    cases.sort();
    cases
}

/// A claim build of any fixture plan allows it and lists exactly what a `start`
/// build of it would hold or list as destroyed, plus protected resources re-created
/// after drift, each marked protected as the `start` build judged it.
#[test]
fn a_claim_allows_and_lists_what_a_start_build_judges() {
    for case in cases() {
        let bytes = std::fs::read(case.join("plan.json")).unwrap();
        let args = std::fs::read_to_string(case.join("check-args")).unwrap_or_default();
        let (_, _, rules) = parse_check_args(&args);
        let plan = abode_guard::read_plan_slice(&bytes).unwrap();
        let start = abode_guard::evaluate(&plan, BuildIntent::Start, &rules);
        let claim = abode_guard::evaluate(&plan, BuildIntent::Claim, &rules);
        let name = case.display();
        assert_eq!(claim.decision, Decision::Allow, "{name}");
        assert!(claim.protected_changes.is_empty(), "{name}");
        assert!(claim.unprotected_destroys.is_empty(), "{name}");
        assert!(start.claim_replacements.is_empty(), "{name}");
        let mut want: Vec<(String, bool, Vec<String>)> = start
            .protected_changes
            .iter()
            .map(|c| {
                let paths = c.replace_paths.iter().map(|p| p.path.clone()).collect();
                (c.address.clone(), true, paths)
            })
            .chain(start.unprotected_destroys.iter().map(|c| {
                let paths = plan
                    .changes
                    .iter()
                    .find(|p| p.address == c.address)
                    .map(|p| p.replace_paths.iter().map(|a| a.path.clone()).collect())
                    .unwrap_or_default();
                (c.address.clone(), false, paths)
            }))
            .collect();
        let mut got: Vec<(String, bool, Vec<String>)> = claim
            .claim_replacements
            .iter()
            .filter(|c| c.protected || c.action != abode_guard::Action::Create)
            .map(|c| (c.address.clone(), c.protected, c.replace_paths.clone()))
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{name}");
        let text = abode_guard::render_text(&claim, false);
        for change in &claim.claim_replacements {
            assert!(text.contains(&change.line()), "{name}: {}", change.line());
        }
        assert_eq!(claim.summary, start.summary, "{name}");
        assert_eq!(claim.warnings, start.warnings, "{name}");
    }
}

/// A delete the system started judges every protected resource of any fixture
/// plan as a `start` build of it does (the rules' mode decides; nothing protected
/// is allowed), lists the same unprotected destroys, and says who asked; the
/// person's delete of the same plan allows it all. Other transitions are judged
/// alike whoever asks.
#[test]
fn a_system_delete_judges_protected_resources_as_a_start_build() {
    for case in cases() {
        let bytes = std::fs::read(case.join("plan.json")).unwrap();
        let args = std::fs::read_to_string(case.join("check-args")).unwrap_or_default();
        let (_, _, rules) = parse_check_args(&args);
        let plan = abode_guard::read_plan_slice(&bytes).unwrap();
        let name = case.display();
        let start = abode_guard::evaluate(&plan, BuildIntent::Start, &rules);
        let person = abode_guard::evaluate(&plan, BuildIntent::Delete, &rules);
        let system =
            abode_guard::evaluate_as(&plan, BuildIntent::Delete, Initiator::System, &rules);
        let outcomes = |report: &abode_guard::Report| -> Vec<(String, Decision)> {
            report
                .protected_changes
                .iter()
                .map(|c| (c.address.clone(), c.outcome))
                .collect()
        };
        assert_eq!(outcomes(&system), outcomes(&start), "{name}");
        assert_eq!(system.decision, start.decision, "{name}");
        assert_eq!(person.decision, Decision::Allow, "{name}");
        let addresses = |report: &abode_guard::Report| -> Vec<String> {
            report
                .protected_changes
                .iter()
                .map(|c| c.address.clone())
                .collect()
        };
        assert_eq!(addresses(&system), addresses(&person), "{name}");
        assert_eq!(
            system.unprotected_destroys, person.unprotected_destroys,
            "{name}"
        );
        assert_eq!(system.initiator, Initiator::System, "{name}");
        assert!(
            system.to_json().contains("\"initiator\": \"system\""),
            "{name}"
        );
        assert!(!person.to_json().contains("\"initiator\""), "{name}");
        for transition in [BuildIntent::Start, BuildIntent::Stop, BuildIntent::Claim] {
            let by_person = abode_guard::evaluate(&plan, transition, &rules);
            let by_system = abode_guard::evaluate_as(&plan, transition, Initiator::System, &rules);
            assert_eq!(
                abode_guard::Report {
                    initiator: Initiator::Person,
                    ..by_system
                },
                by_person,
                "{name}: {transition}"
            );
        }
    }
}

#[test]
fn fixtures() {
    let cases = cases();
    assert!(
        cases.len() >= 20,
        "expected the fixture folders, found {}",
        cases.len()
    );
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn invalid_inputs_are_rejected_with_one_line() {
    let dir = fixtures_dir().join("invalid");
    let mut lines = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !matches!(name.as_ref(), "README" | "regenerate.sh" | "expected.txt")
        })
        .collect();
    names.sort();
    for path in names {
        let bytes = std::fs::read(&path).unwrap();
        let error = match abode_guard::read_plan_slice(&bytes) {
            Ok(_) => panic!("{} was accepted as a plan", path.display()),
            Err(e) => e.to_string(),
        };
        let trickled = abode_guard::read_plan(Trickle(&bytes))
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(trickled, Err(error.clone()), "chunking changed the error");
        assert!(!error.contains('\n'), "multi-line error: {error}");
        lines.push(format!(
            "{}: {error}",
            path.file_name().unwrap().to_string_lossy()
        ));
    }
    expect_file(&dir.join("expected.txt"), &(lines.join("\n") + "\n")).unwrap();
}

/// Plans from another workspace platform's test suite (Terraform 1.3 to
/// 1.16) must all be readable. The corpus is not part of the repository (a
/// lone clone has no `shared/` beside it), so this is a corpus check run on
/// demand: `.ci/run` runs it when `../shared/peer-plans` exists, by hand
/// `ABODE_PEER_PLANS=DIR cargo nextest run -p abode-guard --run-ignored only peer_plans`.
#[test]
#[ignore = "corpus check: needs ABODE_PEER_PLANS (a folder of plan JSON); .ci/run runs it when ../shared/peer-plans exists"]
fn peer_plans_are_readable() {
    let Some(dir) = std::env::var_os("ABODE_PEER_PLANS") else {
        panic!("ABODE_PEER_PLANS is not set: name the folder of peer plans to read");
    };
    let dir = PathBuf::from(dir);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("peer plans not found at {} ({e})", dir.display()));
    let mut read = 0;
    let mut stack: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let plan = abode_guard::read_plan_slice(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let every_type: Vec<Rule> = plan
            .changes
            .iter()
            .map(|c| Rule::resource_type(&c.resource_type, Mode::Block, Origin::Caller))
            .collect();
        for transition in [
            BuildIntent::Start,
            BuildIntent::Stop,
            BuildIntent::Delete,
            BuildIntent::Claim,
        ] {
            for initiator in [Initiator::Person, Initiator::System] {
                let report = abode_guard::evaluate_as(&plan, transition, initiator, &every_type);
                abode_guard::render_text(&report, true);
            }
        }
        read += 1;
    }
    assert!(
        read >= 10,
        "only {read} peer plans found in {}",
        dir.display()
    );
}
