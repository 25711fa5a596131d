//! Why a storage operation failed, in a module that names no sibling:
//! [`StoreError`] and the errors it carries (a list's [`BadCursor`], a
//! stored value's [`Corrupt`]), and the one mapping from the driver's errors
//! to them ([`db_error`], [`returned_row`], [`migration_error`]). Every
//! domain's queries and both backends report through it.

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thing looked up does not exist (`what` names it: "workspace", "build").
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A uniqueness rule refused the write (`what` names the rule).
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// A list's `after` was not a cursor this list handed out.
    #[error(transparent)]
    BadCursor(#[from] BadCursor),
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// The database was migrated by a newer release: nothing was changed.
    #[error(
        "the database's schema is at migration {database}, newer than this abode's \
         (migration {binary}): restore a backup or run the newer release"
    )]
    NewerSchema { database: i64, binary: i64 },
    /// A stored value that does not read as its type: the row is left as it
    /// is and the read fails, naming the value and its row.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    #[error("cannot prepare the database file or directory {path}: {source}")]
    Directory {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Whether trying again later may succeed: the database could not be
    /// reached or could not write now (a restart, a full disk, a lock held
    /// too long), as opposed to refusing what was asked.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Database(error) => match error {
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_) => true,
                sqlx::Error::Database(db) => db.code().is_some_and(|code| transient_code(&code)),
                _ => false,
            },
            _ => false,
        }
    }
}

impl StoreError {
    /// Whether the database could not write because its disk is full
    /// (SQLite's `SQLITE_FULL`, PostgreSQL's `disk_full`).
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => db.code().is_some_and(|code| {
                code == "53100"
                    || (code.len() < 5 && code.parse::<i64>().is_ok_and(|c| c & 0xff == 13))
            }),
            _ => false,
        }
    }
}

/// SQLite's result codes (numbers: busy, locked, I/O error, full, cannot
/// open) and PostgreSQL's SQLSTATE classes (connection, resources, operator
/// intervention, system error, transaction rollback) that pass.
fn transient_code(code: &str) -> bool {
    // A SQLSTATE is five characters; SQLite's codes have at most four digits.
    if code.len() == 5 {
        return ["08", "40", "53", "57", "58"]
            .iter()
            .any(|class| code.starts_with(class));
    }
    code.parse::<i64>()
        .is_ok_and(|sqlite| matches!(sqlite & 0xff, 5 | 6 | 10 | 13 | 14))
}

/// A migration refused because the database has one this binary does not
/// know is a newer release's schema; sqlx checks that before it applies
/// anything.
pub(crate) fn migration_error(
    migrator: &sqlx::migrate::Migrator,
    error: sqlx::migrate::MigrateError,
) -> StoreError {
    match error {
        sqlx::migrate::MigrateError::VersionMissing(database) => StoreError::NewerSchema {
            database,
            binary: migrator.iter().map(|m| m.version).max().unwrap_or(0),
        },
        other => StoreError::Migrate(other),
    }
}

/// The one row a write's `RETURNING` gives, read with `fetch_all`: SQLite
/// commits a statement outside a transaction only when it has run to its
/// end, and a `fetch_one` stops at the first row, so a commit that fails (a
/// full disk) would go unseen and the write be lost while reported done.
/// `NotFound(what)` when it returned no row.
pub(crate) fn returned_row<T>(rows: Vec<T>, what: &'static str) -> Result<T, StoreError> {
    rows.into_iter().next().ok_or(StoreError::NotFound(what))
}

/// The one mapping from driver errors to typed errors: a missing row becomes
/// `NotFound(what)`, a violated unique index becomes `Conflict(what)`, and a
/// row whose stored value did not read as its type `Corrupt`.
pub(crate) fn db_error(what: &'static str) -> impl Fn(sqlx::Error) -> StoreError {
    move |error| match error {
        sqlx::Error::RowNotFound => StoreError::NotFound(what),
        sqlx::Error::Database(ref db) if db.is_unique_violation() => StoreError::Conflict(what),
        sqlx::Error::Decode(source) => match source.downcast::<Corrupt>() {
            Ok(corrupt) => StoreError::Corrupt(*corrupt),
            Err(other) => StoreError::Database(sqlx::Error::Decode(other)),
        },
        other => StoreError::Database(other),
    }
}

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
    /// [`StoreError::Corrupt`].
    fn from(corrupt: Corrupt) -> sqlx::Error {
        sqlx::Error::Decode(Box::new(corrupt))
    }
}

/// A cursor this server did not hand out (or that belongs to another list).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor: pass back the `next` of the previous page unchanged")]
pub struct BadCursor;

#[cfg(test)]
mod tests {
    use super::transient_code;

    #[test]
    fn only_codes_that_pass_are_transient() {
        // (code, transient): SQLite result codes (extended ones included)
        // and PostgreSQL SQLSTATEs.
        let cases = [
            ("5", true),     // SQLITE_BUSY
            ("13", true),    // SQLITE_FULL
            ("778", true),   // SQLITE_IOERR_WRITE
            ("2067", false), // SQLITE_CONSTRAINT_UNIQUE
            ("19", false),   // SQLITE_CONSTRAINT
            ("08006", true), // connection failure
            ("53100", true), // disk full
            ("57P01", true), // admin shutdown
            ("40001", true), // serialization failure
            ("23505", false),
            ("22021", false), // a character the encoding does not take (NUL)
            ("", false),
        ];
        for (code, transient) in cases {
            assert_eq!(transient_code(code), transient, "{code:?}");
        }
    }
}
