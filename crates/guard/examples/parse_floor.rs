//! The parse floor of the plan-check benchmark (benches/plan-check): the least work
//! any JSON plan reader must do, a bare `serde_json` pass over the same bytes that
//! builds nothing. `abode plan check` is compared against it to show how much of its
//! time is reading JSON at all and how much is the guard.
//!
//! By default the file is read into memory first (`serde_json::from_slice`, the
//! fastest pass). With `--stream` it is read through a buffered reader
//! (`serde_json::from_reader`), the floor of a reader whose memory must stay below
//! the file's size.
//!
//! Usage: `cargo run --release -p abode-guard --example parse_floor -- [--stream] PLAN.json`

use std::io::BufReader;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut stream = false;
    let mut path = None;
    for arg in std::env::args_os().skip(1) {
        if arg == "--stream" {
            stream = true;
        } else {
            path = Some(arg);
        }
    }
    let Some(path) = path else {
        eprintln!("usage: parse_floor [--stream] PLAN.json");
        return ExitCode::from(2);
    };
    let shown = path.to_string_lossy().into_owned();
    let parsed = if stream {
        match std::fs::File::open(&path) {
            Ok(file) => serde_json::from_reader::<_, serde::de::IgnoredAny>(
                BufReader::with_capacity(256 * 1024, file),
            ),
            Err(error) => {
                eprintln!("parse_floor: cannot open {shown}: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<serde::de::IgnoredAny>(&bytes),
            Err(error) => {
                eprintln!("parse_floor: cannot read {shown}: {error}");
                return ExitCode::FAILURE;
            }
        }
    };
    match parsed {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("parse_floor: {shown} is not JSON: {error}");
            ExitCode::FAILURE
        }
    }
}
