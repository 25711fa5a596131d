//! Fuzzes the guard from raw bytes to rendered report: the plan reader must reject any
//! input with an error, and nothing downstream of a successful read may panic.
#![no_main]

use abode_guard::{Address, Mode, Origin, Rule, Transition};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(plan) = abode_guard::read_plan_slice(data) else {
        return;
    };

    // What the command does with no caller rules: annotations only.
    let report = abode_guard::evaluate(&plan, Transition::Start, &[]);
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
    for transition in [Transition::Stop, Transition::Delete] {
        let report = abode_guard::evaluate(&plan, transition, &rules);
        let _ = abode_guard::render_text(&report, true);
        let _ = report.to_json();
    }
});
