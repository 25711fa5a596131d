//! `abode create|start|stop|restart|rename|delete|update|list|show`:
//! workspaces and the builds that change them.

use std::collections::BTreeMap;

use abode_sdk::{AgentInfo, Transition, Workspace};
use anyhow::Context;
use clap::{Args, Subcommand};

use super::builds::follow_build;
use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, or_dash, time, visible};

/// `abode workspaces ...`: what a workspace keeps protected.
#[derive(Debug, Subcommand)]
pub enum WorkspacesCommand {
    /// List the resource addresses the workspace keeps protected.
    Protections(ShowArgs),
    /// Release one remembered protection (owners and template-admins; audited).
    Unprotect(UnprotectArgs),
    /// Write the workspace's last Terraform state to a new file (owners;
    /// audited; it holds the workspace's secrets).
    State(StateArgs),
    /// `--off`: wake a dormant workspace (no longer due for deletion).
    Dormant(super::schedule::DormantArgs),
    /// Release the state lock a build whose provisioner was lost still
    /// holds, once you have checked that its Terraform no longer runs
    /// (owners and template-admins; audited). Terraform's `force-unlock`.
    Unlock(UnlockArgs),
    /// Build the workspace on another host from now on (owners; audited):
    /// when the host its volumes and processes are on is gone for good.
    /// Nothing is copied: a volume whose directory is not on the new host
    /// reads as gone at the next build, which the guard holds.
    Move(MoveArgs),
}

#[derive(Debug, Args)]
pub struct MoveArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// The host to build it on: a server's id or a daemon's, as `abode
    /// provisioner list` shows (HOST); one of its provisioners must be
    /// connected.
    #[arg(long, value_name = "HOST")]
    pub to_host: String,
}

#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// The build whose lock is released (as `abode show` names it).
    #[arg(long, value_name = "NUMBER")]
    pub build: u64,
}

#[derive(Debug, Args)]
pub struct StateArgs {
    /// The workspace (`name`, or `owner/name`; a deleted one too).
    pub workspace: String,
    /// The file to write (created, readable by you only; never overwritten).
    #[arg(long, short = 'f', value_name = "PATH")]
    pub file: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// Remove the workspace without running Terraform (owners), when no build
    /// can delete it any more; its resources may still exist and are listed.
    #[arg(long, conflicts_with_all = ["retain", "no_retain"])]
    pub orphan: bool,
    /// Retain every protected resource, whatever the template's rule says:
    /// Terraform forgets it, Abode keeps it as a retained resource that can
    /// be adopted into a new workspace (`abode retained`).
    #[arg(long, conflicts_with = "no_retain")]
    pub retain: bool,
    /// Destroy every protected resource, even those the template says to
    /// retain (owners only; audited).
    #[arg(long)]
    pub no_retain: bool,
    /// Delete although the workspace's last report shows unsaved work
    /// (audited).
    #[arg(long, conflicts_with_all = ["confirm_unsaved", "orphan"])]
    pub discard_unsaved: bool,
    /// Delete if the workspace's last report of unsaved work still has this
    /// digest (printed by a held delete and `abode show`; audited).
    #[arg(long, value_name = "DIGEST", conflicts_with = "orphan")]
    pub confirm_unsaved: Option<String>,
}

impl DeleteArgs {
    /// What the delete asks to retain (`None`: the template's rules).
    pub fn retention(&self) -> Option<&'static str> {
        match (self.retain, self.no_retain) {
            (true, _) => Some("all"),
            (_, true) => Some("none"),
            _ => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct UnprotectArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// The resource address to release, e.g. `abode_volume.home`.
    pub address: String,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The new workspace's name.
    pub workspace: String,
    /// The template to build it from (its active version).
    #[arg(long, short = 't')]
    pub template: String,
    /// A template parameter value, `name=value` (repeatable).
    #[arg(long = "parameter", short = 'p', value_name = "NAME=VALUE", value_parser = parse_parameter)]
    pub parameters: Vec<(String, String)>,
    /// Use the parameter values of this preset of the template
    /// (`abode templates presets TEMPLATE` lists them).
    #[arg(long)]
    pub preset: Option<String>,
    /// A retained resource (`abode retained list`) the first build imports
    /// at its address instead of creating a new one (repeatable).
    #[arg(long = "adopt", value_name = "ID")]
    pub adopt: Vec<String>,
    /// Only say what the create would cost a day and whether it fits the
    /// budget (the template's import plan with these values); create
    /// nothing. Exit status 5 when quotas are enforced and it does not fit.
    #[arg(long)]
    pub estimate: bool,
    /// The estimate's format (with `--estimate`).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text, requires = "estimate")]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
}

/// `abode rename WS NEW`.
#[derive(Debug, Args)]
pub struct RenameArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// The new name (1-64 lowercase letters, digits and '-').
    pub new_name: String,
}

