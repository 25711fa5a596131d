//! The offline installation of the abode provider: a Terraform filesystem
//! mirror holding the `abode` executable under the provider's file name, and
//! the CLI configuration that makes Terraform take `abode/abode` from that
//! mirror and nothing else from anywhere.
//!
//! The provider is the `abode` binary itself, so installing it is copying the
//! running executable; no provider is ever downloaded.
//!
//! It also writes the dependency lock file for a configuration
//! ([`Mirror::write_lock_file`]). Without one, `terraform init` computes the
//! mirrored package's checksum itself and warns on every run ("Incomplete lock
//! file information for providers"): a warning in every build log, which
//! trains people to skim the log where the plan guard's warnings are. With a
//! lock naming the installed package's `h1:` hash, init is silent, and a
//! package that no longer matches the hash (a mirror changed between the two)
//! fails init loudly instead of being run.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

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
/// Terraform's dependency lock file, in the root of a configuration.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";

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
    #[error("the abode provider {version} is not installed in the mirror: {path} is missing")]
    NotInstalled { version: String, path: PathBuf },
    #[error("cannot read the provider package {path}: {source}")]
    ReadPackage {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the provider package holds a file Terraform cannot hash by name: {0:?}")]
    UnhashableName(PathBuf),
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

    /// `<root>/registry.terraform.io/abode/abode/<version>/<platform>`: the
    /// unpacked package, everything in which Terraform copies and hashes.
    pub fn package_dir(&self, version: &str, platform: &str) -> PathBuf {
        self.root
            .join(PROVIDER_HOST)
            .join(PROVIDER_NAMESPACE)
            .join(PROVIDER_TYPE)
            .join(version)
            .join(platform)
    }

    /// `<root>/registry.terraform.io/abode/abode/<version>/<platform>/terraform-provider-abode_v<version>`
    pub fn provider_path(&self, version: &str, platform: &str) -> PathBuf {
        self.package_dir(version, platform)
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

    /// The dependency lock file that selects provider `version` as installed in
    /// this mirror for this platform, with the `h1:` hash of its package
    /// directory as it is now (see [`package_hash`]).
    ///
    /// It names no `constraints`: Terraform ignores the lock's constraints
    /// string and checks the configuration's version constraints against the
    /// locked `version` itself. A template whose constraints exclude `version`
    /// therefore fails init ("locked provider ... does not match configured
    /// version constraint"), even when an older version is still in the
    /// mirror. A lock entry for a provider the configuration does not use is
    /// dropped by `terraform init` without a warning, so the same lock serves
    /// templates that never use `abode/abode`.
    pub fn lock_file(&self, version: &str) -> Result<String, MirrorError> {
        let dir = self.package_dir(version, &current_platform()?);
        if !dir.is_dir() {
            return Err(MirrorError::NotInstalled {
                version: version.to_string(),
                path: dir,
            });
        }
        let hash = package_hash(&dir)?;
        let mut text = String::new();
        let _ = write!(
            text,
            "# Written by Abode: the abode provider as installed in its local mirror, so\n\
             # that terraform init need not compute its checksum (and warn about it).\n\
             provider \"{PROVIDER_HOST}/{PROVIDER_NAMESPACE}/{PROVIDER_TYPE}\" {{\n  \
               version = {version}\n  \
               hashes = [\n    \
                 {hash},\n  \
               ]\n\
             }}\n",
            version = hcl_string(version),
            hash = hcl_string(&hash),
        );
        Ok(text)
    }

    /// Writes [`Mirror::lock_file`] into the configuration directory
    /// `config_dir` as `.terraform.lock.hcl` (replacing any file of that name,
    /// by rename, never writing through a link) and returns its path. Call it
    /// before every `terraform init` in a directory that has no lock of its own.
    pub fn write_lock_file(
        &self,
        version: &str,
        config_dir: &Path,
    ) -> Result<PathBuf, MirrorError> {
        let text = self.lock_file(version)?;
        let target = config_dir.join(LOCK_FILE);
        let partial = config_dir.join(format!("{LOCK_FILE}.{}.partial", std::process::id()));
        let write_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MirrorError::Write { path, source }
        };
        std::fs::write(&partial, text).map_err(write_error(&partial))?;
        std::fs::rename(&partial, &target).map_err(|source| {
            let _ = std::fs::remove_file(&partial);
            MirrorError::Write {
                path: target.clone(),
                source,
            }
        })?;
        Ok(target)
    }
}

