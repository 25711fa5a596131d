//! The offline installation of the abode provider: a Terraform filesystem
//! mirror holding the `abode` executable under the provider's file name, and
//! the CLI configuration that makes Terraform take `abode/abode` from that
//! mirror and nothing else from anywhere.
//!
//! The provider is the `abode` binary itself, so installing it is copying the
//! running executable; no provider is ever downloaded.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where Terraform thinks `abode/abode` comes from (the default registry host).
pub const PROVIDER_HOST: &str = "registry.terraform.io";
pub const PROVIDER_NAMESPACE: &str = "abode";
pub const PROVIDER_TYPE: &str = "abode";
/// The file name prefix Terraform starts the provider under; the `abode`
/// binary serves the provider when its own file name starts with it.
pub const PROVIDER_FILE_PREFIX: &str = "terraform-provider-abode";
/// The provider version to install: the workspace version, which is also the
/// `abode` binary's (every crate shares it), so any crate can name it.
pub const PROVIDER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The provider pattern the generated CLI configuration routes to the mirror.
pub const PROVIDER_PATTERN: &str = "registry.terraform.io/abode/*";

/// Why the mirror or its configuration could not be written.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("cannot read the provider executable {path}: {source}")]
    ReadExecutable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the mirror directory must be an absolute path, not {0}")]
    RelativePath(PathBuf),
    #[error("Terraform has no provider platform name for {os}/{arch}")]
    UnsupportedPlatform { os: String, arch: String },
}

/// Terraform's name for the platform this binary was built for, e.g. `linux_amd64`.
pub fn current_platform() -> Result<String, MirrorError> {
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        other => {
            return Err(MirrorError::UnsupportedPlatform {
                os: os.into(),
                arch: other.into(),
            })
        }
    };
    Ok(format!("{os}_{arch}"))
}

/// A filesystem mirror directory in Terraform's unpacked layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    root: PathBuf,
}

