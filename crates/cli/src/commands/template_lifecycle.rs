//! `abode templates deprecate`, `undeprecate` and `link`: retiring a
//! template gently (no new workspaces, existing ones keep working), and a
//! dashboard link that opens its create form with values filled in.

use anyhow::Context;
use clap::Args;

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

#[derive(Debug, Args)]
pub struct DeprecateArgs {
    /// The template's name.
    pub name: String,
    /// Why, as people creating a workspace are told (one line).
    #[arg(long, short = 'm')]
    pub message: String,
    /// The template to use instead.
    #[arg(long)]
    pub replacement: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct UndeprecateArgs {
    /// The template's name.
    pub name: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct LinkArgs {
    /// The template's name.
    pub name: String,
    /// The workspace name the form starts with.
    #[arg(long = "name", value_name = "NAME")]
    pub name_value: Option<String>,
    /// A parameter value the form starts with (`name=value`, repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// `form` (the default) opens the form; `auto` shows it filled in with
    /// one button that creates the workspace (never without that click).
    #[arg(long, value_parser = ["form", "auto"], default_value = "form")]
    pub mode: String,
}

/// `abode templates deprecate T --message M [--replacement T2]`.
pub fn deprecate(args: DeprecateArgs) -> anyhow::Result<u8> {
    let template = session_client()?
        .deprecate_template(&args.name, &args.message, args.replacement.as_deref())
        .with_context(|| format!("template {:?} was not deprecated", args.name))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&template)?,
        OutputFormat::Text => println!(
            "Template {} is deprecated: it takes no new workspaces; its workspaces keep working",
            visible(&template.name)
        ),
    }
    Ok(EXIT_OK)
}

/// `abode templates undeprecate T`.
pub fn undeprecate(args: UndeprecateArgs) -> anyhow::Result<u8> {
    let template = session_client()?
        .undeprecate_template(&args.name)
        .with_context(|| format!("template {:?} was not undeprecated", args.name))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&template)?,
        OutputFormat::Text => println!(
            "Template {} is no longer deprecated: it takes new workspaces",
            visible(&template.name)
        ),
    }
    Ok(EXIT_OK)
}

/// `abode templates link T [--name N] [--param k=v]... [--mode auto]`:
/// the dashboard's create link, from the server this CLI is signed in to.
pub fn link(args: LinkArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let template = client
        .template(&args.name)
        .with_context(|| format!("no link to template {:?}", args.name))?;
    let mut query = Vec::new();
    if let Some(name) = &args.name_value {
        query.push(format!("name={}", encode(name)));
    }
    for param in &args.params {
        let (key, value) = param
            .split_once('=')
            .filter(|(key, _)| !key.is_empty())
            .with_context(|| format!("--param {param:?} is not NAME=VALUE"))?;
        query.push(format!("param.{}={}", encode(key), encode(value)));
    }
    query.push(format!("mode={}", args.mode));
    println!(
        "{}/templates/{}/create?{}",
        client.base_url(),
        encode(&template.name),
        query.join("&")
    );
    Ok(EXIT_OK)
}

/// `text` as a URL's query value or path segment: unreserved characters
/// stay, every other byte is `%XX`.
fn encode(text: &str) -> String {
    let mut encoded = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_percent_encoded() {
        assert_eq!(encode("a b&c=d/é~"), "a%20b%26c%3Dd%2F%C3%A9~");
    }
}