/// A start or an update, which may change the workspace's mutable parameters.
#[derive(Debug, Args)]
pub struct ChangeArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// A new value of a mutable template parameter, `name=value` (repeatable);
    /// the others keep the workspace's values.
    #[arg(long = "parameter", short = 'p', value_name = "NAME=VALUE", value_parser = parse_parameter)]
    pub parameters: Vec<(String, String)>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Every user's workspaces (owners and template-admins).
    #[arg(long, short = 'a')]
    pub all: bool,
    /// Only this user's workspaces (with --all).
    #[arg(long)]
    pub owner: Option<String>,
    /// Only workspaces of this template.
    #[arg(long)]
    pub template: Option<String>,
    /// Only workspaces with this status (running, stopped, failed, ...).
    #[arg(long)]
    pub status: Option<String>,
    /// At most this many workspaces (default: all, read page by page).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// Ask the agent for a fresh report of unsaved work first, and wait for
    /// it (up to 30 seconds; a workspace without a running agent keeps its
    /// last report).
    #[arg(long)]
    pub scan_unsaved: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Parses `name=value`; the value may itself contain `=`.
pub fn parse_parameter(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

pub fn create(args: CreateArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let mut parameters = BTreeMap::new();
    for (name, value) in args.parameters {
        if parameters.insert(name.clone(), value).is_some() {
            anyhow::bail!("parameter {name:?} is given twice");
        }
    }
    if args.estimate {
        let estimate = client
            .estimate_create(&args.template, args.preset.as_deref(), &parameters)
            .with_context(|| format!("cannot estimate workspace {:?}", args.workspace))?;
        if args.output == OutputFormat::Json {
            output::print_json(&estimate)?;
        } else {
            println!("{}", estimate_line(&args.workspace, &estimate));
        }
        if estimate.fits == Some(false) {
            eprintln!(
                "error: workspace {} would be refused by quota: it would cost {} a day; {} of a budget of {} used ({} remain)",
                visible(&format!("{:?}", args.workspace)),
                estimate.daily_cost.unwrap_or_default(),
                estimate.spent,
                estimate.budget,
                estimate.remaining.max(0)
            );
            return Ok(super::EXIT_QUOTA);
        }
        return Ok(EXIT_OK);
    }
    // Where quotas are enforced, the person sees what the create costs
    // before it is queued; the server refuses one that does not fit before
    // any Terraform runs (an estimate it has already planned).
    if client.quota(None).is_ok_and(|quota| quota.enforced) {
        match client.estimate_create(&args.template, args.preset.as_deref(), &parameters) {
            Ok(estimate) => eprintln!("{}", estimate_line(&args.workspace, &estimate)),
            // The create itself says what is wrong with the request.
            Err(abode_client::ClientError::Api { .. }) => {}
            Err(error) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("cannot estimate workspace {:?}", args.workspace)))
            }
        }
    }
    let created = match client.create_workspace(
        &args.workspace,
        &args.template,
        args.preset.as_deref(),
        &parameters,
        &args.adopt,
    ) {
        Ok(created) => created,
        // Refused by quota before anything was built: the create's estimate
        // already does not fit; the same status as a build refused by quota.
        Err(abode_client::ClientError::Api { code, message, .. }) if code == "quota_exceeded" => {
            eprintln!(
                "error: workspace {} was not created: {}",
                visible(&format!("{:?}", args.workspace)),
                visible(&message)
            );
            return Ok(super::EXIT_QUOTA);
        }
        Err(error) => {
            return Err(anyhow::Error::new(error)
                .context(format!("workspace {:?} was not created", args.workspace)))
        }
    };
    let preset = match &created.workspace.preset {
        Some(preset) => format!(" with preset {}", visible(preset)),
        None => String::new(),
    };
    if created.build.reason.as_deref() == Some("prebuild_claim") {
        eprintln!(
            "Claimed a prebuilt workspace as {} (template {} version {}{preset}): it is already running, handing it over",
            visible(&created.workspace.name),
            visible(&created.workspace.template),
            created.workspace.template_version
        );
    } else {
        eprintln!(
            "Created workspace {} from template {} version {}{preset}",
            visible(&created.workspace.name),
            visible(&created.workspace.template),
            created.workspace.template_version
        );
    }
    follow_build(&client, &args.workspace, &created.build)
}

