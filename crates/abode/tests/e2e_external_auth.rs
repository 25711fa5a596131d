//! External auth (issue 34), as far as it goes today: the server's
//! `--external-auth-config` file, checked at start with one line per
//! mistake (no start), and a good one taken, its client secrets never in
//! the server's log; and a person linking their account at a real OAuth 2.0
//! server (the npm package oidc-provider, `tests/oidc/oauth-server.mjs`)
//! through its pages in headless Chromium, listed as linked, its tokens
//! nowhere in the database in the clear, then unlinked and revoked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod util;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
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
        let (child, started) = util::start_node_server(
            "oauth-server.mjs",
            &[("CLIENT_ID", "abode"), ("CLIENT_SECRET", CLIENT_SECRET)],
        );
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
    let key = dir.path().join("tokens.key");
    std::fs::write(&key, "cd".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
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
