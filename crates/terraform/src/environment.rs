//! The environment every Terraform run of Abode's gets, in a module that names
//! no sibling: the automation settings ([`AUTOMATION_ENV`]) and the private
//! directory of plugin sockets ([`plugin_socket_dir`]). `terraform` commands
//! of the crate's root, short runs (`run.rs`) and sandboxed runs
//! (`isolation.rs`, which points the socket variable at the sandbox's own
//! `/tmp`) all read it here.

/// What every Terraform run of Abode's gets in its environment:
/// [`AUTOMATION_ENV`] and the private [`plugin_socket_dir`].
pub(crate) fn automation_env() -> impl Iterator<Item = (&'static str, &'static std::ffi::OsStr)> {
    let automation = AUTOMATION_ENV
        .iter()
        .map(|(name, value)| (*name, std::ffi::OsStr::new(*value)));
    let plugins = plugin_socket_dir().map(|dir| (PLUGIN_SOCKET_DIR_ENV, dir.as_os_str()));
    automation.chain(plugins)
}

/// go-plugin's variable for where plugins put their unix sockets.
pub(crate) const PLUGIN_SOCKET_DIR_ENV: &str = "PLUGIN_UNIX_SOCKET_DIR";

/// A directory only this user can enter, where every provider of every
/// Terraform run puts its unix socket: go-plugin's providers create theirs
/// there with permissions that follow the umask, so the directory is what keeps
/// other local users out. `<tmp>/abode-plugins-<uid>` (mode 0700, checked to be
/// this user's own directory and private), else a fresh private one; `None`
/// only if neither can be made, and then providers fall back to the temporary
/// directory. Made once per process.
pub fn plugin_socket_dir() -> Option<&'static std::path::Path> {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let uid = nix::unistd::geteuid().as_raw();
        let base = std::env::temp_dir();
        let shared = base.join(format!("abode-plugins-{uid}"));
        if private_dir(&shared, uid) {
            return Some(shared);
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or_default();
        let fresh = base.join(format!(
            "abode-plugins-{uid}-{}-{nanos:x}",
            std::process::id()
        ));
        private_dir(&fresh, uid).then_some(fresh)
    })
    .as_deref()
}

/// Creates `dir` (mode 0700) if missing; whether it is then a real directory
/// (not a link) owned by `uid` that no one else may enter.
fn private_dir(dir: &std::path::Path, uid: u32) -> bool {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let created = std::fs::DirBuilder::new().mode(0o700).create(dir);
    if let Err(error) = created {
        if error.kind() != std::io::ErrorKind::AlreadyExists {
            return false;
        }
    }
    std::fs::symlink_metadata(dir).is_ok_and(|meta| {
        meta.file_type().is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0
    })
}

/// What every Terraform run gets: no checkpoint calls to the network, no
/// prompts, output meant for automation, and plugins without TLS.
///
/// Plugin TLS is off because it protects nothing here: every provider listens on
/// a unix socket in a directory only Abode's user can enter ([`plugin_socket_dir`],
/// given to go-plugin's providers and ours as `PLUGIN_UNIX_SOCKET_DIR`), and a
/// process running as that user can already replace the mirror's provider or edit
/// the state. It cost about 32 ms per plan (certificates generated at every
/// provider start, two handshakes).
pub(crate) const AUTOMATION_ENV: &[(&str, &str)] = &[
    ("CHECKPOINT_DISABLE", "1"),
    ("TF_IN_AUTOMATION", "1"),
    ("TF_INPUT", "0"),
    ("TF_DISABLE_PLUGIN_TLS", "1"),
];

#[cfg(test)]
mod plugin_dir_tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    #[test]
    fn the_plugin_socket_dir_is_private_and_a_shared_one_is_refused() {
        let dir = plugin_socket_dir().unwrap();
        let meta = std::fs::symlink_metadata(dir).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700);

        let scratch = tempfile_dir();
        let uid = nix::unistd::geteuid().as_raw();
        let open = scratch.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!private_dir(&open, uid), "a directory others may enter");
        let link = scratch.join("link");
        std::os::unix::fs::symlink(dir, &link).unwrap();
        assert!(
            !private_dir(&link, uid),
            "a link, even to a private directory"
        );
        assert!(private_dir(&scratch.join("new"), uid));
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("abode-plugin-dir-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        dir
    }
}
