//! External auth (issue 34): the server's `--external-auth-config` file,
//! checked at start with one line per mistake (no start), and a good one
//! taken, its client secrets never in the server's log; a person linking
//! their account at a real OAuth 2.0 server (the npm package oidc-provider,
//! `tests/oidc/oauth-server.mjs`) through its pages in headless Chromium,
//! listed as linked, its tokens nowhere in the database in the clear, then
//! unlinked and revoked; and workspaces that clone, push and fetch as their
//! owner from a real Git server (`git http-backend` behind nginx, checking
//! each token at the provider's introspection endpoint:
//! `tests/git/git-server.py`) through the agent's askpass, with the token
//! refreshed after it expired, nothing after unlink, only the owner's own
//! token, links revoked on suspension, a key rotation, and no token
//! anywhere it should not be.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser;
use crate::util;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use util::Platform;

const SECRET: &str = "client-secret-9f2c";

#[test]
fn a_bad_configuration_is_refused_at_start_one_line_per_mistake() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("external-auth.toml");
    std::fs::write(
        &config,
        r#"
[[provider]]
id = "GitHub"
type = "github"
client_id = "x"
client_secret_file = "missing-secret"

[[provider]]
id = "corp"
type = "oauth2"
client_id = "abode"
client_secret = "inline"
"#,
    )
    .unwrap();
    let refused = Command::new(util::abode_bin())
        .args([
            "server",
            "--address",
            "127.0.0.1:0",
            "--external-auth-config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let prefix = format!("--external-auth-config {}: ", config.display());
    let lines: Vec<&str> = stderr
        .lines()
        .map(|line| line.trim_start_matches("error: "))
        .filter(|line| line.starts_with(&prefix))
        .map(|line| &line[prefix.len()..])
        .collect();
    let expected = [
        "provider 1: id must be 1 to 64 lowercase letters",
        "provider 1: client_secret_file cannot be read",
        "provider 2 (id \"corp\"): client_secret is not a key of a provider",
        "provider 2 (id \"corp\"): client_secret_file is missing",
        "provider 2 (id \"corp\"): auth_url is missing",
        "provider 2 (id \"corp\"): token_url is missing",
        "provider 2 (id \"corp\"): regex is missing",
    ];
    assert_eq!(lines.len(), expected.len(), "{stderr}");
    for (line, expected) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(expected),
            "{line:?} / {expected:?}\n{stderr}"
        );
    }
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[test]
fn a_good_configuration_is_taken_and_its_secrets_stay_out_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("external-auth.toml");
    std::fs::write(dir.path().join("github.secret"), format!("{SECRET}\n")).unwrap();
    std::fs::write(
        &config,
        r#"
[[provider]]
id = "github"
type = "github"
client_id = "Iv1.0123"
client_secret_file = "github.secret"
"#,
    )
    .unwrap();
    let key = dir.path().join("tokens.key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    // Readable by others: refused, saying how to fix it.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let start = |extra: &[&str]| {
        Command::new(util::abode_bin())
            .args([
                "server",
                "--address",
                "127.0.0.1:0",
                "--external-auth-config",
            ])
            .arg(&config)
            .args(extra)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .output()
            .unwrap()
    };
    let refused = start(&[]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("--external-auth-config needs --external-auth-key-file"),
        "{refused:?}"
    );
    let refused = start(&["--external-auth-key-file", key.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("readable by others (mode 644): chmod 600 it"),
        "{refused:?}"
    );
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let platform = Platform::start_with(&[
        "--external-auth-config",
        config.to_str().unwrap(),
        "--external-auth-key-file",
        key.to_str().unwrap(),
    ]);
    platform.login_owner();
    let log = platform.server_log();
    assert!(
        log.contains("external auth providers configured") && log.contains("github"),
        "{log}"
    );
    assert!(!log.contains(SECRET), "the client secret reached the log");
}

const CLIENT_SECRET: &str = "oauth-client-secret-7d1e";

/// The test OAuth 2.0 server, a Node process of its own.
struct OAuthServer {
    child: Child,
    issuer: String,
}

impl OAuthServer {
    fn start() -> OAuthServer {
        OAuthServer::start_with(&[])
    }

