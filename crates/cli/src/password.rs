//! Passwords read from standard input (`--password-stdin`), for the CLI's
//! sign-in commands and `abode server`'s first owner.

use anyhow::Context;

/// Reads a password from standard input: everything up to the first newline.
pub(crate) fn read_password_stdin() -> anyhow::Result<String> {
    let mut input = String::new();
    std::io::stdin()
        .read_line(&mut input)
        .context("cannot read the password from standard input")?;
    let password = input.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        anyhow::bail!("no password on standard input (pipe it in, e.g. `echo \"$PASSWORD\" | abode login ... --password-stdin`)");
    }
    Ok(password)
}
