//! `abode templates`: lint a template folder, push it as a new version (with
//! the server's lint findings, refused by `--strict` on an error), list,
//! show a version with its findings, activate, and list a version's presets.

use std::path::PathBuf;

use abode_client::archive;
use abode_sdk::{LintFinding, LintReport};
use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, or_dash, time, visible};

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Check a template folder for hazards to workspaces' data (exit 0 clean
    /// or warnings only, 1 errors found, 2 unreadable input; docs/lint.md).
    Lint(LintArgs),
    /// Upload a template folder as a new version (the first version is active).
    Push(PushArgs),
    /// List templates.
    List(ListArgs),
    /// List or activate template versions.
    #[command(subcommand)]
    Versions(VersionsCommand),
    /// List the presets of a template version (default: the active one).
    Presets(PresetsArgs),
    /// Change a template's lifecycle policy: autostop, autostart days,
    /// failure cleanup, dormancy (template admins).
    Edit(super::schedule::EditPolicyArgs),
    /// Show a template's lifecycle policy.
    Policy(super::schedule::PolicyArgs),
    /// Show a template's access list, or set one entry of it
    /// (`--user U|--group G --role use|admin|none`).
    Permissions(super::template_permissions::PermissionsArgs),
    /// Show, or set with `--max owner|authenticated|public`, how far this
    /// template's workspaces may share ports (`abode port-share`).
    PortShare(super::port_share::TemplateMaxArgs),
    /// Retire a template gently: it takes no new workspaces (creating one
    /// is refused with the message), its workspaces keep working.
    Deprecate(super::template_lifecycle::DeprecateArgs),
    /// Take a template's deprecation back: it takes new workspaces again.
    Undeprecate(super::template_lifecycle::UndeprecateArgs),
    /// Print a dashboard link that opens the template's create form with
    /// values filled in.
    Link(super::template_lifecycle::LinkArgs),
}

