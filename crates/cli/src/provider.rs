//! The abode Terraform provider's two doors into the `abode` binary: serving
//! the provider when Terraform starts this executable under the provider's file
//! name, and `abode provider install`, which lays out the offline mirror and the
//! Terraform CLI configuration pointing at it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use abode_terraform::machine::{absolute, provider_executable};
use abode_terraform::mirror::{Mirror, PROVIDER_FILE_PREFIX, PROVIDER_VERSION};
use anyhow::Context;
use clap::{Args, Subcommand};

/// True when Terraform started us as the provider: argv[0]'s file name is the
/// provider's, and there are no arguments (Terraform passes none). With
/// arguments the mirror's copy is still the whole CLI, so an `init_script`
/// pointing at it can run `abode agent`.
pub fn invoked_as_provider() -> bool {
    let mut args = std::env::args_os();
    let provider_name = args
        .next()
        .as_deref()
        .and_then(|arg0| Path::new(arg0).file_name())
        .and_then(OsStr::to_str)
        .is_some_and(|name| name.starts_with(PROVIDER_FILE_PREFIX));
    provider_name && args.next().is_none()
}

/// The arguments after `--launch-terraform` when asked for a launch (the
/// mirror's copy is `abode` itself when the provider-only file was not beside
/// it): one provider process for a whole Terraform command.
pub fn launch_requested() -> Option<Vec<std::ffi::OsString>> {
    let mut args = std::env::args_os().skip(1);
    let flag = args.next()?;
    (flag == abode_provider::launch::LAUNCH_FLAG).then(|| args.collect())
}

/// Serves the provider until Terraform stops it.
pub fn serve() -> ExitCode {
    match abode_provider::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ProviderCommand {
    /// Install this binary as the abode Terraform provider in a local mirror and write the Terraform CLI configuration that uses it (no download).
    Install(InstallArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The filesystem mirror directory [default: $XDG_DATA_HOME/abode/provider-mirror, or ~/.local/share/abode/provider-mirror].
    #[arg(long, value_name = "DIR")]
    mirror: Option<PathBuf>,
    /// Where to write the Terraform CLI configuration [default: terraform.rc beside the mirror directory].
    #[arg(long, value_name = "FILE")]
    cli_config: Option<PathBuf>,
}

fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir).join("abode"));
    }
    let home = std::env::var_os("HOME")
        .filter(|dir| !dir.is_empty())
        .context("neither XDG_DATA_HOME nor HOME is set: pass --mirror DIR")?;
    Ok(PathBuf::from(home).join(".local/share/abode"))
}

pub fn run(command: ProviderCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProviderCommand::Install(args) => install(args),
    }
}

fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let mirror_dir = match args.mirror {
        Some(dir) => absolute(dir)?,
        None => default_data_dir()?.join("provider-mirror"),
    };
    let config_path = match args.cli_config {
        Some(path) => absolute(path)?,
        None => mirror_dir
            .parent()
            .unwrap_or(&mirror_dir)
            .join("terraform.rc"),
    };
    let (executable, note) = provider_executable()?;
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    let mirror = Mirror::new(&mirror_dir)?;
    let installed = mirror
        .install(&executable, PROVIDER_VERSION)
        .context("cannot install the abode provider")?;
    mirror
        .write_cli_config(&config_path)
        .context("cannot write the Terraform CLI configuration")?;
    println!(
        "installed abode/abode {PROVIDER_VERSION} at {}",
        installed.display()
    );
    println!(
        "wrote the Terraform CLI configuration to {}",
        config_path.display()
    );
    println!(
        "use it with: export TF_CLI_CONFIG_FILE={}",
        config_path.display()
    );
    Ok(ExitCode::SUCCESS)
}