impl Mirror {
    /// `root` must be absolute: the CLI configuration is read from any directory.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, MirrorError> {
        let root = root.into();
        if !root.is_absolute() {
            return Err(MirrorError::RelativePath(root));
        }
        Ok(Mirror { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/registry.terraform.io/abode/abode/<version>/<platform>/terraform-provider-abode_v<version>`
    pub fn provider_path(&self, version: &str, platform: &str) -> PathBuf {
        self.root
            .join(PROVIDER_HOST)
            .join(PROVIDER_NAMESPACE)
            .join(PROVIDER_TYPE)
            .join(version)
            .join(platform)
            .join(format!("{PROVIDER_FILE_PREFIX}_v{version}"))
    }

    /// Copies `executable` into the mirror as provider `version` for this
    /// platform and returns where it went. An identical copy is left untouched;
    /// a different one is replaced by rename, so a provider Terraform is running
    /// at that moment keeps its file.
    pub fn install(&self, executable: &Path, version: &str) -> Result<PathBuf, MirrorError> {
        let target = self.provider_path(version, &current_platform()?);
        if same_content(executable, &target)? {
            return Ok(target);
        }
        let write_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MirrorError::Write { path, source }
        };
        let dir = target.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(write_error(dir))?;
        let partial = dir.join(format!(
            ".{PROVIDER_FILE_PREFIX}.{}.partial",
            std::process::id()
        ));
        std::fs::copy(executable, &partial).map_err(|source| {
            if executable.exists() {
                MirrorError::Write {
                    path: partial.clone(),
                    source,
                }
            } else {
                MirrorError::ReadExecutable {
                    path: executable.to_path_buf(),
                    source,
                }
            }
        })?;
        set_executable(&partial).map_err(write_error(&partial))?;
        std::fs::rename(&partial, &target).map_err(write_error(&target))?;
        Ok(target)
    }

    /// The Terraform CLI configuration that takes `abode/*` from this mirror only.
    pub fn cli_config(&self) -> String {
        let mut text = String::new();
        let path = hcl_string(&self.root.display().to_string());
        let _ = write!(
            text,
            "# Written by Abode: the abode provider comes from this local mirror, never from\n\
             # the network.\n\
             provider_installation {{\n  \
               filesystem_mirror {{\n    \
                 path    = {path}\n    \
                 include = [\"{PROVIDER_PATTERN}\"]\n  \
               }}\n  \
               direct {{\n    \
                 exclude = [\"{PROVIDER_PATTERN}\"]\n  \
               }}\n\
             }}\n"
        );
        text
    }

    /// Writes [`Mirror::cli_config`] to `path` (for `TF_CLI_CONFIG_FILE`).
    pub fn write_cli_config(&self, path: &Path) -> Result<(), MirrorError> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| MirrorError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(path, self.cli_config()).map_err(|source| MirrorError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// An HCL string literal (quotes, backslashes and `${` escaped).
fn hcl_string(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace("${", "$${")
        .replace("%{", "%%{");
    format!("\"{escaped}\"")
}

fn same_content(a: &Path, b: &Path) -> Result<bool, MirrorError> {
    let read_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MirrorError::ReadExecutable { path, source }
    };
    let (Ok(meta_b), meta_a) = (std::fs::metadata(b), std::fs::metadata(a)) else {
        return Ok(false);
    };
    let meta_a = meta_a.map_err(read_error(a))?;
    if meta_a.len() != meta_b.len() {
        return Ok(false);
    }
    let mut file_a = std::fs::File::open(a).map_err(read_error(a))?;
    let Ok(mut file_b) = std::fs::File::open(b) else {
        return Ok(false);
    };
    let mut buf_a = vec![0u8; 1 << 16];
    let mut buf_b = vec![0u8; 1 << 16];
    loop {
        let n = file_a.read(&mut buf_a).map_err(read_error(a))?;
        if n == 0 {
            return Ok(true);
        }
        if file_b.read_exact(&mut buf_b[..n]).is_err() || buf_a[..n] != buf_b[..n] {
            return Ok(false);
        }
    }
}

#[cfg(unix)]
fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("abode-mirror-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn install_lays_out_the_unpacked_mirror_and_is_idempotent() {
        let dir = temp_dir("install");
        let exe = dir.join("abode");
        std::fs::write(&exe, b"#!/bin/sh\necho v1\n").unwrap();
        let mirror = Mirror::new(dir.join("mirror")).unwrap();
        let platform = current_platform().unwrap();
        let target = mirror.install(&exe, "0.1.0").unwrap();
        assert_eq!(
            target,
            dir.join(format!(
                "mirror/registry.terraform.io/abode/abode/0.1.0/{platform}/terraform-provider-abode_v0.1.0"
            ))
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"#!/bin/sh\necho v1\n");
        let modified = std::fs::metadata(&target).unwrap().modified().unwrap();
        mirror.install(&exe, "0.1.0").unwrap();
        assert_eq!(
            std::fs::metadata(&target).unwrap().modified().unwrap(),
            modified
        );
        std::fs::write(&exe, b"#!/bin/sh\necho v2\n").unwrap();
        mirror.install(&exe, "0.1.0").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"#!/bin/sh\necho v2\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cli_config_routes_only_abode_to_the_mirror() {
        let mirror = Mirror::new("/srv/my \"mirror\"").unwrap();
        let config = mirror.cli_config();
        assert!(
            config.contains("path    = \"/srv/my \\\"mirror\\\"\"\n"),
            "{config}"
        );
        assert!(config.contains("include = [\"registry.terraform.io/abode/*\"]"));
        assert!(config.contains("exclude = [\"registry.terraform.io/abode/*\"]"));
    }

    #[test]
    fn relative_mirrors_are_refused() {
        assert!(matches!(
            Mirror::new("mirror"),
            Err(MirrorError::RelativePath(_))
        ));
    }
}
