//! `abode builds`: list a workspace's builds, show one (with `--timings`,
//! where its time went: `build_timings.rs`), print or follow a build's log,
//! and the log follower every build-starting command uses.

use std::io::Write;
use std::time::Duration;

use abode_client::{Client, ClientError};
use abode_sdk::{Build, BuildStatus, LogLine, Transition};
use anyhow::Context;
use clap::{Args, Subcommand};

use super::guard;
use super::{
    session_client, OutputArgs, OutputFormat, EXIT_AWAITING_CONFIRMATION, EXIT_BLOCKED, EXIT_ERROR,
    EXIT_OK, EXIT_QUOTA,
};
use crate::output::{self, or_dash, time, visible};

/// Seconds the server may hold a log request open waiting for new lines.
const LONG_POLL_SECONDS: u64 = 10;
/// How often a follower retries while the server is unreachable before giving up.
const FOLLOW_RETRIES: u32 = 20;

#[derive(Debug, Subcommand)]
pub enum BuildsCommand {
    /// List a workspace's builds, newest first.
    List(ListArgs),
    /// Print a build's log (the latest build by default).
    Logs(LogsArgs),
    /// Show a build; with `--timings`, where its time went: each stage and
    /// each Terraform resource's plan and apply.
    Show(ShowArgs),
    /// Apply exactly the saved plan of a build held by the plan guard.
    Confirm(ConfirmArgs),
    /// Cancel a pending, running or held build (a held plan is discarded).
    Cancel(BuildRefArgs),
}

#[derive(Debug, Args)]
pub struct ConfirmArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// The held build's number.
    pub number: u64,
    /// The digest of the plan you reviewed (64 hex characters, printed when
    /// the build was held). Without it, on a terminal, the CLI shows the held
    /// plan's protected changes and asks you to type `yes`; elsewhere it
    /// refuses (exit 2) and prints the command with the digest.
    #[arg(long, value_parser = parse_digest)]
    pub digest: Option<String>,
}

#[derive(Debug, Args)]
pub struct BuildRefArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// The build number.
    pub number: u64,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// Only builds with this status (pending, running, awaiting_confirmation,
    /// succeeded, failed, canceled).
    #[arg(long)]
    pub status: Option<String>,
    /// At most this many builds, newest first (default: all, read page by page).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// The build number; the latest build when omitted.
    pub number: Option<u64>,
    /// Show when each stage started and how long it took, and each
    /// Terraform resource's plan and apply.
    #[arg(long)]
    pub timings: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The workspace (`name`, or `owner/name` for another user's).
    pub workspace: String,
    /// The build number; the latest build when omitted.
    pub number: Option<u64>,
    /// Keep printing new lines until the build ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

pub fn run(command: BuildsCommand) -> anyhow::Result<u8> {
    match command {
        BuildsCommand::List(args) => list(args),
        BuildsCommand::Logs(args) => logs(args),
        BuildsCommand::Show(args) => show(args),
        BuildsCommand::Confirm(args) => confirm(args),
        BuildsCommand::Cancel(args) => cancel(args),
    }
}

/// A plan digest as the server makes it: the SHA-256 of the saved plan, 64
/// hex characters (sent lower-case, as the server writes it). Checked here so
/// that a truncated or mistyped digest gets a usage error, not a round trip.
pub fn parse_digest(text: &str) -> Result<String, String> {
    let text = text.trim();
    let length = text.chars().count();
    let problem = if length != 64 {
        format!("this one has {length}")
    } else if !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        "this one has characters other than 0-9 and a-f".to_string()
    } else {
        return Ok(text.to_ascii_lowercase());
    };
    Err(format!(
        "a plan digest is 64 hex characters (the SHA-256 printed when the build was held); {problem}"
    ))
}