#[derive(Debug, Args)]
pub struct PresetsArgs {
    /// The template's name.
    pub name: String,
    /// The version whose presets to list (default: the active version).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub version: Option<u64>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The template's name (created on the first push).
    pub name: String,
    /// The folder holding the template's .tf files.
    #[arg(long, short = 'd', default_value = ".")]
    pub directory: PathBuf,
    /// Make the new version the active one (new workspaces and updates use it).
    #[arg(long)]
    pub activate: bool,
    /// A note kept with the version.
    #[arg(long, short = 'm')]
    pub message: Option<String>,
    /// Refuse the push when the server's lint finds an error-level hazard.
    #[arg(long)]
    pub strict: bool,
    /// A provisioner tag its builds need (`key=value`, repeatable): only
    /// provisioners that offer every one take its jobs (docs/deployment.md).
    #[arg(long = "provisioner-tag", value_name = "KEY=VALUE")]
    pub provisioner_tags: Vec<String>,
    /// Start a fleet preview of the new version on every live workspace of
    /// the template (`abode templates versions show` prints its report).
    #[arg(long)]
    pub preview: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// The folder holding the template's .tf files (local modules are followed).
    #[arg(default_value = ".")]
    pub directory: PathBuf,
    /// Also treat a resource type as persistent, with the attributes that
    /// decide its identity (default `name`; dotted paths go through nested
    /// blocks). Repeatable.
    #[arg(long = "persistent-type", value_name = "TYPE[=ATTR,...]")]
    pub persistent_types: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct VersionShowArgs {
    /// The template's name.
    pub name: String,
    /// The version number.
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub version: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum VersionsCommand {
    /// List the versions of a template.
    List(VersionsListArgs),
    /// Show a version with the lint's findings and its latest fleet preview.
    Show(VersionShowArgs),
    /// Plan a version against the template's workspaces, never applying,
    /// and report what the guard would say for each (exit 0 all allowed, 3
    /// some would be held, 4 some blocked, 1 some failed to plan).
    Preview(super::previews::PreviewArgs),
    /// Make a version the active one (asks first when its latest preview
    /// would hold or block workspaces).
    Activate(ActivateArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// At most this many templates (default: all, read page by page).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct VersionsListArgs {
    /// The template's name.
    pub name: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ActivateArgs {
    /// The template's name.
    pub name: String,
    /// The version number to activate.
    pub version: u64,
    /// Activate even though the version's latest preview would hold or
    /// block workspaces (needed off a terminal; recorded in the audit log).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(command: TemplatesCommand) -> anyhow::Result<u8> {
    match command {
        TemplatesCommand::Lint(args) => lint(args),
        TemplatesCommand::Push(args) => push(args),
        TemplatesCommand::List(args) => list(args),
        TemplatesCommand::Versions(VersionsCommand::List(args)) => versions(args),
        TemplatesCommand::Versions(VersionsCommand::Show(args)) => show_version(args),
        TemplatesCommand::Versions(VersionsCommand::Preview(args)) => {
            super::previews::preview(args)
        }
        TemplatesCommand::Versions(VersionsCommand::Activate(args)) => activate(args),
        TemplatesCommand::Presets(args) => presets(args),
        TemplatesCommand::Edit(args) => super::schedule::edit_policy(args),
        TemplatesCommand::Policy(args) => super::schedule::show_policy(args),
        TemplatesCommand::Permissions(args) => super::template_permissions::run(args),
        TemplatesCommand::PortShare(args) => super::port_share::template_max(args),
        TemplatesCommand::Deprecate(args) => super::template_lifecycle::deprecate(args),
        TemplatesCommand::Undeprecate(args) => super::template_lifecycle::undeprecate(args),
        TemplatesCommand::Link(args) => super::template_lifecycle::link(args),
    }
}

fn push(args: PushArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let bytes = archive::pack_template(&args.directory)?;
    if args.output.output == OutputFormat::Text {
        eprintln!(
            "Uploading {} ({} bytes packed); the server runs terraform init and validate...",
            args.directory.display(),
            bytes.len()
        );
    }
    let pushed = client
        .push_template_with(
            &args.name,
            &bytes,
            args.activate,
            args.message.as_deref(),
            args.strict,
            &args.provisioner_tags,
        )
        .with_context(|| format!("template {:?} was not pushed", args.name))?;
    if let Some(warning) = &pushed.warning {
        eprintln!("warning: builds of this version wait: {}", visible(warning));
    }
    match args.output.output {
        OutputFormat::Json => output::print_json(&pushed)?,
        OutputFormat::Text => {
            let state = if pushed.version.active {
                "active"
            } else {
                "not active; `abode templates versions activate` makes it so"
            };
            println!(
                "Pushed template {} version {} ({state})",
                visible(&pushed.template.name),
                pushed.version.number
            );
            // Terraform's validation text quotes the template's own text.
            for line in pushed.version.validation.message.lines() {
                println!("Validation: {}", visible(line));
            }
            if let Some(lint) = &pushed.lint {
                print_findings(&lint.findings);
                println!("Lint: {}", lint_summary(lint));
                // The findings say what could go wrong; the preview, to whom.
                if lint.errors + lint.warnings > 0 && !args.preview {
                    println!(
                        "Which workspaces a finding would reach: abode templates versions preview {} {}",
                        visible(&pushed.template.name),
                        pushed.version.number
                    );
                }
            }
        }
    }
    if args.preview {
        let preview = client
            .start_preview(&args.name, pushed.version.number, &[])
            .with_context(|| {
                format!(
                    "version {} was pushed, but its preview was not started",
                    pushed.version.number
                )
            })?;
        eprintln!(
            "Preview {} started on {} workspace(s); `abode templates versions show {} {}` prints its report",
            preview.id,
            preview.total,
            visible(&args.name),
            pushed.version.number
        );
    }
    Ok(EXIT_OK)
}

/// `abode templates lint DIR`: the lint on a local folder, no server needed.
fn lint(args: LintArgs) -> anyhow::Result<u8> {
    let mut options = abode_lint::Options::default();
    let report = args
        .persistent_types
        .iter()
        .try_for_each(|spec| options.persistent_types.add(spec))
        .and_then(|()| abode_lint::lint_dir(&args.directory, &options));
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {}", visible(&error.to_string()));
            return Ok(crate::exit::USAGE);
        }
    };
    match args.output.output {
        OutputFormat::Json => output::print_json(&report)?,
        OutputFormat::Text => {
            let shown: LintReport = serde_json::from_value(serde_json::to_value(&report)?)?;
            print_findings(&shown.findings);
            println!(
                "{}: {}",
                visible(&args.directory.display().to_string()),
                report.summary()
            );
        }
    }
    Ok(if report.has_errors() {
        crate::exit::FAILURE
    } else {
        EXIT_OK
    })
}

fn show_version(args: VersionShowArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let detail = client
        .template_version(&args.name, args.version)
        .with_context(|| {
            format!(
                "version {} of template {:?} was not read",
                args.version, args.name
            )
        })?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&detail)?,
        OutputFormat::Text => {
            let version = &detail.version;
            println!("Template:   {}", visible(&version.template));
            println!(
                "Version:    {}{}",
                version.number,
                if version.active { " (active)" } else { "" }
            );
            println!(
                "Created by: {}",
                visible(&or_dash(version.created_by.as_deref()))
            );
            println!("Created:    {}", time(version.created_at.as_deref()));
            println!(
                "Message:    {}",
                visible(&or_dash(version.message.as_deref()))
            );
            for line in version.validation.message.lines() {
                println!("Validation: {}", visible(line));
            }
            if !detail.provisioner_tags.is_empty() {
                println!(
                    "Provisioner tags: {}",
                    visible(&detail.provisioner_tags.join(", "))
                );
            }
            match &detail.lint {
                Some(lint) => {
                    println!("Lint:       {}", lint_summary(lint));
                    print_findings(&lint.findings);
                }
                None => println!("Lint:       not linted (pushed before the lint existed)"),
            }
            match &detail.preview {
                // Who may not read previews' workspaces sees the counts.
                Some(preview) => match client.latest_preview(&args.name, args.version) {
                    Ok(Some(report)) if report.preview.id == preview.id => {
                        println!();
                        super::previews::print_report(&report);
                    }
                    _ => println!("Preview:    {}", super::previews::summary_line(preview)),
                },
                None => println!("Preview:    none (`abode templates versions preview` makes one)"),
            }
        }
    }
    Ok(EXIT_OK)
}

