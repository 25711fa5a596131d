//! `terraform-provider-abode`: the abode Terraform provider alone, the file the
//! provider mirror holds.
//!
//! Terraform hashes the provider's whole executable against the lock file at
//! every command, and starts it several times per build: this binary links the
//! provider crate only (no server, no CLI), so there is less to hash and load
//! than in `abode`. `abode provider install` and `abode server` install it when it
//! sits beside `abode`.

use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(argument) = std::env::args().nth(1) {
        if argument == "--version" || argument == "-V" {
            println!("terraform-provider-abode {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "error: terraform-provider-abode takes no arguments; Terraform starts it (run `abode provider install`)"
        );
        return ExitCode::from(2);
    }
    match abode_provider::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
