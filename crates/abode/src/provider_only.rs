//! `terraform-provider-abode`: the abode Terraform provider alone, the file the
//! provider mirror holds.
//!
//! Terraform hashes the provider's whole executable against the lock file at
//! every command, and starts it several times per build: this binary links the
//! provider crate only (no server, no CLI), so there is less to hash and load
//! than in `abode`. `abode provider install` and `abode server` install it when it
//! sits beside `abode`. With `--launch-terraform` it runs a Terraform command
//! served by one provider process (`abode_provider::launch`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args
        .first()
        .is_some_and(|first| first == abode_provider::launch::LAUNCH_FLAG)
    {
        return abode_provider::launch::main(&args[1..]);
    }
    if let Some(argument) = args.first() {
        if argument == "--version" || argument == "-V" {
            println!("terraform-provider-abode {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "error: terraform-provider-abode takes no arguments but {} TERRAFORM [ARGS...]; Terraform starts it (run `abode provider install`)",
            abode_provider::launch::LAUNCH_FLAG
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
