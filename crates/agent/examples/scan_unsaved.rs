//! For benches/unsaved-scan.sh: the agent's scan for unsaved work
//! (`abode_agent::unsaved::scan`, its default limits) of HOME, ROUNDS
//! times. Prints one line per round, `seconds repositories_scanned
//! with_unsaved truncated`, nothing else.
//!
//! Usage: scan_unsaved HOME ROUNDS
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Instant;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(home), Some(rounds)) = (args.next(), args.next()) else {
        eprintln!("usage: scan_unsaved HOME ROUNDS");
        return std::process::ExitCode::from(2);
    };
    let Ok(rounds) = rounds.parse::<usize>() else {
        eprintln!("scan_unsaved: ROUNDS {rounds:?} is not a number");
        return std::process::ExitCode::from(2);
    };
    let home = PathBuf::from(home);
    for _ in 0..rounds {
        let started = Instant::now();
        let report = abode_agent::unsaved::scan(&home, abode_agent::unsaved::Limits::default());
        println!(
            "{:.4} {} {} {}",
            started.elapsed().as_secs_f64(),
            report.repositories_scanned,
            report.repositories.len(),
            report.truncated
        );
    }
    std::process::ExitCode::SUCCESS
}
