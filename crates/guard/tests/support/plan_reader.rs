// What the fuzz target `fuzz/fuzz_targets/plan_reader.rs` does with one
// input, included by it and by `tests/fuzz_corpus.rs` (which runs it over
// the seed corpus in every `cargo test`), so that the two cannot drift
// apart and the target's code cannot rot unbuilt.

use abode_guard::{Address, Mode, Origin, Rule, BuildIntent};

/// Reads `data` as a plan and, when it is one, decides and renders it: the
/// plan reader must reject any input with an error, and nothing downstream
/// of a successful read may panic.
pub fn check_plan_reader(data: &[u8]) {
    let Ok(plan) = abode_guard::read_plan_slice(data) else {
        return;
    };

    // What the command does with no caller rules: annotations only.
    let report = abode_guard::evaluate(&plan, BuildIntent::Start, &[]);
    let _ = abode_guard::render_text(&report, false);
    let _ = report.to_json();

    // Protect everything the plan mentions, so that the protected-change paths
    // (reasons, replace_paths, drift, redaction) see fuzzed data too.
    let mut rules = Vec::new();
    for change in &plan.changes {
        rules.push(Rule::resource_type(
            &change.resource_type,
            Mode::Confirm,
            Origin::Caller,
        ));
        if let Ok(address) = Address::parse(&change.address) {
            rules.push(Rule::address(address, Mode::Block, Origin::Caller));
        }
    }
    for transition in [BuildIntent::Stop, BuildIntent::Delete] {
        let report = abode_guard::evaluate(&plan, transition, &rules);
        let _ = abode_guard::render_text(&report, true);
        let _ = report.to_json();
    }
}
