//! The enums of the wire, each spelled as its JSON string: a build's
//! transition and status. The server's domain has its own (a transition is
//! also a column and an environment variable); these are what the API says.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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

/// Where a build is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    Pending,
    Running,
    /// The guard held the plan: a person confirms (or cancels) it.
    AwaitingConfirmation,
    Succeeded,
    Failed,
    Canceled,
}

impl BuildStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Pending => "pending",
            BuildStatus::Running => "running",
            BuildStatus::AwaitingConfirmation => "awaiting_confirmation",
            BuildStatus::Succeeded => "succeeded",
            BuildStatus::Failed => "failed",
            BuildStatus::Canceled => "canceled",
        }
    }

    /// After it nothing more happens (or a person must act).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            BuildStatus::Succeeded
                | BuildStatus::Failed
                | BuildStatus::Canceled
                | BuildStatus::AwaitingConfirmation
        )
    }
}

impl fmt::Display for BuildStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BuildStatus {
    type Err = UnknownValue;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        [
            BuildStatus::Pending,
            BuildStatus::Running,
            BuildStatus::AwaitingConfirmation,
            BuildStatus::Succeeded,
            BuildStatus::Failed,
            BuildStatus::Canceled,
        ]
        .into_iter()
        .find(|status| status.as_str() == value)
        .ok_or_else(|| UnknownValue {
            what: "build status",
            value: value.to_string(),
        })
    }
}

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