/// `Estimated daily cost of dev: 5 a day (...); 4 of 10 used, 6 remain.`
/// and, when quotas are enforced and it does not fit, why it will be refused.
fn estimate_line(workspace: &str, estimate: &abode_sdk::CreateEstimate) -> String {
    let cost = match (estimate.daily_cost, &estimate.unknown) {
        (Some(total), _) => abode_cost::Cost {
            total: u64::try_from(total).unwrap_or(0),
            items: estimate
                .items
                .iter()
                .map(|item| abode_cost::Item {
                    metadata: item.metadata.clone(),
                    resource: item.resource.clone(),
                    daily_cost: u64::try_from(item.daily_cost).unwrap_or(0),
                })
                .collect(),
        }
        .describe(),
        (None, Some(why)) => format!("unknown until its plan ({why})"),
        (None, None) => "unknown until its plan".to_string(),
    };
    let source = match estimate.source.as_str() {
        "prebuild_pool" => format!(
            ", as the last prebuild of preset {}",
            visible(estimate.preset.as_deref().unwrap_or(""))
        ),
        _ => String::new(),
    };
    let mut line = format!(
        "Estimated daily cost of {}: {}{source}; budget: {} of {} used, {} remain",
        visible(workspace),
        visible(&cost),
        estimate.spent,
        estimate.budget,
        estimate.remaining
    );
    if estimate.fits == Some(false) {
        line.push_str(
            ". It does not fit: quotas are enforced, so its build will be refused before apply",
        );
    } else if !estimate.enforced {
        line.push_str(" (quotas are not enforced)");
    }
    line
}

/// What `abode start|stop|update` asks of a workspace: a build's
/// transition, or a start on the template's active version (`abode delete`
/// is [`delete`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
    Update,
}

/// `abode delete WS [--retain | --no-retain] [--discard-unsaved |
/// --confirm-unsaved DIGEST]`. A delete the workspace's unsaved work holds
/// prints the report and exits 6.
pub fn delete(args: DeleteArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let consent = match (&args.confirm_unsaved, args.discard_unsaved) {
        (Some(digest), _) => abode_client::UnsavedConsent::Confirm(digest.trim().to_string()),
        (None, true) => abode_client::UnsavedConsent::Discard,
        (None, false) => abode_client::UnsavedConsent::None,
    };
    let workspace = &args.build.workspace;
    let build = match client.delete_workspace(workspace, args.retention(), &consent) {
        Ok(build) => build,
        Err(abode_client::ClientError::Api { code, message, .. }) if code == "unsaved_work" => {
            eprintln!(
                "error: workspace {} was not deleted: {}",
                visible(&format!("{workspace:?}")),
                visible(&message)
            );
            // The whole list, which the one-line error may have cut.
            if let Ok(answer) = client.workspace_with_apps(workspace) {
                if let Some(report) = &answer.unsaved {
                    eprint!("{}", unsaved_text(report));
                }
            }
            return Ok(crate::exit::UNSAVED_WORK);
        }
        Err(error) => {
            return Err(anyhow::Error::new(error)
                .context(format!("workspace {workspace:?} was not deleted")))
        }
    };
    follow_build(&client, workspace, &build)
}

/// What the agents last said of their home volume, a line each.
pub(crate) fn disk_text(disks: &[abode_sdk::DiskUsage]) -> String {
    disks
        .iter()
        .map(|disk| {
            format!(
                "Disk: {}% of {} used ({}'s home volume, reported {} ago)\n",
                disk.used_percent,
                abode_agent::stat::size(disk.total_bytes),
                visible(&disk.agent),
                age_text(disk.age_seconds),
            )
        })
        .collect()
}

