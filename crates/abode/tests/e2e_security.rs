//! Security promises of the running platform that no other walk checks: what
//! the server keeps on disk is private to the server's user.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::os::unix::fs::PermissionsExt;

use util::Platform;

/// The data dir holds workspace volumes (home disks), process logs and the
/// provider mirror beside the database: other local users must not read it.
#[test]
fn the_data_dir_is_private_to_the_server_user() {
    let platform = Platform::start();
    let mode = std::fs::metadata(platform.data_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700, "data dir mode is {mode:o}");
}
