//! `abode plan check`: the plan guard as a standalone command, so that any
//! Terraform pipeline can ask whether a plan destroys protected resources.

use crate::exit;
use abode_guard::{Address, BuildIntent, Initiator, Mode, Origin, Plan, Rule};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct PlanCheckArgs {
    /// The plan: a `terraform show -json` file, `-` for standard input, or a
    /// binary plan file from `terraform plan -out` (converted with `terraform show -json`
    /// in the current directory).
    pub plan: PathBuf,
    /// The build's transition; only `delete` (a person's) and `claim` (the first build of a
    /// claimed prebuilt workspace, which held no one's data) may destroy
    /// protected resources; a claim lists everything it destroys.
    #[arg(long, value_enum, default_value_t = BuildIntentArg::Start)]
    pub transition: BuildIntentArg,
    /// Who asked for the build: a person, or the system on its own (a scheduled
    /// autostart, autostop or dormant deletion). A delete the system started
    /// destroys no protected resource without a person: it is held for a
    /// confirmation or blocked, as the rules' mode says.
    #[arg(long, value_enum, default_value_t = InitiatorArg::Person)]
    pub initiator: InitiatorArg,
    /// Protect a resource (all its instances) or one instance, e.g.
    /// `module.home.docker_volume.this`, `docker_volume.home[0]`, `x.vols["b"]`. Repeatable.
    #[arg(long = "protect", value_name = "ADDRESS", value_parser = parse_address)]
    pub protect: Vec<Address>,
    /// Protect every resource of a type, e.g. `docker_volume`. Repeatable.
    #[arg(long = "protect-type", value_name = "TYPE")]
    pub protect_type: Vec<String>,
    /// What the rules given with --protect and --protect-type demand.
    #[arg(long, value_enum, default_value_t = ModeArg::Confirm)]
    pub mode: ModeArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BuildIntentArg {
    Start,
    Stop,
    Delete,
    Claim,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum InitiatorArg {
    Person,
    System,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Confirm,
    Block,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
}

fn parse_address(s: &str) -> Result<Address, String> {
    Address::parse(s).map_err(|e| e.to_string())
}

/// The first bytes of a zip archive, which is what `terraform plan -out` writes.
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";

pub fn run(args: PlanCheckArgs) -> Result<ExitCode> {
    let plan = load_plan(&args.plan)?;
    let transition = match args.transition {
        BuildIntentArg::Start => BuildIntent::Start,
        BuildIntentArg::Stop => BuildIntent::Stop,
        BuildIntentArg::Delete => BuildIntent::Delete,
        BuildIntentArg::Claim => BuildIntent::Claim,
    };
    let initiator = match args.initiator {
        InitiatorArg::Person => Initiator::Person,
        InitiatorArg::System => Initiator::System,
    };
    let mode = match args.mode {
        ModeArg::Confirm => Mode::Confirm,
        ModeArg::Block => Mode::Block,
    };
    let mut rules: Vec<Rule> = args
        .protect
        .into_iter()
        .map(|address| Rule::address(address, mode, Origin::Caller))
        .collect();
    rules.extend(
        args.protect_type
            .iter()
            .map(|t| Rule::resource_type(t, mode, Origin::Caller)),
    );
    let report = abode_guard::evaluate_as(&plan, transition, initiator, &rules);
    let output = match args.format {
        FormatArg::Json => report.to_json() + "\n",
        FormatArg::Text => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            abode_guard::render_text(&report, color)
        }
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = stdout
        .write_all(output.as_bytes())
        .and_then(|()| stdout.flush());
    Ok(exit::for_decision(report.decision))
}

fn load_plan(path: &Path) -> Result<Plan> {
    if path.as_os_str() == "-" {
        let mut input = BufReader::new(std::io::stdin().lock());
        if input
            .fill_buf()
            .context("cannot read the plan from standard input")?
            .starts_with(ZIP_MAGIC)
        {
            bail!("a binary plan file cannot be read from standard input; pass its path instead");
        }
        return abode_guard::read_plan(input).context("standard input");
    }
    let display = path.display();
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open plan file `{display}`"))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        bail!("`{display}` is a directory, not a plan file");
    }
    let mut magic = [0u8; 4];
    let read = read_up_to(&mut file, &mut magic)
        .with_context(|| format!("cannot read plan file `{display}`"))?;
    if magic[..read] == *ZIP_MAGIC {
        let cwd = std::env::current_dir().context("cannot find the current directory")?;
        let json = abode_terraform::show_plan_json(path, &cwd)
            .with_context(|| format!("cannot convert binary plan `{display}` to JSON"))?;
        return abode_guard::read_plan_slice(&json).with_context(|| display.to_string());
    }
    let rest = std::io::Cursor::new(magic[..read].to_vec()).chain(file);
    abode_guard::read_plan(rest).with_context(|| display.to_string())
}

fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}
