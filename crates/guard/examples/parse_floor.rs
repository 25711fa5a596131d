//! The parse floor of the plan-check benchmark (benches/plan-check): the least work
//! any JSON plan reader must do, a bare `serde_json` pass over the same bytes that
//! builds nothing. `abode plan check` is compared against it to show how much of its
//! time is reading JSON at all and how much is the guard.
//!
//! Usage: `cargo run --release -p abode-guard --example parse_floor -- PLAN.json`

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: parse_floor PLAN.json");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!(
                "parse_floor: cannot read {}: {error}",
                path.to_string_lossy()
            );
            return ExitCode::FAILURE;
        }
    };
    match serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!(
                "parse_floor: {} is not JSON: {error}",
                path.to_string_lossy()
            );
            ExitCode::FAILURE
        }
    }
}
