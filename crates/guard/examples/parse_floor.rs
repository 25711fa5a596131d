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
//! With `--filtered` it measures a third design instead: a byte scanner reads the
//! file in chunks and drops the values of `planned_values` and `prior_state` (about
//! half of a plan's bytes, which the guard never reads), then the rest is parsed from
//! memory. It shows what a low-memory reader could cost if it did not go through
//! `from_reader`.
//!
//! Usage: `cargo run --release -p abode-guard --example parse_floor -- [--stream|--filtered] PLAN.json`

use std::io::{BufRead, BufReader, Read};
use std::process::ExitCode;

#[derive(PartialEq)]
enum Pass {
    InMemory,
    Stream,
    Filtered,
}

fn main() -> ExitCode {
    let mut pass = Pass::InMemory;
    let mut path = None;
    for arg in std::env::args_os().skip(1) {
        if arg == "--stream" {
            pass = Pass::Stream;
        } else if arg == "--filtered" {
            pass = Pass::Filtered;
        } else {
            path = Some(arg);
        }
    }
    let Some(path) = path else {
        eprintln!("usage: parse_floor [--stream|--filtered] PLAN.json");
        return ExitCode::from(2);
    };
    let shown = path.to_string_lossy().into_owned();
    let parsed = if pass == Pass::Filtered {
        let filtered = std::fs::File::open(&path)
            .and_then(|file| without_members(file, &[b"planned_values", b"prior_state"]));
        match filtered {
            Ok(bytes) => serde_json::from_slice::<serde::de::IgnoredAny>(&bytes),
            Err(error) => {
                eprintln!("parse_floor: cannot read {shown}: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else if pass == Pass::Stream {
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

/// Copies a JSON document, replacing the values of the named top-level members with
/// `null`, reading the input in chunks so that the skipped bytes are never held.
/// Only a measurement aid: it trusts the input's structure (serde checks the rest).
fn without_members(input: impl Read, skip: &[&[u8]]) -> std::io::Result<Vec<u8>> {
    let mut reader = BufReader::with_capacity(1024 * 1024, input);
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut expecting_key = false;
    let mut key = Vec::new();
    let mut capturing_key = false;
    let mut skipping = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        let len = chunk.len();
        let mut start = 0;
        let mut i = 0;
        while i < len {
            let byte = chunk[i];
            if in_string {
                if escaped {
                    escaped = false;
                } else if byte == b'\\' {
                    escaped = true;
                } else if byte == b'"' {
                    in_string = false;
                    if capturing_key {
                        capturing_key = false;
                    }
                } else if capturing_key {
                    key.push(byte);
                }
                i += 1;
                continue;
            }
            match byte {
                b'"' => {
                    in_string = true;
                    if depth == 1 && expecting_key {
                        expecting_key = false;
                        capturing_key = true;
                        key.clear();
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth == 1 && byte == b'{' {
                        expecting_key = true;
                    }
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && skipping {
                        skipping = false;
                        start = i;
                    }
                }
                b',' if depth == 1 => {
                    expecting_key = true;
                    if skipping {
                        skipping = false;
                        start = i;
                    }
                }
                b':' if depth == 1 && skip.contains(&key.as_slice()) => {
                    out.extend_from_slice(&chunk[start..=i]);
                    out.extend_from_slice(b"null");
                    skipping = true;
                }
                _ => {}
            }
            i += 1;
        }
        if !skipping {
            out.extend_from_slice(&chunk[start..]);
        }
        reader.consume(len);
    }
    Ok(out)
}
