//! Fleet previews in the CLI: `abode templates versions preview` (start one
//! and wait for its report), the report as `versions show` prints it, and
//! the question `versions activate` asks when the latest preview would hold
//! or block workspaces (docs/cli.md, "Fleet previews").

use std::time::Duration;

use abode_client::Client;
use abode_sdk::{Preview, PreviewReport, PreviewResult};
use anyhow::Context;
use clap::Args;
use serde_json::Value;

use super::guard::describe_protected_changes;
use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

/// How often a waiting `preview` asks how far the preview got.
const POLL: Duration = Duration::from_millis(500);

#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// The template's name.
    pub name: String,
    /// The version to preview.
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub version: u64,
    /// Preview only this workspace (`name` or `owner/name`), whatever version
    /// it is on; repeatable. Default: every live workspace not on the version.
    #[arg(long = "workspace", value_name = "WS")]
    pub workspaces: Vec<String>,
    /// Start the preview and return without waiting for its report
    /// (`abode templates versions show` prints it later).
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn preview(args: PreviewArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let started = client
        .start_preview(&args.name, args.version, &args.workspaces)
        .with_context(|| {
            format!(
                "version {} of template {:?} was not previewed",
                args.version, args.name
            )
        })?;
    let text = args.output.output == OutputFormat::Text;
    if args.no_wait {
        match args.output.output {
            OutputFormat::Json => output::print_json(&started)?,
            OutputFormat::Text => println!("{}", started_line(&started)),
        }
        return Ok(EXIT_OK);
    }
    if text {
        eprintln!(
            "{} (Ctrl-C stops waiting; the preview goes on)",
            started_line(&started)
        );
    }
    let report = wait_for(&client, &args.name, args.version, &started.id, text)?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&report)?,
        OutputFormat::Text => print_report(&report),
    }
    Ok(exit_status(&report.preview))
}

fn started_line(preview: &Preview) -> String {
    format!(
        "Preview {} of template {} version {}: {} workspace{} to plan, nothing is applied",
        preview.id,
        visible(&preview.template),
        preview.version,
        preview.total,
        plural(preview.total)
    )
}

/// Waits until preview `id` has planned every workspace, telling progress
/// on standard error.
fn wait_for(
    client: &Client,
    name: &str,
    version: u64,
    id: &str,
    tell: bool,
) -> anyhow::Result<PreviewReport> {
    let mut told = None;
    loop {
        let preview = client
            .latest_preview_summary(name, version)?
            .filter(|preview| preview.id == id)
            .ok_or_else(|| {
                anyhow::anyhow!("a newer preview of version {version} of template {name:?} replaced this one; `abode templates versions show` prints it")
            })?;
        if preview.done {
            let report = client
                .latest_preview(name, version)?
                .filter(|report| report.preview.id == id)
                .ok_or_else(|| anyhow::anyhow!("the preview's report was not found"))?;
            return Ok(report);
        }
        let planned = preview.total - preview.pending;
        if tell && told != Some(planned) {
            eprintln!("  {planned} of {} planned", preview.total);
            told = Some(planned);
        }
        std::thread::sleep(POLL);
    }
}

/// Exit status of a finished preview, worst first: 4 if a build of the
/// version would be blocked, 3 if one would be held, 1 if a plan failed,
/// else 0 (the same 3 and 4 as `abode plan check`).
fn exit_status(preview: &Preview) -> u8 {
    if preview.blocked > 0 {
        crate::exit::BLOCKED
    } else if preview.held > 0 {
        crate::exit::CONFIRMATION_REQUIRED
    } else if preview.failed > 0 {
        crate::exit::FAILURE
    } else {
        EXIT_OK
    }
}

/// The summary line: counts and what activation would need.
pub fn summary_line(preview: &Preview) -> String {
    let mut line = format!(
        "{} workspace{}: {} would be held, {} blocked, {} allowed, {} failed to plan",
        preview.total,
        plural(preview.total),
        preview.held,
        preview.blocked,
        preview.allowed,
        preview.failed
    );
    if preview.skipped > 0 {
        line.push_str(&format!(", {} skipped", preview.skipped));
    }
    if preview.pending > 0 {
        line.push_str(&format!(", {} still to plan", preview.pending));
    }
    line
}

