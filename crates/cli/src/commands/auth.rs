//! `abode login`, `abode logout` and `abode users`: getting and managing sessions.

use abode_client::config;
use abode_client::Client;
use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output;
use crate::password::read_password_stdin;

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server's URL, e.g. http://127.0.0.1:7080.
    pub url: String,
    /// Create the server's first user (it becomes owner) instead of logging in.
    #[arg(long)]
    pub first_user: bool,
    /// The user name (with a password); without it, sign in through the
    /// server's single sign-on in a browser.
    #[arg(
        long,
        requires = "password_stdin",
        required_if_eq("first_user", "true")
    )]
    pub username: Option<String>,
    /// The e-mail address (required with --first-user).
    #[arg(long, required_if_eq("first_user", "true"))]
    pub email: Option<String>,
    /// Read the password from the first line of standard input (the only way:
    /// passwords never go on the command line).
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// Single sign-on without opening a browser here: print the URL, and
    /// read the code the page shows from standard input.
    #[arg(long, conflicts_with = "username")]
    pub no_browser: bool,
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a user (owners; user-admins create members).
    Create(CreateUserArgs),
    /// Add or remove roles of a user (owners only) and print the roles they
    /// hold afterwards.
    Roles(RolesArgs),
    /// Show the logged-in user.
    Me(OutputArgs),
    /// List users with their roles and status (owners and user-admins).
    List(ListUsersArgs),
    /// Show one user: roles, status, when last seen.
    Show(ShowUserArgs),
    /// Suspend a user: their sessions and API tokens are refused from the
    /// next request, their workspaces are not autostarted, nothing is sent
    /// to them (owners and user-admins; never the last owner).
    Suspend(StatusArgs),
    /// Activate a suspended or dormant user: their sessions and tokens work
    /// again.
    Activate(StatusArgs),
    /// Delete a user who owns no workspace: every session and token ends;
    /// the account stays in the history under its name.
    Delete(StatusArgs),
    /// Change your own password: reads the current password, then the new
    /// one, from the first two lines of standard input. Your other
    /// sessions end.
    Password(PasswordArgs),
}

#[derive(Debug, Args)]
pub struct ListUsersArgs {
    /// Deleted accounts too.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ShowUserArgs {
    pub username: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    pub username: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct PasswordArgs {
    /// Read the current and new passwords from standard input (the only
    /// way: passwords never go on the command line).
    #[arg(long, required = true)]
    pub password_stdin: bool,
}

#[derive(Debug, Args)]
pub struct CreateUserArgs {
    /// The new user's name.
    pub username: String,
    /// The new user's e-mail address.
    #[arg(long)]
    pub email: String,
    /// The new user's roles: owner, template-admin, user-admin, auditor,
    /// member (repeat the option or separate with commas).
    #[arg(long, value_delimiter = ',', default_value = "member")]
    pub role: Vec<String>,
    /// Read the new user's password from the first line of standard input.
    #[arg(long, required = true)]
    pub password_stdin: bool,
}

#[derive(Debug, Args)]
pub struct RolesArgs {
    /// The user whose roles change.
    pub username: String,
    /// Roles to grant (repeat the option or separate with commas).
    #[arg(long, value_delimiter = ',')]
    pub add: Vec<String>,
    /// Roles to take away (repeat the option or separate with commas).
    #[arg(long, value_delimiter = ',')]
    pub remove: Vec<String>,
}

fn normalise_url(url: &str) -> anyhow::Result<String> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        anyhow::bail!("server URL {url:?} must start with http:// or https://");
    }
    Ok(url.to_string())
}

pub fn login(args: LoginArgs) -> anyhow::Result<u8> {
    let url = normalise_url(&args.url)?;
    let client = Client::new(&url, None);
    let answer = match &args.username {
        Some(username) => {
            let password = read_password_stdin()?;
            if args.first_user {
                let email = args.email.as_deref().unwrap_or_default();
                client
                    .create_first_user(username, email, &password)
                    .context("cannot create the first user")?
            } else {
                client.login(username, &password).context("cannot log in")?
            }
        }
        None => super::sso::sign_in(&client, &url, args.no_browser)?,
    };
    let dir = config::config_dir()?;
    let session = config::Session {
        url: url.clone(),
        token: answer.token,
        username: Some(answer.user.username.clone()),
    };
    let path = config::save_session(&dir, &session)?;
    println!(
        "Logged in to {url} as {} ({}); session saved in {}",
        output::visible(&answer.user.username),
        output::visible(&answer.user.roles_text()),
        path.display()
    );
    Ok(EXIT_OK)
}