/// A report of unsaved work for people: its age and digest, then a line
/// per repository.
pub(crate) fn unsaved_text(report: &abode_sdk::UnsavedReport) -> String {
    let mut text = format!(
        "Unsaved work: {} repositor{} (reported {} ago, at {}; digest {}){}\n",
        report.repositories.len(),
        if report.repositories.len() == 1 {
            "y"
        } else {
            "ies"
        },
        age_text(report.age_seconds),
        visible(&report.made_at),
        visible(&report.digest),
        if report.truncated {
            "; the scan stopped at its bounds, there may be more"
        } else {
            ""
        },
    );
    for repository in &report.repositories {
        let kinds: Vec<&str> = repository.kinds.iter().map(|kind| kind.as_str()).collect();
        text.push_str(&format!(
            "  ~/{}: {}\n",
            visible(&repository.path),
            kinds.join(", ")
        ));
    }
    text
}

/// An age for people: `42s`, `5m`, `3h`, `2d`.
fn age_text(seconds: u64) -> String {
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

pub fn transition(
    args: BuildArgs,
    action: Action,
    parameters: &[(String, String)],
) -> anyhow::Result<u8> {
    let client = session_client()?;
    let verb = match action {
        Action::Start => "started",
        Action::Stop => "stopped",
        Action::Update => "updated",
    };
    let parameters: std::collections::BTreeMap<String, String> =
        parameters.iter().cloned().collect();
    let build = match action {
        Action::Start => {
            client.transition_workspace(&args.workspace, Transition::Start, &parameters)
        }
        Action::Stop => client.transition_workspace(&args.workspace, Transition::Stop, &parameters),
        Action::Update => client.update_workspace(&args.workspace, &parameters),
    }
    .with_context(|| format!("workspace {:?} was not {verb}", args.workspace))?;
    follow_build(&client, &args.workspace, &build)
}

/// `abode rename WS NEW`: the rename's build, followed like a start's or a
/// stop's (exit 3 when the guard holds it: nothing is renamed until its
/// plan is confirmed); the follower updates the ssh configuration once it
/// succeeded.
pub fn rename(args: RenameArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let workspace = &args.build.workspace;
    let build = client
        .rename_workspace(workspace, &args.new_name)
        .with_context(|| format!("workspace {workspace:?} was not renamed"))?;
    follow_build(&client, workspace, &build)
}

/// How long `abode restart` waits for the server to queue the start once
/// the stop succeeded (it does so as soon as it records the stop's end).
const RESTART_START_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `abode restart WS`: the stop, followed; once it succeeded, the start the
/// server queued after it, followed. A stop that fails or is held starts
/// nothing, and its exit status is the command's.
pub fn restart(args: BuildArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let workspace = &args.workspace;
    let stop = client
        .restart_workspace(workspace)
        .with_context(|| format!("workspace {workspace:?} was not restarted"))?;
    let code = follow_build(&client, workspace, &stop)?;
    if code != EXIT_OK {
        eprintln!(
            "The restart of workspace {} ends here: its stop did not succeed, so it is not started",
            output::visible(workspace)
        );
        return Ok(code);
    }
    let deadline = std::time::Instant::now() + RESTART_START_WAIT;
    let start = loop {
        let latest = client
            .build(workspace, None)
            .with_context(|| format!("cannot read the builds of workspace {workspace:?}"))?;
        if latest.number > stop.number {
            break latest;
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!(
                "workspace {workspace:?} stopped, but the server did not queue its start; start it with `abode start {workspace}`"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    follow_build(&client, workspace, &start)
}

pub fn list(args: ListArgs) -> anyhow::Result<u8> {
    let mut filters: Vec<(&str, &str)> = Vec::new();
    if args.all {
        filters.push(("all", "true"));
    }
    for (name, value) in [
        ("owner", &args.owner),
        ("template", &args.template),
        ("status", &args.status),
    ] {
        if let Some(value) = value {
            filters.push((name, value));
        }
    }
    let workspaces = session_client()?.workspaces(&filters, args.limit.map(|n| n as usize))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&workspaces)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = workspaces
                .iter()
                .map(|workspace| {
                    // Shared with you: its full name (what `abode ssh` takes),
                    // marked.
                    let name = if workspace.shared {
                        format!("{}/{} (shared)", workspace.owner, workspace.name)
                    } else if args.all {
                        format!("{}/{}", workspace.owner, workspace.name)
                    } else {
                        workspace.name.clone()
                    };
                    let last_build = workspace.latest_build.as_ref().map_or_else(
                        || "-".to_string(),
                        |build| format!("#{} {} {}", build.number, build.transition, build.status),
                    );
                    // A lost holder's lock: new builds wait (`abode show` says why).
                    let status = match &workspace.locked_by_lost_holder {
                        Some(lock) => {
                            format!("{} (locked by #{})", workspace.status, lock.build_number)
                        }
                        None => workspace.status.clone(),
                    };
                    vec![
                        name,
                        format!("{}@{}", workspace.template, workspace.template_version),
                        status,
                        workspace.agent.status.clone(),
                        if workspace.healthy { "yes" } else { "no" }.to_string(),
                        last_build,
                    ]
                })
                .collect();
            output::print_table(
                &[
                    "WORKSPACE",
                    "TEMPLATE",
                    "STATUS",
                    "AGENT",
                    "HEALTHY",
                    "LAST BUILD",
                ],
                &rows,
                "No workspaces: `abode create NAME --template TEMPLATE` makes one.",
            );
        }
    }
    Ok(EXIT_OK)
}

pub fn show(args: ShowArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let answer = if args.scan_unsaved {
        fresh_unsaved_report(&client, &args.workspace)?
    } else {
        client.workspace_with_apps(&args.workspace)?
    };
    match args.output.output {
        OutputFormat::Json => {
            // The workspace's fields, and its apps beside them.
            let mut shown = serde_json::to_value(&answer.workspace)?;
            if let Some(fields) = shown.as_object_mut() {
                fields.insert("apps".into(), serde_json::to_value(&answer.apps)?);
                fields.insert("unsaved".into(), serde_json::to_value(&answer.unsaved)?);
                fields.insert("disk".into(), serde_json::to_value(&answer.disk)?);
                fields.insert("metadata".into(), serde_json::to_value(&answer.metadata)?);
            }
            output::print_json(&shown)?
        }
        OutputFormat::Text => {
            print!("{}", describe(&answer.workspace));
            print!("{}", describe_apps(&answer.apps));
            match &answer.unsaved {
                Some(report) => print!("{}", unsaved_text(report)),
                None => println!("Unsaved work: not reported yet"),
            }
            print!("{}", disk_text(&answer.disk));
            print!("{}", metadata_text(&answer.metadata));
        }
    }
    Ok(EXIT_OK)
}

/// The agents' live metadata, a line each: `Name: value (age)`, or its error.
pub(crate) fn metadata_text(metadata: &[abode_sdk::AgentMetadata]) -> String {
    metadata
        .iter()
        .map(|item| {
            let shown = match (&item.error, item.age_seconds) {
                (_, None) => "not reported yet".to_string(),
                (Some(error), Some(age)) => {
                    format!("error: {} ({} ago)", visible(error), age_text(age))
                }
                (None, Some(age)) => format!("{} ({} ago)", visible(&item.value), age_text(age)),
            };
            format!(
                "Metadata {} ({}): {shown}\n",
                visible(&item.display_name),
                visible(&item.agent)
            )
        })
        .collect()
}

/// `abode show --scan-unsaved`: asks for a fresh report, then reads the
/// workspace until a report newer than the one before came (30 s at most:
/// then it says so and shows the last one).
fn fresh_unsaved_report(
    client: &abode_client::Client,
    workspace: &str,
) -> anyhow::Result<abode_sdk::WorkspaceAnswer> {
    let before = client.workspace_with_apps(workspace)?;
    let made_before = before.unsaved.as_ref().map(|report| report.made_at.clone());
    client
        .request_unsaved_scan(workspace)
        .with_context(|| format!("no fresh report of unsaved work was asked for {workspace:?}"))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let answer = client.workspace_with_apps(workspace)?;
        let made = answer.unsaved.as_ref().map(|report| report.made_at.clone());
        if made.is_some() && made != made_before {
            return Ok(answer);
        }
        if std::time::Instant::now() >= deadline {
            eprintln!(
                "warning: the agent of {} sent no fresh report of unsaved work within 30 seconds (is it running?); showing the last one",
                visible(workspace)
            );
            return Ok(answer);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The apps of `abode show`: one line each, with where to open it.
fn describe_apps(apps: &[abode_sdk::App]) -> String {
    let mut out = String::new();
    for (index, app) in apps.iter().enumerate() {
        let label = if index == 0 { "Apps:" } else { "" };
        let name = app.display_name.as_deref().unwrap_or(&app.slug);
        let place = match (&app.url, &app.command) {
            (Some(url), _) => url.clone(),
            (None, Some(command)) => format!("command: {command}"),
            (None, None) => "not served by this server".to_string(),
        };
        out.push_str(&format!(
            "{label:<13}{} ({}, {}, {}): {}\n",
            visible(name),
            visible(&app.agent),
            app.share.as_str(),
            app.health.as_str(),
            visible(&place)
        ));
    }
    out
}

pub fn protections(command: WorkspacesCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        WorkspacesCommand::Dormant(args) => return super::schedule::wake(args),
        WorkspacesCommand::Move(args) => {
            let moved = client
                .move_workspace(&args.workspace, &args.to_host)
                .with_context(|| format!("cannot move workspace {:?}", args.workspace))?;
            let workspace = visible(&args.workspace);
            let to = visible(&moved.to);
            match &moved.from {
                Some(from) => println!(
                    "Moved {workspace} from host {} to host {to}: its next build runs there; \
                     the data of its volumes stays on {} (copy it to {to}'s volumes dir before \
                     that build, or the guard holds it: docs/deployment.md)",
                    visible(from),
                    visible(from)
                ),
                None => println!("Moved {workspace} to host {to}: its next build runs there"),
            }
        }
        WorkspacesCommand::Unlock(args) => {
            let unlocked = client.unlock_workspace(&args.workspace, args.build)?;
            println!(
                "Unlocked {}: build #{} ({}) no longer holds its state; whatever its Terraform still writes is refused",
                visible(&args.workspace),
                unlocked.build_number,
                visible(&unlocked.holder)
            );
        }
        WorkspacesCommand::Protections(args) => {
            let protections = client.protections(&args.workspace)?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&protections)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = protections
                        .iter()
                        .map(|protection| {
                            vec![
                                protection.address.clone(),
                                protection.mode.clone(),
                                time(protection.updated_at.as_deref()),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["ADDRESS", "MODE", "UPDATED"],
                        &rows,
                        "No remembered protections.",
                    );
                }
            }
        }
        WorkspacesCommand::State(args) => {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let state = client
                .workspace_state(&args.workspace)
                .with_context(|| format!("cannot read the state of {:?}", args.workspace))?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&args.file)
                .with_context(|| format!("cannot create {}", args.file.display()))?;
            file.write_all(&state)
                .with_context(|| format!("cannot write {}", args.file.display()))?;
            println!(
                "Wrote the Terraform state of {} to {} ({} bytes); it holds the workspace's secrets",
                visible(&args.workspace),
                args.file.display(),
                state.len()
            );
        }
        WorkspacesCommand::Unprotect(args) => {
            let released = client
                .release_protection(&args.workspace, &args.address)
                .with_context(|| {
                    format!(
                        "protection of {} in workspace {} was not released",
                        args.address, args.workspace
                    )
                })?;
            println!(
                "Released the protection of {} (mode {}) in workspace {}; the next build may destroy or replace it",
                visible(&released.address),
                visible(&released.mode),
                visible(&args.workspace)
            );
        }
    }
    Ok(EXIT_OK)
}