/// Each finding as three lines (where and what, why, how to fix), every
/// part made visible: file names and HCL text are the template author's.
fn print_findings(findings: &[LintFinding]) {
    for finding in findings {
        let attribute = finding
            .attribute
            .as_deref()
            .map(|a| format!(" ({})", visible(a)))
            .unwrap_or_default();
        println!(
            "{}:{}:{}: {} {}: {}{attribute}",
            visible(&finding.file),
            finding.line,
            finding.column,
            visible(&finding.severity),
            visible(&finding.rule),
            visible(&finding.resource),
        );
        println!("  why: {}", visible(&finding.message));
        println!("  fix: {}", visible(&finding.fix));
    }
}

/// `1 error, 2 warnings`, `no findings`, or why the server could not lint.
fn lint_summary(lint: &LintReport) -> String {
    match &lint.failure {
        Some(failure) => format!("not linted: {}", visible(failure)),
        None => abode_lint::summary(lint.errors, lint.warnings),
    }
}

fn list(args: ListArgs) -> anyhow::Result<u8> {
    let templates = session_client()?.templates(args.limit.map(|n| n as usize))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&templates)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = templates
                .iter()
                .map(|template| {
                    vec![
                        template.name.clone(),
                        template
                            .active_version
                            .map_or_else(|| "-".into(), |n| n.to_string()),
                        time(template.updated_at.as_deref()),
                        template.deprecation.as_ref().map_or_else(
                            || "-".into(),
                            |deprecation| {
                                visible(&abode_sdk::deprecation::notice(
                                    &deprecation.message,
                                    deprecation.replacement.as_deref(),
                                ))
                            },
                        ),
                    ]
                })
                .collect();
            output::print_table(
                &["NAME", "ACTIVE VERSION", "UPDATED", "DEPRECATED"],
                &rows,
                "No templates yet: `abode templates push NAME --directory DIR` adds one.",
            );
        }
    }
    Ok(EXIT_OK)
}