/// Whether someone is there to read the plan and answer: both standard input
/// and standard output are terminals (the review goes to stdout, so that it
/// is on the screen of whoever types the answer).
pub(super) fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Confirms a held build. A confirmation must be a decision someone made
/// after reading the plan, so without `--digest` the plan is shown and the
/// answer `yes` asked for on a terminal, and nothing happens anywhere else.
fn confirm(args: ConfirmArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let digest = match args.digest {
        Some(digest) => digest,
        None => {
            let (held, digest) = held_plan(&client, &args.workspace, args.number)?;
            if !interactive() {
                let workspace = visible(&args.workspace);
                let number = held.number;
                eprintln!(
                    "error: without --digest, build #{number} can only be confirmed on a terminal, after reading its plan; nothing was confirmed. Review it with `abode builds logs {workspace} {number}`, then run: abode builds confirm {workspace} {number} --digest {digest}"
                );
                return Ok(crate::exit::USAGE);
            }
            if !ask_yes(
                &guard::review_message(&args.workspace, &held, &digest),
                "Type yes to apply exactly this plan (anything else applies nothing): ",
            )? {
                eprintln!(
                    "error: build #{} of workspace {} was not confirmed (the answer was not `yes`); nothing was applied",
                    held.number,
                    visible(&args.workspace)
                );
                return Ok(EXIT_ERROR);
            }
            digest
        }
    };
    // The log up to the hold was shown when the build was held.
    let seen = last_log_seq(&client, &args.workspace, args.number)?;
    let build = client
        .confirm_build(&args.workspace, args.number, &digest)
        .with_context(|| {
            format!(
                "build #{} of workspace {} was not confirmed",
                args.number, args.workspace
            )
        })?;
    eprintln!(
        "Build #{} ({}) of workspace {} confirmed; following its log...",
        build.number,
        visible(build.transition.as_str()),
        visible(&args.workspace)
    );
    follow_build_from(&client, &args.workspace, &build, seen)
}

/// The held build and its plan digest, refusing a build that is not held or
/// whose digest is not one (so that only a real digest is ever shown to be
/// copied into a command).
fn held_plan(client: &Client, workspace: &str, number: u64) -> anyhow::Result<(Build, String)> {
    let held = client.build(workspace, Some(number))?;
    if held.status != "awaiting_confirmation" {
        anyhow::bail!(
            "build #{} of workspace {} is {}, not awaiting confirmation",
            held.number,
            workspace,
            held.status.replace('_', " ")
        );
    }
    let digest = held.plan_digest.as_deref().ok_or_else(|| {
        anyhow::anyhow!(
            "build #{} of workspace {} has no saved plan to confirm",
            held.number,
            workspace
        )
    })?;
    let digest = parse_digest(digest).map_err(|_| {
        anyhow::anyhow!(
            "the server gave build #{} of workspace {} a plan digest that is not 64 hex characters; nothing was confirmed",
            held.number,
            workspace
        )
    })?;
    Ok((held, digest))
}

/// Shows `review` on stdout, asks for `yes` and reads one line of standard
/// input; only exactly `yes` (surrounding blanks aside) counts, and the end
/// of the input counts as no.
pub(super) fn ask_yes(review: &str, prompt: &str) -> anyhow::Result<bool> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{review}")?;
    write!(stdout, "{prompt}")?;
    stdout.flush()?;
    drop(stdout);
    let mut answer = String::new();
    let read = std::io::stdin()
        .read_line(&mut answer)
        .context("cannot read the answer from standard input")?;
    if read == 0 {
        // At the end of input (Ctrl-D) nothing echoed a newline after the
        // prompt; end its line so the next message starts on its own.
        println!();
    }
    Ok(answer.trim() == "yes")
}

fn cancel(args: BuildRefArgs) -> anyhow::Result<u8> {
    let build = session_client()?
        .cancel_build(&args.workspace, args.number)
        .with_context(|| {
            format!(
                "build #{} of workspace {} was not canceled",
                args.number, args.workspace
            )
        })?;
    println!(
        "Build #{} ({}) of workspace {} is {}",
        build.number,
        visible(build.transition.as_str()),
        visible(&args.workspace),
        visible(&build.status.replace('_', " "))
    );
    Ok(EXIT_OK)
}

