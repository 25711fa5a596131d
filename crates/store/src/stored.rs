//! Values the store keeps as JSON text and hands out as types, read once
//! here: a stored value that does not read as its type is an error naming
//! it and its row ([`Corrupt`]), never a default.

use abode_guard::Report;

/// A stored value that does not read as its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the stored {what} of {of} is unreadable: {reason}")]
pub struct Corrupt {
    /// The value, e.g. `guard report`.
    pub what: &'static str,
    /// Its row, e.g. `build 0d6c...`.
    pub of: String,
    /// Why it does not read.
    pub reason: String,
}

impl From<Corrupt> for sqlx::Error {
    /// A row mapping's error: `db_error` turns it back into
    /// [`crate::StoreError::Corrupt`].
    fn from(corrupt: Corrupt) -> sqlx::Error {
        sqlx::Error::Decode(Box::new(corrupt))
    }
}

/// A build's guard report (`builds.guard_report`, the guard's JSON report).
pub(crate) fn guard_report(
    build_id: &str,
    text: Option<String>,
) -> Result<Option<Report>, Corrupt> {
    text.map(|text| {
        serde_json::from_str(&text).map_err(|error| Corrupt {
            what: "guard report",
            of: format!("build {build_id}"),
            reason: error.to_string(),
        })
    })
    .transpose()
}

/// A guard report as it is stored: the guard's JSON report, as
/// `abode plan check --format json` prints it.
pub(crate) fn guard_report_text(report: &Report) -> String {
    report.to_json()
}
