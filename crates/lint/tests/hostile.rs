//! Inputs no template should have: each gives a report or one clear error,
//! never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_lint::{lint_files, LintError, Options, SourceFile};

fn lint(files: &[(&str, &str)]) -> Result<abode_lint::Report, LintError> {
    let files: Vec<SourceFile> = files.iter().map(|(p, t)| SourceFile::new(*p, *t)).collect();
    lint_files(&files, &Options::default())
}

#[test]
fn syntax_errors_are_one_line_with_a_position() {
    let cases = [
        "resource \"abode_volume\" \"a\" {\n  name = \n}\n",
        "resource {",
        "\u{0}\u{1}\u{2}",
        "x = \"unterminated",
        "x = <<EOT\nno end\n",
        "resource \"a\" \"b\" { x = ${} }",
        &"(".repeat(10_000),
        &format!("x = {}", "[".repeat(5_000)),
        &format!("x = {}1", "1 + ".repeat(5_000)),
    ];
    for text in cases {
        match lint(&[("main.tf", text)]) {
            Err(error @ LintError::Syntax { .. }) => {
                let line = error.to_string();
                assert!(line.starts_with("main.tf:"), "{line}");
                assert!(!line.contains('\n'), "{line}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn odd_but_valid_inputs_are_linted() {
    let cases: &[&[(&str, &str)]] = &[
        &[("main.tf", "")],
        &[("main.tf", "# only a comment\n")],
        // A module that calls itself, and one that climbs out of the template.
        &[("main.tf", "module \"me\" {\n  source = \"./\"\n}\nmodule \"out\" {\n  source = \"../../etc\"\n}\n")],
        // A module folder without files, a registry module.
        &[("main.tf", "module \"a\" {\n  source = \"./nothing\"\n}\nmodule \"b\" {\n  source = \"abode/x/y\"\n}\n")],
        // Locals that refer to each other in a cycle.
        &[("main.tf", "locals {\n  a = local.b\n  b = local.a\n}\nresource \"abode_volume\" \"v\" {\n  name = local.a\n}\n")],
        // Files only in a subfolder: no root module.
        &[("modules/x/main.tf", "resource \"abode_volume\" \"v\" {\n  name = \"v\"\n}\n")],
        // A long traversal.
        &[("main.tf", &format!("x = a{}\n", ".b".repeat(20_000)))],
    ];
    for files in cases {
        assert!(lint(files).is_ok(), "{files:?}");
    }
}

/// A chain of locals far deeper than any template's is refused in one line,
/// not followed down a stack that could overflow; a modest one is followed.
#[test]
fn reference_chains_are_bounded() {
    let chain = |n: usize| {
        let mut text = String::from("data \"abode_workspace_owner\" \"me\" {}\nlocals {\n  l0 = data.abode_workspace_owner.me.name\n");
        for i in 1..n {
            text.push_str(&format!("  l{i} = local.l{}\n", i - 1));
        }
        text.push_str(&format!(
            "}}\nresource \"abode_volume\" \"v\" {{\n  name = local.l{}\n}}\n",
            n - 1
        ));
        text
    };
    let report = lint(&[("main.tf", &chain(100))]).unwrap();
    assert_eq!(report.errors, 1, "{report}");
    let error = lint(&[("main.tf", &chain(50_000))]).unwrap_err();
    assert!(matches!(error, LintError::TooDeep(_)), "{error}");
    assert!(!error.to_string().contains('\n'));
}

/// Module calls that multiply (each folder calling the next one ten times,
/// sixteen deep) are refused in one line instead of read for ever; a
/// template of a few modules called a few times each is read.
#[test]
fn module_instances_are_bounded() {
    let fan_out = |calls: usize, depth: usize| {
        let mut files = Vec::new();
        for level in 0..depth {
            let dir = if level == 0 {
                String::new()
            } else {
                format!("m{level}/")
            };
            let mut text = String::from("resource \"abode_volume\" \"v\" {\n  name = \"v\"\n}\n");
            if level + 1 < depth {
                let up = if level == 0 { "./" } else { "../" };
                for call in 0..calls {
                    text.push_str(&format!(
                        "module \"c{call}\" {{\n  source = \"{up}m{}\"\n}}\n",
                        level + 1
                    ));
                }
            }
            files.push((format!("{dir}main.tf"), text));
        }
        files
    };
    let small = fan_out(3, 4);
    let small: Vec<(&str, &str)> = small
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let report = lint(&small).unwrap();
    // 1 + 3 + 9 + 27 instances, each with an unprotected volume.
    assert_eq!(report.warnings, 40, "{report}");
    let huge = fan_out(10, 16);
    let huge: Vec<(&str, &str)> = huge.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let error = lint(&huge).unwrap_err();
    assert!(matches!(error, LintError::TooManyModules(_)), "{error}");
}

#[test]
fn a_folder_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("main.tf");
    std::fs::write(&file, "").unwrap();
    let error = abode_lint::lint_dir(&file, &Options::default()).unwrap_err();
    assert!(error.to_string().ends_with("is not a folder"), "{error}");
    let empty = tempfile::tempdir().unwrap();
    let error = abode_lint::lint_dir(empty.path(), &Options::default()).unwrap_err();
    assert!(error.to_string().ends_with("holds no .tf files"), "{error}");
    std::fs::write(empty.path().join("bad.tf"), [0xff, 0xfe, 0x00]).unwrap();
    let error = abode_lint::lint_dir(empty.path(), &Options::default()).unwrap_err();
    assert_eq!(error.to_string(), "bad.tf is not UTF-8 text");
}

#[test]
fn persistent_type_specs_are_checked() {
    let mut types = abode_lint::PersistentTypes::default();
    for bad in ["", "a b", "x=", "x=a b", "x=,,", "=name", "x=a..b"] {
        assert!(types.add(bad).is_err(), "{bad:?}");
    }
    for good in ["lxc_disk", "my_disk=name,spec.size", " y = a , b "] {
        types.add(good).unwrap();
    }
    assert_eq!(types.identity("lxc_disk").unwrap(), ["name"]);
    assert_eq!(types.identity("my_disk").unwrap(), ["name", "spec.size"]);
    assert_eq!(types.identity("y").unwrap(), ["a", "b"]);
}
