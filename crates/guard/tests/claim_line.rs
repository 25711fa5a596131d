//! The line that names each change of a claim build, for every action a claim
//! can list: the text report and the build log print it, so its shape is a
//! contract (`-/+ ADDRESS (replaced on claim: PATH, PATH)`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{Action, ClaimReplacement};

#[test]
fn each_action_has_its_line() {
    for (action, paths, line) in [
        (
            Action::Replace,
            &["name", "labels.owner"][..],
            "-/+ x.home (replaced on claim: name, labels.owner)",
        ),
        (Action::Replace, &[][..], "-/+ x.home (replaced on claim)"),
        (
            Action::ReplaceCreateBeforeDestroy,
            &["name"][..],
            "+/- x.home (replaced on claim: name)",
        ),
        (Action::Delete, &[][..], "  - x.home (deleted on claim)"),
        (
            Action::Create,
            &[][..],
            "  + x.home (created again on claim, empty)",
        ),
        (Action::Unknown, &[][..], "  - x.home (destroyed on claim)"),
    ] {
        let change = ClaimReplacement {
            address: "x.home".into(),
            action,
            replace_paths: paths.iter().map(|p| p.to_string()).collect(),
            reason: "because".into(),
            protected: true,
        };
        assert_eq!(change.line(), line, "{action:?}");
        // A stored report's entries read back as they were written.
        let json = serde_json::to_string(&change).unwrap();
        assert_eq!(
            serde_json::from_str::<ClaimReplacement>(&json).unwrap(),
            change
        );
    }
}