fn list(args: ListArgs) -> anyhow::Result<u8> {
    let builds = session_client()?.builds(
        &args.workspace,
        args.status.as_deref(),
        args.limit.map(|n| n as usize),
    )?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&builds)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = builds
                .iter()
                .map(|build| {
                    vec![
                        build.number.to_string(),
                        build.transition.to_string(),
                        build.status.clone(),
                        build.template_version.to_string(),
                        initiator(build),
                        or_dash(build.reason.as_deref()),
                        time(build.created_at.as_deref()),
                        or_dash(build.error.as_deref()),
                    ]
                })
                .collect();
            output::print_table(
                &[
                    "BUILD",
                    "TRANSITION",
                    "STATUS",
                    "VERSION",
                    "INITIATOR",
                    "REASON",
                    "CREATED",
                    "ERROR",
                ],
                &rows,
                "No builds.",
            );
        }
    }
    Ok(EXIT_OK)
}

fn show(args: ShowArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let build = client.build(&args.workspace, args.number)?;
    if args.timings {
        let timings = client.build_timings(&args.workspace, build.number)?;
        match args.output.output {
            OutputFormat::Json => output::print_json(&timings)?,
            OutputFormat::Text => print!("{}", super::build_timings::render(&timings)),
        }
        return Ok(EXIT_OK);
    }
    match args.output.output {
        OutputFormat::Json => output::print_json(&build)?,
        OutputFormat::Text => {
            let rows = vec![
                vec!["Build".to_string(), format!("#{}", build.number)],
                vec![
                    "Workspace".to_string(),
                    visible(&format!("{}/{}", build.owner, build.workspace)),
                ],
                vec!["Transition".to_string(), build.transition.to_string()],
                vec!["Status".to_string(), build.status.clone()],
                vec!["Version".to_string(), build.template_version.to_string()],
                vec!["Initiator".to_string(), initiator(&build)],
                vec!["Created".to_string(), time(build.created_at.as_deref())],
                vec!["Error".to_string(), or_dash(build.error.as_deref())],
            ];
            for row in rows {
                println!("{:<11} {}", format!("{}:", row[0]), row[1]);
            }
        }
    }
    Ok(EXIT_OK)
}

fn logs(args: LogsArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let build = client.build(&args.workspace, args.number)?;
    let number = build.number;
    if args.follow {
        stream_log(&client, &mut args.workspace.clone(), &build, 0)?;
        return Ok(EXIT_OK);
    }
    let mut after = 0;
    loop {
        let page = client.build_logs(&args.workspace, number, after, 0)?;
        if page.lines.is_empty() {
            break;
        }
        after = print_lines(&page.lines, after)?;
        if page.done {
            break;
        }
    }
    Ok(EXIT_OK)
}

fn print_lines(lines: &[LogLine], mut after: u64) -> anyhow::Result<u64> {
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        if line.seq <= after {
            continue;
        }
        writeln!(stdout, "{}", format_line(line))?;
        after = line.seq;
    }
    stdout.flush()?;
    Ok(after)
}

