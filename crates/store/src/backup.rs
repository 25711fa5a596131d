//! Backups of a SQLite data dir, and the check of a database before a
//! server is started on it.
//!
//! A copy of `abode.db` alone, taken while the server writes, can miss what
//! is still in the WAL; a backup here is SQLite's own consistent snapshot
//! (`VACUUM INTO`), taken through a read-only connection while builds run,
//! written to a file beside the destination and renamed into place only
//! when whole, with its SHA-256. The check opens a database read-only and
//! never migrates it: integrity, the schema's migration against this
//! binary's, every workspace's state readable. On PostgreSQL, backups are
//! `pg_dump`'s (docs/deployment.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::SqlitePool;

/// Why a backup or a check could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("no database at {0}: is this a server's data dir (SQLite)?")]
    NoDatabase(PathBuf),
    #[error("{0} exists already: a backup never overwrites a file")]
    Exists(PathBuf),
    #[error("cannot open the database {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot copy the database to {path}: {source}")]
    Copy {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the database {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
}

/// A finished backup.
#[derive(Debug, Clone)]
pub struct Backup {
    pub file: PathBuf,
    /// The SHA-256 of the file, hex.
    pub sha256: String,
    /// Where the digest was written (`FILE.sha256`, `sha256sum -c` reads it).
    pub digest_file: PathBuf,
    pub bytes: u64,
}

/// What a check found.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// SQLite's `integrity_check`: `["ok"]` when whole.
    pub integrity: Vec<String>,
    /// The newest migration applied to the database.
    pub schema: i64,
    /// The newest migration this binary knows.
    pub binary_schema: i64,
    pub workspaces: u64,
    /// Stored states that parse as Terraform states.
    pub readable_states: u64,
    /// Workspaces whose stored state does not.
    pub unreadable_states: Vec<String>,
}

impl CheckReport {
    /// Everything a server started on this database would trip over, one
    /// line each; empty when it passes.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.integrity != ["ok"] {
            problems.push(format!(
                "the database is damaged: {}",
                self.integrity.join("; ")
            ));
        }
        if self.schema > self.binary_schema {
            problems.push(format!(
                "the database's schema is at migration {}, newer than this abode's (migration {}): use the newer release",
                self.schema, self.binary_schema
            ));
        }
        for workspace in &self.unreadable_states {
            problems.push(format!(
                "the stored state of workspace {workspace} is not a Terraform state"
            ));
        }
        problems
    }
}

async fn open_read_only(database: &Path) -> Result<SqlitePool, BackupError> {
    if !database.is_file() {
        return Err(BackupError::NoDatabase(database.to_path_buf()));
    }
    let options = SqliteConnectOptions::new()
        .filename(database)
        .read_only(true)
        .create_if_missing(false)
        .busy_timeout(Duration::from_secs(30));
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(|source| BackupError::Open {
            path: database.to_path_buf(),
            source,
        })
}

/// Copies the SQLite database at `database` into `to`, consistently, while
/// a server may be writing it.
pub async fn backup_sqlite(database: &Path, to: &Path) -> Result<Backup, BackupError> {
    if to.exists() {
        return Err(BackupError::Exists(to.to_path_buf()));
    }
    let pool = open_read_only(database).await?;
    let partial = partial_name(to);
    let _ = std::fs::remove_file(&partial);
    let copied = sqlx::query("VACUUM INTO ?")
        .bind(partial.display().to_string())
        .execute(&pool)
        .await;
    pool.close().await;
    if let Err(source) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(BackupError::Copy {
            path: to.to_path_buf(),
            source,
        });
    }
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BackupError::Write { path, source }
    };
    // Streamed: a database can be bigger than the memory at hand.
    let mut hasher = Sha256::new();
    let bytes = std::fs::File::open(&partial)
        .and_then(|mut file| {
            let bytes = std::io::copy(&mut file, &mut hasher)?;
            file.sync_all()?;
            Ok(bytes)
        })
        .map_err(write_error(&partial))?;
    let sha256 = hex::encode(hasher.finalize());
    std::fs::rename(&partial, to).map_err(write_error(to))?;
    let digest_file = PathBuf::from(format!("{}.sha256", to.display()));
    let name = to.file_name().map_or_else(
        || to.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut digest = std::fs::File::create(&digest_file).map_err(write_error(&digest_file))?;
    digest
        .write_all(format!("{sha256}  {name}\n").as_bytes())
        .and_then(|()| digest.sync_all())
        .map_err(write_error(&digest_file))?;
    Ok(Backup {
        file: to.to_path_buf(),
        sha256,
        digest_file,
        bytes,
    })
}

fn partial_name(to: &Path) -> PathBuf {
    PathBuf::from(format!("{}.partial", to.display()))
}

/// Checks the SQLite database at `database` without changing it.
pub async fn check_sqlite(database: &Path) -> Result<CheckReport, BackupError> {
    let pool = open_read_only(database).await?;
    let read = |source| BackupError::Read {
        path: database.to_path_buf(),
        source,
    };
    let integrity: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&pool)
        .await
        .map_err(read)?;
    let schema: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&pool)
            .await
            .map_err(read)?;
    let workspaces: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM workspaces")
        .fetch_one(&pool)
        .await
        .map_err(read)?;
    let states: Vec<(String, Vec<u8>)> = sqlx::query_as(
        "SELECT w.name, s.state FROM workspace_states s JOIN workspaces w ON w.id = s.workspace_id",
    )
    .fetch_all(&pool)
    .await
    .map_err(read)?;
    pool.close().await;
    let mut report = CheckReport {
        integrity,
        schema: schema.unwrap_or(0),
        binary_schema: crate::sqlite::newest_migration(),
        workspaces: u64::try_from(workspaces).unwrap_or(0),
        readable_states: 0,
        unreadable_states: Vec::new(),
    };
    for (workspace, state) in states {
        if is_terraform_state(&state) {
            report.readable_states += 1;
        } else {
            report.unreadable_states.push(workspace);
        }
    }
    Ok(report)
}

/// A Terraform state: a JSON object with a numeric `version` and a
/// `resources` list.
fn is_terraform_state(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|state| {
        state.get("version").is_some_and(serde_json::Value::is_u64)
            && state
                .get("resources")
                .is_some_and(serde_json::Value::is_array)
    })
}

#[cfg(test)]
mod tests {
    use super::is_terraform_state;

    #[test]
    fn only_terraform_states_read_as_states() {
        let cases: &[(&[u8], bool)] = &[
            (br#"{"version":4,"resources":[]}"#, true),
            (br#"{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"x","outputs":{},"resources":[{"mode":"managed"}]}"#, true),
            (br#"{"version":"4","resources":[]}"#, false),
            (br#"{"version":4}"#, false),
            (b"[]", false),
            (b"", false),
            (b"\xff\xfe", false),
        ];
        for (bytes, state) in cases {
            assert_eq!(
                is_terraform_state(bytes),
                *state,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}
