//! The lifecycle settings on the command line (docs/lifecycle.md): a
//! template's policy (`abode templates edit|policy`), a workspace's
//! schedule (`abode schedule`), and waking a dormant workspace (`abode
//! workspaces dormant WS --off`). Durations are read as `90m`, `8h`, `30d`
//! (0 turns a template rule off) and sent as milliseconds.

use std::time::Duration;

use abode_sdk::{Autostart, TemplatePolicy, TemplatePolicyPatch, WorkspaceSchedule};
use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::duration;
use crate::output::{self, visible};

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// A workspace's autostart schedule, autostop ttl, deadline and dormancy.
    Show(ShowArgs),
    /// Start the workspace on a schedule: a five-field cron (minute hour
    /// day-of-month month day-of-week) in an IANA time zone; `--off` removes it.
    Start(StartArgs),
    /// Stop the workspace this long after each start (its ttl); `--off`: never
    /// (a template's max ttl still applies); `--default`: the template's.
    Stop(StopArgs),
    /// Stop the running workspace this long from now instead (up to the
    /// template's max ttl).
    Extend(ExtendArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// When to start it, e.g. "30 8 * * 1-5" (8:30 on weekdays).
    #[arg(required_unless_present = "off", conflicts_with = "off")]
    pub cron: Option<String>,
    /// The schedule's IANA time zone (e.g. Europe/Paris).
    #[arg(long, default_value = "UTC", conflicts_with = "off")]
    pub timezone: String,
    /// Remove the autostart schedule.
    #[arg(long)]
    pub off: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// How long after a start it is stopped (`90m`, `8h`).
    #[arg(value_parser = duration::parse, required_unless_present_any = ["off", "default"], conflicts_with_all = ["off", "default"])]
    pub duration: Option<Duration>,
    /// No autostop for this workspace.
    #[arg(long, conflicts_with = "default")]
    pub off: bool,
    /// Follow the template's default ttl.
    #[arg(long)]
    pub default: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// Stop it this long from now (`2h`).
    #[arg(value_parser = duration::parse)]
    pub duration: Duration,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `abode templates edit T [flags]`: the flags given are changed.
#[derive(Debug, Args)]
pub struct EditPolicyArgs {
    /// The template's name.
    pub name: String,
    /// Stop workspaces this long after a start (0: no autostop).
    #[arg(long, value_parser = duration::parse_or_zero)]
    pub default_ttl: Option<Duration>,
    /// Activity pushes the deadline to activity + this (0: activity does not).
    #[arg(long, value_parser = duration::parse_or_zero)]
    pub activity_bump: Option<Duration>,
    /// A hard deadline after a start that activity and extensions cannot
    /// pass (0: none).
    #[arg(long, value_parser = duration::parse_or_zero)]
    pub max_ttl: Option<Duration>,
    /// The days autostart may run, e.g. mon,tue,wed,thu,fri.
    #[arg(long, value_name = "DAYS")]
    pub autostart_days: Option<String>,
    /// Whether owners' autostart schedules are followed.
    #[arg(long, value_name = "true|false")]
    pub allow_user_autostart: Option<bool>,
    /// Whether owners may set their own autostop ttl.
    #[arg(long, value_name = "true|false")]
    pub allow_user_autostop: Option<bool>,
    /// Stop a workspace whose start failed, after this long (0: never).
    #[arg(long, value_parser = duration::parse_or_zero)]
    pub failure_ttl: Option<Duration>,
    /// Mark a workspace dormant after this long unused (0: never).
    #[arg(long, value_parser = duration::parse_or_zero)]
    pub dormancy_threshold: Option<Duration>,
    /// Delete a dormant workspace this long after it became dormant (0: never).
    #[arg(long, value_parser = duration::parse_or_zero)]
    pub dormancy_auto_deletion: Option<Duration>,
    /// Whether autostart updates workspaces to the active version.
    #[arg(long, value_name = "true|false")]
    pub require_active_version: Option<bool>,
    /// Whether the template's workspaces may be shared (`abode sharing`).
    #[arg(long, value_name = "true|false")]
    pub allow_sharing: Option<bool>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `abode templates policy T`.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The template's name.
    pub name: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `abode workspaces dormant WS --off`.
#[derive(Debug, Args)]
pub struct DormantArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// Wake it: no longer dormant nor due for deletion.
    #[arg(long, required = true)]
    pub off: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: ScheduleCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    let (schedule, output) = match command {
        ScheduleCommand::Show(args) => (
            client
                .workspace_schedule(&args.workspace)
                .with_context(|| format!("cannot read the schedule of {:?}", args.workspace))?,
            args.output,
        ),
        ScheduleCommand::Start(args) => {
            let mut spec = client
                .workspace_schedule(&args.workspace)
                .with_context(|| format!("cannot read the schedule of {:?}", args.workspace))?
                .spec();
            spec.autostart = args.cron.map(|cron| Autostart {
                cron,
                timezone: args.timezone,
            });
            let schedule = client
                .set_workspace_schedule(&args.workspace, &spec)
                .with_context(|| format!("autostart of {:?} not set", args.workspace))?;
            (schedule, args.output)
        }
        ScheduleCommand::Stop(args) => {
            let mut spec = client
                .workspace_schedule(&args.workspace)
                .with_context(|| format!("cannot read the schedule of {:?}", args.workspace))?
                .spec();
            spec.ttl_ms = match (args.duration, args.off) {
                (Some(ttl), _) => Some(millis(ttl)),
                (None, true) => Some(0),
                (None, false) => None,
            };
            let schedule = client
                .set_workspace_schedule(&args.workspace, &spec)
                .with_context(|| format!("autostop of {:?} not set", args.workspace))?;
            (schedule, args.output)
        }
        ScheduleCommand::Extend(args) => (
            client
                .extend_workspace(&args.workspace, millis(args.duration))
                .with_context(|| format!("{:?} not extended", args.workspace))?,
            args.output,
        ),
    };
    print_schedule(&schedule, output)?;
    Ok(EXIT_OK)
}

/// `abode workspaces dormant WS --off`.
pub fn wake(args: DormantArgs) -> anyhow::Result<u8> {
    let schedule = session_client()?
        .wake_workspace(&args.workspace)
        .with_context(|| format!("{:?} not woken", args.workspace))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&schedule)?,
        OutputFormat::Text => println!(
            "Workspace {} is no longer dormant",
            visible(&schedule.workspace)
        ),
    }
    Ok(EXIT_OK)
}