/// `abode delete WS --orphan`: the workspace goes without Terraform; what its
/// last state names is listed, since it may still exist.
pub fn orphan(args: BuildArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let orphaned = client
        .orphan_workspace(&args.workspace)
        .with_context(|| format!("workspace {:?} was not removed", args.workspace))?;
    println!(
        "Removed workspace {} without running Terraform.",
        visible(&args.workspace)
    );
    if orphaned.resources.is_empty() {
        println!("Its last Terraform state names no resources.");
    } else {
        println!(
            "These resources of its last Terraform state may still exist; remove them by hand:"
        );
        for resource in &orphaned.resources {
            println!("  {}", visible(resource));
        }
    }
    println!(
        "Its last state: abode workspaces state {} --file {}.tfstate",
        visible(&args.workspace),
        visible(&args.workspace.replace('/', "-"))
    );
    Ok(EXIT_OK)
}

/// What an agent status means for the user, when it needs explaining.
fn agent_hint(agent: &AgentInfo) -> Option<String> {
    if agent.status == "start_error" {
        let reason = agent
            .reason
            .as_deref()
            .unwrap_or("the startup script failed");
        return Some(format!(
            "{reason}: the workspace is not usable; its output is in the agent's startup log (abode-startup-*.log)"
        ));
    }
    let hint = match agent.status.as_str() {
        "unhealthy" => Some(
            "the start build succeeded but no agent connected in time: the workspace is not usable; check the template's abode_agent and the agent's output",
        ),
        "disconnected" => {
            Some("the agent stopped sending heartbeats: the workspace's process may have died")
        }
        "connecting" => Some("the start build succeeded; waiting for the agent to connect"),
        _ => None,
    };
    hint.map(String::from)
}

