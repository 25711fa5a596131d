//! External auth providers (issue 34), as far as they go today: the
//! server's `--external-auth-config` file, checked at start with one line
//! per mistake (no start), and a good one taken, its client secrets never
//! in the server's log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::process::Command;

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
