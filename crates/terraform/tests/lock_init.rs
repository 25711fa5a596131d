//! `terraform init` against a provider mirror, with and without the lock file
//! of `Mirror::write_lock_file`: without it Terraform warns that it had to
//! compute the checksum itself (issue 8: the warning was in every build log);
//! with it init is silent, and a package changed after the lock was written
//! fails init. The mirror holds a stand-in executable: init never runs the
//! provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Output, Stdio};

use abode_terraform::mirror::{current_platform, package_hash, Mirror, LOCK_FILE};

const VERSION: &str = "0.1.0";
const WARNING: &str = "Incomplete lock file information for providers";
const USES_ABODE: &str = r#"terraform {
  required_providers {
    abode = { source = "abode/abode" }
  }
}
"#;

/// Fails the test with one clear line when Terraform is missing.
fn require_terraform() {
    let found = abode_terraform::command()
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "terraform is not installed or not on PATH: these tests run real Terraform 1.x"
    );
}

struct Setup {
    dir: tempfile::TempDir,
    mirror: Mirror,
}

impl Setup {
    fn new() -> Setup {
        require_terraform();
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("stand-in");
        std::fs::write(&exe, b"#!/bin/sh\nexit 1\n").unwrap();
        let mirror = Mirror::new(dir.path().join("mirror")).unwrap();
        mirror.install(&exe, VERSION).unwrap();
        mirror
            .write_cli_config(&dir.path().join("terraform.rc"))
            .unwrap();
        Setup { dir, mirror }
    }

    /// A configuration directory holding `main.tf`.
    fn config(&self, name: &str, main_tf: &str) -> std::path::PathBuf {
        let config = self.dir.path().join(name);
        std::fs::create_dir(&config).unwrap();
        std::fs::write(config.join("main.tf"), main_tf).unwrap();
        config
    }

    /// `terraform init` as a build runs it; stdout and stderr together.
    fn init(&self, config: &Path) -> (Output, String) {
        let output = abode_terraform::command()
            .current_dir(config)
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("terraform.rc"))
            .args(["init", "-input=false", "-no-color"])
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output, text)
    }
}

#[test]
fn without_the_lock_init_warns_and_records_the_same_hash() {
    let setup = Setup::new();
    let config = setup.config("unlocked", USES_ABODE);
    let (output, text) = setup.init(&config);
    assert!(output.status.success(), "{text}");
    assert!(text.contains(WARNING), "{text}");
    // The hash Terraform computed itself is the one we compute.
    let package = setup
        .mirror
        .package_dir(VERSION, &current_platform().unwrap());
    let recorded = std::fs::read_to_string(config.join(LOCK_FILE)).unwrap();
    assert!(
        recorded.contains(&format!("\"{}\"", package_hash(&package).unwrap())),
        "{recorded}"
    );
}

#[test]
fn with_the_lock_init_is_silent() {
    let setup = Setup::new();
    let config = setup.config("locked", USES_ABODE);
    let lock = setup.mirror.write_lock_file(VERSION, &config).unwrap();
    let written = std::fs::read_to_string(&lock).unwrap();
    let (output, text) = setup.init(&config);
    assert!(output.status.success(), "{text}");
    assert!(!text.contains("Warning"), "{text}");
    assert!(
        text.contains("Reusing previous version of abode/abode from the dependency lock file"),
        "{text}"
    );
    // Terraform found nothing to add or change.
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), written);
}

#[test]
fn the_lock_leaves_version_constraints_to_the_configuration() {
    let setup = Setup::new();
    let config = setup.config(
        "constrained",
        r#"terraform {
  required_providers {
    abode = { source = "abode/abode", version = ">= 0.1.0, < 1.0.0" }
  }
}
"#,
    );
    setup.mirror.write_lock_file(VERSION, &config).unwrap();
    let (output, text) = setup.init(&config);
    assert!(output.status.success(), "{text}");
    assert!(!text.contains("Warning"), "{text}");
}

#[test]
fn a_configuration_without_the_provider_drops_the_lock_entry_quietly() {
    let setup = Setup::new();
    let config = setup.config(
        "builtin-only",
        "resource \"terraform_data\" \"x\" {\n  input = \"a\"\n}\n",
    );
    let lock = setup.mirror.write_lock_file(VERSION, &config).unwrap();
    let (output, text) = setup.init(&config);
    assert!(output.status.success(), "{text}");
    assert!(!text.contains("Warning"), "{text}");
    assert!(
        !std::fs::read_to_string(&lock)
            .unwrap()
            .contains("abode/abode"),
        "Terraform keeps no lock entry for a provider the configuration does not use"
    );
}

#[test]
fn a_package_changed_after_the_lock_fails_init() {
    let setup = Setup::new();
    let config = setup.config("tampered", USES_ABODE);
    setup.mirror.write_lock_file(VERSION, &config).unwrap();
    let provider = setup
        .mirror
        .provider_path(VERSION, &current_platform().unwrap());
    std::fs::write(&provider, b"#!/bin/sh\nexit 2\n").unwrap();
    let (output, text) = setup.init(&config);
    assert!(!output.status.success(), "{text}");
    // Terraform wraps its messages at 78 columns.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("doesn't match any of the checksums previously recorded"),
        "{text}"
    );
}
