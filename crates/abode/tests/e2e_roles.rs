//! Roles from the command line: `abode users create --role` takes several
//! (repeated or comma-separated), `abode users roles` adds and removes them
//! and prints what the user holds, the last owner keeps `owner`, an unknown
//! name is refused in one line naming the valid ones, and a role change
//! decides the user's next request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use util::Platform;

#[test]
fn roles_are_given_changed_and_enforced_from_the_cli() {
    let platform = Platform::start();
    platform.login_owner();
    let me = platform.run(&["users", "me"]).ok();
    assert!(me.stdout.contains("roles:    owner, member"), "{me}");

    // (--role arguments, printed roles)
    let cases: [(&[&str], &str); 3] = [
        (&[], "member"),
        (&["--role", "auditor,member"], "auditor, member"),
        (
            &["--role", "user-admin", "--role", "template-admin"],
            "template-admin, user-admin",
        ),
    ];
    for (index, (roles, printed)) in cases.into_iter().enumerate() {
        let name = format!("user{index}");
        let mut args = vec!["users", "create", &name, "--email", "u@example.com"];
        args.extend_from_slice(roles);
        args.push("--password-stdin");
        let created = platform
            .run_as(&platform.config_dir(), &args, Some("long enough\n"))
            .ok();
        assert!(
            created
                .stdout
                .contains(&format!("Created user {name} ({printed})")),
            "{created}"
        );
    }
    platform
        .run_as(
            &platform.config_dir(),
            &[
                "users",
                "create",
                "x",
                "--email",
                "x@example.com",
                "--role",
                "member,admin",
                "--password-stdin",
            ],
            Some("long enough\n"),
        )
        .fails_with(
            1,
            &["unknown role `admin` (one of: owner, template-admin, user-admin, auditor, member)"],
        );

    let changed = platform
        .run(&[
            "users", "roles", "user0", "--add", "auditor", "--remove", "member",
        ])
        .ok();
    assert!(
        changed.stdout.contains("user0 now holds: auditor"),
        "{changed}"
    );
    platform
        .run(&["users", "roles", "alice", "--remove", "owner"])
        .fails_with(1, &["last owner"]);

    // A member may not change roles; once made an owner, they may.
    let bob = platform.login_new_user("bob", "member");
    platform
        .run_as(&bob, &["users", "roles", "user0", "--add", "owner"], None)
        .fails_with(1, &["needs the owner role"]);
    platform
        .run(&["users", "roles", "bob", "--add", "owner"])
        .ok();
    let now = platform
        .run_as(
            &bob,
            &["users", "roles", "alice", "--remove", "owner"],
            None,
        )
        .ok();
    assert!(now.stdout.contains("alice now holds: member"), "{now}");
}
