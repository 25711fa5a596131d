//! The enums of the wire, each spelled as its JSON string: a build's
//! transition and status. Both are the contract's vocabulary, the same types
//! the store keeps in its columns (and a transition is also an environment
//! variable): the wire says them by name and defines none of its own.

/// A string that is none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}`")]
pub struct UnknownValue {
    pub what: &'static str,
    pub value: String,
}

/// Which run of a workspace a build is: `start`, `stop` or `delete`; the
/// contract's, so that the wire, the store and a build's environment say it
/// with one type.
pub use abode_contract::Transition;

/// Where a build is in its life: the contract's, spelled on the wire as
/// in its column (`"awaiting_confirmation"`).
pub use abode_contract::{BuildStatus, UnknownBuildStatus};

/// Which template version a build plans (current, active, a number): the
/// contract's one name for an update from the CLI to the store; a build
/// request says it as `update` and `template_version`.
pub use abode_contract::VersionChoice;

#[cfg(test)]
mod tests {
    use super::{BuildStatus, Transition};

    #[test]
    fn enums_are_their_json_strings() {
        for status in [
            BuildStatus::Pending,
            BuildStatus::Running,
            BuildStatus::AwaitingConfirmation,
            BuildStatus::Succeeded,
            BuildStatus::Failed,
            BuildStatus::Canceled,
        ] {
            let json = serde_json::to_string(&status).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
            assert_eq!(status.as_str().parse(), Ok(status));
        }
        for transition in [Transition::Start, Transition::Stop, Transition::Delete] {
            let json = serde_json::to_string(&transition).unwrap_or_default();
            assert_eq!(json, format!("\"{transition}\""));
            assert_eq!(transition.as_str().parse(), Ok(transition));
        }
        assert!("update".parse::<Transition>().is_err());
    }
}
