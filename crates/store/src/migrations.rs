//! The schema's migrations, embedded at build time (`build.rs`) and run by
//! sqlx as its `migrate!` would: the same versions, descriptions and
//! checksums (a test reads the directories with sqlx's own reader and
//! compares), without compiling sqlx's proc macros into every build.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use crate::error::StoreError;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// One backend's migrations: each file's name and text, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Embedded(&'static [(&'static str, &'static str)]);

pub(crate) const SQLITE: Embedded = Embedded(embedded::SQLITE);
pub(crate) const POSTGRES: Embedded = Embedded(embedded::POSTGRES);

impl Embedded {
    /// Each migration as sqlx reads a `VERSION_DESCRIPTION.sql` file (the
    /// build checked every name).
    fn migrations(self) -> Vec<Migration> {
        self.0
            .iter()
            .filter_map(|(file, sql)| {
                let (version, rest) = file.split_once('_')?;
                Some(Migration::new(
                    version.parse().ok()?,
                    Cow::Owned(rest.trim_end_matches(".sql").replace('_', " ")),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    sql.starts_with("-- no-transaction"),
                ))
            })
            .collect()
    }

    /// The newest migration's version.
    pub(crate) fn newest(self) -> i64 {
        self.migrations()
            .iter()
            .map(|migration| migration.version)
            .max()
            .unwrap_or(0)
    }

    pub(crate) async fn migrator(self) -> Result<Migrator, StoreError> {
        Migrator::new(self).await.map_err(StoreError::Migrate)
    }
}

impl MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        Box::pin(async move { Ok(self.migrations()) })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The oracle is sqlx's own reading of the directories.
    #[tokio::test]
    async fn the_embedded_migrations_are_what_sqlx_reads_from_the_directories() {
        for (embedded, dir) in [
            (SQLITE, "migrations/sqlite"),
            (POSTGRES, "migrations/postgres"),
        ] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            let read = Migrator::new(dir.as_path()).await.unwrap();
            let ours = embedded.migrator().await.unwrap();
            let facts = |migrator: &Migrator| {
                migrator
                    .iter()
                    .map(|m| {
                        (
                            m.version,
                            m.description.to_string(),
                            m.checksum.to_vec(),
                            m.no_tx,
                            m.migration_type,
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert!(read.iter().count() > 40);
            assert_eq!(facts(&ours), facts(&read), "{}", dir.display());
            assert_eq!(
                embedded.newest(),
                read.iter().map(|m| m.version).max().unwrap()
            );
        }
    }
}