/// The `abode show` text: build status and agent status side by side.
fn describe(workspace: &Workspace) -> String {
    let mut lines = vec![
        format!(
            "Workspace:   {}/{}{}",
            workspace.owner,
            workspace.name,
            if workspace.shared {
                " (shared with you)"
            } else {
                ""
            }
        ),
        format!(
            "Template:    {} (version {})",
            workspace.template, workspace.template_version
        ),
        format!("Status:      {}", workspace.status),
    ];
    if let Some(deprecation) = &workspace.template_deprecation {
        lines.push(format!(
            "Deprecated:  template {} takes no new workspaces (this one keeps working): {}",
            workspace.template,
            visible(&abode_sdk::deprecation::notice(
                &deprecation.message,
                deprecation.replacement.as_deref()
            ))
        ));
    }
    if let Some(waiting) = workspace
        .latest_build
        .as_ref()
        .and_then(|build| build.waiting.as_deref())
    {
        lines.push(format!("Waiting:     {}", visible(waiting)));
    }
    let heartbeat = workspace
        .agent
        .last_heartbeat_at
        .as_deref()
        .map(|at| format!(" (last heartbeat {})", time(Some(at))))
        .unwrap_or_default();
    lines.push(format!(
        "Agent:       {}{heartbeat}",
        workspace.agent.status
    ));
    lines.push(format!(
        "Healthy:     {}",
        if workspace.healthy { "yes" } else { "no" }
    ));
    if let Some(hint) = agent_hint(&workspace.agent) {
        lines.push(format!("             {hint}"));
    }
    if let Some(host) = &workspace.host {
        // Where its volumes and processes are: only that host builds it.
        lines.push(format!("Host:        {}", visible(host)));
    }
    if let Some(lock) = &workspace.locked_by_lost_holder {
        lines.push(format!(
            "Locked:      by build #{} of {}, lost since {}: new builds wait until it reports its Terraform ended",
            lock.build_number,
            visible(&lock.holder),
            time(lock.lost_at.as_deref())
        ));
        lines.push(format!(
            "             once its Terraform no longer runs: abode workspaces unlock {}/{} --build {}",
            workspace.owner, workspace.name, lock.build_number
        ));
    }
    if !workspace.parameters.is_empty() {
        let parameters: Vec<String> = workspace
            .parameters
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        lines.push(format!("Parameters:  {}", parameters.join(", ")));
    }
    if let Some(preset) = &workspace.preset {
        lines.push(format!("Preset:      {preset}"));
    }
    if let Some(build) = &workspace.latest_build {
        lines.push(format!(
            "Last build:  #{} {} {} by {} at {}",
            build.number,
            build.transition,
            build.status,
            or_dash(build.initiator.as_deref()),
            time(build.finished_at.as_deref().or(build.created_at.as_deref()))
        ));
        if let Some(cost) = build.daily_cost {
            lines.push(format!("Daily cost:  {cost} (build #{})", build.number));
        }
        if let Some(error) = build.error.as_deref().filter(|e| !e.is_empty()) {
            // An error may span lines (a guard report); each keeps its own.
            for (index, line) in error.lines().enumerate() {
                let label = if index == 0 {
                    "Build error: "
                } else {
                    "             "
                };
                lines.push(format!("{label}{line}"));
            }
        }
    }
    // Names, parameters, statuses and errors are other people's text: each
    // line is made inert, and a newline inside a value cannot start another.
    let mut text = lines
        .iter()
        .map(|line| visible(line))
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parameters_parse() {
        let cases = [
            ("cpu=2", Ok(("cpu", "2"))),
            ("cmd=a=b", Ok(("cmd", "a=b"))),
            ("empty=", Ok(("empty", ""))),
            ("novalue", Err(())),
            ("=x", Err(())),
        ];
        for (input, expected) in cases {
            let got = parse_parameter(input);
            match expected {
                Ok((name, value)) => {
                    assert_eq!(got, Ok((name.to_string(), value.to_string())), "{input}")
                }
                Err(()) => assert!(got.is_err(), "{input}"),
            }
        }
    }

    #[test]
    fn show_tells_build_and_agent_apart() {
        let workspace: Workspace = serde_json::from_value(serde_json::json!({
            "id": "w", "name": "dev", "owner": "alice", "template": "local", "template_version": 1,
            "status": "running", "healthy": false,
            "agent": {"status": "unhealthy"},
            "latest_build": {"id": "b", "workspace": "dev", "number": 1, "transition": "start",
                "status": "succeeded", "template_version": 1, "initiator": "alice",
                "finished_at": "2026-11-29T17:40:00Z"}
        }))
        .unwrap();
        let text = describe(&workspace);
        assert!(text.contains("Status:      running\n"), "{text}");
        assert!(text.contains("Agent:       unhealthy\n"), "{text}");
        assert!(text.contains("Healthy:     no\n"), "{text}");
        assert!(text.contains("no agent connected in time"), "{text}");
        assert!(
            text.contains("Last build:  #1 start succeeded by alice at 2026-11-29 17:40:00"),
            "{text}"
        );
    }

    #[test]
    fn show_prints_other_peoples_text_inert() {
        let workspace: Workspace = serde_json::from_value(serde_json::json!({
            "id": "w", "name": "dev", "owner": "al\u{1b}[2Jice", "template": "local",
            "template_version": 1, "status": "failed", "healthy": false,
            "parameters": {"motd": "hi\r\u{1b}[2Kfake\nline"},
            "agent": {"status": "none"},
            "latest_build": {"id": "b", "workspace": "dev", "number": 2, "transition": "start",
                "status": "failed", "template_version": 1, "initiator": "bob\u{7}",
                "error": "first \u{1b}]0;x\u{7}\nsecond\r"}
        }))
        .unwrap();
        let text = describe(&workspace);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("Workspace:   al\\e[2Jice/dev\n"), "{text}");
        assert!(
            text.contains("Parameters:  motd=hi\\r\\e[2Kfake\\nline\n"),
            "{text}"
        );
        assert!(text.contains("by bob\\x07 at"), "{text}");
        // A multi-line error keeps its lines, each one inert.
        assert!(
            text.contains("Build error: first \\e]0;x\\x07\n             second\\r\n"),
            "{text}"
        );
    }

    #[test]
    fn show_gives_the_reason_of_a_failed_startup_script() {
        let workspace: Workspace = serde_json::from_value(serde_json::json!({
            "id": "w", "name": "dev", "owner": "alice", "template": "local", "template_version": 1,
            "status": "running", "healthy": false,
            "agent": {"status": "start_error", "lifecycle": "start_error",
                "last_heartbeat_at": "2026-11-29T17:40:05Z",
                "reason": "startup script exited with status 3"}
        }))
        .unwrap();
        let text = describe(&workspace);
        assert!(
            text.contains("Agent:       start_error (last heartbeat 2026-11-29 17:40:05)\n"),
            "{text}"
        );
        assert!(text.contains("Healthy:     no\n"), "{text}");
        let hints: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("startup script exited with status 3"))
            .collect();
        assert_eq!(hints.len(), 1, "one line of reason: {text}");
    }
}
