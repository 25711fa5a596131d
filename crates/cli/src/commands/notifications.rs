//! `abode notifications`: the caller's in-app inbox (held, blocked, failed
//! and expiring builds that concern them) and marking messages read.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputFormat, EXIT_OK};
use crate::output::{self, time};

#[derive(Debug, Subcommand)]
pub enum NotificationsCommand {
    /// List your notifications, newest first.
    List(ListArgs),
    /// Mark one notification (by id) or all of them read.
    Read(ReadArgs),
    /// Owners: deliveries the server gave up on, with their last error.
    Failed(FailedArgs),
    /// Show which kinds reach you; disable or enable kinds (owners: make
    /// kinds mandatory, so that nobody can disable them).
    Settings(SettingsArgs),
}

#[derive(Debug, Args)]
pub struct FailedArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// Stop receiving this kind (e.g. `build_failed`); repeatable.
    #[arg(long, value_name = "KIND")]
    pub disable: Vec<String>,
    /// Receive this kind again; repeatable.
    #[arg(long, value_name = "KIND")]
    pub enable: Vec<String>,
    /// Owners: nobody can disable this kind; repeatable.
    #[arg(long, value_name = "KIND")]
    pub mandatory: Vec<String>,
    /// Owners: people may disable this kind again; repeatable.
    #[arg(long, value_name = "KIND")]
    pub optional: Vec<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only the ones not read yet.
    #[arg(long)]
    pub unread: bool,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["id", "all"]))]
pub struct ReadArgs {
    /// The notification's id (from `abode notifications list`).
    pub id: Option<String>,
    /// Every notification.
    #[arg(long)]
    pub all: bool,
}

pub fn run(command: NotificationsCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        NotificationsCommand::List(args) => {
            let messages = client
                .notifications(args.unread, None)
                .context("cannot list notifications")?;
            match args.output {
                OutputFormat::Json => output::print_json(&messages)?,
                OutputFormat::Text => {
                    let field = |message: &abode_sdk::Notification, key: &str| match message
                        .payload
                        .get(key)
                    {
                        Some(serde_json::Value::String(text)) => text.clone(),
                        Some(serde_json::Value::Null) | None => "-".to_string(),
                        Some(other) => other.to_string(),
                    };
                    let rows: Vec<Vec<String>> = messages
                        .iter()
                        .map(|message| {
                            vec![
                                message.id.clone(),
                                time(message.created_at.as_deref()),
                                if message.read { "" } else { "*" }.to_string(),
                                message.kind.clone(),
                                field(message, "workspace"),
                                field(message, "build_number"),
                                field(message, "confirm_command"),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &[
                            "ID",
                            "TIME",
                            "NEW",
                            "KIND",
                            "WORKSPACE",
                            "BUILD",
                            "TO CONFIRM",
                        ],
                        &rows,
                        if args.unread {
                            "No unread notifications."
                        } else {
                            "No notifications."
                        },
                    );
                }
            }
        }
        NotificationsCommand::Failed(args) => {
            let failed = client
                .failed_notifications(None)
                .context("cannot list failed notifications")?;
            match args.output {
                OutputFormat::Json => output::print_json(&failed)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = failed
                        .iter()
                        .map(|message| {
                            vec![
                                message.id.clone(),
                                time(message.created_at.as_deref()),
                                message.kind.clone(),
                                message.recipient.clone(),
                                message.channel.clone(),
                                message.attempts.to_string(),
                                message.last_error.clone().unwrap_or_default(),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &[
                            "ID",
                            "TIME",
                            "KIND",
                            "TO",
                            "CHANNEL",
                            "ATTEMPTS",
                            "LAST ERROR",
                        ],
                        &rows,
                        "No failed notifications.",
                    );
                }
            }
        }
        NotificationsCommand::Settings(args) => {
            for (kinds, mandatory) in [(&args.mandatory, true), (&args.optional, false)] {
                for kind in kinds {
                    client
                        .set_notification_kind_mandatory(kind, mandatory)
                        .with_context(|| format!("cannot change whether {kind:?} is mandatory"))?;
                }
            }
            let settings = client
                .notification_settings(&args.disable, &args.enable)
                .context("cannot change notification settings")?;
            match args.output {
                OutputFormat::Json => output::print_json(&settings)?,
                OutputFormat::Text => {
                    let yes_no = |value: bool| if value { "yes" } else { "no" }.to_string();
                    let rows: Vec<Vec<String>> = settings
                        .iter()
                        .map(|setting| {
                            vec![
                                setting.kind.clone(),
                                yes_no(setting.enabled),
                                yes_no(setting.mandatory),
                            ]
                        })
                        .collect();
                    output::print_table(&["KIND", "ENABLED", "MANDATORY"], &rows, "");
                }
            }
        }
        NotificationsCommand::Read(args) => match args.id {
            Some(id) if !args.all => {
                let message = client
                    .read_notification(&id)
                    .with_context(|| format!("cannot mark notification {id:?} read"))?;
                println!("Marked notification {} read", output::visible(&message.id));
            }
            _ => {
                let marked = client
                    .read_all_notifications()
                    .context("cannot mark notifications read")?;
                println!("Marked {marked} notification(s) read");
            }
        },
    }
    Ok(EXIT_OK)
}
