//! Fuzzes the guard from raw bytes to rendered report: the plan reader must reject any
//! input with an error, and nothing downstream of a successful read may panic.
//!
//! The work on one input lives beside the guard's tests, which run it over the seed
//! corpus on every `cargo test` (`crates/guard/tests/fuzz_corpus.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../crates/guard/tests/support/plan_reader.rs");

fuzz_target!(|data: &[u8]| check_plan_reader(data));