/// Terraform's `h1:` hash of an unpacked provider package directory, the one
/// `terraform init` compares with the lock file: Go's `dirhash` "Hash1". Every
/// file under `dir` (hidden ones and those in subdirectories too) gives the
/// line `"<sha256 hex>  <path relative to dir, with />\n"`; the SHA-256 of
/// those lines sorted bytewise, in base64, after `h1:`. Links are followed to
/// the file they name, as Terraform does.
pub fn package_hash(dir: &Path) -> Result<String, MirrorError> {
    let mut files = Vec::new();
    collect_files(dir, "", &mut files)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summary = Sha256::new();
    for (name, path) in &files {
        let digest = file_sha256(path)?;
        let mut line = String::with_capacity(name.len() + 68);
        for byte in digest {
            let _ = write!(line, "{byte:02x}");
        }
        let _ = writeln!(line, "  {name}");
        summary.update(line.as_bytes());
    }
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(summary.finalize())
    ))
}

/// Adds `(relative name, path)` for every non-directory under `dir`.
fn collect_files(
    dir: &Path,
    prefix: &str,
    files: &mut Vec<(String, PathBuf)>,
) -> Result<(), MirrorError> {
    let read_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MirrorError::ReadPackage { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(read_error(dir))? {
        let entry = entry.map_err(read_error(dir))?;
        let path = entry.path();
        let name = match entry.file_name().to_str() {
            Some(name) if !name.contains('\n') => format!("{prefix}{name}"),
            _ => return Err(MirrorError::UnhashableName(path)),
        };
        if entry.file_type().map_err(read_error(&path))?.is_dir() {
            collect_files(&path, &format!("{name}/"), files)?;
        } else {
            files.push((name, path));
        }
    }
    Ok(())
}

fn file_sha256(path: &Path) -> Result<[u8; 32], MirrorError> {
    let read_error = |source| MirrorError::ReadPackage {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let seen = FileVersion::of(&file.metadata().map_err(read_error)?);
    if let Some(digest) = hashed(path, &seen) {
        return Ok(digest);
    }
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(read_error)?;
    let digest: [u8; 32] = hasher.finalize().into();
    // Kept only if the file did not change while it was read.
    if file
        .metadata()
        .is_ok_and(|meta| FileVersion::of(&meta) == seen)
    {
        remember(path, seen, digest);
    }
    Ok(digest)
}

/// What tells one version of a file from another without reading it: a
/// mirror's provider is replaced by rename (a new inode), and a write in place
/// moves its change time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileVersion {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl FileVersion {
    fn of(meta: &std::fs::Metadata) -> FileVersion {
        use std::os::unix::fs::MetadataExt;
        FileVersion {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

type Digests = std::collections::HashMap<PathBuf, (FileVersion, [u8; 32])>;

/// The digests of the files hashed so far: every build writes a lock file
/// naming the provider's hash, and the provider (9 MB) does not change
/// between builds; hashing it was 5 ms of each build's set-up.
fn digests() -> &'static std::sync::Mutex<Digests> {
    static DIGESTS: std::sync::OnceLock<std::sync::Mutex<Digests>> = std::sync::OnceLock::new();
    DIGESTS.get_or_init(Default::default)
}

fn hashed(path: &Path, version: &FileVersion) -> Option<[u8; 32]> {
    let digests = digests().lock().ok()?;
    let (known, digest) = digests.get(path)?;
    (known == version).then_some(*digest)
}

fn remember(path: &Path, version: FileVersion, digest: [u8; 32]) {
    if let Ok(mut digests) = digests().lock() {
        digests.insert(path.to_path_buf(), (version, digest));
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

    /// Hashes checked against Terraform 1.11.4: the `h1:` value `terraform
    /// init` wrote into `.terraform.lock.hcl` for a mirror holding exactly
    /// these files (tests/lock_init.rs compares with Terraform on every run).
    #[test]
    fn package_hash_is_terraforms_h1() {
        let dir = temp_dir("hash-one");
        std::fs::write(
            dir.join("terraform-provider-abode_v0.1.0"),
            b"#!/bin/sh\necho hi\n",
        )
        .unwrap();
        assert_eq!(
            package_hash(&dir).unwrap(),
            "h1:UKACkiqRNXpBdAQM1gfXLImjwLrLzdtcdIbt6dOh4/I="
        );
        // Hidden files and subdirectories count too, sorted by their path.
        std::fs::write(
            dir.join(".terraform-provider-abode.123.partial"),
            b"partial",
        )
        .unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/x"), b"nested\n").unwrap();
        assert_eq!(
            package_hash(&dir).unwrap(),
            "h1:779DQFRhCEv+4Z+lz2hZB8iTMqwoqpGJByEg0zv3rtU="
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn package_hash_follows_links_like_terraform() {
        let dir = temp_dir("hash-link");
        let outside = dir.join("outside");
        std::fs::write(&outside, b"#!/bin/sh\necho hi\n").unwrap();
        let package = dir.join("package");
        std::fs::create_dir(&package).unwrap();
        std::os::unix::fs::symlink(&outside, package.join("terraform-provider-abode_v0.1.0"))
            .unwrap();
        assert_eq!(
            package_hash(&package).unwrap(),
            "h1:UKACkiqRNXpBdAQM1gfXLImjwLrLzdtcdIbt6dOh4/I="
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lock_file_names_the_installed_package() {
        let dir = temp_dir("lock");
        let exe = dir.join("abode");
        std::fs::write(&exe, b"#!/bin/sh\necho hi\n").unwrap();
        let mirror = Mirror::new(dir.join("mirror")).unwrap();
        mirror.install(&exe, "0.1.0").unwrap();
        let lock = mirror.lock_file("0.1.0").unwrap();
        assert!(
            lock.contains(
                "provider \"registry.terraform.io/abode/abode\" {\n  \
                 version = \"0.1.0\"\n  \
                 hashes = [\n    \
                 \"h1:UKACkiqRNXpBdAQM1gfXLImjwLrLzdtcdIbt6dOh4/I=\",\n  \
                 ]\n}\n"
            ),
            "{lock}"
        );
        assert!(!lock.contains("constraints"), "{lock}");
        assert!(matches!(
            mirror.lock_file("0.2.0"),
            Err(MirrorError::NotInstalled { version, .. }) if version == "0.2.0"
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_remembered_hash_follows_the_file_replaced_or_rewritten_in_place() {
        use std::io::{Seek, Write};
        let dir = temp_dir("remembered");
        let mirror = Mirror::new(dir.join("mirror")).unwrap();
        let exe = dir.join("abode");
        std::fs::write(&exe, b"#!/bin/sh\necho one\n").unwrap();
        mirror.install(&exe, "0.1.0").unwrap();
        let package = mirror.package_dir("0.1.0", &current_platform().unwrap());
        let first = package_hash(&package).unwrap();
        assert_eq!(package_hash(&package).unwrap(), first);
        // Replaced by a new install (a rename): its hash is the new file's.
        std::fs::write(&exe, b"#!/bin/sh\necho two\n").unwrap();
        mirror.install(&exe, "0.1.0").unwrap();
        let second = package_hash(&package).unwrap();
        assert_ne!(second, first);
        // Written in place, same size: so is this one's.
        let provider = mirror.provider_path("0.1.0", &current_platform().unwrap());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(&provider)
            .unwrap();
        file.rewind().unwrap();
        file.write_all(b"#!/bin/sh\necho six\n").unwrap();
        drop(file);
        let third = package_hash(&package).unwrap();
        assert_ne!(third, second);
        std::fs::write(dir.join("fresh"), b"#!/bin/sh\necho six\n").unwrap();
        assert_eq!(
            file_sha256(&provider).unwrap(),
            file_sha256(&dir.join("fresh")).unwrap()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_lock_file_replaces_a_link_without_following_it() {
        let dir = temp_dir("write-lock");
        let exe = dir.join("abode");
        std::fs::write(&exe, b"#!/bin/sh\necho hi\n").unwrap();
        let mirror = Mirror::new(dir.join("mirror")).unwrap();
        mirror.install(&exe, "0.1.0").unwrap();
        let config = dir.join("config");
        std::fs::create_dir(&config).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"untouched").unwrap();
        std::os::unix::fs::symlink(&victim, config.join(LOCK_FILE)).unwrap();
        let written = mirror.write_lock_file("0.1.0", &config).unwrap();
        assert_eq!(written, config.join(LOCK_FILE));
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
        assert!(!std::fs::symlink_metadata(&written)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(&written).unwrap(),
            mirror.lock_file("0.1.0").unwrap()
        );
        let names: Vec<_> = std::fs::read_dir(&config)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, [LOCK_FILE]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn relative_mirrors_are_refused() {
        assert!(matches!(
            Mirror::new("mirror"),
            Err(MirrorError::RelativePath(_))
        ));
    }
}