/// One log line as the CLI prints it: the stage, then Terraform's text, with
/// controls made visible (the text is whatever Terraform, a provider or a
/// template printed). A text of several lines prints as several lines, each
/// with the stage, so that none can pass for another stage's.
pub fn format_line(line: &LogLine) -> String {
    let marker = match line.level.as_str() {
        "error" => " ERROR",
        "warn" => " WARN",
        _ => "",
    };
    let stage = visible(&line.stage);
    let mut pieces = line.text.lines().peekable();
    if pieces.peek().is_none() {
        return format!("[{stage}]{marker} ");
    }
    pieces
        .map(|piece| format!("[{stage}]{marker} {}", visible(piece)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The reference a rename build's workspace answers to once the build
/// succeeded (`owner/NEW` or `NEW`, as `reference` was written); `None`
/// for other builds, or when `reference` names it already.
fn renamed_reference(reference: &str, build: &Build) -> Option<String> {
    let new_name = build.rename_to.as_deref()?;
    let renamed = match reference.split_once('/') {
        Some((owner, _)) => format!("{owner}/{new_name}"),
        None => new_name.to_string(),
    };
    (renamed != reference).then_some(renamed)
}

/// Prints a build's log as it grows, until the build ends. A rename's
/// workspace that took its new name meanwhile is followed under it.
fn stream_log(
    client: &Client,
    workspace: &mut String,
    build: &Build,
    from: u64,
) -> anyhow::Result<()> {
    let number = build.number;
    let mut after = from;
    let mut failures = 0;
    loop {
        match client.build_logs(workspace, number, after, LONG_POLL_SECONDS) {
            Ok(page) => {
                failures = 0;
                let quiet = page.lines.is_empty();
                after = print_lines(&page.lines, after)?;
                // A held build's log is not done (a confirmation continues it),
                // but nothing more comes until someone acts.
                let held = page.status == BuildStatus::AwaitingConfirmation && quiet;
                if page.done || held {
                    return Ok(());
                }
            }
            Err(err) if err.is_transient() && failures < FOLLOW_RETRIES => {
                failures += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(err) if err.status() == Some(404) => match renamed_reference(workspace, build) {
                Some(renamed) => *workspace = renamed,
                None => return Err(err.into()),
            },
            Err(err) => return Err(err.into()),
        }
    }
}

/// Follows a just-started build to its end, prints its outcome and returns the
/// exit status: 0 succeeded, 1 failed or canceled, 3 awaiting confirmation,
/// 4 blocked by the plan guard.
pub fn follow_build(client: &Client, workspace: &str, build: &Build) -> anyhow::Result<u8> {
    eprintln!(
        "Build #{} ({}) of workspace {} queued; following its log...",
        build.number,
        visible(build.transition.as_str()),
        visible(workspace)
    );
    follow_build_from(client, workspace, build, 0)
}

/// The sequence number of a build's last log line so far.
fn last_log_seq(client: &Client, workspace: &str, number: u64) -> anyhow::Result<u64> {
    let mut after = 0;
    loop {
        let page = client.build_logs(workspace, number, after, 0)?;
        match page.lines.last() {
            Some(line) if line.seq > after => after = line.seq,
            _ => return Ok(after),
        }
    }
}

/// Like [`follow_build`], printing only log lines after `from`.
fn follow_build_from(
    client: &Client,
    workspace: &str,
    build: &Build,
    from: u64,
) -> anyhow::Result<u8> {
    let asked = workspace;
    let mut reference = workspace.to_string();
    stream_log(client, &mut reference, build, from)?;
    let finished = final_build(client, &mut reference, build)?;
    let workspace = reference.as_str();
    let code = exit_code(&finished);
    let summary = format!(
        "Build #{} ({}) of workspace {} {}",
        finished.number,
        visible(finished.transition.as_str()),
        visible(workspace),
        visible(&finished.status.replace('_', " "))
    );
    match code {
        EXIT_AWAITING_CONFIRMATION => eprintln!("{}", guard::held_message(workspace, &finished)),
        EXIT_BLOCKED => eprintln!("{}", guard::blocked_message(workspace, &finished)),
        _ => {}
    }
    match (code, finished.error.as_deref()) {
        // Held is not an error: the user has a decision to make, printed above.
        (EXIT_OK | EXIT_AWAITING_CONFIRMATION, _) => eprintln!("{summary}"),
        // A guard report as the reason spans lines; the explanation above has it.
        (_, Some(error)) if !error.is_empty() => eprintln!(
            "error: {summary}: {}",
            visible(error.lines().next().unwrap_or_default())
        ),
        _ => eprintln!("error: {summary}"),
    }
    if code == EXIT_OK {
        if let Some(new_name) = &finished.rename_to {
            renamed(client, asked, new_name);
        }
    }
    if code == EXIT_OK && finished.transition == Transition::Start {
        // The build is done, the agent may still be on its way: say where to look.
        if let Ok(shown) = client.workspace(workspace) {
            if matches!(shown.agent.status.as_str(), "connecting" | "starting") {
                eprintln!(
                    "The agent is {}: `abode show {}` tells when the workspace is ready",
                    visible(&shown.agent.status),
                    visible(workspace)
                );
            }
        }
    }
    Ok(code)
}

/// Says that a rename succeeded, and rewrites the `abode config-ssh` block
/// of ~/.ssh/config if there is one, so that `ssh abode.NEW` works and the
/// old name's entry is gone.
fn renamed(client: &Client, workspace: &str, new_name: &str) {
    eprintln!(
        "Workspace {} is now named {}",
        visible(workspace),
        visible(new_name)
    );
    match super::config_ssh::refresh_if_configured(client) {
        Ok(Some(path)) => eprintln!(
            "{}: Host abode.{} updated",
            path.display(),
            visible(new_name)
        ),
        Ok(None) => {}
        Err(error) => eprintln!(
            "warning: the ssh configuration was not updated ({}); run `abode config-ssh`",
            crate::output::one_line(&error)
        ),
    }
}

/// The build once the server says it is final (the log can end a moment before).
fn final_build(
    client: &Client,
    workspace: &mut String,
    build: &Build,
) -> Result<Build, ClientError> {
    let mut attempts = 0;
    loop {
        let build = match client.build(workspace, Some(build.number)) {
            Err(err) if err.status() == Some(404) => match renamed_reference(workspace, build) {
                Some(renamed) => {
                    *workspace = renamed;
                    continue;
                }
                None => return Err(err),
            },
            other => other?,
        };
        if build.is_final() || attempts >= 50 {
            return Ok(build);
        }
        attempts += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The exit status a build's outcome maps to.
pub fn exit_code(build: &Build) -> u8 {
    let guard_decision = build
        .guard
        .as_ref()
        .and_then(|guard| guard.get("decision"))
        .and_then(|decision| decision.as_str());
    match build.status.as_str() {
        "succeeded" => EXIT_OK,
        "awaiting_confirmation" => EXIT_AWAITING_CONFIRMATION,
        "failed" if guard_decision == Some("block") => EXIT_BLOCKED,
        "failed" if build.refusal.as_deref() == Some("quota") => EXIT_QUOTA,
        _ => EXIT_ERROR,
    }
}

/// Who asked for a build, a system actor marked as such
/// (`scheduler (system)`), so that nobody mistakes it for a person's name.
fn initiator(build: &Build) -> String {
    match (build.initiator.as_deref(), build.initiator_type.as_deref()) {
        (Some(name), Some("system")) => format!("{name} (system)"),
        (name, _) => or_dash(name),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn build(status: &str, guard: Option<serde_json::Value>) -> Build {
        serde_json::from_value(serde_json::json!({
            "id": "b", "workspace": "dev", "number": 1, "transition": "start",
            "status": status, "template_version": 1, "guard": guard,
        }))
        .unwrap()
    }

    #[test]
    fn build_outcomes_map_to_exit_codes() {
        let block = Some(serde_json::json!({"decision": "block"}));
        let allow = Some(serde_json::json!({"decision": "allow"}));
        let cases = [
            (build("succeeded", allow.clone()), 0),
            (build("failed", allow), 1),
            (build("failed", None), 1),
            (build("canceled", None), 1),
            (build("awaiting_confirmation", None), 3),
            (build("failed", block), 4),
        ];
        for (build, expected) in cases {
            assert_eq!(exit_code(&build), expected, "{}", build.status);
        }
    }

    #[test]
    fn log_lines_show_stage_and_level() {
        let line = |level: &str| LogLine {
            seq: 1,
            time: None,
            stage: "apply".into(),
            level: level.into(),
            text: "done".into(),
        };
        assert_eq!(format_line(&line("info")), "[apply] done");
        assert_eq!(format_line(&line("error")), "[apply] ERROR done");
    }

    #[test]
    fn log_lines_print_other_peoples_text_inert_and_line_by_line() {
        let line = LogLine {
            seq: 1,
            time: None,
            stage: "plan".into(),
            level: "warn".into(),
            text: "\x1b[2Jcleared\r\nok\rfake\n\x1b]0;title\x07".into(),
        };
        assert_eq!(
            format_line(&line),
            "[plan] WARN \\e[2Jcleared\n[plan] WARN ok\\rfake\n[plan] WARN \\e]0;title\\x07"
        );
    }

    #[test]
    fn digests_are_64_hex_characters() {
        let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert_eq!(parse_digest(digest).unwrap(), digest);
        assert_eq!(parse_digest(&digest.to_uppercase()).unwrap(), digest);
        assert_eq!(parse_digest(&format!(" {digest}\n")).unwrap(), digest);
        for bad in [
            "",
            "0000",
            &digest[1..],
            &format!("{digest}0"),
            &digest.replace('9', "g"),
            &format!("{}\x1b", &digest[1..]),
        ] {
            let error = parse_digest(bad).unwrap_err();
            assert!(error.contains("64 hex characters"), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }
}
