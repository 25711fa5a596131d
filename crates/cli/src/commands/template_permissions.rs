//! `abode templates permissions T`: a template's access list, and one
//! entry set with `--user U|--group G --role use|admin|none` (template
//! admins, owners, and whoever holds `admin` on the template; docs/cli.md).

use anyhow::Context;
use clap::{Args, ValueEnum};

use abode_sdk::requests::TemplatePermissionChange;

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

#[derive(Debug, Args)]
pub struct PermissionsArgs {
    /// The template's name.
    pub name: String,
    /// The user whose entry to set.
    #[arg(long, conflicts_with = "group", requires = "role")]
    pub user: Option<String>,
    /// The group whose entry to set (`Everyone`: every person).
    #[arg(long, requires = "role")]
    pub group: Option<String>,
    /// The entry's role: `use` (see it, create workspaces from it), `admin`
    /// (also push and activate its versions, edit this list), `none`
    /// (remove the entry).
    #[arg(long, value_enum)]
    pub role: Option<PermissionRole>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionRole {
    Use,
    Admin,
    None,
}

impl PermissionRole {
    fn as_str(self) -> &'static str {
        match self {
            PermissionRole::Use => "use",
            PermissionRole::Admin => "admin",
            PermissionRole::None => "none",
        }
    }
}

pub fn run(args: PermissionsArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let permissions = match (&args.user, &args.group, args.role) {
        (None, None, None) => client
            .template_permissions(&args.name)
            .with_context(|| format!("cannot read the access list of template {:?}", args.name))?,
        (None, None, Some(_)) => {
            anyhow::bail!("--role needs --user USER or --group GROUP")
        }
        (user, group, role) => client
            .set_template_permission(
                &args.name,
                &TemplatePermissionChange {
                    user: user.clone(),
                    group: group.clone(),
                    role: role.unwrap_or(PermissionRole::None).as_str().to_string(),
                },
            )
            .with_context(|| {
                format!("cannot change the access list of template {:?}", args.name)
            })?,
    };
    match args.output.output {
        OutputFormat::Json => output::print_json(&permissions)?,
        OutputFormat::Text => {
            println!("Access list of template {}", visible(&permissions.template));
            let rows: Vec<Vec<String>> = permissions
                .permissions
                .iter()
                .map(|entry| vec![entry.kind.clone(), entry.name.clone(), entry.role.clone()])
                .collect();
            output::print_table(
                &["KIND", "NAME", "ROLE"],
                &rows,
                "Nobody but owners and template admins may use it \
                 (abode templates permissions NAME --group Everyone --role use).",
            );
        }
    }
    Ok(EXIT_OK)
}
