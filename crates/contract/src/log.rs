//! A build log line's two typed fields, shared by everything that writes,
//! keeps or carries one: the runner (which writes them), the daemon wire
//! (where a daemon's are parsed), the store (which keeps them by name and
//! reads them back typed) and the API.
//!
//! The level is a closed set. The stage is the runner's word for the step
//! that wrote the line (`setup`, `init`, `plan`, `guard`, `quota`, `apply`,
//! `cleanup`): an open vocabulary of 1-32 printable ASCII characters, so
//! that a daemon's next step name is kept as said, never lost or guessed.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// How much a build log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub const ALL: [LogLevel; 4] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Warn,
        LogLevel::Error,
    ];

    /// Its name in the build log, the API and the daemon wire.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }

    /// The level named `name`; none for any other name.
    pub fn named(name: &str) -> Option<LogLevel> {
        LogLevel::ALL
            .into_iter()
            .find(|level| level.as_str() == name)
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A log level none of [`LogLevel`] names (cut at 64 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log level `{0}`: one of debug, info, warn, error")]
pub struct UnknownLogLevel(pub String);

impl FromStr for LogLevel {
    type Err = UnknownLogLevel;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        LogLevel::named(name).ok_or_else(|| UnknownLogLevel(name.chars().take(64).collect()))
    }
}

/// The step of a build that wrote a log line: 1-32 printable ASCII
/// characters, no spaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogStage(Cow<'static, str>);

/// The longest stage name.
pub const MAX_STAGE_CHARS: usize = 32;

/// A stage name that is empty, too long, or not printable ASCII (cut at
/// 64 characters, escaped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid log stage `{0}`: 1-{MAX_STAGE_CHARS} printable ASCII characters, no spaces")]
pub struct InvalidLogStage(pub String);

impl LogStage {
    /// Before Terraform: the work dir, the state lock, waiting.
    pub const SETUP: LogStage = LogStage(Cow::Borrowed("setup"));
    pub const INIT: LogStage = LogStage(Cow::Borrowed("init"));
    pub const PLAN: LogStage = LogStage(Cow::Borrowed("plan"));
    /// The guard's judgement of the plan.
    pub const GUARD: LogStage = LogStage(Cow::Borrowed("guard"));
    /// The plan's daily cost and the owner's budget.
    pub const QUOTA: LogStage = LogStage(Cow::Borrowed("quota"));
    /// Before the apply of a stop, restart or delete: the agents' shutdown
    /// scripts.
    pub const SHUTDOWN: LogStage = LogStage(Cow::Borrowed("shutdown"));
    pub const APPLY: LogStage = LogStage(Cow::Borrowed("apply"));
    /// After Terraform: the state stored, the lock given back, a cancel.
    pub const CLEANUP: LogStage = LogStage(Cow::Borrowed("cleanup"));

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LogStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for LogStage {
    type Err = InvalidLogStage;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let valid = !name.is_empty()
            && name.len() <= MAX_STAGE_CHARS
            && name.bytes().all(|byte| byte.is_ascii_graphic());
        if valid {
            Ok(LogStage(Cow::Owned(name.to_string())))
        } else {
            Err(InvalidLogStage(
                name.chars()
                    .take(64)
                    .collect::<String>()
                    .escape_debug()
                    .to_string(),
            ))
        }
    }
}

impl TryFrom<String> for LogStage {
    type Error = InvalidLogStage;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        name.parse()
    }
}

/// Both are said as their names (the API's log pages, the dashboard's).
impl serde::Serialize for LogLevel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl serde::Serialize for LogStage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Both are stored as their names; reading one that does not parse fails
/// the read, naming the value.
#[cfg(feature = "sqlx")]
mod stored {
    use super::{LogLevel, LogStage};

    crate::stored_as_text!(LogLevel);
    crate::stored_as_text!(LogStage);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn levels_are_read_back_by_name_and_nothing_else() {
        for level in LogLevel::ALL {
            assert_eq!(level.as_str().parse::<LogLevel>(), Ok(level));
        }
        for bad in ["", "INFO", "warning", " info", "info\n", "fatal"] {
            assert!(bad.parse::<LogLevel>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_runner_s_stages_are_valid_names() {
        for stage in [
            LogStage::SETUP,
            LogStage::INIT,
            LogStage::PLAN,
            LogStage::GUARD,
            LogStage::QUOTA,
            LogStage::APPLY,
            LogStage::CLEANUP,
        ] {
            assert_eq!(stage.as_str().parse::<LogStage>(), Ok(stage.clone()));
        }
    }

    #[test]
    fn stages_are_short_printable_words() {
        for good in ["setup", "plan", "apply_start", &"x".repeat(32)] {
            assert_eq!(good.parse::<LogStage>().unwrap().as_str(), good);
        }
        for bad in [
            String::new(),
            "x".repeat(33),
            "two words".into(),
            "tab\there".into(),
            "new\nline".into(),
            "\u{1b}[31m".into(),
            "étape".into(),
        ] {
            let error = bad.parse::<LogStage>().unwrap_err().to_string();
            assert!(error.starts_with("invalid log stage"), "{bad:?}: {error}");
            assert!(
                !error.contains('\n') && !error.contains('\u{1b}'),
                "{error}"
            );
        }
    }
}