/// The report: the summary, a table of every workspace, then each held,
/// blocked or failed workspace's protected changes (with the lint rule
/// behind them) or error.
pub fn print_report(report: &PreviewReport) {
    let preview = &report.preview;
    println!(
        "Preview {} of template {} version {} by {} ({}): {}",
        preview.id,
        visible(&preview.template),
        preview.version,
        visible(&preview.requested_by),
        output::time(Some(&preview.created_at)),
        summary_line(preview)
    );
    if report.results.is_empty() {
        println!("No workspace to preview: every live workspace is on this version.");
        return;
    }
    let rows: Vec<Vec<String>> = report.results.iter().map(result_row).collect();
    output::print_table(
        &[
            "WORKSPACE",
            "AS",
            "DECISION",
            "CREATE",
            "UPDATE",
            "REPLACE",
            "DELETE",
        ],
        &rows,
        "",
    );
    for result in &report.results {
        let details = result_details(result);
        if !details.is_empty() {
            println!();
            println!("{}:", visible(&result.workspace));
            for line in details {
                println!("{line}");
            }
        }
    }
}

fn result_row(result: &PreviewResult) -> Vec<String> {
    let counts = result
        .report
        .as_ref()
        .and_then(|report| report.get("summary"))
        .map(|summary| {
            ["create", "update", "replace", "delete"].map(|key| {
                summary
                    .get(key)
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .to_string()
            })
        })
        .unwrap_or_else(|| ["-", "-", "-", "-"].map(String::from));
    let decision = match (&result.decision, result.status.as_str()) {
        (Some(decision), _) => decision_word(decision).to_string(),
        (None, "failed") => "error".to_string(),
        (None, status) => status.to_string(),
    };
    let mut row = vec![
        result.workspace.clone(),
        result.transition.clone().unwrap_or_else(|| "-".into()),
        decision,
    ];
    row.extend(counts);
    row
}

/// What a build of the version would get, as people say it.
fn decision_word(decision: &str) -> &str {
    match decision {
        "confirm" => "held",
        "block" => "blocked",
        "allow" => "allowed",
        other => other,
    }
}

fn result_details(result: &PreviewResult) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(error) = &result.error {
        lines.push(format!("  {}", visible(error)));
    }
    if let Some(report) = &result.report {
        lines.extend(describe_protected_changes(report));
    }
    for link in &result.lint {
        let attribute = link
            .attribute
            .as_deref()
            .map(|attribute| format!(" ({})", visible(attribute)))
            .unwrap_or_default();
        lines.push(format!(
            "      the lint flagged it: {}{attribute} (`abode templates lint` explains the fix)",
            visible(&link.rule)
        ));
    }
    lines
}

fn plural(count: u64) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// What `activate` does about the version's latest preview: the preview's
/// id to acknowledge, or the exit status when the activation must not go
/// on (told on standard error). `yes` is `--yes`.
pub fn activation_acknowledgement(
    client: &Client,
    name: &str,
    version: u64,
    yes: bool,
) -> anyhow::Result<Result<Option<String>, u8>> {
    let detail = client.template_version(name, version)?;
    let Some(preview) = detail.preview else {
        return Ok(Ok(None));
    };
    // The preview weighed may be of another version with the same files
    // (the same folder pushed again).
    if preview.version == version {
        eprintln!(
            "Latest preview of version {version} ({}): {}",
            preview.id,
            summary_line(&preview)
        );
    } else {
        eprintln!(
            "Latest preview of version {version}'s files (of version {}, {}): {}",
            preview.version,
            preview.id,
            summary_line(&preview)
        );
    }
    let Some(concern) = preview.activation_concern.as_deref() else {
        return Ok(Ok(None));
    };
    if yes {
        eprintln!("Activating although {} (--yes).", visible(concern));
        return Ok(Ok(Some(preview.id)));
    }
    if !super::builds::interactive() {
        eprintln!(
            "error: version {version} of template {} was not activated: {}; review it with `abode templates versions show {} {version}`, then activate with --yes",
            visible(name),
            visible(concern),
            visible(name)
        );
        return Ok(Err(crate::exit::CONFIRMATION_REQUIRED));
    }
    if let Ok(Some(report)) = client.latest_preview(name, preview.version) {
        print_report(&report);
    }
    let question = format!(
        "Version {version} of template {} cannot reach every workspace safely: {}.",
        visible(name),
        visible(concern)
    );
    if super::builds::ask_yes(
        &question,
        "Type yes to activate it anyway (anything else activates nothing): ",
    )? {
        Ok(Ok(Some(preview.id)))
    } else {
        eprintln!("error: version {version} was not activated (the answer was not `yes`)");
        Ok(Err(crate::exit::FAILURE))
    }
}