    fn start_with(envs: &[(&str, &str)]) -> OAuthServer {
        let mut all = vec![("CLIENT_ID", "abode"), ("CLIENT_SECRET", CLIENT_SECRET)];
        all.extend_from_slice(envs);
        let (child, started) = util::start_node_server("oauth-server.mjs", &all);
        OAuthServer {
            child,
            issuer: started["issuer"].as_str().unwrap().to_string(),
        }
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_links_an_account_at_a_real_oauth_server_and_unlinks_it() {
    let oauth = OAuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("corp.secret"), CLIENT_SECRET).unwrap();
    let config = dir.path().join("external-auth.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[provider]]
id = "corp"
type = "oauth2"
client_id = "abode"
client_secret_file = "corp.secret"
auth_url = "{issuer}/auth"
token_url = "{issuer}/token"
revoke_url = "{issuer}/token/revocation"
scopes = ["openid", "offline_access", "git"]
regex = '^http://127\.0\.0\.1:'
"#,
            issuer = oauth.issuer
        ),
    )
    .unwrap();
    let key = private_key(dir.path(), "tokens.key", "cd");
    let platform = Platform::start_with(&[
        "--external-auth-config",
        config.to_str().unwrap(),
        "--external-auth-key-file",
        key.to_str().unwrap(),
    ]);
    let callback = format!(
        "{}/external-auth/corp/callback",
        platform.url.trim_end_matches('/')
    );
    ureq::put(&format!("{}/admin/redirect-uris", oauth.issuer))
        .send_json(serde_json::json!([callback]))
        .unwrap();
    platform.login_owner();
    let links = platform
        .run(&["external-auth", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(links[0]["provider"], "corp", "{links}");
    assert_eq!(links[0]["type"], "oauth2");
    assert_eq!(links[0]["linked"], false);
    platform
        .run(&["external-auth", "link", "nope", "--no-browser"])
        .fails_with(1, &["not configured on this server"]);

    // `link` prints the provider's address and waits; the person grants
    // access in a browser.
    let mut link = platform
        .cmd(&["external-auth", "link", "corp", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(link.stderr.take().unwrap());
    let mut address = String::new();
    while !address.trim_start().starts_with("http") {
        address.clear();
        assert!(
            stderr.read_line(&mut address).unwrap() > 0,
            "link printed no address"
        );
    }
    let address = address.trim().to_string();
    assert!(
        address.starts_with(&format!("{}/auth?", oauth.issuer)),
        "{address}"
    );
    assert!(address.contains("code_challenge_method=S256"), "{address}");
    let browser = browser::Browser::start().await;
    browser.go(&address).await;
    browser.wait_for_element("input[name=login]").await;
    browser.type_into("input[name=login]", "ada").await;
    browser
        .type_into("input[name=password]", "any password")
        .await;
    browser.click("button[type=submit]").await;
    browser.wait_for_text("Continue").await;
    browser.click("button[type=submit]").await;
    let page = browser.wait_for_text("Account linked").await;
    assert!(
        page.contains("Your corp account is linked to alice"),
        "{page}"
    );
    browser.close().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = link.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "link never saw the account linked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.code(), Some(0));
    let links = platform
        .run(&["external-auth", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(links[0]["linked"], true, "{links}");

    // Nothing of the client secret is in the database, and the tokens are
    // sealed (the row holds no provider token shape in the clear).
    // The database file and its write-ahead log, where recent writes are.
    let mut database = Vec::new();
    for file in ["abode.db", "abode.db-wal"] {
        database.extend(std::fs::read(platform.data_dir().join(file)).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&database);
    assert!(!text.contains(CLIENT_SECRET));
    assert!(
        text.contains("v1:"),
        "the sealed tokens are where they belong"
    );
    let audit = platform
        .run(&[
            "audit",
            "--action",
            "external_auth.link",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(audit[0]["outcome"], "success", "{audit}");

    // A state works once: the provider's redirect replayed links nothing.
    let replayed = ureq::get(&format!("{callback}?code=x&state=y")).call();
    match replayed {
        Err(ureq::Error::Status(400, response)) => {
            assert!(response
                .into_string()
                .unwrap()
                .contains("unknown or expired"))
        }
        other => panic!("a made-up state was taken: {:?}", other.map(|r| r.status())),
    }

    let unlinked = platform.run(&["external-auth", "unlink", "corp"]).ok();
    assert!(
        unlinked.stdout.contains("its tokens were revoked"),
        "{unlinked}"
    );
    let links = platform
        .run(&["external-auth", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(links[0]["linked"], false, "{links}");
    platform
        .run(&["external-auth", "unlink", "corp"])
        .fails_with(1, &["not linked"]);
}

/// The test Git server (`tests/git/git-server.py`): it runs until its
/// standard input closes.
struct GitServer {
    child: Child,
    _stdin: ChildStdin,
    url: String,
    state: PathBuf,
}

impl GitServer {
    fn start(repos: &Path, state: &Path, introspect: &str, secret_file: &Path) -> GitServer {
        let script = util::repo_root().join("crates/abode/tests/git/git-server.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("--repos")
            .arg(repos)
            .arg("--state")
            .arg(state)
            .args(["--introspect", introspect, "--client-id", "abode"])
            .arg("--client-secret-file")
            .arg(secret_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let started: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("the Git server did not start: {line:?}"));
        GitServer {
            child,
            _stdin: stdin,
            url: started["url"].as_str().unwrap().to_string(),
            state: state.to_path_buf(),
        }
    }

    /// Every token a request showed it, once each.
    fn tokens_seen(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.state.join("tokens-seen.txt")).unwrap_or_default();
        let mut tokens: Vec<String> = Vec::new();
        for token in text.lines().filter(|line| !line.is_empty()) {
            if !tokens.iter().any(|known| known == token) {
                tokens.push(token.to_string());
            }
        }
        tokens
    }

    /// The checker's decisions, in order: `active SUB` or `inactive`.
    fn decisions(&self) -> Vec<String> {
        std::fs::read_to_string(self.state.join("decisions.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The HTTP status of a fetch's first request with `token`.
    fn status_with(&self, token: &str) -> u16 {
        let answer = ureq::get(&format!(
            "{}/project.git/info/refs?service=git-upload-pack",
            self.url
        ))
        .set("Authorization", &format!("Bearer {token}"))
        .call();
        match answer {
            Ok(response) => response.status(),
            Err(ureq::Error::Status(status, _)) => status,
            Err(error) => panic!("the Git server is unreachable: {error}"),
        }
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Seed")
        .env("GIT_AUTHOR_EMAIL", "seed@example.com")
        .env("GIT_COMMITTER_NAME", "Seed")
        .env("GIT_COMMITTER_EMAIL", "seed@example.com")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

/// Grants access at the test provider's pages (its development login: any
/// password; the login is the account's `sub`) and waits for Abode's page.
async fn grant(browser: &browser::Browser, login: &str) {
    grant_at_provider(browser, login).await;
    browser.wait_for_text("Account linked").await;
}

/// Signs in at the test provider as `login` and consents.
async fn grant_at_provider(browser: &browser::Browser, login: &str) {
    browser.wait_for_element("input[name=login]").await;
    browser.type_into("input[name=login]", login).await;
    browser
        .type_into("input[name=password]", "any password")
        .await;
    browser.click("button[type=submit]").await;
    browser.wait_for_text("Continue").await;
    browser.click("button[type=submit]").await;
}

/// Links `config_dir`'s person's `corp` account with the CLI (`link`
/// prints the address, a browser grants access as `login`).
async fn link_with_cli(platform: &Platform, config_dir: &Path, login: &str) {
    let mut link = platform
        .cmd_as(
            config_dir,
            &["external-auth", "link", "corp", "--no-browser"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(link.stderr.take().unwrap());
    let mut address = String::new();
    while !address.trim_start().starts_with("http") {
        address.clear();
        assert!(
            stderr.read_line(&mut address).unwrap() > 0,
            "link printed no address"
        );
    }
    let browser = browser::Browser::start().await;
    browser.go(address.trim()).await;
    grant(&browser, login).await;
    browser.close().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = link.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            return;
        }
        assert!(
            Instant::now() < deadline,
            "link never saw the account linked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every file under `dir` that holds one of `secrets`, with which.
fn files_holding(dir: &Path, secrets: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_default();
                for secret in secrets {
                    if contains(&bytes, secret.as_bytes()) {
                        found.push(format!("{} holds {secret}", path.display()));
                    }
                }
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

/// Every process but `except` whose environment or command line holds
/// one of `secrets`.
fn processes_holding(secrets: &[String], except: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_str() == Some(except.to_string().as_str()) {
            continue;
        }
        for file in ["environ", "cmdline"] {
            let Ok(bytes) = std::fs::read(entry.path().join(file)) else {
                continue;
            };
            for secret in secrets {
                if contains(&bytes, secret.as_bytes()) {
                    found.push(format!("{}/{file} holds {secret}", entry.path().display()));
                }
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_clone_and_push_as_their_owner_with_fresh_tokens_never_printed() {
    util::require_terraform();
    // Access tokens live 20 s: a fetch after one expired needs a refresh.
    let oauth = OAuthServer::start_with(&[("ACCESS_TOKEN_TTL", "20")]);
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("corp.secret");
    std::fs::write(&secret_file, CLIENT_SECRET).unwrap();

    // A real Git server with one repository, each request's token checked
    // at the provider.
    let repos = dir.path().join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    git(
        &repos,
        &["init", "-q", "--bare", "-b", "main", "project.git"],
    );
    let seed = dir.path().join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("README"), "the project\n").unwrap();
    git(&seed, &["add", "README"]);
    git(&seed, &["commit", "-q", "-m", "first"]);
    git(
        &seed,
        &[
            "push",
            "-q",
            repos.join("project.git").to_str().unwrap(),
            "main",
        ],
    );
    let state = dir.path().join("git-state");
    std::fs::create_dir_all(&state).unwrap();
    let git_server = GitServer::start(
        &repos,
        &state,
        &format!("{}/token/introspection", oauth.issuer),
        &secret_file,
    );
    let repo_url = format!("{}/project.git", git_server.url);
    assert_eq!(git_server.status_with("made-up"), 401);

    let config = dir.path().join("external-auth.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[provider]]
id = "corp"
type = "oauth2"
client_id = "abode"
client_secret_file = "corp.secret"
auth_url = "{issuer}/auth"
token_url = "{issuer}/token"
revoke_url = "{issuer}/token/revocation"
scopes = ["openid", "offline_access", "git"]
regex = '^{git}/'

[[provider]]
id = "other"
type = "oauth2"
client_id = "abode"
client_secret_file = "corp.secret"
auth_url = "{issuer}/auth"
token_url = "{issuer}/token"
regex = '^https://other\.example/'
"#,
            issuer = oauth.issuer,
            git = regex_escape(&git_server.url),
        ),
    )
    .unwrap();
    let key = private_key(dir.path(), "tokens.key", "cd");
    // The git server is this test's, on the host's loopback, standing for
    // the provider's: the workspace is on the machine's network to reach it.
    let mut platform = Platform::start_with(&[
        "--external-auth-config",
        config.to_str().unwrap(),
        "--external-auth-key-file",
        key.to_str().unwrap(),
        "--workspace-network",
        "host",
    ]);
    let base = platform.url.trim_end_matches('/').to_string();
    ureq::put(&format!("{}/admin/redirect-uris", oauth.issuer))
        .send_json(serde_json::json!([format!(
            "{base}/external-auth/corp/callback"
        )]))
        .unwrap();
    platform.login_owner();

    // A template may only require a provider the server has.
    let elsewhere = dir.path().join("needs-github");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        elsewhere.join("main.tf"),
        "terraform {\n  required_providers {\n    abode = { source = \"abode/abode\" }\n  }\n}\ndata \"abode_external_auth\" \"github\" {}\n",
    )
    .unwrap();
    platform
        .run(&["templates", "push", "elsewhere", "-d", elsewhere.to_str().unwrap()])
        .fails_with(
            1,
            &["requires external auth provider \"github\", which this server does not configure: it has corp, other"],
        );
    let template = util::repo_root().join("crates/abode/tests/e2e_fixtures/git-workspace");
    platform
        .run(&["templates", "push", "git", "-d", template.to_str().unwrap()])
        .ok();

    // Not linked yet: the create is refused before anything is built, with
    // where to link, in the CLI and in the dashboard.
    let repo_parameter = format!("repo={repo_url}");
    let refused = platform
        .run(&["create", "dev", "--template", "git", "-p", &repo_parameter])
        .fails_with(
            1,
            &[
                "requires a linked corp account",
                &format!("{base}/external-auth"),
            ],
        );
    assert_eq!(refused.stderr.trim().lines().count(), 1, "{refused}");
    let listed = platform.run(&["list", "--output", "json"]).ok().json();
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");
    let (status, page) = platform.dashboard_submit(
        "alice",
        "correct horse battery",
        "/workspaces/new?template=git",
        "/workspaces/new",
        &[
            ("template", "git"),
            ("name", "dev"),
            ("parameter.repo", &repo_url),
        ],
    );
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("requires a linked corp account"), "{page}");

    // Alice links her account on the dashboard's Linked accounts page.
    let browser = browser::Browser::start().await;
    browser
        .sign_in(&base, "alice", "correct horse battery")
        .await;
    browser.go(&format!("{base}/external-auth")).await;
    browser.wait_for_text("not linked").await;
    browser.click("a[aria-label='Link corp']").await;
    grant(&browser, "ada").await;
    browser.go(&format!("{base}/external-auth")).await;
    let page = browser.wait_for_text("Linked accounts").await;
    assert!(page.contains("Unlink"), "{page}");

    // Her workspace clones in its startup script, as her.
    platform
        .run(&["create", "dev", "--template", "git", "-p", &repo_parameter])
        .ok();
    platform.wait_for_agent("dev", "ready", Duration::from_secs(120));
    let run = platform
        .run(&[
            "ssh",
            "dev",
            "--",
            "git",
            "-C",
            "project",
            "log",
            "--format=%s",
        ])
        .ok();
    assert_eq!(run.stdout.trim(), "first", "{run}");
    assert_eq!(
        git_server.decisions().last().map(String::as_str),
        Some("active ada")
    );
    // And pushes.
    platform
        .run(&[
            "ssh", "dev", "--", "sh", "-c",
            "cd project && echo more >> README && git commit -qam second && git push -q origin HEAD",
        ])
        .ok();
    git(
        &seed,
        &[
            "pull",
            "-q",
            repos.join("project.git").to_str().unwrap(),
            "main",
        ],
    );
    assert!(std::fs::read_to_string(seed.join("README"))
        .unwrap()
        .contains("more"));
    // `access-token` prints the same kind of token, one the Git server takes.
    let printed = platform
        .run(&[
            "ssh",
            "dev",
            "--",
            "abode",
            "external-auth",
            "access-token",
            "corp",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    assert_eq!(git_server.status_with(&printed), 200);
    // Only the providers the template declares: none of `other`.
    platform
        .run(&[
            "ssh",
            "dev",
            "--",
            "abode",
            "external-auth",
            "access-token",
            "other",
        ])
        .fails_with(
            1,
            &["the workspace's template does not ask for other accounts"],
        );
    // A remote whose user name Git decoded into its prompt is no host of
    // corp's: nothing is handed out (`https://127.0.0.1:PORT%2F@evil`).
    let hostile = format!("Password for '{}/@evil.example': ", git_server.url);
    let refused = platform.run(&["ssh", "dev", "--", "abode", &hostile]);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stdout.trim().is_empty(), "{refused}");
    assert!(
        refused
            .stderr
            .contains("no external auth provider of this server serves"),
        "{refused}"
    );
    let handed = platform
        .run(&[
            "audit",
            "--action",
            "external_auth.token",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert!(
        handed[0]["target"] == "alice/dev" && handed[0]["outcome"] == "success",
        "{handed}"
    );

    // After the access token expired (the provider refuses it), the next
    // fetch gets a refreshed one.
    let deadline = Instant::now() + Duration::from_secs(60);
    while git_server.status_with(&printed) != 401 {
        assert!(Instant::now() < deadline, "the 20 s token never expired");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let seen_before = git_server.tokens_seen().len();
    platform
        .run(&["ssh", "dev", "--", "git", "-C", "project", "fetch", "-q"])
        .ok();
    assert!(
        git_server.tokens_seen().len() > seen_before,
        "the fetch used a new token"
    );
    assert!(platform
        .server_log()
        .contains("external auth token refreshed"));

    // Bob's workspace gets Bob's token, never Alice's.
    let bob = platform.login_new_user("bob", "member");
    platform
        .run_as(
            &bob,
            &["create", "bobs", "--template", "git", "-p", &repo_parameter],
            None,
        )
        .fails_with(
            1,
            &["requires a linked corp account and bob has not linked one"],
        );
    link_with_cli(&platform, &bob, "bob").await;
    platform
        .run_as(
            &bob,
            &["create", "bobs", "--template", "git", "-p", &repo_parameter],
            None,
        )
        .ok();
    platform.wait_for_agent("bob/bobs", "ready", Duration::from_secs(120));
    platform
        .run_as(
            &bob,
            &["ssh", "bobs", "--", "git", "-C", "project", "fetch", "-q"],
            None,
        )
        .ok();
    assert_eq!(
        git_server.decisions().last().map(String::as_str),
        Some("active bob")
    );
    let bobs_token = platform
        .run_as(
            &bob,
            &[
                "ssh",
                "bobs",
                "--",
                "abode",
                "external-auth",
                "access-token",
                "corp",
            ],
            None,
        )
        .ok()
        .stdout
        .trim()
        .to_string();
    assert_eq!(git_server.status_with(&bobs_token), 200);
    assert_eq!(
        git_server.decisions().last().map(String::as_str),
        Some("active bob")
    );

    // Suspending Bob revokes his link at the provider.
    platform.run(&["users", "suspend", "bob"]).ok();
    let deadline = Instant::now() + Duration::from_secs(30);
    while git_server.status_with(&bobs_token) != 401 {
        assert!(
            Instant::now() < deadline,
            "a suspended person's token still works"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let unlinked = platform
        .run(&[
            "audit",
            "--action",
            "external_auth.unlink",
            "--output",
            "json",
        ])
        .ok()
        .json();
    assert!(
        unlinked[0]["details"]
            .as_str()
            .unwrap_or_default()
            .contains("bob: account suspended"),
        "{unlinked}"
    );

    // The key is rotated with the servers stopped; the tokens open under
    // the new one, and a wrong old key changes nothing.
    platform.kill_server();
    let new_key = private_key(dir.path(), "new.key", "ef");
    let data_dir = platform.data_dir();
    let rotate = |old: &Path| {
        Command::new(util::abode_bin())
            .args(["server", "rotate-external-auth-key", "--old-key-file"])
            .arg(old)
            .arg("--new-key-file")
            .arg(&new_key)
            .arg("--data-dir")
            .arg(&data_dir)
            .output()
            .unwrap()
    };
    let wrong = rotate(&new_key);
    assert_eq!(wrong.status.code(), Some(1), "{wrong:?}");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("the new key is the old key"),
        "{wrong:?}"
    );
    let other = private_key(dir.path(), "other.key", "01");
    let wrong = rotate(&other);
    assert_eq!(wrong.status.code(), Some(1), "{wrong:?}");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("nothing was re-encrypted"),
        "{wrong:?}"
    );
    let rotated = rotate(&key);
    assert!(rotated.status.success(), "{rotated:?}");
    assert!(
        String::from_utf8_lossy(&rotated.stdout).contains("re-encrypted 1 linked account(s)"),
        "{rotated:?}"
    );
    std::fs::copy(&new_key, &key).unwrap();
    platform.start_server_again();
    let after_rotation = platform
        .run(&[
            "ssh",
            "dev",
            "--",
            "abode",
            "external-auth",
            "access-token",
            "corp",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    assert_eq!(git_server.status_with(&after_rotation), 200);

    // Unlinked on the dashboard: the next fetch gets nothing and fails,
    // and the last token is refused at the provider.
    browser
        .sign_in(&base, "alice", "correct horse battery")
        .await;
    browser.go(&format!("{base}/external-auth")).await;
    browser.wait_for_text("Linked accounts").await;
    browser.click("button[aria-label='Unlink corp']").await;
    browser.wait_for_element("a[aria-label='Link corp']").await;
    browser.close().await;
    let fetch = platform.run(&["ssh", "dev", "--", "git", "-C", "project", "fetch", "-q"]);
    assert_ne!(fetch.code, Some(0), "{fetch}");
    assert!(
        fetch.stderr.contains("has not linked their corp account"),
        "{fetch}"
    );
    assert_eq!(git_server.status_with(&after_rotation), 401);

    // No token (nor the client secret) is anywhere it need not be: the
    // platform's files (database, states, plans, work dirs, logs, volumes),
    // the server's log, any process's environment or command line.
    let mut secrets = git_server.tokens_seen();
    assert!(secrets.len() >= 3, "{secrets:?}");
    secrets.push(CLIENT_SECRET.to_string());
    assert_eq!(
        files_holding(platform.root(), &secrets),
        Vec::<String>::new()
    );
    let log = platform.server_log();
    assert!(secrets.iter().all(|secret| !log.contains(secret.as_str())));
    // The provider itself (the test's OAuth server) holds its secret.
    assert_eq!(
        processes_holding(&secrets, oauth.child.id()),
        Vec::<String>::new()
    );
    let build_log = platform.run(&["builds", "logs", "dev", "1"]).ok();
    assert!(secrets
        .iter()
        .all(|secret| !build_log.stdout.contains(secret.as_str())));
}

/// A token key of 32 bytes `byte` (two hex digits) in `dir/name`, mode 600.
fn private_key(dir: &Path, name: &str, byte: &str) -> PathBuf {
    let key = dir.join(name);
    std::fs::write(&key, byte.repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    key
}

/// `text` with the regex's special characters escaped.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// A provider behind a private certificate authority (the server trusts it
/// through `--ca-cert`, as it trusts nothing else of the test's) that
/// offers only the device flow: the CLI prints the code, the person types
/// it at the provider's page, the server polls until access is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_behind_a_private_ca_links_with_the_device_flow() {
    let dir = tempfile::tempdir().unwrap();
    let authority = util::authority::Authority::new(dir.path());
    let (certificate, tls_key) = authority.sign("oauth", 0o600);
    let oauth = OAuthServer::start_with(&[
        ("TLS_CERT", certificate.to_str().unwrap()),
        ("TLS_KEY", tls_key.to_str().unwrap()),
    ]);
    assert!(oauth.issuer.starts_with("https://"), "{}", oauth.issuer);
    std::fs::write(dir.path().join("corp.secret"), CLIENT_SECRET).unwrap();
    let config = dir.path().join("external-auth.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[provider]]
id = "corp"
type = "oauth2"
client_id = "abode"
client_secret_file = "corp.secret"
auth_url = "{issuer}/auth"
token_url = "{issuer}/token"
revoke_url = "{issuer}/token/revocation"
device_auth_url = "{issuer}/device/auth"
device_flow = true
scopes = ["openid", "offline_access"]
regex = '^https://git\.example\.com/'
"#,
            issuer = oauth.issuer
        ),
    )
    .unwrap();
    let key = private_key(dir.path(), "tokens.key", "cd");
    let flags = [
        "--external-auth-config",
        config.to_str().unwrap(),
        "--external-auth-key-file",
        key.to_str().unwrap(),
    ];

    // A server that does not trust the provider's authority cannot start a
    // link, and says so in one line.
    let untrusting = Platform::start_with(&flags);
    untrusting.login_owner();
    untrusting
        .run(&["external-auth", "link", "corp", "--no-browser"])
        .fails_with(1, &["cannot reach corp for the device authorization"]);
    drop(untrusting);

    let ca = authority.ca_file();
    let mut trusting = vec!["--ca-cert", ca.to_str().unwrap()];
    trusting.extend_from_slice(&flags);
    let platform = Platform::start_with(&trusting);
    platform.login_owner();
    let mut link = platform
        .cmd(&["external-auth", "link", "corp", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(link.stderr.take().unwrap());
    let (mut said, mut address) = (String::new(), String::new());
    while !address.trim_start().starts_with("http") {
        said.push_str(&address);
        address.clear();
        assert!(
            stderr.read_line(&mut address).unwrap() > 0,
            "link printed no address: {said}"
        );
    }
    let address = address.trim().to_string();
    assert!(
        address.starts_with(&format!("{}/device", oauth.issuer)),
        "{address}"
    );
    let code = said
        .split("enter the code ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no code in {said:?}"))
        .to_string();

    // The browser trusts the provider's key alone.
    let pin = util::authority::spki_pin(&tls_key);
    let browser = browser::Browser::start_with_args(&[&format!(
        "--ignore-certificate-errors-spki-list={pin}"
    )])
    .await;
    browser.go(&address).await;
    let page = browser.wait_for_text("Confirm Device").await;
    assert!(
        page.contains(&code),
        "the provider shows another code: {page}"
    );
    browser.click("button[autofocus]").await;
    grant_at_provider(&browser, "ada").await;
    browser.wait_for_text("Sign-in Success").await;
    browser.close().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = link.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the device flow never linked");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status.code(), Some(0));
    let links = platform
        .run(&["external-auth", "list", "--output", "json"])
        .ok()
        .json();
    assert_eq!(links[0]["linked"], true, "{links}");

    // The dashboard's Link shows a device provider's code instead of
    // leaving for the provider.
    let page =
        platform.dashboard_page("alice", "correct horse battery", "/external-auth/corp/link");
    assert!(
        page.contains("id=\"device-code\"") && page.contains(&format!("{}/device", oauth.issuer)),
        "{page}"
    );
}
