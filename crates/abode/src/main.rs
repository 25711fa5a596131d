//! The `abode` binary: thin glue between the command line and Abode's library crates.
//!
//! One artefact serves every role (CLI, server, agent, Terraform provider) so that
//! installing Abode is copying one file. This file parses the command line and
//! hands each command to `abode-cli`, which turns its flags into calls of the
//! library crates (as ripgrep's binary hands its flags to its crates); the
//! exit statuses are `abode-cli`'s `exit.rs`. `provider_only.rs` is the
//! provider alone, a second binary.

use abode_cli::{agent, commands, exit, output, plan_check, provider, server};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "abode",
    version,
    about = "Developer workspaces from Terraform templates, without losing anyone's files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Trust the certificate authorities in this PEM file, besides the
    /// system's, for every TLS connection this command makes (servers with
    /// a private CA). Verification cannot be turned off.
    #[arg(long, global = true, env = abode_tls::CA_CERT_ENV, value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with Terraform plans.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Run the workspace agent (started by abode_agent.init_script).
    Agent(agent::AgentArgs),
    /// The abode Terraform provider (this binary, under Terraform's provider file name).
    #[command(subcommand)]
    Provider(provider::ProviderCommand),
    /// Run the Abode server (HTTP API, embedded SQLite, built-in provisioners).
    #[command(args_conflicts_with_subcommands = true)]
    Server(Box<server::ServerArgs>),
    #[command(flatten)]
    User(commands::UserCommand),
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// Check a plan against protection rules (exit 0 allow, 3 confirm, 4 block, 1 bad input).
    Check(plan_check::PlanCheckArgs),
}

fn main() -> ExitCode {
    if provider::invoked_as_provider() {
        return provider::serve();
    }
    if let Some(launch) = provider::launch_requested() {
        return abode_provider::launch::main(&launch);
    }
    // Inside a workspace process's sandbox, after the drop: its environment
    // from standard input, then its program (`abode_sandbox::exec`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args
        .first()
        .is_some_and(|first| first == abode_sandbox::exec::COMMAND)
    {
        let error = abode_sandbox::exec::run(&args[1..]);
        eprintln!("abode {}: {error}", abode_sandbox::exec::COMMAND);
        return ExitCode::from(error.exit_status());
    }
    // Git's askpass inside a workspace: `abode "Password for 'URL': "`.
    if let Some(socket) = abode_agent::git_auth::socket_from_env() {
        let args: Vec<String> = std::env::args_os()
            .skip(1)
            .map(|arg| arg.into_string().unwrap_or_default())
            .collect();
        if let Some(prompt) = abode_agent::git_auth::askpass_prompt(&args) {
            return agent::askpass(&socket, prompt);
        }
    }
    let cli = Cli::parse();
    // An agent trusts what the platform handed it (the environment
    // contract) unless told otherwise on its own machine.
    let agent_pem = match (&cli.command, &cli.ca_cert) {
        (Command::Agent(_), None) => std::env::var(abode_contract::AGENT_CA_CERT)
            .ok()
            .filter(|pem| !pem.trim().is_empty()),
        _ => None,
    };
    let added = match (&cli.ca_cert, &agent_pem) {
        (Some(file), _) => abode_tls::AddedAuthorities::File(file),
        (None, Some(pem)) => abode_tls::AddedAuthorities::Pem(pem),
        (None, None) => abode_tls::AddedAuthorities::None,
    };
    if let Err(error) = abode_tls::install_trust(added) {
        eprintln!("error: {error}");
        return ExitCode::from(exit::FAILURE);
    }
    if matches!(cli.command, Command::User(_) | Command::Plan(_)) {
        end_quietly_when_the_reader_goes_away();
    }
    let result = match cli.command {
        Command::Plan(PlanCommand::Check(args)) => plan_check::run(args),
        Command::Agent(args) => Ok(agent::run(args)),
        Command::Provider(command) => provider::run(command),
        Command::Server(args) => server::run(*args),
        Command::User(command) => Ok(commands::run(command)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", output::one_line(&error));
            ExitCode::from(exit::FAILURE)
        }
    }
}

/// `abode list | head -1`: once the reader of standard output has gone, the
/// next print ends the command quietly with status 141, as `SIGPIPE` ends
/// any Unix tool (Rust ignores the signal, so `println!` panics instead,
/// and restoring it would need `unsafe`). Only the commands that print for
/// a person; any other panic is reported as before.
fn end_quietly_when_the_reader_goes_away() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout")
            && message.to_ascii_lowercase().contains("broken pipe")
        {
            std::process::exit(i32::from(exit::CLOSED_PIPE));
        }
        report(info);
    }));
}