/// Revokes the session on the server, then forgets it locally. The local
/// copy goes whatever the server said: a session that is already expired or
/// revoked (401) is as good as ended; one the server could not be asked to end
/// (unreachable) is reported as an error after it is forgotten, since it still
/// works until it expires.
pub fn logout() -> anyhow::Result<u8> {
    let dir = config::config_dir()?;
    let revoked = match super::current_session()? {
        Some(session) => Client::new(&session.url, Some(session.token)).logout(),
        None => Ok(()),
    };
    config::clear_session(&dir)?;
    match revoked {
        Ok(()) => println!("Logged out: the session is ended on the server and removed here"),
        Err(error) if error.status() == Some(401) => {
            println!("Logged out: the session had already ended; it is removed here")
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(
                "the stored session is removed here, but the server could not end it (it works until it expires)",
            ))
        }
    }
    Ok(EXIT_OK)
}

pub fn users(command: UsersCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        UsersCommand::Create(args) => {
            let password = read_password_stdin()?;
            let user = client
                .create_user(&args.username, &args.email, &password, &args.role)
                .with_context(|| format!("cannot create user {:?}", args.username))?;
            println!(
                "Created user {} ({})",
                output::visible(&user.username),
                output::visible(&user.roles_text())
            );
        }
        UsersCommand::Roles(args) => {
            if args.add.is_empty() && args.remove.is_empty() {
                anyhow::bail!("give --add ROLE and/or --remove ROLE");
            }
            let user = client
                .change_roles(&args.username, &args.add, &args.remove)
                .with_context(|| format!("cannot change the roles of {:?}", args.username))?;
            println!(
                "{} now holds: {}",
                output::visible(&user.username),
                output::visible(&user.roles_text())
            );
        }
        UsersCommand::List(args) => {
            let users = client.users_with(None, args.all)?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&users)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = users
                        .iter()
                        .map(|user| {
                            vec![
                                user.username.clone(),
                                user.email.clone(),
                                user.roles_text(),
                                user.groups.as_deref().unwrap_or_default().join(", "),
                                status_of(user).to_string(),
                                user.last_seen_at.clone().unwrap_or_else(|| "-".into()),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &[
                            "USERNAME",
                            "EMAIL",
                            "ROLES",
                            "GROUPS",
                            "STATUS",
                            "LAST SEEN",
                        ],
                        &rows,
                        "No users.",
                    );
                }
            }
        }
        UsersCommand::Show(args) => {
            let user = client
                .user(&args.username)
                .with_context(|| format!("cannot show user {:?}", args.username))?;
            print_user(&user, args.output.output)?;
        }
        UsersCommand::Suspend(args) => {
            let user = client
                .set_user_status(&args.username, "suspend")
                .with_context(|| format!("cannot suspend {:?}", args.username))?;
            print_status(&user, args.output.output)?;
        }
        UsersCommand::Activate(args) => {
            let user = client
                .set_user_status(&args.username, "activate")
                .with_context(|| format!("cannot activate {:?}", args.username))?;
            print_status(&user, args.output.output)?;
        }
        UsersCommand::Delete(args) => {
            let user = client
                .delete_user(&args.username)
                .with_context(|| format!("cannot delete {:?}", args.username))?;
            print_status(&user, args.output.output)?;
        }
        UsersCommand::Password(_) => {
            let current = read_password_stdin().context("reading the current password")?;
            let new = read_password_stdin().context("reading the new password")?;
            let ended = client
                .change_password(&current, &new)
                .context("cannot change your password")?;
            println!("Password changed; {ended} other session(s) ended");
        }
        UsersCommand::Me(args) => {
            let user = client.me()?;
            match args.output {
                OutputFormat::Json => output::print_json(&user)?,
                OutputFormat::Text => {
                    println!("username: {}", output::visible(&user.username));
                    println!("email:    {}", output::visible(&user.email));
                    println!("roles:    {}", output::visible(&user.roles_text()));
                    println!("server:   {}", client.base_url());
                }
            }
        }
    }
    Ok(EXIT_OK)
}

/// An account's status as the server says it (older servers: active).
fn status_of(user: &abode_sdk::User) -> &str {
    user.status.as_deref().unwrap_or("active")
}

fn print_user(user: &abode_sdk::User, format: OutputFormat) -> anyhow::Result<()> {
    match format {
        OutputFormat::Json => output::print_json(user)?,
        OutputFormat::Text => {
            println!("username:  {}", output::visible(&user.username));
            println!("email:     {}", output::visible(&user.email));
            println!("roles:     {}", output::visible(&user.roles_text()));
            println!(
                "groups:    {}",
                output::visible(&user.groups.as_deref().unwrap_or_default().join(", "))
            );
            println!("status:    {}", output::visible(status_of(user)));
            println!(
                "last seen: {}",
                output::visible(user.last_seen_at.as_deref().unwrap_or("-"))
            );
        }
    }
    Ok(())
}

fn print_status(user: &abode_sdk::User, format: OutputFormat) -> anyhow::Result<()> {
    match format {
        OutputFormat::Json => output::print_json(user)?,
        OutputFormat::Text => println!(
            "{} is {}",
            output::visible(&user.username),
            output::visible(status_of(user))
        ),
    }
    Ok(())
}