/// `abode templates edit`.
pub fn edit_policy(args: EditPolicyArgs) -> anyhow::Result<u8> {
    let patch = TemplatePolicyPatch {
        default_ttl_ms: args.default_ttl.map(millis),
        activity_bump_ms: args.activity_bump.map(millis),
        max_ttl_ms: args.max_ttl.map(millis),
        autostart_days: args.autostart_days,
        allow_user_autostart: args.allow_user_autostart,
        allow_user_autostop: args.allow_user_autostop,
        failure_ttl_ms: args.failure_ttl.map(millis),
        dormancy_threshold_ms: args.dormancy_threshold.map(millis),
        dormancy_auto_deletion_ms: args.dormancy_auto_deletion.map(millis),
        require_active_version: args.require_active_version,
        allow_sharing: args.allow_sharing,
    };
    if patch.is_empty() {
        anyhow::bail!(
            "nothing to change: give at least one setting (see `abode templates edit --help`)"
        );
    }
    let policy = session_client()?
        .edit_template_policy(&args.name, &patch)
        .with_context(|| format!("policy of template {:?} not changed", args.name))?;
    print_policy(&policy, args.output)?;
    Ok(EXIT_OK)
}

/// `abode templates policy`.
pub fn show_policy(args: PolicyArgs) -> anyhow::Result<u8> {
    let policy = session_client()?
        .template_policy(&args.name)
        .with_context(|| format!("cannot read the policy of template {:?}", args.name))?;
    print_policy(&policy, args.output)?;
    Ok(EXIT_OK)
}

