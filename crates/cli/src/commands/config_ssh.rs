//! `abode config-ssh`: a marked block in the OpenSSH client configuration
//! with a `Host abode.WS` entry per workspace of the signed-in user, whose
//! `ProxyCommand` is `abode ssh --stdio WS`. A re-run replaces the block in
//! place (never a second one); what is outside it is kept byte for byte.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

const BEGIN: &str =
    "# ------------ START ABODE SSH CONFIG (managed by `abode config-ssh`) ------------";
const END: &str = "# ------------ END ABODE SSH CONFIG ------------";

#[derive(Debug, Args)]
pub struct ConfigSshArgs {
    /// The OpenSSH client configuration to update (default: ~/.ssh/config).
    #[arg(long, value_name = "PATH")]
    pub ssh_config_file: Option<PathBuf>,
    /// Print the new file's block instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ConfigSshArgs) -> anyhow::Result<u8> {
    let client = super::session_client()?;
    let (names, block) = current_block(&client)?;
    if args.dry_run {
        print!("{block}");
        return Ok(super::EXIT_OK);
    }
    let path = match args.ssh_config_file {
        Some(path) => path,
        None => default_path()?,
    };
    let old = read_config(&path)?;
    let new = replace_block(&old, &block)?;
    if new != old {
        write(&path, &new)?;
    }
    println!(
        "{}: {} workspace{} (Host abode.NAME); connect with `ssh abode.NAME`",
        path.display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" }
    );
    Ok(super::EXIT_OK)
}

/// The signed-in user's workspace names and the block naming them.
fn current_block(client: &abode_client::Client) -> anyhow::Result<(Vec<String>, String)> {
    let me = client.me().context("cannot read your account")?;
    let mut names: Vec<String> = client
        .workspaces(&[], None)
        .context("cannot list your workspaces")?
        .into_iter()
        .filter(|workspace| workspace.owner == me.username)
        .map(|workspace| workspace.name)
        .collect();
    names.sort();
    let exe = std::env::current_exe().context("cannot tell where this abode binary is")?;
    let block = block(&exe, client.base_url(), &names);
    Ok((names, block))
}

fn default_path() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".ssh/config"))
        .context("HOME is not set: pass --ssh-config-file")
}

fn read_config(path: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// After a rename: rewrites the block of ~/.ssh/config if `abode
/// config-ssh` wrote one there, so that `ssh abode.NEW` works and
/// `abode.OLD` is gone; the file is not touched otherwise. The path it
/// rewrote, if it did.
pub(super) fn refresh_if_configured(
    client: &abode_client::Client,
) -> anyhow::Result<Option<PathBuf>> {
    let path = default_path()?;
    let old = read_config(&path)?;
    if !old.contains(BEGIN) {
        return Ok(None);
    }
    let (_, block) = current_block(client)?;
    let new = replace_block(&old, &block)?;
    if new == old {
        return Ok(None);
    }
    write(&path, &new)?;
    Ok(Some(path))
}

/// Single-quoted for the shell OpenSSH runs `ProxyCommand` with.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The managed block, ending with a newline.
fn block(exe: &Path, server: &str, names: &[String]) -> String {
    let mut out = String::new();
    out.push_str(BEGIN);
    out.push('\n');
    out.push_str(&format!(
        "# Workspaces on {server}; run `abode config-ssh` again to update.\n"
    ));
    let exe = shell_quote(&exe.to_string_lossy());
    for name in names {
        out.push_str(&format!(
            "Host abode.{name}\n  ProxyCommand {exe} ssh --stdio {}\n  ServerAliveInterval 30\n",
            shell_quote(name)
        ));
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// `old` with its managed block replaced by `block` (or `block` added at
/// the end, after a blank line).
fn replace_block(old: &str, block: &str) -> anyhow::Result<String> {
    let begin = old.find(BEGIN);
    let end = old.find(END);
    match (begin, end) {
        (Some(begin), Some(end)) if begin < end => {
            let after = end + END.len();
            let after = if old[after..].starts_with('\n') {
                after + 1
            } else {
                after
            };
            Ok(format!("{}{block}{}", &old[..begin], &old[after..]))
        }
        (None, None) => {
            let mut new = old.to_string();
            if !new.is_empty() {
                if !new.ends_with('\n') {
                    new.push('\n');
                }
                new.push('\n');
            }
            new.push_str(block);
            Ok(new)
        }
        _ => anyhow::bail!(
            "the SSH configuration has a broken Abode block (one of its marker lines is missing): fix or remove it, then run again"
        ),
    }
}

/// Writes the configuration whole (a temporary file renamed over it), mode
/// 0600 as OpenSSH expects of a user's configuration.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let temporary = path.with_extension("abode-new");
    let _ = std::fs::remove_file(&temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_added_once_and_replaced_in_place() {
        let exe = Path::new("/opt/abode bin/abode");
        let one = block(exe, "http://s", &["dev".to_string()]);
        let two = block(exe, "http://s", &["dev".to_string(), "api".to_string()]);
        assert!(one
            .contains("Host abode.dev\n  ProxyCommand '/opt/abode bin/abode' ssh --stdio 'dev'\n"));
        let user = "Host github.com\n  User git\n";
        let cases = [
            ("", one.clone()),
            (user, format!("{user}\n{one}")),
            ("Host x", format!("Host x\n\n{one}")),
        ];
        for (old, expected) in cases {
            let first = replace_block(old, &one).unwrap();
            assert_eq!(first, expected, "{old:?}");
            assert_eq!(replace_block(&first, &one).unwrap(), first, "idempotent");
            let updated = replace_block(&first, &two).unwrap();
            assert_eq!(updated.matches(BEGIN).count(), 1);
            assert!(updated.contains("Host abode.api"));
            assert!(updated.starts_with(old.trim_end()));
        }
        let after = format!("{one}Host later\n");
        assert_eq!(
            replace_block(&after, &two).unwrap(),
            format!("{two}Host later\n")
        );
        assert!(replace_block(&format!("{BEGIN}\nHost abode.x\n"), &one).is_err());
    }
}
