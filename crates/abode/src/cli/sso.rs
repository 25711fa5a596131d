//! `abode login URL` through the server's single sign-on: the person signs
//! in at the identity provider in a browser, and the server hands the CLI
//! a one-time code, which it trades for a session over the API (the same
//! session a password login gets).
//!
//! The code comes back one of two ways. By default the CLI listens on
//! 127.0.0.1 at a random port and the server's callback sends the browser
//! there with the code (the server sends codes only to loopback). With
//! `--no-browser`, or when nothing can listen, the page shows the code and
//! the person pastes it here. The URL the CLI opens or prints is the
//! server's own sign-in start and holds no secret.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use abode_client::Client;
use abode_sdk::LoginResponse;
use anyhow::Context;

/// How long the CLI waits for the browser to come back.
const WAIT: Duration = Duration::from_secs(10 * 60);

pub fn sign_in(client: &Client, url: &str, no_browser: bool) -> anyhow::Result<LoginResponse> {
    let methods = client
        .sign_in_methods()
        .context("cannot ask the server how to sign in")?;
    let Some(oidc) = methods.oidc else {
        anyhow::bail!(
            "{url} has no single sign-on: log in with a password (abode login {url} --username NAME --password-stdin)"
        );
    };
    let start = format!("{url}{}", oidc.login_path);
    let listener = if no_browser {
        None
    } else {
        TcpListener::bind(("127.0.0.1", 0)).ok()
    };
    let code = match listener {
        Some(listener) => {
            let port = listener
                .local_addr()
                .context("cannot read the loopback listener's port")?
                .port();
            let address = format!("{start}?cli_port={port}");
            if open_browser(&address) {
                eprintln!(
                    "Opened a browser to sign in with {}. If none appeared, open:\n  {address}",
                    oidc.sign_in_text
                );
            } else {
                eprintln!(
                    "Open this address in a browser to sign in with {}:\n  {address}",
                    oidc.sign_in_text
                );
            }
            wait_for_code(&listener)?
        }
        None => {
            let address = format!("{start}?cli=paste");
            eprintln!(
                "Open this address in a browser, sign in with {}, then paste the code it shows here:\n  {address}",
                oidc.sign_in_text
            );
            read_code()?
        }
    };
    client
        .oidc_cli_token(&code)
        .context("cannot finish the sign-in")
}

/// Opens `address` with `$BROWSER` or `xdg-open`; whether one started.
fn open_browser(address: &str) -> bool {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|browser| !browser.trim().is_empty());
    let program = browser.unwrap_or_else(|| "xdg-open".to_string());
    std::process::Command::new(program)
        .arg(address)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

/// The code the server's callback sends the browser back with.
fn wait_for_code(listener: &TcpListener) -> anyhow::Result<String> {
    let deadline = Instant::now() + WAIT;
    listener
        .set_nonblocking(true)
        .context("cannot set up the loopback listener")?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(code) = answer(stream) {
                    return Ok(code);
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    anyhow::bail!("no sign-in came back within 10 minutes; run abode login again");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => return Err(error).context("the loopback listener failed"),
        }
    }
}

/// Reads one request; the code of `GET /callback?code=...`, after telling
/// the browser it may close the tab. Anything else is answered 404.
fn answer(mut stream: TcpStream) -> Option<String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).ok()?;
    let target = line.split_whitespace().nth(1)?;
    let code = target
        .strip_prefix("/callback?")
        .and_then(|query| query.split('&').find_map(|pair| pair.strip_prefix("code=")))
        .filter(|code| !code.is_empty() && code.chars().all(|c| c.is_ascii_alphanumeric()));
    let (status, body) = match code {
        Some(_) => (
            "200 OK",
            "<!doctype html><title>Signed in</title><p>Signed in to Abode. You can close this tab and go back to the terminal.</p>",
        ),
        None => ("404 Not Found", "<!doctype html><title>Not found</title>"),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    code.map(str::to_string)
}

/// The code pasted on standard input.
fn read_code() -> anyhow::Result<String> {
    eprint!("Code: ");
    let _ = std::io::stderr().flush();
    let mut input = String::new();
    std::io::stdin()
        .read_line(&mut input)
        .context("cannot read the code from standard input")?;
    let code = input.trim().to_string();
    if code.is_empty() {
        anyhow::bail!("no code was pasted; run abode login again");
    }
    Ok(code)
}
