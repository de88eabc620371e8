//! The SQL stores' schema: numbered `.sql` files per backend (`phaseo-agent/migrations/`), applied
//! by sqlx's [`Migrator`] and recorded, with their checksums, in the table `phaseo_migrations`;
//! and the adoption of databases made before, which recorded their migrations in a table of their
//! own (`phaseo_schema`).
//!
//! The files are embedded with `include_str!` and the [`Migrator`] is built from them at run
//! time, rather than with `sqlx::migrate!`: that macro needs sqlx's `macros` feature (a
//! proc-macro crate and its dependencies in every user's build) for what three lines do here.
//!
//! Everything runs in one transaction the caller opened holding the database's write lock
//! (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: a transaction-scoped advisory lock), so two processes
//! opening one database at once migrate it once, and a migration that fails leaves nothing
//! behind. The migrator's own lock is off: on PostgreSQL it is a session lock, which a failed
//! migration would leave held on a pooled connection.

use sqlx::migrate::{Migrate, MigrateError, Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, Database, Executor, Row as _, SqlStr};

use crate::error::{DatabaseError, StoreError};
use crate::store::sql::checks::database;

/// The table sqlx records applied migrations in: a name of the store's own, so that an
/// application's own sqlx migrations in the same database (`_sqlx_migrations`) never mix with
/// the store's.
pub(crate) const TABLE: &str = "phaseo_migrations";

/// The version written into the previous bookkeeping (`phaseo_schema`) once a database's
/// migrations are recorded in [`TABLE`]: a release from before reads it as a schema newer than
/// its own and refuses the database (its `StoreError::SchemaTooNew`) rather than migrate it.
const HANDED_OVER: i64 = 1_000_000;

/// A backend's migrations: each one's version, description and SQL.
pub(crate) type Files = &'static [(i64, &'static str, &'static str)];

/// A migrator of `files`, its lock off (the caller holds the database's).
pub(crate) fn migrator(files: Files) -> Migrator {
    let migrations = files
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                (*description).into(),
                MigrationType::Simple,
                SqlStr::from_static(sql),
                false,
            )
        })
        .collect();
    let mut migrator = Migrator::with_migrations(migrations);
    migrator.dangerous_set_table_name(TABLE);
    migrator.set_locking(false);
    migrator
}

/// Brings the database of `conn` (in a transaction holding the write lock) up to `migrator`'s
/// newest migration: adopts a database of the previous bookkeeping, refuses one migrated by a
/// newer build ([`StoreError::SchemaTooNew`]), then applies what is missing.
pub(crate) async fn run<DB>(
    conn: &mut DB::Connection,
    migrator: &Migrator,
) -> Result<(), StoreError>
where
    DB: Database,
    DB::Connection: Migrate,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'r> i64: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    for<'r> &'r str: sqlx::ColumnIndex<DB::Row>,
{
    let newest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS phaseo_schema \
         (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)",
    )
    .execute(&mut *conn)
    .await
    .map_err(database)?;
    let recorded: Option<i64> = sqlx::raw_sql("SELECT MAX(version) AS v FROM phaseo_schema")
        .fetch_one(&mut *conn)
        .await
        .map_err(database)?
        .try_get("v")
        .map_err(database)?;
    conn.ensure_migrations_table(TABLE)
        .await
        .map_err(migrate_error)?;
    match recorded {
        Some(version) if version >= HANDED_OVER => {}
        Some(version) if version > newest => {
            return Err(StoreError::SchemaTooNew {
                found: version,
                supported: newest,
            });
        }
        _ => {
            // The previous bookkeeping applied every migration up to `version` (or none): they
            // are recorded as applied, with this build's checksums, without running them again.
            let applied = conn
                .list_applied_migrations(TABLE)
                .await
                .map_err(migrate_error)?;
            for migration in migrator.iter() {
                let done = recorded.is_some_and(|v| migration.version <= v);
                if done && !applied.iter().any(|a| a.version == migration.version) {
                    conn.skip(TABLE, migration).await.map_err(migrate_error)?;
                }
            }
            let handed_over = format!(
                "INSERT INTO phaseo_schema (version, applied_ms) VALUES ({HANDED_OVER}, {})",
                crate::store::backend::clock_ms()
            );
            sqlx::raw_sql(AssertSqlSafe(handed_over))
                .execute(&mut *conn)
                .await
                .map_err(database)?;
        }
    }
    let applied = conn
        .list_applied_migrations(TABLE)
        .await
        .map_err(migrate_error)?;
    if let Some(found) = applied.iter().map(|a| a.version).max()
        && found > newest
    {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: newest,
        });
    }
    migrator
        .run_direct(None, conn, false)
        .await
        .map_err(migrate_error)
}

/// The migrator's error, as the store's.
fn migrate_error(error: MigrateError) -> StoreError {
    match error {
        MigrateError::Execute(e) => database(e),
        other => StoreError::Database(DatabaseError::from_source(other)),
    }
}
