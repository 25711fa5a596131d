//! Other people's text through the real CLI and server: a template version
//! message, a parameter value, and the door's refusal that quotes a bad one
//! carry terminal escapes, and no command prints them raw (they show as
//! `\e[2J`, ...). `--output json` keeps the exact text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use util::{fixture, require_terraform, Platform, Run};

/// Clears the screen, homes the cursor and prints a line that is not there.
const MESSAGE: &str = "v1 \x1b[2J\x1b[1;1Hfake \x1b]0;owned\x07title\r\u{202e}txt.exe";
/// Colours, then overwrites its own line with CR and erase-line; ends with a
/// C1 CSI (U+009B), which some terminals obey too.
const PARAMETER: &str = "hi \x1b[31mred\x1b[0m\r\x1b[2Kfake line \u{9b}2J";
/// Fails the template's validation, which the door's refusal quotes.
const BAD_PARAMETER: &str = "boom! \x1b[2J\x1b[1;1Hfake";

/// Characters that must never reach a terminal from a server's text.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

#[track_caller]
fn assert_inert(run: &Run) {
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let found = raw_controls(text);
        assert!(
            found.is_empty(),
            "`{}` printed raw {found:?} on {name}:\n{}",
            run.command,
            text.escape_debug()
        );
    }
}

#[test]
fn escapes_in_server_text_are_printed_visibly() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("parameter-echo");
    platform
        .run(&[
            "templates",
            "push",
            "echo",
            "-d",
            template.to_str().unwrap(),
            "-m",
            MESSAGE,
        ])
        .ok();
    let parameter = format!("motd={PARAMETER}");
    let created = platform
        .run(&["create", "dev", "--template", "echo", "-p", &parameter])
        .ok();
    assert_inert(&created);
    let bad_parameter = format!("motd={BAD_PARAMETER}");
    // The door checks the value against the template's validation and
    // refuses it, quoting it: visibly.
    let failed = platform.run(&["create", "bad", "--template", "echo", "-p", &bad_parameter]);
    assert_eq!(failed.code, Some(1), "{failed}");
    assert_inert(&failed);
    assert!(
        failed.stderr.contains("boom!") && failed.stderr.contains("[2J"),
        "{failed}"
    );
    platform.run(&["show", "bad"]).fails_with(1, &["not found"]);

    // The hostile text did reach the server and comes back exact in JSON.
    let versions = platform
        .run(&["templates", "versions", "list", "echo", "-o", "json"])
        .ok()
        .json();
    assert_eq!(versions[0]["message"], MESSAGE);
    assert_eq!(platform.show("dev")["parameters"]["motd"], PARAMETER);

    let text_commands: &[&[&str]] = &[
        &["templates", "versions", "list", "echo"],
        &["show", "dev"],
        &["builds", "list", "dev"],
        &["builds", "logs", "dev", "1"],
        &["audit"],
        &["list"],
    ];
    let mut printed = Vec::new();
    for args in text_commands {
        let run = platform.run(args).ok();
        assert_inert(&run);
        printed.push(run);
    }
    // What was hidden is shown, in the escaped form.
    assert!(
        printed[0]
            .stdout
            .contains("v1 \\e[2J\\e[1;1Hfake \\e]0;owned\\x07title\\r\\u{202e}txt.exe"),
        "{}",
        printed[0]
    );
    assert!(
        printed[1]
            .stdout
            .contains("motd=hi \\e[31mred\\e[0m\\r\\e[2Kfake line \\u{9b}2J"),
        "{}",
        printed[1]
    );
    // A table row stays one line: the header and one row per build.
    assert_eq!(printed[2].stdout.lines().count(), 2, "{}", printed[2]);

    // JSON stays valid and exact for every list.
    for args in [
        &["builds", "list", "dev", "-o", "json"][..],
        &["audit", "-o", "json"],
        &["list", "-o", "json"],
    ] {
        platform.run(args).ok().json();
    }
    platform.run(&["delete", "dev"]).ok();
}

/// The same template with `from` replaced by `to` in its main.tf, and
/// `extra` files beside it, in a folder of its own.
fn variant(
    platform: &Platform,
    folder: &str,
    from: &str,
    to: &str,
    extra: &[(&str, &str)],
) -> String {
    let main = std::fs::read_to_string(fixture("parameter-echo").join("main.tf")).unwrap();
    assert!(main.contains(from), "{from}");
    let dir = platform.root().join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.tf"), main.replace(from, to)).unwrap();
    for (name, text) in extra {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir.to_str().unwrap().to_string()
}

/// Names are refused when they hold a control or bidirectional character
/// (a right-to-left override makes `txt.exe` read `exe.txt`): a
/// parameter's name and display name, a preset's name, a file of the
/// template. The refusal shows the character escaped, and nothing is
/// stored.
#[test]
fn names_with_control_or_bidirectional_characters_are_refused() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let preset = "data \"abode_workspace_preset\" \"p\" {\n  name       = \"small\u{2066}\"\n  parameters = { motd = \"hi\" }\n}\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "parameter name",
            variant(
                &platform,
                "a",
                "name    = \"motd\"",
                "name    = \"motd\u{202e}txt\"",
                &[],
            ),
            "\\u{202e}",
        ),
        (
            "display name",
            variant(
                &platform,
                "b",
                "name    = \"motd\"",
                "name    = \"motd\"\n  display_name = \"Message\u{1b}[2J\"",
                &[],
            ),
            "\\u{1b}",
        ),
        (
            "preset name",
            variant(
                &platform,
                "c",
                "resource \"terraform_data\"",
                &format!("{preset}resource \"terraform_data\""),
                &[],
            ),
            "\\u{2066}",
        ),
        (
            "file name",
            variant(
                &platform,
                "d",
                "motd",
                "motd",
                &[("notes\u{202e}fdp.tf", "# hidden\n")],
            ),
            "\\u{202e}",
        ),
    ];
    for (what, dir, shown) in cases {
        let refused = platform.run(&["templates", "push", "hostile", "-d", &dir]);
        assert_eq!(refused.code, Some(1), "{what}: {refused}");
        assert_inert(&refused);
        assert!(refused.stderr.contains(shown), "{what}: {refused}");
    }
    // Nothing was stored.
    platform
        .run(&["templates", "versions", "list", "hostile"])
        .fails_with(1, &["not found"]);
    // The same template with plain names is pushed.
    let plain = variant(&platform, "e", "motd", "motd", &[("notes.tf", "# plain\n")]);
    platform
        .run(&["templates", "push", "hostile", "-d", &plain])
        .ok();
}
