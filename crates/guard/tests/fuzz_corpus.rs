//! The fuzz target's work (`fuzz/fuzz_targets/plan_reader.rs`) over its seed
//! corpus, as `fuzz/seed.sh` gathers it: every fixture plan and every
//! invalid input, one file each. A normal test, so that what the fuzzer
//! runs is built and run on every `cargo test`, not only when someone
//! fuzzes. (What a fuzzing run adds to `fuzz/corpus/plan_reader` is not in
//! git, and not run here.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

include!("support/plan_reader.rs");

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
}

/// The seed files `fuzz/seed.sh` copies into the corpus.
fn seeds() -> Vec<PathBuf> {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut seeds: Vec<PathBuf> = files_in(&tests.join("fixtures"))
        .into_iter()
        .map(|fixture| fixture.join("plan.json"))
        .filter(|plan| plan.is_file())
        .collect();
    seeds.extend(files_in(&tests.join("invalid")).into_iter().filter(|bad| {
        let name = bad.file_name().unwrap().to_string_lossy();
        !name.ends_with(".sh") && name != "README"
    }));
    seeds
}

#[test]
fn the_fuzz_target_runs_over_every_seed_without_a_panic() {
    let seeds = seeds();
    // Thirty-odd fixture plans and a dozen invalid inputs: a reader that
    // found none would prove nothing.
    assert!(seeds.len() >= 40, "only {} seeds", seeds.len());
    let mut accepted = 0;
    for seed in &seeds {
        let data = fs::read(seed).unwrap();
        if abode_guard::read_plan_slice(&data).is_ok() {
            accepted += 1;
        }
        check_plan_reader(&data);
    }
    assert!(accepted >= 30, "only {accepted} seeds read as plans");
}