fn print_policy(policy: &TemplatePolicy, output: OutputArgs) -> anyhow::Result<()> {
    if output.output == OutputFormat::Json {
        return output::print_json(policy);
    }
    let lines = [
        ("Template", visible(&policy.template)),
        ("Default ttl", off_or(policy.default_ttl_ms)),
        ("Activity bump", off_or(policy.activity_bump_ms)),
        ("Max ttl", off_or(policy.max_ttl_ms)),
        ("Autostart days", visible(&policy.autostart_days)),
        (
            "Allow user autostart",
            policy.allow_user_autostart.to_string(),
        ),
        (
            "Allow user autostop",
            policy.allow_user_autostop.to_string(),
        ),
        ("Failure ttl", off_or(policy.failure_ttl_ms)),
        ("Dormancy threshold", off_or(policy.dormancy_threshold_ms)),
        (
            "Dormancy auto-deletion",
            off_or(policy.dormancy_auto_deletion_ms),
        ),
        (
            "Require active version",
            policy.require_active_version.to_string(),
        ),
        ("Allow sharing", policy.allow_sharing.to_string()),
    ];
    print_lines(&lines);
    Ok(())
}

fn print_schedule(schedule: &WorkspaceSchedule, output: OutputArgs) -> anyhow::Result<()> {
    if output.output == OutputFormat::Json {
        return output::print_json(schedule);
    }
    let autostart = match &schedule.autostart {
        Some(autostart) => format!(
            "{} ({}){}",
            visible(&autostart.cron),
            visible(&autostart.timezone),
            if schedule.allow_user_autostart {
                format!(" on {}", visible(&schedule.autostart_days))
            } else {
                " (not followed: the template does not allow user autostart)".into()
            }
        ),
        None => "off".into(),
    };
    let ttl = match schedule.ttl_ms {
        Some(0) => "off".to_string(),
        Some(ttl) => fmt_ms(ttl),
        None => format!(
            "template default ({})",
            off_or(schedule.template_default_ttl_ms)
        ),
    };
    let lines = [
        ("Workspace", visible(&schedule.workspace)),
        ("Autostart", autostart),
        ("Autostop", ttl),
        ("Max ttl", off_or(schedule.template_max_ttl_ms)),
        ("Deadline", at(schedule.deadline)),
        ("Max deadline", at(schedule.max_deadline)),
        ("Last used", at(schedule.last_used_at)),
        ("Dormant since", at(schedule.dormant_at)),
        ("Deletion", at(schedule.deleting_at)),
    ];
    print_lines(&lines);
    Ok(())
}

fn print_lines(lines: &[(&str, String)]) {
    let width = lines.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    for (key, value) in lines {
        println!("{:width$}  {value}", format!("{key}:"), width = width + 1);
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn fmt_ms(ms: u64) -> String {
    duration::format(Duration::from_millis(ms))
}

fn off_or(ms: u64) -> String {
    if ms == 0 {
        "off".into()
    } else {
        fmt_ms(ms)
    }
}

/// A Unix-ms time as `YYYY-MM-DD HH:MM:SS UTC`, `-` when absent.
fn at(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let t = abode_clock::UtcTime::from_ms(ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc_dates() {
        for (ms, text) in [
            (Some(0), "1970-01-01 00:00:00 UTC"),
            (Some(951_782_400_000), "2000-02-29 00:00:00 UTC"),
            (Some(1_700_000_000_123), "2023-11-14 22:13:20 UTC"),
            (Some(1_709_251_199_000), "2024-02-29 23:59:59 UTC"),
            (None, "-"),
        ] {
            assert_eq!(at(ms), text, "{ms:?}");
        }
    }
}
