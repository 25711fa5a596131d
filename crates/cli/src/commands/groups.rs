//! `abode groups`: groups of people (owners and user-admins manage them),
//! which templates' access lists name (`abode templates permissions`) and
//! which single sign-on's group sync keeps for `oidc` groups. The built-in
//! `Everyone` holds every person and cannot be changed (docs/cli.md).

use anyhow::Context;
use clap::{Args, Subcommand};

use abode_sdk::requests;

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, time, visible};

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Create a group (owners, user-admins).
    Create(CreateArgs),
    /// List the groups with their member counts.
    List(OutputArgs),
    /// Show a group and its members.
    Show(ShowArgs),
    /// Rename a group or change its display name, source or quota allowance.
    Edit(EditArgs),
    /// Delete a group (its members keep their accounts; access lists lose
    /// its entries).
    Delete(NameArgs),
    /// Add people (or `prebuilds`) to a group, or remove them.
    #[command(subcommand)]
    Members(MembersCommand),
}

#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// Add users to a group.
    Add(MembersArgs),
    /// Remove users from a group.
    Remove(MembersArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The group's name: 1-64 lowercase letters, digits and '-'.
    pub name: String,
    /// A name for people to read.
    #[arg(long, default_value = "")]
    pub display_name: String,
    /// Who keeps its members: `manual` (people) or `oidc` (group sync).
    #[arg(long, default_value = "manual")]
    pub source: String,
    /// The group's quota allowance (for quotas; 0: none).
    #[arg(long, default_value_t = 0)]
    pub quota_allowance: i64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    pub name: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct EditArgs {
    pub name: String,
    /// A new name.
    #[arg(long)]
    pub new_name: Option<String>,
    #[arg(long)]
    pub display_name: Option<String>,
    /// `manual` or `oidc`.
    #[arg(long)]
    pub source: Option<String>,
    #[arg(long)]
    pub quota_allowance: Option<i64>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    pub name: String,
}

#[derive(Debug, Args)]
pub struct MembersArgs {
    /// The group.
    pub group: String,
    /// Usernames (a person, or `prebuilds`).
    #[arg(required = true)]
    pub users: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: GroupsCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        GroupsCommand::Create(args) => {
            let group = client
                .create_group(&requests::NewGroup {
                    name: args.name.clone(),
                    display_name: args.display_name,
                    source: Some(args.source),
                    quota_allowance: args.quota_allowance,
                })
                .with_context(|| format!("cannot create group {:?}", args.name))?;
            print_group(&group, &[], args.output.output, "Created group")?;
        }
        GroupsCommand::List(args) => {
            let groups = client.groups().context("cannot list groups")?;
            match args.output {
                OutputFormat::Json => output::print_json(&groups)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = groups
                        .iter()
                        .map(|group| {
                            vec![
                                group.name.clone(),
                                group.display_name.clone(),
                                group.source.clone(),
                                group.members.to_string(),
                                group.quota_allowance.to_string(),
                                // Everyone was there before anyone made it.
                                if group.built_in {
                                    "built in".to_string()
                                } else {
                                    time(Some(&group.created_at))
                                },
                            ]
                        })
                        .collect();
                    output::print_table(
                        &[
                            "NAME",
                            "DISPLAY NAME",
                            "SOURCE",
                            "MEMBERS",
                            "QUOTA",
                            "CREATED",
                        ],
                        &rows,
                        "No groups.",
                    );
                }
            }
        }
        GroupsCommand::Show(args) => {
            let context = || format!("cannot show group {:?}", args.name);
            let group = client.group(&args.name).with_context(context)?;
            let members = client.group_members(&args.name).with_context(context)?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&serde_json::json!({
                    "group": group,
                    "members": members,
                }))?,
                OutputFormat::Text => {
                    print_group(&group, &members, OutputFormat::Text, "Group")?;
                }
            }
        }
        GroupsCommand::Edit(args) => {
            let group = client
                .edit_group(
                    &args.name,
                    &requests::GroupEdit {
                        name: args.new_name,
                        display_name: args.display_name,
                        source: args.source,
                        quota_allowance: args.quota_allowance,
                    },
                )
                .with_context(|| format!("cannot edit group {:?}", args.name))?;
            print_group(&group, &[], args.output.output, "Edited group")?;
        }
        GroupsCommand::Delete(args) => {
            client
                .delete_group(&args.name)
                .with_context(|| format!("cannot delete group {:?}", args.name))?;
            println!("Deleted group {}.", visible(&args.name));
        }
        GroupsCommand::Members(command) => {
            let (args, change, verb) = match command {
                MembersCommand::Add(args) => {
                    let change = requests::GroupMembersChange {
                        add: args.users.clone(),
                        remove: Vec::new(),
                    };
                    (args, change, "add members to")
                }
                MembersCommand::Remove(args) => {
                    let change = requests::GroupMembersChange {
                        add: Vec::new(),
                        remove: args.users.clone(),
                    };
                    (args, change, "remove members from")
                }
            };
            let group = client
                .change_group_members(&args.group, &change)
                .with_context(|| format!("cannot {verb} group {:?}", args.group))?;
            print_group(&group, &[], args.output.output, "Group")?;
        }
    }
    Ok(EXIT_OK)
}

fn print_group(
    group: &abode_sdk::Group,
    members: &[abode_sdk::GroupMember],
    format: OutputFormat,
    heading: &str,
) -> anyhow::Result<()> {
    if format == OutputFormat::Json {
        return output::print_json(group);
    }
    println!("{heading} {}", visible(&group.name));
    if !group.display_name.is_empty() {
        println!("  display name: {}", visible(&group.display_name));
    }
    let built_in = if group.built_in {
        " (built in: every person)"
    } else {
        ""
    };
    println!("  source: {}{built_in}", visible(&group.source));
    println!("  members: {}", group.members);
    println!("  quota allowance: {}", group.quota_allowance);
    if !members.is_empty() {
        let rows: Vec<Vec<String>> = members
            .iter()
            .map(|member| vec![member.username.clone(), member.email.clone()])
            .collect();
        println!();
        output::print_table(&["MEMBER", "EMAIL"], &rows, "");
    }
    Ok(())
}
