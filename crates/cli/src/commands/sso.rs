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
            let cli_state = random_state()?;
            let address = format!("{start}?cli_port={port}&cli_state={cli_state}");
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
            wait_for_code(&listener, &cli_state)?
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
pub(super) fn open_browser(address: &str) -> bool {
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
fn wait_for_code(listener: &TcpListener, cli_state: &str) -> anyhow::Result<String> {
    let deadline = Instant::now() + WAIT;
    listener
        .set_nonblocking(true)
        .context("cannot set up the loopback listener")?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(code) = answer(stream, cli_state) {
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

/// Reads one request; the code of `GET /callback?code=...&state=...` when
/// the state is the one this login sent, after telling the browser it may
/// close the tab. Anything else (a code this CLI did not ask for) is
/// answered 404 and waited past.
fn answer(mut stream: TcpStream, cli_state: &str) -> Option<String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).ok()?;
    let target = line.split_whitespace().nth(1)?;
    let query = target.strip_prefix("/callback?");
    let field = |name: &str| {
        query.and_then(|query| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        })
    };
    let code = field("code")
        .filter(|code| !code.is_empty() && code.chars().all(|c| c.is_ascii_alphanumeric()))
        .filter(|_| field("state") == Some(cli_state));
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

/// 32 random hexadecimal characters from the system's generator: the value
/// the server echoes with the code.
fn random_state() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| std::io::Read::read_exact(&mut random, &mut bytes))
        .context("cannot read random bytes from /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// What the loopback listener takes from one request line.
    fn taken(request_line: &str, cli_state: &str) -> Option<String> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let address = listener.local_addr().unwrap();
        let line = request_line.to_string();
        let sender = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(address).unwrap();
            write!(stream, "{line}\r\nHost: x\r\n\r\n").unwrap();
            let mut answer = String::new();
            let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
            answer
        });
        let (stream, _) = listener.accept().unwrap();
        let code = answer(stream, cli_state);
        let answered = sender.join().unwrap();
        assert_eq!(
            answered.starts_with("HTTP/1.1 200"),
            code.is_some(),
            "{answered}"
        );
        code
    }

    #[test]
    fn only_a_code_with_this_login_s_state_is_taken() {
        let state = "0123456789abcdef0123456789abcdef";
        let cases: [(&str, Option<&str>); 7] = [
            (
                "GET /callback?code=abc123&state=0123456789abcdef0123456789abcdef HTTP/1.1",
                Some("abc123"),
            ),
            (
                "GET /callback?state=0123456789abcdef0123456789abcdef&code=abc123 HTTP/1.1",
                Some("abc123"),
            ),
            // A code someone else sent, without this login's state.
            ("GET /callback?code=abc123 HTTP/1.1", None),
            (
                "GET /callback?code=abc123&state=0123456789abcdef0123456789abcdee HTTP/1.1",
                None,
            ),
            (
                "GET /callback?code=abc123&xstate=0123456789abcdef0123456789abcdef HTTP/1.1",
                None,
            ),
            (
                "GET /callback?code=ab%20c&state=0123456789abcdef0123456789abcdef HTTP/1.1",
                None,
            ),
            (
                "GET /other?code=abc123&state=0123456789abcdef0123456789abcdef HTTP/1.1",
                None,
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(taken(line, state).as_deref(), expected, "{line}");
        }
    }

    #[test]
    fn states_are_random_and_hexadecimal() {
        let (a, b) = (random_state().unwrap(), random_state().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|byte| byte.is_ascii_hexdigit()));
    }
}