fn versions(args: VersionsListArgs) -> anyhow::Result<u8> {
    let versions = session_client()?.template_versions(&args.name)?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&versions)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = versions
                .iter()
                .map(|version| {
                    vec![
                        version.number.to_string(),
                        if version.active { "yes" } else { "no" }.into(),
                        or_dash(version.created_by.as_deref()),
                        time(version.created_at.as_deref()),
                        or_dash(version.message.as_deref()),
                    ]
                })
                .collect();
            output::print_table(
                &["VERSION", "ACTIVE", "CREATED BY", "CREATED", "MESSAGE"],
                &rows,
                "No versions.",
            );
        }
    }
    Ok(EXIT_OK)
}

fn presets(args: PresetsArgs) -> anyhow::Result<u8> {
    let answer = session_client()?
        .template_presets(&args.name, args.version)
        .with_context(|| format!("the presets of template {:?} were not read", args.name))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&answer.presets)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = answer
                .presets
                .iter()
                .map(|preset| {
                    let parameters: Vec<String> = preset
                        .parameters
                        .iter()
                        .map(|(name, value)| format!("{name}={value}"))
                        .collect();
                    vec![
                        preset.name.clone(),
                        if parameters.is_empty() {
                            "-".into()
                        } else {
                            parameters.join(", ")
                        },
                        preset
                            .prebuilds
                            .as_ref()
                            .map_or_else(|| "-".into(), prebuilds_summary),
                    ]
                })
                .collect();
            output::print_table(
                &["NAME", "PARAMETERS", "PREBUILDS"],
                &rows,
                &format!(
                    "Version {} of template {} has no presets.",
                    answer.version,
                    visible(&answer.template)
                ),
            );
        }
    }
    Ok(EXIT_OK)
}

/// One cell: instances, lifetime and schedules, e.g.
/// `1 instance, ttl 1d, 2 schedules (Europe/Paris): * 8-18 * * 1-5 -> 3; ...`.
fn prebuilds_summary(prebuilds: &abode_sdk::PresetPrebuilds) -> String {
    let mut summary = format!(
        "{} instance{}",
        prebuilds.instances,
        if prebuilds.instances == 1 { "" } else { "s" }
    );
    if prebuilds.ttl_seconds > 0 {
        summary.push_str(&format!(", ttl {}", duration(prebuilds.ttl_seconds)));
    }
    if let Some(scheduling) = &prebuilds.scheduling {
        let schedules: Vec<String> = scheduling
            .schedules
            .iter()
            .map(|schedule| format!("{} -> {}", schedule.cron, schedule.instances))
            .collect();
        summary.push_str(&format!(
            ", {} schedule{} ({}): {}",
            schedules.len(),
            if schedules.len() == 1 { "" } else { "s" },
            scheduling.timezone,
            schedules.join("; ")
        ));
    }
    summary
}

/// Seconds in the largest whole unit: `1d`, `12h`, `90m`, `45s`.
fn duration(seconds: i64) -> String {
    match seconds {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn activate(args: ActivateArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let acknowledged = match super::previews::activation_acknowledgement(
        &client,
        &args.name,
        args.version,
        args.yes,
    )
    .with_context(|| {
        format!(
            "version {} of template {:?} was not activated",
            args.version, args.name
        )
    })? {
        Ok(acknowledged) => acknowledged,
        Err(status) => return Ok(status),
    };
    let answer = client
        .activate_version_acknowledging(&args.name, args.version, acknowledged.as_deref())
        .with_context(|| {
            format!(
                "version {} of template {:?} was not activated",
                args.version, args.name
            )
        })?;
    println!(
        "Template {} now uses version {}",
        visible(&answer.template.name),
        answer.version.number
    );
    // A reminder, not a refusal: the version was pushed with these findings.
    // (A server that cannot say has nothing to remind of.)
    if let Ok(detail) = client.template_version(&args.name, args.version) {
        if let Some(lint) = detail.lint.filter(|l| l.errors + l.warnings > 0) {
            eprintln!(
                "warning: version {} has lint findings: {}; `abode templates versions show {} {}` lists them",
                args.version,
                lint_summary(&lint),
                visible(&answer.template.name),
                args.version
            );
        }
    }
    Ok(EXIT_OK)
}
